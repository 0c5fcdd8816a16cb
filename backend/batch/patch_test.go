package batch_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/backend/batch"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
)

func openNode(t *testing.T, tag string) *storage.DB {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db.sqlite"), storage.Options{Name: "p", NodeTag: tag})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func runBatch(t *testing.T, db *storage.DB, body string) ([]batch.Result, error) {
	t.Helper()
	cmds, err := batch.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return batch.Execute(context.Background(), db, nil, cmds)
}

// A PATCH command parses with its scripts and options, and patches the
// way a PUT of its result writes: a new change vector, replicated like
// any write; a conflicted id is refused as a conflict.
func TestPatchCommands(t *testing.T) {
	cmds, err := batch.Parse(strings.NewReader(`{"Commands":[{"Type":"PATCH","Id":"a/1","ChangeVector":null,"Patch":{"Script":"this.N = args.v","Values":{"v":{"deep":[1,2]}}},"PatchIfMissing":null,"CreateIfMissing":{"N":0,"@metadata":{"@collection":"As"}},"ReturnDocument":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p := cmds[0].Patch
	if cmds[0].Type != batch.Patch || p == nil || p.Patch.Script != "this.N = args.v" || p.PatchIfMissing != nil || p.CreateIfMissing == nil || p.CreateIfMissing.Collection != "As" || !p.ReturnDocument {
		t.Fatalf("parsed %+v %+v", cmds[0], p)
	}
	if _, err := batch.Parse(strings.NewReader(`{"Commands":[{"Type":"PATCH","Id":"a/1","Patch":{"Script":"  "}}]}`)); err == nil {
		t.Fatal("an empty script was accepted")
	}

	a, b := openNode(t, "A"), openNode(t, "B")
	for _, db := range []*storage.DB{a, b} {
		if _, err := runBatch(t, db, `{"Commands":[{"Id":"c/1","Type":"PUT","Document":{"N":1,"@metadata":{"@collection":"C"}}}]}`); err != nil {
			t.Fatal(err)
		}
	}
	res, err := runBatch(t, a, `{"Commands":[{"Type":"PATCH","Id":"c/1","Patch":{"Script":"this.N++"}}]}`)
	if err != nil || res[0].Patch.Status != batch.PatchStatusPatched || !strings.HasPrefix(res[0].ChangeVector, "A:2-") {
		t.Fatalf("patch on A: %+v %v", res, err)
	}
	// B's own version and A's patched one are concurrent: a conflict on B.
	if _, err := storage.Exchange(context.Background(), a, b, 10); err != nil {
		t.Fatal(err)
	}
	if n, _ := b.ConflictCount(context.Background()); n != 1 {
		t.Fatalf("%d conflicts on B", n)
	}
	_, err = runBatch(t, b, `{"Commands":[{"Type":"PATCH","Id":"c/1","Patch":{"Script":"this.N = 0"},"PatchIfMissing":{"Script":"this.N = 0"}}]}`)
	var de *dberr.Error
	if !errors.As(err, &de) || de.Kind != dberr.DocumentConflict {
		t.Fatalf("patch of a conflicted id: %v", err)
	}
}
