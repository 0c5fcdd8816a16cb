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
	"slices"
	"sort"
	"strconv"
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
	"github.com/rookerydb/rookery/internal/testserver"
	"github.com/rookerydb/rookery/web"
)

// The documents grid (issue 12, points 4 and 5): conflicted ids listed
// with a badge and counted, page sizes, the column chooser, go to id.

// gridServer is a real node with database "g" whose conflicts stay stored
// (the manual solver), so the grid has conflicted ids to show.
func gridServer(t *testing.T) (http.Handler, *storage.DB) {
	t.Helper()
	srv, err := web.New(web.Config{DataDir: t.TempDir(), NodeTag: "A", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	h := srv.Handler()
	check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=g", body: `{"DatabaseName":"g"}`, status: 201},
		{name: "manual", method: "POST", url: "/admin/replication/conflicts/solver?name=g", body: `{"ResolveToLatest":false}`, status: 200},
	})
	db, err := srv.Catalog().Get("g")
	if err != nil {
		t.Fatal(err)
	}
	return h, db
}

func gridPut(t *testing.T, db *storage.DB, id, collection, fields string) {
	t.Helper()
	p, err := document.Parse([]byte(`{` + fields + `"@metadata":{"@collection":"` + collection + `"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write(context.Background(), func(tx *storage.Tx) error { _, err := tx.Put(id, p, nil); return err }); err != nil {
		t.Fatal(err)
	}
}

// gridConflict writes id locally, then applies a concurrent version from
// node B as replication would: the id is then in conflict (two versions,
// no document row).
func gridConflict(t *testing.T, db *storage.DB, id, collection string, n int) {
	t.Helper()
	gridPut(t, db, id, collection, `"by":"A",`)
	var o storage.Outcome
	err := db.Write(context.Background(), func(tx *storage.Tx) error {
		var err error
		o, err = tx.ApplyReplicated(storage.Item{Type: "Put", ID: id, Collection: collection,
			ChangeVector: fmt.Sprintf("B:%d-Qfo6Xn1dQEeVq0mZ1W2yXB", n), LastModified: time.Now().Add(time.Hour),
			Body: []byte(`{"by":"B","@metadata":{"@collection":"` + collection + `"}}`)})
		return err
	})
	if err != nil || o != storage.Conflicted {
		t.Fatalf("%s: outcome %v, %v; want a conflict", id, o, err)
	}
}

var (
	gridRowRe       = regexp.MustCompile(`<tr data-testid="doc-row" data-id="([^"]*)" data-key="([^"]*)" data-etag="(\d+)" data-conflict="(true|false)"`)
	gridColumnRe    = regexp.MustCompile(`data-testid="doc-column">([^<]*)<`)
	gridCountRe     = regexp.MustCompile(`data-collection="([^"]*)" title="[^"]*"><span class="coll-name">[^<]*</span> <span class="num" data-testid="collection-count">([\d,]+)</span>( <span class="coll-conflicts" data-testid="collection-conflicts">([\d,]+) conflicted</span>)?`)
	gridNextRe      = regexp.MustCompile(`href="([^"]*)" rel="next" data-testid="next-page"`)
	gridStatsCollRe = regexp.MustCompile(`data-collection="([^"]*)"><td>[^<]*</td><td class="num" data-testid="stats-collection-docs">([\d,]+)</td><td class="num" data-testid="stats-collection-conflicted">([\d,]+)</td>`)
)

type gridRow struct {
	id       string
	etag     int64
	conflict bool
}

func gridRows(t *testing.T, body string) []gridRow {
	t.Helper()
	var out []gridRow
	for _, m := range gridRowRe.FindAllStringSubmatch(body, -1) {
		if m[1] != m[2] {
			t.Fatalf("row %q has data-key %q: the live-rows key must be the id", m[1], m[2])
		}
		e, _ := strconv.ParseInt(m[3], 10, 64)
		out = append(out, gridRow{id: html.UnescapeString(m[1]), etag: e, conflict: m[4] == "true"})
	}
	return out
}

