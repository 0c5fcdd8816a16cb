package index

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
)

// putPets stores one owner and n pets that load() it.
func putPets(t testing.TB, db *storage.DB, n int) {
	t.Helper()
	put(t, db, [3]string{"people/1", "People", `{"Name":"Oren"}`})
	for i := 0; i < n; i += 500 {
		var docs [][3]string
		for j := i; j < min(n, i+500); j++ {
			docs = append(docs, [3]string{fmt.Sprintf("pets/%05d", j), "Pets", fmt.Sprintf(`{"Name":"pet%d","OwnerId":"people/1","Age":%d,"Tags":["a","b"]}`, j, j%20)})
		}
		put(t, db, docs...)
	}
}

// A referenced document with more referencing documents than one batch
// takes is re-mapped over several batches, each committed with where it
// stopped: every pet is re-mapped exactly once and sees the new name, and
// an update in the middle of the pass re-maps them all again.
func TestReferencePassSpansBatches(t *testing.T) {
	db, dir := newDB(t)
	putPets(t, db, 1000)
	ix := openIndex(t, db, dir, petsIndex(), Options{BatchSize: 64})
	wait(t, ix)
	before := ix.Stats().MapReferenceAttempts
	put(t, db, [3]string{"people/1", "People", `{"Name":"Ayende"}`})
	wait(t, ix)
	if got := ix.Stats().MapReferenceAttempts - before; got != 1000 {
		t.Fatalf("renaming the owner of 1000 pets in batches of 64 re-mapped %d", got)
	}
	if n := len(ids(t, ix, "OwnerName = 'ayende'", nil)); n != 1000 {
		t.Fatalf("%d pets see the new name", n)
	}
	if r := ix.Stats().References[0]; r.Remapped != 1000 {
		t.Fatalf("persisted remapped count %d", r.Remapped)
	}

	// Rename again, and once more as soon as the pass has started.
	put(t, db, [3]string{"people/1", "People", `{"Name":"First"}`})
	deadline := time.Now().Add(10 * time.Second)
	for ix.refAttempts.Load()-before < 1064 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	put(t, db, [3]string{"people/1", "People", `{"Name":"Second"}`})
	wait(t, ix)
	if n := len(ids(t, ix, "OwnerName = 'second'", nil)); n != 1000 {
		t.Fatalf("after a rename in the middle of the pass %d of 1000 pets see the last name", n)
	}
	if got := ix.Stats().MapReferenceAttempts - before; got < 2000+64 {
		t.Fatalf("the second pass re-mapped only %d in all: the pets done before the last rename were not re-mapped again", got)
	}
}

// BenchmarkReferenceRemap re-maps 2000 pets after each rename of their
// owner; docs/s and allocations are per re-mapped document.
func BenchmarkReferenceRemap(b *testing.B) {
	const n = 2000
	db, dir := newDB(b)
	putPets(b, db, n)
	ix := openIndex(b, db, dir, petsIndex(), Options{})
	wait(b, ix)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		put(b, db, [3]string{"people/1", "People", fmt.Sprintf(`{"Name":"Owner%d"}`, i)})
		if err := ix.WaitNonStale(context.Background(), 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "docs/s")
	b.ReportMetric(0, "ns/op")
}
