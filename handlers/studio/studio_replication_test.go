package studio_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/web"
)

// replNode is an in-process node with replication on, listening on a real
// loopback port, that can be stopped and started again on the same
// addresses and data.
type replNode struct {
	tag, dir, addr, raft, join string
	srv                        *web.Server
	done                       chan struct{}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (n *replNode) url() string { return "http://" + n.addr }

func (n *replNode) start(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Config{HTTPAddr: n.addr, RaftAddr: n.raft, DataDir: n.dir, NodeTag: n.tag, Join: n.join, Replication: true, AllowedHosts: []string{"example.com"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 150 * time.Millisecond, HistoryInterval: time.Second})
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	n.srv, n.done = srv, make(chan struct{})
	go func() { srv.Serve(l); close(n.done) }()
}

func (n *replNode) stop() {
	if n.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n.srv.Shutdown(ctx)
	<-n.done
	n.srv = nil
}

func apiCall(t *testing.T, method, url, body string, want int) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
}

var replRowRE = regexp.MustCompile(`(?s)<tbody data-testid="replication-row" data-destination="([A-Z]+)" data-state="([a-z ]+)".*?</tbody>`)

// replRow is the HTML of one destination's row, and its state.
func replRow(body, dest string) (row, state string) {
	for _, m := range replRowRE.FindAllStringSubmatch(body, -1) {
		if m[1] == dest {
			return m[0], m[2]
		}
	}
	return "", ""
}

func attr(row, testid, name string) string {
	m := regexp.MustCompile(`data-testid="` + testid + `"[^>]*` + name + `="([^"]*)"`).FindStringSubmatch(row)
	if m == nil {
		return ""
	}
	return m[1]
}

// TestStudioReplicationPage drives the Replication page of a real
// two-node cluster through the node's router: the destination in sync (0
// behind), then down (state, last error, exactly the documents it lacks,
// their age, and the matrix cell A → B saying the same), then back (0
// again).
func TestStudioReplicationPage(t *testing.T) {
	base := t.TempDir()
	a := &replNode{tag: "A", dir: filepath.Join(base, "A"), addr: freeAddr(t), raft: freeAddr(t)}
	a.start(t)
	b := &replNode{tag: "B", dir: filepath.Join(base, "B"), addr: freeAddr(t), raft: freeAddr(t), join: a.url()}
	b.start(t)
	t.Cleanup(func() { b.stop(); a.stop() })
	apiCall(t, "PUT", a.url()+"/admin/databases?name=lagdb", `{"DatabaseName":"lagdb"}`, 201)
	h := a.srv.Handler()
	page := "/studio/db/lagdb/replication"

	body := pollPage(t, h, page, 20*time.Second, func(body string) bool {
		row, state := replRow(body, "B")
		return state == "connected" && attr(row, "repl-items-behind", "data-value") == "0"
	})
	for _, want := range []string{
		`data-live="/studio/live?db=lagdb&amp;page=replication"`,
		`aria-current="page" href="/studio/db/lagdb/replication"`,
		`data-testid="repl-destinations">1<`,
		`data-testid="chart-repl-items"`,
		`data-src="/studio/history?kind=repl_items&amp;scope=cluster&amp;db=lagdb"`,
		`data-testid="repl-cell" data-source="A" data-destination="B" data-state="connected" data-items="0"`,
		`data-testid="repl-cell" data-source="B" data-destination="A" data-state="connected" data-items="0"`,
		`<caption class="sr-only">Outgoing replication, one row per destination</caption>`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("page lacks %s:\n%s", want, body)
		}
	}
	// A healthy destination shows no current error. (A first attempt may
	// have failed while B was still opening the database; that error is
	// shown as past.)
	if row, _ := replRow(body, "B"); strings.Contains(row, `class="repl-error small"`) || !strings.Contains(row, b.url()) {
		t.Fatalf("row of a healthy destination: %s", row)
	}

	// B goes down and A takes 30 documents.
	b.stop()
	var cmds []string
	for i := 0; i < 30; i++ {
		cmds = append(cmds, fmt.Sprintf(`{"Id":"late/%d","Type":"PUT","Document":{"n":%d}}`, i, i))
	}
	apiCall(t, "POST", a.url()+"/databases/lagdb/bulk_docs", `{"Commands":[`+strings.Join(cmds, ",")+`]}`, 201)
	body = pollPage(t, h, page, 20*time.Second, func(body string) bool {
		row, state := replRow(body, "B")
		secs, _ := strconv.ParseFloat(attr(row, "repl-seconds-behind", "data-value"), 64)
		return state != "connected" && attr(row, "repl-items-behind", "data-value") == "30" && secs >= 1 &&
			strings.Contains(row, `data-testid="repl-last-error"`)
	})
	row, state := replRow(body, "B")
	if state != "connecting" && state != "waiting to retry" {
		t.Fatalf("state of a stopped destination: %q", state)
	}
	if state == "waiting to retry" && !strings.Contains(row, "next attempt ") {
		t.Fatalf("waiting without saying when it tries again: %s", row)
	}
	if !strings.Contains(row, `class="repl-error small" data-testid="repl-last-error"`) {
		t.Fatalf("the last error of a stopped destination is not shown as current: %s", row)
	}
	if !strings.Contains(row, `class="repl-state warn"`) || !strings.Contains(row, `>30<`) {
		t.Fatalf("row of a stopped destination: %s", row)
	}
	// The matrix says the same of A → B, and B, down, is a source that
	// did not answer: its links are unknown, not zero.
	if !regexp.MustCompile(`data-testid="repl-cell" data-source="A" data-destination="B" data-state="(connecting|waiting to retry)" data-items="30"`).MatchString(body) {
		t.Fatalf("matrix cell A → B of a stopped destination: %s", body)
	}
	if !strings.Contains(body, `data-testid="repl-cell" data-source="B" data-destination="A" data-state="unreachable" data-items="" data-seconds=""`) ||
		!strings.Contains(body, `data-testid="repl-matrix-row" data-key="B" data-source="B" data-reachable="false"`) {
		t.Fatalf("matrix row of a stopped source: %s", body)
	}

	// B is back: 0 behind, connected, no retry pending.
	b.start(t)
	body = pollPage(t, h, page, 30*time.Second, func(body string) bool {
		row, state := replRow(body, "B")
		return state == "connected" && attr(row, "repl-items-behind", "data-value") == "0"
	})
	row, _ = replRow(body, "B")
	if attr(row, "repl-seconds-behind", "data-value") != "0.000" || !strings.Contains(row, `data-testid="repl-next-retry" title=""></div>`) ||
		!strings.Contains(row, `class="repl-error past small" data-testid="repl-last-error"`) {
		t.Fatalf("row after recovery: %s", row)
	}
}

// Without replication the page says so; an unknown database is a 404 page.
func TestStudioReplicationPageOffAndMissing(t *testing.T) {
	h := newServer(t)
	check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=solo", body: `{"DatabaseName":"solo"}`, status: 201},
	})
	rec := get(t, h, "/studio/db/solo/replication")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `data-testid="replication-off"`) || strings.Contains(rec.Body.String(), `data-testid="replication-row"`) {
		t.Fatalf("replication off: %d %s", rec.Code, rec.Body)
	}
	rec = get(t, h, "/studio/db/nosuch/replication")
	if rec.Code != 404 || !strings.Contains(rec.Body.String(), "No such database") {
		t.Fatalf("missing database: %d %s", rec.Code, rec.Body)
	}
}
