package studio_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
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
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/handlers/studio"
	"github.com/rookerydb/rookery/internal/testserver"
	"github.com/rookerydb/rookery/web"
)

// conflictServer is a real node with database "c" whose conflicts stay
// stored (the manual solver).
func conflictServer(t *testing.T) (http.Handler, *storage.DB) {
	t.Helper()
	srv, err := web.New(web.Config{DataDir: t.TempDir(), NodeTag: "A", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	h := srv.Handler()
	check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=c", body: `{"DatabaseName":"c"}`, status: 201},
		{name: "manual", method: "POST", url: "/admin/replication/conflicts/solver?name=c", body: `{"ResolveToLatest":false}`, status: 200},
	})
	db, err := srv.Catalog().Get("c")
	if err != nil {
		t.Fatal(err)
	}
	return h, db
}

// localPut writes a document on this node.
func localPut(t *testing.T, db *storage.DB, id, body string) {
	t.Helper()
	p, err := document.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write(context.Background(), func(tx *storage.Tx) error { _, err := tx.Put(id, p, nil); return err }); err != nil {
		t.Fatal(err)
	}
}

// remoteVersion applies a version of id from node tag as replication
// delivers it: concurrent with whatever this copy holds, an hour newer.
func remoteVersion(t *testing.T, db *storage.DB, tag, id, collection, body string, etag int) {
	t.Helper()
	var o storage.Outcome
	err := db.Write(context.Background(), func(tx *storage.Tx) error {
		var err error
		o, err = tx.ApplyReplicated(storage.Item{Type: "Put", ID: id, Collection: collection, ChangeVector: fmt.Sprintf("%s:%d-Qfo6Xn1dQEeVq0mZ1W2yX%s", tag, etag, tag),
			LastModified: time.Now().Add(time.Hour), Body: []byte(body)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if o != storage.Conflicted {
		t.Fatalf("%s: outcome %v, want a conflict", id, o)
	}
}

// makeConflict stores a local version and a concurrent one from node B.
func makeConflict(t *testing.T, db *storage.DB, id, collection, local, remote string, etag int) {
	t.Helper()
	localPut(t, db, id, local)
	remoteVersion(t, db, "B", id, collection, remote, etag)
}

func orderBody(by string, extra string) string {
	return `{"by":"` + by + `","n":1` + extra + `,"@metadata":{"@collection":"Orders"}}`
}

var (
	conflictRowRe = regexp.MustCompile(`data-testid="conflict-row" data-id="([^"]*)"`)
	fingerprintRe = regexp.MustCompile(`name="fingerprint" value="([^"]*)"`)
	keepCVRe      = regexp.MustCompile(`name="cv" value="([^"]*)"`)
	pinRe         = regexp.MustCompile(`name="pin" value="([^"]*)"`)
	fpRe          = regexp.MustCompile(`name="fp" value="([^"]*)"`)
	logEntryRe    = regexp.MustCompile(`data-testid="log-entry" data-seq="(\d+)" data-id="([^"]*)"`)
	nextPageRe    = regexp.MustCompile(`href="([^"]*)" rel="next" data-testid="next-page"`)
)

func allMatches(re *regexp.Regexp, body string, group int) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		out = append(out, html.UnescapeString(m[group]))
	}
	return out
}

func firstMatch(t *testing.T, re *regexp.Regexp, body string) string {
	t.Helper()
	m := re.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no match for %s in %.1500s", re, body)
	}
	return html.UnescapeString(m[1])
}

// postValues posts a form whose fields may repeat.
func postValues(t *testing.T, h http.Handler, path string, v url.Values, headers map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := localRequest("POST", path, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, x := range headers {
		req.Header.Set(k, x)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

const xssID = `x/<script>alert(1)</script>`

// The list: rows with their figures, totals, filter, keyset paging, the
// bulk form's choices, the nav badge, and escaped ids.
func TestStudioConflictsList(t *testing.T) {
	h, db := conflictServer(t)
	for i := 1; i <= 55; i++ {
		makeConflict(t, db, fmt.Sprintf("orders/%02d", i), "Orders", orderBody("A", ""), orderBody("B", ""), i)
	}
	makeConflict(t, db, "users/1", "Users", `{"name":"a","@metadata":{"@collection":"Users"}}`, `{"name":"b","@metadata":{"@collection":"Users"}}`, 100)
	makeConflict(t, db, xssID, "Orders", orderBody("A", ""), orderBody("B", ""), 101)
	localPut(t, db, "plain/1", `{"ok":true}`)

	body := get(t, h, "/studio/db/c/conflicts").Body.String()
	rows := allMatches(conflictRowRe, body, 1)
	if len(rows) != 50 || rows[0] != "orders/01" || rows[49] != "orders/50" {
		t.Fatalf("first page rows %v", rows)
	}
	for _, s := range []string{
		`data-testid="conflicts-total">57<`, `data-testid="nav-conflicts-count" aria-label="57 conflicted documents">57<`,
		`data-live="/studio/live?db=c&amp;page=conflicts"`, `aria-current="page" href="/studio/db/c/conflicts"`,
		`data-testid="conflict-versions">2<`, `data-testid="conflict-collection">Orders<`,
		`href="/studio/db/c/conflicts/doc?id=orders%2F01" data-testid="conflict-link"`,
		`form="bulk-form" name="ids" value="orders/01"`, `for="conflict-sel-0"`,
		`for="bulk-strategy"`, `<option value="latest" selected>`, `<option value="local">This node&#39;s version (A)</option>`,
		`<option value="configured">`, `<option value="script">`, `for="bulk-script"`, `for="bulk-scope-selected"`, `for="bulk-scope-filter"`, `for="bulk-scope-all"`,
		`data-testid="no-ops"`, `for="conflicts-collection"`, `for="conflicts-prefix"`,
	} {
		if !strings.Contains(body, s) {
			t.Fatalf("list lacks %q: %.4000s", s, body)
		}
	}
	if strings.Contains(body, `value="plain/1"`) {
		t.Fatal("a document without conflicts is listed")
	}
	next := firstMatch(t, nextPageRe, body)
	if !strings.Contains(next, "after=orders%2F50") {
		t.Fatalf("next link %q is not a keyset cursor", next)
	}
	body = get(t, h, next).Body.String()
	if rows := allMatches(conflictRowRe, body, 1); strings.Join(rows, " ") != "orders/51 orders/52 orders/53 orders/54 orders/55 users/1 "+xssID {
		t.Fatalf("second page rows %v", rows)
	}
	if !strings.Contains(body, `data-testid="first-page"`) || strings.Contains(body, `data-testid="next-page"`) {
		t.Fatal("second page pager")
	}
	// Escaping: the id is text everywhere, never markup.
	if strings.Contains(body, "<script>alert(1)") || !strings.Contains(body, `x/&lt;script&gt;alert(1)&lt;/script&gt;`) {
		t.Fatal("the id is not escaped in the list")
	}
	// ... and on the id's page, the preview and the log.
	escaped := `x/&lt;script&gt;alert(1)&lt;/script&gt;`
	_, previewed := previewVia(t, h, url.Values{"strategy": {"latest"}, "scope": {"filter"}, "prefix": {"x/"}})
	for name, rec := range map[string]*httptest.ResponseRecorder{
		"id page": get(t, h, "/studio/db/c/conflicts/doc?id="+url.QueryEscape(xssID)),
	} {
		if rec.Code != 200 || strings.Contains(rec.Body.String(), "<script>alert(1)") || !strings.Contains(rec.Body.String(), escaped) {
			t.Fatalf("%s: %d, id not escaped: %.2000s", name, rec.Code, rec.Body.String())
		}
	}
	if strings.Contains(previewed, "<script>alert(1)") || !strings.Contains(previewed, escaped) {
		t.Fatalf("preview: id not escaped: %.2000s", previewed)
	}
	localPut(t, db, xssID, orderBody("resolved", "")) // a client write resolves it, logged
	if body := get(t, h, "/studio/db/c/conflicts/log").Body.String(); strings.Contains(body, "<script>alert(1)") || !strings.Contains(body, `data-testid="log-entry-id">`+escaped+`<`) {
		t.Fatalf("log: id not escaped: %.2000s", body)
	}
	runPages(t, []pageCase{
		{name: "collection filter", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/c/conflicts?collection=users") }, status: 200,
			contains: []string{`data-id="users/1"`, `data-testid="conflicts-total">1<`, `56 in the database`, `data-testid="conflicts-filter-clear"`, `value="users"`},
			lacks:    []string{`data-id="orders/01"`}},
		{name: "prefix filter", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/c/conflicts?prefix=ORDERS/1") }, status: 200,
			contains: []string{`data-id="orders/10"`, `data-id="orders/19"`, `data-testid="conflicts-total">10<`, `data-live="/studio/live?db=c&amp;page=conflicts&amp;prefix=ORDERS%2F1"`},
			lacks:    []string{`data-id="orders/01"`, `data-id="orders/20"`}},
		{name: "no match", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/c/conflicts?prefix=zzz") }, status: 200,
			contains: []string{`data-testid="no-conflicts"`, `No conflicts match the filter.`}},
		{name: "unknown database", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/nope/conflicts") }, status: 404,
			contains: []string{`No such database`}},
		{name: "badge on other pages", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/c/documents") }, status: 200,
			contains: []string{`aria-label="56 conflicted documents">56<`}},
	})
}

// One id: versions side by side with vectors and nodes, the field diff,
// the merged suggestion; keep a version, save a resolution, and the
// refusals (changed meanwhile, bad JSON, another collection) that keep the
// user's text.
func TestStudioConflictDocument(t *testing.T) {
	h, db := conflictServer(t)
	evil := `</pre></textarea><script>alert(2)</script>`
	makeConflict(t, db, "orders/1", "Orders", orderBody("A", `,"note":"`+evil+`","same":{"x":1,"y":2}`), orderBody("B", `,"same":{"y":2,"x":1},"only":"b"`), 5)
	makeConflict(t, db, "orders/2", "Orders", orderBody("A", ""), orderBody("B", ""), 6)
	makeConflict(t, db, "orders/3", "Orders", orderBody("A", ""), orderBody("B", ""), 7)

	page := get(t, h, "/studio/db/c/conflicts/doc?id=ORDERS/1")
	body := page.Body.String()
	if page.Code != 200 {
		t.Fatalf("status %d", page.Code)
	}
	for _, s := range []string{
		`data-testid="conflict-id">orders/1<`, `data-testid="version-cv">A:`, `data-testid="version-cv">B:5-Qfo6Xn1dQEeVq0mZ1W2yXB<`,
		`<span class="tag mono">B:5</span>`, `<span class="tag mono">A:`,
		`data-field="by" data-differs="true"`, `data-field="n" data-differs="false"`, `data-field="same" data-differs="false"`,
		`data-field="only" data-differs="true"`, `data-field="note" data-differs="true"`,
		`data-testid="conflicting-fields">by, note, only<`, `for="conflict-editor"`,
		"&#34;by&#34;: &#34;B&#34;", // the suggestion takes the latest (B's, an hour newer) for a differing field
		`data-testid="keep-version"`, `data-testid="resolve-save"`,
		`&lt;/pre&gt;&lt;/textarea&gt;&lt;script&gt;alert(2)&lt;/script&gt;`,
	} {
		if !strings.Contains(body, s) {
			t.Fatalf("id page lacks %q: %.5000s", s, body)
		}
	}
	if strings.Contains(body, "<script>alert(2)") {
		t.Fatal("a document body is not escaped")
	}
	if strings.Contains(body, `data-field="@metadata"`) {
		t.Fatal("@metadata is in the field diff")
	}
	alias := get(t, h, "/studio/db/c/conflicts/orders/1")
	if alias.Code != 200 || !strings.Contains(alias.Body.String(), `data-testid="conflict-id">orders/1<`) {
		t.Fatalf("/conflicts/{id...}: %d", alias.Code)
	}
	gone := get(t, h, "/studio/db/c/conflicts/doc?id=orders/404")
	if gone.Code != 404 || !strings.Contains(gone.Body.String(), `data-testid="conflict-gone"`) {
		t.Fatalf("an id without a conflict: %d %.300s", gone.Code, gone.Body.String())
	}

	// orders/2 changes after the page was opened: a third version arrives.
	page2 := get(t, h, "/studio/db/c/conflicts/doc?id=orders/2").Body.String()
	oldFP, oldCV := firstMatch(t, fingerprintRe, page2), firstMatch(t, keepCVRe, page2)
	remoteVersion(t, db, "C", "orders/2", "Orders", orderBody("C", ""), 9)
	mine := `{"by":"me <b>bold</b>","@metadata":{"@collection":"Orders"}}`
	runPages(t, []pageCase{
		{name: "cross-origin keep refused", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/c/conflicts/doc/keep", map[string]string{"id": "orders/2", "fingerprint": oldFP, "cv": oldCV}, map[string]string{"Origin": "http://evil.example"})
		}, status: 403},
		{name: "cross-origin resolve refused", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/c/conflicts/doc/resolve", map[string]string{"id": "orders/2", "fingerprint": oldFP, "json": mine}, map[string]string{"Sec-Fetch-Site": "cross-site"})
		}, status: 403},
		{name: "keep refused: changed meanwhile", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/c/conflicts/doc/keep", map[string]string{"id": "orders/2", "fingerprint": oldFP, "cv": oldCV}, nil)
		}, status: 409, contains: []string{`data-testid="conflict-error"`, "Not resolved: the conflict changed since you opened it", `data-testid="version-cv">C:9-`}},
		{name: "save refused: changed meanwhile, text kept", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/c/conflicts/doc/resolve", map[string]string{"id": "orders/2", "fingerprint": oldFP, "json": mine}, nil)
		}, status: 409, contains: []string{"Not resolved: the conflict changed", "Your text is still in the editor",
			`data-testid="conflict-editor">{&#34;by&#34;:&#34;me &lt;b&gt;bold&lt;/b&gt;&#34;`}},
	})
	if code, _ := apiDoc2(t, h, "orders/2"); code != 409 {
		t.Fatalf("orders/2 must still be in conflict, got %d", code)
	}
	fresh := get(t, h, "/studio/db/c/conflicts/doc?id=orders/2").Body.String()
	newFP := firstMatch(t, fingerprintRe, fresh)
	if newFP == oldFP {
		t.Fatal("the fingerprint did not change with a new version")
	}
	runPages(t, []pageCase{
		{name: "bad json kept", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/c/conflicts/doc/resolve", map[string]string{"id": "orders/2", "fingerprint": newFP, "json": `{"by":`}, nil)
		}, status: 400, contains: []string{"This is not a valid document", `data-testid="conflict-editor">{&#34;by&#34;:</textarea>`}},
		{name: "another collection refused", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/c/conflicts/doc/resolve", map[string]string{"id": "orders/2", "fingerprint": newFP, "json": `{"@metadata":{"@collection":"Users"}}`}, nil)
		}, status: 400, contains: []string{"must stay in collection Orders"}},
		{name: "save", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/c/conflicts/doc/resolve", map[string]string{"id": "orders/2", "fingerprint": newFP, "json": mine}, nil)
		}, status: 303, location: "/studio/db/c/doc?flash=Resolved+orders%2F2+with+your+version.&id=orders%2F2"},
		{name: "saved document", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/c/doc?id=orders/2") }, status: 200,
			contains: []string{"me &lt;b&gt;bold&lt;/b&gt;"}},
		{name: "resolved twice refused", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/c/conflicts/doc/resolve", map[string]string{"id": "orders/2", "fingerprint": newFP, "json": mine}, nil)
		}, status: 409, contains: []string{"is no longer in conflict", `data-testid="conflict-gone"`, `readonly`}},
		{name: "logged as studio", do: func() *httptest.ResponseRecorder { return get(t, h, "/databases/c/conflicts/log?id=orders/2") }, status: 200,
			contains: []string{`"TotalResults":1`, `"By":"studio"`, `"Strategy":"manual"`, `C:9-`}},
	})

	// Keep B's version of orders/3.
	page3 := get(t, h, "/studio/db/c/conflicts/doc?id=orders/3").Body.String()
	var bCV string
	for _, cv := range allMatches(keepCVRe, page3, 1) {
		if strings.HasPrefix(cv, "B:") {
			bCV = cv
		}
	}
	rec := postForm(t, h, "/studio/db/c/conflicts/doc/keep", map[string]string{"id": "orders/3", "fingerprint": firstMatch(t, fingerprintRe, page3), "cv": bCV}, nil)
	if rec.Code != 303 || !strings.Contains(rec.Header().Get("Location"), "Resolved+orders%2F3%3A+kept+version+2.") {
		t.Fatalf("keep: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	if code, doc := apiDoc2(t, h, "orders/3"); code != 200 || !strings.Contains(doc, `"by":"B"`) {
		t.Fatalf("kept version: %d %s", code, doc)
	}
}

