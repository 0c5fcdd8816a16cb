package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/internal/testserver"
)

// The Go client against a real node with a conflicted document: the load
// fails with *DocumentConflictError naming the id, the conflict API lists
// it, a preview and a bulk resolution resolve it, and the load works again.
func TestIntegrationConflicts(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()
	if err := store.SetConflictSolver(ctx, ConflictSolver{Default: "manual"}); err != nil {
		t.Fatal(err)
	}
	if cfg, err := store.ConflictSolver(ctx); err != nil || cfg.Default != "manual" {
		t.Fatalf("solver %+v %v", cfg, err)
	}
	if err := store.SetConflictSolver(ctx, ConflictSolver{Default: "local"}); err == nil {
		t.Fatal("local is refused as an automatic strategy")
	}
	s := store.OpenSession()
	if err := s.StoreWithID(&User{Name: "on A"}, "users/1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	db, err := n.Server.Catalog().Get(store.Database())
	if err != nil {
		t.Fatal(err)
	}
	// A concurrent version from another copy, applied as replication does.
	err = db.Write(ctx, func(tx *storage.Tx) error {
		_, err := tx.ApplyReplicated(storage.Item{Type: "Put", ID: "users/1", Collection: "Users", ChangeVector: "B:3-Qfo6Xn1dQEeVq0mZ1W2yXg",
			LastModified: time.Now().Add(time.Minute), Body: []byte(`{"Name":"on B","@metadata":{"@collection":"Users"}}`)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var u User
	_, err = store.OpenSession().Load("users/1", &u)
	var ce *DocumentConflictError
	if !errors.As(err, &ce) || ce.DocID != "users/1" || ce.StatusCode != 409 {
		t.Fatalf("load of a conflicted id: %T %v", err, err)
	}
	var ccy *ConcurrencyError
	if errors.As(err, &ccy) {
		t.Fatal("a conflict is not a concurrency error")
	}
	list, total, err := store.ListConflicts(ctx, 0, 10)
	if err != nil || total != 1 || len(list) != 1 || list[0].ID != "users/1" || list[0].Versions != 2 {
		t.Fatalf("list %+v %d %v", list, total, err)
	}
	vs, err := store.ConflictVersions(ctx, "users/1")
	if err != nil || len(vs) != 2 {
		t.Fatalf("versions %+v %v", vs, err)
	}
	prev, total, err := store.PreviewConflictResolution(ctx, BulkResolution{Strategy: "latest"}, 10)
	if err != nil || total != 1 || len(prev) != 1 || prev[0].Result == nil || !strings.Contains(string(prev[0].Result.Doc), "on B") {
		t.Fatalf("preview %+v %d %v", prev, total, err)
	}
	p, err := store.StartConflictResolution(ctx, BulkResolution{Strategy: "latest", Expected: map[string]string{"users/1": prev[0].Fingerprint}, By: "go client test"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.State == "running" {
		if time.Now().After(deadline) {
			t.Fatalf("never finished: %+v", p)
		}
		time.Sleep(10 * time.Millisecond)
		if p, err = store.ConflictResolutionProgress(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
	}
	if p.State != "done" || p.Resolved != 1 {
		t.Fatalf("progress %+v", p)
	}
	if ok, err := store.OpenSession().Load("users/1", &u); err != nil || !ok || u.Name != "on B" {
		t.Fatalf("after resolution: %v %v %+v", ok, err, u)
	}
}
