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
// operations; readable in /operations/state once it ends). The reset
// itself is done: the operation only reports the rebuild's progress, so it
// cannot be killed.
func (a *API) followIndexReset(db *storage.DB, ix *index.Index) {
	if a.Operations == nil {
		return
	}
	cutoff := db.LastEtag()
	name := ix.Definition().Name
	_, err := a.Operations.Start(db.Name(), 0, KindIndexReset, "rebuild of index "+name, false, func(ctx context.Context, p *operations.Progress) (any, error) {
		for {
			p.Set(map[string]any{"Processed": ix.LastIndexedEtag(), "Total": cutoff})
			step, cancel := context.WithTimeout(ctx, time.Second)
			err := ix.WaitNonStale(step, cutoff)
			cancel()
			if err == nil {
				return map[string]any{"Message": fmt.Sprintf("Index '%s' was rebuilt up to etag %d.", name, cutoff)}, nil
			}
			if ctx.Err() != nil || step.Err() == nil {
				return nil, err
			}
		}
	})
	if err != nil && a.Log != nil {
		a.Log.Warn("could not register the index reset operation", "index", name, "error", err)
	}
}
