package query

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/storage"
)

// testNode is one node as the lead wires it: a database, its definitions
// (in memory here, the cluster state there) and its open indexes, each a
// real index file beside the database's.
type testNode struct {
	t      testing.TB
	dir    string
	db     *storage.DB
	defs   *memDefs
	mu     sync.Mutex
	open   map[string]*index.Index
	runner *Runner
	opts   Options
}

func newNode(t testing.TB, opts Options) *testNode {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	n := &testNode{t: t, dir: t.TempDir(), open: map[string]*index.Index{}, opts: opts}
	n.defs = &memDefs{defs: map[string][]index.Definition{}, put: n.openIndex}
	n.db = openDB(t, n.dir)
	n.runner = NewRunner(n.defs, n, opts)
	t.Cleanup(n.close)
	return n
}

func (n *testNode) openIndex(_ string, def index.Definition) error {
	ix, err := index.Open(index.FilePath(n.db.Path(), def.Name), def, n.db, index.Options{Logger: n.opts.Logger})
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.open[def.Name] = ix
	n.mu.Unlock()
	return nil
}

func (n *testNode) Get(_ string, name string) (Index, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ix, ok := n.open[name]
	if !ok {
		return nil, false
	}
	return ix, true
}

func (n *testNode) close() {
	n.mu.Lock()
	for name, ix := range n.open {
		ix.Close()
		delete(n.open, name)
	}
	n.mu.Unlock()
	if n.db != nil {
		n.db.Close()
		n.db = nil
	}
}

// restart closes the indexes and the database and opens them again from
// their files.
func (n *testNode) restart() {
	n.close()
	n.db = openDB(n.t, n.dir)
	for _, def := range n.defs.List("shop") {
		if err := n.openIndex("shop", def); err != nil {
			n.t.Fatal(err)
		}
	}
	n.runner = NewRunner(n.defs, n, n.opts)
}

func (n *testNode) query(q string, params map[string]any) *Result {
	n.t.Helper()
	res, err := n.runner.Run(context.Background(), n.db, Request{Query: q, QueryParameters: params, WaitForNonStaleResults: true})
	if err != nil {
		n.t.Fatalf("%s: %v", q, err)
	}
	return res
}
