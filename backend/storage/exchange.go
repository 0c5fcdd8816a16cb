package storage

import (
	"context"

	"github.com/rookerydb/rookery/backend/changevector"
)

// Exchange copies to "to" everything of "from" that it has not accepted
// yet, the way a replication loop does but in-process: changes in etag
// order after the last accepted etag, leaving out items already merged into
// the destination's database vector (as the sender does), batch items per
// transaction. Tests and tools use it to build copies that diverged; it
// returns the outcomes (left-out items count as Skipped).
func Exchange(ctx context.Context, from, to *DB, batch int) (map[Outcome]int, error) {
	out := map[Outcome]int{}
	for {
		var after int64
		err := to.Write(ctx, func(tx *Tx) error {
			var err error
			after, err = tx.SourceEtag(from.DatabaseID())
			return err
		})
		if err != nil {
			return out, err
		}
		items, err := from.ChangesAfter(ctx, after, batch)
		if err != nil || len(items) == 0 {
			return out, err
		}
		dest, _ := changevector.ParseStored(to.ChangeVector())
		err = to.Write(ctx, func(tx *Tx) error {
			for _, it := range items {
				if it.Skippable(dest) {
					out[Skipped]++
					continue
				}
				o, err := tx.ApplyReplicated(it)
				if err != nil {
					return err
				}
				out[o]++
			}
			return tx.SetSourceEtag(from.DatabaseID(), items[len(items)-1].Etag)
		})
		if err != nil {
			return out, err
		}
	}
}
