package conflicts

import (
	"context"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

// RestoreVersion writes version i of resolution log entry seq back as the
// document's current version, on behalf of by: a normal local write, which
// replicates, and which resolves the id if it is in conflict again. The
// API's restore endpoint and the studio's resolution log both restore
// through it.
func RestoreVersion(ctx context.Context, db *storage.DB, seq int64, i int, by string) (storage.Info, error) {
	e, err := db.Resolution(ctx, seq)
	if err != nil {
		return storage.Info{}, err
	}
	if i < 0 || i >= len(e.Versions) {
		return storage.Info{}, dberr.New(dberr.BadRequest, "entry %d has versions 0 to %d", seq, len(e.Versions)-1)
	}
	v := e.Versions[i]
	var info storage.Info
	err = db.Write(ctx, func(tx *storage.Tx) error {
		tx.SetActor(by)
		if v.Tombstone {
			var err error
			info, _, err = tx.Delete(e.ID, nil)
			return err
		}
		// The logged body is the stored form already.
		var err error
		info, err = tx.Put(e.ID, document.Parsed{Body: v.Body, Collection: e.Collection}, nil)
		return err
	})
	return info, err
}