// gridCounts maps each listed collection ("" for all documents) to its
// count and its conflicted count.
func gridCounts(body string) map[string][2]string {
	out := map[string][2]string{}
	for _, m := range gridCountRe.FindAllStringSubmatch(body, -1) {
		c := m[4]
		if c == "" {
			c = "0"
		}
		out[html.UnescapeString(m[1])] = [2]string{m[2], c}
	}
	return out
}

func gridPage(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	rec := get(t, h, path)
	if rec.Code != 200 {
		t.Fatalf("%s: %d %.600s", path, rec.Code, rec.Body.String())
	}
	return rec.Body.String()
}

// walkGrid follows the grid's next links from path and returns every row.
func walkGrid(t *testing.T, h http.Handler, path string, wantSize int) []gridRow {
	t.Helper()
	var all []gridRow
	for pages := 0; path != ""; pages++ {
		if pages > 100 {
			t.Fatal("the pager does not end")
		}
		body := gridPage(t, h, path)
		rows := gridRows(t, body)
		if len(rows) > wantSize {
			t.Fatalf("%s: %d rows on a page of %d", path, len(rows), wantSize)
		}
		all = append(all, rows...)
		path = ""
		if m := gridNextRe.FindStringSubmatch(body); m != nil {
			path = html.UnescapeString(m[1])
			if !strings.Contains(path, "size="+strconv.Itoa(wantSize)) && wantSize != 50 {
				t.Fatalf("the next link %s lost the page size %d", path, wantSize)
			}
		}
	}
	return all
}

func gridIDs(rows []gridRow) []string {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	return ids
}

