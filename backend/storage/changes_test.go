package storage_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/rookerydb/rookery/backend/storage"
)

// CountChangesAfter agrees with counting what ChangesAfter returns, for
// every position, over documents in several collections (one spelled two
// ways), updates, deletes, re-creations and conflict versions.
func TestCountChangesAfter(t *testing.T) {
	ctx := context.Background()
	a, b := openTag(t, "A"), openTag(t, "B")
	rng := rand.New(rand.NewSource(7))
	// An id keeps its collection; "Users" is spelled two ways.
	colls := [][]string{{"Users", "users"}, {"Orders"}, {""}}
	for i := 0; i < 300; i++ {
		k := rng.Intn(80)
		id := fmt.Sprintf("d/%d", k)
		names := colls[k%len(colls)]
		meta := ""
		if c := names[rng.Intn(len(names))]; c != "" {
			meta = fmt.Sprintf(`,"@metadata":{"@collection":%q}`, c)
		}
		switch rng.Intn(5) {
		case 0:
			del(t, a, id)
		default:
			mustPut(t, a, id, fmt.Sprintf(`{"n":%d%s}`, i, meta))
		}
	}
	// Concurrent writes of one id on both copies: a conflict on B.
	mustPut(t, a, "shared/1", `{"by":"A","@metadata":{"@collection":"Users"}}`)
	mustPut(t, b, "shared/1", `{"by":"B","@metadata":{"@collection":"Users"}}`)
	replicate(t, a, b)
	if c, _ := b.ConflictCount(ctx); c == 0 {
		t.Fatal("expected a conflict on B")
	}
	for _, db := range []*storage.DB{a, b} {
		all, err := db.ChangesAfter(ctx, 0, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		last := db.LastEtag()
		for after := int64(0); after <= last+1; after++ {
			want := int64(0)
			for _, it := range all {
				if it.Etag > after {
					want++
				}
			}
			got, err := db.CountChangesAfter(ctx, after)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("%s: CountChangesAfter(%d) = %d, want %d", db.NodeTag(), after, got, want)
			}
		}
	}
}

// ChangesAfterBytes stops at the item that reaches the byte bound, and
// always returns one item when there is one.
func TestChangesAfterBytes(t *testing.T) {
	ctx := context.Background()
	db := openTag(t, "A")
	pad := make([]byte, 1000)
	for i := range pad {
		pad[i] = 'x'
	}
	for i := 0; i < 20; i++ {
		mustPut(t, db, fmt.Sprintf("big/%d", i), `{"pad":"`+string(pad)+`"}`)
	}
	all, err := db.ChangesAfterBytes(ctx, 0, 100, 0)
	if err != nil || len(all) != 20 {
		t.Fatalf("unbounded: %d items, %v", len(all), err)
	}
	got, err := db.ChangesAfterBytes(ctx, 0, 100, 5000)
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for _, it := range got[:len(got)-1] {
		size += len(it.Body) + len(it.ID) + len(it.ChangeVector)
	}
	if len(got) < 2 || len(got) >= 20 || size >= 5000 {
		t.Fatalf("bounded to 5000 bytes: %d items, %d bytes before the last", len(got), size)
	}
	one, err := db.ChangesAfterBytes(ctx, 0, 100, 1)
	if err != nil || len(one) != 1 || one[0].Etag != all[0].Etag {
		t.Fatalf("a bound below one item still returns the first item: %d items, %v", len(one), err)
	}
	count, err := db.ChangesAfterBytes(ctx, all[17].Etag, 100, 1<<20)
	if err != nil || len(count) != 2 {
		t.Fatalf("after the 18th item: %d items, %v", len(count), err)
	}
}

func mustPut(t *testing.T, db *storage.DB, id, js string) {
	t.Helper()
	if _, err := put(t, db, id, js, nil); err != nil {
		t.Fatal(err)
	}
}
