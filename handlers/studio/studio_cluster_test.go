package studio_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/activity"
	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/catalog"
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/handlers/api"
	"github.com/rookerydb/rookery/handlers/studio"
)

// clusterRows maps each cluster-node-row's tag to its role and state.
var clusterRowRE = regexp.MustCompile(`data-testid="cluster-node-row" data-tag="([A-Z]+)" data-role="([a-z]+)" data-state="([a-z ]+)"`)

func clusterRows(body string) map[string][2]string {
	out := map[string][2]string{}
	for _, m := range clusterRowRE.FindAllStringSubmatch(body, -1) {
		out[m[1]] = [2]string{m[2], m[3]}
	}
	return out
}

// TestStudioClusterPage drives the node's real router: the page shows this
// node leading its one-node cluster (or, on a node without Raft, says so),
// every action refuses without its confirmation, and a cross-origin POST
// is refused.
func TestStudioClusterPage(t *testing.T) {
	h := newServer(t)
	var page string
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec := get(t, h, "/studio/cluster")
		if rec.Code != 200 {
			t.Fatalf("cluster page: %d %s", rec.Code, rec.Body)
		}
		page = rec.Body.String()
		if strings.Contains(page, `data-testid="cluster-disabled"`) || clusterRows(page)["A"][0] == "leader" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{`data-live="/studio/live?page=cluster"`, `aria-current="page" href="/studio/cluster"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("cluster page lacks %q: %s", want, page)
		}
	}
	enabled := !strings.Contains(page, `data-testid="cluster-disabled"`)
	if enabled {
		if rows := clusterRows(page); rows["A"] != [2]string{"leader", "voter"} || len(rows) != 1 {
			t.Fatalf("one-node cluster rows: %v", rows)
		}
		for _, want := range []string{`data-testid="cluster-leader">A<`, `data-testid="node-self"`, `data-testid="stepdown-submit"`, `data-testid="add-node-submit"`, `data-testid="remove-node-submit"`} {
			if !strings.Contains(page, want) {
				t.Fatalf("cluster page lacks %q", want)
			}
		}
		if strings.Contains(page, `data-testid="election"`) {
			t.Fatal("election banner shown while A leads")
		}
	} else if !strings.Contains(page, "runs without a cluster") {
		t.Fatalf("no readable message without a cluster: %s", page)
	}

	cases := []struct {
		name    string
		path    string
		form    map[string]string
		headers map[string]string
		status  int
		errLike string // in the redirect's error flash
	}{
		{"step down needs the checkbox", "/studio/cluster/stepdown", map[string]string{}, nil, 303, "Tick the confirmation to step the leader down"},
		{"remove needs the typed tag", "/studio/cluster/remove", map[string]string{"tag": "A", "confirm": "a"}, nil, 303, "Type the node's tag exactly"},
		{"remove needs a tag", "/studio/cluster/remove", map[string]string{"confirm": ""}, nil, 303, "Type the node's tag exactly"},
		{"add needs the checkbox", "/studio/cluster/add", map[string]string{"tag": "D", "url": "http://127.0.0.1:1", "raftAddr": "127.0.0.1:2"}, nil, 303, "Tick the confirmation to add node D"},
		{"cross-origin step down", "/studio/cluster/stepdown", map[string]string{"confirm": "yes"}, map[string]string{"Origin": "http://evil.example"}, 403, ""},
		{"cross-site remove", "/studio/cluster/remove", map[string]string{"tag": "A", "confirm": "A"}, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, ""},
		{"cross-origin add", "/studio/cluster/add", map[string]string{"tag": "D", "url": "http://127.0.0.1:1", "raftAddr": "127.0.0.1:2", "confirm": "yes"}, map[string]string{"Origin": "http://evil.example"}, 403, ""},
	}
	if enabled {
		cases = append(cases,
			struct {
				name    string
				path    string
				form    map[string]string
				headers map[string]string
				status  int
				errLike string
			}{"add checks the fields", "/studio/cluster/add", map[string]string{"tag": "d", "url": "http://127.0.0.1:1", "raftAddr": "127.0.0.1:2", "confirm": "yes"}, nil, 303, `node tag "d"`},
			struct {
				name    string
				path    string
				form    map[string]string
				headers map[string]string
				status  int
				errLike string
			}{"remove an unknown node", "/studio/cluster/remove", map[string]string{"tag": "Q", "confirm": "Q"}, nil, 303, "There is no node Q"},
			struct {
				name    string
				path    string
				form    map[string]string
				headers map[string]string
				status  int
				errLike string
			}{"step down alone is a readable error", "/studio/cluster/stepdown", map[string]string{"confirm": "yes"}, map[string]string{"Sec-Fetch-Site": "same-origin"}, 303, "Step down failed"},
		)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := postForm(t, h, tc.path, tc.form, tc.headers)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.errLike == "" {
				return
			}
			loc, err := url.Parse(rec.Header().Get("Location"))
			if err != nil || loc.Path != "/studio/cluster" || !strings.Contains(loc.Query().Get("error"), tc.errLike) {
				t.Fatalf("redirect %q, want an error like %q", rec.Header().Get("Location"), tc.errLike)
			}
		})
	}
	if enabled {
		if rows := clusterRows(get(t, h, "/studio/cluster").Body.String()); rows["A"] != [2]string{"leader", "voter"} {
			t.Fatalf("the refused actions changed the cluster: %v", rows)
		}
	}
}

// testNode is a Raft node behind a Studio and the real API on one Echo.
type testNode struct {
	tag       string
	cl        *cluster.Cluster
	studio    *studio.Studio
	h         http.Handler
	srv       *httptest.Server
	stepdowns atomic.Int32
	removals  atomic.Int32
}

func startTestNode(t *testing.T, tag string, bootstrap bool) *testNode {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	n := &testNode{tag: tag}
	e := echo.New()
	n.h = e
	n.srv = httptest.NewServer(e)
	t.Cleanup(n.srv.Close)
	cl, err := cluster.Open(cluster.Config{
		NodeTag: tag, RaftAddr: "127.0.0.1:0", URL: n.srv.URL, Dir: t.TempDir(), Bootstrap: bootstrap, Logger: logger,
		Security: cluster.Security{Token: func() []byte { return []byte("studio cluster test secret") }},
		// Leadership transfers get one election timeout; leave room under -race.
		ElectionTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Shutdown() })
	n.cl = cl
	cat, err := catalog.Open(t.TempDir(), tag, logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	n.studio = &studio.Studio{Catalog: cat, Activity: activity.New(), Alerts: alerts.New(), NodeTag: tag, URL: func() string { return n.srv.URL }, Cluster: cl}
	n.studio.Register(e)
	// The real API serves the admin endpoints the page calls; the
	// middleware only counts the forwarded actions that reach this node.
	e.Pre(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			switch c.Request().URL.Path {
			case "/admin/cluster/stepdown":
				n.stepdowns.Add(1)
			case "/admin/cluster/remove":
				n.removals.Add(1)
			}
			return next(c)
		}
	})
	(&api.API{Catalog: cat, NodeTag: tag, URL: func() string { return n.srv.URL }, Cluster: cl}).Register(e)
	return n
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStudioClusterThreeNodes shows a real three-node Raft cluster from a
// follower: every node's own figures, a node whose HTTP hangs shown as
// unreachable without holding the page up, the live fragment, and a step
// down forwarded to the leader.
func TestStudioClusterThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three Raft nodes")
	}
	ctx := context.Background()
	a := startTestNode(t, "A", true)
	b := startTestNode(t, "B", false)
	c := startTestNode(t, "C", false)
	// C's HTTP URL accepts connections and never answers.
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hang.Close() })
	hangURL := "http://" + hang.Addr().String()

	if err := a.cl.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A leads", a.cl.IsLeader)
	if err := a.cl.RegisterSelf(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range []cluster.Node{{Tag: "B", URL: b.srv.URL, RaftAddr: b.cl.RaftAddr()}, {Tag: "C", URL: hangURL, RaftAddr: c.cl.RaftAddr()}} {
		if _, err := a.cl.AddNonvoter(ctx, n); err != nil {
			t.Fatal(err)
		}
		if err := a.cl.Promote(ctx, n.Tag, a.cl.JoinNonce(n.Tag)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "B and C know the three nodes", func() bool {
		return len(b.cl.Nodes()) == 3 && len(c.cl.Nodes()) == 3 && b.cl.Status().LeaderTag == "A"
	})

	start := time.Now()
	rec := get(t, b.h, "/studio/cluster")
	took := time.Since(start)
	body := rec.Body.String()
	if rec.Code != 200 {
		t.Fatalf("B's cluster page: %d %s", rec.Code, body)
	}
	if took > time.Second {
		t.Fatalf("a hanging node held the page for %v", took)
	}
	rows := clusterRows(body)
	want := map[string][2]string{"A": {"leader", "voter"}, "B": {"follower", "voter"}, "C": {"unknown", "unreachable"}}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("rows from B: %v, want %v", rows, want)
	}
	for _, s := range []string{`data-testid="cluster-leader">A<`, `data-testid="cluster-members">3<`, hangURL, "did not answer"} {
		if !strings.Contains(body, s) {
			t.Fatalf("B's page lacks %q: %s", s, body)
		}
	}
	// A's figures on B's page are A's own: its term and the index it committed.
	aTerm := a.cl.Status().Term
	if !regexp.MustCompile(`data-tag="A"[\s\S]*?data-testid="node-term">` + fmt.Sprint(aTerm) + `<`).MatchString(body) {
		t.Fatalf("A's term %d is not on B's page", aTerm)
	}

	frags, err := b.studio.LiveFragments(ctx, "cluster", url.Values{"page": {"cluster"}})
	if err != nil {
		t.Fatal(err)
	}
	var live string
	for _, f := range frags {
		if f.ID == "cluster-body" {
			var sb strings.Builder
			if err := f.C.Render(ctx, &sb); err != nil {
				t.Fatal(err)
			}
			live = sb.String()
		}
	}
	if r := clusterRows(live); len(r) != 3 || r["A"][0] != "leader" {
		t.Fatalf("live fragment rows: %v (%s)", r, live)
	}

	// Removing needs the typed tag; from a follower it goes to the leader.
	rec = postForm(t, b.h, "/studio/cluster/remove", map[string]string{"tag": "C", "confirm": "B"}, nil)
	if loc := rec.Header().Get("Location"); !strings.Contains(loc, "error=Type+the+node") || a.removals.Load() != 0 {
		t.Fatalf("remove with a wrong confirmation: %s", loc)
	}
	rec = postForm(t, b.h, "/studio/cluster/remove", map[string]string{"tag": "C", "confirm": "C"}, nil)
	if loc, _ := url.Parse(rec.Header().Get("Location")); rec.Code != 303 || a.removals.Load() != 1 || loc.Query().Get("flash") != "Node C removed from the cluster." {
		t.Fatalf("remove C from B: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	c.cl.Shutdown()
	waitFor(t, "B's page without C", func() bool {
		r := clusterRows(get(t, b.h, "/studio/cluster").Body.String())
		return len(r) == 2 && r["A"][0] == "leader"
	})

	// Stepping down from a follower needs the confirmation, then goes to
	// the leader; with two nodes left B takes over.
	rec = postForm(t, b.h, "/studio/cluster/stepdown", nil, nil)
	if loc := rec.Header().Get("Location"); rec.Code != 303 || !strings.Contains(loc, "error=") || a.stepdowns.Load() != 0 {
		t.Fatalf("unconfirmed step down: %d %s (forwarded %d)", rec.Code, loc, a.stepdowns.Load())
	}
	rec = postForm(t, b.h, "/studio/cluster/stepdown", map[string]string{"confirm": "yes"}, nil)
	loc, _ := url.Parse(rec.Header().Get("Location"))
	if rec.Code != 303 || a.stepdowns.Load() != 1 || loc.Query().Get("flash") != "Leader A stepped down; B leads now." {
		t.Fatalf("step down from B: %d %s (forwarded %d)", rec.Code, rec.Header().Get("Location"), a.stepdowns.Load())
	}
	waitFor(t, "B's page shows B leading", func() bool {
		r := clusterRows(get(t, b.h, "/studio/cluster").Body.String())
		return r["A"] == [2]string{"follower", "voter"} && r["B"] == [2]string{"leader", "voter"}
	})

}

// TestStudioClusterElection: a node that knows no leader (never joined, or
// cut off during an election) says so on the page.
func TestStudioClusterElection(t *testing.T) {
	n := startTestNode(t, "Z", false)
	body := get(t, n.h, "/studio/cluster").Body.String()
	for _, want := range []string{`data-testid="election"`, "Election in progress", `data-testid="cluster-leader">none<`} {
		if !strings.Contains(body, want) {
			t.Fatalf("page without a leader lacks %q: %s", want, body)
		}
	}
}
