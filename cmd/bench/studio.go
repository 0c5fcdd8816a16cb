package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/ids"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/web"
)

// studioPages measures server-side render times of every studio page with n
// documents in one collection: the handler is called in-process, so the
// figure is the server's work, not the network's.
func studioPages(out io.Writer, dir string, n, samples int) error {
	srv, err := web.New(web.Config{DataDir: filepath.Join(dir, "studio"), NodeTag: "A", PublicURL: "http://bench.local", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		return err
	}
	defer srv.Close()
	if err := srv.Catalog().CreateInCluster(context.Background(), srv.Cluster(), cluster.Database{Name: "big", Members: []string{"A"}}, "A"); err != nil {
		return err
	}
	db, err := srv.Catalog().Get("big")
	if err != nil {
		return err
	}
	ctx := context.Background()
	start := time.Now()
	const chunk = 20_000
	for i := 1; i <= n; i += chunk {
		err := db.Write(ctx, func(tx *storage.Tx) error {
			for j := i; j < min(i+chunk, n+1); j++ {
				body := fmt.Sprintf(`{"Name":"Item %d","Price":%d.5,"Tags":["a","b"],"Supplier":{"Name":"S%d","City":"Lyon"},"@metadata":{"@collection":"Items"}}`, j, j%1000, j%97)
				p, err := document.Parse([]byte(body))
				if err != nil {
					return err
				}
				if _, err := tx.Put("items/"+strconv.Itoa(j)+"-A", p, nil); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	// A HiLo document and a few identities, so those pages have rows.
	err = db.Write(ctx, func(tx *storage.Tx) error {
		if _, err := ids.NextRange(tx, "items", 0, "", "", int64(n)); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, p := range []string{"orders", "invoices", "companies"} {
		if _, err := srv.Cluster().SeedIdentity(ctx, "big", p, 1000, false); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "(filled %d documents in %v)\n", n, time.Since(start).Round(time.Millisecond))
	mid := db.LastEtag() / 2
	pages := []string{
		"/studio/",
		"/studio/databases",
		"/studio/db/big/documents",
		"/studio/db/big/documents?collection=Items",
		"/studio/db/big/documents?collection=Items&before=" + strconv.FormatInt(mid, 10),
		"/studio/db/big/documents?collection=Items&prefix=" + url.QueryEscape("items/5"),
		"/studio/db/big/doc?id=" + url.QueryEscape("items/"+strconv.Itoa(n/2)+"-A"),
		"/studio/db/big/hilo",
		"/studio/db/big/identities",
		"/studio/db/big/stats",
	}
	h := srv.Handler()
	worst := 0.0
	for _, p := range pages {
		times := make([]float64, 0, samples)
		for i := 0; i < samples; i++ {
			req := httptest.NewRequest(http.MethodGet, p, nil)
			req.RemoteAddr = "127.0.0.1:40000" // an unsecured node serves loopback callers
			rec := httptest.NewRecorder()
			t0 := time.Now()
			h.ServeHTTP(rec, req)
			times = append(times, float64(time.Since(t0).Microseconds())/1000)
			if rec.Code != http.StatusOK {
				return fmt.Errorf("GET %s: %d %.200s", p, rec.Code, rec.Body.String())
			}
		}
		sort.Float64s(times)
		p50, p99 := times[len(times)/2], times[min(len(times)-1, len(times)*99/100)]
		worst = max(worst, p50)
		fmt.Fprintf(out, "%-72s p50 %6.2f ms  p99 %6.2f ms\n", p, p50, p99)
	}
	verdict := "ok"
	if worst >= 50 {
		verdict = "OVER the 50 ms target"
	}
	fmt.Fprintf(out, "slowest page p50: %.2f ms (target < 50 ms: %s)\n", worst, verdict)
	return nil
}
