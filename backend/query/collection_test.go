package query

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

func openDB(t testing.TB, dir string) *storage.DB {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	db, err := storage.Open(filepath.Join(dir, "db.sqlite"), storage.Options{Name: "shop", NodeTag: "A"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func putDoc(t testing.TB, db *storage.DB, id, js string) {
	t.Helper()
	p, err := document.Parse([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write(context.Background(), func(tx *storage.Tx) error {
		_, err := tx.Put(id, p, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func deleteDoc(t testing.TB, db *storage.DB, id string) {
	t.Helper()
	if err := db.Write(context.Background(), func(tx *storage.Tx) error {
		_, _, err := tx.Delete(id, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// noIndexes has no index: collection queries never ask for one.
type noIndexes struct{}

func (noIndexes) Get(string, string) (Index, bool) { return nil, false }

func shop(t *testing.T) *storage.DB {
	db := openDB(t, "")
	putDoc(t, db, "companies/1", `{"Name":"Acme","@metadata":{"@collection":"Companies"}}`)
	for i, o := range []string{
		`{"Name":"a","Total":5,"Company":"companies/1","@metadata":{"@collection":"Orders"}}`,
		`{"Name":"b","Total":7,"Company":"companies/2","@metadata":{"@collection":"Orders"}}`,
		`{"Name":"c","Total":9,"Company":"companies/1","@metadata":{"@collection":"Orders"}}`,
	} {
		putDoc(t, db, "orders/"+string(rune('1'+i)), o)
	}
	return db
}

func run(t *testing.T, r *Runner, db *storage.DB, q string, params map[string]any) *Result {
	t.Helper()
	res, err := r.Run(context.Background(), db, Request{Query: q, QueryParameters: params})
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return res
}

func ids(t *testing.T, res *Result) []string {
	t.Helper()
	var out []string
	for _, raw := range res.Results {
		var m struct {
			Meta map[string]any `json:"@metadata"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		id, _ := m.Meta["@id"].(string)
		out = append(out, id)
	}
	return out
}

// Collection queries and id() queries run without an index: IndexName
// collection/<Name>, never stale, paging with TotalResults counted before it.
func TestCollectionQueries(t *testing.T) {
	db := shop(t)
	r := NewRunner(NewLocalDefinitions(nil), noIndexes{}, Options{})
	for _, c := range []struct {
		q      string
		params map[string]any
		want   string
		total  int64
		why    string
	}{
		{`from 'Orders'`, nil, "orders/1 orders/2 orders/3", 3, "collection scan"},
		{`from orders limit $p0, $p1`, map[string]any{"p0": nil, "p1": 2.0}, "orders/1 orders/2", 3, "collection scan"},
		{`from Orders limit $p0, $p1`, map[string]any{"p0": 1.0, "p1": 1.0}, "orders/2", 3, "collection scan"},
		{`from Orders limit $p0, $p1`, map[string]any{"p0": nil, "p1": 0.0}, "", 3, "collection scan"},
		{`from Orders limit 1 offset 2`, nil, "orders/3", 3, "collection scan"},
		{`from Orders where id() = $p0`, map[string]any{"p0": "ORDERS/2"}, "orders/2", 1, "id lookup"},
		{`from Orders where id() = 'companies/1'`, nil, "", 0, "id lookup"},
		{`from Orders where id() in ($ids)`, map[string]any{"ids": []any{"orders/3", "orders/1", "nope/1"}}, "orders/3 orders/1", 2, "id lookup"},
		{`from Orders where id() = 'orders/1' or id() = 'orders/3'`, nil, "orders/1 orders/3", 2, "id lookup"},
		{`from Orders where startsWith(id(), 'orders/')`, nil, "orders/1 orders/2 orders/3", 3, "collection scan"},
		{`from Orders where startsWith(id(), 'orders/') limit 1, 1`, nil, "orders/2", 3, "collection scan"},
		{`from Orders where not id() = 'orders/2'`, nil, "orders/1 orders/3", 2, "collection scan"},
		{`from Orders where true and not id() in ('orders/1')`, nil, "orders/2 orders/3", 2, "collection scan"},
		{`from Orders order by id() desc`, nil, "orders/3 orders/2 orders/1", 3, "collection scan"},
		{`from @all_docs`, nil, "companies/1 orders/1 orders/2 orders/3", 4, "collection scan"},
		{`from @all_docs where startsWith(id(), 'c')`, nil, "companies/1", 1, "collection scan"},
		{`from Nothing`, nil, "", 0, "collection scan"},
	} {
		res := run(t, r, db, c.q, c.params)
		if got := strings.Join(ids(t, res), " "); got != c.want || res.TotalResults != c.total || res.IsStale || res.Plan.Why != c.why {
			t.Errorf("%s: got %q total %d stale %v why %q; want %q total %d %q", c.q, got, res.TotalResults, res.IsStale, res.Plan.Why, c.want, c.total, c.why)
		}
		want := "collection/Orders"
		switch {
		case strings.Contains(c.q, "@all_docs"):
			want = "AllDocs"
		case strings.Contains(c.q, "Nothing"):
			want = "collection/Nothing"
		}
		if res.IndexName != want {
			t.Errorf("%s: IndexName %q, want %q", c.q, res.IndexName, want)
		}
	}
}

// order by random() returns every document once.
func TestCollectionRandomOrder(t *testing.T) {
	db := shop(t)
	r := NewRunner(NewLocalDefinitions(nil), noIndexes{}, Options{})
	res := run(t, r, db, `from Orders order by random()`, nil)
	got := ids(t, res)
	if len(got) != 3 || strings.Join(sorted(got), " ") != "orders/1 orders/2 orders/3" {
		t.Fatalf("%v", got)
	}
}

// A collection query's ResultEtag changes on every write to the collection
// (put, update, delete) and not on writes elsewhere.
func TestCollectionResultEtag(t *testing.T) {
	db := shop(t)
	r := NewRunner(NewLocalDefinitions(nil), noIndexes{}, Options{})
	etag := func() int64 { return run(t, r, db, `from Orders`, nil).ResultEtag }
	e0 := etag()
	if e0 != etag() {
		t.Fatal("the etag of an unchanged collection moved")
	}
	putDoc(t, db, "companies/9", `{"Name":"x","@metadata":{"@collection":"Companies"}}`)
	if etag() != e0 {
		t.Fatal("a write to another collection moved the etag")
	}
	seen := map[int64]bool{e0: true}
	for _, write := range []func(){
		func() { putDoc(t, db, "orders/4", `{"Name":"d","@metadata":{"@collection":"Orders"}}`) },
		func() { putDoc(t, db, "orders/4", `{"Name":"e","@metadata":{"@collection":"Orders"}}`) },
		func() { deleteDoc(t, db, "orders/4") },
	} {
		write()
		e := etag()
		if seen[e] {
			t.Fatalf("the etag did not change on a write: %d", e)
		}
		seen[e] = true
	}
}

// Projections, metadataOnly and includes on collection queries.
func TestCollectionProjectionsAndIncludes(t *testing.T) {
	db := shop(t)
	r := NewRunner(NewLocalDefinitions(nil), noIndexes{}, Options{})
	res := run(t, r, db, `from 'Orders' where id() = 'orders/1' select Name, Total as T, Missing, @metadata.@nested-object-types as __PROJECTED_NESTED_OBJECT_TYPES__ include Company`, nil)
	var got map[string]any
	if err := json.Unmarshal(res.Results[0], &got); err != nil {
		t.Fatal(err)
	}
	meta := got["@metadata"].(map[string]any)
	if got["Name"] != "a" || got["T"] != 5.0 || got["Missing"] != nil || meta["@projection"] != true || meta["@id"] != "orders/1" {
		t.Fatalf("%s", res.Results[0])
	}
	if !strings.HasPrefix(string(res.Results[0]), `{"Name":"a","T":5,"Missing":null,"__PROJECTED_NESTED_OBJECT_TYPES__":null,"@metadata"`) {
		t.Fatalf("projection order: %s", res.Results[0])
	}
	if len(res.Includes) != 1 || res.Includes[0].ID != "companies/1" || strings.Join(res.IncludedPaths, ",") != "Company" {
		t.Fatalf("includes %+v paths %v", res.Includes, res.IncludedPaths)
	}
	// A missing included document is left out; the client learns it is
	// missing from IncludedPaths.
	res = run(t, r, db, `from Orders where id() = 'orders/2' include Company`, nil)
	if len(res.Includes) != 0 {
		t.Fatalf("%+v", res.Includes)
	}
	res, err := r.Run(context.Background(), db, Request{Query: `from Orders where id() = 'orders/2'`, MetadataOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if s := string(res.Results[0]); !strings.HasPrefix(s, `{"@metadata":{"@collection":"Orders","@change-vector":`) || strings.Contains(s, `"Name"`) {
		t.Fatalf("metadata only: %s", s)
	}
	res = run(t, r, db, `from Orders select distinct Company`, nil)
	if len(res.Results) != 2 || res.TotalResults != 2 {
		t.Fatalf("distinct: %s", res.Results)
	}
}

// Errors: bad RQL, a bad limit, update {} on Run, an unknown index.
func TestQueryErrors(t *testing.T) {
	db := shop(t)
	r := NewRunner(NewLocalDefinitions(nil), noIndexes{}, Options{})
	var iq *InvalidQueryError
	for _, q := range []string{`from`, `from Orders limit -1`, `from Orders limit 1.5`, `from Orders limit $x`, `from Orders update { this.a = 1 }`} {
		if _, err := r.Run(context.Background(), db, Request{Query: q}); !errors.As(err, &iq) || iq.RavenType() != "Raven.Client.Exceptions.InvalidQueryException" {
			t.Errorf("%s: %v", q, err)
		}
	}
	var nf *IndexDoesNotExistError
	_, err := r.Run(context.Background(), db, Request{Query: `from index 'Nope'`})
	if !errors.As(err, &nf) || nf.RavenType() != "Raven.Client.Exceptions.Documents.Indexes.IndexDoesNotExistException" || !strings.Contains(err.Error(), "Nope") {
		t.Fatalf("%v", err)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
