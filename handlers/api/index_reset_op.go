package api

import (
	"context"
	"fmt"
	"time"

	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/operations"
	"github.com/rookerydb/rookery/backend/storage"
)

// KindIndexReset is the operation that follows an index's rebuild after a
// reset, until it has caught up with the documents written before it.
const KindIndexReset = "IndexReset"

// followIndexReset registers the rebuild of a reset index as an operation
// (listed with the database's operations and in the studio's running
// operations; readable in /operations/state once it ends), reporting
// {Processed, Total}: the index's last indexed etag and the database's last
// etag at the reset. Killing it stops the rebuild: the index is paused on
// this node (Index.Pause: the transaction in flight rolls back, the reason
// names the killed operation and shows in the index's stats and stale
// reasons) until POST /admin/indexes/start, the studio's Resume, or another
// reset; the operation ends Canceled. A node shutting down cancels it
// without pausing the index (the rebuild continues after the restart).
func (a *API) followIndexReset(db *storage.DB, ix *index.Index) {
	if a.Operations == nil {
		return
	}
	cutoff := db.LastEtag()
	name := ix.Definition().Name
	_, err := a.Operations.Start(db.Name(), 0, KindIndexReset, "rebuild of index "+name, true, func(ctx context.Context, p *operations.Progress) (any, error) {
		for {
			p.Set(map[string]any{"Processed": ix.LastIndexedEtag(), "Total": cutoff})
			step, cancel := context.WithTimeout(ctx, time.Second)
			err := ix.WaitNonStale(step, cutoff)
			cancel()
			if err == nil {
				return map[string]any{"Message": fmt.Sprintf("Index '%s' was rebuilt up to etag %d.", name, cutoff)}, nil
			}
			if ctx.Err() != nil {
				if operations.Killed(ctx) {
					reason := fmt.Sprintf("the rebuild after a reset was stopped: operation %d (%s) was killed. Resume indexing, or reset the index again, to continue.", p.ID(), KindIndexReset)
					if err := ix.Pause(reason); err != nil && a.Log != nil {
						a.Log.Warn("could not pause the index of a killed reset", "index", name, "error", err)
					}
					p.Set(map[string]any{"Processed": ix.LastIndexedEtag(), "Total": cutoff})
				}
				return nil, ctx.Err()
			}
			if step.Err() == nil {
				return nil, err
			}
		}
	})
	if err != nil && a.Log != nil {
		a.Log.Warn("could not register the index reset operation", "index", name, "error", err)
	}
}
