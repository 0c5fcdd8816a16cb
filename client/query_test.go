package client

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The RQL and parameters of each builder call must be exactly what the npm
// client 7.2.2 sends for the same calls (§1.4 of the queries reference;
// each row below was checked by printing query.getIndexQuery() from the npm
// client). No server is needed.
func TestQueryRQLMatchesNpmClient(t *testing.T) {
	store := NewDocumentStore([]string{deadURL(t)}, "db")
	defer store.Close()
	s := store.OpenSession()
	orders := func() *Query { return s.Query("Orders") }
	at := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

	cases := []struct {
		name   string
		q      *Query
		rql    string
		params string // JSON
	}{
		{"equals, order as long, take", orders().WhereEquals("Name", "x").OrderBy("Total", OrderingLong).Take(10),
			"from 'Orders' where Name = $p0 order by Total as long limit $p1, $p2", `{"p0":"x","p1":null,"p2":10}`},
		{"order desc as double", orders().OrderByDescending("Total", OrderingDouble),
			"from 'Orders' order by Total as double desc", `{}`},
		{"order by", orders().OrderBy("Total"), "from 'Orders' order by Total", `{}`},
		{"order as string is the default", orders().OrderBy("Name", OrderingString), "from 'Orders' order by Name", `{}`},
		{"order alphanumeric", orders().OrderBy("Name", OrderingAlphaNumeric), "from 'Orders' order by Name as alphaNumeric", `{}`},
		{"order desc", orders().OrderByDescending("Name"), "from 'Orders' order by Name desc", `{}`},
		{"two orders", orders().OrderBy("A").OrderByDescending("B", OrderingLong), "from 'Orders' order by A, B as long desc", `{}`},
		{"startsWith", orders().WhereStartsWith("Name", "ab"), "from 'Orders' where startsWith(Name, $p0)", `{"p0":"ab"}`},
		{"endsWith", orders().WhereEndsWith("Name", "x"), "from 'Orders' where endsWith(Name, $p0)", `{"p0":"x"}`},
		{"regex", orders().WhereRegex("Name", "^x"), "from 'Orders' where regex(Name, $p0)", `{"p0":"^x"}`},
		{"exists", orders().WhereExists("Name"), "from 'Orders' where exists(Name)", `{}`},
		{"exists nested", orders().WhereExists("Address.City"), "from 'Orders' where exists(Address.City)", `{}`},
		{"search", orders().Search("Name", "foo bar"), "from 'Orders' where search(Name, $p0)", `{"p0":"foo bar"}`},
		{"search and", orders().Search("Name", "foo bar", SearchAnd), "from 'Orders' where search(Name, $p0, and)", `{"p0":"foo bar"}`},
		{"search or", orders().Search("Name", "foo bar", SearchOr), "from 'Orders' where search(Name, $p0)", `{"p0":"foo bar"}`},
		{"two searches are or", orders().Search("Name", "a").Search("Tags", "b"),
			"from 'Orders' where search(Name, $p0) or search(Tags, $p1)", `{"p0":"a","p1":"b"}`},
		{"exact", orders().WhereEquals("Name", "X").Exact(), "from 'Orders' where exact(Name = $p0)", `{"p0":"X"}`},
		{"exact between", orders().WhereBetween("Name", "a", "c").Exact(),
			"from 'Orders' where exact(Name between $p0 and $p1)", `{"p0":"a","p1":"c"}`},
		{"exact startsWith", orders().WhereStartsWith("Name", "a").Exact(), "from 'Orders' where exact(startsWith(Name, $p0))", `{"p0":"a"}`},
		{"skip take", orders().Skip(5).Take(10), "from 'Orders' limit $p0, $p1", `{"p0":5,"p1":10}`},
		{"take 0", orders().Take(0), "from 'Orders' limit $p0, $p1", `{"p0":null,"p1":0}`},
		{"skip only", orders().Skip(5), "from 'Orders' limit $p0, $p1", `{"p0":5,"p1":null}`},
		{"first style", orders().WhereEquals("Name", "x").Take(1),
			"from 'Orders' where Name = $p0 limit $p1, $p2", `{"p0":"x","p1":null,"p2":1}`},
		{"where order skip take", orders().WhereEquals("Name", "x").OrderBy("Name").Skip(2).Take(3),
			"from 'Orders' where Name = $p0 order by Name limit $p1, $p2", `{"p0":"x","p1":2,"p2":3}`},
		{"index", s.QueryIndex("Orders/ByTotal").WhereGreaterThan("Total", 5),
			"from index 'Orders/ByTotal' where Total > $p0", `{"p0":5}`},
		{"id", orders().WhereEquals("id", "orders/1"), "from 'Orders' where id() = $p0", `{"p0":"orders/1"}`},
		{"ID", orders().WhereEquals("ID", "orders/1"), "from 'Orders' where id() = $p0", `{"p0":"orders/1"}`},
		{"id()", orders().WhereEquals("id()", "orders/1"), "from 'Orders' where id() = $p0", `{"p0":"orders/1"}`},
		{"id in", orders().WhereIn("id", []string{"orders/1", "orders/2"}),
			"from 'Orders' where id() in ($p0)", `{"p0":["orders/1","orders/2"]}`},
		{"in", orders().WhereIn("Name", []string{"a", "b"}), "from 'Orders' where Name in ($p0)", `{"p0":["a","b"]}`},
		{"in nested slices", orders().WhereIn("Name", []any{"a", []string{"b", "c"}}),
			"from 'Orders' where Name in ($p0)", `{"p0":["a","b","c"]}`},
		{"in empty", orders().WhereIn("Name", []string{}), "from 'Orders' where Name in ($p0)", `{"p0":[]}`},
		{"all in", orders().ContainsAll("Tags", []string{"a", "b"}), "from 'Orders' where Tags all in ($p0)", `{"p0":["a","b"]}`},
		{"all in empty is true", orders().ContainsAll("Tags", []string{}), "from 'Orders' where true", `{}`},
		{"contains any", orders().ContainsAny("Tags", []string{"a", "b"}), "from 'Orders' where Tags in ($p0)", `{"p0":["a","b"]}`},
		{"between", orders().WhereBetween("Total", 1, 5), "from 'Orders' where Total between $p0 and $p1", `{"p0":1,"p1":5}`},
		{"between open ends", orders().WhereBetween("Total", nil, nil), "from 'Orders' where Total between $p0 and $p1", `{"p0":"*","p1":"NULL"}`},
		{"not equals", orders().Not().WhereEquals("Name", "a"), "from 'Orders' where Name != $p0", `{"p0":"a"}`},
		{"where not equals", orders().WhereNotEquals("Name", "a"), "from 'Orders' where Name != $p0", `{"p0":"a"}`},
		{"not not equals", orders().Not().WhereNotEquals("Name", "a"), "from 'Orders' where Name = $p0", `{"p0":"a"}`},
		{"not startsWith first", orders().Not().WhereStartsWith("Name", "a"),
			"from 'Orders' where exists(Name) and not startsWith(Name, $p0)", `{"p0":"a"}`},
		{"not in first", orders().Not().WhereIn("Name", []string{"a"}),
			"from 'Orders' where exists(Name) and not Name in ($p0)", `{"p0":["a"]}`},
		{"not after a clause", orders().WhereEquals("A", 1).Not().WhereStartsWith("B", "x"),
			"from 'Orders' where A = $p0 and not startsWith(B, $p1)", `{"p0":1,"p1":"x"}`},
		{"not exists first", orders().Not().WhereExists("Name"), "from 'Orders' where true and not exists(Name)", `{}`},
		{"gte lte", orders().WhereGreaterThanOrEqual("Total", 1).WhereLessThanOrEqual("Total", 9),
			"from 'Orders' where Total >= $p0 and Total <= $p1", `{"p0":1,"p1":9}`},
		{"lt", orders().WhereLessThan("Total", 1), "from 'Orders' where Total < $p0", `{"p0":1}`},
		{"gt nil", orders().WhereGreaterThan("Total", nil), "from 'Orders' where Total > $p0", `{"p0":"*"}`},
		{"lt nil", orders().WhereLessThan("Total", nil), "from 'Orders' where Total < $p0", `{"p0":"NULL"}`},
		{"or else", orders().WhereEquals("Name", "a").OrElse().WhereEquals("Name", "b"),
			"from 'Orders' where Name = $p0 or Name = $p1", `{"p0":"a","p1":"b"}`},
		{"subclause", orders().OpenSubclause().WhereEquals("A", 1).OrElse().WhereEquals("B", 2).CloseSubclause().AndAlso().WhereEquals("C", 3),
			"from 'Orders' where (A = $p0 or B = $p1) and C = $p2", `{"p0":1,"p1":2,"p2":3}`},
		{"subclause then implicit and", orders().OpenSubclause().WhereEquals("A", 1).CloseSubclause().WhereEquals("C", 3),
			"from 'Orders' where (A = $p0) and C = $p1", `{"p0":1,"p1":3}`},
		{"not subclause", orders().Not().OpenSubclause().WhereEquals("A", 1).OrElse().WhereEquals("B", 2).CloseSubclause(),
			"from 'Orders' where true and not (A = $p0 or B = $p1)", `{"p0":1,"p1":2}`},
		{"implicit and", orders().WhereEquals("A", 1).WhereEquals("B", 2), "from 'Orders' where A = $p0 and B = $p1", `{"p0":1,"p1":2}`},
		{"or not", orders().WhereEquals("A", 1).OrElse().Not().WhereEquals("B", 2),
			"from 'Orders' where A = $p0 or B != $p1", `{"p0":1,"p1":2}`},
		{"nested path", orders().WhereEquals("Address.City", "x"), "from 'Orders' where Address.City = $p0", `{"p0":"x"}`},
		{"keyword field", orders().WhereEquals("order", "x"), "from 'Orders' where 'order' = $p0", `{"p0":"x"}`},
		{"field with a space", orders().WhereEquals("First Name", "x"), "from 'Orders' where 'First Name' = $p0", `{"p0":"x"}`},
		{"field with a dash", orders().WhereEquals("a-b", "x"), "from 'Orders' where a-b = $p0", `{"p0":"x"}`},
		{"keywords are case-sensitive", orders().WhereEquals("select", "x").WhereEquals("Where", "y").WhereEquals("from", "z").WhereEquals("desc", "z").WhereEquals("as", "z"),
			"from 'Orders' where 'select' = $p0 and Where = $p1 and from = $p2 and desc = $p3 and 'as' = $p4",
			`{"p0":"x","p1":"y","p2":"z","p3":"z","p4":"z"}`},
		{"boost", orders().WhereEquals("Name", "x").Boost(2), "from 'Orders' where boost(Name = $p0, 2)", `{"p0":"x"}`},
		{"select", orders().SelectFields("Name", "Total"),
			"from 'Orders' select Name, Total, @metadata.@nested-object-types as __PROJECTED_NESTED_OBJECT_TYPES__", `{}`},
		{"select one", orders().SelectFields("Name"),
			"from 'Orders' select Name, @metadata.@nested-object-types as __PROJECTED_NESTED_OBJECT_TYPES__", `{}`},
		{"distinct select", orders().Distinct().SelectFields("Name"),
			"from 'Orders' select distinct Name, @metadata.@nested-object-types as __PROJECTED_NESTED_OBJECT_TYPES__", `{}`},
		{"select with a space", orders().SelectFields("First Name"),
			"from 'Orders' select First Name, @metadata.@nested-object-types as __PROJECTED_NESTED_OBJECT_TYPES__", `{}`},
		{"include", orders().Include("Company"), "from 'Orders' include Company", `{}`},
		{"two includes", orders().Include("Company").Include("Employee"), "from 'Orders' include Company,Employee", `{}`},
		{"include quoted", orders().Include("Lines[].Product"), "from 'Orders' include 'Lines[].Product'", `{}`},
		{"group count", orders().GroupBy("Company").SelectKey().SelectCount(),
			"from 'Orders' group by Company select key(), count() as count", `{}`},
		{"group sum", orders().GroupBy("Company").SelectKey().SelectSum("Total", "Sum"),
			"from 'Orders' group by Company select key(), sum(Total) as Sum", `{}`},
		{"group sum unnamed", orders().GroupBy("Company").SelectKey().SelectSum("Total", ""),
			"from 'Orders' group by Company select key(), sum(Total)", `{}`},
		{"group key as", orders().GroupBy("Company").SelectKeyAs("Company", "C").SelectCount("N"),
			"from 'Orders' group by Company select Company as 'C', count() as N", `{}`},
		{"group by two", orders().GroupBy("Company", "Employee").SelectKey().SelectCount(),
			"from 'Orders' group by Company, Employee select key(), count() as count", `{}`},
		{"group where order", orders().GroupBy("Company").WhereGreaterThan("Total", 1).OrderBy("Company").SelectKey().SelectCount(),
			"from 'Orders' group by Company where Total > $p0 order by Company select key(), count() as count", `{"p0":1}`},
		{"date", orders().WhereGreaterThan("At", at), "from 'Orders' where At > $p0", `{"p0":"2024-01-02T03:04:05.0000000Z"}`},
		{"null", orders().WhereEquals("Name", nil), "from 'Orders' where Name = $p0", `{"p0":null}`},
		{"bool", orders().WhereEquals("Active", true), "from 'Orders' where Active = $p0", `{"p0":true}`},
		{"float", orders().WhereEquals("Total", 1.5), "from 'Orders' where Total = $p0", `{"p0":1.5}`},
		{"quote in collection", s.Query("O'Rders").WhereEquals("Name", "x"), `from 'O\'Rders' where Name = $p0`, `{"p0":"x"}`},
		{"all docs", s.Query("@all_docs").WhereEquals("Name", "x"), "from '@all_docs' where Name = $p0", `{"p0":"x"}`},
		{"wait changes no RQL", orders().WaitForNonStaleResults(0), "from 'Orders'", `{}`},
		{"raw", s.RawQuery("from Orders where Total > $t").AddParameter("t", 5), "from Orders where Total > $t", `{"t":5}`},
		{"raw $ name", s.RawQuery("from Orders where Total > $t").AddParameter("$t", 5), "from Orders where Total > $t", `{"t":5}`},
		{"raw paging numbers after named", s.RawQuery("from Orders where Total > $t").AddParameter("t", 5).Take(2),
			"from Orders where Total > $t limit $p1, $p2", `{"t":5,"p1":null,"p2":2}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			iq, err := c.q.IndexQuery()
			if err != nil {
				t.Fatal(err)
			}
			if iq.Query != c.rql {
				t.Errorf("RQL\n got  %s\n want %s", iq.Query, c.rql)
			}
			got, _ := json.Marshal(iq.QueryParameters)
			var want any
			if err := json.Unmarshal([]byte(c.params), &want); err != nil {
				t.Fatal(err)
			}
			wantJSON, _ := json.Marshal(want)
			if string(got) != string(wantJSON) {
				t.Errorf("parameters\n got  %s\n want %s", got, wantJSON)
			}
			// Rendering twice gives the same (paging parameters are not added twice).
			again, _ := c.q.IndexQuery()
			if again.Query != iq.Query || len(again.QueryParameters) != len(iq.QueryParameters) {
				t.Errorf("second rendering differs: %s %v", again.Query, again.QueryParameters)
			}
		})
	}
}

// The body of POST /queries is the npm client's (the captured example of
// §1.1 of the queries reference).
func TestQueryBodyMatchesNpmClient(t *testing.T) {
	store := NewDocumentStore([]string{deadURL(t)}, "db")
	defer store.Close()
	s := store.OpenSession()
	iq, err := s.Query("Orders").WaitForNonStaleResults(0).IndexQuery()
	if err != nil {
		t.Fatal(err)
	}
	body, err := iq.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"Query":"from 'Orders'","WaitForNonStaleResults":true,"WaitForNonStaleResultsTimeout":15000,"QueryParameters":{}}`
	if string(body) != want {
		t.Fatalf("body\n got  %s\n want %s", body, want)
	}
	iq, _ = s.Query("Orders").WhereEquals("Name", "<a&b>").WaitForNonStaleResults(5 * time.Second).IndexQuery()
	body, _ = iq.MarshalJSON()
	want = `{"Query":"from 'Orders' where Name = $p0","WaitForNonStaleResults":true,"WaitForNonStaleResultsTimeout":5000,"QueryParameters":{"p0":"<a&b>"}}`
	if string(body) != want {
		t.Fatalf("body\n got  %s\n want %s", body, want)
	}
	iq, _ = s.Query("Orders").IndexQuery()
	body, _ = iq.MarshalJSON()
	if want := `{"Query":"from 'Orders'","QueryParameters":{}}`; string(body) != want {
		t.Fatalf("body\n got  %s\n want %s", body, want)
	}
}

// Misuses are reported by the terminal operation, not by a panic.
func TestQueryBuilderErrors(t *testing.T) {
	store := NewDocumentStore([]string{deadURL(t)}, "db")
	defer store.Close()
	s := store.OpenSession()
	cases := map[string]*Query{
		"unclosed subclause":      s.Query("Orders").OpenSubclause().WhereEquals("A", 1),
		"operator after operator": s.Query("Orders").WhereEquals("A", 1).OrElse().AndAlso().WhereEquals("B", 1),
		"trailing operator":       s.Query("Orders").WhereEquals("A", 1).OrElse(),
		"dangling not":            s.Query("Orders").WhereEquals("A", 1).Not(),
		"exact without a clause":  s.Query("Orders").Exact(),
		"group by on an index":    s.QueryIndex("X").GroupBy("A"),
		"where on a raw query":    s.RawQuery("from Orders").WhereEquals("A", 1),
		"parameter twice":         s.RawQuery("from Orders").AddParameter("a", 1).AddParameter("a", 2),
		"select fields twice":     s.Query("Orders").SelectFields("A").SelectFields("B"),
	}
	for name, q := range cases {
		if _, err := q.IndexQuery(); err == nil {
			t.Errorf("%s: no error (RQL %s)", name, q.String())
		}
		var out []map[string]any
		if err := q.ToList(&out); err == nil || strings.Contains(err.Error(), "dial") {
			t.Errorf("%s: ToList must fail before any request, got %v", name, err)
		}
	}
}

// WaitForIndexesAfterSaveChanges adds the npm client's bulk_docs parameters.
func TestWaitForIndexesAfterSaveChangesQuery(t *testing.T) {
	store := NewDocumentStore([]string{deadURL(t)}, "db")
	defer store.Close()
	s := store.OpenSession()
	if q := s.batchQuery(); q != "" {
		t.Fatalf("without the option: %q", q)
	}
	s.WaitForIndexesAfterSaveChanges(IndexWaitOptions{Indexes: []string{"Pets/ByOwner", "Orders/Totals"}})
	want := "waitForIndexesTimeout=00:00:15&waitForIndexThrow=true&waitForSpecificIndex=Pets%2FByOwner&waitForSpecificIndex=Orders%2FTotals"
	if q := s.batchQuery(); q != want {
		t.Fatalf("got  %s\nwant %s", q, want)
	}
	s.WaitForIndexesAfterSaveChanges(IndexWaitOptions{Timeout: 90*time.Second + 250*time.Millisecond, NoThrowOnTimeout: true})
	if q, want := s.batchQuery(), "waitForIndexesTimeout=00:01:30.2500000&waitForIndexThrow=false"; q != want {
		t.Fatalf("got  %s\nwant %s", q, want)
	}
}

// Index definitions go to /indexes (JavaScript) or /admin/indexes (C#), with
// the type the npm client detects.
func TestIndexDefinitionTypeDetection(t *testing.T) {
	cases := []struct {
		def    IndexDefinition
		typ    string
		csharp bool
	}{
		{IndexDefinition{Maps: []string{"map('Pets', p => ({ Name: p.Name }))"}}, "JavaScriptMap", false},
		{IndexDefinition{Maps: []string{"map('Orders', o => ({ Company: o.Company }))"}, Reduce: "groupBy(x => x.Company).aggregate(g => ({ Company: g.key }))"}, "JavaScriptMapReduce", false},
		{IndexDefinition{Maps: []string{"  from o in docs.Orders select new { o.Company }"}}, "Map", true},
		{IndexDefinition{Maps: []string{"docs.Orders.Select(o => new { o.Company })"}, Reduce: "results.GroupBy(x => x.Company)"}, "MapReduce", true},
	}
	for _, c := range cases {
		if got := c.def.detectType(); got != c.typ {
			t.Errorf("%q: type %s, want %s", c.def.Maps[0], got, c.typ)
		}
		if got := c.def.isCSharp(); got != c.csharp {
			t.Errorf("%q: C# %v, want %v", c.def.Maps[0], got, c.csharp)
		}
	}
}
