package studio_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/activity"
	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/catalog"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/handlers/studio"
	"github.com/rookerydb/rookery/web"
)

// The document editor's server side (issue 12, point 9, and the document
// page's side of point 4): errors at line and column, references,
// conflicted ids, and the live fragment that tells the open page about the
// stored version.

// edServer is a real node with database "db" (the manual conflict solver,
// so conflicts stay), built with cfg's limits.
func edServer(t *testing.T, cfg web.Config) (http.Handler, *storage.DB) {
	t.Helper()
	cfg.DataDir, cfg.NodeTag, cfg.PublicURL = t.TempDir(), "A", "http://node-a.test"
	cfg.Logger, cfg.ElectionTimeout = slog.New(slog.NewTextHandler(io.Discard, nil)), 100*time.Millisecond
	srv, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	h := srv.Handler()
	check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=db", body: `{"DatabaseName":"db"}`, status: 201},
		{name: "manual", method: "POST", url: "/admin/replication/conflicts/solver?name=db", body: `{"ResolveToLatest":false}`, status: 200},
	})
	db, err := srv.Catalog().Get("db")
	if err != nil {
		t.Fatal(err)
	}
	return h, db
}

func edPut(t *testing.T, db *storage.DB, id, body string) {
	t.Helper()
	p, err := document.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write(context.Background(), func(tx *storage.Tx) error { _, err := tx.Put(id, p, nil); return err }); err != nil {
		t.Fatal(err)
	}
}

// edConflict puts id locally and then a concurrent version from node B, as
// replication delivers it.
func edConflict(t *testing.T, db *storage.DB, id, collection, local, remote string) {
	t.Helper()
	edPut(t, db, id, local)
	var o storage.Outcome
	err := db.Write(context.Background(), func(tx *storage.Tx) error {
		var err error
		o, err = tx.ApplyReplicated(storage.Item{Type: "Put", ID: id, Collection: collection, ChangeVector: "B:7-Qfo6Xn1dQEeVq0mZ1W2yXB",
			LastModified: time.Now().Add(time.Hour), Body: []byte(remote)})
		return err
	})
	if err != nil || o != storage.Conflicted {
		t.Fatalf("conflict on %s: outcome %v, %v", id, o, err)
	}
}

var (
	edCVRe   = regexp.MustCompile(`name="changeVector" value="([^"]*)" data-testid="doc-cv-field"`)
	edRefRe  = regexp.MustCompile(`data-testid="doc-ref" data-ref-id="([^"]*)"`)
	edPathRe = regexp.MustCompile(`data-testid="doc-ref-path">([^<]*)<`)
)

func edCV(t *testing.T, body string) string {
	t.Helper()
	m := edCVRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no change vector field in %.600s", body)
	}
	return html.UnescapeString(m[1])
}

func edAll(re *regexp.Regexp, body string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}

