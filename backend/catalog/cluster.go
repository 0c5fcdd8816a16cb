package catalog

import (
	"context"
	"time"

	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
)

// CreateInCluster records a database in the cluster state and waits until
// this node (self) has opened it when it is a member. The cluster's
// appliers open and close the files (web/cluster.go); this is how the API's
// PUT /admin/databases and the studio's Databases page create one.
func (c *Catalog) CreateInCluster(ctx context.Context, cl *cluster.Cluster, d cluster.Database, self string) error {
	if err := ValidateName(d.Name); err != nil {
		return err
	}
	sep, err := Separator(d.Separator)
	if err != nil {
		return err
	}
	d.Separator = sep
	d.Created = time.Now().UTC()
	if _, err := cl.CreateDatabase(ctx, d); err != nil {
		return err
	}
	for _, m := range d.Members {
		if m == self {
			return waitFor(ctx, func() bool { _, err := c.Get(d.Name); return err == nil })
		}
	}
	return nil
}

// DeleteInCluster removes a database record and waits until this node has
// closed it and removed its files.
func (c *Catalog) DeleteInCluster(ctx context.Context, cl *cluster.Cluster, name string) error {
	if _, err := cl.DeleteDatabase(ctx, name); err != nil {
		return err
	}
	return waitFor(ctx, func() bool { return !c.Has(name) })
}

func waitFor(ctx context.Context, done func() bool) error {
	deadline := time.Now().Add(10 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			return &dberr.Error{Kind: dberr.Unavailable, Msg: "the change was committed but this node has not applied it yet"}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}
