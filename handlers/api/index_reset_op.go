package api

import (
	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/storage"
)

// KindIndexReset is the operation that follows an index's rebuild after a
// reset (index.FollowReset).
const KindIndexReset = index.KindResetOperation

// followIndexReset registers the rebuild of a reset index as an operation
// (index.FollowReset).
func (a *API) followIndexReset(db *storage.DB, ix *index.Index) {
	if a.Operations == nil {
		return
	}
	if _, err := index.FollowReset(a.Operations, db.Name(), db.LastEtag(), ix); err != nil && a.Log != nil {
		a.Log.Warn("could not register the index reset operation", "index", ix.Definition().Name, "error", err)
	}
}
