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
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/activity"
	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/catalog"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/handlers/studio"
	"github.com/rookerydb/rookery/internal/testserver"
)

// docsDB makes a server with database "db" and runs the API steps given.
func docsDB(t *testing.T, steps ...step) http.Handler {
	t.Helper()
	h := newServer(t)
	check(t, h, append([]step{{name: "create", method: "PUT", url: "/admin/databases?name=db", body: `{"DatabaseName":"db"}`, status: 201}}, steps...))
	return h
}

// bulk builds a bulk_docs body putting each id with its JSON body.
func bulk(pairs ...string) string {
	var b strings.Builder
	b.WriteString(`{"Commands":[`)
	for i := 0; i+1 < len(pairs); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		id, _ := json.Marshal(pairs[i])
		fmt.Fprintf(&b, `{"Id":%s,"Type":"PUT","Document":%s}`, id, pairs[i+1])
	}
	b.WriteString(`]}`)
	return b.String()
}

var (
	rowIDRe   = regexp.MustCompile(`data-testid="doc-row" data-id="([^"]*)"`)
	nextRe    = regexp.MustCompile(`href="([^"]*)" rel="next" data-testid="next-page"`)
	cvFieldRe = regexp.MustCompile(`name="changeVector" value="([^"]*)" data-testid="doc-cv-field"`)
)

func rowIDs(body string) []string {
	var ids []string
	for _, m := range rowIDRe.FindAllStringSubmatch(body, -1) {
		ids = append(ids, html.UnescapeString(m[1]))
	}
	return ids
}

func nextLink(body string) string {
	m := nextRe.FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

func cvField(t *testing.T, body string) string {
	t.Helper()
	m := cvFieldRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no change vector field in %.400s", body)
	}
	return html.UnescapeString(m[1])
}

// apiDoc loads one document through the API (the stored truth).
func apiDoc(t *testing.T, h http.Handler, id string) (int, string) {
	t.Helper()
	rec := get(t, h, "/databases/db/docs?id="+url.QueryEscape(id))
	return rec.Code, rec.Body.String()
}

type pageCase struct {
	name     string
	do       func() *httptest.ResponseRecorder
	status   int
	contains []string
	lacks    []string
	location string // prefix of the Location header
}

func runPages(t *testing.T, cases []pageCase) {
	t.Helper()
	for _, c := range cases {
		rec := c.do()
		body := rec.Body.String()
		if rec.Code != c.status {
			t.Fatalf("%s: status %d, want %d: %.600s", c.name, rec.Code, c.status, body)
		}
		for _, s := range c.contains {
			if !strings.Contains(body, s) {
				t.Fatalf("%s: body lacks %q: %.3000s", c.name, s, body)
			}
		}
		for _, s := range c.lacks {
			if strings.Contains(body, s) {
				t.Fatalf("%s: body has %q", c.name, s)
			}
		}
		if loc := rec.Header().Get("Location"); !strings.HasPrefix(loc, c.location) || (c.location == "") != (loc == "") {
			t.Fatalf("%s: Location %q, want prefix %q", c.name, loc, c.location)
		}
	}
}