// A refused save says where the JSON breaks, as line and column (the column
// in characters), and the page carries the place for the editor; it used
// to give a byte offset.
func TestStudioEditorSyntaxErrorAtLineAndColumn(t *testing.T) {
	h, db := edServer(t, web.Config{})
	edPut(t, db, "users/1-A", `{"name":"Ann","@metadata":{"@collection":"Users"}}`)
	page := get(t, h, "/studio/db/db/doc?id=users/1-A").Body.String()
	cv := edCV(t, page)
	for _, c := range []struct {
		name, text, want string
		line, col        int
	}{
		{"missing comma", "{\n  \"name\": \"Ann\"\n  \"city\": \"Oslo\"\n}", "line 3, column 3: invalid character", 3, 3},
		{"column in characters", "{\n  \"näme\": \"Ånn\", \"ü\": tru\n}", "line 2, column 26: invalid character", 2, 26},
		{"cut short", "{\n  \"name\": \"Ann\",\n", "line 3, column 1: the text ends before the JSON does", 3, 1},
		{"text after the object", "{\"name\":\"Ann\",\"@metadata\":{\"@collection\":\"Users\"}}\n\n  x", "line 3, column 3: unexpected text after the end of the JSON value", 3, 3},
		{"trailing comma", "{\"a\":1,}", "line 1, column 8: invalid character", 1, 8},
	} {
		rec := postForm(t, h, "/studio/db/db/doc", map[string]string{"id": "users/1-A", "changeVector": cv, "json": c.text}, nil)
		body := rec.Body.String()
		if rec.Code != http.StatusBadRequest {
			t.Fatalf("%s: status %d, want 400: %.400s", c.name, rec.Code, body)
		}
		for _, want := range []string{
			"This is not a valid document: " + html.EscapeString(c.want),
			fmt.Sprintf(`data-line="%d" data-col="%d"`, c.line, c.col),
			">" + html.EscapeString(c.text) + "</textarea>", // the text is kept
			`data-editor="json"`,
		} {
			if !strings.Contains(body, want) {
				t.Fatalf("%s: page lacks %q: %.3000s", c.name, want, body)
			}
		}
	}
	// Not a syntax error: no place.
	rec := postForm(t, h, "/studio/db/db/doc", map[string]string{"id": "users/1-A", "changeVector": cv, "json": `[1]`}, nil)
	if body := rec.Body.String(); rec.Code != 400 || !strings.Contains(body, "a document must be a JSON object") || !strings.Contains(body, `data-line="" data-col=""`) {
		t.Fatalf("array: %d %.2000s", rec.Code, body)
	}
	// The new-document form says it the same way.
	rec = postForm(t, h, "/studio/db/db/doc/new", map[string]string{"id": "notes/1", "json": "{\n\"a\": 1,\n\"b\" 2}"}, nil)
	if body := rec.Body.String(); rec.Code != 400 || !strings.Contains(body, "line 3, column 5:") || !strings.Contains(body, `data-line="3" data-col="5"`) {
		t.Fatalf("new document: %d %.2000s", rec.Code, body)
	}
	// Nothing was saved.
	if code, body := edAPI(t, h, "users/1-A"); code != 200 || !strings.Contains(body, `"Ann"`) {
		t.Fatalf("stored: %d %s", code, body)
	}
}

func edAPI(t *testing.T, h http.Handler, id string) (int, string) {
	t.Helper()
	rec := get(t, h, "/databases/db/docs?id="+url.QueryEscape(id))
	return rec.Code, rec.Body.String()
}

