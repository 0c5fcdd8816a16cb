package query

import (
	"context"
	"log/slog"
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
	defs   *LocalDefinitions
	mgr    *index.Manager
	runner *Runner
	opts   Options
}

func newNode(t testing.TB, opts Options) *testNode {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	n := &testNode{t: t, dir: t.TempDir(), opts: opts}
	n.defs = NewLocalDefinitions(n.openIndex)
	n.db = openDB(t, n.dir)
	n.mgr = index.NewManager(index.Options{Logger: opts.Logger})
	n.runner = NewRunner(n.defs, IndexLookup(n.mgr.Get), opts)
	t.Cleanup(n.close)
	return n
}

func (n *testNode) openIndex(_ string, def index.Definition) error {
	_, err := n.mgr.Put(n.db, def)
	return err
}

func (n *testNode) close() {
	if n.db != nil {
		n.mgr.CloseDatabase("shop")
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
	n.runner = NewRunner(n.defs, IndexLookup(n.mgr.Get), n.opts)
}

func (n *testNode) query(q string, params map[string]any) *Result {
	n.t.Helper()
	res, err := n.runner.Run(context.Background(), n.db, Request{Query: q, QueryParameters: params, WaitForNonStaleResults: true})
	if err != nil {
		n.t.Fatalf("%s: %v", q, err)
	}
	return res
}
