package client

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeRanges imitates the server's hilo/next rule (including range
// doubling) in memory, counting calls and checking what the client sends.
type fakeRanges struct {
	mu      sync.Mutex
	max     int64
	calls   atomic.Int64
	delay   time.Duration
	failN   atomic.Int64 // fail this many calls first
	bad     []string     // protocol violations seen
	lastReq hiloRequest
}

func (f *fakeRanges) fetch(ctx context.Context, r hiloRequest) (hiloResult, error) {
	f.calls.Add(1)
	if f.delay > 0 {
		time.Sleep(f.delay)
	}
	if f.failN.Add(-1) >= 0 {
		return hiloResult{}, errors.New("injected failure")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastReq = r
	if _, err := time.Parse(lastRangeAtFormat, r.LastRangeAt); err != nil {
		f.bad = append(f.bad, "lastRangeAt "+r.LastRangeAt)
	}
	capacity := max(32, r.LastBatchSize)
	if r.LastRangeAt != hiloEpoch {
		capacity = min(max(32, 2*r.LastBatchSize), 1<<20)
	}
	old := max(f.max, r.LastMax)
	f.max = old + capacity
	return hiloResult{Prefix: r.Tag + r.Separator, Low: old + 1, High: old + capacity, LastSize: capacity,
		ServerTag: "A", LastRangeAt: time.Now().UTC().Format("2006-01-02T15:04:05.0000000Z")}, nil
}

func TestHiLoSequentialIDs(t *testing.T) {
	f := &fakeRanges{}
	g := newHiLoGenerator("users", "/", f.fetch)
	ctx := context.Background()
	for i := 1; i <= 100; i++ {
		id, err := g.nextID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := "users/" + strconv.Itoa(i) + "-A"; id != want {
			t.Fatalf("id %d = %q, want %q", i, id, want)
		}
	}
	// ranges 32, 64, 128 → 3 fetches for 100 ids
	if n := f.calls.Load(); n != 3 {
		t.Errorf("%d fetches for 100 ids, want 3", n)
	}
	if f.lastReq.LastBatchSize != 64 || f.lastReq.LastMax != 96 {
		t.Errorf("third request carried lastBatchSize=%d lastMax=%d, want 64 and 96", f.lastReq.LastBatchSize, f.lastReq.LastMax)
	}
	if len(f.bad) > 0 {
		t.Errorf("bad requests: %v", f.bad)
	}
	end, last, ok := g.returnInfo()
	if !ok || end != 224 || last != 100 {
		t.Errorf("returnInfo = %d, %d, %v; want 224, 100", end, last, ok)
	}
}

// 64 goroutines take ids concurrently: every id is unique, and each
// exhaustion of a range causes exactly one fetch (singleflight).
func TestHiLoConcurrentSingleFlight(t *testing.T) {
	f := &fakeRanges{delay: 2 * time.Millisecond}
	g := newHiLoGenerator("orders", "/", f.fetch)
	const workers, perWorker = 64, 2000
	ids := make([][]string, workers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range perWorker {
				id, err := g.nextID(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				ids[w] = append(ids[w], id)
			}
		}()
	}
	close(start)
	wg.Wait()
	seen := make(map[string]bool, workers*perWorker)
	var maxN int64
	for _, list := range ids {
		for _, id := range list {
			if seen[id] {
				t.Fatalf("duplicate id %s", id)
			}
			seen[id] = true
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(id, "orders/"), "-A"), 10, 64)
			maxN = max(maxN, n)
		}
	}
	total := int64(workers * perWorker)
	if int64(len(seen)) != total {
		t.Fatalf("%d unique ids, want %d", len(seen), total)
	}
	// Ranges double: 32·(2^k − 1) ≥ 128000 needs k = 12 fetches. A
	// second fetch for the same exhaustion would add more (and skip numbers).
	var want int64
	for covered := int64(0); covered < total; want++ {
		covered += 32 << want
	}
	if n := f.calls.Load(); n != want {
		t.Errorf("%d fetches, want exactly %d (one per exhausted range)", n, want)
	}
	if maxN > 32*((1<<want)-1) {
		t.Errorf("largest id %d beyond the ranges fetched", maxN)
	}
}

