package query

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/rql"
)

func mustParse(t *testing.T, q string) *rql.Query {
	t.Helper()
	p, err := rql.Parse(q)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Auto indexes are named as RavenDB names them (reference §1.6).
func TestAutoIndexNames(t *testing.T) {
	for _, c := range []struct{ q, want string }{
		{`from 'Orders' where Name = $p0`, "Auto/Orders/ByName"},
		{`from 'Orders' where Total > 1 and Name = $p0`, "Auto/Orders/ByNameAndTotal"},
		{`from 'Orders' where Name = $p0 order by Total as long`, "Auto/Orders/ByNameAndTotal"},
		{`from 'Orders' order by Total desc`, "Auto/Orders/ByTotal"},
		{`from 'Orders' where search(Name, $p0)`, "Auto/Orders/BySearch(Name)"},
		{`from 'Orders' where exact(Name = $p0)`, "Auto/Orders/ByExact(Name)"},
		{`from 'Orders' where search(Name, $p0) and exact(Name = $p1)`, "Auto/Orders/BySearch(Name)AndExact(Name)"},
		{`from 'Orders' where search(Name, $p0) and Total = 1`, "Auto/Orders/BySearch(Name)AndTotal"},
		{`from 'Orders' where Address.City = $p0 and Lines[].Price > 1`, "Auto/Orders/ByAddress.CityAndLines[].Price"},
		{`from 'Orders' where 'First Name' = $p0`, "Auto/Orders/By'First Name'"},
		{`from 'Orders' where 'order' = $p0`, "Auto/Orders/By'order'"},
		{`from 'Orders' where id() = $p0 and Name = $p1`, "Auto/Orders/ByName"},
		{`from @all_docs where Name = $p0`, "Auto/AllDocs/ByName"},
		{`from 'Orders' where exists(Name) and not Name in ($p0)`, "Auto/Orders/ByName"},
		{`from 'Orders' where boost(Name = $p0, 2) or fuzzy(Total = $p1, 0.5)`, "Auto/Orders/ByNameAndTotal"},
		{`from 'Orders' group by Company select key(), count() as count`, "Auto/Orders/ByCountReducedByCompany"},
		{`from 'Orders' group by Company select key(), sum(Total) as Sum`, "Auto/Orders/ByTotalReducedByCompany"},
		{`from 'Orders' group by Company, Employee select key(), count(), sum(Total)`, "Auto/Orders/ByCountAndTotalReducedByCompanyAndEmployee"},
		{`from 'Orders' group by Company select key()`, "Auto/OrdersReducedByCompany"},
		// Ordinal order: upper case sorts before lower case.
		{`from 'Orders' where age = 1 and Name = $p0`, "Auto/Orders/ByNameAndage"},
	} {
		d := PlanAutoIndex(mustParse(t, c.q), nil)
		if d.Create == nil || d.Use != c.want || d.Create.Name != c.want || d.Why != "created "+c.want {
			t.Errorf("%s: %+v, want %s", c.q, d, c.want)
		}
	}
	long := "from Orders where " + strings.Repeat("f", 300) + " = 1"
	d := PlanAutoIndex(mustParse(t, long), nil)
	if len(d.Use) <= 259 || !strings.HasPrefix(d.Use, "Auto/Orders/Byfff") || d.Use[256:259] != "..." {
		t.Fatalf("long name %q", d.Use)
	}
	if AutoIndexName(index.Definition{Type: index.TypeAutoMap, Collection: "Orders"}) != "Auto/Orders/ById()" {
		t.Fatal("no fields")
	}
}

// The definition carries the fields with their options and group-by keys.
func TestAutoIndexDefinition(t *testing.T) {
	d := PlanAutoIndex(mustParse(t, `from Orders where search(Name, $p) and exact(Code = $c) order by Total`), nil).Create
	want := []index.AutoField{{Name: "Code", Exact: true}, {Name: "Name", Search: true}, {Name: "Total"}}
	if d.Type != index.TypeAutoMap || d.Collection != "Orders" || len(d.Fields) != 3 {
		t.Fatalf("%+v", d)
	}
	for i := range want {
		if d.Fields[i] != want[i] {
			t.Fatalf("field %d: %+v, want %+v", i, d.Fields[i], want[i])
		}
	}
	d = PlanAutoIndex(mustParse(t, `from Orders group by Company select key(), count() as count, sum(Total) as Sum`), nil).Create
	if d.Type != index.TypeAutoMapReduce || strings.Join(d.GroupBy, ",") != "Company" || len(d.Fields) != 2 ||
		d.Fields[0] != (index.AutoField{Name: "Count", Aggregation: "Count"}) || d.Fields[1] != (index.AutoField{Name: "Total", Aggregation: "Sum"}) {
		t.Fatalf("%+v", d)
	}
}

func auto(t *testing.T, q string) index.Definition {
	d := PlanAutoIndex(mustParse(t, q), nil).Create
	d.Created = time.Unix(1, 0)
	return *d
}

// Matching: a complete index is used (Idle too, and the narrowest); a
// partial one is extended into a wider one that supersedes it; an index of
// another collection, shape or group-by, or a superseded one, is not used.
func TestAutoIndexMatching(t *testing.T) {
	byName := auto(t, `from Orders where Name = 1`)
	byNameTotal := auto(t, `from Orders where Name = 1 and Total = 2`)
	idle := auto(t, `from Orders where Total = 1`)
	idle.State = index.StateIdle
	search := auto(t, `from Orders where search(Name, 'x')`)
	companies := auto(t, `from Companies where Name = 1`)
	grouped := auto(t, `from Orders group by Company select count()`)
	static := index.Definition{Name: "Orders/ByName", Type: index.TypeJavaScriptMap, Maps: []string{"map('Orders', o => ({Name: o.Name}))"}}

	for _, c := range []struct {
		name  string
		q     string
		defs  []index.Definition
		use   string
		why   string
		super []string
	}{
		{"complete", `from Orders where Name = $p`, []index.Definition{byName, companies, static}, "Auto/Orders/ByName", "used Auto/Orders/ByName", nil},
		{"narrowest complete", `from Orders where Name = $p`, []index.Definition{byNameTotal, byName}, "Auto/Orders/ByName", "used Auto/Orders/ByName", nil},
		{"wider complete", `from Orders where Name = $p order by Total`, []index.Definition{byName, byNameTotal}, "Auto/Orders/ByNameAndTotal", "used Auto/Orders/ByNameAndTotal", nil},
		{"idle is used", `from Orders where Total > 3`, []index.Definition{idle}, "Auto/Orders/ByTotal", "used Auto/Orders/ByTotal", nil},
		{"search serves equality", `from Orders where Name = 'x'`, []index.Definition{search}, "Auto/Orders/BySearch(Name)", "used Auto/Orders/BySearch(Name)", nil},
		{"plain does not serve search", `from Orders where search(Name, 'x')`, []index.Definition{byName}, "Auto/Orders/BySearch(Name)",
			"extended Auto/Orders/ByName into Auto/Orders/BySearch(Name)", []string{"Auto/Orders/ByName"}},
		{"partial is extended", `from Orders where Name = $p and Age = 3`, []index.Definition{byName, companies}, "Auto/Orders/ByAgeAndName",
			"extended Auto/Orders/ByName into Auto/Orders/ByAgeAndName", []string{"Auto/Orders/ByName"}},
		{"union of partials", `from Orders where Name = $p and Total = 3 and Age = 1`, []index.Definition{byName, idle}, "Auto/Orders/ByAgeAndNameAndTotal",
			"extended Auto/Orders/ByName, Auto/Orders/ByTotal into Auto/Orders/ByAgeAndNameAndTotal", []string{"Auto/Orders/ByName", "Auto/Orders/ByTotal"}},
		{"disjoint: new, and the new one covers nothing", `from Orders where Age = 1`, []index.Definition{byName}, "Auto/Orders/ByAge", "created Auto/Orders/ByAge", nil},
		{"other collection", `from Orders where Name = 1`, []index.Definition{companies}, "Auto/Orders/ByName", "created Auto/Orders/ByName", nil},
		{"map does not serve group by", `from Orders group by Company select count()`, []index.Definition{byName}, "Auto/Orders/ByCountReducedByCompany", "created Auto/Orders/ByCountReducedByCompany", nil},
		{"group by used", `from Orders group by Company select key(), count() as count`, []index.Definition{grouped}, "Auto/Orders/ByCountReducedByCompany", "used Auto/Orders/ByCountReducedByCompany", nil},
		{"group by extended", `from Orders group by Company select count(), sum(Total)`, []index.Definition{grouped}, "Auto/Orders/ByCountAndTotalReducedByCompany",
			"extended Auto/Orders/ByCountReducedByCompany into Auto/Orders/ByCountAndTotalReducedByCompany", []string{"Auto/Orders/ByCountReducedByCompany"}},
		{"other group by keys", `from Orders group by Employee select count()`, []index.Definition{grouped}, "Auto/Orders/ByCountReducedByEmployee", "created Auto/Orders/ByCountReducedByEmployee", nil},
	} {
		d := PlanAutoIndex(mustParse(t, c.q), c.defs)
		if d.Use != c.use || d.Why != c.why || strings.Join(d.Supersedes, ",") != strings.Join(c.super, ",") {
			t.Errorf("%s: %+v; want %s %q %v", c.name, d, c.use, c.why, c.super)
		}
	}
	// A superseded index is not used, and not superseded again.
	old := byNameTotal
	old.Superseded = "Auto/Orders/ByAgeAndNameAndTotal"
	d := PlanAutoIndex(mustParse(t, `from Orders where Name = 1`), []index.Definition{old})
	if d.Create == nil || d.Use != "Auto/Orders/ByName" || len(d.Supersedes) != 0 {
		t.Fatalf("%+v", d)
	}
}

// The response has RavenDB's fields in RavenDB's order (golden JSON).
func TestResultShape(t *testing.T) {
	at := time.Date(2024, 1, 2, 3, 4, 5, 600, time.UTC)
	res := &Result{TotalResults: 3, SkippedResults: 0, DurationInMs: 2, IndexName: "collection/Orders",
		IndexTimestamp: at, LastQueryTime: at, ResultEtag: -42, NodeTag: "A"}
	got, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"TotalResults":3,"SkippedResults":0,"DurationInMs":2,"IncludedPaths":null,"IndexName":"collection/Orders","Results":[],"Includes":{},` +
		`"IndexTimestamp":"2024-01-02T03:04:05.0000006Z","LastQueryTime":"2024-01-02T03:04:05.0000006Z","IsStale":false,"ResultEtag":-42,"NodeTag":"A"}`
	if string(got) != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	res.Results = []json.RawMessage{json.RawMessage(`{"a":1}`)}
	res.Includes = Includes{{ID: "companies/1", Doc: json.RawMessage(`{"b":2}`)}, {ID: `q"x`, Doc: json.RawMessage(`{}`)}}
	res.IncludedPaths = []string{"Company"}
	res.Timings = &Timings{DurationInMs: 2, Timings: map[string]*Timings{"Query": {DurationInMs: 1}}}
	got, _ = json.Marshal(res)
	want = `{"TotalResults":3,"SkippedResults":0,"DurationInMs":2,"IncludedPaths":["Company"],"IndexName":"collection/Orders","Results":[{"a":1}],` +
		`"Includes":{"companies/1":{"b":2},"q\"x":{}},"IndexTimestamp":"2024-01-02T03:04:05.0000006Z","LastQueryTime":"2024-01-02T03:04:05.0000006Z",` +
		`"IsStale":false,"ResultEtag":-42,"NodeTag":"A","Timings":{"DurationInMs":2,"Timings":{"Query":{"DurationInMs":1,"Timings":null}}}}`
	if string(got) != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
}

