package studio_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func orderDocs(from, to int) string {
	var cmds []string
	for i := from; i <= to; i++ {
		cmds = append(cmds, fmt.Sprintf(`{"Id":"orders/%d","Type":"PUT","Document":{"Total":%d,"@metadata":{"@collection":"Orders"}}}`, i, i))
	}
	return `{"Commands":[` + strings.Join(cmds, ",") + `]}`
}

// subRow is the HTML of one subscription's row on the list page.
func subRow(t *testing.T, body, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr data-key="[^"]*" data-testid="sub-row-` + regexp.QuoteMeta(name) + `".*?</tr>`).FindString(body)
	if m == "" {
		t.Fatalf("no row for %s in:\n%s", name, body)
	}
	return m
}

func subStatusOf(row, name string) string { return attr(row, "sub-status-"+name, "data-status") }

// The Subscriptions page of one node through its router: rows with the
// monitor's figures, one subscription's page (also a name with a slash),
// the test query (results and a syntax error), and the actions: disable,
// enable, drop, delete, thresholds, and disabling what the runaway rules
// flag.
func TestStudioSubscriptionsPage(t *testing.T) {
	h := newServer(t)
	ctJSON := map[string]string{"Content-Type": "application/json"}
	check(t, h, []step{
		{name: "db", method: "PUT", url: "/admin/databases?name=s", body: `{"DatabaseName":"s"}`, status: 201},
		{name: "docs", method: "POST", url: "/databases/s/bulk_docs", body: orderDocs(1, 5), headers: ctJSON, status: 201},
		{name: "big", method: "PUT", url: "/databases/s/subscriptions", body: `{"Query":"from Orders where Total > 2","Name":"big"}`, status: 201},
		{name: "all", method: "PUT", url: "/databases/s/subscriptions", body: `{"Query":"from Orders","Name":"all"}`, status: 201},
		{name: "slash", method: "PUT", url: "/databases/s/subscriptions", body: `{"Query":"from Orders","Name":"team/a"}`, status: 201},
	})
	page := "/studio/db/s/subscriptions"
	rec := get(t, h, page)
	body := rec.Body.String()
	if rec.Code != 200 {
		t.Fatalf("page: %d %s", rec.Code, body)
	}
	for _, want := range []string{
		`data-live="/studio/live?db=s&amp;page=subscriptions"`,
		`aria-current="page" href="/studio/db/s/subscriptions" data-testid="nav-subscriptions"`,
		`data-testid="subs-count">3<`,
		`href="/studio/db/s/subscriptions/team%2Fa"`,
		`data-testid="try-form"`,
		`name="StallSeconds" value="30"`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("page lacks %s:\n%s", want, body)
		}
	}
	big, all := subRow(t, body, "big"), subRow(t, body, "all")
	// A backlog and no worker: STOPPED; the backlog counts what matches.
	if subStatusOf(big, "big") != "STOPPED" || attr(big, "sub-backlog-big", "data-value") != "3" || attr(all, "sub-backlog-all", "data-value") != "5" ||
		attr(big, "sub-toscan-big", "data-value") != "5" || attr(big, "sub-progress-big", "data-position") != "0" || attr(big, "sub-progress-big", "data-last") == "0" ||
		attr(big, "sub-workers-big", "data-count") != "0" || !strings.Contains(body, `data-testid="chart-subs-backlog"`) || !strings.Contains(big, `<time data-ago datetime=`) || !strings.Contains(big, "from Orders where Total &gt; 2") {
		t.Fatalf("row of big: %s", big)
	}

	// One subscription's page, by its name (case-insensitive) or escaped.
	rec = get(t, h, page+"/BIG")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `data-testid="sub-detail-name">big<`) || !strings.Contains(rec.Body.String(), `data-testid="sub-query">from Orders where Total &gt; 2<`) ||
		!strings.Contains(rec.Body.String(), `data-live="/studio/live?db=s&amp;name=big&amp;page=subscription"`) || !strings.Contains(rec.Body.String(), `data-testid="sub-no-batches"`) {
		t.Fatalf("detail: %d %s", rec.Code, rec.Body.String())
	}
	if rec = get(t, h, page+"/team%2Fa"); rec.Code != 200 || !strings.Contains(rec.Body.String(), `data-testid="sub-detail-name">team/a<`) {
		t.Fatalf("detail of team/a: %d %s", rec.Code, rec.Body.String())
	}
	if rec = get(t, h, page+"/nope"); rec.Code != 404 || !strings.Contains(rec.Body.String(), "Subscription &#39;nope&#39; does not exist") {
		t.Fatalf("unknown: %d %s", rec.Code, rec.Body.String())
	}

	// The test query shows the first matches and creates nothing.
	rec = get(t, h, page+"?"+url.Values{"query": {"from Orders where Total >= 4"}, "pageSize": {"10"}}.Encode())
	body = rec.Body.String()
	if rec.Code != 200 || strings.Count(body, `data-testid="try-result"`) != 2 || !strings.Contains(body, `&#34;Total&#34;: 5`) || !strings.Contains(body, `data-testid="subs-count">3<`) {
		t.Fatalf("try: %d %s", rec.Code, body)
	}
	rec = get(t, h, page+"?"+url.Values{"query": {"from Orders where Total >"}}.Encode())
	if body = rec.Body.String(); rec.Code != 400 || !strings.Contains(body, `data-testid="try-error"`) || !strings.Contains(body, "expected a value") || !strings.Contains(body, "from Orders where Total &gt;</textarea>") {
		t.Fatalf("try error: %d %s", rec.Code, body)
	}

	// Actions.
	act := func(vals map[string]string, location string) {
		t.Helper()
		rec := postForm(t, h, page, vals, nil)
		if rec.Code != 303 || rec.Header().Get("Location") != location {
			t.Fatalf("%v: %d %q %s", vals, rec.Code, rec.Header().Get("Location"), rec.Body.String())
		}
	}
	act(map[string]string{"action": "disable", "name": "big"}, page+"?flash="+url.QueryEscape("Subscription big disabled. Its worker was disconnected and is told not to reconnect."))
	if row := subRow(t, get(t, h, page).Body.String(), "big"); attr(row, "sub-state-big", "data-state") != "DISABLED" || !strings.Contains(row, `data-testid="sub-enable-big"`) {
		t.Fatalf("disabled row: %s", row)
	}
	check(t, h, []step{{name: "state", method: "GET", url: "/databases/s/subscriptions/state?name=big", status: 200, contains: []string{`"Disabled":true`}}})
	act(map[string]string{"action": "enable", "name": "big", "from": "detail"}, page+"/big?flash="+url.QueryEscape("Subscription big enabled."))
	if row := subRow(t, get(t, h, page).Body.String(), "big"); attr(row, "sub-state-big", "data-state") != "NO WORKER" || !strings.Contains(row, `data-testid="sub-disable-big"`) {
		t.Fatalf("enabled row: %s", row)
	}
	act(map[string]string{"action": "drop", "name": "big"}, page+"?flash="+url.QueryEscape("No worker was connected to big on this node."))
	act(map[string]string{"action": "disable", "name": "nope"}, page+"?error="+url.QueryEscape("Subscription 'nope' does not exist"))
	act(map[string]string{"action": "explode"}, page+"?error="+url.QueryEscape(`Unknown action "explode"; nothing was changed.`))
	act(map[string]string{"action": "delete", "name": "team/a", "from": "detail"}, page+"?flash="+url.QueryEscape("Subscription team/a deleted."))
	if rec = get(t, h, page+"/team%2Fa"); rec.Code != 404 {
		t.Fatalf("deleted still shown: %d", rec.Code)
	}
	act(map[string]string{"action": "thresholds", "StallSeconds": "2", "ScanShare": "0.25", "BurstCount": ""}, page+"?flash=Thresholds+saved.#thresholds")
	check(t, h, []step{{name: "thresholds", method: "GET", url: "/databases/s/subscriptions/monitor/thresholds", status: 200,
		contains: []string{`"StallSeconds":2`, `"ScanShare":0.25`, `"BurstCount":20`}}})
	act(map[string]string{"action": "thresholds", "StallSeconds": "-1"}, page+"?error="+url.QueryEscape("StallSeconds must be a whole number of at least 0; the thresholds were not changed.")+"#thresholds")
	act(map[string]string{"action": "thresholds", "ScanShare": "2"}, page+"?error="+url.QueryEscape("ScanShare is a fraction between 0 and 1; the thresholds were not changed.")+"#thresholds")
	if body = get(t, h, page).Body.String(); !strings.Contains(body, `name="StallSeconds" value="2"`) || strings.Contains(body, `data-testid="disable-flagged"`) {
		t.Fatalf("thresholds form, or flags without a reason: %s", body)
	}

	// A burst of subscriptions: every one of them is flagged, and "Disable
	// flagged" disables them all.
	for i := 0; i < 20; i++ {
		check(t, h, []step{{name: "burst", method: "PUT", url: "/databases/s/subscriptions", body: fmt.Sprintf(`{"Query":"from Orders where Total > %d","Name":"burst-%d"}`, i, i), status: 201}})
	}
	// The monitor's report is at most a second old.
	body = pollPage(t, h, page, 10*time.Second, func(body string) bool { return strings.Contains(body, `data-testid="sub-row-burst-19"`) })
	row := subRow(t, body, "burst-7")
	if !strings.Contains(row, `data-testid="sub-flag-burst-7"`) || !strings.Contains(row, `data-rule="burst"`) || !strings.Contains(row, "22 subscriptions were created in the last 60s (threshold 20)") ||
		!strings.Contains(body, `data-testid="disable-flagged"`) || !strings.Contains(body, `data-testid="subs-flagged">22<`) {
		t.Fatalf("burst: %s", body)
	}
	// "Disable flagged" asks first: the POST without confirmation, and the
	// confirmation page, change nothing; the page names how many and which.
	rec = postForm(t, h, page, map[string]string{"action": "disable-flagged", "view-filter": "burst"}, nil)
	if rec.Code != 303 || rec.Header().Get("Location") != page+"?confirm=disable-flagged&filter=burst" {
		t.Fatalf("disable flagged without confirmation: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	confirm := get(t, h, page+"?confirm=disable-flagged&filter=burst").Body.String()
	if !strings.Contains(confirm, `data-testid="sub-confirm" data-count="22"`) || strings.Count(confirm, `data-testid="sub-confirm-item"`) != 22 ||
		!strings.Contains(confirm, "Disable 22 flagged subscriptions?") || !strings.Contains(confirm, `<input type="hidden" name="name" value="burst-19">`) ||
		!strings.Contains(confirm, `<input type="hidden" name="view-filter" value="burst">`) || strings.Contains(confirm, `data-disabled="true"`) {
		t.Fatalf("confirmation: %s", confirm)
	}
	check(t, h, []step{{name: "nothing disabled yet", method: "GET", url: "/databases/s/subscriptions/state?name=burst-3", status: 200, contains: []string{`"Disabled":false`}}})
	// Confirmed: exactly the names the confirmation carried (two here).
	rec = postSubForm(t, h, page, url.Values{"action": {"disable-flagged"}, "confirmed": {"1"}, "name": {"burst-3", "burst-4"}, "view-filter": {"burst"}})
	if loc, _ := url.Parse(rec.Header().Get("Location")); rec.Code != 303 || loc.Query().Get("flash") != "Disabled 2 subscriptions: burst-3, burst-4." || loc.Query().Get("filter") != "burst" {
		t.Fatalf("confirmed: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	if body = get(t, h, page).Body.String(); strings.Count(body, `data-disabled="true"`) != 2 || !strings.Contains(body, `data-testid="subs-flagged">20<`) {
		t.Fatalf("after disabling two: %s", body)
	}
	every := url.Values{"action": {"disable-flagged"}, "confirmed": {"1"}}
	confirm = regexp.MustCompile(`(?s)data-testid="sub-confirm".*?</section>`).FindString(get(t, h, page+"?confirm=disable-flagged").Body.String())
	for _, m := range regexp.MustCompile(`name="name" value="([^"]+)"`).FindAllStringSubmatch(confirm, -1) {
		every.Add("name", m[1])
	}
	if len(every["name"]) != 20 {
		t.Fatalf("confirmation lists %d", len(every["name"]))
	}
	every.Add("name", "burst-3") // already disabled
	every.Add("name", "gone")    // does not exist
	rec = postSubForm(t, h, page, every)
	if loc, _ := url.Parse(rec.Header().Get("Location")); rec.Code != 303 || !strings.HasPrefix(loc.Query().Get("flash"), "Disabled 20 subscriptions: ") ||
		!strings.HasSuffix(loc.Query().Get("flash"), " Already disabled: burst-3. No longer exist: gone.") {
		t.Fatalf("disable flagged: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	body = get(t, h, page).Body.String()
	if strings.Count(body, `data-disabled="true"`) != 22 || strings.Contains(body, `data-testid="disable-flagged"`) || !strings.Contains(body, `data-testid="subs-flagged">0<`) {
		t.Fatalf("after disabling the flagged: %s", body)
	}
	if body = get(t, h, page+"?confirm=disable-flagged").Body.String(); !strings.Contains(body, `data-testid="sub-confirm" data-count="0"`) || !strings.Contains(body, "Nothing to disable") {
		t.Fatalf("confirmation with nothing flagged: %s", body)
	}
	// A cross-site form is refused.
	if rec = postForm(t, h, page, map[string]string{"action": "delete", "name": "big"}, map[string]string{"Sec-Fetch-Site": "cross-site"}); rec.Code != 403 {
		t.Fatalf("cross-site: %d", rec.Code)
	}
}

// postSubForm posts a form whose fields may repeat.
func postSubForm(t *testing.T, h http.Handler, path string, vals url.Values) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("POST", path, strings.NewReader(vals.Encode()))
	req.RemoteAddr = "127.0.0.1:40000"
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// worker is a raw subscription worker over the node's TCP protocol.
type worker struct {
	conn net.Conn
	dec  *json.Decoder
}

type workerMsg struct {
	Type, Status, Message string
	Data                  map[string]any
}

func dialWorker(t *testing.T, addr, db, name string, maxDocs int) *worker {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	w := &worker{conn: conn, dec: json.NewDecoder(conn)}
	w.send(t, map[string]any{"DatabaseName": db, "Operation": "Subscription", "OperationVersion": 53000, "AuthorizeInfo": nil, "LicensedFeatures": map[string]any{"dataCompression": false}})
	var hdr struct{ Status string }
	if err := w.dec.Decode(&hdr); err != nil || hdr.Status != "Ok" {
		t.Fatalf("header: %v %+v", err, hdr)
	}
	w.send(t, map[string]any{"SubscriptionName": name, "Strategy": "OpenIfFree", "MaxDocsPerBatch": maxDocs})
	if m := w.next(t); m.Type != "ConnectionStatus" || m.Status != "Accepted" {
		t.Fatalf("connection: %+v", m)
	}
	return w
}

func (w *worker) send(t *testing.T, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if _, err := w.conn.Write(b); err != nil {
		t.Fatal(err)
	}
}

func (w *worker) next(t *testing.T) workerMsg {
	t.Helper()
	var m workerMsg
	if err := w.dec.Decode(&m); err != nil {
		t.Fatalf("worker read: %v", err)
	}
	return m
}

// batch reads one batch (skipping a Confirm) and returns its ids.
func (w *worker) batch(t *testing.T) []string {
	t.Helper()
	var ids []string
	for {
		m := w.next(t)
		switch m.Type {
		case "Data":
			md, _ := m.Data["@metadata"].(map[string]any)
			id, _ := md["@id"].(string)
			ids = append(ids, id)
		case "EndOfBatch":
			return ids
		case "Confirm":
		default:
			t.Fatalf("unexpected %+v", m)
		}
	}
}

// liveFragment reads the page's websocket until a fragment with id
// satisfies ok.
func liveFragment(t *testing.T, ws *websocket.Conn, id string, ok func(html string) bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var last string
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("live %s: %v; last: %s", id, err, last)
		}
		var msg struct{ Fragments []struct{ ID, HTML string } }
		if err := json.Unmarshal(b, &msg); err != nil {
			t.Fatal(err)
		}
		for _, f := range msg.Fragments {
			if f.ID == id {
				if last = f.HTML; ok(f.HTML) {
					return f.HTML
				}
			}
		}
	}
}

// A real worker on a real port, watched through the pages and their
// websockets: the batch in flight while it is not acknowledged, STALLED
// once the stall threshold passes, the position advancing on each ack (a
// live update, no reload), the connection and batch history on the
// subscription's page, and "drop connections" telling the worker to go.
func TestStudioSubscriptionWorker(t *testing.T) {
	n := &replNode{tag: "A", dir: filepath.Join(t.TempDir(), "A"), addr: freeAddr(t), raft: freeAddr(t)}
	n.start(t)
	t.Cleanup(n.stop)
	apiCall(t, "PUT", n.url()+"/admin/databases?name=w", `{"DatabaseName":"w"}`, 201)
	apiCall(t, "POST", n.url()+"/databases/w/bulk_docs", orderDocs(1, 6), 201)
	apiCall(t, "PUT", n.url()+"/databases/w/subscriptions", `{"Query":"from Orders","Name":"feed"}`, 201)
	apiCall(t, "PUT", n.url()+"/databases/w/subscriptions/monitor/thresholds", `{"StallSeconds":1}`, 200)
	h := n.srv.Handler()
	page := "/studio/db/w/subscriptions"

	ctx := context.Background()
	ws, _, err := websocket.Dial(ctx, "ws://"+n.addr+"/studio/live?page=subscriptions&db=w", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	liveFragment(t, ws, "subscriptions-body", func(html string) bool { return strings.Contains(html, `data-testid="sub-row-feed"`) })

	w := dialWorker(t, n.addr, "w", "feed", 2)
	if ids := w.batch(t); len(ids) != 2 || ids[0] != "orders/1" {
		t.Fatalf("first batch: %v", ids)
	}
	// Not acknowledged: in flight, then STALLED.
	body := pollPage(t, h, page, 20*time.Second, func(body string) bool {
		row := subRow(t, body, "feed")
		return subStatusOf(row, "feed") == "STALLED" && attr(row, "sub-inflight-feed", "data-value") == "2" && attr(row, "sub-workers-feed", "data-count") == "1"
	})
	if row := subRow(t, body, "feed"); !strings.Contains(row, "OpenIfFree") || !strings.Contains(row, "127.0.0.1:") || attr(row, "sub-progress-feed", "data-position") != "0" {
		t.Fatalf("stalled row: %s", row)
	}
	liveFragment(t, ws, "subscriptions-body", func(html string) bool { return subStatusOf(html, "feed") == "STALLED" })

	// Each ack moves the position; the page's websocket carries it.
	pos := func(html string) int {
		p, _ := strconv.Atoi(attr(html, "sub-progress-feed", "data-position"))
		return p
	}
	w.send(t, map[string]string{"Type": "Acknowledge"})
	first := pos(liveFragment(t, ws, "subscriptions-body", func(html string) bool { return pos(html) > 0 }))
	if ids := w.batch(t); len(ids) != 2 || ids[0] != "orders/3" {
		t.Fatalf("second batch: %v", ids)
	}
	w.send(t, map[string]string{"Type": "Acknowledge"})
	liveFragment(t, ws, "subscriptions-body", func(html string) bool { return pos(html) > first })

	// The subscription's page: its connection and its batches.
	detail := get(t, h, page+"/feed").Body.String()
	if strings.Count(detail, `data-testid="sub-batch"`) < 2 || !strings.Contains(detail, `data-testid="sub-connection" data-open="true"`) || !strings.Contains(detail, `data-testid="sub-worker"`) {
		t.Fatalf("detail: %s", detail)
	}

	// Drop connections: the worker is told, the page shows no worker.
	rec := postForm(t, h, page, map[string]string{"action": "drop", "name": "feed", "from": "detail"}, nil)
	if rec.Code != 303 || !strings.HasPrefix(rec.Header().Get("Location"), page+"/feed?flash=Dropped") {
		t.Fatalf("drop: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	for {
		m := w.next(t)
		if m.Type == "ConnectionStatus" {
			if m.Status != "Closed" || !strings.Contains(m.Message, "dropped by an operator") {
				t.Fatalf("drop told the worker %+v", m)
			}
			break
		}
	}
	pollPage(t, h, page+"/feed", 10*time.Second, func(body string) bool {
		return strings.Contains(body, `data-testid="sub-no-workers"`) && strings.Contains(body, `data-testid="sub-connection" data-open="false"`)
	})
}
