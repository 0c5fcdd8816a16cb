package ids_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/ids"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/internal/testserver"
)

func TestCapacity(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		last  int64
		ago   time.Duration
		known bool
		want  int64
	}{
		{0, 0, false, 32},
		{100, 0, false, 100},
		{0, 0, true, 32},
		{32, 10 * time.Second, true, 64},
		{1024 * 1024, time.Second, true, 1024 * 1024},
		{800 * 1024, time.Second, true, 1024 * 1024},
		{64, 45 * time.Second, true, 64},
		{64, 61 * time.Second, true, 32},
		{1000, 2 * time.Minute, true, 500},
		{40, 2 * time.Minute, true, 32},
	}
	for _, c := range cases {
		if got := ids.Capacity(c.last, now.Add(-c.ago), c.known, now); got != c.want {
			t.Errorf("Capacity(%d, -%v, %v) = %d, want %d", c.last, c.ago, c.known, got, c.want)
		}
	}
	// The client's epoch start is a known time long ago: halving from 0 floors at 32.
	at, ok := ids.ParseRangeAt("1970-01-01T00:00:00.0000000Z")
	if !ok || ids.Capacity(0, at, ok, now) != 32 {
		t.Fatal("epoch start")
	}
	if _, ok := ids.ParseRangeAt("garbage"); ok {
		t.Fatal("garbage parsed")
	}
}

