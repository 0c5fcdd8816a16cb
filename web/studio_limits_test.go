package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

// putHuge stores a document of about size bytes straight into the
// database, as one stored before the document limit existed (or arriving
// by replication from a node with a higher one) would be.
func putHuge(t *testing.T, srv *Server, dbName, id string, size int) {
	t.Helper()
	db, err := srv.Catalog().Get(dbName)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(docReader(int64(size)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := document.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	raw = nil
	if err := db.Write(context.Background(), func(tx *storage.Tx) error {
		_, err := tx.Put(id, p, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// allocated is the bytes the Go heap has handed out so far (all
// goroutines): a coarse but monotonic measure of what a step cost.
func allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

func getPage(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// Finding 10: one 100 MB document made a grid page take 1 s and 200 MB.
// Now the grid reads a bounded prefix of each body in SQL, so rendering the
// page allocates a few megabytes, and the page stays small; the document's
// own page shows a preview and a download link instead of 100 MB of
// indented JSON.
func TestSecurityF10StudioPagesReadBoundedPrefix(t *testing.T) {
	srv, base := startNodeWith(t, Config{})
	createDB(t, base, "huge")
	putHuge(t, srv, "huge", "big/1", 100<<20/scale)
	post(t, base+"/databases/huge/bulk_docs", `{"Commands":[{"Id":"small/1","Type":"PUT","Document":{"Name":"small","@metadata":{"@collection":"Big"}}}]}`)
	runtime.GC()

	before := allocated()
	status, page := getPage(t, base+"/studio/db/huge/documents?collection=Big")
	grid := allocated() - before
	if status != http.StatusOK || !strings.Contains(string(page), "big/1") || !strings.Contains(string(page), "small/1") {
		t.Fatalf("grid: %d, rows missing", status)
	}
	t.Logf("grid page: %d bytes, %d MB allocated", len(page), grid>>20)
	if len(page) > 256<<10 {
		t.Fatalf("grid page is %d bytes", len(page))
	}
	if !strings.Contains(string(page), strings.Repeat("a", 40)+"…") {
		t.Fatal("the grid does not show the start of the cut value")
	}
	if grid > 32<<20 {
		t.Fatalf("rendering the grid allocated %d MB (the document is 100 MB)", grid>>20)
	}

	before = allocated()
	status, page = getPage(t, base+"/studio/db/huge/doc?id=big/1")
	doc := allocated() - before
	t.Logf("document page: %d bytes, %d MB allocated", len(page), doc>>20)
	if status != http.StatusOK || !strings.Contains(string(page), `data-testid="doc-download"`) || !strings.Contains(string(page), "/databases/huge/docs?id=big%2F1") {
		t.Fatalf("document page: %d, no download link", status)
	}
	if strings.Contains(string(page), `data-testid="doc-editor"`) {
		t.Fatal("a 100 MB document is offered in the editor")
	}
	if len(page) > 256<<10 || doc > 32<<20 {
		t.Fatalf("document page is %d bytes and allocated %d MB", len(page), doc>>20)
	}
	// The download link serves the whole document.
	resp, err := http.Get(base + "/databases/huge/docs?id=big%2F1")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || n < 100<<20/scale {
		t.Fatalf("download: %d, %d bytes", resp.StatusCode, n)
	}
}

// Finding 10: 1,000 live pages with two 200 MB documents took the process
// to 13.7 GB. Many live grid pages with two huge documents now cost a
// bounded amount per refresh: the renders read prefixes, pages showing the
// same thing share one render, and the messages stay small.
func TestSecurityF10LivePagesWithHugeDocumentsStayBounded(t *testing.T) {
	srv, base := startNodeWith(t, Config{})
	createDB(t, base, "huge")
	putHuge(t, srv, "huge", "big/1", 100<<20/scale)
	putHuge(t, srv, "huge", "big/2", 100<<20/scale)
	runtime.GC()

	const pages = 40
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	got := make([]int, pages)  // messages with the grid, per page
	size := make([]int, pages) // largest message, per page
	var wg sync.WaitGroup
	for i := 0; i < pages; i++ {
		conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/studio/live?page=documents&db=huge&collection=Big", nil)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetReadLimit(4 << 20)
		defer conn.CloseNow()
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for {
				_, data, err := conn.Read(ctx)
				if err != nil {
					return
				}
				var m liveMsg
				if json.Unmarshal(data, &m) != nil {
					continue
				}
				for _, f := range m.Fragments {
					if f.ID == "documents-grid" && strings.Contains(f.HTML, "big/2") {
						mu.Lock()
						got[i]++
						size[i] = max(size[i], len(data))
						mu.Unlock()
					}
				}
			}
		}(i)
	}
	waitAll := func(n int) {
		deadline := time.Now().Add(90 * time.Second)
		for {
			mu.Lock()
			low := got[0]
			for _, g := range got {
				low = min(low, g)
			}
			mu.Unlock()
			if low >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("pages got %v grid messages, want %d each", got, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitAll(1)
	before := allocated()
	for r := 0; r < 3; r++ {
		post(t, base+"/databases/huge/bulk_docs", fmt.Sprintf(`{"Commands":[{"Id":"small/%d","Type":"PUT","Document":{"n":%d,"@metadata":{"@collection":"Big"}}}]}`, r, r))
		waitAll(2 + r)
	}
	spent := allocated() - before
	t.Logf("%d pages, 3 refreshes: %d MB allocated, largest message %d bytes", pages, spent>>20, max(size[0], size[pages-1]))
	// Each refresh of each page used to read both documents whole: 40 × 3
	// × 200 MB = 24 GB. The bound leaves room for the writes themselves
	// and the websocket traffic.
	if spent > 256<<20 {
		t.Fatalf("%d pages × 3 refreshes allocated %d MB", pages, spent>>20)
	}
	for i, s := range size {
		if s > defaultMaxLiveMessage {
			t.Fatalf("page %d got a %d-byte message", i, s)
		}
	}
	cancel()
	wg.Wait()
}

// Pages over --max-live-pages are refused (503) and stay static; one that
// closes frees its place.
func TestLivePagesCapped(t *testing.T) {
	srv, base := startNodeWith(t, Config{MaxLivePages: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(base, "http") + "/studio/live?page=databases"
	a, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.CloseNow()
	b, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.CloseNow()
	_, resp, err := websocket.Dial(ctx, url, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("third page: %v %v", err, resp)
	}
	a.Close(websocket.StatusNormalClosure, "")
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, _, err := websocket.Dial(ctx, url, nil)
		if err == nil {
			c.CloseNow()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a freed place was not given out: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if srv.hub.maxClients != 2 {
		t.Fatal("cap not applied")
	}
}
