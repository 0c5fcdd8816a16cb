package studio_test

import (
	"context"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/activity"
	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/catalog"
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/ids"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/handlers/studio"
	"github.com/rookerydb/rookery/internal/testserver"
)

// identityValues is the prefix → value list of an Identities page, in
// page order.
func identityValues(t *testing.T, body string) []string {
	t.Helper()
	var out []string
	re := regexp.MustCompile(`data-testid="identity-prefix">([^<]*)</th><td class="num" data-testid="identity-value">(\d+)<`)
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1]+"="+m[2])
	}
	return out
}

func seedForm(prefix, value string, confirm bool) map[string]string {
	f := map[string]string{"prefix": prefix, "value": value}
	if confirm {
		f["confirmLower"] = "yes"
	}
	return f
}

func TestStudioIdentitiesPage(t *testing.T) {
	h := newServer(t)
	check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=idn", body: `{"DatabaseName":"idn"}`, status: 201},
		{name: "empty", method: "GET", url: "/studio/db/idn/identities", status: 200, contains: []string{`data-testid="identities-empty"`, `data-testid="seed-form"`}},
		{name: "orders 1", method: "PUT", url: "/databases/idn/docs?id=orders%7C", body: `{"@metadata":{"@collection":"Orders"}}`, status: 201, contains: []string{`"Id":"orders/1"`}},
		{name: "orders 2", method: "PUT", url: "/databases/idn/docs?id=orders%7C", body: `{"@metadata":{"@collection":"Orders"}}`, status: 201, contains: []string{`"Id":"orders/2"`}},
		{name: "orders 3", method: "PUT", url: "/databases/idn/docs?id=orders%7C", body: `{"@metadata":{"@collection":"Orders"}}`, status: 201, contains: []string{`"Id":"orders/3"`}},
		{name: "companies", method: "POST", url: "/databases/idn/identity/seed?name=companies&value=50", status: 200},
		{name: "zeta", method: "POST", url: "/databases/idn/identity/seed?name=zeta&value=7", status: 200},
		{name: "hostile", method: "POST", url: "/databases/idn/identity/seed?name=" + url.QueryEscape(`<script>x</script>`) + "&value=1", status: 200},
		{name: "unknown database", method: "GET", url: "/studio/db/nope/identities", status: 404, contains: []string{"No such database"}},
	})
	post := func(vals map[string]string, headers map[string]string) *httptest.ResponseRecorder {
		return postForm(t, h, "/studio/db/idn/identities/seed", vals, headers)
	}
	const page = "/studio/db/idn/identities"
	cases := []struct {
		name     string
		path     string
		want     []string // identity-value list, in order
		contains []string
		absent   []string
	}{
		{name: "by prefix", path: page,
			want: []string{"&lt;script&gt;x&lt;/script&gt;|=1", "companies|=50", "orders|=3", "zeta|=7"},
			contains: []string{`aria-sort="ascending"`, `data-testid="identity-next">orders/4<`, `data-testid="identity-docs">3<`,
				`data-live="/studio/live?db=idn&amp;page=identities"`, `<option value="orders|" data-value="3">`},
			absent: []string{"<script>x</script>", `data-audit="collides"`}},
		{name: "by prefix desc", path: page + "?sort=prefix&dir=desc", want: []string{"zeta|=7", "orders|=3", "companies|=50", "&lt;script&gt;x&lt;/script&gt;|=1"}},
		{name: "by value", path: page + "?sort=value", want: []string{"&lt;script&gt;x&lt;/script&gt;|=1", "orders|=3", "zeta|=7", "companies|=50"},
			contains: []string{`href="/studio/db/idn/identities?dir=desc&amp;sort=value"`}},
		{name: "by value desc", path: page + "?sort=value&dir=desc", want: []string{"companies|=50", "zeta|=7", "orders|=3", "&lt;script&gt;x&lt;/script&gt;|=1"}},
		{name: "filter", path: page + "?q=OR", want: []string{"orders|=3"}, contains: []string{`value="OR"`, "1 match"}},
		{name: "filter and sort", path: page + "?q=e&sort=value&dir=desc", want: []string{"companies|=50", "zeta|=7", "orders|=3"}},
		{name: "filter matches nothing", path: page + "?q=nothing", want: nil, contains: []string{"No identity matches the filter."}},
		{name: "edit link prefills the form with a preview", path: page + "?seedPrefix=orders%7C&seedValue=3",
			contains: []string{`id="seed-prefix" name="prefix"`, `value="orders|" data-testid="seed-prefix"`, `value="3" data-testid="seed-value"`, "next document: orders/4", `for="seed-confirm-lower"`},
			want:     []string{"&lt;script&gt;x&lt;/script&gt;|=1", "companies|=50", "orders|=3", "zeta|=7"}},
		{name: "preview of a lower value warns", path: page + "?seedPrefix=zeta&seedValue=2",
			contains: []string{"next document: zeta/3", "Lower than the current value 7"},
			want:     []string{"&lt;script&gt;x&lt;/script&gt;|=1", "companies|=50", "orders|=3", "zeta|=7"}},
		{name: "preview skips taken values", path: page + "?seedPrefix=orders&seedValue=1",
			contains: []string{"next document: orders/4 (orders/2 exists; taken values are skipped)"},
			want:     []string{"&lt;script&gt;x&lt;/script&gt;|=1", "companies|=50", "orders|=3", "zeta|=7"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := get(t, h, c.path)
			body := rec.Body.String()
			if rec.Code != 200 {
				t.Fatalf("status %d: %s", rec.Code, body)
			}
			if got := identityValues(t, body); strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("rows %v, want %v", got, c.want)
			}
			for _, s := range c.contains {
				if !strings.Contains(body, s) {
					t.Errorf("page lacks %q", s)
				}
			}
			for _, s := range c.absent {
				if strings.Contains(body, s) {
					t.Errorf("page has %q", s)
				}
			}
		})
	}

	value := func(prefix string) string {
		t.Helper()
		for _, v := range identityValues(t, get(t, h, page).Body.String()) {
			if p, n, _ := strings.Cut(v, "="); p == prefix {
				return n
			}
		}
		return ""
	}
	seeds := []struct {
		name     string
		form     map[string]string
		headers  map[string]string
		status   int
		location string // a substring of Location
		after    map[string]string
	}{
		{"raise", seedForm("orders", "100", false), nil, 303, "flash=orders%7C+set+to+100+%28was+3%29%3B+next+document%3A+orders%2F101.", map[string]string{"orders|": "100"}},
		{"lower without confirmation is refused", seedForm("orders|", "5", false), nil, 303, "error=orders%7C+is+at+100%3B+5+would+lower+it", map[string]string{"orders|": "100"}},
		{"refusal keeps the form filled", seedForm("orders|", "5", false), nil, 303, "seedPrefix=orders%7C&seedValue=5", map[string]string{"orders|": "100"}},
		{"lower with confirmation", seedForm("orders|", "1", true), nil, 303, "flash=orders%7C+set+to+1+%28was+100%29%3B+next+document%3A+orders%2F4.", map[string]string{"orders|": "1"}},
		{"new identity", seedForm("Invoices", "9", false), nil, 303, "flash=invoices%7C+set+to+9", map[string]string{"invoices|": "9"}},
		{"same value needs no confirmation", seedForm("invoices", "9", false), nil, 303, "flash=", map[string]string{"invoices|": "9"}},
		{"bad value", seedForm("zeta", "ten", false), nil, 303, "error=The+value+must+be+a+whole+number", map[string]string{"zeta|": "7"}},
		{"negative value", seedForm("zeta", "-1", true), nil, 303, "error=The+value+must+be+a+whole+number", map[string]string{"zeta|": "7"}},
		{"empty prefix", seedForm(" | ", "3", false), nil, 303, "error=Type+the+identity", nil},
		{"pipe inside", seedForm("a|b", "3", false), nil, 303, "error=An+identity+prefix", nil},
		{"cross-origin POST", seedForm("zeta", "1000", true), map[string]string{"Origin": "http://evil.example"}, 403, "", map[string]string{"zeta|": "7"}},
		{"cross-site POST", seedForm("zeta", "1000", true), map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "", map[string]string{"zeta|": "7"}},
		{"same-origin browser POST", seedForm("zeta", "8", false), map[string]string{"Origin": "http://example.com", "Sec-Fetch-Site": "same-origin"}, 303, "flash=", map[string]string{"zeta|": "8"}},
	}
	for _, c := range seeds {
		t.Run("seed: "+c.name, func(t *testing.T) {
			rec := post(c.form, c.headers)
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.status, rec.Body.String())
			}
			if loc := rec.Header().Get("Location"); !strings.Contains(loc, c.location) || (c.status == 303 && !strings.HasPrefix(loc, page)) {
				t.Fatalf("Location %q, want it to contain %q", loc, c.location)
			}
			for p, want := range c.after {
				if got := value(p); got != want {
					t.Fatalf("%s = %q, want %q", p, got, want)
				}
			}
		})
	}
	if rec := postForm(t, h, "/studio/db/nope/identities/seed", seedForm("x", "1", false), nil); rec.Code != 404 {
		t.Fatalf("seed in an unknown database: %d", rec.Code)
	}
	// The refusal's message reads well on the page it comes back to.
	rec := post(seedForm("orders|", "0", false), nil)
	body := get(t, h, rec.Header().Get("Location")).Body.String()
	if !strings.Contains(body, `data-testid="flash-error">orders| is at 1; 0 would lower it`) || !strings.Contains(body, "Nothing was changed.") {
		t.Fatalf("refusal page: %s", body)
	}
}