func TestStudioDocumentsPages(t *testing.T) {
	h := docsDB(t,
		step{name: "fill", method: "POST", url: "/databases/db/bulk_docs", status: 201, body: bulk(
			"users/1-A", `{"name":"John","bio":"`+strings.Repeat("x", 100)+`","address":{"city":"Oslo","zip":"0150"},"tags":["a","b"],"age":42,"@metadata":{"@collection":"Users"}}`,
			"users/2-A", `{"name":"Jane","@metadata":{"@collection":"Users"}}`,
			"companies/1", `{"title":"Acme","@metadata":{"@collection":"Companies"}}`,
			"loose", `{"v":1}`,
		)},
		step{name: "hilo", method: "GET", url: "/databases/db/hilo/next?tag=users", status: 201},
	)
	runPages(t, []pageCase{
		{name: "all documents", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/db/documents") }, status: 200, contains: []string{
			`data-testid="collections-list"`, `id="collections-list"`, `id="documents-grid"`, `id="documents-count"`,
			`aria-current="page" data-testid="collection-link" data-collection=""`,
			`data-collection="@hilo"`, `data-collection="@empty"`, `data-collection="Users"`, `data-collection="Companies"`,
			`<span class="num" data-testid="collection-count">5</span>`,
			`data-id="Raven/Hilo/users"`, `data-testid="doc-link"`, `href="/studio/db/db/doc?id=users%2F1-A"`,
			`for="prefix-filter"`, `data-testid="prefix-filter"`, `data-live="/studio/live?db=db&amp;page=documents"`,
			`data-testid="new-doc"`,
		}, lacks: []string{`data-testid="next-page"`, `data-testid="first-page"`}},
		{name: "one collection, case-insensitive", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/db/documents?collection=users") }, status: 200, contains: []string{
			`aria-current="page" data-testid="collection-link" data-collection="Users"`, `data-testid="docs-title">Users<`,
			`2 documents`, `data-testid="doc-column">name<`, `data-testid="doc-column">bio<`, `data-testid="doc-column">address<`, `data-testid="doc-column">tags<`,
			// nested values summarised, their compact JSON in the tooltip
			`title="{&#34;city&#34;:&#34;Oslo&#34;,&#34;zip&#34;:&#34;0150&#34;}" data-testid="doc-cell">{2 fields}<`,
			`title="[&#34;a&#34;,&#34;b&#34;]" data-testid="doc-cell">[2 items]<`,
			`data-testid="doc-row-cv">A:`,
		}, lacks: []string{`data-testid="doc-column">age<`, `data-id="companies/1"`}},
		{name: "long values are shortened", do: func() *httptest.ResponseRecorder {
			return get(t, h, "/studio/db/db/documents?collection=Users&prefix=users/1")
		}, status: 200, contains: []string{strings.Repeat("x", 59) + "…<"}, lacks: []string{">" + strings.Repeat("x", 61)}},
		{name: "system collection", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/db/documents?collection=%40hilo") }, status: 200,
			contains: []string{`data-id="Raven/Hilo/users"`, `data-testid="doc-column">Max<`}},
		{name: "unknown collection", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/db/documents?collection=Nope") }, status: 200,
			contains: []string{`data-testid="unknown-collection"`, `<strong>Nope</strong>`}, lacks: []string{`data-testid="doc-row"`}},
		{name: "prefix with no match", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/db/documents?prefix=zzz") }, status: 200,
			contains: []string{`data-testid="no-documents"`, `value="zzz"`, `data-testid="prefix-clear"`}},
		{name: "bad cursor", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/db/documents?before=abc") }, status: 400,
			contains: []string{`data-testid="message"`, `not a valid etag`}},
		{name: "unknown database", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/nope/documents") }, status: 404,
			contains: []string{`data-testid="message"`, `No such database`, `Database &#39;nope&#39; does not exist.`}},
		{name: "unknown database doc", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/nope/doc?id=x") }, status: 404,
			contains: []string{`No such database`}},
		{name: "document page", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/db/doc?id=USERS/1-a") }, status: 200, contains: []string{
			`data-testid="doc-id">users/1-A<`, `data-testid="doc-collection">Users<`, `data-testid="doc-cv">A:`, `data-testid="doc-etag">`,
			"<pre data-testid=\"doc-json\">{\n  &#34;name&#34;: &#34;John&#34;,\n  &#34;bio&#34;: &#34;xxxx",
			"  &#34;address&#34;: {\n    &#34;city&#34;: &#34;Oslo&#34;,",
			`for="doc-editor"`, `data-testid="doc-editor"`, "  &#34;@metadata&#34;: {\n    &#34;@collection&#34;: &#34;Users&#34;\n  }\n}</textarea>",
			`data-testid="doc-save"`, `data-testid="doc-delete"`, `for="doc-delete-confirm"`, `name="changeVector"`,
		}, lacks: []string{`&#34;@metadata&#34;: {` + "\n    &#34;@collection&#34;: &#34;Users&#34;\n  }\n}</pre>"}},
		{name: "missing document", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/db/doc?id=users/404") }, status: 404,
			contains: []string{`data-testid="message"`, `There is no document &#34;users/404&#34; in database db.`}},
		{name: "no id", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/db/doc") }, status: 400, contains: []string{`data-testid="message"`}},
		{name: "new document form", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/db/doc/new?collection=users") }, status: 200, contains: []string{
			`for="new-doc-id"`, `value="users/"`, `for="new-doc-json"`, "&#34;@collection&#34;: &#34;Users&#34;", `data-testid="doc-create"`,
		}},
	})
}

