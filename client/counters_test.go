package client

import (
	"context"
	"testing"

	"github.com/rookerydb/rookery/internal/testserver"
)

// The Go client's counter calls against a real node.
func TestIntegrationCounters(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()
	if _, err := store.IncrementCounter(ctx, "users/1", "likes", 1); err == nil {
		t.Fatal("an increment on a missing document succeeded")
	}
	s := store.OpenSession()
	if err := s.StoreWithID(&User{Name: "ann"}, "users/1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if v, err := store.IncrementCounter(ctx, "users/1", "Likes", 5); err != nil || v != 5 {
		t.Fatalf("increment: %d %v", v, err)
	}
	if v, err := store.IncrementCounter(ctx, "users/1", "likes", -2); err != nil || v != 3 {
		t.Fatalf("increment: %d %v", v, err)
	}
	got, err := store.GetCounters(ctx, "users/1", true, "LIKES", "none")
	if err != nil || len(got) != 2 || got[0] == nil || got[0].Total != 3 || got[0].Name != "Likes" || got[1] != nil || len(got[0].Values) != 1 {
		t.Fatalf("get: %+v %v", got, err)
	}
	if err := store.DeleteCounter(ctx, "users/1", "likes"); err != nil {
		t.Fatal(err)
	}
	if all, err := store.GetCounters(ctx, "users/1", false); err != nil || len(all) != 0 {
		t.Fatalf("after delete: %+v %v", all, err)
	}
}
