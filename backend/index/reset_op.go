package index

import (
	"context"
	"fmt"
	"time"

	"github.com/rookerydb/rookery/backend/operations"
)

// KindResetOperation is the operation that follows an index's rebuild
// after a reset, until it has caught up with the documents written before
// it.
const KindResetOperation = "IndexReset"

// FollowReset registers the rebuild of a just-reset index as an operation
// of reg (listed with the database's operations and in the studio's
// running operations; readable in /operations/state once it ends),
// reporting {Processed, Total}: the index's last indexed etag and lastEtag,
// the database's last etag at the reset. Killing it stops the rebuild: the
// index is paused on this node (Index.Pause: the transaction in flight
// rolls back, the reason names the killed operation and shows in the
// index's stats and stale reasons) until POST /admin/indexes/start, the
// studio's Resume, or another reset; the operation ends Canceled. A node
// shutting down cancels it without pausing the index (the rebuild
// continues after the restart). Both the API's RESET /indexes and the
// studio's Reset call it.
func FollowReset(reg *operations.Registry, database string, lastEtag int64, ix *Index) (int64, error) {
	name := ix.Definition().Name
	return reg.Start(database, 0, KindResetOperation, "rebuild of index "+name, true, func(ctx context.Context, p *operations.Progress) (any, error) {
		for {
			p.Set(map[string]any{"Processed": ix.LastIndexedEtag(), "Total": lastEtag})
			step, cancel := context.WithTimeout(ctx, time.Second)
			err := ix.WaitNonStale(step, lastEtag)
			cancel()
			if err == nil {
				return map[string]any{"Message": fmt.Sprintf("Index '%s' was rebuilt up to etag %d.", name, lastEtag)}, nil
			}
			if ctx.Err() != nil {
				if operations.Killed(ctx) {
					reason := fmt.Sprintf("the rebuild after a reset was stopped: operation %d (%s) was killed. Resume indexing, or reset the index again, to continue.", p.ID(), KindResetOperation)
					if err := ix.Pause(reason); err != nil {
						ix.log.Warn("could not pause the index of a killed reset", "index", name, "error", err)
					}
					p.Set(map[string]any{"Processed": ix.LastIndexedEtag(), "Total": lastEtag})
				}
				return nil, ctx.Err()
			}
			if step.Err() == nil {
				return nil, err
			}
		}
	})
}
