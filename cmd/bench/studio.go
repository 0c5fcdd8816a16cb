package main

import (
	"context"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

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

// liveIdle measures what an idle live studio tab costs on the wire: a node
// with a realistic database (docs documents, 300 stored conflicts, 35
// subscriptions, an index), every live page opened as the browser opens it
// (its data-live websocket URL), the first message waited out, then the
// bytes received over window with no writes. It runs twice in the same
// process: as the hub works now (a region only when its rendered bytes
// changed) and with every region resent on every wake-up (how it was
// before), and reports both and their ratio. Target: ≤ 20 KB/s per tab.
func liveIdle(out io.Writer, dir string, docs int, window time.Duration) error {
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	base := "http://" + l.Addr().String()
	srv, err := web.New(web.Config{DataDir: filepath.Join(dir, "live"), NodeTag: "A", PublicURL: base, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		return err
	}
	go srv.Serve(l)
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	call := func(method, path, body string, want int) error {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			return fmt.Errorf("%s %s: %d %.300s", method, path, resp.StatusCode, b)
		}
		return nil
	}
	const dbName, conflicted, subs = "ops", 300, 35
	if err := call("PUT", "/admin/databases?name="+dbName, `{"DatabaseName":"`+dbName+`"}`, 201); err != nil {
		return err
	}
	// Keep conflicts as they arrive (no automatic resolution).
	if err := call("POST", "/admin/replication/conflicts/solver?name="+dbName, `{"ResolveToLatest":false}`, 200); err != nil {
		return err
	}
	db, err := srv.Catalog().Get(dbName)
	if err != nil {
		return err
	}
	put := func(sdb *storage.DB, from, to int, prefix, coll, origin string) error {
		return sdb.Write(ctx, func(tx *storage.Tx) error {
			for j := from; j < to; j++ {
				p, err := document.Parse([]byte(fmt.Sprintf(`{"Name":"Item %d","Price":%d.5,"From":%q,"Supplier":{"Name":"S%d","City":"Lyon"},"@metadata":{"@collection":%q}}`, j, j%1000, origin, j%97, coll)))
				if err != nil {
					return err
				}
				if _, err := tx.Put(fmt.Sprintf("%s/%d", prefix, j), p, nil); err != nil {
					return err
				}
			}
			return nil
		})
	}
	for i := 0; i < docs; i += 20_000 {
		if err := put(db, i, min(i+20_000, docs), "items", "Items", "A"); err != nil {
			return err
		}
	}
	if err := put(db, 0, conflicted, "carts", "Carts", "A"); err != nil {
		return err
	}
	// The same carts written on another copy meet A's versions: conflicts.
	other, err := storage.Open(filepath.Join(dir, "live-other.db"), storage.Options{Name: dbName, NodeTag: "B", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer other.Close()
	if err := put(other, 0, conflicted, "carts", "Carts", "B"); err != nil {
		return err
	}
	if _, err := storage.Exchange(ctx, other, db, 1024); err != nil {
		return err
	}
	if n, err := db.ConflictCount(ctx); err != nil || n != conflicted {
		return fmt.Errorf("conflicts stored: %d, %v (want %d)", n, err, conflicted)
	}
	for i := 1; i <= subs; i++ {
		if err := call("PUT", "/databases/"+dbName+"/subscriptions", fmt.Sprintf(`{"Query":"from Items","Name":"feed-%d"}`, i), 201); err != nil {
			return err
		}
	}
	if err := call("PUT", "/databases/"+dbName+"/admin/indexes", `{"Indexes":[{"Name":"Items/ByName","Maps":["map('Items', i => ({ Name: i.Name, City: i.Supplier.City }))"]}]}`, 201); err != nil {
		return err
	}
	// Let the index catch up and the writes above settle: the tabs are
	// measured idle.
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(base + "/databases/" + dbName + "/indexes/stats")
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `"IsStale":true`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)

	pages := []string{
		"/studio/", "/studio/databases", "/studio/cluster", "/studio/certificates",
		"/studio/db/ops/documents", "/studio/db/ops/documents?collection=Items", "/studio/db/ops/conflicts",
		"/studio/db/ops/hilo", "/studio/db/ops/identities", "/studio/db/ops/stats", "/studio/db/ops/replication",
		"/studio/db/ops/subscriptions", "/studio/db/ops/subscriptions/feed-1", "/studio/db/ops/indexes",
		"/studio/db/ops/index?name=" + url.QueryEscape("Items/ByName"),
	}
	// Each page's websocket URL, as its script reads it from the page.
	liveRE := regexp.MustCompile(`data-live="([^"]+)"`)
	var live []string
	var urls []string
	for _, p := range pages {
		resp, err := http.Get(base + p)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("GET %s: %d", p, resp.StatusCode)
		}
		m := liveRE.FindSubmatch(b)
		if m == nil {
			continue // not a live page
		}
		live = append(live, p)
		urls = append(urls, "ws://"+l.Addr().String()+html.UnescapeString(string(m[1])))
	}
	measure := func() ([]float64, []int, error) {
		mctx, cancel := context.WithTimeout(ctx, window+time.Minute)
		defer cancel()
		var conns []*websocket.Conn
		defer func() {
			for _, c := range conns {
				c.CloseNow()
			}
		}()
		for _, u := range urls {
			c, _, err := websocket.Dial(mctx, u, nil)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", u, err)
			}
			c.SetReadLimit(4 << 20)
			conns = append(conns, c)
			if _, _, err := c.Read(mctx); err != nil { // the first message: everything
				return nil, nil, fmt.Errorf("%s: first message: %w", u, err)
			}
		}
		bytes := make([]atomic.Int64, len(conns))
		msgs := make([]atomic.Int64, len(conns))
		var wg sync.WaitGroup
		start := time.Now()
		for i, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					_, data, err := c.Read(mctx)
					if err != nil {
						return
					}
					if time.Since(start) <= window {
						bytes[i].Add(int64(len(data)))
						msgs[i].Add(1)
					}
				}
			}()
		}
		time.Sleep(window)
		for _, c := range conns {
			c.CloseNow()
		}
		wg.Wait()
		rates := make([]float64, len(conns))
		counts := make([]int, len(conns))
		for i := range conns {
			rates[i] = float64(bytes[i].Load()) / window.Seconds()
			counts[i] = int(msgs[i].Load())
		}
		return rates, counts, nil
	}
	now, nowMsgs, err := measure()
	if err != nil {
		return err
	}
	srv.LiveHub().ResendUnchanged(true)
	before, beforeMsgs, err := measure()
	srv.LiveHub().ResendUnchanged(false)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "(%d documents, %d conflicts, %d subscriptions, 1 index; each tab idle %v after its first message)\n", docs, conflicted, subs, window)
	fmt.Fprintf(out, "%-56s %22s %28s\n", "live page", "changed regions only", "every region (before)")
	worst, worstBefore := 0.0, 0.0
	for i, p := range live {
		fmt.Fprintf(out, "%-56s %10.0f B/s %4d msg %14.0f B/s %4d msg\n", p, now[i], nowMsgs[i], before[i], beforeMsgs[i])
		worst, worstBefore = max(worst, now[i]), max(worstBefore, before[i])
	}
	verdict := "ok"
	if worst > 20*1024 {
		verdict = "OVER the 20 KB/s target"
	}
	ratio := "nothing sent now"
	if worst > 0 {
		ratio = fmt.Sprintf("%.1fx less", worstBefore/worst)
	}
	fmt.Fprintf(out, "bytes per second per idle live tab, worst: %.0f B/s (target ≤ 20 KB/s: %s); before: %.0f B/s; %s\n", worst, verdict, worstBefore, ratio)
	return nil
}
