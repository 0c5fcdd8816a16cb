package storage_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
)

func incr(t *testing.T, db *storage.DB, id, name string, delta int64) (storage.Counter, error) {
	t.Helper()
	var c storage.Counter
	err := db.Write(context.Background(), func(tx *storage.Tx) error {
		var err error
		c, err = tx.IncrementCounter(id, name, delta)
		return err
	})
	return c, err
}

func total(t *testing.T, db *storage.DB, id, name string) (int64, bool) {
	t.Helper()
	cs, err := db.Counters(context.Background(), id, []string{name})
	if err != nil {
		t.Fatal(err)
	}
	if cs[0] == nil {
		return 0, false
	}
	return cs[0].Total, true
}

func TestCountersIncrementDeleteReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	db, err := storage.Open(path, storage.Options{Name: "test", NodeTag: "A"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var missing storage.MissingDocumentError
	if _, err := incr(t, db, "users/1", "likes", 1); !errors.As(err, &missing) {
		t.Fatalf("increment of a missing document: %v, want MissingDocumentError", err)
	}
	info, err := put(t, db, "users/1", `{"@metadata":{"@collection":"Users"}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := db.LastEtag()
	c, err := incr(t, db, "USERS/1", "Likes", 5)
	if err != nil {
		t.Fatal(err)
	}
	if c.Total != 5 || c.DocID != "users/1" || c.Name != "Likes" || c.Etag != before+1 {
		t.Fatalf("counter %+v", c)
	}
	if _, err := incr(t, db, "users/1", "LIKES", -2); err != nil {
		t.Fatal(err)
	}
	if _, err := incr(t, db, "users/1", "views", 10); err != nil {
		t.Fatal(err)
	}
	if v, ok := total(t, db, "users/1", "likes"); !ok || v != 3 {
		t.Fatalf("likes = %d %v, want 3", v, ok)
	}
	// The document is unchanged, but served with @counters and @flags.
	d, err := db.Get(ctx, "users/1")
	if err != nil {
		t.Fatal(err)
	}
	if d.ChangeVector != info.ChangeVector {
		t.Fatalf("document vector changed: %s -> %s", info.ChangeVector, d.ChangeVector)
	}
	js := string(d.AppendJSON(nil))
	if !strings.Contains(js, `"@counters":["Likes","views"]`) || !strings.Contains(js, `"@flags":"HasCounters"`) {
		t.Fatalf("served document %s", js)
	}
	if _, err := incr(t, db, "users/1", strings.Repeat("x", storage.MaxCounterNameBytes+1), 1); !dberr.Is(err, dberr.BadRequest) {
		t.Fatalf("long name: %v", err)
	}
	// Delete one counter; reopen; the other survives, the deleted one is gone.
	var deleted bool
	if err := db.Write(ctx, func(tx *storage.Tx) error {
		deleted, err = tx.DeleteCounter("users/1", "VIEWS")
		return err
	}); err != nil || !deleted {
		t.Fatalf("delete: %v %v", deleted, err)
	}
	last := db.LastEtag()
	db.Close()
	db, err = storage.Open(path, storage.Options{Name: "test", NodeTag: "A"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.LastEtag() != last {
		t.Fatalf("last etag %d after reopen, want %d", db.LastEtag(), last)
	}
	if _, ok := total(t, db, "users/1", "views"); ok {
		t.Fatal("deleted counter still read")
	}
	all, err := db.Counters(ctx, "users/1", nil)
	if err != nil || len(all) != 1 || all[0].Total != 3 {
		t.Fatalf("all counters after reopen: %v %v", all, err)
	}
	// A deleted counter starts again from the new delta.
	if c, err := incr(t, db, "users/1", "views", 2); err != nil || c.Total != 2 {
		t.Fatalf("re-created counter: %+v %v", c, err)
	}
	// Deleting the document deletes its counters.
	if err := db.Write(ctx, func(tx *storage.Tx) error { _, _, err := tx.Delete("users/1", nil); return err }); err != nil {
		t.Fatal(err)
	}
	if _, err := put(t, db, "users/1", `{"@metadata":{"@collection":"Users"}}`, nil); err != nil {
		t.Fatal(err)
	}
	if all, _ := db.Counters(ctx, "users/1", nil); len(all) != 0 {
		t.Fatalf("counters survived the document's deletion: %v", all)
	}
}

func TestCountersReplicateSumOfParts(t *testing.T) {
	a, b, c := openTag(t, "A"), openTag(t, "B"), openTag(t, "C")
	for _, db := range []*storage.DB{a, b, c} {
		if _, err := put(t, db, "docs/1", `{"@metadata":{"@collection":"Docs"}}`, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := int64(0)
	for i, db := range []*storage.DB{a, b, c} {
		for j := 0; j < 3; j++ {
			d := int64((i+1)*10 + j)
			if _, err := incr(t, db, "docs/1", "n", d); err != nil {
				t.Fatal(err)
			}
			want += d
		}
	}
	all := []*storage.DB{a, b, c}
	for round := 0; round < 2; round++ {
		for _, from := range all {
			for _, to := range all {
				if from != to {
					replicate(t, from, to)
				}
			}
		}
	}
	for _, db := range all {
		if v, ok := total(t, db, "docs/1", "n"); !ok || v != want {
			t.Fatalf("%s: n = %d %v, want %d", db.NodeTag(), v, ok, want)
		}
		if n, _ := db.ConflictCount(context.Background()); n != 0 {
			t.Fatalf("%s: %d conflicts", db.NodeTag(), n)
		}
	}
	// Idempotent: applying everything again changes nothing.
	before := a.LastEtag()
	items, err := b.ChangesAfter(context.Background(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Write(context.Background(), func(tx *storage.Tx) error {
		for _, it := range items {
			if it.Kind != storage.KindCounters {
				continue
			}
			if o, err := tx.ApplyReplicated(it); err != nil || o != storage.Skipped {
				t.Errorf("re-applied %s/%s: %v %v", it.ID, it.Collection, o, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if a.LastEtag() != before {
		t.Fatalf("re-applying moved the etag %d -> %d", before, a.LastEtag())
	}
	// A deletion on one copy replicates; a later increment elsewhere
	// starts the counter again.
	if err := a.Write(context.Background(), func(tx *storage.Tx) error { _, err := tx.DeleteCounter("docs/1", "n"); return err }); err != nil {
		t.Fatal(err)
	}
	replicate(t, a, b)
	if _, ok := total(t, b, "docs/1", "n"); ok {
		t.Fatal("deletion did not replicate")
	}
	if _, err := incr(t, b, "docs/1", "n", 7); err != nil {
		t.Fatal(err)
	}
	replicate(t, b, a)
	replicate(t, b, c)
	replicate(t, a, c)
	for _, db := range all {
		if v, ok := total(t, db, "docs/1", "n"); !ok || v != 7 {
			t.Fatalf("%s after delete+increment: %d %v, want 7", db.NodeTag(), v, ok)
		}
	}
}