func openDB(t testing.TB) *storage.DB {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db.sqlite"), storage.Options{Name: "t", NodeTag: "A"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func next(t *testing.T, db *storage.DB, tag string, lastSize int64, at string, lastMax int64) ids.Range {
	t.Helper()
	var r ids.Range
	err := db.Write(context.Background(), func(tx *storage.Tx) error {
		var err error
		r, err = ids.NextRange(tx, tag, lastSize, at, "", lastMax)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func hiloMax(t *testing.T, db *storage.DB, tag string) int64 {
	d, err := db.Get(context.Background(), "Raven/Hilo/"+tag)
	if err != nil || d == nil {
		t.Fatalf("hilo doc: %v %v", d, err)
	}
	var v struct{ Max int64 }
	if err := json.Unmarshal(d.Body, &v); err != nil {
		t.Fatal(err)
	}
	if d.Collection != "@hilo" {
		t.Fatalf("collection %q", d.Collection)
	}
	return v.Max
}

func TestHiLoRangesAndReturn(t *testing.T) {
	db := openDB(t)
	epoch := "1970-01-01T00:00:00.0000000Z"
	r := next(t, db, "users", 0, epoch, 0)
	if r.Prefix != "users/" || r.Low != 1 || r.High != 32 || r.LastSize != 32 || r.ServerTag != "A" {
		t.Fatalf("first range %+v", r)
	}
	// Asked again at once: the range doubles.
	r2 := next(t, db, "users", r.LastSize, document.FormatTime(r.LastRangeAt), r.High)
	if r2.Low != 33 || r2.High != 96 || r2.LastSize != 64 {
		t.Fatalf("second range %+v", r2)
	}
	// lastMax pulls the server forward.
	r3 := next(t, db, "users", 0, "", 1000)
	if r3.Low != 1001 {
		t.Fatalf("lastMax floor %+v", r3)
	}
	// Return: only when Max still equals end.
	ret := func(end, last int64) bool {
		var changed bool
		err := db.Write(context.Background(), func(tx *storage.Tx) error {
			var err error
			changed, err = ids.ReturnRange(tx, "users", end, last)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return changed
	}
	if ret(r2.High, 40) {
		t.Fatal("return of a stale range applied")
	}
	if !ret(r3.High, 1001) || hiloMax(t, db, "users") != 1001 {
		t.Fatal("return not applied")
	}
	if r4 := next(t, db, "users", 0, "", 0); r4.Low != 1002 {
		t.Fatalf("after return %+v", r4)
	}
}

// Concurrent range requests never overlap.
func TestHiLoConcurrentRangesDisjoint(t *testing.T) {
	db := openDB(t)
	var mu sync.Mutex
	var ranges []ids.Range
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				var r ids.Range
				err := db.Write(context.Background(), func(tx *storage.Tx) error {
					var err error
					r, err = ids.NextRange(tx, "orders", 32, "", "", 0)
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ranges = append(ranges, r)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, r := range ranges {
		for n := r.Low; n <= r.High; n++ {
			if seen[n] {
				t.Fatalf("id %d handed out twice", n)
			}
			seen[n] = true
		}
	}
}

func TestNextFreeFindsBoundaryWithinBound(t *testing.T) {
	for _, n := range []int64{1, 2, 3, 7, 100, 1337, 4096, 1_000_000, 1 << 40} {
		taken := func(v int64) (bool, error) { return v <= n, nil }
		v, probes, err := ids.NextFree(1, taken)
		if err != nil {
			t.Fatal(err)
		}
		if v != n+1 {
			t.Fatalf("n=%d: got %d", n, v)
		}
		// +1 for the caller's first probe of the incremented value.
		bound := 2*math.Log2(float64(n)) + 2
		if float64(probes+1) > bound && n > 1 {
			t.Fatalf("n=%d: %d probes > %.1f", n, probes+1, bound)
		}
	}
}

// With holes, the value found is free and above the start.
func TestNextFreeWithHoles(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for i := 0; i < 200; i++ {
		busy := map[int64]bool{}
		for j := 0; j < 500; j++ {
			busy[int64(r.Intn(600)+1)] = true
		}
		start := int64(r.Intn(600) + 1)
		busy[start] = true
		v, _, err := ids.NextFree(start, func(x int64) (bool, error) { return busy[x], nil })
		if err != nil || busy[v] || v <= start || !busy[v-1] {
			t.Fatalf("start %d: got %d (busy %v, prev busy %v)", start, v, busy[v], busy[v-1])
		}
	}
}

func TestTakeFreeNeverOverwrites(t *testing.T) {
	c := testserver.Cluster(t, "t")
	db := openDB(t)
	ctx := context.Background()
	exists := func(id string) (bool, error) {
		d, err := db.Get(ctx, id)
		return d != nil, err
	}
	take := func(prefixes ...string) []int64 {
		t.Helper()
		v, _, err := ids.TakeFree(ctx, c, "t", "/", exists, prefixes)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := take("companies|", "Companies|", "orders|"); fmt.Sprint(got) != "[1 2 1]" {
		t.Fatalf("first values %v", got)
	}
	// Documents written by hand at companies/3..companies/9.
	err := db.Write(ctx, func(tx *storage.Tx) error {
		for i := 3; i <= 9; i++ {
			p, _ := document.Parse([]byte(`{}`))
			if _, err := tx.Put(fmt.Sprintf("companies/%d", i), p, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := take("companies|"); got[0] != 10 {
		t.Fatalf("skipped to %v, want 10", got)
	}
	if got := c.Identities("t"); got["companies|"] != 10 || got["orders|"] != 1 {
		t.Fatalf("counters %v", got)
	}
	// Two prefixes of one batch landing on the same taken run get distinct values.
	if _, err := c.SeedIdentity(ctx, "t", "companies|", 2, true); err != nil {
		t.Fatal(err)
	}
	got := take("companies|", "companies|")
	if got[0] == got[1] || got[0] < 10 || got[1] < 10 {
		t.Fatalf("batch values %v", got)
	}
}

func TestSeedAndClaim(t *testing.T) {
	c := testserver.Cluster(t, "t")
	ctx := context.Background()
	seed := func(v int64, force bool) int64 {
		out, err := c.SeedIdentity(ctx, "t", "Companies", v, force)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if seed(100, false) != 100 || seed(50, false) != 100 || seed(50, true) != 50 {
		t.Fatal("seed semantics")
	}
	if v, _ := c.ClaimIdentity(ctx, "t", "companies|", 40); v != 51 {
		t.Fatalf("claim below the counter gives the next value, got %d", v)
	}
	if v, _ := c.ClaimIdentity(ctx, "t", "companies|", 70); v != 70 {
		t.Fatalf("claim above the counter moves it, got %d", v)
	}
	if _, err := c.NextIdentities(ctx, "nope", []string{"a|"}); err == nil {
		t.Fatal("identities of an unknown database")
	}
}

func BenchmarkNextFree1M(b *testing.B) {
	const n = 1_000_000
	probes := 0
	for i := 0; i < b.N; i++ {
		_, p, _ := ids.NextFree(1, func(v int64) (bool, error) { return v <= n, nil })
		probes = p + 1
	}
	b.ReportMetric(float64(probes), "probes")
}
