package ids

import (
	"context"

	"github.com/rookerydb/rookery/backend/storage"
)

// Cluster takes identities from a Source (the cluster's log) for documents
// of a local database; it is what batches and the identity endpoints use.
type Cluster struct {
	Src Source
}

// TakeIdentities implements batch.Identities.
func (c Cluster) TakeIdentities(ctx context.Context, db *storage.DB, prefixes []string) ([]int64, error) {
	exists := func(id string) (bool, error) {
		d, err := db.Get(ctx, id)
		return d != nil, err
	}
	values, probes, err := TakeFree(ctx, c.Src, db.Name(), db.Separator(), exists, prefixes)
	m := db.Metrics()
	m.IdentityProbes.Add(float64(probes))
	if err == nil {
		m.IdentityCalls.WithLabelValues("next").Add(float64(len(prefixes)))
	}
	return values, err
}
