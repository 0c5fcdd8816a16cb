package studio_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/indexes"
	"github.com/rookerydb/rookery/backend/operations"
	"github.com/rookerydb/rookery/backend/query"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/handlers/studio"
	"github.com/rookerydb/rookery/views"
)

// indexNode is a one-node Raft cluster with a catalog, the engine's index
// Manager following the cluster's index records, a query Runner whose
// auto indexes go through the cluster, and the studio on an Echo. The
// permit stands in for the access rules (web/access.go): admin may do
// everything, a reader only what DatabaseRead allows.
type indexNode struct {
	cl       *cluster.Cluster
	cat      *catalog.Catalog
	mgr      *index.Manager
	db       *storage.DB
	studio   *studio.Studio
	ops      *operations.Registry
	h        http.Handler
	readOnly atomic.Bool
}

// clusterDefs is the runner's Definitions over the cluster: what the
// server wires, in a few lines.
type clusterDefs struct{ n *indexNode }

func (d clusterDefs) List(db string) []index.Definition {
	var out []index.Definition
	for _, rec := range d.n.cl.Indexes(db) {
		if def, err := indexes.Definition(rec); err == nil {
			out = append(out, def)
		}
	}
	return out
}

func (d clusterDefs) PutAuto(ctx context.Context, db string, def index.Definition, supersedes []string) error {
	rec, err := indexes.Record(db, def)
	if err != nil {
		return err
	}
	if _, err := d.n.cl.PutIndexes(ctx, db, cluster.IndexPut{Records: []cluster.IndexRecord{rec}, IfAbsent: true, Supersede: supersedes}); err != nil {
		return err
	}
	return d.n.sync()
}

func (n *indexNode) sync() error {
	if errs := indexes.Sync(n.mgr, n.db, n.cl.Indexes(n.db.Name())); len(errs) > 0 {
		return errs[0]
	}
	return nil
}

func startIndexNode(t *testing.T) *indexNode {
	t.Helper()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	n := &indexNode{}
	cl, err := cluster.Open(cluster.Config{NodeTag: "A", RaftAddr: "127.0.0.1:0", URL: "http://127.0.0.1:1", Dir: t.TempDir(), Bootstrap: true, Logger: logger,
		Security: cluster.Security{Token: func() []byte { return []byte("studio indexes test secret") }}, ElectionTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Shutdown() })
	n.cl = cl
	if err := cl.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A leads", cl.IsLeader)
	if n.cat, err = catalog.Open(t.TempDir(), "A", logger, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.cat.Close() })
	// The record in the cluster, the file opened here (the server's
	// appliers open it; web/cluster.go).
	if _, err := cl.CreateDatabase(ctx, cluster.Database{Name: "shop", Members: []string{"A"}, Created: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if n.db, err = n.cat.Create("shop", catalog.Options{}); err != nil {
		t.Fatal(err)
	}
	n.mgr = index.NewManager(index.Options{Logger: logger})
	t.Cleanup(func() { n.mgr.Close() })
	// The node's indexes follow the cluster's records (the server's
	// reconciler does this); the hook must not block Raft's apply.
	wake := make(chan struct{}, 1)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	cl.OnChange(func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-wake:
				n.sync()
			}
		}
	}()
	runner := query.NewRunner(clusterDefs{n}, query.IndexLookup(n.mgr.Get), query.Options{Logger: logger})
	n.ops = operations.New(operations.Options{})
	t.Cleanup(n.ops.Close)
	n.studio = &studio.Studio{Catalog: n.cat, Activity: activity.New(), Alerts: alerts.New(), NodeTag: "A", URL: func() string { return "http://node-a.test" },
		Cluster: cl, Indexes: n.mgr, Queries: runner, Operations: n.ops}
	e := echo.New()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			ro := n.readOnly.Load()
			permit := func(method, route, db string) bool { return !ro || method == "GET" || route == "/studio/db/:db/query" }
			c.SetRequest(c.Request().WithContext(views.WithPermit(c.Request().Context(), permit)))
			return next(c)
		}
	})
	n.studio.Register(e)
	n.h = e
	return n
}