func TestStudioDocumentsKeysetPaging(t *testing.T) {
	var pairs []string
	for i := 0; i < 120; i++ {
		pairs = append(pairs, fmt.Sprintf("items/%03d", i), fmt.Sprintf(`{"n":%d,"@metadata":{"@collection":"Items"}}`, i))
	}
	pairs = append(pairs, "other/1", `{"@metadata":{"@collection":"Others"}}`)
	h := docsDB(t, step{name: "fill", method: "POST", url: "/databases/db/bulk_docs", body: bulk(pairs...), status: 201})

	want := func(from, to int) []string { // items from..to inclusive, either direction
		var out []string
		for i := from; ; {
			out = append(out, fmt.Sprintf("items/%03d", i))
			if i == to {
				return out
			}
			if from < to {
				i++
			} else {
				i--
			}
		}
	}
	cases := []struct {
		name  string
		start string
		pages [][]string
	}{
		{"by etag, newest first", "/studio/db/db/documents?collection=Items", [][]string{want(119, 70), want(69, 20), want(19, 0)}},
		{"all documents", "/studio/db/db/documents", [][]string{append([]string{"other/1"}, want(119, 71)...), want(70, 21), want(20, 0)}},
		{"prefix, id order", "/studio/db/db/documents?collection=Items&prefix=items/0", [][]string{want(0, 49), want(50, 99)}},
		{"prefix without collection", "/studio/db/db/documents?prefix=ITEMS/1", [][]string{want(100, 119)}},
	}
	for _, c := range cases {
		u := c.start
		for i, page := range c.pages {
			rec := get(t, h, u)
			if rec.Code != 200 {
				t.Fatalf("%s page %d: %d", c.name, i+1, rec.Code)
			}
			body := rec.Body.String()
			if got := rowIDs(body); strings.Join(got, " ") != strings.Join(page, " ") {
				t.Fatalf("%s page %d (%s): rows %v, want %v", c.name, i+1, u, got, page)
			}
			if i > 0 && !strings.Contains(body, `data-testid="first-page"`) {
				t.Fatalf("%s page %d: no link back to the first page", c.name, i+1)
			}
			next := nextLink(body)
			if i == len(c.pages)-1 {
				if next != "" {
					t.Fatalf("%s: a next link after the last page: %s", c.name, next)
				}
				break
			}
			if next == "" {
				t.Fatalf("%s page %d: no next link", c.name, i+1)
			}
			u = next
		}
	}
	// A collection filter inside a prefix checks a bounded number of ids
	// per page and carries on from where it stopped.
	pairs = nil
	for i := 0; i < 1100; i++ {
		coll := "Common"
		if i == 0 || i == 1050 {
			coll = "Rare"
		}
		pairs = append(pairs, fmt.Sprintf("mix/%04d", i), `{"@metadata":{"@collection":"`+coll+`"}}`)
	}
	check(t, h, []step{{name: "mix", method: "POST", url: "/databases/db/bulk_docs", body: bulk(pairs...), status: 201}})
	body := get(t, h, "/studio/db/db/documents?collection=Rare&prefix=mix/").Body.String()
	if got := rowIDs(body); len(got) != 1 || got[0] != "mix/0000" || !strings.Contains(body, `data-testid="partial-page"`) {
		t.Fatalf("partial page: %v", got)
	}
	if n := nextLink(body); !strings.Contains(n, "after=mix%2F0999") {
		t.Fatalf("partial page next link %q", n)
	}
	body = get(t, h, nextLink(body)).Body.String()
	if got := rowIDs(body); len(got) != 1 || got[0] != "mix/1050" || nextLink(body) != "" || strings.Contains(body, `data-testid="partial-page"`) {
		t.Fatalf("second partial page: %v", got)
	}

	// The cursor is an etag (keyset), never an offset.
	body = get(t, h, "/studio/db/db/documents?collection=Items").Body.String()
	if n := nextLink(body); !strings.Contains(n, "before=") || strings.Contains(n, "start=") {
		t.Fatalf("next link %q", n)
	}
	// A page after the last one says so.
	body = get(t, h, "/studio/db/db/documents?collection=Items&before=1").Body.String()
	if !strings.Contains(body, "No more documents.") {
		t.Fatalf("past the end: %.500s", body)
	}
}

