package client

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rookerydb/rookery/internal/testserver"
)

// The Go client configures revisions, reads a document's revisions newest
// first with their change vectors, counts them and reverts to one.
func TestIntegrationRevisions(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()
	keep := int64(3)
	if err := store.ConfigureRevisions(ctx, &RevisionsConfig{Default: &RevisionsCollectionConfig{MinimumRevisionsToKeep: &keep}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c", "d"} {
		s := store.OpenSession()
		if err := s.StoreWithID(&User{Name: name}, "users/1"); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveChanges(); err != nil {
			t.Fatal(err)
		}
	}
	list, total, err := store.Revisions(ctx, "users/1", 0, 10)
	if err != nil || total != 3 || len(list) != 3 {
		t.Fatalf("revisions %d of %d: %v", len(list), total, err)
	}
	var names []string
	var oldest string
	for _, raw := range list {
		var r struct {
			Name string
			Meta struct {
				CV    string `json:"@change-vector"`
				Flags string `json:"@flags"`
			} `json:"@metadata"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		if r.Meta.CV == "" || r.Meta.Flags != "HasRevisions, Revision" {
			t.Fatalf("revision metadata %s", raw)
		}
		names = append(names, r.Name)
		oldest = r.Meta.CV
	}
	if got := names[0] + names[1] + names[2]; got != "dcb" {
		t.Fatalf("newest first: %s", got)
	}
	if c, err := store.RevisionsCount(ctx, "users/1"); err != nil || c != 3 {
		t.Fatalf("count %d %v", c, err)
	}
	if err := store.RevertToRevision(ctx, "users/1", oldest); err != nil {
		t.Fatal(err)
	}
	var u User
	if ok, err := store.OpenSession().Load("users/1", &u); err != nil || !ok || u.Name != "b" {
		t.Fatalf("after revert %+v %v", u, err)
	}
	if err := store.RevertToRevision(ctx, "users/1", "A:999-nope"); err == nil {
		t.Fatal("a revert to an unknown revision succeeded")
	}
}
