package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func startNode(t *testing.T) (*Server, string) {
	t.Helper()
	srv, err := New(Config{DataDir: t.TempDir(), NodeTag: "A", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return srv, "http://" + l.Addr().String()
}

func post(t *testing.T, url, body string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, b)
	}
}

func createDB(t *testing.T, base, name string) {
	req, _ := http.NewRequest("PUT", base+"/admin/databases?name="+name, strings.NewReader(`{"DatabaseName":"`+name+`"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create db: %v %v", err, resp)
	}
	resp.Body.Close()
}

type liveMsg struct {
	Fragments []struct{ ID, HTML string }
}

// A burst of writes reaches a page as a few coalesced messages, and the last
// one carries the final numbers.
func TestLiveCoalescesBursts(t *testing.T) {
	srv, base := startNode(t)
	createDB(t, base, "burst")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/studio/live?page=databases", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	var mu sync.Mutex
	var msgs []liveMsg
	go func() {
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			var m liveMsg
			if json.Unmarshal(data, &m) == nil {
				mu.Lock()
				msgs = append(msgs, m)
				mu.Unlock()
			}
		}
	}()
	time.Sleep(400 * time.Millisecond) // the initial push
	mu.Lock()
	initial := len(msgs)
	mu.Unlock()
	if initial == 0 {
		t.Fatal("no initial live message")
	}
	// 20,000 documents in 400 requests of 50.
	const requests, per = 400, 50
	start := time.Now()
	for r := 0; r < requests; r++ {
		var cmds []string
		for i := 0; i < per; i++ {
			cmds = append(cmds, fmt.Sprintf(`{"Id":"d/%d","Type":"PUT","Document":{"@metadata":{"@collection":"D"}}}`, r*per+i))
		}
		post(t, base+"/databases/burst/bulk_docs", `{"Commands":[`+strings.Join(cmds, ",")+`]}`)
	}
	elapsed := time.Since(start)
	deadline := time.Now().Add(5 * time.Second)
	for {
		// The final count arrives once: later messages (the per-second
		// rates) carry only the regions that changed again.
		mu.Lock()
		n := len(msgs) - initial
		found := false
		for _, m := range msgs[initial:] {
			for _, f := range m.Fragments {
				if f.ID == "databases-table" && strings.Contains(f.HTML, ">20,000<") {
					found = true
				}
			}
		}
		mu.Unlock()
		if found {
			// Coalesced: at most ~4 a second (plus the once-a-second rate
			// ticks), never one per write.
			limit := int(elapsed.Seconds()*4) + 8
			if n > limit {
				t.Fatalf("%d messages for %d write requests in %v (limit %d)", n, requests, elapsed, limit)
			}
			t.Logf("%d live messages for %d write requests (%d documents) in %v", n, requests, requests*per, elapsed)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed 20,000 documents in %d messages", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if srv.hub.Clients() != 1 {
		t.Fatalf("clients %d", srv.hub.Clients())
	}
}

// A browser that stops reading is dropped instead of holding anything up.
func TestLiveDropsSlowReader(t *testing.T) {
	srv, base := startNode(t)
	srv.hub.minInterval = 0
	srv.hub.writeTimeout = 200 * time.Millisecond
	// Nothing changes below, and unchanged regions are not sent: make every
	// wake-up a message again, so the page has something not to read.
	srv.hub.ResendUnchanged(true)
	for i := 0; i < 40; i++ {
		createDB(t, base, fmt.Sprintf("db%02d", i)) // a larger table to push
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/studio/live?page=databases", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	// Dial returns on the 101 answer, a moment before the hub registers
	// the page: wait for it, or the loop below would end at once.
	deadline := time.Now().Add(30 * time.Second)
	for srv.hub.Clients() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the page never registered")
		}
		time.Sleep(time.Millisecond)
	}
	// Never read. Keep notifying; Notify itself must never block.
	for srv.hub.Clients() > 0 {
		srv.hub.Notify("")
		if time.Now().After(deadline) {
			t.Fatal("the stalled page was never dropped")
		}
		time.Sleep(time.Millisecond)
	}
	if got := testutil.ToFloat64(srv.hub.dropped); got < 1 {
		t.Fatalf("dropped counter %v", got)
	}
	// The node still serves.
	post(t, base+"/databases/db00/bulk_docs", `{"Commands":[{"Id":"x","Type":"PUT","Document":{}}]}`)
}

// liveReader collects a live page's messages as they arrive.
type liveReader struct {
	mu   sync.Mutex
	msgs []liveMsg
	raw  []int // size of each message
}

func dialLive(t *testing.T, ctx context.Context, base, query string) *liveReader {
	t.Helper()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/studio/live?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.CloseNow() })
	r := &liveReader{}
	go func() {
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			var m liveMsg
			if json.Unmarshal(data, &m) == nil {
				r.mu.Lock()
				r.msgs = append(r.msgs, m)
				r.raw = append(r.raw, len(data))
				r.mu.Unlock()
			}
		}
	}()
	return r
}

func (r *liveReader) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

// wait returns message n (0-based), waiting for it up to 10 s.
func (r *liveReader) wait(t *testing.T, n int) liveMsg {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		if len(r.msgs) > n {
			m := r.msgs[n]
			r.mu.Unlock()
			return m
		}
		r.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("message %d never came (%d so far)", n, r.count())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func fragIDs(m liveMsg) []string {
	var ids []string
	for _, f := range m.Fragments {
		ids = append(ids, f.ID)
	}
	return ids
}

func fragHTML(m liveMsg, id string) (string, bool) {
	for _, f := range m.Fragments {
		if f.ID == id {
			return f.HTML, true
		}
	}
	return "", false
}

// quiet asserts a page gets no message for d.
func (r *liveReader) quiet(t *testing.T, d time.Duration, what string) {
	t.Helper()
	n := r.count()
	time.Sleep(d)
	if got := r.count(); got != n {
		r.mu.Lock()
		extra := r.msgs[n]
		r.mu.Unlock()
		t.Fatalf("%s: %d messages, want none; the first carried %v", what, got-n, fragIDs(extra))
	}
}

// A page is sent only the regions whose rendered bytes changed since its
// previous message, and no message at all when none did; the first message
// after connecting carries every region.
func TestLiveSendsOnlyChangedRegions(t *testing.T) {
	srv, base := startNode(t)
	createDB(t, base, "quiet")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	page := dialLive(t, ctx, base, "page=documents&db=quiet")
	first := page.wait(t, 0)
	for _, id := range []string{"alerts-area", "nav-conflicts-badge", "collections-list", "documents-count", "documents-grid"} {
		if _, ok := fragHTML(first, id); !ok {
			t.Fatalf("first message lacks %s: %v", id, fragIDs(first))
		}
	}
	// Wake-ups that change nothing the page shows send nothing.
	for i := 0; i < 5; i++ {
		srv.hub.Notify("quiet")
		srv.hub.Notify("")
		time.Sleep(100 * time.Millisecond)
	}
	page.quiet(t, 700*time.Millisecond, "after wake-ups with nothing changed")
	if n := page.count(); n != 1 {
		t.Fatalf("%d messages after wake-ups that changed nothing, want only the first", n)
	}

	post(t, base+"/databases/quiet/bulk_docs", `{"Commands":[{"Id":"notes/1","Type":"PUT","Document":{"@metadata":{"@collection":"Notes"}}}]}`)
	m := page.wait(t, 1)
	if html, ok := fragHTML(m, "documents-grid"); !ok || !strings.Contains(html, "notes/1") {
		t.Fatalf("the write's message: %v", fragIDs(m))
	}
	for _, id := range []string{"alerts-area", "nav-conflicts-badge"} {
		if _, ok := fragHTML(m, id); ok {
			t.Fatalf("the write's message carries the unchanged %s: %v", id, fragIDs(m))
		}
	}
	// The counter moves after the frame is written, so the page may read
	// the frame first: wait for it, then it must be exactly 2.
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(srv.hub.sent) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := testutil.ToFloat64(srv.hub.sent); got != 2 {
		t.Fatalf("messages counted %v, want 2", got)
	}
}

// Pages showing the same thing share one render, yet each gets its own
// diff: a page that connects later gets every region, and the pages
// already open get nothing for its arrival.
func TestLiveSharedRenderKeepsPerPageDiffs(t *testing.T) {
	srv, base := startNode(t)
	createDB(t, base, "shared")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const q = "page=documents&db=shared"
	a := dialLive(t, ctx, base, q)
	a.wait(t, 0)
	post(t, base+"/databases/shared/bulk_docs", `{"Commands":[{"Id":"notes/1","Type":"PUT","Document":{"@metadata":{"@collection":"Notes"}}}]}`)
	if m := a.wait(t, 1); len(m.Fragments) == 0 || len(m.Fragments) >= len(a.wait(t, 0).Fragments) {
		t.Fatalf("a's update carries %v", fragIDs(m))
	}
	b := dialLive(t, ctx, base, q)
	bf := b.wait(t, 0)
	af := a.wait(t, 0)
	if len(bf.Fragments) != len(af.Fragments) {
		t.Fatalf("the later page's first message carries %v, the first page's %v", fragIDs(bf), fragIDs(af))
	}
	if html, _ := fragHTML(bf, "documents-grid"); !strings.Contains(html, "notes/1") {
		t.Fatal("the later page's first message lacks the current grid")
	}
	a.quiet(t, 600*time.Millisecond, "the first page, when another connected")

	// One more write reaches both, as the same few regions, from one render.
	srv.hub.mu.Lock()
	keys := len(srv.hub.keys)
	srv.hub.mu.Unlock()
	if keys != 1 {
		t.Fatalf("%d render keys for two pages showing the same thing", keys)
	}
	post(t, base+"/databases/shared/bulk_docs", `{"Commands":[{"Id":"notes/2","Type":"PUT","Document":{"@metadata":{"@collection":"Notes"}}}]}`)
	ma, mb := a.wait(t, 2), b.wait(t, 1)
	if strings.Join(fragIDs(ma), ",") != strings.Join(fragIDs(mb), ",") {
		t.Fatalf("the same change reached the pages as %v and %v", fragIDs(ma), fragIDs(mb))
	}
	if _, ok := fragHTML(ma, "alerts-area"); ok {
		t.Fatalf("unchanged alerts area sent again: %v", fragIDs(ma))
	}
	if html, _ := fragHTML(mb, "documents-grid"); !strings.Contains(html, "notes/2") {
		t.Fatalf("b's update lacks the new document: %v", fragIDs(mb))
	}
}