// The strings of a document that name stored documents are listed as links
// (with where they occur), whatever their case; strings naming nothing,
// the document itself, prose and @metadata are not; a conflicted id is a
// link marked as such. The check is bounded: past the limit the page says
// so.
func TestStudioEditorReferences(t *testing.T) {
	h, db := edServer(t, web.Config{})
	edPut(t, db, "companies/1-A", `{"name":"Acme","@metadata":{"@collection":"Companies"}}`)
	edPut(t, db, "employees/2-A", `{"name":"Bo","@metadata":{"@collection":"Employees"}}`)
	edConflict(t, db, "products/3-A", "Products", `{"p":1,"@metadata":{"@collection":"Products"}}`, `{"p":2,"@metadata":{"@collection":"Products"}}`)
	edPut(t, db, "orders/1-A", `{
		"Company": "COMPANIES/1-A",
		"Missing": "companies/404-A",
		"Self": "orders/1-A",
		"Prose": "see companies/1-A for details",
		"Lines": [{"Product": "products/3-A"}, {"Product": "companies/1-A"}],
		"companies/1-A": 5,
		"Nested": {"Who": ["x", "employees/2-A"]},
		"@metadata": {"@collection": "Orders", "Owner": "employees/2-A"}
	}`)
	body := get(t, h, "/studio/db/db/doc?id=orders/1-A").Body.String()
	refs, paths := edAll(edRefRe, body), edAll(edPathRe, body)
	if strings.Join(refs, " ") != "companies/1-A products/3-A employees/2-A" {
		t.Fatalf("references %q, want companies/1-A, products/3-A, employees/2-A in document order", refs)
	}
	if strings.Join(paths, " ") != "/Company /Lines/0/Product /Nested/Who/1" {
		t.Fatalf("reference paths %q", paths)
	}
	for _, want := range []string{
		`href="/studio/db/db/doc?id=companies%2F1-A" class="mono" data-testid="doc-ref"`,
		`data-testid="doc-ref-conflict"`,
		`src="/static/vendor/codemirror/codemirror.js"`, `src="/static/editor.js"`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("page lacks %q: %.3000s", want, body)
		}
	}
	if strings.Contains(body, `data-testid="doc-refs-capped"`) {
		t.Fatal("a document under the limit says it was cut")
	}
	// A document without references has no list.
	if body := get(t, h, "/studio/db/db/doc?id=companies/1-A").Body.String(); strings.Contains(body, `data-testid="doc-refs"`) {
		t.Fatalf("companies/1-A shows references: %.2000s", body)
	}

	// The bound: with 3 strings checked, a reference that comes fourth is
	// not found and the page says the check stopped.
	h2, db2 := edServer(t, web.Config{MaxDocReferences: 3})
	edPut(t, db2, "companies/1-A", `{"@metadata":{"@collection":"Companies"}}`)
	edPut(t, db2, "orders/2-A", `{"a":"x1","b":"x2","c":"companies/1-A","d":3,"e":"COMPANIES/1-A","f":"orders/2-A","@metadata":{"@collection":"Orders","x":"x4"}}`)
	edPut(t, db2, "orders/3-A", `{"a":"x1","b":"x2","c":"x3","d":"companies/1-A","@metadata":{"@collection":"Orders"}}`)
	body = get(t, h2, "/studio/db/db/doc?id=orders/2-A").Body.String()
	if refs := edAll(edRefRe, body); len(refs) != 1 || strings.Contains(body, `data-testid="doc-refs-capped"`) {
		t.Fatalf("three distinct strings fit the limit of 3: refs %v, %.2000s", refs, body)
	}
	body = get(t, h2, "/studio/db/db/doc?id=orders/3-A").Body.String()
	if refs := edAll(edRefRe, body); len(refs) != 0 || !strings.Contains(body, `Only the first 3 distinct strings of this document were checked.`) {
		t.Fatalf("past the limit: refs %v, %.3000s", refs, body)
	}
	// -1 turns references off.
	h3, db3 := edServer(t, web.Config{MaxDocReferences: -1})
	edPut(t, db3, "companies/1-A", `{"@metadata":{"@collection":"Companies"}}`)
	edPut(t, db3, "orders/1-A", `{"c":"companies/1-A","@metadata":{"@collection":"Orders"}}`)
	if body := get(t, h3, "/studio/db/db/doc?id=orders/1-A").Body.String(); strings.Contains(body, `data-testid="doc-ref"`) {
		t.Fatal("references shown with --max-doc-references -1")
	}
}

// A conflicted id's page says so and leads to the resolution, never "not
// found, may have been deleted"; a save into an id that went into conflict
// keeps the text. A missing id is still "not found".
func TestStudioEditorConflictedID(t *testing.T) {
	h, db := edServer(t, web.Config{})
	edPut(t, db, "orders/9-A", `{"by":"A","@metadata":{"@collection":"Orders"}}`)
	page := get(t, h, "/studio/db/db/doc?id=orders/9-A").Body.String()
	cv := edCV(t, page)
	edConflict(t, db, "orders/9-A", "Orders", `{"by":"A2","@metadata":{"@collection":"Orders"}}`, `{"by":"B","@metadata":{"@collection":"Orders"}}`)

	rec := get(t, h, "/studio/db/db/doc?id=ORDERS/9-A")
	body := rec.Body.String()
	if rec.Code != 200 {
		t.Fatalf("conflicted id: status %d: %.1000s", rec.Code, body)
	}
	for _, want := range []string{
		`data-testid="doc-conflict-banner"`, "This document is in conflict.", "2 versions arrived from different nodes",
		`href="/studio/db/db/conflicts/doc?id=orders%2F9-A" data-testid="doc-conflict-link"`,
		`data-testid="doc-id">orders/9-A<`, `data-testid="back-collection">Orders<`,
		`data-state="conflict"`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("conflicted page lacks %q: %.3000s", want, body)
		}
	}
	for _, bad := range []string{"may have been deleted", `data-testid="doc-gone"`, `data-testid="doc-form"`, `data-testid="doc-delete"`} {
		if strings.Contains(body, bad) {
			t.Fatalf("conflicted page shows %q: %.3000s", bad, body)
		}
	}

	// The editor was open on the version before the conflict.
	text := `{"by":"mine","@metadata":{"@collection":"Orders"}}`
	rec = postForm(t, h, "/studio/db/db/doc", map[string]string{"id": "orders/9-A", "changeVector": cv, "json": text}, nil)
	body = rec.Body.String()
	if rec.Code != http.StatusConflict || !strings.Contains(body, "went into conflict since you opened it") ||
		!strings.Contains(body, `data-testid="doc-unsaved">`+html.EscapeString(text)+`<`) || !strings.Contains(body, `data-testid="doc-conflict-link"`) {
		t.Fatalf("save into a conflict: %d %.3000s", rec.Code, body)
	}

	rec = get(t, h, "/studio/db/db/doc?id=orders/404")
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "may have been deleted") {
		t.Fatalf("missing id: %d %.500s", rec.Code, rec.Body.String())
	}
}

