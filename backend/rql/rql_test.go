package rql

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Every query text the npm client generates (protocol reference §6.3)
// parses.
func TestParsesWhatTheClientSends(t *testing.T) {
	for _, q := range []string{
		`from 'Orders'`,
		`from 'Order Lines'`,
		`from Orders`,
		`from index 'Orders/ByTotal' where total = $p0`,
		`from 'Orders' where Name = $p0`,
		`from 'Orders' where exact(Name = $p0)`,
		`from 'Orders' where id() = $p0`,
		`from 'Orders' where Address.City = $p0`,
		`from 'Orders' where 'Na me' = $p0`,
		`from 'Orders' where name != $p0`,
		`from 'Orders' where total > $p0 and total <= $p1`,
		`from 'Orders' where total >= $p0 and total < $p1`,
		`from 'Orders' where total between $p0 and $p1`,
		`from 'Orders' where name in ($p0)`,
		`from 'Orders' where tags all in ($p0)`,
		`from 'Orders' where id() in ($p0)`,
		`from 'Orders' where startsWith(name, $p0)`,
		`from 'Orders' where endsWith(Name, $p0)`,
		`from 'Orders' where search(name, $p0)`,
		`from 'Orders' where regex(Name, $p0)`,
		`from 'Orders' where lucene(Name, $p0)`,
		`from 'Orders' where exists(f)`,
		`from 'Orders' where not exists(zzz)`,
		`from 'Orders' where name = $p0 or name = $p1`,
		`from 'Orders' where (a = $p0 or b = $p1) and c = $p2`,
		`from 'Orders' where boost(Name = $p0, 2)`,
		`from 'Orders' order by total`,
		`from 'Orders' order by total as long`,
		`from 'Orders' order by total as alphaNumeric`,
		`from 'Orders' order by total desc`,
		`from 'Orders' order by Name, total as double desc`,
		`from 'Orders' order by random()`,
		`from 'Orders' limit $p2, $p3`,
		`from 'Orders' select Name, total, @metadata.@nested-object-types as __PROJECTED_NESTED_OBJECT_TYPES__`,
		`from 'Orders' select distinct Name, @metadata.@nested-object-types as __PROJECTED_NESTED_OBJECT_TYPES__`,
		`from 'Orders' group by Name select key(), count() as count`,
		`from 'Orders' include company`,
		`from Orders where total > $min`,
		`from Orders as o where o.Lines[].Price > 10 and o.Address.City = 'London' select o.Name`,
		`FROM Orders WHERE Total >= 10.5 AND NOT (Status == "Closed")`,
		// The grammar of queries (reference §1.4).
		`from @all_docs`,
		`from @all_docs where Name = $p0`,
		`from 'Orders' where Name = $p0 order by Total as long limit $p1, $p2`,
		`from 'Orders' order by Total as double desc`,
		`from 'Orders' order by Name as alphaNumeric`,
		`from 'Orders' order by Name as string`,
		`from 'Orders' where search(Name, $p0, and)`,
		`from 'Orders' where search(Name, $p0, or)`,
		`from 'Orders' where fuzzy(Name = $p0, 0.5)`,
		`from 'Orders' where proximity(search(Name, $p0), 2)`,
		`from 'Orders' where search(Name, $p0) order by score()`,
		`from 'Orders' where search(Name, $p0) order by score() desc, Name`,
		`from 'Orders' order by random('seed')`,
		`from 'Orders' limit $p0, $p1`,
		`from 'Orders' limit 10`,
		`from 'Orders' limit 10 offset 5`,
		`from 'Orders' offset 5`,
		`from 'Orders' where 'order' = $p0`,
		`from 'Orders' where 'First Name' = $p0`,
		`from 'Orders' where startsWith(id(), $p0)`,
		`from 'Orders' where true and not Name = $p0`,
		`from 'Orders' where exists(Name) and not Name in ($p0)`,
		`from 'Orders' where true`,
		`from 'Orders' include timings()`,
		`from 'Orders' include Company, timings()`,
		`from 'Orders' group by Company select key(), sum(Total) as Sum`,
		`from 'Orders' group by Company, Employee select key(), count() as count, sum(Total) as Sum`,
		`from 'Orders' group by Company where count > 1 order by count as long desc select Company, count()`,
		`from Orders update { this.Total = this.Total * 2 }`,
		`from Orders as o where o.Total < $max update { o.Flag = true; }`,
		`from Orders where Name = 'x' limit 5 update {}`,
		`from index 'Orders/ByTotal' where Total > $p0 update { if (this.x) { this.y = "}"; } }`,
		// Counters in projections and compare-exchange includes.
		`from 'Users' as u select counter(u, 'Likes')`,
		`from 'Users' as u select counter(u, Likes)`,
		`from 'Users' select counter('Likes')`,
		`from 'Users' as u select counter(u, 'Likes') as likes, counterRaw(u, 'Likes') as raw, u.Name`,
		`from 'Users' as u select counter(u, $p0) as likes`,
		`from 'Users' include cmpxchg('Supervisor')`,
		`from 'Users' as u where u.Name = $p0 include cmpxchg(u.Manager.Key), cmpxchg('Address.Key'), counters(), Company`,
	} {
		if _, err := Parse(q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}

func TestSyntaxErrorsHavePositions(t *testing.T) {
	for _, c := range []struct {
		q   string
		pos int
		msg string
	}{
		{`select x`, 0, "starts with 'from'"},
		{`from`, 4, "collection name"},
		{`from Orders where`, 17, "expected a field"},
		{`from Orders where Name = `, 25, "expected a value"},
		{`from Orders where Name ~ 1`, 23, "unexpected character"},
		{`from Orders where Name = 'abc`, 25, "unterminated string"},
		{`from Orders where (Name = 1`, 27, `expected ")"`},
		{`from Orders where Total between 1 or 2`, 34, "'and' in between"},
		{`from Orders where Name = $`, 25, "parameter name"},
		{`from Orders order by x as nonsense`, 26, "long, double"},
		{`from Orders limit`, 17, "expected a value"},
		{`from Orders where a = 1 extra`, 24, "unexpected"},
		{`from Orders update`, 12, "expected '{' after 'update'"},
		{`from Orders update { this.x = 1`, 19, "never closed"},
		{`from Orders update { this.x = "1 }`, 30, "unterminated string"},
		{`from Orders update { /* }`, 21, "unterminated comment"},
		{`from Orders update {} where a = 1`, 22, "unexpected"},
		{`from Orders include nonsense()`, 20, "include nonsense() is not supported"},
		{`from Orders include counters(x)`, 29, "takes counter names as strings"},
		{`from Orders where search(Name, $p, xor)`, 35, "and or or"},
		{`from Orders limit 1 limit 2`, 20, "limit given twice"},
		{`from Orders offset 1 offset 2`, 21, "offset given twice"},
		{`from Orders select sum(id())`, 19, "sum() takes a field"},
		{`from Users as u select counter(x, 'Likes')`, 31, "must be the query's alias"},
		{`from Users select counter(u, 'Likes')`, 26, "must be the query's alias"},
		{`from Users as u select counter(u, 'a', 'b')`, 39, "at most two arguments"},
		{`from Users select counter(1)`, 26, "takes the query's alias and a counter name"},
		{`from Users select counter('')`, 26, "not an empty string"},
		{`from Users select counter(u.Likes)`, 27, `expected ")"`},
		{`from Users select counter(where)`, 26, "keyword"},
		{`from Users group by Name select counter('Likes')`, 32, "not documents"},
		{`from Users include cmpxchg(id())`, 27, "not id()"},
		{`from Users include cmpxchg('a..b')`, 27, "empty part"},
		{`from Users include cmpxchg('')`, 27, "not an empty string"},
		{`from Users include cmpxchg(Manager`, 34, `expected ")"`},
	} {
		_, err := Parse(c.q)
		var se *SyntaxError
		if !errors.As(err, &se) || se.Pos != c.pos || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("%s: %v (want position %d, %q)", c.q, err, c.pos, c.msg)
		}
	}
}

func doc(t *testing.T, id, body string) Doc {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	return Doc{ID: id, Body: m}
}

func TestMatch(t *testing.T) {
	d := doc(t, "orders/1-A", `{"Name":"Acme Pipe","Total":42,"Status":"Open","Tags":["red","blue"],
		"Address":{"City":"London"},"Lines":[{"Price":5},{"Price":50}],"Empty":null}`)
	params := map[string]any{"p0": "acme pipe", "n": 40, "names": []any{"x", "ACME PIPE"}, "tags": []any{"red", "blue"}, "some": []any{"red", "green"}}
	for _, c := range []struct {
		q    string
		want bool
	}{
		{`from Orders`, true},
		{`from Orders where Name = $p0`, true},         // case-insensitive
		{`from Orders where exact(Name = $p0)`, false}, // but not inside exact()
		{`from Orders where Name = 'Acme Pipe'`, true},
		{`from Orders where Name != 'acme pipe'`, false},
		{`from Orders where Total > $n`, true},
		{`from Orders where Total < $n`, false},
		{`from Orders where Total between 42 and 50`, true},
		{`from Orders where Total between 43 and 50`, false},
		{`from Orders where Name in ($names)`, true},
		{`from Orders where Tags all in ($tags)`, true},
		{`from Orders where Tags all in ($some)`, false},
		{`from Orders where Tags in ('green', 'RED')`, true},
		{`from Orders where Lines[].Price > 40`, true},
		{`from Orders where Lines[].Price > 60`, false},
		{`from Orders where Address.City = 'london'`, true},
		{`from Orders as o where o.Address.City = 'Paris'`, false},
		{`from Orders where startsWith(Name, 'ACME')`, true},
		{`from Orders where endsWith(Name, 'pipe')`, true},
		{`from Orders where search(Name, 'tube pipe')`, true},
		{`from Orders where search(Name, 'tube')`, false},
		{`from Orders where search(Name, 'tube pipe', and)`, false},
		{`from Orders where search(Name, 'pipe acme', and)`, true},
		{`from Orders where search(Name, 'ac* tube', or)`, true},
		{`from Orders where search(Name, '*me', and)`, true},
		{`from Orders where true and not Name = 'x'`, true},
		{`from Orders where fuzzy(Name = 'acme pipe', 0.5) and boost(Total = 42, 3)`, true},
		{`from Orders where regex(Name, '^Acme')`, true},
		{`from Orders where exists(Address.City)`, true},
		{`from Orders where exists(Missing)`, false},
		{`from Orders where not exists(Missing) and id() = 'ORDERS/1-a'`, true},
		{`from Orders where Missing = null`, true},
		{`from Orders where Empty = null`, true},
		{`from Orders where Status = 'Closed' or (Total >= 42 and Status = 'open')`, true},
		{`from Orders where not (Status = 'open')`, false},
		{`from Orders where Total = 'forty-two'`, false}, // different types never match
	} {
		q, err := Parse(c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		got, err := q.Match(d, params)
		if err != nil || got != c.want {
			t.Errorf("%s: %v %v, want %v", c.q, got, err, c.want)
		}
	}
	q, _ := Parse(`from Orders where Name = $missing`)
	if _, err := q.Match(d, params); err == nil || !strings.Contains(err.Error(), "$missing") {
		t.Fatalf("a missing parameter: %v", err)
	}
}

// The clauses of the query grammar land in the Query.
func TestQueryClauses(t *testing.T) {
	q, err := Parse(`from 'Orders' group by Company, 'Em ployee' where count > 1 order by score(), count as long desc, random() select key(), count() as count, sum(Lines[].Price) as Sum include Company, timings() limit 10 offset $s update { this.a = '{'; }`)
	if err != nil {
		t.Fatal(err)
	}
	if len(q.GroupBy) != 2 || q.GroupBy[1].String() != "Em ployee" || !q.OrderBy[0].Score || q.OrderBy[1].As != "long" || !q.OrderBy[1].Desc || !q.OrderBy[2].Random ||
		q.Select[0].Func != "key" || q.Select[1].Func != "count" || q.Select[1].As != "count" || q.Select[2].Func != "sum" || q.Select[2].Field.String() != "Lines[].Price" ||
		!q.Timings || len(q.Include) != 1 || q.Take.Literal != 10.0 || q.Skip.Param != "s" || q.Update == nil || *q.Update != " this.a = '{'; " {
		t.Fatalf("%+v", q)
	}
	q, err = Parse(`from @all_docs where search(Name, $p, and) and proximity(search(Tags, $q), 2) and fuzzy(Name = $n, 0.5) and true`)
	if err != nil {
		t.Fatal(err)
	}
	and := q.Where.(And)
	if q.Collection != "@all_docs" || and.R != (True{}) {
		t.Fatalf("%+v", q.Where)
	}
	if c := and.L.(And).L.(And).L.(Call); c.Operator != "and" || c.Name != "search" {
		t.Fatalf("%+v", c)
	}
	if c := and.L.(And).L.(And).R.(Call); c.Operator != "" || c.Field.String() != "Tags" {
		t.Fatalf("proximity is its search: %+v", c)
	}
	if c := and.L.(And).R.(Compare); c.Field.String() != "Name" || c.Value.Param != "n" {
		t.Fatalf("fuzzy is its comparison: %+v", c)
	}
	if q, _ := Parse(`from Orders limit $p0, $p1`); q.Skip.Param != "p0" || q.Take.Param != "p1" {
		t.Fatalf("%+v", q)
	}
	if q, _ := Parse(`from Orders limit 3`); q.Skip != nil || q.Take.Literal != 3.0 {
		t.Fatalf("%+v", q)
	}
	if q, _ := Parse(`from Orders update {}`); q.Update == nil || *q.Update != "" {
		t.Fatalf("%+v", q)
	}
}

// counter() and counterRaw() items and cmpxchg() includes land in the
// Query: the counter name (a literal or a $parameter), the alias dropped.
func TestCounterProjectionsAndCmpXchgIncludes(t *testing.T) {
	q, err := Parse(`from Users as u select u.Name, counter(u, 'Likes'), counterRaw(u, "Likes") as raw, COUNTER($n) as c, counter(Views) include cmpxchg('Manager'), cmpxchg(u.Address.Key), cmpxchg('u.Keys[]'), counters('Likes')`)
	if err != nil {
		t.Fatal(err)
	}
	s := q.Select
	if len(s) != 5 || s[0].Func != "" || s[0].Field.String() != "Name" ||
		s[1].Func != "counter" || s[1].Counter.Literal != "Likes" || s[1].As != "" ||
		s[2].Func != "counterRaw" || s[2].Counter.Literal != "Likes" || s[2].As != "raw" ||
		s[3].Func != "counter" || s[3].Counter.Param != "n" || s[3].As != "c" ||
		s[4].Func != "counter" || s[4].Counter.Literal != "Views" {
		t.Fatalf("%+v", s)
	}
	if len(q.CmpXchg) != 3 || q.CmpXchg[0].String() != "Manager" || q.CmpXchg[1].String() != "Address.Key" || q.CmpXchg[2].String() != "Keys[]" ||
		len(q.Include) != 0 || q.Counters == nil || q.Counters.Names[0] != "Likes" {
		t.Fatalf("%+v %+v", q.CmpXchg, q)
	}
	// Project (subscriptions) writes the fields and skips the counter()
	// items, which only the query engine answers.
	if p := q.Project(Doc{ID: "u/1", Body: map[string]any{"Name": "Ann"}}); len(p) != 1 || p["Name"] != "Ann" {
		t.Fatalf("%v", p)
	}
}

func TestClauses(t *testing.T) {
	q, err := Parse(`from 'Orders' as o where o.Total > 1 order by Name, Total as double desc select distinct o.Name as n include Company limit $a, $b`)
	if err != nil {
		t.Fatal(err)
	}
	if q.Collection != "Orders" || q.Alias != "o" || len(q.OrderBy) != 2 || !q.OrderBy[1].Desc || q.OrderBy[1].As != "double" ||
		!q.Distinct || q.Select[0].As != "n" || q.Select[0].Field.String() != "Name" || q.Include[0].String() != "Company" ||
		q.Skip.Param != "a" || q.Take.Param != "b" {
		t.Fatalf("%+v", q)
	}
	if q, _ := Parse(`from index 'Orders/ByTotal'`); q.Index != "Orders/ByTotal" || q.Collection != "" {
		t.Fatalf("index %+v", q)
	}
}

// nested wraps cond in n levels of open … close.
func nested(n int, open, cond, close string) string {
	return "from Orders where " + strings.Repeat(open, n) + cond + strings.Repeat(close, n)
}

// Nesting and length are bounded: past the limits Parse answers a
// positioned SyntaxError naming the limit's flag, at once and without
// recursing; at the limits it parses.
func TestLimits(t *testing.T) {
	prefix := len("from Orders where ")
	for _, c := range []struct {
		name, q string
		pos     int
		msg     string
	}{
		{"a million (", "from Orders where " + strings.Repeat("(", 1_000_000), DefaultMaxLength, "--max-query-length"},
		{"400k balanced", nested(400_000, "(", "a = 1", ")"), DefaultMaxLength, "--max-query-length"},
		{"parentheses", nested(5000, "(", "a = 1", ")"), prefix + DefaultMaxDepth, "--max-query-depth"},
		{"not", nested(5000, "not ", "a = 1", ""), prefix + 4*DefaultMaxDepth, "--max-query-depth"},
		{"exact", nested(5000, "exact(", "a = 1", ")"), prefix + 6*DefaultMaxDepth, "--max-query-depth"},
		{"boost", nested(5000, "boost(", "a = 1", ", 2)"), prefix + 6*DefaultMaxDepth, "--max-query-depth"},
		{"fuzzy", nested(5000, "fuzzy(", "a = 1", ", 0.5)"), prefix + 6*DefaultMaxDepth, "--max-query-depth"},
		{"proximity", nested(3000, "proximity(", "search(a, $p)", ", 2)"), prefix + 10*DefaultMaxDepth, "--max-query-depth"},
		{"mixed", nested(3000, "not (", "a = 1", ")"), prefix + 5*(DefaultMaxDepth/2), "--max-query-depth"},
	} {
		_, err := Parse(c.q)
		var se *SyntaxError
		if !errors.As(err, &se) || se.Pos != c.pos || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("%s: %v (want position %d, %q)", c.name, err, c.pos, c.msg)
		}
	}
	for _, q := range []string{
		nested(DefaultMaxDepth, "(", "a = 1", ")"),
		nested(DefaultMaxDepth, "not ", "a = 1", ""),
		nested(DefaultMaxDepth/2, "not (", "a = 1", ")"),
		// Depth is nesting, not length: long flat chains are fine.
		"from Orders where " + strings.Repeat("(a = 1) and ", 1000) + "b = 2",
		"from Orders where a = 1" + strings.Repeat(" ", DefaultMaxLength-len("from Orders where a = 1")),
	} {
		if _, err := Parse(q); err != nil {
			t.Errorf("%.60s…: %v", q, err)
		}
	}
}

// The counter() items of a select and the cmpxchg() items of an include
// are bounded.
func TestCounterAndCmpXchgBounds(t *testing.T) {
	ok := "from x select " + strings.Repeat("counter('a'), ", maxCounterProjections-1) + "counter('a')"
	if _, err := Parse(ok); err != nil {
		t.Fatal(err)
	}
	var se *SyntaxError
	if _, err := Parse(ok + ", counterRaw('b')"); !errors.As(err, &se) || !strings.Contains(se.Msg, "more than 1024 counter()") {
		t.Fatalf("%v", err)
	}
	ok = "from x include " + strings.Repeat("cmpxchg(a), ", maxIncludedCmpXchg-1) + "cmpxchg(a)"
	if _, err := Parse(ok); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(ok + ", cmpxchg('b')"); !errors.As(err, &se) || !strings.Contains(se.Msg, "more than 1024 cmpxchg()") {
		t.Fatalf("%v", err)
	}
}

func TestSetLimits(t *testing.T) {
	defer func() { _ = SetLimits(Limits{}) }()
	if err := SetLimits(Limits{MaxLength: 100, MaxDepth: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(nested(2, "(", "a = 1", ")")); err != nil {
		t.Fatal(err)
	}
	var se *SyntaxError
	if _, err := Parse(nested(3, "(", "a = 1", ")")); !errors.As(err, &se) || se.Pos != len("from Orders where ((") {
		t.Fatalf("depth 3 with a limit of 2: %v", err)
	}
	if _, err := Parse("from Orders where " + strings.Repeat("a = 1 and ", 10) + "b = 1"); !errors.As(err, &se) || se.Pos != 100 {
		t.Fatalf("length over 100: %v", err)
	}
	if err := SetLimits(Limits{MaxLength: -1}); err == nil {
		t.Fatal("a negative limit was accepted")
	}
	if err := SetLimits(Limits{}); err != nil || CurrentLimits() != DefaultLimits() {
		t.Fatalf("zero limits are the defaults: %v %+v", err, CurrentLimits())
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`from 'Orders' where (a = $p0 or b = $p1) and c = $p2`, `from Orders as o where o.Lines[].Price between 1 and 2 order by x desc select key(), count() as c limit 1, 2`,
		`from index 'x' where exact(Name = "a\"b") include a, b`, `from x where boost(a in ($p), 2) and not exists(y)`,
		// Deep and huge inputs.
		"from x where " + strings.Repeat("(", 100_000), nested(100_000, "(", "a = 1", ")"), nested(5000, "(", "a = 1", ")"),
		nested(DefaultMaxDepth, "(", "a = 1", ")"), nested(10_000, "not ", "a = 1", ""), nested(5000, "exact(", "a = 1", ")"),
		nested(3000, "boost(", "a = 1", ", 2)"), "from x where a in (" + strings.Repeat("1,", 50_000) + "1)",
		`from 'Orders' where Name = $p0 order by Total as long limit $p1, $p2`, `from @all_docs where search(Name, $p0, and) order by score()`,
		`from 'Orders' where proximity(search(Name, $p0), 2) or fuzzy(Name = $p1, 0.5)`, `from 'Orders' where true and not exists(x)`,
		`from 'Orders' group by Company, Employee select key(), count() as count, sum(Total) as Sum include timings()`,
		`from 'Orders' select distinct Name, @metadata.@nested-object-types as __PROJECTED_NESTED_OBJECT_TYPES__ limit 10 offset 5`,
		`from Orders as o where o.Total < $max update { o.Flag = "}"; /* } */ // }` + "\n}",
		nested(5000, "fuzzy(", "a = 1", ", 0.5)"), nested(5000, "proximity(", "search(a, $p)", ", 2)"),
		"from x update {" + strings.Repeat("{", 100_000) + strings.Repeat("}", 100_000) + "}",
		"from x update {" + strings.Repeat("'", 1001) + "}", "from x select " + strings.Repeat("sum(a), ", 10_000) + "count()",
		"from x order by " + strings.Repeat("score(), ", 10_000) + "random()",
		"from x where a = '" + strings.Repeat("x", 200_000) + "'",
		`from Users as u select u.Name, counter(u, 'Likes') as likes, counterRaw(u, $p0), counter(Views) include cmpxchg('Manager.Key'), cmpxchg(u.Keys[]), counters()`,
		`from Users select counter('Likes') include cmpxchg('a..b')`, `from Users as u select counter(u, 'a', 'b')`,
		"from x select " + strings.Repeat("counter('a'), ", 2000) + "counterRaw(b)",
		"from x include " + strings.Repeat("cmpxchg(a), ", 2000) + "cmpxchg('b')"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Parse(s)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Pos < 0 || se.Pos > len(s) {
				t.Fatalf("%q: error %v is not a positioned syntax error", s, err)
			}
			return
		}
		_, _ = q.Match(Doc{ID: "x/1", Body: map[string]any{"a": 1.0, "b": []any{"x", map[string]any{"c": nil}}}}, map[string]any{"p": []any{1.0}, "p0": "x"})
	})
}
