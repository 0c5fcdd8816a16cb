package studio_test

import (
	"context"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// rowOrder is the subscriptions' names in the order the list shows them.
func rowOrder(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<tr data-key="([^"]*)" data-testid="sub-row-`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// The list's view is in its URL: a filter on the name, "hide disabled",
// and the sorts (name, state, backlog); the page's live channel carries
// the same view; an unknown sort is by name.
func TestStudioSubscriptionsView(t *testing.T) {
	h := newServer(t)
	check(t, h, []step{
		{name: "db", method: "PUT", url: "/admin/databases?name=v", body: `{"DatabaseName":"v"}`, status: 201},
		{name: "docs", method: "POST", url: "/databases/v/bulk_docs", body: orderDocs(1, 5), headers: map[string]string{"Content-Type": "application/json"}, status: 201},
		{name: "all", method: "PUT", url: "/databases/v/subscriptions", body: `{"Query":"from Orders","Name":"orders-all"}`, status: 201},
		{name: "big", method: "PUT", url: "/databases/v/subscriptions", body: `{"Query":"from Orders where Total > 3","Name":"Orders-big"}`, status: 201},
		{name: "inv", method: "PUT", url: "/databases/v/subscriptions", body: `{"Query":"from Invoices","Name":"invoices"}`, status: 201},
		{name: "off", method: "PUT", url: "/databases/v/subscriptions", body: `{"Query":"from Orders","Name":"orders-off","Disabled":true}`, status: 201},
	})
	page := "/studio/db/v/subscriptions"
	order := func(query string) []string {
		t.Helper()
		rec := get(t, h, page+query)
		if rec.Code != 200 {
			t.Fatalf("%s: %d", query, rec.Code)
		}
		return rowOrder(rec.Body.String())
	}
	cases := []struct {
		query string
		want  string
	}{
		{"", "invoices orders-all Orders-big orders-off"},
		{"?sort=nonsense", "invoices orders-all Orders-big orders-off"},
		{"?filter=ORDERS", "orders-all Orders-big orders-off"},
		{"?filter=orders&hideDisabled=1", "orders-all Orders-big"},
		{"?hideDisabled=1", "invoices orders-all Orders-big"},
		// Backlogs 5, 5 (disabled), 2, 0.
		{"?sort=backlog", "orders-all orders-off Orders-big invoices"},
		// STOPPED (a backlog, no worker) first, then OK, disabled last.
		{"?sort=state", "orders-all Orders-big invoices orders-off"},
		{"?filter=nothing-like-it", ""},
	}
	for _, c := range cases {
		if got := strings.Join(order(c.query), " "); got != c.want {
			t.Errorf("%s: %q, want %q", c.query, got, c.want)
		}
	}
	body := get(t, h, page+"?filter=orders&sort=backlog&hideDisabled=1&query=from+Orders").Body.String()
	for _, want := range []string{
		// The live channel renders the same view (and not the test query).
		`data-live="/studio/live?db=v&amp;filter=orders&amp;hideDisabled=1&amp;page=subscriptions&amp;sort=backlog"`,
		`data-testid="subs-shown" data-shown="2"`, `Showing 2 of 4`,
		`name="filter" type="search" value="orders"`, `<option value="backlog" selected>`, `name="hideDisabled" value="1" checked`,
		// An action's form carries the view back.
		`<input type="hidden" name="view-filter" value="orders">`,
		`data-testid="sub-view-reset"`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("view page lacks %s:\n%s", want, body)
		}
	}
	rec := postForm(t, h, page, map[string]string{"action": "disable", "name": "orders-all", "view-filter": "orders", "view-sort": "backlog"}, nil)
	if loc, _ := url.Parse(rec.Header().Get("Location")); rec.Code != 303 || loc.Query().Get("filter") != "orders" || loc.Query().Get("sort") != "backlog" {
		t.Fatalf("an action comes back to the view: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	if body = get(t, h, page+"?filter="+strings.Repeat("x", 5000)).Body.String(); !strings.Contains(body, `value="`+strings.Repeat("x", 200)+`"`) || strings.Contains(body, strings.Repeat("x", 201)) {
		t.Fatal("a long filter is not cut to 200 characters")
	}
}

// Three nodes. A worker consumes on A; B's page shows the subscription
// with node A responsible and A's figures (RUNNING, the position A's
// delivery reached), while B's own monitor, alone, says STOPPED at 0 (the
// trial's finding). A subscription nobody serves shows this node's
// figures. The live channel of B's page keeps the filter. A worker's error
// is current until a batch is acknowledged after it, then past. With A
// down, its rows say unreachable, never STOPPED.
func TestStudioSubscriptionsClusterWide(t *testing.T) {
	base := t.TempDir()
	a := &replNode{tag: "A", dir: filepath.Join(base, "A"), addr: freeAddr(t), raft: freeAddr(t)}
	a.start(t)
	b := &replNode{tag: "B", dir: filepath.Join(base, "B"), addr: freeAddr(t), raft: freeAddr(t), join: a.url()}
	b.start(t)
	c := &replNode{tag: "C", dir: filepath.Join(base, "C"), addr: freeAddr(t), raft: freeAddr(t), join: a.url()}
	c.start(t)
	t.Cleanup(func() { c.stop(); b.stop(); a.stop() })
	apiCall(t, "PUT", a.url()+"/admin/databases?name=cw", `{"DatabaseName":"cw"}`, 201)
	apiCall(t, "POST", a.url()+"/databases/cw/bulk_docs", orderDocs(1, 6), 201)
	apiCall(t, "PUT", a.url()+"/databases/cw/subscriptions", `{"Query":"from Orders","Name":"feed"}`, 201)
	apiCall(t, "PUT", a.url()+"/databases/cw/subscriptions", `{"Query":"from Orders","Name":"idle"}`, 201)
	hb := b.srv.Handler()
	page := "/studio/db/cw/subscriptions"
	pollPage(t, hb, page, 30*time.Second, func(body string) bool {
		return strings.Contains(body, `data-testid="sub-row-feed"`) && strings.Contains(body, `data-testid="sub-node-A" data-answered="true"`) &&
			strings.Contains(body, `data-testid="sub-node-C" data-answered="true"`)
	})

	w := dialWorker(t, a.addr, "cw", "feed", 2)
	w.batch(t)
	w.send(t, map[string]string{"Type": "Acknowledge"})
	w.batch(t) // orders 3 and 4, sent: the first ack is done
	body := pollPage(t, hb, page, 20*time.Second, func(body string) bool {
		row := subRow(t, body, "feed")
		p, _ := strconv.Atoi(attr(row, "sub-progress-feed", "data-position"))
		// idle is served by nobody, so its row has B's own figures: STOPPED
		// once the orders have replicated to B (a backlog, no worker).
		backlog := 0
		if strings.Contains(body, `data-testid="sub-row-idle"`) {
			backlog, _ = strconv.Atoi(attr(subRow(t, body, "idle"), "sub-backlog-idle", "data-value"))
		}
		return attr(row, "sub-node-of-feed", "data-node") == "A" && attr(row, "sub-state-feed", "data-state") == "RUNNING" && p > 0 && backlog > 0
	})
	feed, idle := subRow(t, body, "feed"), subRow(t, body, "idle")
	if attr(feed, "sub-node-of-feed", "data-why") != "worker" || attr(feed, "sub-workers-feed", "data-count") != "1" || attr(feed, "sub-status-feed", "data-status") == "STOPPED" ||
		!strings.Contains(feed, `title="The worker is connected to node A: drop it on that node&#39;s studio"`) {
		t.Fatalf("feed on B: %s", feed)
	}
	if attr(idle, "sub-node-of-idle", "data-node") != "B" || attr(idle, "sub-node-of-idle", "data-why") != "nobody" || attr(idle, "sub-state-idle", "data-state") != "NO WORKER" ||
		attr(idle, "sub-status-idle", "data-status") != "STOPPED" {
		t.Fatalf("idle on B: %s", idle)
	}
	// What B alone knows of feed: no worker, its copy's position 0, and the
	// node of the last ack once A's ack has reached B's copy through Raft.
	pollPage(t, hb, "/databases/cw/subscriptions/monitor?name=feed", 20*time.Second, func(body string) bool {
		return strings.Contains(body, `"LastNode":"A"`)
	})
	check(t, hb, []step{{name: "B's own monitor", method: "GET", url: "/databases/cw/subscriptions/monitor?name=feed", status: 200,
		contains: []string{`"Status":"STOPPED"`, `"PositionEtag":0,`, `"LastNode":"A"`}}})
	// The detail page on B: A's figures, connections and batches.
	detail := get(t, hb, page+"/feed").Body.String()
	if !strings.Contains(detail, `data-testid="sub-node-of-feed" data-node="A" data-why="worker"`) || !strings.Contains(detail, `data-testid="sub-worker"`) ||
		strings.Count(detail, `data-testid="sub-batch"`) < 2 || !strings.Contains(detail, "Figures on node A") {
		t.Fatalf("detail on B: %s", detail)
	}
	// The internal endpoint is for nodes only.
	apiCall(t, "GET", b.url()+"/internal/subscriptions/monitor?db=cw", "", 403)

	// B's live channel keeps the view.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+b.addr+"/studio/live?page=subscriptions&db=cw&filter=fee", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if html := liveFragment(t, ws, "subscriptions-body", func(html string) bool { return strings.Contains(html, `data-testid="sub-row-feed"`) }); strings.Contains(html, `data-testid="sub-row-idle"`) {
		t.Fatalf("live fragment ignores the filter: %s", html)
	}

	// An error: current (red) until a batch is acknowledged after it.
	w.send(t, map[string]string{"Type": "Nope"})
	body = pollPage(t, hb, page, 20*time.Second, func(body string) bool {
		return attr(subRow(t, body, "feed"), "sub-last-error-feed", "data-current") == "true"
	})
	if row := subRow(t, body, "feed"); !strings.Contains(row, `class="repl-error small sub-error"`) || !strings.Contains(row, `unexpected &#34;Nope&#34; from the worker`) ||
		!strings.Contains(row, `class="warn" data-testid="sub-errors-feed" data-value="1"`) {
		t.Fatalf("current error: %s", row)
	}
	w2 := dialWorker(t, a.addr, "cw", "feed", 2)
	w2.batch(t)
	w2.send(t, map[string]string{"Type": "Acknowledge"})
	body = pollPage(t, hb, page, 20*time.Second, func(body string) bool {
		return attr(subRow(t, body, "feed"), "sub-last-error-feed", "data-current") == "false"
	})
	if row := subRow(t, body, "feed"); !strings.Contains(row, `class="repl-error past small sub-error"`) || !strings.Contains(row, "recovered") ||
		strings.Contains(row, `class="warn" data-testid="sub-errors-feed"`) {
		t.Fatalf("past error: %s", row)
	}

	// A goes down: its rows are unreachable, with no figures.
	a.stop()
	body = pollPage(t, hb, page, 30*time.Second, func(body string) bool {
		return strings.Contains(body, `data-testid="sub-node-A" data-answered="false"`)
	})
	feed = subRow(t, body, "feed")
	if attr(feed, "sub-state-feed", "data-state") != "UNREACHABLE" || attr(feed, "sub-node-of-feed", "data-node") != "A" || strings.Contains(feed, `data-testid="sub-status-feed"`) ||
		strings.Contains(feed, `data-testid="sub-progress-feed"`) || strings.Contains(feed, "STOPPED") || !strings.Contains(feed, `data-testid="sub-unreachable-feed"`) {
		t.Fatalf("feed with A down: %s", feed)
	}
	if idle = subRow(t, body, "idle"); attr(idle, "sub-state-idle", "data-state") != "NO WORKER" {
		t.Fatalf("idle with A down: %s", idle)
	}
	if detail = get(t, hb, page+"/feed").Body.String(); !strings.Contains(detail, `data-testid="sub-unreachable-feed"`) || strings.Contains(detail, `data-testid="sub-progress-feed"`) {
		t.Fatalf("detail with A down: %s", detail)
	}
}
