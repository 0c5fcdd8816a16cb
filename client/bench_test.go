package client

import (
	"context"
	"testing"

	"github.com/rookerydb/rookery/internal/testserver"
)

// BenchmarkHiLoServer takes b.N ids from a real node, range fetches
// included, and reports ids/s and hilo/next requests per million ids.
func BenchmarkHiLoServer(b *testing.B) {
	n := testserver.Start(b)
	store, _ := newStore(b, []string{n.URL})
	ctx := context.Background()
	if _, err := store.GenerateID(ctx, "warmup"); err != nil {
		b.Fatal(err)
	}
	start := store.HiLoRequests()
	for b.Loop() {
		if _, err := store.GenerateID(ctx, "users"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
	b.ReportMetric(float64(store.HiLoRequests()-start)*1e6/float64(b.N), "hilo-requests/1Mids")
}

// BenchmarkSaveChanges stores 1000 small documents per unit of work.
func BenchmarkSaveChanges(b *testing.B) {
	n := testserver.Start(b)
	store, _ := newStore(b, []string{n.URL})
	const batch = 1000
	for b.Loop() {
		s := store.OpenSession()
		for i := range batch {
			if err := s.Store(&Order{Company: "companies/1", Total: float64(i), Lines: []OrderLine{{ID: "x"}}}); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.SaveChanges(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "docs/s")
}

// BenchmarkLoadCached loads one document in a new session each time; after
// the first, the answer is a 304 from the HTTP cache.
func BenchmarkLoadCached(b *testing.B) {
	n := testserver.Start(b)
	store, _ := newStore(b, []string{n.URL})
	s := store.OpenSession()
	_ = s.StoreWithID(&User{Name: "bench"}, "users/bench")
	if err := s.SaveChanges(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		u, err := Load[User](store.OpenSession(), "users/bench")
		if err != nil || u == nil {
			b.Fatal(u, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "loads/s")
}