// The request body: timeouts as milliseconds or TimeSpan strings.
func TestParseRequest(t *testing.T) {
	r, err := ParseRequest([]byte(`{"Query":"from 'Orders'","WaitForNonStaleResults":true,"WaitForNonStaleResultsTimeout":15000,"QueryParameters":{"p0":"x","p1":[1,2]},"Extra":1}`))
	if err != nil || r.Query != "from 'Orders'" || !r.WaitForNonStaleResults || time.Duration(r.WaitForNonStaleResultsTimeout) != 15*time.Second || r.QueryParameters["p0"] != "x" {
		t.Fatalf("%+v %v", r, err)
	}
	for s, want := range map[string]time.Duration{`"00:00:15"`: 15 * time.Second, `"00:01:00.5"`: time.Minute + 500*time.Millisecond, `"1.00:00:00"`: 24 * time.Hour, `null`: 0, `250`: 250 * time.Millisecond, `"100"`: 100 * time.Millisecond} {
		r, err := ParseRequest([]byte(`{"Query":"from x","WaitForNonStaleResultsTimeout":` + s + `}`))
		if err != nil || time.Duration(r.WaitForNonStaleResultsTimeout) != want {
			t.Errorf("%s: %v %v", s, time.Duration(r.WaitForNonStaleResultsTimeout), err)
		}
	}
	for _, s := range []string{`"abc"`, `"25:00:00"`, `"2.00:00:00"`, `-1`, `"00:00:61"`, `1e20`, `"00:00:01.12345678"`, `{}`} {
		if _, err := ParseRequest([]byte(`{"Query":"from x","WaitForNonStaleResultsTimeout":` + s + `}`)); err == nil {
			t.Errorf("%s was accepted", s)
		}
	}
}