// The document page's live fragment carries the stored version's change
// vector (what editor.js compares with the editor's base), and says when
// the document is gone or in conflict.
func TestStudioEditorLiveVersion(t *testing.T) {
	cat, err := catalog.Open(t.TempDir(), "A", slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	s := &studio.Studio{Catalog: cat, Activity: activity.New(), Alerts: alerts.New(), NodeTag: "A", URL: func() string { return "http://a.test" }}
	s.Register(echo.New())
	db, err := cat.Create("db", catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	live := func(id string) string {
		t.Helper()
		frags, err := s.LiveFragments(context.Background(), "doc", url.Values{"db": {"db"}, "page": {"doc"}, "id": {id}})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range frags {
			if f.ID == "doc-server" {
				var b strings.Builder
				if err := f.C.Render(context.Background(), &b); err != nil {
					t.Fatal(err)
				}
				return b.String()
			}
		}
		t.Fatalf("no doc-server fragment for %s", id)
		return ""
	}
	cvOf := func(id string) string {
		d, err := db.Get(context.Background(), id)
		if err != nil || d == nil {
			t.Fatalf("get %s: %v", id, err)
		}
		return d.ChangeVector
	}
	edPut(t, db, "users/1", `{"n":1,"@metadata":{"@collection":"Users"}}`)
	first := cvOf("users/1")
	got := live("users/1")
	if !strings.Contains(got, `id="doc-server"`) || !strings.Contains(got, `data-state="stored" data-cv="`+html.EscapeString(first)+`"`) {
		t.Fatalf("first version: %s", got)
	}
	edPut(t, db, "users/1", `{"n":2,"@metadata":{"@collection":"Users"}}`)
	second := cvOf("users/1")
	if second == first {
		t.Fatal("the change vector did not move")
	}
	if got := live("USERS/1"); !strings.Contains(got, `data-cv="`+html.EscapeString(second)+`"`) {
		t.Fatalf("after a write: %s, want %s", got, second)
	}
	if err := db.Write(context.Background(), func(tx *storage.Tx) error { _, _, err := tx.Delete("users/1", nil); return err }); err != nil {
		t.Fatal(err)
	}
	if got := live("users/1"); !strings.Contains(got, `data-state="gone"`) {
		t.Fatalf("after a delete: %s", got)
	}
	edConflict(t, db, "users/2", "Users", `{"@metadata":{"@collection":"Users"}}`, `{"x":1,"@metadata":{"@collection":"Users"}}`)
	if got := live("users/2"); !strings.Contains(got, `data-state="conflict"`) {
		t.Fatalf("in conflict: %s", got)
	}
	// A page of another database, or without an id, gets nothing of its own.
	frags, err := s.LiveFragments(context.Background(), "doc", url.Values{"db": {"gone"}, "page": {"doc"}, "id": {"users/1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frags {
		if f.ID == "doc-server" {
			t.Fatal("an unknown database refreshes the document")
		}
	}
}