func apiDoc2(t *testing.T, h http.Handler, id string) (int, string) {
	t.Helper()
	rec := get(t, h, "/databases/c/docs?id="+url.QueryEscape(id))
	return rec.Code, rec.Body.String()
}

// Bulk: preview (refusals keep the form), apply pinned to the preview (an
// id that changed since is skipped), the operation's progress, cancel and
// resume; then the resolution log with its filters, paging and restore.
func TestStudioConflictsBulkAndLog(t *testing.T) {
	h, db := conflictServer(t)
	for i := 1; i <= 30; i++ {
		makeConflict(t, db, fmt.Sprintf("orders/%02d", i), "Orders", orderBody("A", ""), orderBody("B", ""), i)
	}
	makeConflict(t, db, "users/1", "Users", `{"name":"a","@metadata":{"@collection":"Users"}}`, `{"name":"b","@metadata":{"@collection":"Users"}}`, 100)
	evilScript := `return {"x":"</textarea><script>alert(3)</script>"`
	runPages(t, []pageCase{
		{name: "preview needs a selection", do: func() *httptest.ResponseRecorder {
			return postValues(t, h, "/studio/db/c/conflicts/preview", url.Values{"strategy": {"latest"}, "scope": {"selected"}, "script": {"kept text"}}, nil)
		}, status: 400, contains: []string{`data-testid="bulk-error"`, "Tick at least one conflict", `data-testid="bulk-script">kept text</textarea>`}},
		{name: "preview of a broken script", do: func() *httptest.ResponseRecorder {
			return postValues(t, h, "/studio/db/c/conflicts/preview", url.Values{"strategy": {"script"}, "scope": {"all"}, "script": {evilScript}}, nil)
		}, status: 400, contains: []string{"does not compile", `&lt;/textarea&gt;&lt;script&gt;alert(3)&lt;/script&gt;`, `<option value="script" selected>`, `value="all" checked`},
			lacks: []string{"<script>alert(3)"}},
		{name: "cross-origin preview refused", do: func() *httptest.ResponseRecorder {
			return postValues(t, h, "/studio/db/c/conflicts/preview", url.Values{"strategy": {"latest"}, "scope": {"all"}}, map[string]string{"Origin": "http://evil.example"})
		}, status: 403},
		{name: "cross-origin apply refused", do: func() *httptest.ResponseRecorder {
			return postValues(t, h, "/studio/db/c/conflicts/apply", url.Values{"strategy": {"latest"}, "pin": {"orders/01"}, "fp": {"x"}}, map[string]string{"Origin": "http://evil.example"})
		}, status: 403},
		{name: "apply without a preview", do: func() *httptest.ResponseRecorder {
			return postValues(t, h, "/studio/db/c/conflicts/apply", url.Values{"strategy": {"latest"}}, nil)
		}, status: 303, location: "/studio/db/c/conflicts?error=Nothing+to+apply"},
	})

	// Preview the selected ids with node:B: each shows B's version winning
	// and carries its fingerprint.
	sel := url.Values{"strategy": {"node:B"}, "scope": {"selected"}, "ids": {"orders/01", "orders/02", "orders/03", "users/1"}}
	pv1, body := previewVia(t, h, sel)
	rows := previewRowRe.FindAllStringSubmatch(body, -1)
	if len(rows) != 4 || rows[0][1] != "orders/01" || rows[3][1] != "users/1" || rows[0][2] == "" {
		t.Fatalf("preview rows %v", rows)
	}
	for _, s := range []string{`data-testid="preview-summary">4 conflicted ids in scope, every one decided: 4 would resolve.`, `data-testid="preview-row" data-id="orders/01" data-winner="1"`,
		`version 2 wins`, `data-testid="bulk-apply">Apply to 4 conflicts<`, `<input type="hidden" name="ids" value="users/1">`} {
		if !strings.Contains(body, s) {
			t.Fatalf("preview lacks %q: %.3000s", s, body)
		}
	}
	// orders/02 changes after the preview: the operation must skip it.
	remoteVersion(t, db, "C", "orders/02", "Orders", orderBody("C", ""), 50)
	op1 := applyPreview(t, h, pv1)
	waitOp(t, h, op1, "done")
	body = get(t, h, "/studio/db/c/conflicts").Body.String()
	for _, s := range []string{fmt.Sprintf(`data-testid="op" data-op="%d" data-state="done"`, op1), `data-testid="op-resolved">3<`, `data-testid="op-skipped">1<`,
		`data-testid="op-done">4/4<`, `<progress max="4" value="4"`, `4 previewed ids`, `data-testid="conflicts-total">28<`} {
		if !strings.Contains(body, s) {
			t.Fatalf("operations lack %q: %.4000s", s, body)
		}
	}
	if strings.Contains(body, `data-testid="op-cancel"`) || strings.Contains(body, `data-testid="op-resume"`) {
		t.Fatal("a finished operation offers cancel or resume")
	}
	if code, doc := apiDoc2(t, h, "orders/01"); code != 200 || !strings.Contains(doc, `"by":"B"`) {
		t.Fatalf("orders/01 after node:B: %d %s", code, doc)
	}
	if code, _ := apiDoc2(t, h, "orders/02"); code != 409 {
		t.Fatalf("orders/02 changed after the preview and must still be in conflict, got %d", code)
	}

	// A slow script (each id runs into the time limit) keeps an operation
	// running long enough to cancel and resume it from the page.
	_, preview := previewVia(t, h, url.Values{"strategy": {"script"}, "scope": {"filter"}, "prefix": {"orders/"}, "script": {"while (true) {}"}})
	if !strings.Contains(preview, `data-testid="preview-nothing"`) || !strings.Contains(preview, "time limit") {
		t.Fatalf("a failing script previews as errors: %.2000s", preview)
	}
	// Real fingerprints (from a preview of the same ids), so the script runs
	// for each id: 28 ids at the 100 ms limit each (the older pin/fp form).
	_, latest := previewVia(t, h, url.Values{"strategy": {"latest"}, "scope": {"filter"}, "prefix": {"orders/"}})
	var pins, fps []string
	for _, m := range previewRowRe.FindAllStringSubmatch(latest, -1) {
		pins, fps = append(pins, m[1]), append(fps, m[2])
	}
	start := postValues(t, h, "/studio/db/c/conflicts/apply", url.Values{"strategy": {"script"}, "scope": {"filter"}, "prefix": {"orders/"}, "script": {"while (true) {}"},
		"pin": pins, "fp": fps}, nil)
	m := startedRe.FindStringSubmatch(start.Header().Get("Location"))
	if start.Code != 303 || m == nil || len(pins) != 28 {
		t.Fatalf("start the slow one: %s (%d pins)", start.Header().Get("Location"), len(pins))
	}
	slow := m[1]
	runPages(t, []pageCase{
		{name: "cross-origin cancel refused", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/c/conflicts/operations/cancel", map[string]string{"op": slow}, map[string]string{"Origin": "http://evil.example"})
		}, status: 403},
		{name: "cancel an unknown operation", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/c/conflicts/operations/cancel", map[string]string{"op": "77"}, nil)
		}, status: 303, location: "/studio/db/c/conflicts?error=There+is+no+operation+77"},
		{name: "resume a finished operation refused", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/c/conflicts/operations/resume", map[string]string{"op": strconv.Itoa(op1)}, nil)
		}, status: 303, location: fmt.Sprintf("/studio/db/c/conflicts?error=operation+%d+is+done", op1)},
	})
	rec := postForm(t, h, "/studio/db/c/conflicts/operations/cancel", map[string]string{"op": slow}, nil)
	if rec.Code != 303 || !strings.Contains(rec.Header().Get("Location"), "flash=Operation+"+slow+"+is+cancelled+after+") {
		t.Fatalf("cancel: %s", rec.Header().Get("Location"))
	}
	body = get(t, h, "/studio/db/c/conflicts").Body.String()
	if !strings.Contains(body, `data-testid="op" data-op="`+slow+`" data-state="cancelled"`) || !strings.Contains(body, `data-testid="op-resume"`) {
		t.Fatalf("a cancelled operation offers resume: %.3000s", body)
	}
	rec = postForm(t, h, "/studio/db/c/conflicts/operations/resume", map[string]string{"op": slow}, nil)
	if rec.Code != 303 || !strings.Contains(rec.Header().Get("Location"), "flash=Operation+"+slow+"+resumed.") {
		t.Fatalf("resume: %s", rec.Header().Get("Location"))
	}
	slowN, _ := strconv.Atoi(slow)
	if p := waitOp(t, h, slowN, "done"); p.Resolved != 0 || p.Errors != 28 {
		t.Fatalf("operation %s (a script that never returns): %+v", slow, p)
	}
	body = get(t, h, "/studio/db/c/conflicts").Body.String()
	if !strings.Contains(body, `data-testid="op-errors">28<`) || !strings.Contains(body, `data-testid="op-last-error">Last error: orders/`) {
		t.Fatalf("the slow operation's errors: %.3000s", body)
	}

	// Resolve the rest with latest (scope: every conflict, filtered).
	pv3, _ := previewVia(t, h, url.Values{"strategy": {"latest"}, "scope": {"filter"}, "prefix": {"orders/"}})
	op3 := applyPreview(t, h, pv3)
	if p := waitOp(t, h, op3, "done"); p.Resolved != 28 {
		t.Fatalf("operation %d: %+v", op3, p)
	}

	// The log: 31 resolutions, newest first, 25 a page.
	body = get(t, h, "/studio/db/c/conflicts/log").Body.String()
	entries := logEntryRe.FindAllStringSubmatch(body, -1)
	if len(entries) != 25 || !strings.Contains(body, `data-testid="log-total">31<`) {
		t.Fatalf("log first page: %d entries: %.2000s", len(entries), body)
	}
	if entries[0][1] <= entries[1][1] && len(entries[0][1]) <= len(entries[1][1]) {
		t.Fatalf("log not newest first: %s then %s", entries[0][1], entries[1][1])
	}
	next := firstMatch(t, nextPageRe, body)
	if !strings.Contains(next, "before=") {
		t.Fatalf("log next %q", next)
	}
	if n := len(logEntryRe.FindAllString(get(t, h, next).Body.String(), -1)); n != 6 {
		t.Fatalf("log second page: %d entries", n)
	}
	runPages(t, []pageCase{
		{name: "log by strategy", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/c/conflicts/log?strategy=node") }, status: 200,
			contains: []string{`data-testid="log-total">3<`, `data-testid="log-entry-strategy">node:B<`, fmt.Sprintf("bulk operation %d (studio, preview %d)", op1, pv1), `data-testid="log-entry-node" title="Resolved on node A">A<`}},
		{name: "log by collection", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/c/conflicts/log?collection=users") }, status: 200,
			contains: []string{`data-testid="log-total">1<`, `data-id="users/1"`}},
		{name: "log by id", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/c/conflicts/log?id=ORDERS/02") }, status: 200,
			contains: []string{`data-testid="log-total">1<`, `data-id="orders/02"`, `data-testid="log-entry-strategy">latest<`, `C:50-`}},
		{name: "log by prefix and by", do: func() *httptest.ResponseRecorder {
			return get(t, h, fmt.Sprintf("/studio/db/c/conflicts/log?prefix=orders/0&by=bulk+operation+%d", op3))
		}, status: 200,
			contains: []string{`data-testid="log-total">7<`}},
		{name: "log bad cursor", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/c/conflicts/log?before=x") }, status: 400},
		{name: "log nothing", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/c/conflicts/log?by=nobody") }, status: 200,
			contains: []string{`data-testid="log-empty"`}},
	})

	// Restore the losing version (A's) of users/1.
	body = get(t, h, "/studio/db/c/conflicts/log?id=users/1").Body.String()
	seq := firstMatch(t, logEntryRe, body)
	if !strings.Contains(body, `data-testid="log-version" data-kept="true"`) || strings.Count(body, `data-testid="restore-form"`) != 1 {
		t.Fatalf("one kept version and one restorable: %.3000s", body)
	}
	// The restore button sits on the log row itself, for the losing version.
	version := regexp.MustCompile(`name="version" value="(\d)"`).FindStringSubmatch(body)[1]
	if kept := regexp.MustCompile(`data-testid="log-version" data-kept="false" data-cv="[^"]*">\s*<h3>Version (\d)`).FindStringSubmatch(body); kept == nil || kept[1] != "1" || version != "0" {
		t.Fatalf("the row's restore button is not the losing version's (version %s): %.3000s", version, body)
	}
	runPages(t, []pageCase{
		{name: "cross-origin restore refused", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/c/conflicts/log/restore", map[string]string{"seq": seq, "version": version}, map[string]string{"Origin": "http://evil.example"})
		}, status: 403},
		{name: "restore a missing entry", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/c/conflicts/log/restore", map[string]string{"seq": "999", "version": "0"}, nil)
		}, status: 303, location: "/studio/db/c/conflicts/log?error="},
		{name: "restore of an unknown node's entry", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/c/conflicts/log/restore", map[string]string{"node": "Q", "seq": seq, "version": version}, nil)
		}, status: 303, location: "/studio/db/c/conflicts/log?error=Not+restored%3A+node+Q+is+not+a+member"},
		{name: "restore in one click (no confirmation)", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/c/conflicts/log/restore", map[string]string{"node": "A", "seq": seq, "version": version}, nil)
		}, status: 303, location: "/studio/db/c/doc?flash=Restored+version+1+of+users%2F1+from+log+entry+A."},
	})
	if code, doc := apiDoc2(t, h, "users/1"); code != 200 || !strings.Contains(doc, `"name":"a"`) {
		t.Fatalf("restored: %d %s", code, doc)
	}
}

