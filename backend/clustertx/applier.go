// Package clustertx writes the documents of committed cluster transactions
// into this node's copies of their databases, in log order (see
// backend/cluster/DESIGN.md, "Compare-exchange and cluster transactions").
// The cluster state keeps the recent transactions; each database file
// records the last one it applied, in the same SQLite transaction as the
// documents, so a restart (or kill -9) resumes where the file stands.
package clustertx

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/rookerydb/rookery/backend/catalog"
	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
)

// Applier applies cluster transactions to the open databases of a node.
type Applier struct {
	cluster *cluster.Cluster
	catalog *catalog.Catalog
	log     *slog.Logger

	kick chan struct{}

	mu      sync.Mutex
	applied map[string]uint64 // by lower-cased database name
	changed chan struct{}     // closed and replaced whenever applied moves
}

// New makes an applier; Run drives it.
func New(cl *cluster.Cluster, cat *catalog.Catalog, log *slog.Logger) *Applier {
	if log == nil {
		log = slog.Default()
	}
	return &Applier{cluster: cl, catalog: cat, log: log, kick: make(chan struct{}, 1), applied: map[string]uint64{}, changed: make(chan struct{})}
}

// Kick asks for a round soon.
func (a *Applier) Kick() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Run applies transactions whenever the cluster state or the set of
// databases changes (and every half second) until stop is closed.
func (a *Applier) Run(stop <-chan struct{}) {
	a.cluster.OnChange(a.Kick)
	a.catalog.OnChange(func(ev catalog.Event) {
		if ev.Type == "deleted" {
			a.mu.Lock()
			delete(a.applied, strings.ToLower(ev.Name))
			a.mu.Unlock()
		}
		a.Kick()
	})
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		for _, db := range a.catalog.All() {
			if err := a.applyDB(db); err != nil {
				a.log.Warn("applying cluster transactions", "database", db.Name(), "error", err)
			}
		}
		select {
		case <-stop:
			return
		case <-a.kick:
		case <-t.C:
		}
	}
}

func (a *Applier) known(name string) (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.applied[strings.ToLower(name)]
	return v, ok
}

func (a *Applier) set(name string, v uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.applied[strings.ToLower(name)]; ok && old >= v {
		return
	}
	// (the file may be ahead of what is known here: Wait compares with
	// what was written, which only grows)
	a.applied[strings.ToLower(name)] = v
	close(a.changed)
	a.changed = make(chan struct{})
}

func (a *Applier) applyDB(db *storage.DB) error {
	name := db.Name()
	after, ok := a.known(name)
	txs := a.cluster.ClusterTxsAfter(name, after)
	if len(txs) == 0 {
		if !ok {
			a.set(name, 0)
		}
		return nil
	}
	entryDB := cluster.ClusterTxDBID(name)
	var last uint64
	err := db.Write(context.Background(), func(tx *storage.Tx) error {
		applied, err := tx.ClusterTxApplied()
		if err != nil {
			return err
		}
		last = applied
		for _, t := range txs {
			if t.Index <= applied {
				continue
			}
			entry := changevector.Entry{Tag: cluster.ClusterTxTag, Etag: int64(t.Index), DBID: entryDB}
			for _, d := range t.Docs {
				if _, _, err := tx.WriteClusterVersion(d.ID, d.Collection, d.Delete, d.Body, entry, t.Time); err != nil {
					if k := dberr.KindOf(err); k == dberr.BadRequest || k == dberr.InvalidOperation {
						// A version this copy can never take must not hold
						// back every later transaction.
						a.log.Error("a cluster transaction's document was refused", "database", name, "index", t.Index, "id", d.ID, "error", err)
						continue
					}
					return err
				}
			}
			last = t.Index
		}
		if last > applied {
			return tx.SetClusterTxApplied(last)
		}
		return nil
	})
	if err != nil {
		return err
	}
	a.set(name, last)
	return nil
}

// Wait returns once this node's copy of db has applied the cluster
// transaction at index (or ctx ends).
func (a *Applier) Wait(ctx context.Context, db string, index uint64) error {
	for {
		a.mu.Lock()
		v, ch := a.applied[strings.ToLower(db)], a.changed
		a.mu.Unlock()
		if v >= index {
			return nil
		}
		a.Kick()
		select {
		case <-ctx.Done():
			return &dberr.Error{Kind: dberr.Unavailable, Msg: "the cluster transaction is committed, but this node has not written its documents yet", Err: ctx.Err()}
		case <-ch:
		case <-time.After(200 * time.Millisecond):
		}
	}
}
