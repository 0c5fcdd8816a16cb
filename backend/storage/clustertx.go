package storage

import (
	"time"

	"github.com/rookerydb/rookery/backend/changevector"
)

// Cluster transactions (backend/cluster, "Compare-exchange and cluster
// transactions" in its DESIGN.md) are applied by every copy of a database
// in log order. Each document version gets the vector of the local version
// merged with the transaction's RAFT entry, so copies that agreed before
// agree after; a copy that already has the version (it came by
// replication first) skips it. The last applied log index is kept in
// replication_sources under ClusterTxSource, in the same transaction.

// ClusterTxSource is the replication_sources row of the last applied
// cluster transaction.
const ClusterTxSource = "RAFT"

// ClusterTxApplied is the log index of the last cluster transaction this
// copy applied.
func (tx *Tx) ClusterTxApplied() (uint64, error) {
	v, err := tx.SourceEtag(ClusterTxSource)
	return uint64(v), err
}

// SetClusterTxApplied records the last applied cluster transaction.
func (tx *Tx) SetClusterTxApplied(index uint64) error {
	return tx.SetSourceEtag(ClusterTxSource, int64(index))
}

// WriteClusterVersion writes one document (or, with del, a tombstone) of a
// cluster transaction whose vector entry is entry, stamped lm. It returns
// the version's change vector.
func (tx *Tx) WriteClusterVersion(id, collection string, del bool, body []byte, entry changevector.Entry, lm time.Time) (string, Outcome, error) {
	if err := ValidateID(id); err != nil {
		return "", Skipped, err
	}
	local, err := tx.localVersion(LowerID(id))
	if err != nil {
		return "", Skipped, err
	}
	localCV, _ := changevector.ParseStored(local.cv)
	cv := changevector.Merge(localCV, changevector.Vector{entry})
	it := Item{Type: "Put", ID: id, Collection: collection, ChangeVector: cv.String(), LastModified: lm, Body: body}
	if del {
		it.Type, it.Body = "Delete", nil
		if local.exists {
			it.Collection = local.coll
		}
	}
	out, err := tx.ApplyReplicated(it)
	return it.ChangeVector, out, err
}