// A failed fetch fails the callers waiting for it; the next caller fetches
// again and succeeds.
func TestHiLoFailedFetchIsRetried(t *testing.T) {
	f := &fakeRanges{}
	f.failN.Store(1)
	g := newHiLoGenerator("users", "/", f.fetch)
	if _, err := g.nextID(context.Background()); err == nil {
		t.Fatal("expected the injected failure")
	}
	id, err := g.nextID(context.Background())
	if err != nil || id != "users/1-A" {
		t.Fatalf("retry gave %q, %v", id, err)
	}
	if n := f.calls.Load(); n != 2 {
		t.Errorf("%d fetches, want 2", n)
	}
}

// Concurrent waiters of a failing fetch all see an error, and the fetch
// is not repeated by each of them at once.
func TestHiLoConcurrentFailure(t *testing.T) {
	f := &fakeRanges{delay: 20 * time.Millisecond}
	f.failN.Store(1)
	g := newHiLoGenerator("users", "/", f.fetch)
	var wg sync.WaitGroup
	var failed, ok atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := g.nextID(context.Background()); err != nil {
				failed.Add(1)
			} else {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if failed.Load() == 0 {
		t.Error("no caller saw the failure")
	}
	if failed.Load()+ok.Load() != 16 {
		t.Errorf("results: %d failed, %d ok", failed.Load(), ok.Load())
	}
	if n := f.calls.Load(); n > 2 {
		t.Errorf("%d fetches for one failure and one retry", n)
	}
}

func TestHiLoWaiterContextCancel(t *testing.T) {
	release := make(chan struct{})
	g := newHiLoGenerator("users", "/", func(ctx context.Context, r hiloRequest) (hiloResult, error) {
		<-release
		return hiloResult{Prefix: "users/", Low: 1, High: 32, LastSize: 32, ServerTag: "A"}, nil
	})
	go func() { _, _ = g.nextID(context.Background()) }()
	time.Sleep(10 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := g.nextID(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiter error %v, want deadline exceeded", err)
	}
	close(release)
}

func TestHiLoQuery(t *testing.T) {
	q := hiloQuery(hiloRequest{Tag: "users", Separator: "/", LastRangeAt: hiloEpoch})
	want := "lastBatchSize=0&tag=users&lastRangeAt=1970-01-01T00%3A00%3A00.0000000Z&identityPartsSeparator=/&lastMax=0"
	if q != want {
		t.Errorf("query\n got %s\nwant %s", q, want)
	}
	if got := formatRangeAt("2026-11-22T10:50:30.856Z"); got != "2026-11-22T10:50:30.8560000Z" {
		t.Errorf("formatRangeAt = %s", got)
	}
	if got := formatRangeAt("2024-05-01T12:34:56.1234567Z"); got != "2024-05-01T12:34:56.1234567Z" {
		t.Errorf("formatRangeAt = %s", got)
	}
}

// BenchmarkHiLoFastPath measures taking an id from a range that is not
// exhausted, including building the "prefix + n + '-' + tag" string.
func BenchmarkHiLoFastPath(b *testing.B) {
	g := newHiLoGenerator("orders", "/", func(ctx context.Context, r hiloRequest) (hiloResult, error) {
		return hiloResult{Prefix: "orders/", Low: r.LastMax + 1, High: r.LastMax + 1<<40, LastSize: 1 << 40, ServerTag: "A"}, nil
	})
	ctx := context.Background()
	if _, err := g.nextID(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var sink string
	for b.Loop() {
		sink, _ = g.nextID(ctx)
	}
	_ = sink
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
}

// BenchmarkHiLoFastPathParallel is the fast path from GOMAXPROCS goroutines.
func BenchmarkHiLoFastPathParallel(b *testing.B) {
	g := newHiLoGenerator("orders", "/", func(ctx context.Context, r hiloRequest) (hiloResult, error) {
		return hiloResult{Prefix: "orders/", Low: r.LastMax + 1, High: r.LastMax + 1<<40, LastSize: 1 << 40, ServerTag: "A"}, nil
	})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.nextID(ctx); err != nil {
				panic(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
}

// BenchmarkHiLoWithRangeDoubling takes ids through range exhaustion with the
// server's doubling rule (fetches in memory) and reports fetches per 1M ids.
func BenchmarkHiLoWithRangeDoubling(b *testing.B) {
	f := &fakeRanges{}
	g := newHiLoGenerator("orders", "/", f.fetch)
	ctx := context.Background()
	for b.Loop() {
		if _, err := g.nextID(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(f.calls.Load())/float64(b.N)*1e6, "fetches/1Mids")
}
