package storage_test

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
)

func openTag(t *testing.T, tag string) *storage.DB {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db.sqlite"), storage.Options{Name: "r", NodeTag: tag})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// replicate sends everything from has not seen yet to to, in batches of 7.
func replicate(t *testing.T, from, to *storage.DB) map[storage.Outcome]int {
	t.Helper()
	out, err := storage.Exchange(context.Background(), from, to, 7)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func del(t *testing.T, db *storage.DB, id string) {
	t.Helper()
	err := db.Write(context.Background(), func(tx *storage.Tx) error {
		_, _, err := tx.Delete(id, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// versions reads the stored versions of a conflicted id.
func versions(t *testing.T, db *storage.DB, id string) []storage.Version {
	t.Helper()
	vs, err := db.ConflictVersions(context.Background(), []string{id})
	if err != nil {
		t.Fatal(err)
	}
	return vs[storage.LowerID(id)]
}

// state is a copy's documents and conflicts, for comparing copies.
func state(t *testing.T, db *storage.DB) string {
	t.Helper()
	ctx := context.Background()
	var lines []string
	items, err := db.ChangesAfter(ctx, 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		lines = append(lines, fmt.Sprintf("%s %s %s %s", it.Type, strings.ToLower(it.ID), it.ChangeVector, it.Body))
	}
	list, _, err := db.ConflictList(ctx, storage.ConflictFilter{}, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		for _, v := range versions(t, db, c.ID) {
			lines = append(lines, fmt.Sprintf("conflict %s %s %v %s", strings.ToLower(c.ID), v.ChangeVector, v.Tombstone, v.Body))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func TestReplicationAppliesAndSkips(t *testing.T) {
	a, b := openTag(t, "A"), openTag(t, "B")
	for i := 0; i < 20; i++ {
		if _, err := put(t, a, fmt.Sprintf("users/%d", i), fmt.Sprintf(`{"n":%d,"@metadata":{"@collection":"Users"}}`, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	del(t, a, "users/3")
	if got := replicate(t, a, b); got[storage.Applied] != 20 {
		t.Fatalf("outcomes %v", got)
	}
	if state(t, a) != state(t, b) {
		t.Fatalf("copies differ:\nA:\n%s\nB:\n%s", state(t, a), state(t, b))
	}
	if s := b.Stats(); s.Documents != 19 || s.Tombstones != 1 {
		t.Fatalf("B stats %+v", s)
	}
	// Nothing new: nothing sent. B's own write goes back to A as an update.
	if got := replicate(t, a, b); len(got) != 0 {
		t.Fatalf("second round %v", got)
	}
	if _, err := put(t, b, "users/5", `{"n":"B","@metadata":{"@collection":"Users"}}`, nil); err != nil {
		t.Fatal(err)
	}
	got := replicate(t, b, a)
	if got[storage.Applied] != 1 || got[storage.Skipped] != 19 { // 18 documents and the tombstone were seen already
		t.Fatalf("back to A %v", got)
	}
	if state(t, a) != state(t, b) {
		t.Fatal("copies differ after B's update")
	}
	if !strings.Contains(b.ChangeVector(), "A:") || !strings.Contains(b.ChangeVector(), "B:") {
		t.Fatalf("B's database vector %q must have absorbed A's", b.ChangeVector())
	}
}

func TestReplicationConflictsAndMerges(t *testing.T) {
	a, b := openTag(t, "A"), openTag(t, "B")
	ctx := context.Background()
	// A shared document, deleted on both sides concurrently below: merged.
	put(t, a, "gone/1", `{}`, nil)
	replicate(t, a, b)
	// Concurrent different writes: a conflict on both sides.
	put(t, a, "orders/1", `{"by":"A","@metadata":{"@collection":"Orders"}}`, nil)
	put(t, b, "orders/1", `{"by":"B","@metadata":{"@collection":"Orders"}}`, nil)
	// Concurrent identical writes: merged silently.
	put(t, a, "same/1", `{"x":1}`, nil)
	put(t, b, "same/1", `{"x":1}`, nil)
	// HiLo: the highest Max wins.
	put(t, a, "Raven/Hilo/users", `{"Max":64,"@metadata":{"@collection":"@hilo"}}`, nil)
	put(t, b, "Raven/Hilo/users", `{"Max":96,"@metadata":{"@collection":"@hilo"}}`, nil)
	del(t, a, "gone/1")
	del(t, b, "gone/1")

	ab, ba := replicate(t, a, b), replicate(t, b, a)
	if ab[storage.Conflicted] != 1 || ab[storage.Merged] != 3 || ba[storage.Conflicted] != 1 {
		t.Fatalf("conflicts A->B %v, B->A %v", ab, ba)
	}
	if state(t, a) != state(t, b) {
		t.Fatalf("copies differ:\nA:\n%s\nB:\n%s", state(t, a), state(t, b))
	}
	for _, db := range []*storage.DB{a, b} {
		if d, _ := db.Get(ctx, "orders/1"); d != nil {
			t.Fatal("a conflicted id must have no live document")
		}
		cs := versions(t, db, "orders/1")
		if len(cs) != 2 {
			t.Fatalf("versions %d", len(cs))
		}
		h, _ := db.Get(ctx, "Raven/Hilo/users")
		if h == nil || !strings.Contains(string(h.Body), `"Max":96`) {
			t.Fatalf("hilo %v", h)
		}
		if d, _ := db.Get(ctx, "same/1"); d == nil || strings.Count(d.ChangeVector, ":") != 2 {
			t.Fatalf("merged document %+v", d)
		}
	}
	// A newer write that has seen both versions resolves the conflict everywhere.
	merged := versions(t, a, "orders/1")
	err := a.Write(ctx, func(tx *storage.Tx) error {
		cv := merged[0].ChangeVector + ", " + merged[1].ChangeVector + ", A:999-" + a.DatabaseID()
		_, err := tx.ApplyReplicated(storage.Item{Type: "Put", ID: "orders/1", Collection: "Orders", ChangeVector: cv, Body: []byte(`{"by":"both","@metadata":{"@collection":"Orders"}}`)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	replicate(t, a, b)
	for _, db := range []*storage.DB{a, b} {
		if cs := versions(t, db, "orders/1"); len(cs) != 0 {
			t.Fatal("conflict not resolved")
		}
		if d, _ := db.Get(ctx, "orders/1"); d == nil || !strings.Contains(string(d.Body), "both") {
			t.Fatalf("resolution not applied: %+v", d)
		}
	}
}

// Random writes on three copies and random pairwise replication, then a
// full exchange: every copy ends with the same documents, change vectors
// and conflicts.
func TestReplicationConverges(t *testing.T) {
	dbs := []*storage.DB{openTag(t, "A"), openTag(t, "B"), openTag(t, "C")}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewSource(seed))
	for step := 0; step < 300; step++ {
		db := dbs[r.Intn(3)]
		id := fmt.Sprintf("k/%d", r.Intn(25))
		switch r.Intn(10) {
		case 0:
			_ = db.Write(context.Background(), func(tx *storage.Tx) error { _, _, err := tx.Delete(id, nil); return err })
		case 1, 2, 3:
			i, j := r.Intn(3), r.Intn(3)
			if i != j {
				replicate(t, dbs[i], dbs[j])
			}
		default:
			// A put to a conflicted id resolves it (manual resolution).
			put(t, db, id, fmt.Sprintf(`{"v":%d,"@metadata":{"@collection":"K"}}`, step), nil)
		}
	}
	for round := 0; round < 3; round++ {
		for i := range dbs {
			for j := range dbs {
				if i != j {
					replicate(t, dbs[i], dbs[j])
				}
			}
		}
	}
	s0 := state(t, dbs[0])
	for i := 1; i < 3; i++ {
		if s := state(t, dbs[i]); s != s0 {
			t.Fatalf("copy %d differs:\n%s\nvs\n%s", i, s, s0)
		}
	}
	for _, db := range dbs {
		if err := db.IntegrityCheck(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// A local put or delete of a conflicted id resolves it, and the resolution
// replicates: the other copy drops its versions too.
func TestManualResolution(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"put", "delete"} {
		a, b := openTag(t, "A"), openTag(t, "B")
		put(t, a, "orders/1", `{"by":"A","@metadata":{"@collection":"Orders"}}`, nil)
		put(t, b, "orders/1", `{"by":"B","@metadata":{"@collection":"Orders"}}`, nil)
		replicate(t, a, b)
		replicate(t, b, a)
		if ok, _ := a.HasConflict(ctx, "ORDERS/1"); !ok {
			t.Fatal("no conflict to resolve")
		}
		if how == "put" {
			if _, err := put(t, a, "orders/1", `{"by":"operator","@metadata":{"@collection":"Orders"}}`, nil); err != nil {
				t.Fatal(err)
			}
		} else {
			del(t, a, "orders/1")
		}
		replicate(t, a, b)
		for _, db := range []*storage.DB{a, b} {
			if ok, _ := db.HasConflict(ctx, "orders/1"); ok {
				t.Fatalf("%s: still conflicted", how)
			}
			d, _ := db.Get(ctx, "orders/1")
			if how == "put" && (d == nil || !strings.Contains(string(d.Body), "operator")) {
				t.Fatalf("put resolution: %+v", d)
			}
			if how == "delete" && d != nil {
				t.Fatal("delete resolution left a document")
			}
			if err := db.IntegrityCheck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if state(t, a) != state(t, b) {
			t.Fatalf("%s: copies differ", how)
		}
	}
}

// A replicated version that becomes a conflict has no document change, but
// the commit hooks still hear about it (the studio's conflict badge and
// list, and replication senders, since conflict versions travel too).
func TestCommitHookHearsStoredConflicts(t *testing.T) {
	a, b := openTag(t, "A"), openTag(t, "B")
	if _, err := put(t, a, "users/1", `{"v":"a","@metadata":{"@collection":"Users"}}`, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := put(t, b, "users/1", `{"v":"b","@metadata":{"@collection":"Users"}}`, nil); err != nil {
		t.Fatal(err)
	}
	heard := make(chan []storage.Change, 10)
	b.OnCommit(func(ch []storage.Change) { heard <- ch })
	if out := replicate(t, a, b); out[storage.Conflicted] != 1 {
		t.Fatalf("outcomes %v, want one conflict", out)
	}
	// Hooks run right after the writers are acknowledged: wait for it
	// (bounded).
	select {
	case <-heard:
	case <-time.After(10 * time.Second):
		t.Fatal("no commit hook for a transaction that stored a conflict")
	}
	if n, err := b.ConflictCount(context.Background()); err != nil || n != 1 {
		t.Fatalf("conflicts %d %v", n, err)
	}
}