type opProgress struct {
	ID       int64
	State    string
	Resolved int
	Skipped  int
	Errors   int
}

func opState(t *testing.T, h http.Handler, id int) opProgress {
	t.Helper()
	var p opProgress
	rec := get(t, h, fmt.Sprintf("/databases/c/conflicts/operations/%d", id))
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("operation %d: %s", id, rec.Body)
	}
	return p
}

// waitOp waits for an operation to reach a state (bounded; the assertion is
// on the state, not on how long it took).
func waitOp(t *testing.T, h http.Handler, id int, state string) opProgress {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := opState(t, h, id)
		if p.State == state {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("operation %d never reached %s: %+v", id, state, p)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Settings: the stored configuration in the form; a refused save keeps the
// text; rows are added and removed; a test run shows a script's result or
// its error without saving anything.
func TestStudioConflictSettings(t *testing.T) {
	h, db := conflictServer(t)
	makeConflict(t, db, "orders/1", "Orders", orderBody("A", `,"qty":2`), orderBody("B", `,"qty":5`), 3)
	makeConflict(t, db, "users/1", "Users", `{"name":"a","@metadata":{"@collection":"Users"}}`, `{"name":"b","@metadata":{"@collection":"Users"}}`, 4)
	merge := `var out = docs[0]; for (var i = 1; i < docs.length; i++) { out.qty = Math.max(out.qty, docs[i].qty); } out.merged = true; return out;`
	evil := `</textarea><script>alert(4)</script>`
	base := func(extra url.Values) url.Values {
		v := url.Values{"default": {"script"}, "script": {merge}, "rules": {"1"}, "c0.name": {""}, "c0.strategy": {"latest"}, "testId": {"orders/1"}}
		for k, x := range extra {
			v[k] = x
		}
		return v
	}
	runPages(t, []pageCase{
		{name: "settings page", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/c/conflicts/settings") }, status: 200, contains: []string{
			`for="settings-default"`, `<option value="manual" selected>`, `<option value="node:A">Prefer this node (A)</option>`, `<option value="script">Script</option>`,
			`for="settings-script"`, `for="rule-0-name"`, `for="rule-0-strategy"`, `for="rule-0-script"`, `data-testid="settings-save"`,
			`<option value="orders/1">orders/1</option>`, `<option value="users/1">users/1</option>`, `data-testid="test-run"`,
		}, lacks: []string{`value="local"`}},
		{name: "test run of a merge script", do: func() *httptest.ResponseRecorder {
			return postValues(t, h, "/studio/db/c/conflicts/settings", base(url.Values{"action": {"test"}}), nil)
		}, status: 200, contains: []string{`data-testid="test-result" data-outcome="merged"`, `the default applies, <strong>script</strong>`, "&#34;qty&#34;: 5", "&#34;merged&#34;: true",
			`<option value="orders/1" selected>`, `Nothing was saved`}},
		{name: "test run of a throwing script", do: func() *httptest.ResponseRecorder {
			return postValues(t, h, "/studio/db/c/conflicts/settings", base(url.Values{"action": {"test"}, "script": {`throw new Error("nope " + "` + evil + `")`}}), nil)
		}, status: 200, contains: []string{`data-outcome="error"`, `script threw: Error: nope &lt;/textarea&gt;&lt;script&gt;alert(4)`}, lacks: []string{"<script>alert(4)"}},
		{name: "test run: a collection's rule applies", do: func() *httptest.ResponseRecorder {
			return postValues(t, h, "/studio/db/c/conflicts/settings", base(url.Values{"action": {"test"}, "testId": {"users/1"}, "c0.name": {"users"}, "c0.strategy": {"node:B"}}), nil)
		}, status: 200, contains: []string{`collection users&#39;s rule applies, <strong>node:B</strong>`, `data-outcome="winner"`, "Version 2 wins.", "&#34;name&#34;: &#34;b&#34;"}},
		{name: "test run of a manual strategy", do: func() *httptest.ResponseRecorder {
			return postValues(t, h, "/studio/db/c/conflicts/settings", base(url.Values{"action": {"test"}, "default": {"manual"}}), nil)
		}, status: 200, contains: []string{`data-outcome="declined"`}},
		{name: "add a row keeps the text", do: func() *httptest.ResponseRecorder {
			return postValues(t, h, "/studio/db/c/conflicts/settings", base(url.Values{"action": {"add"}, "c0.name": {"Users"}, "c0.strategy": {"script"}, "c0.script": {evil}}), nil)
		}, status: 200, contains: []string{`value="Users"`, `for="rule-1-name"`, `&lt;/textarea&gt;&lt;script&gt;alert(4)&lt;/script&gt;</textarea>`}, lacks: []string{"<script>alert(4)"}},
		{name: "save refused: bad script, text kept", do: func() *httptest.ResponseRecorder {
			return postValues(t, h, "/studio/db/c/conflicts/settings", base(url.Values{"action": {"save"}, "c0.name": {"Users"}, "c0.strategy": {"script"}, "c0.script": {"return {" + evil}}), nil)
		}, status: 400, contains: []string{`data-testid="settings-error"`, "Not saved: collection Users: script does not compile", `value="Users"`, `return {&lt;/textarea&gt;`}},
		{name: "save refused: a row twice", do: func() *httptest.ResponseRecorder {
			return postValues(t, h, "/studio/db/c/conflicts/settings", base(url.Values{"action": {"save"}, "rules": {"2"}, "c0.name": {"Users"}, "c1.name": {"users"}, "c1.strategy": {"manual"}}), nil)
		}, status: 400, contains: []string{"two rows"}},
		{name: "cross-origin save refused", do: func() *httptest.ResponseRecorder {
			return postValues(t, h, "/studio/db/c/conflicts/settings", base(url.Values{"action": {"save"}}), map[string]string{"Origin": "http://evil.example"})
		}, status: 403},
		{name: "solver unchanged", do: func() *httptest.ResponseRecorder { return get(t, h, "/databases/c/replication/conflicts/solver") }, status: 200,
			contains: []string{`"Default":"manual"`}},
		{name: "save", do: func() *httptest.ResponseRecorder {
			return postValues(t, h, "/studio/db/c/conflicts/settings", base(url.Values{"action": {"save"}, "default": {"manual"}, "c0.name": {"Users"}, "c0.strategy": {"script"}, "c0.script": {merge}}), nil)
		}, status: 303, location: "/studio/db/c/conflicts/settings?flash=Saved."},
		{name: "solver saved", do: func() *httptest.ResponseRecorder { return get(t, h, "/databases/c/replication/conflicts/solver") }, status: 200,
			contains: []string{`"Default":"manual"`, `"Users":{"Strategy":"script"`}},
		{name: "page shows the rule", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/c/conflicts/settings") }, status: 200,
			contains: []string{`data-testid="settings-rule" data-collection="Users"`, `for="rule-0-remove"`, `for="rule-1-name"`}},
		{name: "remove the rule, prefer node B", do: func() *httptest.ResponseRecorder {
			return postValues(t, h, "/studio/db/c/conflicts/settings", url.Values{"action": {"save"}, "default": {"node:B"}, "rules": {"2"}, "c0.name": {"Users"}, "c0.strategy": {"script"}, "c0.script": {merge}, "c0.remove": {"yes"}}, nil)
		}, status: 303, location: "/studio/db/c/conflicts/settings?flash=Saved."},
		{name: "removed", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/c/conflicts/settings") }, status: 200,
			contains: []string{`<option value="node:B" selected>Prefer node B</option>`}, lacks: []string{`data-collection="Users"`}},
	})
}

// The conflicts page's live regions: the list follows conflicts coming and
// going on the first page only; the operations always.
func TestStudioConflictsLive(t *testing.T) {
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
	live := func(q url.Values) map[string]string {
		t.Helper()
		frags, err := s.LiveFragments(context.Background(), "conflicts", q)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, f := range frags {
			var b strings.Builder
			if err := f.C.Render(context.Background(), &b); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), `id="`+f.ID+`"`) {
				t.Fatalf("fragment %s does not carry its id", f.ID)
			}
			out[f.ID] = b.String()
		}
		return out
	}
	first := url.Values{"db": {"db"}, "page": {"conflicts"}}
	got := live(first)
	if !strings.Contains(got["conflicts-list"], `data-testid="no-conflicts"`) || !strings.Contains(got["nav-conflicts-badge"], ">0<") || got["conflict-ops"] == "" {
		t.Fatalf("empty: %v", got)
	}
	makeConflict(t, db, "orders/1", "Orders", orderBody("A", ""), orderBody("B", ""), 1)
	got = live(first)
	if rows := allMatches(conflictRowRe, got["conflicts-list"], 1); len(rows) != 1 || rows[0] != "orders/1" || !strings.Contains(got["nav-conflicts-badge"], ">1<") {
		t.Fatalf("a new conflict is not live: %v", got)
	}
	if _, ok := live(url.Values{"db": {"db"}, "page": {"conflicts"}, "after": {"orders/0"}})["conflicts-list"]; ok {
		t.Fatal("a later page's rows must not move under the reader")
	}
	op, err := s.Conflicts.Start(db, conflicts.Spec{Strategy: "latest"})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	got = live(first)
	if !strings.Contains(got["conflict-ops"], `data-state="done"`) || !strings.Contains(got["conflict-ops"], `data-testid="op-resolved">1<`) ||
		!strings.Contains(got["conflicts-list"], `data-testid="no-conflicts"`) || !strings.Contains(got["nav-conflicts-badge"], ">0<") {
		t.Fatalf("after the operation: %v", got)
	}
}
