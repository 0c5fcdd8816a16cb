package client

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/testserver"
)

// Integration tests of queries and indexes against a real node
// (internal/testserver).

// Sale is a document of the Sales collection.
type Sale struct {
	ID       string
	Name     string
	Company  string
	Total    float64
	Qty      int
	Code     string
	Tags     []string
	Notes    string
	Discount *int `json:",omitempty"`
}

type Pet struct {
	ID         string
	Name       string
	OwnerID    string `json:"OwnerId"`
	Vaccinated bool   `json:",omitempty"`
}

func intp(i int) *int { return &i }

func seedSales(t *testing.T, store *DocumentStore) {
	t.Helper()
	s := store.OpenSession()
	for _, x := range []*Sale{
		{ID: "sales/1", Name: "Alpha", Company: "companies/1", Total: 10.5, Qty: 9, Code: "item-9", Tags: []string{"red", "blue"}, Notes: "quick brown fox", Discount: intp(1)},
		{ID: "sales/2", Name: "Beta", Company: "companies/1", Total: 20.25, Qty: 10, Code: "item-10", Tags: []string{"blue"}, Notes: "lazy brown dog"},
		{ID: "sales/3", Name: "Gamma", Company: "companies/2", Total: 30, Qty: 100, Code: "item-100", Tags: []string{"red", "green", "blue"}, Notes: "quick dog", Discount: intp(0)},
		{ID: "sales/4", Name: "Delta", Company: "companies/2", Total: 2.75, Qty: 1, Code: "item-1", Tags: []string{"green"}, Notes: "sleepy cat"},
		{ID: "sales/5", Name: "Epsilon", Company: "companies/3", Total: 100, Qty: 50, Code: "item-50", Tags: []string{}, Notes: "brown cow"},
	} {
		if err := s.Store(x); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range []string{"Acme", "Globex", "Initech"} {
		if err := s.StoreWithID(map[string]any{"Name": n, "@metadata": map[string]any{"@collection": "Companies"}}, "companies/"+string(rune('1'+i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
}

func saleNames(t *testing.T, q *Query) []string {
	t.Helper()
	var out []*Sale
	if err := q.ToList(&out); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	names := make([]string, len(out))
	for i, x := range out {
		names[i] = x.Name
	}
	return names
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

func TestIntegrationQueryOperators(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	seedSales(t, store)
	q := func() *Query { return store.OpenSession().Query("Sales").WaitForNonStaleResults(0) }

	cases := []struct {
		name    string
		q       *Query
		want    []string
		ordered bool
	}{
		{"equals", q().WhereEquals("Name", "Beta"), []string{"Beta"}, false},
		{"equals is case-insensitive", q().WhereEquals("Name", "beta"), []string{"Beta"}, false},
		{"exact is not", q().WhereEquals("Name", "beta").Exact(), nil, false},
		{"not equals", q().WhereNotEquals("Name", "Alpha"), []string{"Beta", "Delta", "Epsilon", "Gamma"}, false},
		{"greater than", q().WhereGreaterThan("Total", 20.25), []string{"Epsilon", "Gamma"}, false},
		{"greater or equal", q().WhereGreaterThanOrEqual("Total", 20.25), []string{"Beta", "Epsilon", "Gamma"}, false},
		{"less than", q().WhereLessThan("Total", 10.5), []string{"Delta"}, false},
		{"less or equal", q().WhereLessThanOrEqual("Total", 10.5), []string{"Alpha", "Delta"}, false},
		{"numbers, not strings", q().WhereGreaterThan("Qty", 50), []string{"Gamma"}, false},
		{"between", q().WhereBetween("Total", 10.5, 30), []string{"Alpha", "Beta", "Gamma"}, false},
		{"in", q().WhereIn("Name", []string{"Alpha", "Gamma", "Nope"}), []string{"Alpha", "Gamma"}, false},
		{"contains all", q().ContainsAll("Tags", []string{"red", "blue"}), []string{"Alpha", "Gamma"}, false},
		{"contains any", q().ContainsAny("Tags", []string{"green"}), []string{"Delta", "Gamma"}, false},
		{"starts with", q().WhereStartsWith("Name", "Al"), []string{"Alpha"}, false},
		{"ends with", q().WhereEndsWith("Name", "ta"), []string{"Beta", "Delta"}, false},
		{"exists", q().WhereExists("Discount"), []string{"Alpha", "Gamma"}, false},
		{"regex", q().WhereRegex("Name", "^(Al|Be)"), []string{"Alpha", "Beta"}, false},
		{"search any term", q().Search("Notes", "quick dog"), []string{"Alpha", "Beta", "Gamma"}, false},
		{"search all terms", q().Search("Notes", "quick dog", SearchAnd), []string{"Gamma"}, false},
		{"or", q().WhereEquals("Name", "Alpha").OrElse().WhereEquals("Name", "Delta"), []string{"Alpha", "Delta"}, false},
		{"subclause", q().OpenSubclause().WhereEquals("Company", "companies/1").OrElse().WhereEquals("Company", "companies/2").CloseSubclause().AndAlso().WhereGreaterThan("Total", 15), []string{"Beta", "Gamma"}, false},
		{"not subclause", q().Not().OpenSubclause().WhereEquals("Name", "Alpha").OrElse().WhereEquals("Name", "Beta").CloseSubclause(), []string{"Delta", "Epsilon", "Gamma"}, false},
		{"order by", q().OrderBy("Name"), []string{"Alpha", "Beta", "Delta", "Epsilon", "Gamma"}, true},
		{"order by long", q().OrderBy("Qty", OrderingLong), []string{"Delta", "Alpha", "Beta", "Epsilon", "Gamma"}, true},
		{"order by double desc", q().OrderByDescending("Total", OrderingDouble), []string{"Epsilon", "Gamma", "Beta", "Alpha", "Delta"}, true},
		{"order alphanumeric", q().OrderBy("Code", OrderingAlphaNumeric), []string{"Delta", "Alpha", "Beta", "Epsilon", "Gamma"}, true},
		{"skip take", q().OrderBy("Name").Skip(1).Take(2), []string{"Beta", "Delta"}, true},
		{"raw with a parameter", store.OpenSession().RawQuery("from Sales where Total > $min order by Total as double").AddParameter("min", 20).WaitForNonStaleResults(0), []string{"Beta", "Gamma", "Epsilon"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := saleNames(t, c.q)
			if !c.ordered {
				got = sorted(got)
			}
			if len(got) == 0 && len(c.want) == 0 {
				return
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("%s\n got  %v\n want %v", c.q, got, c.want)
			}
		})
	}

	t.Run("first, single, count, any", func(t *testing.T) {
		var first Sale
		found, err := q().OrderBy("Total", OrderingDouble).First(&first)
		if err != nil || !found || first.Name != "Delta" {
			t.Fatalf("First: %v %v %+v", found, err, first)
		}
		var none *Sale
		if found, err := q().WhereEquals("Name", "Nobody").First(&none); err != nil || found || none != nil {
			t.Fatalf("First of nothing: %v %v %v", found, err, none)
		}
		var one *Sale
		if err := q().WhereEquals("Name", "Epsilon").Single(&one); err != nil || one.Qty != 50 {
			t.Fatalf("Single: %v %+v", err, one)
		}
		if err := q().WhereEquals("Company", "companies/1").Single(&one); !errors.Is(err, ErrMoreThanOneResult) {
			t.Fatalf("Single of two: %v", err)
		}
		if err := q().WhereEquals("Company", "nope").Single(&one); !errors.Is(err, ErrNoResults) {
			t.Fatalf("Single of none: %v", err)
		}
		if c, err := q().WhereEquals("Company", "companies/1").Count(); err != nil || c != 2 {
			t.Fatalf("Count: %d %v", c, err)
		}
		if a, err := q().WhereEquals("Company", "companies/3").Any(); err != nil || !a {
			t.Fatalf("Any: %v %v", a, err)
		}
		if a, err := q().WhereEquals("Company", "companies/404").Any(); err != nil || a {
			t.Fatalf("Any of nothing: %v %v", a, err)
		}
	})

	t.Run("statistics", func(t *testing.T) {
		var st QueryStatistics
		got := saleNames(t, q().Statistics(&st).OrderBy("Name").Skip(1).Take(2))
		if len(got) != 2 || st.TotalResults != 5 || st.IsStale || st.NodeTag != "A" || !strings.HasPrefix(st.IndexName, "Auto/Sales/By") {
			t.Fatalf("%v %+v", got, st)
		}
		var byID QueryStatistics
		if got := saleNames(t, store.OpenSession().Query("Sales").Statistics(&byID).WhereEquals("id", "sales/3")); !slices.Equal(got, []string{"Gamma"}) || byID.IndexName != "collection/Sales" {
			t.Fatalf("id(): %v %+v", got, byID)
		}
	})

	t.Run("projections and group by", func(t *testing.T) {
		var rows []map[string]any
		if err := q().WhereEquals("Name", "Alpha").SelectFields("Name", "Total").ToList(&rows); err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0]["Name"] != "Alpha" || rows[0]["Total"] != 10.5 || rows[0]["Tags"] != nil {
			t.Fatalf("projection: %v", rows)
		}
		var groups []struct {
			Company string
			Count   int `json:"count"`
		}
		if err := q().GroupBy("Company").SelectKey().SelectCount().ToList(&groups); err != nil {
			t.Fatal(err)
		}
		counts := map[string]int{}
		for _, g := range groups {
			counts[g.Company] = g.Count
		}
		if len(counts) != 3 || counts["companies/1"] != 2 || counts["companies/2"] != 2 || counts["companies/3"] != 1 {
			t.Fatalf("group count: %+v", groups)
		}
		var sums []struct {
			Company string
			Sum     float64
		}
		if err := q().GroupBy("Company").SelectKey().SelectSum("Total", "Sum").ToList(&sums); err != nil {
			t.Fatal(err)
		}
		totals := map[string]float64{}
		for _, g := range sums {
			totals[g.Company] = g.Sum
		}
		if totals["companies/1"] != 30.75 || totals["companies/2"] != 32.75 || totals["companies/3"] != 100 {
			t.Fatalf("group sum: %+v", sums)
		}
	})

	t.Run("include then load without a request", func(t *testing.T) {
		s := store.OpenSession()
		var out []*Sale
		if err := s.Query("Sales").WaitForNonStaleResults(0).WhereEquals("Company", "companies/2").Include("Company").ToList(&out); err != nil {
			t.Fatal(err)
		}
		if len(out) != 2 || s.NumberOfRequests() != 1 {
			t.Fatalf("%d results, %d requests", len(out), s.NumberOfRequests())
		}
		var c map[string]any
		if found, err := s.Load("companies/2", &c); err != nil || !found || c["Name"] != "Globex" {
			t.Fatalf("included company: %v %v %v", found, err, c)
		}
		if s.NumberOfRequests() != 1 {
			t.Fatalf("loading an included document sent a request (%d)", s.NumberOfRequests())
		}
	})

	t.Run("results are tracked", func(t *testing.T) {
		s := store.OpenSession()
		var out []*Sale
		if err := s.Query("Sales").WhereEquals("id", "sales/4").ToList(&out); err != nil || len(out) != 1 {
			t.Fatalf("%v %v", out, err)
		}
		out[0].Notes = "awake"
		if err := s.SaveChanges(); err != nil {
			t.Fatal(err)
		}
		again, err := Load[Sale](store.OpenSession(), "sales/4")
		if err != nil || again.Notes != "awake" {
			t.Fatalf("%+v %v", again, err)
		}
	})

	t.Run("a repeated query is a 304 from the HTTP cache", func(t *testing.T) {
		run := func() QueryStatistics {
			var st QueryStatistics
			if got := saleNames(t, store.OpenSession().Query("Sales").Statistics(&st).WhereEquals("Name", "Alpha")); !slices.Equal(got, []string{"Alpha"}) {
				t.Fatalf("got %v", got)
			}
			return st
		}
		// The index is caught up first: a stale answer's etag moves as the
		// index catches up, so the repeat would rightly not be a 304.
		if got := saleNames(t, store.OpenSession().Query("Sales").WaitForNonStaleResults(10*time.Second).WhereEquals("Name", "Alpha")); !slices.Equal(got, []string{"Alpha"}) {
			t.Fatalf("got %v", got)
		}
		run()
		before := store.RequestExecutor().NotModifiedCount()
		st := run()
		if store.RequestExecutor().NotModifiedCount() != before+1 || st.DurationInMs != -1 {
			t.Fatalf("304s %d → %d, DurationInMs %d", before, store.RequestExecutor().NotModifiedCount(), st.DurationInMs)
		}
	})
}

func TestIntegrationIndexesLoadReference(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()

	s := store.OpenSession()
	for _, p := range []*Person{{ID: "people/1", Name: "Alice"}, {ID: "people/2", Name: "Bob"}} {
		if err := s.Store(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*Pet{{ID: "pets/1", Name: "Rex", OwnerID: "people/1"}, {ID: "pets/2", Name: "Tom", OwnerID: "people/1"}, {ID: "pets/3", Name: "Fido", OwnerID: "people/2"}} {
		if err := s.Store(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}

	res, err := store.PutIndexes(ctx, IndexDefinition{
		Name: "Pets/ByOwner",
		Maps: []string{"map('Pets', p => ({ Name: p.Name, OwnerName: load(p.OwnerId, 'People').Name }))"},
	})
	if err != nil || len(res) != 1 || res[0].Index != "Pets/ByOwner" {
		t.Fatalf("PutIndexes: %+v %v", res, err)
	}
	owned := func(owner string) []string {
		t.Helper()
		var pets []*Pet
		if err := store.OpenSession().QueryIndex("Pets/ByOwner").WaitForNonStaleResults(0).WhereEquals("OwnerName", owner).ToList(&pets); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range pets {
			names = append(names, p.Name)
		}
		return sorted(names)
	}
	if got := owned("Alice"); !slices.Equal(got, []string{"Rex", "Tom"}) {
		t.Fatalf("Alice's pets: %v", got)
	}

	// Renaming the owner changes the results of the load() index.
	s = store.OpenSession()
	alice, err := Load[Person](s, "people/1")
	if err != nil || alice == nil {
		t.Fatal(alice, err)
	}
	alice.Name = "Alicia"
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if got := owned("Alicia"); !slices.Equal(got, []string{"Rex", "Tom"}) {
		t.Fatalf("after the rename, Alicia's pets: %v", got)
	}
	if got := owned("Alice"); len(got) != 0 {
		t.Fatalf("after the rename, Alice still has %v", got)
	}
	if got := owned("Bob"); !slices.Equal(got, []string{"Fido"}) {
		t.Fatalf("Bob's pets: %v", got)
	}

	names, err := store.GetIndexNames(ctx, 0, 100)
	if err != nil || !slices.Contains(names, "Pets/ByOwner") {
		t.Fatalf("GetIndexNames: %v %v", names, err)
	}
	def, err := store.GetIndex(ctx, "Pets/ByOwner")
	if err != nil || def == nil || def.Type != "JavaScriptMap" || len(def.Maps) != 1 || !strings.Contains(def.Maps[0], "load(p.OwnerId") {
		t.Fatalf("GetIndex: %+v %v", def, err)
	}
	if none, err := store.GetIndex(ctx, "No/Such"); err != nil || none != nil {
		t.Fatalf("GetIndex of an unknown index: %+v %v", none, err)
	}
	defs, err := store.GetIndexes(ctx, 0, 100)
	if err != nil || len(defs) == 0 {
		t.Fatalf("GetIndexes: %v %v", defs, err)
	}
	stats, err := store.GetIndexStatistics(ctx, "Pets/ByOwner")
	if err != nil || stats.EntriesCount != 3 || stats.State != IndexStateNormal {
		t.Fatalf("GetIndexStatistics: %+v %v", stats, err)
	}
	if _, ok := stats.Collections["Pets"]; !ok {
		t.Fatalf("Collections: %+v", stats.Collections)
	}

	if err := store.SetIndexPriority(ctx, IndexPriorityHigh, "Pets/ByOwner"); err != nil {
		t.Fatal(err)
	}
	if err := store.SetIndexLock(ctx, IndexLockedIgnore, "Pets/ByOwner"); err != nil {
		t.Fatal(err)
	}
	if def, err := store.GetIndex(ctx, "Pets/ByOwner"); err != nil || def.Priority != IndexPriorityHigh || def.LockMode != IndexLockedIgnore {
		t.Fatalf("priority and lock: %+v %v", def, err)
	}
	if err := store.DisableIndex(ctx, "Pets/ByOwner"); err != nil {
		t.Fatal(err)
	}
	st, err := store.GetIndexingStatus(ctx)
	if err != nil || !slices.Contains(st.Indexes, IndexStatus{Name: "Pets/ByOwner", Status: "Disabled"}) {
		t.Fatalf("status after disable: %+v %v", st, err)
	}
	if err := store.EnableIndex(ctx, "Pets/ByOwner"); err != nil {
		t.Fatal(err)
	}
	if err := store.ResetIndex(ctx, "Pets/ByOwner"); err != nil {
		t.Fatal(err)
	}
	if got := owned("Alicia"); !slices.Equal(got, []string{"Rex", "Tom"}) {
		t.Fatalf("after reset: %v", got)
	}

	// A failing document is recorded and does not stop the index.
	if _, err := store.PutIndexes(ctx, IndexDefinition{Name: "Pets/Shouting", Maps: []string{"map('Pets', p => ({ Loud: p.Nickname.toUpperCase() }))"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.OpenSession().QueryIndex("Pets/Shouting").WaitForNonStaleResults(0).Count(); err != nil {
		t.Fatal(err)
	}
	errs, err := store.GetIndexErrors(ctx, "Pets/Shouting")
	if err != nil || len(errs) != 1 || len(errs[0].Errors) != 3 {
		t.Fatalf("GetIndexErrors: %+v %v", errs, err)
	}

	// C# is refused, with a message that says JavaScript is supported.
	_, err = store.PutIndexes(ctx, IndexDefinition{Name: "Pets/Linq", Maps: []string{"from p in docs.Pets select new { p.Name }"}})
	if err == nil || !strings.Contains(err.Error(), "JavaScript") {
		t.Fatalf("a C# index: %v", err)
	}

	if err := store.DeleteIndex(ctx, "Pets/Shouting"); err != nil {
		t.Fatal(err)
	}
	var none []*Pet
	err = store.OpenSession().QueryIndex("Pets/Shouting").ToList(&none)
	var se *ServerError
	if !errors.As(err, &se) || !strings.HasSuffix(se.Type, "IndexDoesNotExistException") {
		t.Fatalf("querying a deleted index: %v", err)
	}
}

func TestIntegrationWaitForIndexesAndQueryOperations(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()
	seedSales(t, store)
	if _, err := store.PutIndexes(ctx, IndexDefinition{Name: "Sales/ByCompany", Maps: []string{"map('Sales', s => ({ Company: s.Company, Total: s.Total }))"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.OpenSession().QueryIndex("Sales/ByCompany").WaitForNonStaleResults(0).Count(); err != nil {
		t.Fatal(err)
	}

	// After SaveChanges with the wait, a query without waiting sees the write.
	s := store.OpenSession()
	s.WaitForIndexesAfterSaveChanges(IndexWaitOptions{Indexes: []string{"Sales/ByCompany"}})
	if err := s.Store(&Sale{ID: "sales/9", Name: "Zeta", Company: "companies/9", Total: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if got := saleNames(t, store.OpenSession().QueryIndex("Sales/ByCompany").WhereEquals("Company", "companies/9")); !slices.Equal(got, []string{"Zeta"}) {
		t.Fatalf("right after SaveChanges: %v", got)
	}

	// Patch by query, then delete by query, each waited for.
	op, err := store.PatchByQuery(ctx, IndexQuery{Query: "from Sales where Company = $c update { this.Notes = 'patched'; }", QueryParameters: map[string]any{"c": "companies/1"}}, QueryOperationOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := op.WaitForCompletion(ctx)
	if err != nil || res.Total != 2 {
		t.Fatalf("patch: %+v %v", res, err)
	}
	got, err := LoadMany[Sale](store.OpenSession(), "sales/1", "sales/2", "sales/3")
	if err != nil || got["sales/1"].Notes != "patched" || got["sales/2"].Notes != "patched" || got["sales/3"].Notes == "patched" {
		t.Fatalf("after the patch: %v %v", got, err)
	}
	op, err = store.DeleteByQuery(ctx, IndexQuery{Query: "from index 'Sales/ByCompany' where Total < $max", QueryParameters: map[string]any{"max": 5}}, QueryOperationOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := op.WaitForCompletion(ctx); err != nil || res.Total != 2 {
		t.Fatalf("delete: %+v %v", res, err)
	}
	left, err := store.OpenSession().Query("Sales").Count()
	if err != nil || left != 4 {
		t.Fatalf("after deleting sales/4 (2.75) and sales/9 (1): %d left, %v", left, err)
	}

	// A faulted operation returns the server's error.
	op, err = store.PatchByQuery(ctx, IndexQuery{Query: "from Sales update { throw 'nope'; }"}, QueryOperationOptions{})
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err = op.WaitForCompletion(ctx)
	}
	if err == nil {
		t.Fatal("a throwing patch succeeded")
	}
}
