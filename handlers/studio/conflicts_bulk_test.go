package studio_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/activity"
	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/catalog"
	"github.com/rookerydb/rookery/backend/conflicts"
	"github.com/rookerydb/rookery/handlers/studio"
	"github.com/rookerydb/rookery/internal/testserver"
)

var (
	previewRowRe = regexp.MustCompile(`data-testid="preview-row" data-id="([^"]*)" data-winner="[^"]*" data-fingerprint="([^"]*)"`)
	previewOpRe  = regexp.MustCompile(`/conflicts/preview\?op=(\d+)`)
	startedRe    = regexp.MustCompile(`Operation\+(\d+)\+started`)
	summaryRowRe = regexp.MustCompile(`data-testid="summary-row" data-collection="([^"]*)" data-count="(\d+)"\s+data-to-version="(\d+)" data-merged="(\d+)" data-deleted="(\d+)"\s+data-declined="(\d+)" data-errors="(\d+)"`)
)

// previewVia posts the bulk form to the preview, follows the redirect to
// the preview operation's page and waits (bounded) until it has decided
// every id; it returns the operation's number and the finished page.
func previewVia(t *testing.T, h http.Handler, form url.Values) (int, string) {
	t.Helper()
	rec := postValues(t, h, "/studio/db/c/conflicts/preview", form, nil)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("preview: %d %.2000s", rec.Code, rec.Body.String())
	}
	m := previewOpRe.FindStringSubmatch(rec.Header().Get("Location"))
	if m == nil {
		t.Fatalf("preview went to %q", rec.Header().Get("Location"))
	}
	id, _ := strconv.Atoi(m[1])
	deadline := time.Now().Add(30 * time.Second)
	for {
		page := get(t, h, rec.Header().Get("Location"))
		body := page.Body.String()
		if page.Code != 200 {
			t.Fatalf("preview page: %d %.1000s", page.Code, body)
		}
		if !strings.Contains(body, `data-testid="preview-body" data-state="running"`) {
			return id, body
		}
		if time.Now().After(deadline) {
			t.Fatalf("preview %d still running", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// applyPreview applies preview op and returns the resolution's number.
func applyPreview(t *testing.T, h http.Handler, op int) int {
	t.Helper()
	rec := postValues(t, h, "/studio/db/c/conflicts/apply", url.Values{"preview": {strconv.Itoa(op)}}, nil)
	m := startedRe.FindStringSubmatch(rec.Header().Get("Location"))
	if rec.Code != http.StatusSeeOther || m == nil {
		t.Fatalf("apply preview %d: %d %s", op, rec.Code, rec.Header().Get("Location"))
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// 180 conflicts (the trial's case that took two rounds): the summary per
// collection first, the list in natural order with the form above it, a
// preview that decides and lists all 180 with no cap, and one apply that
// resolves all of them with progress to the end.
func TestConflictsBulkWholeScope(t *testing.T) {
	h, db := conflictServer(t)
	for i := 1; i <= 180; i++ {
		makeConflict(t, db, fmt.Sprintf("carts/%d", i), "Carts", `{"by":"A","@metadata":{"@collection":"Carts"}}`, `{"by":"B","@metadata":{"@collection":"Carts"}}`, i)
	}
	for i := 1; i <= 3; i++ {
		makeConflict(t, db, fmt.Sprintf("users/%d", i), "Users", `{"name":"a","@metadata":{"@collection":"Users"}}`, `{"name":"b","@metadata":{"@collection":"Users"}}`, 200+i)
	}

	body := get(t, h, "/studio/db/c/conflicts").Body.String()
	// The summary: the database's solver is manual, so the configured
	// strategy leaves every conflict for a person.
	rows := summaryRowRe.FindAllStringSubmatch(body, -1)
	if len(rows) != 2 || rows[0][1] != "Carts" || rows[0][2] != "180" || rows[0][6] != "180" || rows[1][1] != "Users" || rows[1][2] != "3" {
		t.Fatalf("summary rows %q: %.3000s", rows, body)
	}
	if !strings.Contains(body, `data-testid="summary-total">183<`) || !strings.Contains(body, `data-testid="summary-strategy">manual<`) || !strings.Contains(body, "180 left for a person") {
		t.Fatalf("summary figures: %.3000s", body)
	}
	// The form comes before the table; natural order on every page.
	if f, l := strings.Index(body, `data-testid="bulk-form"`), strings.Index(body, `data-testid="conflict-row"`); f < 0 || l < 0 || f > l {
		t.Fatalf("the form (%d) is not above the table (%d)", f, l)
	}
	ids := allMatches(conflictRowRe, body, 1)
	if len(ids) != 50 || ids[0] != "carts/1" || ids[1] != "carts/2" || ids[9] != "carts/10" || ids[49] != "carts/50" {
		t.Fatalf("first page not in natural order: %v", ids)
	}
	for _, s := range []string{`<tbody data-live-rows>`, `data-key="carts/1" data-testid="conflict-row"`, `data-testid="select-all-scope">All 183 in the scope<`,
		`data-testid="select-page"`, `data-testid="select-none"`, `All 183 conflicts in the database`, `src="/static/conflicts.js"`} {
		if !strings.Contains(body, s) {
			t.Fatalf("page lacks %q: %.3000s", s, body)
		}
	}
	next := firstMatch(t, nextPageRe, body)
	if !strings.Contains(next, "after=carts%2F50") {
		t.Fatalf("next %q", next)
	}
	if ids := allMatches(conflictRowRe, get(t, h, next).Body.String(), 1); ids[0] != "carts/51" || ids[49] != "carts/100" {
		t.Fatalf("second page %v", ids)
	}

	// Preview every conflict of the collection: all 180 decided and listed.
	pv, page := previewVia(t, h, url.Values{"strategy": {"node:B"}, "scope": {"filter"}, "collection": {"Carts"}})
	prs := previewRowRe.FindAllStringSubmatch(page, -1)
	if len(prs) != 180 || prs[0][1] != "carts/1" || prs[9][1] != "carts/10" || prs[179][1] != "carts/180" || prs[0][2] == "" {
		t.Fatalf("preview rows: %d, first %v: %.2000s", len(prs), prs[0], page)
	}
	for _, s := range []string{`data-testid="preview-summary">180 conflicted ids in scope, every one decided: 180 would resolve.`,
		`data-testid="bulk-apply">Apply to 180 conflicts<`, `name="preview" value="` + strconv.Itoa(pv) + `"`, `version 2 wins`} {
		if !strings.Contains(page, s) {
			t.Fatalf("preview lacks %q: %.3000s", s, page)
		}
	}
	if n, _ := db.ConflictCount(t.Context()); n != 183 {
		t.Fatalf("the preview wrote: %d conflicts", n)
	}
	// The preview page is live while it runs.
	if !strings.Contains(page, `page=conflicts-preview`) {
		t.Fatalf("the preview page is not live: %.1500s", page)
	}

	op := applyPreview(t, h, pv)
	if p := waitOp(t, h, op, "done"); p.Resolved != 180 || p.Skipped != 0 || p.Errors != 0 {
		t.Fatalf("apply: %+v", p)
	}
	body = get(t, h, "/studio/db/c/conflicts").Body.String()
	for _, s := range []string{fmt.Sprintf(`data-op="%d" data-state="done"`, op), `data-testid="op-done">180/180<`, `<progress max="180" value="180"`,
		`data-testid="conflicts-total">3<`} {
		if !strings.Contains(body, s) {
			t.Fatalf("after apply the page lacks %q: %.3000s", s, body)
		}
	}
	if strings.Contains(body, fmt.Sprintf(`data-op="%d"`, pv)) {
		t.Fatal("the preview is listed among the resolutions")
	}
	// The preview page now says it is being applied.
	if page := get(t, h, fmt.Sprintf("/studio/db/c/conflicts/preview?op=%d", pv)).Body.String(); !strings.Contains(page, `data-testid="preview-applied"`) {
		t.Fatalf("the preview does not point at its operation: %.2000s", page)
	}
	if code, doc := apiDoc2(t, h, "carts/77"); code != 200 || !strings.Contains(doc, `"by":"B"`) {
		t.Fatalf("carts/77: %d %s", code, doc)
	}
	if body := get(t, h, "/databases/c/conflicts/log?prefix=carts/").Body.String(); !strings.Contains(body, `"TotalResults":180`) ||
		!strings.Contains(body, fmt.Sprintf("bulk operation %d (studio, preview %d)", op, pv)) {
		t.Fatalf("log: %.500s", body)
	}
}

func TestConflictsBulkPreviewRefusals(t *testing.T) {
	h, db := conflictServer(t)
	makeConflict(t, db, "carts/1", "Carts", `{"by":"A","@metadata":{"@collection":"Carts"}}`, `{"by":"B","@metadata":{"@collection":"Carts"}}`, 1)
	runPages(t, []pageCase{
		{name: "no preview number", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/c/conflicts/preview?op=x") }, status: 400,
			contains: []string{"not a preview number"}},
		{name: "unknown preview", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/c/conflicts/preview?op=99") }, status: 404,
			contains: []string{"There is no preview 99"}},
		{name: "apply an unknown preview", do: func() *httptest.ResponseRecorder {
			return postValues(t, h, "/studio/db/c/conflicts/apply", url.Values{"preview": {"99"}}, nil)
		}, status: 303, location: "/studio/db/c/conflicts?error=Not+started%3A+There+is+no+preview+99"},
		{name: "cross-origin apply refused", do: func() *httptest.ResponseRecorder {
			return postValues(t, h, "/studio/db/c/conflicts/apply", url.Values{"preview": {"1"}}, map[string]string{"Origin": "http://evil.example"})
		}, status: 403},
	})
	// A resolution is not a preview.
	pv, _ := previewVia(t, h, url.Values{"strategy": {"latest"}, "scope": {"all"}})
	op := applyPreview(t, h, pv)
	waitOp(t, h, op, "done")
	rec := postValues(t, h, "/studio/db/c/conflicts/apply", url.Values{"preview": {strconv.Itoa(op)}}, nil)
	if !strings.Contains(rec.Header().Get("Location"), "error=") {
		t.Fatalf("applied a resolution as a preview: %s", rec.Header().Get("Location"))
	}
	// Nothing left to resolve: the preview says so.
	_, page := previewVia(t, h, url.Values{"strategy": {"latest"}, "scope": {"all"}})
	if !strings.Contains(page, `data-testid="preview-nothing"`) || strings.Contains(page, `data-testid="apply-form"`) {
		t.Fatalf("empty preview: %.2000s", page)
	}
}

// The live regions: the preview's body (its decisions once done) and the
// conflicts page's summary.
func TestConflictsPreviewLive(t *testing.T) {
	cat, err := catalog.Open(t.TempDir(), "A", slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	cl := testserver.Cluster(t)
	engine := conflicts.NewEngine(nil)
	s := &studio.Studio{Catalog: cat, Activity: activity.New(), Alerts: alerts.New(), NodeTag: "A", URL: func() string { return "http://a.test" }, Cluster: cl,
		Conflicts: conflicts.NewManager(engine, &conflicts.Auto{Engine: engine, Settings: cl, NodeTag: "A"})}
	s.Register(echo.New())
	db, err := bareCreate(t, s, cat, "db", catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 12; i++ {
		makeConflict(t, db, fmt.Sprintf("carts/%d", i), "Carts", `{"by":"A","@metadata":{"@collection":"Carts"}}`, `{"by":"B","@metadata":{"@collection":"Carts"}}`, i)
	}
	live := func(page string, q url.Values) map[string]string {
		t.Helper()
		frags, err := s.LiveFragments(context.Background(), page, q)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, f := range frags {
			var b strings.Builder
			if err := f.C.Render(context.Background(), &b); err != nil {
				t.Fatal(err)
			}
			out[f.ID] = b.String()
		}
		return out
	}
	pv, err := s.Conflicts.StartPreview(db, conflicts.Spec{Strategy: "latest"})
	if err != nil {
		t.Fatal(err)
	}
	_ = pv.Wait(context.Background())
	got := live("conflicts-preview", url.Values{"db": {"db"}, "op": {strconv.FormatInt(pv.Progress().ID, 10)}})
	frag := got["preview-body"]
	if !strings.Contains(frag, `id="preview-body"`) || !strings.Contains(frag, `data-state="done"`) || len(previewRowRe.FindAllString(frag, -1)) != 12 {
		t.Fatalf("live preview body: %.2000s", frag)
	}
	// The default configuration is latest: the summary says all 12 go to
	// the newest version.
	got = live("conflicts", url.Values{"db": {"db"}})
	if sum := got["conflicts-summary"]; !strings.Contains(sum, `data-collection="Carts" data-count="12"`) || !strings.Contains(sum, "12 to the newest version") {
		t.Fatalf("live summary: %.2000s", sum)
	}
}

// The endpoint a studio gathers other nodes' logs from is for the
// cluster's nodes only: a browser or a client (here an unsecured admin) is
// refused.
func TestConflictsNodeLogIsForNodesOnly(t *testing.T) {
	h, db := conflictServer(t)
	makeConflict(t, db, "carts/1", "Carts", `{"by":"A","@metadata":{"@collection":"Carts"}}`, `{"by":"B","@metadata":{"@collection":"Carts"}}`, 1)
	if rec := get(t, h, "/internal/conflicts/log?db=c"); rec.Code != http.StatusForbidden {
		t.Fatalf("GET /internal/conflicts/log as a client: %d %.300s", rec.Code, rec.Body.String())
	}
	// The page lists this node's own entries marked with it, and says which
	// nodes it asked.
	localPut(t, db, "carts/1", `{"by":"me","@metadata":{"@collection":"Carts"}}`)
	body := get(t, h, "/studio/db/c/conflicts/log").Body.String()
	for _, s := range []string{`data-testid="log-node" data-node="A" data-state="answered"`, `data-key="A.1" data-testid="log-entry"`, `data-node="A" data-from="A"`,
		`data-testid="log-entry-node" title="Resolved on node A">A<`, `<tbody data-live-rows>`} {
		if !strings.Contains(body, s) {
			t.Fatalf("log lacks %q: %.3000s", s, body)
		}
	}
	if rec := get(t, h, "/studio/db/c/conflicts/log?before=A.x"); rec.Code != http.StatusBadRequest {
		t.Fatalf("a bad cursor: %d", rec.Code)
	}
}
