package studio_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/pki"
)

// chartAnswer is GET /studio/history's answer.
type chartAnswer struct {
	Self     string
	Interval int64
	Times    []int64
	Series   []struct {
		Kind, Database, Node, Peer, Name, Unit, Label string
		Values                                        []*float64
	}
	Nodes []struct {
		Tag       string
		Self      bool
		Reachable bool
		Problem   string
	}
}

func history(t *testing.T, h http.Handler, path string) chartAnswer {
	t.Helper()
	rec := get(t, h, path)
	if rec.Code != 200 {
		t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
	}
	var a chartAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		t.Fatalf("%s: %v: %s", path, err, rec.Body)
	}
	return a
}

func pollHistory(t *testing.T, h http.Handler, path string, within time.Duration, ok func(chartAnswer) bool) chartAnswer {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		a := history(t, h, path)
		if ok(a) {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: condition not met within %s; last answer %+v", path, within, a)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// links are the source→destination pairs of a repl_items answer with a
// value at its newest sample.
func links(a chartAnswer) map[string]float64 {
	out := map[string]float64{}
	for _, s := range a.Series {
		if n := len(s.Values); n > 0 && s.Values[n-1] != nil {
			out[s.Node+">"+s.Peer] = *s.Values[n-1]
		}
	}
	return out
}

var nodeRowRE = regexp.MustCompile(`(?s)<tr data-testid="node-row" data-key="([A-Z]+)" data-node="[A-Z]+" data-reachable="([a-z]+)".*?</tr>`)

// nodeRows maps each dashboard node row's tag to its reachability and
// its HTML.
func nodeRows(body string) map[string][2]string {
	out := map[string][2]string{}
	for _, m := range nodeRowRE.FindAllStringSubmatch(body, -1) {
		out[m[1]] = [2]string{m[2], m[0]}
	}
	return out
}

func nodeState(row string) string {
	m := regexp.MustCompile(`data-testid="node-state"[^>]*>([^<]*)<`).FindStringSubmatch(row)
	if m == nil {
		return ""
	}
	return m[1]
}

// TestStudioDashboardClusterTruth drives three real nodes: B's dashboard
// shows every node's own state, C as unreachable (with since when, never
// "Follower") while it is down and reachable again once it is back; B's
// replication matrix has all six links with their lag and C's row as
// unknown while it is down; B's chart history gathers every node's links,
// names the node that did not answer, and never reports its links as zero.
func TestStudioDashboardClusterTruth(t *testing.T) {
	base := t.TempDir()
	a := &replNode{tag: "A", dir: filepath.Join(base, "A"), addr: freeAddr(t), raft: freeAddr(t)}
	a.start(t)
	b := &replNode{tag: "B", dir: filepath.Join(base, "B"), addr: freeAddr(t), raft: freeAddr(t), join: a.url()}
	b.start(t)
	c := &replNode{tag: "C", dir: filepath.Join(base, "C"), addr: freeAddr(t), raft: freeAddr(t), join: a.url()}
	c.start(t)
	t.Cleanup(func() { c.stop(); b.stop(); a.stop() })
	apiCall(t, "PUT", a.url()+"/admin/databases?name=matrixdb", `{"DatabaseName":"matrixdb"}`, 201)
	hb := b.srv.Handler()

	// Every node reachable, with the role it reports.
	body := pollPage(t, hb, "/studio/", 30*time.Second, func(body string) bool {
		rows := nodeRows(body)
		return len(rows) == 3 && rows["A"][0] == "true" && rows["B"][0] == "true" && rows["C"][0] == "true"
	})
	rows := nodeRows(body)
	if got := nodeState(rows["B"][1]); got != "Follower (this node)" && got != "Leader (this node)" {
		t.Fatalf("B's own state: %q", got)
	}
	for _, tag := range []string{"A", "C"} {
		if got := nodeState(rows[tag][1]); got != "Follower" && got != "Leader" {
			t.Fatalf("%s's state: %q", tag, got)
		}
	}
	// The charts sit outside the live region, which only holds the tables.
	i := strings.Index(body, `id="dashboard-body"`)
	j := strings.Index(body, `data-testid="dash-charts"`)
	if i < 0 || j < i || strings.Contains(body[i:j], "data-chart") {
		t.Fatalf("charts inside the live region, or missing")
	}
	for _, want := range []string{`data-src="/studio/history?kind=writes"`, `data-src="/studio/history?kind=repl_items&amp;scope=cluster"`,
		`data-unit="writes/s"`, `data-unit="items"`, `data-unit="seconds"`, `data-unit="docs"`, `src="/static/vendor/uplot/uPlot.iife.min.js"`, `src="/static/charts.js"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("dashboard lacks %s", want)
		}
	}

	// B's replication matrix: six links, each connected with nothing behind.
	page := "/studio/db/matrixdb/replication"
	cellRE := regexp.MustCompile(`data-testid="repl-cell" data-source="([A-Z])" data-destination="([A-Z])" data-state="([a-z ]+)" data-items="([0-9]*)"`)
	pollPage(t, hb, page, 30*time.Second, func(body string) bool {
		n := 0
		for _, m := range cellRE.FindAllStringSubmatch(body, -1) {
			if m[3] == "connected" && m[4] == "0" {
				n++
			}
		}
		return n == 6
	})

	// B's history gathers all six links from their sources.
	hist := "/studio/history?kind=repl_items&scope=cluster&db=matrixdb"
	ans := pollHistory(t, hb, hist, 30*time.Second, func(a chartAnswer) bool { return len(links(a)) == 6 })
	for _, s := range ans.Series {
		if s.Unit != "items" || s.Database != "matrixdb" || s.Label != s.Node+" → "+s.Peer+" · matrixdb" {
			t.Fatalf("series %+v", s)
		}
	}
	if ans.Self != "B" || len(ans.Nodes) != 3 || ans.Interval != 1 {
		t.Fatalf("answer %+v", ans)
	}

	// C goes down and A takes writes C cannot have.
	c.stop()
	var cmds []string
	for i := 0; i < 20; i++ {
		cmds = append(cmds, fmt.Sprintf(`{"Id":"late/%d","Type":"PUT","Document":{"n":%d}}`, i, i))
	}
	apiCall(t, "POST", a.url()+"/databases/matrixdb/bulk_docs", `{"Commands":[`+strings.Join(cmds, ",")+`]}`, 201)

	body = pollPage(t, hb, "/studio/", 20*time.Second, func(body string) bool { return nodeRows(body)["C"][0] == "false" })
	row := nodeRows(body)["C"][1]
	if got := nodeState(row); got != "Unreachable" {
		t.Fatalf("C's state while down: %q", got)
	}
	if !regexp.MustCompile(`data-testid="node-since"[^>]*>\s*since \d\d:\d\d:\d\d UTC \(`).MatchString(row) || !strings.Contains(row, "last answered") ||
		!strings.Contains(row, `data-testid="node-problem"`) || strings.Contains(row, "Follower") {
		t.Fatalf("C's row while down: %s", row)
	}
	if !strings.Contains(body, `data-testid="dash-nodes-unreachable">1 unreachable<`) {
		t.Fatalf("the tile does not count C as unreachable")
	}

	body = pollPage(t, hb, page, 20*time.Second, func(body string) bool {
		ok := 0
		for _, m := range cellRE.FindAllStringSubmatch(body, -1) {
			switch {
			case m[1] == "C" && m[3] == "unreachable" && m[4] == "":
				ok++
			case m[2] == "C" && m[3] != "connected" && m[4] == "20" && m[1] == "A":
				ok++
			}
		}
		return ok == 3
	})
	if !strings.Contains(body, `data-testid="repl-matrix-row" data-key="C" data-source="C" data-reachable="false"`) ||
		!strings.Contains(body, `data-testid="repl-matrix-unreachable"`) {
		t.Fatalf("C's matrix row while down: %s", body)
	}

	ans = pollHistory(t, hb, hist, 20*time.Second, func(a chartAnswer) bool {
		for _, n := range a.Nodes {
			if n.Tag == "C" {
				return !n.Reachable && n.Problem != ""
			}
		}
		return false
	})
	for _, s := range ans.Series {
		if s.Node == "C" {
			t.Fatalf("the history of an unreachable node reported as if known: %+v", s)
		}
	}

	// C is back: reachable again, and the dashboard says since when.
	c.start(t)
	body = pollPage(t, hb, "/studio/", 30*time.Second, func(body string) bool { return nodeRows(body)["C"][0] == "true" })
	row = nodeRows(body)["C"][1]
	if got := nodeState(row); got != "Follower" && got != "Leader" {
		t.Fatalf("C's state after the restart: %q", got)
	}
	if !strings.Contains(row, "reachable since ") {
		t.Fatalf("C's row after the restart: %s", row)
	}
	pollPage(t, hb, page, 30*time.Second, func(body string) bool {
		n := 0
		for _, m := range cellRE.FindAllStringSubmatch(body, -1) {
			if m[3] == "connected" && m[4] == "0" {
				n++
			}
		}
		return n == 6
	})
}

// TestStudioHistoryWrites: a node's writes/s reach its history (sampled
// every --history-interval), and bad parameters are 400s in the envelope.
func TestStudioHistoryWrites(t *testing.T) {
	n := &replNode{tag: "A", dir: t.TempDir(), addr: freeAddr(t), raft: freeAddr(t)}
	n.start(t)
	t.Cleanup(n.stop)
	apiCall(t, "PUT", n.url()+"/admin/databases?name=wdb", `{"DatabaseName":"wdb"}`, 201)
	h := n.srv.Handler()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			apiCall(t, "PUT", fmt.Sprintf("%s/databases/wdb/docs?id=w/%d", n.url(), i), `{"n":1}`, 201)
		}
	}()
	ans := pollHistory(t, h, "/studio/history?kind=writes", 20*time.Second, func(a chartAnswer) bool {
		for _, s := range a.Series {
			for _, v := range s.Values {
				if s.Database == "wdb" && v != nil && *v > 0 {
					return true
				}
			}
		}
		return false
	})
	close(stop)
	<-done
	for _, s := range ans.Series {
		if s.Kind != "writes" || s.Unit != "writes/s" || s.Node != "A" || s.Label != s.Database+" on A" || len(s.Values) != len(ans.Times) {
			t.Fatalf("series %+v (times %d)", s, len(ans.Times))
		}
	}
	for i := 1; i < len(ans.Times); i++ {
		if ans.Times[i] <= ans.Times[i-1] {
			t.Fatalf("times not ascending: %v", ans.Times)
		}
	}
	// since returns only newer samples.
	last := ans.Times[len(ans.Times)-1]
	if a := history(t, h, fmt.Sprintf("/studio/history?kind=writes&since=%d", last)); len(a.Times) > 0 && a.Times[0] <= last {
		t.Fatalf("since=%d returned %v", last, a.Times)
	}
	check(t, h, []step{
		{name: "bad since", method: "GET", url: "/studio/history?since=yesterday", status: 400, errType: "Raven.Client.Exceptions.BadRequestException", contains: []string{"unix seconds"}},
		{name: "bad kind", method: "GET", url: "/studio/history?kind=cpu", status: 400, errType: "Raven.Client.Exceptions.BadRequestException", contains: []string{"unknown kind"}},
		{name: "internal is for nodes", method: "GET", url: "/internal/history", status: 403},
	})
}

// TestStudioHistorySecuredShowsOnlyReadableDatabases: on a secured node a
// certificate with Read on one database gets only that database's series;
// the admin gets every database's, and nobody without a certificate gets
// any.
func TestStudioHistorySecuredShowsOnlyReadableDatabases(t *testing.T) {
	dir, res := securedSetup(t)
	reader, err := pki.IssueClient(dir, pki.ClientOptions{Name: "reader", PFXPassword: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	n := startSecured(t, res, "A", "")
	admin := certClient(t, res, res.Admin.PEM)
	waitReady(t, admin, n.url)
	for _, db := range []string{"shop", "other"} {
		if p := browseForm(t, admin, n.url+"/studio/databases", url.Values{"name": {db}}); p.status != 303 {
			t.Fatalf("create %s: %d %s", db, p.status, p.location)
		}
	}
	p := registerForm(t, admin, n.url, map[string][]string{
		"name": {"reader"}, "clearance": {"ValidUser"}, "pem": {string(readFile(t, reader.PEM))}, "permDb": {"shop"}, "permAccess": {"Read"},
	}, nil)
	if p.status != 303 {
		t.Fatalf("register reader: %d %s", p.status, p.location)
	}
	for _, db := range []string{"shop", "other"} {
		req, _ := http.NewRequest("PUT", n.url+"/databases/"+db+"/subscriptions", strings.NewReader(`{"Query":"from Orders","Name":"feed-`+db+`"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := admin.Do(req)
		if err != nil || resp.StatusCode != 201 {
			t.Fatalf("subscription on %s: %v %v", db, err, resp)
		}
		resp.Body.Close()
	}
	answer := func(c *http.Client, path string) (int, chartAnswer) {
		resp, err := c.Get(n.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a chartAnswer
		if resp.StatusCode == 200 {
			if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, a
	}
	dbs := func(a chartAnswer) string {
		var out []string
		for _, s := range a.Series {
			out = append(out, s.Database+"/"+s.Name)
		}
		return strings.Join(out, ",")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, a := answer(admin, "/studio/history?kind=sub_backlog")
		if dbs(a) == "other/feed-other,shop/feed-shop" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("admin's series: %q", dbs(a))
		}
		time.Sleep(200 * time.Millisecond)
	}
	ro := certClient(t, res, reader.PEM)
	if code, a := answer(ro, "/studio/history?kind=sub_backlog"); code != 200 || dbs(a) != "shop/feed-shop" {
		t.Fatalf("reader's series: %d %q", code, dbs(a))
	}
	if code, a := answer(ro, "/studio/history?db=other"); code != 200 || len(a.Series) != 0 {
		t.Fatalf("reader asking for another database's series: %d %q", code, dbs(a))
	}
	if code, _ := answer(ro, "/internal/history"); code != 403 {
		t.Fatalf("reader on the node-only history: %d", code)
	}
	if code, _ := answer(certClient(t, res, ""), "/studio/history"); code != 403 && code != 401 {
		t.Fatalf("no certificate: %d", code)
	}
}