// Conflicted ids are rows with a badge linking to their resolution, in the
// etag-ordered and id-ordered pages alike, counted in the collection list,
// the view's count and the Stats page; a collection whose only document is
// conflicted stays listed.
func TestDocumentsGridShowsConflictedIDs(t *testing.T) {
	h, db := gridServer(t)
	var want []string
	n := 0
	for i := 1; i <= 40; i++ {
		id := fmt.Sprintf("orders/%d", i)
		want = append(want, id)
		if i%7 == 0 { // 5 conflicted orders, spread through the etags and ids
			n++
			gridConflict(t, db, id, "Orders", n)
		} else {
			gridPut(t, db, id, "Orders", `"n":`+strconv.Itoa(i)+`,`)
		}
	}
	gridPut(t, db, "users/1", "Users", `"name":"Ann",`)
	n++
	gridConflict(t, db, "carts/1", "Carts", n) // Carts: one document, in conflict
	want = append(want, "users/1", "carts/1")

	body := gridPage(t, h, "/studio/db/g/documents")
	counts := gridCounts(body)
	for coll, c := range map[string][2]string{"": {"42", "6"}, "Orders": {"40", "5"}, "Users": {"1", "0"}, "Carts": {"1", "1"}} {
		if counts[coll] != c {
			t.Fatalf("collection %q counts %v, want %v (all: %v)", coll, counts[coll], c, counts)
		}
	}
	for _, s := range []string{
		`<tbody data-live-rows>`,
		`data-testid="documents-count">42 documents · <span class="conflict-note" data-testid="documents-conflicted">6 conflicted</span>`,
		`href="/studio/db/g/conflicts/doc?id=carts%2F1" class="badge badge-conflict" data-testid="doc-conflict-badge"`,
		`data-testid="doc-row-cv">2 versions<`,
	} {
		if !strings.Contains(body, s) {
			t.Fatalf("all documents page lacks %s: %.3000s", s, body)
		}
	}
	rows := gridRows(t, body)
	if len(rows) != 42 || rows[0].id != "carts/1" || !rows[0].conflict || rows[1].id != "users/1" || rows[1].conflict {
		t.Fatalf("first rows %v", rows[:3])
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].etag >= rows[i-1].etag {
			t.Fatalf("rows not newest first at %d: %v", i, rows)
		}
	}

	// The collection of conflicted documents only.
	carts := gridPage(t, h, "/studio/db/g/documents?collection=carts")
	if r := gridRows(t, carts); len(r) != 1 || r[0].id != "carts/1" || !r[0].conflict {
		t.Fatalf("Carts rows %v", r)
	}
	if strings.Contains(carts, `data-testid="unknown-collection"`) || !strings.Contains(carts, `1 documents · <span class="conflict-note" data-testid="documents-conflicted">1 conflicted`) {
		t.Fatalf("Carts page: %.2000s", carts)
	}

	// Etag order over pages of 25: every id once, conflicted ones included.
	got := gridIDs(walkGrid(t, h, "/studio/db/g/documents?size=25", 25))
	if len(got) != 42 || !sameSet(got, want) {
		t.Fatalf("etag pages: %d ids %v", len(got), got)
	}
	// Id order (a prefix) over pages of 25, in a collection: every order
	// once, in id order, the conflicted ones in their place.
	ordered := walkGrid(t, h, "/studio/db/g/documents?collection=Orders&prefix=orders/&size=25", 25)
	gotIDs := gridIDs(ordered)
	if len(gotIDs) != 40 || !sort.SliceIsSorted(gotIDs, func(i, j int) bool { return gotIDs[i] < gotIDs[j] }) || !sameSet(gotIDs, want[:40]) {
		t.Fatalf("id pages: %v", gotIDs)
	}
	conflicted := 0
	for _, r := range ordered {
		if r.conflict {
			conflicted++
		}
	}
	if conflicted != 5 {
		t.Fatalf("%d conflicted rows in id order, want 5", conflicted)
	}
	// Same without the collection (the unfiltered id walk).
	if got := gridIDs(walkGrid(t, h, "/studio/db/g/documents?prefix=orders/&size=25", 25)); len(got) != 40 {
		t.Fatalf("unfiltered id pages: %v", got)
	}

	// Stats: documents include conflicted ids, the conflict tile, per collection.
	stats := gridPage(t, h, "/studio/db/g/stats")
	for _, s := range []string{
		`data-testid="stats-docs">42<`, `data-testid="stats-docs-note">incl. 6 conflicted<`,
		`data-testid="stats-conflicts">6<`, `data-testid="stats-conflict-versions">12 versions<`,
	} {
		if !strings.Contains(stats, s) {
			t.Fatalf("stats page lacks %s: %.4000s", s, stats)
		}
	}
	statsColl := map[string][2]string{}
	for _, m := range gridStatsCollRe.FindAllStringSubmatch(stats, -1) {
		statsColl[m[1]] = [2]string{m[2], m[3]}
	}
	for coll, c := range map[string][2]string{"Orders": {"40", "5"}, "Users": {"1", "0"}, "Carts": {"1", "1"}} {
		if statsColl[coll] != c {
			t.Fatalf("stats collection %s = %v, want %v (%v)", coll, statsColl[coll], c, statsColl)
		}
	}
	// The API keeps RavenDB's shape: conflicted ids and versions apart.
	check(t, h, []step{{name: "api stats", method: "GET", url: "/databases/g/stats", status: 200,
		contains: []string{`"CountOfDocuments":36`, `"CountOfDocumentsConflicts":6`, `"CountOfConflicts":12`}}})

	// Resolving one (a local write) makes it a plain row again, counted once.
	gridPut(t, db, "carts/1", "Carts", `"by":"me",`)
	body = gridPage(t, h, "/studio/db/g/documents")
	if c := gridCounts(body); c[""] != [2]string{"42", "5"} || c["Carts"] != [2]string{"1", "0"} {
		t.Fatalf("after resolving: %v", c)
	}
	if r := gridRows(t, body); r[0].id != "carts/1" || r[0].conflict {
		t.Fatalf("resolved row %v", r[0])
	}
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// Page size, chosen columns and go to id: each is in the URL and kept by
// every link; bad values get a 400; nested values are summarised.
func TestDocumentsGridViewOptions(t *testing.T) {
	h, db := gridServer(t)
	for i := 1; i <= 120; i++ {
		gridPut(t, db, fmt.Sprintf("items/%d", i), "Items", fmt.Sprintf(`"a":%d,"b":"%s","c":{"x":1,"y":2,"z":3},"d":[1,2,3,4,5],"e":true,"deep":"only-chosen",`, i, strings.Repeat("w", 90)))
	}
	gridConflict(t, db, "items/x", "Items", 1)

	for _, size := range []int{25, 50, 100, 200} {
		body := gridPage(t, h, "/studio/db/g/documents?collection=Items&size="+strconv.Itoa(size))
		wantRows := min(size, 121)
		if r := gridRows(t, body); len(r) != wantRows {
			t.Fatalf("size %d: %d rows", size, len(r))
		}
		if !strings.Contains(body, `aria-current="page" data-testid="page-size" data-size="`+strconv.Itoa(size)+`"`) {
			t.Fatalf("size %d is not marked as the current page size", size)
		}
	}
	// Automatic columns: the first four fields; nested values summarised.
	body := gridPage(t, h, "/studio/db/g/documents?collection=Items")
	if cols := allMatches(gridColumnRe, body, 1); !slices.Equal(cols, []string{"a", "b", "c", "d"}) {
		t.Fatalf("automatic columns %v", cols)
	}
	for _, s := range []string{
		`data-testid="doc-cell">{3 fields}<`, `data-testid="doc-cell">[5 items]<`,
		`title="{&#34;x&#34;:1,&#34;y&#34;:2,&#34;z&#34;:3}"`, `title="[1,2,3,4,5]"`,
		// the chooser offers fields beyond the shown ones
		`data-testid="column-choice" data-field="deep"`, `value="a" checked`,
	} {
		if !strings.Contains(body, s) {
			t.Fatalf("page lacks %s", s)
		}
	}
	// Chosen columns, in the order chosen; the pager and the size links keep them.
	body = gridPage(t, h, "/studio/db/g/documents?collection=Items&size=25&col=deep&col=a&col=nope&col=a")
	if cols := allMatches(gridColumnRe, body, 1); !slices.Equal(cols, []string{"deep", "a", "nope"}) {
		t.Fatalf("chosen columns %v", cols)
	}
	for _, s := range []string{
		`data-testid="doc-cell">only-chosen<`, `class="cell cell-missing"`,
		`/studio/db/g/documents?before=`, `col=deep&amp;col=a&amp;col=nope&amp;collection=Items&amp;size=25" rel="next"`,
		`href="/studio/db/g/documents?col=deep&amp;col=a&amp;col=nope&amp;collection=Items&amp;size=100"`,
		`data-testid="column-reset"`, `data-live="/studio/live?col=deep&amp;col=a&amp;col=nope&amp;col=a&amp;collection=Items&amp;db=g&amp;page=documents&amp;size=25"`,
		// the collection links keep the view
		`href="/studio/db/g/documents?col=deep&amp;col=a&amp;col=nope&amp;collection=Items&amp;size=25"`,
	} {
		if !strings.Contains(body, s) {
			t.Fatalf("chosen-columns page lacks %s: %.5000s", s, body)
		}
	}
	if got := walkGrid(t, h, "/studio/db/g/documents?collection=Items&size=25&col=deep", 25); len(got) != 121 {
		t.Fatalf("%d rows over pages of 25", len(got))
	}

	// Go to id: the page whose first row is the id, highlighted; kept view.
	d, err := db.Get(context.Background(), "items/7")
	if err != nil || d == nil {
		t.Fatal(err)
	}
	rec := get(t, h, "/studio/db/g/documents?collection=Items&size=25&col=a&goto=ITEMS/7")
	loc := rec.Header().Get("Location")
	if rec.Code != http.StatusSeeOther || !strings.Contains(loc, "before="+strconv.FormatInt(d.Etag+1, 10)) || !strings.Contains(loc, "hl=items%2F7") || !strings.Contains(loc, "size=25") || !strings.Contains(loc, "col=a") {
		t.Fatalf("goto: %d %s", rec.Code, loc)
	}
	body = gridPage(t, h, strings.TrimSuffix(loc, "#doc-current"))
	if r := gridRows(t, body); len(r) != 7 || r[0].id != "items/7" {
		t.Fatalf("goto page rows %v", r)
	}
	if !strings.Contains(body, `id="doc-current" aria-current="true" class="row-current"`) {
		t.Fatalf("the row gone to is not marked: %.3000s", body)
	}
	// A conflicted id, from another collection's view: its own collection.
	rec = get(t, h, "/studio/db/g/documents?collection=Nope&goto=items/x")
	if loc := rec.Header().Get("Location"); rec.Code != http.StatusSeeOther || !strings.Contains(loc, "collection=Items") || !strings.Contains(loc, "hl=items%2Fx") {
		t.Fatalf("goto conflicted: %d %s", rec.Code, loc)
	}
	// An id that does not exist: back to the view with a message.
	rec = get(t, h, "/studio/db/g/documents?collection=Items&goto=items/999")
	if loc := rec.Header().Get("Location"); rec.Code != http.StatusSeeOther || !strings.Contains(loc, "error=No+document+has+the+id") || !strings.Contains(loc, "collection=Items") {
		t.Fatalf("goto missing: %d %s", rec.Code, loc)
	}

	// Bad input: a clear 400.
	tooMany := url.Values{"col": {}}
	for i := range 33 {
		tooMany["col"] = append(tooMany["col"], "f"+strconv.Itoa(i))
	}
	for _, c := range []struct{ q, msg string }{
		{"size=7", "is not one of 25, 50, 100, 200"},
		{"size=abc", "is not one of"},
		{tooMany.Encode(), "at most 32 chosen columns"},
		{"col=" + strings.Repeat("k", 300), "at most 256 bytes"},
		{"goto=" + strings.Repeat("k", 600), "An id is at most 512 bytes"},
	} {
		rec := get(t, h, "/studio/db/g/documents?"+c.q)
		if rec.Code != 400 || !strings.Contains(html.UnescapeString(rec.Body.String()), c.msg) {
			t.Fatalf("%.60s: %d, want 400 with %q: %.300s", c.q, rec.Code, c.msg, rec.Body.String())
		}
	}
}