func TestStudioDocumentEditDeleteCreate(t *testing.T) {
	h := docsDB(t, step{name: "fill", method: "POST", url: "/databases/db/bulk_docs", status: 201, body: bulk(
		"users/1-A", `{"name":"John","@metadata":{"@collection":"Users","Raven-Node-Type":"User"}}`,
		"companies/1", `{"name":"Acme","@metadata":{"@collection":"Companies"}}`,
	)})
	page := get(t, h, "/studio/db/db/doc?id=users/1-A").Body.String()
	cv := cvField(t, page)
	save := func(id, cv, text string, headers map[string]string) func() *httptest.ResponseRecorder {
		return func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/db/doc", map[string]string{"id": id, "changeVector": cv, "json": text}, headers)
		}
	}
	newDoc := func(id, text string) func() *httptest.ResponseRecorder {
		return func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/db/doc/new", map[string]string{"id": id, "json": text}, nil)
		}
	}
	edited := `{"name":"Johnny","@metadata":{"@collection":"Users","Raven-Node-Type":"User"}}`
	runPages(t, []pageCase{
		{name: "cross-origin save refused", do: save("users/1-A", cv, `{"name":"Evil","@metadata":{"@collection":"Users"}}`, map[string]string{"Origin": "http://evil.example"}), status: 403},
		{name: "cross-origin delete refused", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/db/doc/delete", map[string]string{"id": "users/1-A", "changeVector": cv, "confirm": "yes"}, map[string]string{"Origin": "http://evil.example"})
		}, status: 403},
		{name: "cross-origin create refused", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/db/doc/new", map[string]string{"id": "evil/1", "json": "{}"}, map[string]string{"Origin": "http://evil.example"})
		}, status: 403},
		{name: "bad json", do: save("users/1-A", cv, `{"name": "Johnny",`, nil), status: 400,
			contains: []string{`data-testid="doc-error"`, `This is not a valid document`, `>{&#34;name&#34;: &#34;Johnny&#34;,</textarea>`, `data-testid="doc-json"`}},
		{name: "not an object", do: save("users/1-A", cv, `[1,2]`, nil), status: 400, contains: []string{`a document must be a JSON object`}},
		{name: "collection cannot change", do: save("users/1-A", cv, `{"name":"J","@metadata":{"@collection":"Admins"}}`, nil), status: 400,
			contains: []string{`data-testid="doc-error"`, `Delete it and recreate the document.`, `&#34;Admins&#34;`}},
		{name: "save", do: save("users/1-A", cv, edited, map[string]string{"Origin": "http://example.com"}), status: 303, location: "/studio/db/db/doc?"},
		{name: "saved", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/db/doc?id=users/1-A&flash=Saved.") }, status: 200,
			contains: []string{`data-testid="flash">Saved.<`, `&#34;Johnny&#34;`, `&#34;@collection&#34;: &#34;Users&#34;`, `&#34;Raven-Node-Type&#34;: &#34;User&#34;`}},
		{name: "stale save refused", do: save("users/1-A", cv, `{"name":"Stale","@metadata":{"@collection":"Users"}}`, nil), status: 409, contains: []string{
			`data-testid="doc-error"`, `changed by someone else since you opened it; reload to see their version`, `data-testid="doc-reload"`,
			`&#34;Stale&#34;`, // the user's text is kept
			`data-testid="doc-json">{
  &#34;name&#34;: &#34;Johnny&#34;`, // and the stored version is shown
			`value="` + html.EscapeString(cv) + `" data-testid="doc-cv-field"`,
		}},
		{name: "save without a version refused", do: save("users/1-A", "", `{"name":"Blind","@metadata":{"@collection":"Users"}}`, nil), status: 400,
			contains: []string{`does not say which version`}},
		{name: "delete needs confirmation", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/db/doc/delete", map[string]string{"id": "companies/1"}, nil)
		}, status: 303, location: "/studio/db/db/doc?error=Tick"},
		{name: "stale delete refused", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/db/doc/delete", map[string]string{"id": "users/1-A", "changeVector": cv, "confirm": "yes"}, nil)
		}, status: 303, location: "/studio/db/db/doc?error=Not+deleted"},
		{name: "new: bad json", do: newDoc("notes/1", `{"a":`), status: 400, contains: []string{`This is not a valid document`, `value="notes/1"`, `>{&#34;a&#34;:</textarea>`}},
		{name: "new", do: newDoc("notes/1", `{"text":"hi","@metadata":{"@collection":"Notes"}}`), status: 303, location: "/studio/db/db/doc?flash=Created+notes%2F1."},
		{name: "new: existing id refused", do: newDoc("NOTES/1", `{"text":"again","@metadata":{"@collection":"Notes"}}`), status: 409,
			contains: []string{`already exists; nothing was created`, `&#34;again&#34;`}},
		{name: "new: identity never overwrites", do: newDoc("notes|", `{"@metadata":{"@collection":"Notes"}}`), status: 303, location: "/studio/db/db/doc?flash=Created+notes%2F2."},
		{name: "new: server-made id", do: newDoc("notes/", `{"@metadata":{"@collection":"Notes"}}`), status: 303, location: "/studio/db/db/doc?flash=Created+notes%2F000000000000000"},
		{name: "new: guid", do: newDoc("", `{}`), status: 303, location: "/studio/db/db/doc?flash=Created+"},
		{name: "form over 10 MB", do: save("users/1-A", cv, `{"a":"`+strings.Repeat("x", 11<<20)+`"}`, nil), status: 400,
			contains: []string{`data-testid="message"`, `Documents larger than 10 MB need the API`}},
		{name: "new: oversize id", do: newDoc(strings.Repeat("x", 600), `{}`), status: 400, contains: []string{`the limit is 512`}},
		{name: "notes listed", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/db/documents?collection=Notes") }, status: 200,
			contains: []string{`data-id="notes/1"`, `data-id="notes/2"`, `3 documents`}},
	})
	if code, body := apiDoc(t, h, "users/1-A"); code != 200 || !strings.Contains(body, `"name":"Johnny"`) {
		t.Fatalf("after the refused saves the document must be the first save's: %d %s", code, body)
	}
	if code, body := apiDoc(t, h, "notes/1"); code != 200 || !strings.Contains(body, `"text":"hi"`) {
		t.Fatalf("existing id overwritten: %s", body)
	}
	if code, _ := apiDoc(t, h, "evil/1"); code != 404 {
		t.Fatal("cross-origin create went through")
	}

	// Delete with the current version.
	cv = cvField(t, get(t, h, "/studio/db/db/doc?id=users/1-A").Body.String())
	runPages(t, []pageCase{
		{name: "delete", do: func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/db/db/doc/delete", map[string]string{"id": "users/1-A", "changeVector": cv, "confirm": "yes"}, nil)
		}, status: 303, location: "/studio/db/db/documents?collection=Users&flash=Deleted+users%2F1-A."},
		{name: "deleted page", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/db/doc?id=users/1-A") }, status: 404, contains: []string{`data-testid="message"`}},
		{name: "save after delete refused", do: save("users/1-A", cv, edited, nil), status: 409, contains: []string{`deleted by someone else`, `&#34;Johnny&#34;`, `data-testid="doc-gone"`}},
		{name: "empty collection", do: func() *httptest.ResponseRecorder { return get(t, h, "/studio/db/db/documents?collection=Users") }, status: 200,
			contains: []string{`data-testid="no-documents"`, `0 documents`}, lacks: []string{`data-testid="unknown-collection"`}},
	})
	if code, _ := apiDoc(t, h, "users/1-A"); code != 404 {
		t.Fatal("delete did not delete")
	}
}

