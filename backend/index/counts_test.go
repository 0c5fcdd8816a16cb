package index

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

// valueCountsAgree checks value_counts against the entries: for every
// field column, the count of each value equals the entries holding it.
func valueCountsAgree(t *testing.T, ix *Index, when string) {
	t.Helper()
	ix.mu.RLock()
	cols := make([]int, 0, len(ix.byCol))
	for _, f := range ix.byCol {
		cols = append(cols, f.col)
	}
	ix.mu.RUnlock()
	read := func(q string, args ...any) []string {
		t.Helper()
		rows, err := ix.r.Query(q, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var v any
			var n int64
			if err := rows.Scan(&v, &n); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%T %v=%d", v, v, n))
		}
		sort.Strings(out)
		return out
	}
	for _, c := range cols {
		want := read(fmt.Sprintf(`SELECT c%d, count(*) FROM entries WHERE c%d IS NOT NULL GROUP BY c%d`, c, c, c))
		got := read(`SELECT v, n FROM value_counts WHERE col = ? AND n > 0`, c)
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Fatalf("%s: column %d: value_counts %v, entries %v", when, c, got, want)
		}
	}
}

// value_counts follows the entries through updates, deletes, arrays, nulls,
// mixed numbers, a reset, a restart, map-reduce groups, and a file that
// never had it; and a lone equality's TotalResults reads it.
func TestValueCountsFollowEntries(t *testing.T) {
	db, dir := newDB(t)
	rng := rand.New(rand.NewPCG(3, 5))
	doc := func(j int) [3]string {
		var total string
		switch rng.IntN(4) {
		case 0:
			total = fmt.Sprint(rng.IntN(5))
		case 1:
			total = fmt.Sprintf("%d.0", rng.IntN(5)) // the same number as an integer
		case 2:
			total = fmt.Sprintf("%d.5", rng.IntN(5))
		default:
			total = "null"
		}
		tags := `"t"`
		if rng.IntN(10) == 0 {
			tags = `["a","b"]`
		}
		names := []string{"Ann", "ann", "BOB", "Bob", "eve"}
		return [3]string{fmt.Sprintf("orders/%d", j), "Orders",
			fmt.Sprintf(`{"Total":%s,"Name":%q,"Paid":%v,"Tags":%s,"Company":"c%d"}`, total, names[rng.IntN(len(names))], rng.IntN(2) == 0, tags, rng.IntN(3))}
	}
	write := func(k int) {
		for i := 0; i < k; i++ {
			j := rng.IntN(400)
			if rng.IntN(6) == 0 {
				del(t, db, fmt.Sprintf("orders/%d", j))
				continue
			}
			put(t, db, doc(j))
		}
	}
	for j := 0; j < 400; j++ {
		put(t, db, doc(j))
	}
	auto := Definition{Name: "Auto/Orders/ByNameAndPaidAndTagsAndTotal", Type: TypeAutoMap, Collection: "Orders",
		Fields: []AutoField{{Name: "Name"}, {Name: "Paid"}, {Name: "Tags"}, {Name: "Total"}}}
	reduce := Definition{Name: "Orders/Totals", Type: TypeJavaScriptMapReduce,
		Maps:   []string{"map('Orders', o => ({ Company: o.Company, Count: 1 }))"},
		Reduce: "groupBy(x => x.Company).aggregate(g => ({ Company: g.key, Count: g.values.reduce((a, b) => a + b.Count, 0) }))"}
	ix := openIndex(t, db, dir, auto, Options{BatchSize: 50})
	rx := openIndex(t, db, dir, reduce, Options{BatchSize: 50})
	check := func(when string) {
		t.Helper()
		for _, x := range []*Index{ix, rx} {
			wait(t, x)
			valueCountsAgree(t, x, when+" ("+x.Name()+")")
		}
		for _, q := range []string{"Name = 'ann'", "Total = 2", "Total = 2.5", "Paid = true", "Total = null", "Tags = 't'"} {
			res := search(t, ix, "from index 'x' where "+q, nil)
			if int64(len(res.Hits)) != res.TotalResults {
				t.Fatalf("%s: %s: %d hits, TotalResults %d", when, q, len(res.Hits), res.TotalResults)
			}
		}
		res := search(t, rx, "from index 'x' where Company = 'c1'", nil)
		if len(res.Hits) != 1 || res.TotalResults != 1 {
			t.Fatalf("%s: the group of c1: %d hits, TotalResults %d", when, len(res.Hits), res.TotalResults)
		}
	}
	check("first build")
	write(300)
	check("after writes")
	if err := ix.Reset(); err != nil {
		t.Fatal(err)
	}
	write(100)
	check("after a reset")
	ix.Close()
	rx.Close()
	write(100)
	ix = openIndex(t, db, dir, auto, Options{BatchSize: 50})
	rx = openIndex(t, db, dir, reduce, Options{BatchSize: 50})
	check("after a restart")

	// A file written before value_counts was kept gets it counted on open.
	wait(t, ix)
	if _, err := ix.w.Exec(`DELETE FROM value_counts; DELETE FROM meta WHERE key = 'value_counts'`); err != nil {
		t.Fatal(err)
	}
	ix.Close()
	ix = openIndex(t, db, dir, auto, Options{BatchSize: 50})
	check("after counting an old file")
	write(100)
	check("after more writes")
}