// The live grid keeps the view of its URL (page size, chosen columns) and
// shows a conflict as it arrives.
func TestDocumentsGridLiveKeepsView(t *testing.T) {
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
	for i := range 40 {
		gridPut(t, db, fmt.Sprintf("things/%d", i), "Things", `"a":1,"b":2,"z":"zz",`)
	}
	q := url.Values{"db": {"db"}, "page": {"documents"}, "collection": {"Things"}, "size": {"25"}, "col": {"z"}}
	got := liveHTML(t, s, q)
	grid := got["documents-grid"]
	if len(gridRows(t, grid)) != 25 || !slices.Equal(allMatches(gridColumnRe, grid, 1), []string{"z"}) {
		t.Fatalf("live grid lost the view: %.2000s", grid)
	}
	gridConflict(t, db, "things/new", "Things", 1)
	got = liveHTML(t, s, q)
	if r := gridRows(t, got["documents-grid"]); len(r) != 25 || r[0].id != "things/new" || !r[0].conflict {
		t.Fatalf("the conflict is not the live first row: %v", r)
	}
	if !strings.Contains(got["collections-list"], `data-testid="collection-count">41</span> <span class="coll-conflicts" data-testid="collection-conflicts">1 conflicted<`) ||
		!strings.Contains(got["documents-count"], "41 documents") {
		t.Fatalf("live counts: %v", got)
	}
}
