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
		mu.Lock()
		last := msgs[len(msgs)-1]
		n := len(msgs) - initial
		mu.Unlock()
		found := false
		for _, f := range last.Fragments {
			if f.ID == "databases-table" && strings.Contains(f.HTML, ">20,000<") {
				found = true
			}
		}
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
			t.Fatalf("the page never showed 20,000 documents; last message: %+v", last)
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