// The audit flags orders| once seeded below orders/3, the node's tick
// raises an alert for it, and clears the alert once the counter is safe.
func TestStudioIdentityAudit(t *testing.T) {
	h := newServer(t)
	check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=aud", body: `{"DatabaseName":"aud"}`, status: 201},
		{name: "fill", method: "POST", url: "/databases/aud/bulk_docs", body: bulkIDs("orders/1", "orders/2", "orders/3", "orders/7-A", "orders/900-A"), status: 201},
		{name: "counter", method: "POST", url: "/databases/aud/identity/seed?name=orders&value=3", status: 200},
		{name: "safe", method: "GET", url: "/studio/db/aud/identities", status: 200, contains: []string{`data-audit="ok"`, "highest <span class=\"mono\">orders/3</span>"}},
	})
	const alertTitle = "Identity orders| would collide"
	hasAlert := func(b string) bool { return strings.Contains(b, alertTitle) }
	if b := get(t, h, "/studio/alerts").Body.String(); hasAlert(b) {
		t.Fatal("alert before the counter collides")
	}
	lower := postForm(t, h, "/studio/db/aud/identities/seed", seedForm("orders", "1", true), nil)
	if lower.Code != http.StatusSeeOther {
		t.Fatalf("lower: %d", lower.Code)
	}
	body := get(t, h, "/studio/db/aud/identities").Body.String()
	for _, want := range []string{
		`data-audit="collides"`, "Would collide:", `<span class="mono">orders/3</span> exists above the counter (1)`,
		`Next free value is <strong data-testid="identity-next-free">4</strong>`, `data-testid="identity-next">orders/4<`,
		`data-testid="identities-flagged">1 would collide<`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("audit lacks %q", want)
		}
	}
	// The node ticks once a second; the alert shows on the Alerts page,
	// and every page's header counts it.
	b := pollPage(t, h, "/studio/alerts", 5*time.Second, hasAlert)
	if !strings.Contains(b, `data-testid="alerts-count">1<`) || !strings.Contains(b, "The counter is 1 but orders/3 exists") ||
		!strings.Contains(b, `href="/studio/db/aud/identities"`) {
		t.Fatalf("alert: %s", b)
	}
	if b := get(t, h, "/studio/").Body.String(); !strings.Contains(b, `data-testid="alerts-count">1<`) || !strings.Contains(b, `aria-label="Alerts: 1 open"`) {
		t.Fatalf("the header does not count it: %s", b)
	}
	// Dismissed, it stays quiet while the condition holds.
	key := regexp.MustCompile(`name="key" value="([^"]+)"`).FindStringSubmatch(b)
	if key == nil {
		t.Fatal("no alert key")
	}
	if rec := postForm(t, h, "/studio/alerts/dismiss", map[string]string{"key": html.UnescapeString(key[1])}, nil); rec.Code != 303 {
		t.Fatalf("dismiss: %d", rec.Code)
	}
	time.Sleep(1500 * time.Millisecond)
	if b := get(t, h, "/studio/alerts").Body.String(); hasAlert(b) {
		t.Fatal("a dismissed alert came back while the condition holds")
	}
	// Safe again: the alert's dismissal is forgotten; colliding again raises it anew.
	postForm(t, h, "/studio/db/aud/identities/seed", seedForm("orders", "3", false), nil)
	time.Sleep(1500 * time.Millisecond)
	postForm(t, h, "/studio/db/aud/identities/seed", seedForm("orders", "2", true), nil)
	pollPage(t, h, "/studio/alerts", 5*time.Second, hasAlert)
	// Raised past the documents: cleared by the next tick.
	postForm(t, h, "/studio/db/aud/identities/seed", seedForm("orders", "10", false), nil)
	pollPage(t, h, "/studio/alerts", 5*time.Second, func(b string) bool { return !hasAlert(b) && strings.Contains(b, `data-testid="alerts-count">0<`) })
	// A database that goes away takes its alerts along.
	postForm(t, h, "/studio/db/aud/identities/seed", seedForm("orders", "0", true), nil)
	pollPage(t, h, "/studio/alerts", 5*time.Second, hasAlert)
	check(t, h, []step{{name: "drop", method: "DELETE", url: "/admin/databases", body: `{"DatabaseNames":["aud"],"HardDelete":true}`, status: 200}})
	pollPage(t, h, "/studio/alerts", 5*time.Second, func(b string) bool { return !hasAlert(b) })
}