func TestStudioDocumentsRenderUntrustedContentInert(t *testing.T) {
	const script = `<script>alert(1)</script>`
	const img = `"><img src=x onerror=alert(1)>`
	h := docsDB(t, step{name: "fill", method: "POST", url: "/databases/db/bulk_docs", status: 201, body: bulk(
		script, `{"`+strings.ReplaceAll(img, `"`, `\"`)+`":"`+script+`","nested":{"`+script+`":"`+strings.ReplaceAll(img, `"`, `\"`)+`"},"@metadata":{"@collection":"`+strings.ReplaceAll(img, `"`, `\"`)+`","x-meta":"`+script+`"}}`,
		"x"+img, `{"v":"`+strings.ReplaceAll(img, `"`, `\"`)+`"}`,
	)})
	escaped := []string{`&lt;script&gt;alert(1)&lt;/script&gt;`, `&#34;&gt;&lt;img src=x onerror=alert(1)&gt;`}
	raw := []string{script, `<img src=x`, `<img`}
	pages := []string{
		"/studio/db/db/documents",
		"/studio/db/db/documents?collection=" + url.QueryEscape(img),
		"/studio/db/db/documents?prefix=" + url.QueryEscape("<"),
		"/studio/db/db/documents?collection=" + url.QueryEscape(script), // unknown collection named like a script
		"/studio/db/db/doc?id=" + url.QueryEscape(script),
		"/studio/db/db/doc?id=" + url.QueryEscape("x"+img),
		"/studio/db/db/doc?id=" + url.QueryEscape(script+"missing"),
		"/studio/db/db/doc/new?collection=" + url.QueryEscape(img),
	}
	for _, p := range pages {
		rec := get(t, h, p)
		body := rec.Body.String()
		if rec.Code != 200 && rec.Code != 404 {
			t.Fatalf("%s: %d", p, rec.Code)
		}
		found := false
		for _, e := range escaped {
			found = found || strings.Contains(body, e)
		}
		if !found {
			t.Fatalf("%s: the hostile strings are not shown escaped: %.2000s", p, body)
		}
		for _, r := range raw {
			if strings.Contains(body, r) {
				t.Fatalf("%s: raw %q in the page", p, r)
			}
		}
	}
	// Links built from hostile ids stay inside the studio and are escaped.
	body := get(t, h, "/studio/db/db/documents").Body.String()
	if !strings.Contains(body, `href="/studio/db/db/doc?id=%3Cscript%3Ealert%281%29%3C%2Fscript%3E"`) {
		t.Fatalf("doc link not escaped: %.3000s", body)
	}
	// A save of a hostile document comes back escaped in the refusal too.
	rec := postForm(t, h, "/studio/db/db/doc", map[string]string{"id": script, "changeVector": "A:1-bogus", "json": `{"a":"` + script + `"}`}, nil)
	if rec.Code != 409 || strings.Contains(rec.Body.String(), script) || !strings.Contains(rec.Body.String(), escaped[0]) {
		t.Fatalf("refused save: %d %.1000s", rec.Code, rec.Body.String())
	}
}

