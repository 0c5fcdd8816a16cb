package studio_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/catalog"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/ids"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/views"
	"github.com/rookerydb/rookery/web"
)

// newStatsServer is newServer that also hands back the server, for tests
// that compare a page with the engine's own figures.
func newStatsServer(t *testing.T) (http.Handler, *web.Server) {
	t.Helper()
	srv, err := web.New(web.Config{DataDir: t.TempDir(), NodeTag: "A", PublicURL: "http://node-a.test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Handler(), srv
}

// pageText is the text of the first element with data-testid=id whose
// content has no markup.
func pageText(t *testing.T, body, id string) string {
	t.Helper()
	m := regexp.MustCompile(`data-testid="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)<`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no %s in %s", id, body)
	}
	return m[1]
}

// pollPage polls a studio page until it contains want (the server's
// once-a-second tick moves rates and alerts).
func pollPage(t *testing.T, h http.Handler, path string, within time.Duration, ok func(body string) bool) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rec := get(t, h, path)
		if rec.Code == 200 && ok(rec.Body.String()) {
			return rec.Body.String()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: condition not met within %s; last body: %s", path, within, rec.Body.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func bulkIDs(ids ...string) string {
	var b strings.Builder
	b.WriteString(`{"Commands":[`)
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		coll := strings.SplitN(id, "/", 2)[0]
		fmt.Fprintf(&b, `{"Id":%q,"Type":"PUT","Document":{"n":%d,"@metadata":{"@collection":%q}}}`, id, i, coll)
	}
	b.WriteString(`]}`)
	return b.String()
}

func TestStudioStatsPage(t *testing.T) {
	h, srv := newStatsServer(t)
	check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=st", body: `{"DatabaseName":"st"}`, status: 201},
		{name: "empty page", method: "GET", url: "/studio/db/st/stats", status: 200, contains: []string{
			`data-testid="stats-docs">0<`, `data-testid="stats-collections">0<`, `data-testid="stats-no-collections"`,
			`data-live="/studio/live?db=st&amp;page=stats"`, `aria-current="page" href="/studio/db/st/stats"`,
		}},
		{name: "fill", method: "POST", url: "/databases/st/bulk_docs", body: bulkIDs("orders/1", "orders/2", "orders/3", "users/1", "users/2"), status: 201},
		{name: "delete", method: "DELETE", url: "/databases/st/docs?id=orders%2F3", status: 204},
		{name: "unknown database", method: "GET", url: "/studio/db/nope/stats", status: 404, contains: []string{`data-testid="message"`, "No such database", "nope"}},
	})
	db, err := srv.Catalog().Get("st")
	if err != nil {
		t.Fatal(err)
	}
	st := db.Stats()
	body := get(t, h, "/studio/db/st/stats").Body.String()
	cases := []struct {
		id, want string
	}{
		{"stats-docs", views.Num(st.Documents)},
		{"stats-tombstones", views.Num(st.Tombstones)},
		{"stats-collections", strconv.Itoa(len(st.Collections))},
		{"stats-etag", strconv.FormatInt(st.LastEtag, 10)},
		{"stats-cv", st.ChangeVector},
		{"stats-dbid", st.DatabaseID},
		{"stats-size", views.Bytes(st.SizeOnDisk)},
	}
	for _, c := range cases {
		if got := strings.TrimSpace(pageText(t, body, c.id)); got != c.want {
			t.Errorf("%s = %q, want %q (db.Stats)", c.id, got, c.want)
		}
	}
	if st.Documents != 4 || st.Tombstones != 1 || len(st.Collections) != 2 || st.LastEtag != 6 {
		t.Fatalf("engine figures %+v", st)
	}
	for _, want := range []string{`data-collection="orders"`, `data-collection="users"`, `data-testid="stats-sparkline"`, `data-testid="stats-rate"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	// The once-a-second sampler feeds the sparkline: a polyline appears.
	pollPage(t, h, "/studio/db/st/stats", 5*time.Second, func(b string) bool {
		return strings.Contains(b, `<polyline transform="translate(`) && strings.Contains(b, `points="`)
	})
}

// The three pages over a larger database with many identities and HiLo
// documents: they answer, the audit over 201 identities raises exactly one
// alert, and the next free value is right. Render times are measured by the
// benchmark tool (go run ./cmd/bench, studio section), not asserted here.
func TestStudioHiLoIdentitiesStatsAtScale(t *testing.T) {
	n := 10_000
	s, cat, e := bareStudio(t)
	db, err := bareCreate(t, s, cat, "big", catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	users, _ := document.Parse([]byte(`{"name":"u","@metadata":{"@collection":"Users"}}`))
	orders, _ := document.Parse([]byte(`{"total":1,"@metadata":{"@collection":"Orders"}}`))
	const batch = 10_000
	for start := 0; start < n; start += batch {
		err := db.Write(ctx, func(tx *storage.Tx) error {
			for i := start; i < min(start+batch, n); i++ {
				id, p := fmt.Sprintf("users/%d-A", i+1), users
				if i%2 == 1 {
					id, p = fmt.Sprintf("orders/%d", (i+1)/2), orders // orders/1 … orders/n/2
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
	err = db.Write(ctx, func(tx *storage.Tx) error {
		for i := range 200 { // identities, HiLo documents
			if _, err := s.Cluster.SeedIdentity(ctx, "big", fmt.Sprintf("col%03d|", i), int64(i), true); err != nil {
				return err
			}
			if _, err := ids.NextRange(tx, fmt.Sprintf("col%03d", i), 0, "", "", 0); err != nil {
				return err
			}
		}
		if _, err := s.Cluster.SeedIdentity(ctx, "big", "orders|", 10, true); err != nil { // collides: the page probes
			return err
		}
		_, err := ids.NextRange(tx, "users", 0, "", "", int64(n))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		s.Activity.Sample("big", int64(i*100))
	}
	s.Tick(ctx) // the audit over 201 identities
	if len(s.Alerts.List()) != 1 {
		t.Fatalf("alerts %v", s.Alerts.List())
	}
	urls := []string{
		"/studio/db/big/hilo",
		"/studio/db/big/identities",
		"/studio/db/big/identities?sort=value&dir=desc&q=col",
		"/studio/db/big/identities?seedPrefix=orders&seedValue=3",
		"/studio/db/big/stats",
	}
	for _, u := range urls {
		if rec := get(t, e, u); rec.Code != 200 {
			t.Fatalf("%s: %d %.300s", u, rec.Code, rec.Body.String())
		}
	}
	s.Tick(ctx) // again: nothing new to raise
	if len(s.Alerts.List()) != 1 {
		t.Fatalf("alerts after a second tick %v", s.Alerts.List())
	}
	body := get(t, e, "/studio/db/big/identities?q=orders").Body.String()
	if want := fmt.Sprintf(`data-testid="identity-next-free">%d<`, n/2+1); !strings.Contains(body, want) {
		t.Fatalf("next free value: want %s in the page", want)
	}
}