// bareStudio is a Studio on its own catalog, without the node's ticker, so
// a test decides when Tick runs.
func bareStudio(t *testing.T) (*studio.Studio, *catalog.Catalog, *echo.Echo) {
	t.Helper()
	cat, err := catalog.Open(t.TempDir(), "A", slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	s := &studio.Studio{Catalog: cat, Activity: activity.New(), Alerts: alerts.New(), NodeTag: "A", URL: func() string { return "http://a.test" }, Cluster: testserver.Cluster(t)}
	e := echo.New()
	s.Register(e)
	return s, cat, e
}

// bareCreate makes a database on a bare Studio: the local file and its
// cluster record.
func bareCreate(t *testing.T, s *studio.Studio, cat *catalog.Catalog, name string, opts catalog.Options) (*storage.DB, error) {
	t.Helper()
	db, err := cat.Create(name, opts)
	if err != nil {
		return nil, err
	}
	if _, err := s.Cluster.CreateDatabase(context.Background(), cluster.Database{Name: name, Members: []string{"A"}, Separator: db.Separator()}); err != nil {
		return nil, err
	}
	return db, nil
}

func putIDs(t *testing.T, db *storage.DB, idList ...string) {
	t.Helper()
	err := db.Write(context.Background(), func(tx *storage.Tx) error {
		for _, id := range idList {
			p, err := document.Parse([]byte(`{"@metadata":{"@collection":"Things"}}`))
			if err != nil {
				return err
			}
			if _, err := tx.Put(id, p, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func seedTo(t *testing.T, s *studio.Studio, db *storage.DB, name string, v int64) {
	t.Helper()
	if _, err := s.Cluster.SeedIdentity(context.Background(), db.Name(), name, v, true); err != nil {
		t.Fatal(err)
	}
}

// Tick, step by step: raise for a colliding counter, one alert per key,
// quiet after a dismissal, clear when safe, clear when the database goes.
func TestStudioAuditTick(t *testing.T) {
	s, cat, _ := bareStudio(t)
	ctx := context.Background()
	db, err := bareCreate(t, s, cat, "shop", catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dash, err := bareCreate(t, s, cat, "dash", catalog.Options{Separator: "-"})
	if err != nil {
		t.Fatal(err)
	}
	putIDs(t, db, "orders/1", "orders/2", "orders/3", "orders/50-A", "companies/4")
	putIDs(t, dash, "orders-9")
	seedTo(t, s, db, "companies|", 4)
	seedTo(t, s, dash, "orders|", 2)
	keys := func() map[string]alerts.Alert {
		out := map[string]alerts.Alert{}
		for _, a := range s.Alerts.List() {
			out[a.Key] = a
		}
		return out
	}
	steps := []struct {
		name string
		act  func()
		want []string // alert keys after the tick
	}{
		{"a counter below orders/3 (no counter yet is 0)", func() { seedTo(t, s, db, "orders|", 0) }, []string{"identity:dash:orders|", "identity:shop:orders|"}},
		{"the same condition: still one alert each", func() {}, []string{"identity:dash:orders|", "identity:shop:orders|"}},
		{"dismissed: stays quiet while it holds", func() {
			s.Alerts.Dismiss(keys()["identity:shop:orders|"].ID)
		}, []string{"identity:dash:orders|"}},
		{"safe again: cleared", func() { seedTo(t, s, db, "orders|", 3) }, []string{"identity:dash:orders|"}},
		{"colliding again after being safe: raised again", func() { seedTo(t, s, db, "orders|", 1) }, []string{"identity:dash:orders|", "identity:shop:orders|"}},
		{"raised past the documents", func() { seedTo(t, s, db, "orders|", 3) }, []string{"identity:dash:orders|"}},
		{"a database that goes away takes its alerts", func() {
			if err := cat.Delete("dash"); err != nil {
				t.Fatal(err)
			}
		}, nil},
	}
	for _, st := range steps {
		st.act()
		s.Tick(ctx)
		got := keys()
		if len(got) != len(st.want) {
			t.Fatalf("%s: alerts %v, want %v", st.name, got, st.want)
		}
		for _, k := range st.want {
			a, ok := got[k]
			if !ok {
				t.Fatalf("%s: no alert %s in %v", st.name, k, got)
			}
			if a.Level != alerts.Warning || a.Database == "" || a.Title == "" || a.Message == "" {
				t.Fatalf("%s: alert %+v", st.name, a)
			}
		}
	}
	seedTo(t, s, db, "orders|", 1)
	s.Tick(ctx)
	a := keys()["identity:shop:orders|"]
	if a.Database != "shop" || a.Title != "Identity orders| would collide" || !strings.Contains(a.Message, "The counter is 1 but orders/3 exists") {
		t.Fatalf("alert text %+v", a)
	}
}

func TestStudioLiveRegions(t *testing.T) {
	s, cat, _ := bareStudio(t)
	db, err := bareCreate(t, s, cat, "lv", catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	putIDs(t, db, "orders/1")
	seedTo(t, s, db, "orders|", 1)
	if err := db.Write(context.Background(), func(tx *storage.Tx) error {
		_, err := ids.NextRange(tx, "users", 0, "", "", 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, writes := range []int64{0, 7, 12} { // the node's sampler: 7/s, then 5/s
		s.Activity.Sample("lv", writes)
	}
	cases := []struct {
		page  string
		q     url.Values
		ticks bool
		want  map[string][]string // fragment id → contents
	}{
		{"hilo", url.Values{"db": {"lv"}}, false, map[string][]string{"hilo-body": {`data-tag="users"`, `data-testid="hilo-max">32<`}}},
		{"identities", url.Values{"db": {"lv"}, "sort": {"value"}, "dir": {"desc"}, "q": {"ord"}}, false, map[string][]string{"identities-table": {`data-prefix="orders|"`, `aria-sort="descending"`}}},
		{"stats", url.Values{"db": {"lv"}}, true, map[string][]string{"stats-body": {`data-testid="stats-docs">2<`, `data-testid="stats-rate">5.0<`, `data-testid="stats-peak">7.0<`, `data-samples="3"`, `<polyline`}}},
	}
	for _, c := range cases {
		t.Run(c.page, func(t *testing.T) {
			if s.WantsTicks(c.page) != c.ticks {
				t.Fatalf("WantsTicks = %v", !c.ticks)
			}
			frags, err := s.LiveFragments(context.Background(), c.page, c.q)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, f := range frags {
				var b strings.Builder
				if err := f.C.Render(context.Background(), &b); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(b.String(), `id="`+f.ID+`"`) {
					t.Fatalf("fragment %s does not carry its id", f.ID)
				}
				got[f.ID] = b.String()
			}
			for id, wants := range c.want {
				for _, w := range wants {
					if !strings.Contains(got[id], w) {
						t.Fatalf("fragment %s lacks %q: %s", id, w, got[id])
					}
				}
			}
			// A database that is gone refreshes only the frame: the alerts,
			// the node the page reads and the running operations.
			frags, _ = s.LiveFragments(context.Background(), c.page, url.Values{"db": {"gone"}})
			if len(frags) != 3 || frags[0].ID != "alerts-area" || frags[1].ID != "reading-node" || frags[2].ID != "ops-area" {
				t.Fatalf("unknown database: %d fragments", len(frags))
			}
		})
	}
}