func (n *indexNode) put(t *testing.T, docs map[string]string) {
	t.Helper()
	if err := n.db.Write(context.Background(), func(tx *storage.Tx) error {
		for id, body := range docs {
			p, err := document.Parse([]byte(body))
			if err != nil {
				return err
			}
			if _, err := tx.Put(id, p, nil); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func (n *indexNode) runQuery(t *testing.T, q, params string, headers map[string]string) (int, string) {
	t.Helper()
	rec := postForm(t, n.h, "/studio/db/shop/query", map[string]string{"query": q, "params": params}, headers)
	return rec.Code, rec.Body.String()
}

func flashOf(t *testing.T, rec interface{ Header() http.Header }) (path, flash, errText string) {
	t.Helper()
	loc, err := url.Parse(rec.Header().Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return loc.Path, loc.Query().Get("flash"), loc.Query().Get("error")
}

const hostile = `<img src=x onerror=alert(1)>&"'`

// The Query page runs RQL on this node through the runner: the first
// query on a field creates an auto index (the page says so and names it),
// the next reuses it; parameters are a JSON object; a syntax error shows
// the parser's message with its position and creates nothing; a
// cross-site POST is refused; document values render inert.
func TestStudioQueryPage(t *testing.T) {
	n := startIndexNode(t)
	n.put(t, map[string]string{
		"pets/1": `{"Name":"Rex","Owner":"people/1","@metadata":{"@collection":"Pets"}}`,
		"pets/2": `{"Name":"Tom","Owner":"people/1","@metadata":{"@collection":"Pets"}}`,
		"pets/3": `{"Name":` + fmt.Sprintf("%q", hostile) + `,"Owner":"people/1","@metadata":{"@collection":"Pets"}}`,
	})
	page := get(t, n.h, "/studio/db/shop/query").Body.String()
	for _, want := range []string{`data-testid="query-form"`, `aria-current="page" href="/studio/db/shop/query"`, `data-testid="nav-indexes"`, `data-testid="query-node">A<`} {
		if !strings.Contains(page, want) {
			t.Fatalf("query page lacks %q", want)
		}
	}

	code, body := n.runQuery(t, "from Pets where Name = $name", `{"name": "Rex"}`, nil)
	if code != 200 {
		t.Fatalf("query: %d %s", code, body)
	}
	for _, want := range []string{`data-kind="created"`, `>Auto/Pets/ByName<`, `data-testid="query-row" data-id="pets/1"`, `data-testid="query-total" data-value="1"`,
		`data-testid="query-result-node">A<`, `data-testid="query-stale" data-value="false"`, `<span data-field="Name">`} {
		if !strings.Contains(body, want) {
			t.Fatalf("first query lacks %q: %s", want, body)
		}
	}
	if _, ok := n.cl.Index("shop", "Auto/Pets/ByName"); !ok {
		t.Fatal("the auto index is not in the cluster's records")
	}
	_, body = n.runQuery(t, "from Pets where Name = 'Tom' include timings()", "", nil)
	for _, want := range []string{`data-kind="reused"`, `data-testid="query-row" data-id="pets/2"`, `data-testid="query-timings"`, `data-stage="Planning"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("second query lacks %q: %s", want, body)
		}
	}
	// A projection shows its fields, in its order.
	_, body = n.runQuery(t, "from Pets where Name = 'Tom' select Owner, Name", "", nil)
	if !regexp.MustCompile(`data-field="Owner"[\s\S]*data-field="Name"`).MatchString(body) {
		t.Fatalf("projection fields: %s", body)
	}
	// A collection scan says so.
	if _, body = n.runQuery(t, "from Pets", "", nil); !strings.Contains(body, `data-kind="collection scan"`) || !strings.Contains(body, `data-testid="query-total" data-value="3"`) {
		t.Fatalf("collection query: %s", body)
	}
	// Values from documents render inert.
	_, body = n.runQuery(t, "from Pets where Name = $n", `{"n": `+fmt.Sprintf("%q", hostile)+`}`, nil)
	if !strings.Contains(body, `data-id="pets/3"`) || strings.Contains(body, "<img src=x") || !strings.Contains(body, "&lt;img src=x") {
		t.Fatalf("hostile value not escaped: %s", body)
	}

	before := len(n.cl.Indexes("shop"))
	code, body = n.runQuery(t, "from Pets where Age >", "", nil)
	if code != 400 || !strings.Contains(body, `data-testid="query-error"`) || !regexp.MustCompile(`RQL syntax error at position 21`).MatchString(body) {
		t.Fatalf("syntax error: %d %s", code, body)
	}
	for _, bad := range []string{`{"n":`, `[1]`, `{"a":1} {"b":2}`, `null`} {
		if code, body = n.runQuery(t, "from Pets where Age > $n", bad, nil); code != 400 || !strings.Contains(body, "one JSON object") {
			t.Fatalf("parameters %s: %d %s", bad, code, body)
		}
	}
	if after := len(n.cl.Indexes("shop")); after != before {
		t.Fatalf("a refused query created an index: %d -> %d", before, after)
	}
	// Cross-site: refused before anything runs (no Auto/Pets/ByAge).
	for _, h := range []map[string]string{{"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}} {
		if code, _ = n.runQuery(t, "from Pets where Age > 1", "", h); code != 403 {
			t.Fatalf("cross-site query: %d", code)
		}
	}
	if _, ok := n.cl.Index("shop", "Auto/Pets/ByAge"); ok {
		t.Fatal("a cross-site query created an index")
	}
}

var remappedRE = regexp.MustCompile(`data-testid="index-ref-remapped-People" data-value="(\d+)"`)

// The Indexes and index pages: the cluster's records with this node's
// figures (progress per collection, staleness, both reference etags,
// references held and re-mapped counts), the cleanup's next action (auto:
// idle at a time; static: never), and the actions: disable/enable and
// delete through the cluster (typed confirmation), reset on this node;
// each refused cross-site, and hidden from a reader. Hostile names render
// inert.
func TestStudioIndexesPages(t *testing.T) {
	n := startIndexNode(t)
	n.put(t, map[string]string{
		"people/1": `{"Name":"Ann","@metadata":{"@collection":"People"}}`,
		"pets/1":   `{"Name":"Rex","Owner":"people/1","@metadata":{"@collection":"Pets"}}`,
		"pets/2":   `{"Name":"Tom","Owner":"people/1","@metadata":{"@collection":"Pets"}}`,
	})
	if code, body := n.runQuery(t, "from Pets where Name = 'Rex'", "", nil); code != 200 {
		t.Fatalf("query: %d %s", code, body)
	}
	jsName := "Pets/ByOwner" + hostile
	def := index.Definition{Name: jsName, Type: index.TypeJavaScriptMap, Created: time.Now().UTC(),
		Maps: []string{`map('Pets', p => ({ Name: p.Name, OwnerName: load(p.Owner, 'People').Name }))`}}
	rec, err := indexes.Record("shop", def)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.cl.PutIndexes(context.Background(), "shop", cluster.IndexPut{Records: []cluster.IndexRecord{rec}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the JavaScript index is open and caught up", func() bool {
		ix, ok := n.mgr.Get("shop", jsName)
		return ok && !ix.Stats().IsStale
	})

	body := get(t, n.h, "/studio/db/shop/indexes").Body.String()
	for _, want := range []string{
		`data-live="/studio/live?db=shop&amp;page=indexes"`, `data-testid="indexes-node">A<`, `data-testid="indexes-table" data-count="2"`,
		`data-testid="index-row-Auto/Pets/ByName" data-key="Auto/Pets/ByName" data-state="Normal" data-type="AutoMap"`,
		`data-testid="index-progress-Auto/Pets/ByName-Pets" data-collection="Pets"`,
		`data-testid="index-cleanup-Auto/Pets/ByName" data-action="idle"`,
		`data-testid="index-entries-Auto/Pets/ByName" data-value="2"`,
		`data-referenced="People"`, `data-action="never"`, "static index: the cleanup never touches it",
		`data-testid="index-log"`, "Indexing.TimeToWaitBeforeMarkingAutoIndexAsIdleInMin",
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("indexes page lacks %q: %s", want, body)
		}
	}
	if strings.Contains(body, "<img src=x") || !strings.Contains(body, "Pets/ByOwner&lt;img src=x onerror=alert(1)&gt;&amp;") {
		t.Fatalf("hostile index name not escaped: %s", body)
	}
	// The auto index's progress: processed up to the collection's last etag.
	m := regexp.MustCompile(`data-testid="index-progress-Auto/Pets/ByName-Pets" data-collection="Pets" data-processed="(\d+)" data-last="(\d+)" data-lag="0"`).FindStringSubmatch(body)
	if m == nil || m[1] != m[2] || m[1] == "0" {
		t.Fatalf("progress of the auto index: %v", m)
	}

	// The live fragment shows the same rows.
	frags, err := n.studio.LiveFragments(context.Background(), "indexes", url.Values{"db": {"shop"}})
	if err != nil {
		t.Fatal(err)
	}
	var live strings.Builder
	for _, f := range frags {
		if f.ID == "indexes-body" {
			f.C.Render(context.Background(), &live)
		}
	}
	if !strings.Contains(live.String(), `data-testid="index-row-Auto/Pets/ByName"`) || !strings.Contains(live.String(), `data-testid="indexes-table" data-count="2"`) {
		t.Fatalf("live fragment: %s", live.String())
	}

	// The index page: definition, reference cost, and its figures.
	page := views.IndexURL("shop", jsName)
	body = get(t, n.h, string(page)).Body.String()
	for _, want := range []string{`data-testid="index-type">JavaScriptMap<`, `data-testid="index-map">map(&#39;Pets&#39;`, `data-testid="index-references-held" data-value="2"`,
		`data-testid="index-reference-People"`, `data-testid="index-delete-confirm"`, `data-testid="index-node">A<`, `data-testid="index-no-errors"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("index page lacks %q: %s", want, body)
		}
	}
	if strings.Contains(body, "<img src=x") {
		t.Fatalf("hostile name on the index page: %s", body)
	}
	// Renaming the owner re-maps both pets, and the page shows it.
	n.put(t, map[string]string{"people/1": `{"Name":"Anna","@metadata":{"@collection":"People"}}`})
	waitFor(t, "the two pets re-mapped", func() bool {
		m := remappedRE.FindStringSubmatch(get(t, n.h, string(page)).Body.String())
		return m != nil && m[1] == "2"
	})

	post := func(action string, form map[string]string, headers map[string]string) *struct {
		code                  int
		path, flash, errorMsg string
	} {
		rec := postForm(t, n.h, "/studio/db/shop/index/"+action, form, headers)
		out := &struct {
			code                  int
			path, flash, errorMsg string
		}{code: rec.Code}
		if rec.Code == 303 {
			out.path, out.flash, out.errorMsg = flashOf(t, rec)
		}
		return out
	}
	// Cross-site actions are refused and change nothing.
	for _, a := range []string{"disable", "delete", "reset", "enable"} {
		if r := post(a, map[string]string{"name": jsName, "confirm": jsName}, map[string]string{"Origin": "http://evil.example"}); r.code != 403 {
			t.Fatalf("cross-site %s: %d", a, r.code)
		}
	}
	if r, _ := n.cl.Index("shop", jsName); r.State != "" {
		t.Fatalf("cross-site changed the state: %q", r.State)
	}

	if r := post("disable", map[string]string{"name": jsName}, nil); r.code != 303 || !strings.Contains(r.flash, "disabled on every node") {
		t.Fatalf("disable: %+v", r)
	}
	if r, _ := n.cl.Index("shop", jsName); r.State != "Disabled" {
		t.Fatalf("state after disable: %q", r.State)
	}
	body = get(t, n.h, string(page)).Body.String()
	if !strings.Contains(body, `data-testid="index-state" data-state="Disabled"`) || !strings.Contains(body, `data-testid="index-enable"`) {
		t.Fatalf("page after disable: %s", body)
	}
	if r := post("enable", map[string]string{"name": jsName}, nil); r.code != 303 || !strings.Contains(r.flash, "enabled") {
		t.Fatalf("enable: %+v", r)
	}
	if r, _ := n.cl.Index("shop", jsName); r.State != "" {
		t.Fatalf("state after enable: %q", r.State)
	}
	if r := post("reset", map[string]string{"name": jsName}, nil); r.code != 303 || !strings.Contains(r.flash, "reset on node A") || !strings.Contains(r.flash, "The rebuild is operation ") {
		t.Fatalf("reset: %+v", r)
	}
	// The studio's reset is an operation, as the API's is: listed, and
	// Completed once the index has caught up.
	waitFor(t, "the studio's reset is a completed IndexReset operation", func() bool {
		ops := n.ops.List("shop")
		return len(ops) == 1 && ops[0].Kind == "IndexReset" && ops[0].State.Status == operations.Completed
	})
	// Resume answers an index that is not paused, and both refuse an
	// unknown index or a cross-site post.
	if r := post("resume", map[string]string{"name": jsName}, nil); r.code != 303 || !strings.Contains(r.flash, "was not paused on node A; nothing was changed.") {
		t.Fatalf("resume, not paused: %+v", r)
	}
	for _, a := range []string{"reset", "resume"} {
		if r := post(a, map[string]string{"name": "Nope"}, nil); r.code != 303 || !strings.Contains(r.errorMsg, "Index 'Nope' does not exist in shop; nothing was changed.") {
			t.Fatalf("%s unknown: %+v", a, r)
		}
		if r := post(a, map[string]string{"name": jsName}, map[string]string{"Origin": "http://evil.example"}); r.code != 403 {
			t.Fatalf("cross-site %s: %d", a, r.code)
		}
	}
	var acts []string
	for _, d := range n.cl.IndexLog("shop") {
		if d.Index == jsName {
			acts = append(acts, d.Action)
		}
	}
	if strings.Join(acts, ",") != "disabled,normal" {
		t.Fatalf("index log of the studio's actions: %v", acts)
	}
	body = get(t, n.h, "/studio/db/shop/indexes").Body.String()
	if strings.Count(body, `data-testid="index-log-entry"`) < 2 {
		t.Fatalf("the index log does not show the studio's decisions: %s", body)
	}

	// Delete needs the name typed exactly.
	if r := post("delete", map[string]string{"name": jsName, "confirm": "pets/byowner"}, nil); r.code != 303 || !strings.Contains(r.errorMsg, "Type the index name exactly") {
		t.Fatalf("delete unconfirmed: %+v", r)
	}
	if _, ok := n.cl.Index("shop", jsName); !ok {
		t.Fatal("deleted without the confirmation")
	}
	if r := post("delete", map[string]string{"name": "Nope"}, nil); r.code != 303 || !strings.Contains(r.errorMsg, "does not exist") {
		t.Fatalf("delete unknown: %+v", r)
	}

	// A reader sees the pages without the actions.
	n.readOnly.Store(true)
	body = get(t, n.h, string(page)).Body.String()
	if !strings.Contains(body, `data-testid="index-read-only"`) || strings.Contains(body, `data-testid="index-delete"`) {
		t.Fatalf("reader's index page: %s", body)
	}
	n.readOnly.Store(false)

	if r := post("delete", map[string]string{"name": jsName, "confirm": jsName}, nil); r.code != 303 || r.path != "/studio/db/shop/indexes" || !strings.Contains(r.flash, "deleted on every node") {
		t.Fatalf("delete: %+v", r)
	}
	if _, ok := n.cl.Index("shop", jsName); ok {
		t.Fatal("still in the cluster after delete")
	}
	waitFor(t, "the node closes the deleted index", func() bool { _, ok := n.mgr.Get("shop", jsName); return !ok })
	body = get(t, n.h, "/studio/db/shop/indexes").Body.String()
	if !strings.Contains(body, `data-testid="indexes-table" data-count="1"`) {
		t.Fatalf("indexes page after delete: %s", body)
	}
	if rec := get(t, n.h, string(page)); rec.Code != 404 {
		t.Fatalf("deleted index's page: %d", rec.Code)
	}
}
