package index

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
)

// A first build maps the documents it finds without looking for their old
// entries (Index.fresh). Documents updated, deleted and added while that
// build runs, and a close and reopen in the middle of it, must still leave
// exactly one set of entries per live document.
func TestFreshBuildUnderWritesKeepsOneEntryPerDocument(t *testing.T) {
	const n = 3000
	db, dir := newDB(t)
	for i := 0; i < n; i += 500 {
		var docs [][3]string
		for j := i; j < i+500; j++ {
			docs = append(docs, [3]string{fmt.Sprintf("orders/%d", j), "Orders", fmt.Sprintf(`{"Total":%d,"Name":"first name%d"}`, j%10, j%7)})
		}
		put(t, db, docs...)
	}
	def := Definition{Name: "Auto/Orders/ByTotalAndSearch(Name)", Type: TypeAutoMap, Collection: "Orders",
		Fields: []AutoField{{Name: "Total"}, {Name: "Name", Search: true}}}
	live := map[string]int{} // id -> Total
	for j := 0; j < n; j++ {
		live[fmt.Sprintf("orders/%d", j)] = j % 10
	}
	rng := rand.New(rand.NewPCG(7, 11))
	write := func(k int) {
		for i := 0; i < k; i++ {
			j := rng.IntN(n + 200)
			id := fmt.Sprintf("orders/%d", j)
			if rng.IntN(5) == 0 {
				if _, ok := live[id]; ok {
					del(t, db, id)
					delete(live, id)
				}
				continue
			}
			total := 100 + rng.IntN(1000)
			put(t, db, [3]string{id, "Orders", fmt.Sprintf(`{"Total":%d,"Name":"second name%d"}`, total, j%7)})
			live[id] = total
		}
	}
	check := func(ix *Index, when string) {
		t.Helper()
		wait(t, ix)
		if s := ix.Stats(); s.EntriesCount != int64(len(live)) {
			t.Fatalf("%s: %d entries for %d live documents", when, s.EntriesCount, len(live))
		}
		var want, wantOld []string
		for id, total := range live {
			if total >= 100 {
				want = append(want, id)
			} else {
				wantOld = append(wantOld, id)
			}
		}
		sort.Strings(want)
		sort.Strings(wantOld)
		eq(t, when+": updated documents", ids(t, ix, "Total >= 100", nil), want)
		eq(t, when+": documents never updated", ids(t, ix, "Total < 100", nil), wantOld)
		eq(t, when+": full text of updated documents", ids(t, ix, "search(Name, 'second')", nil), want)
		eq(t, when+": full text of documents never updated", ids(t, ix, "search(Name, 'first')", nil), wantOld)
	}
	ix := openIndex(t, db, dir, def, Options{BatchSize: 97})
	for ix.Stats().Collections["Orders"].LastProcessedDocumentEtag == 0 {
		write(1)
	}
	write(300)
	check(ix, "first build") // the updates were mapped by the first pass
	write(200)
	check(ix, "after the first build")

	// A restart in the middle of a first build (after a reset).
	if err := ix.Reset(); err != nil {
		t.Fatal(err)
	}
	for ix.Stats().Collections["Orders"].LastProcessedDocumentEtag == 0 {
		write(1)
	}
	write(100)
	ix.Close()
	write(100)
	ix = openIndex(t, db, dir, def, Options{BatchSize: 97})
	write(300)
	check(ix, "rebuilt through a restart")
}

// A document that leaves one collection of a multi-collection index for
// another (deleted, then created in the other: its tombstone goes) while
// the first build runs keeps one entry: the version in the second
// collection is newer than the build's start, so its old entry is looked
// for and removed.
func TestFreshBuildDocumentChangingCollection(t *testing.T) {
	db, dir := newDB(t)
	for i := 0; i < 2000; i += 500 {
		var docs [][3]string
		for j := i; j < i+500; j++ {
			docs = append(docs, [3]string{fmt.Sprintf("orders/%d", j), "Orders", fmt.Sprintf(`{"Total":%d}`, j%10)})
		}
		put(t, db, docs...)
	}
	put(t, db, [3]string{"zed/1", "Zarchive", `{"Total":1}`})
	def := Definition{Name: "Totals", Type: TypeJavaScriptMap, Maps: []string{
		"map('Orders', o => ({ Total: o.Total, Kind: 'orders' }))",
		"map('Zarchive', o => ({ Total: o.Total, Kind: 'archive' }))",
	}}
	ix := openIndex(t, db, dir, def, Options{BatchSize: 50})
	for ix.Stats().Collections["Orders"].LastProcessedDocumentEtag == 0 {
		put(t, db, [3]string{"zed/2", "Zarchive", `{"Total":2}`})
	}
	// orders/0 was indexed by the first batch; it moves to Zarchive.
	del(t, db, "orders/0")
	put(t, db, [3]string{"orders/0", "Zarchive", `{"Total":0}`})
	wait(t, ix)
	if got := ids(t, ix, "Kind = 'orders' and Total = 0", nil); len(got) != 199 {
		t.Fatalf("%d Orders entries with Total 0, want 199 (orders/0 left)", len(got))
	}
	eq(t, "archived", ids(t, ix, "Kind = 'archive'", nil), []string{"orders/0", "zed/1", "zed/2"})
	if s := ix.Stats(); s.EntriesCount != 2002 {
		t.Fatalf("%d entries, want 2002", s.EntriesCount)
	}
}