// Every documents page answers over a larger collection, deep cursors
// included. Render times are measured by the benchmark tool (go run
// ./cmd/bench, studio section, 1M documents), not asserted here.
func TestStudioDocumentsPagesAtScale(t *testing.T) {
	n := 10_000
	h := docsDB(t)
	for start := 0; start < n; start += 5000 {
		var pairs []string
		for i := start; i < start+5000 && i < n; i++ {
			pairs = append(pairs, fmt.Sprintf("orders/%07d", i), fmt.Sprintf(`{"n":%d,"customer":"c%d","lines":[{"p":1}],"@metadata":{"@collection":"Orders"}}`, i, i%97))
		}
		check(t, h, []step{{name: "fill", method: "POST", url: "/databases/db/bulk_docs", body: bulk(pairs...), status: 201}})
	}
	urls := []string{
		"/studio/db/db/documents",
		"/studio/db/db/documents?collection=Orders",
		"/studio/db/db/documents?collection=Orders&before=3",
		"/studio/db/db/documents?collection=Orders&before=" + fmt.Sprint(n/2),
		"/studio/db/db/documents?collection=Orders&prefix=orders/00",
		"/studio/db/db/documents?collection=Orders&prefix=orders/00&after=orders/0001000",
		"/studio/db/db/documents?prefix=orders/00&after=orders/0001000",
		"/studio/db/db/doc?id=orders/0000007",
	}
	for _, u := range urls {
		if rec := get(t, h, u); rec.Code != 200 || !strings.Contains(rec.Body.String(), "orders/") {
			t.Fatalf("%s: %d %.300s", u, rec.Code, rec.Body.String())
		}
	}
}

// liveHTML renders the documents page's live fragments for query q.
func liveHTML(t *testing.T, s *studio.Studio, q url.Values) map[string]string {
	t.Helper()
	frags, err := s.LiveFragments(context.Background(), "documents", q)
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
			t.Fatalf("fragment %s does not carry its id: %.200s", f.ID, b.String())
		}
		out[f.ID] = b.String()
	}
	return out
}

func TestStudioDocumentsLiveFragments(t *testing.T) {
	cat, err := catalog.Open(t.TempDir(), "A", slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	s := &studio.Studio{Catalog: cat, Activity: activity.New(), Alerts: alerts.New(), NodeTag: "A", URL: func() string { return "http://a.test" }, Cluster: testserver.Cluster(t)}
	s.Register(echo.New())
	db, err := bareCreate(t, s, cat, "db", catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	put := func(id, body string) {
		t.Helper()
		p, err := document.Parse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Write(context.Background(), func(tx *storage.Tx) error { _, err := tx.Put(id, p, nil); return err }); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 60 {
		put(fmt.Sprintf("users/%d", i), `{"n":1,"@metadata":{"@collection":"Users"}}`)
	}
	first := url.Values{"db": {"db"}, "page": {"documents"}, "collection": {"Users"}}
	deep := url.Values{"db": {"db"}, "page": {"documents"}, "collection": {"Users"}, "before": {"11"}}
	got := liveHTML(t, s, first)
	if !strings.Contains(got["collections-list"], `data-testid="collection-count">60<`) || got["documents-grid"] == "" || !strings.Contains(got["documents-count"], "60 documents") {
		t.Fatalf("first page fragments: %v", got)
	}
	put("users/new", `{"n":2,"@metadata":{"@collection":"Users"}}`)
	got = liveHTML(t, s, first)
	if ids := rowIDs(got["documents-grid"]); len(ids) != 50 || ids[0] != "users/new" {
		t.Fatalf("the new row is not first on the live first page: %v", ids)
	}
	if !strings.Contains(got["collections-list"], `data-testid="collection-count">61<`) {
		t.Fatalf("counts not live: %s", got["collections-list"])
	}
	got = liveHTML(t, s, deep)
	if _, ok := got["documents-grid"]; ok {
		t.Fatal("a deeper page's rows must not move under the reader")
	}
	if !strings.Contains(got["collections-list"], `>61<`) || !strings.Contains(got["documents-count"], "61 documents") {
		t.Fatalf("deep page counts: %v", got)
	}
	if got := liveHTML(t, s, url.Values{"db": {"gone"}, "page": {"documents"}}); len(got) != 3 || got["alerts-area"] == "" || got["reading-node"] == "" || got["ops-area"] == "" {
		t.Fatalf("an unknown database refreshes only the frame (alerts, reading node, running operations): %v", got)
	}
}
