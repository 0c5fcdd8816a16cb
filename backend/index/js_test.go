package index

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
)

func petsIndex() Definition {
	return Definition{Name: "Pets/ByOwner", Type: TypeJavaScriptMap,
		Maps:         []string{"map('Pets', p => ({ Name: p.Name, OwnerName: (load(p.OwnerId, 'People') || {}).Name, Owner: id(load(p.OwnerId, 'People') || {'@metadata':{}}) }))"},
		FieldOptions: map[string]FieldOptions{"OwnerName": {Storage: "Yes"}}}
}

func TestLoadReferencesRemapExactlyTheReferencingDocuments(t *testing.T) {
	db, dir := newDB(t)
	put(t, db, [3]string{"people/1", "People", `{"Name":"Oren"}`}, [3]string{"people/2", "People", `{"Name":"Rachel"}`},
		[3]string{"people/3", "People", `{"Name":"Nobody"}`})
	for i := 0; i < 10; i++ {
		owner := "people/1"
		if i >= 3 {
			owner = "people/2"
		}
		put(t, db, [3]string{fmt.Sprintf("pets/%d", i), "Pets", fmt.Sprintf(`{"Name":"pet%d","OwnerId":%q}`, i, owner)})
	}
	ix := openIndex(t, db, dir, petsIndex(), Options{})
	wait(t, ix)
	eq(t, "Oren's pets", ids(t, ix, "OwnerName = 'oren'", nil), []string{"pets/0", "pets/1", "pets/2"})
	res := search(t, ix, "from index 'x' where Name = 'pet0'", nil)
	if len(res.Hits) != 1 || mustJSON(t, res.Hits[0].Stored)["OwnerName"] != "Oren" {
		t.Fatalf("stored field: %+v", res.Hits)
	}
	s := ix.Stats()
	if s.ReferencesHeld != 10 || len(s.References) != 1 || s.References[0].Referenced != "People" || s.References[0].Source != "Pets" {
		t.Fatalf("references: %d %+v", s.ReferencesHeld, s.References)
	}
	before := s.MapReferenceAttempts

	// Renaming an owner re-maps exactly that owner's pets.
	put(t, db, [3]string{"people/1", "People", `{"Name":"Ayende"}`})
	wait(t, ix)
	eq(t, "renamed", ids(t, ix, "OwnerName = 'ayende'", nil), []string{"pets/0", "pets/1", "pets/2"})
	eq(t, "old name gone", ids(t, ix, "OwnerName = 'oren'", nil), nil)
	s = ix.Stats()
	if got := s.MapReferenceAttempts - before; got != 3 {
		t.Fatalf("renaming one owner re-mapped %d pets, want 3", got)
	}
	if s.References[0].Remapped != 3 || s.MapAttempts != 10 {
		t.Fatalf("cost: remapped %d, map attempts %d", s.References[0].Remapped, s.MapAttempts)
	}
	// A person nobody references re-maps nothing.
	put(t, db, [3]string{"people/3", "People", `{"Name":"Still nobody"}`})
	wait(t, ix)
	if got := ix.Stats().MapReferenceAttempts - before; got != 3 {
		t.Fatalf("an unreferenced person re-mapped %d pets", got-3)
	}
	// A deleted owner re-maps its pets: the name is gone.
	del(t, db, "people/2")
	wait(t, ix)
	if got := ix.Stats().MapReferenceAttempts - before; got != 10 {
		t.Fatalf("deleting an owner of 7 pets re-mapped %d in all, want 10", got)
	}
	eq(t, "deleted owner", ids(t, ix, "OwnerName = 'rachel'", nil), nil)
	eq(t, "pets without owner", ids(t, ix, "OwnerName = null", nil), []string{"pets/3", "pets/4", "pets/5", "pets/6", "pets/7", "pets/8", "pets/9"})
	// The owner comes back: the reference (to a missing document) is still
	// held, so the pets see it.
	put(t, db, [3]string{"people/2", "People", `{"Name":"Back"}`})
	wait(t, ix)
	eq(t, "owner back", ids(t, ix, "OwnerName = 'back'", nil), []string{"pets/3", "pets/4", "pets/5", "pets/6", "pets/7", "pets/8", "pets/9"})
}

func TestStalenessReasonsWhileReferencesArePending(t *testing.T) {
	db, dir := newDB(t)
	put(t, db, [3]string{"people/1", "People", `{"Name":"Oren"}`}, [3]string{"pets/1", "Pets", `{"Name":"Arava","OwnerId":"people/1"}`})
	ix := openIndex(t, db, dir, petsIndex(), Options{})
	wait(t, ix)
	etag := ix.ResultEtag()
	// Stop the writer so the reference pass cannot run.
	ix.stopWorker()
	put(t, db, [3]string{"people/1", "People", `{"Name":"Ayende"}`})
	stale, reasons := ix.Stale(context.Background())
	if !stale || len(reasons) != 1 || reasons[0] != "There are still some document references to process from collection 'People'" {
		t.Fatalf("stale %v, reasons %q", stale, reasons)
	}
	put(t, db, [3]string{"pets/2", "Pets", `{"Name":"Oscar","OwnerId":"people/1"}`})
	_, reasons = ix.Stale(context.Background())
	if len(reasons) != 2 || !strings.Contains(reasons[0], "documents to process from collection 'Pets'") {
		t.Fatalf("reasons %q", reasons)
	}
	// A cut-off before the changes is satisfied already.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := ix.WaitNonStale(ctx, 2); err != nil {
		t.Fatalf("cut-off before the changes: %v", err)
	}
	ix.start()
	wait(t, ix)
	if ix.ResultEtag() == etag {
		t.Fatal("ResultEtag did not change")
	}
	eq(t, "after", ids(t, ix, "OwnerName = 'ayende'", nil), []string{"pets/1", "pets/2"})
}

func TestJavaScriptMultiMapArraysAndAllDocs(t *testing.T) {
	db, dir := newDB(t)
	put(t, db, [3]string{"dogs/1", "Dogs", `{"Name":"Rex","Tags":["good","loud"]}`}, [3]string{"cats/1", "Cats", `{"Name":"Tom","Tags":["lazy"]}`},
		[3]string{"cats/2", "Cats", `{"Name":"Skip"}`}, [3]string{"orders/1", "Orders", `{"Lines":[{"P":1},{"P":2}]}`})
	ix := openIndex(t, db, dir, Definition{Name: "Animals", Type: TypeJavaScriptMap, Maps: []string{
		"map('Dogs', d => ({ Name: d.Name, Tags: d.Tags, Kind: 'dog' }))",
		"map('Cats', c => c.Name === 'Skip' ? null : { Name: c.Name, Tags: c.Tags, Kind: 'cat' }); map('Orders', o => o.Lines.map(l => ({ P: l.P })))",
	}}, Options{})
	wait(t, ix)
	eq(t, "Tags", ids(t, ix, "Tags = 'loud'", nil), []string{"dogs/1"})
	eq(t, "Kind", ids(t, ix, "Kind in ('dog','cat')", nil), []string{"cats/1", "dogs/1"})
	eq(t, "several entries", ids(t, ix, "P >= 1", nil), []string{"orders/1"})
	all := openIndex(t, db, dir, Definition{Name: "All", Type: TypeJavaScriptMap, Maps: []string{
		"map('@all_docs', d => ({ Coll: getMetadata(d)['@collection'], Id: id(d) }))"}}, Options{})
	wait(t, all)
	eq(t, "all docs", ids(t, all, "Coll = 'cats'", nil), []string{"cats/1", "cats/2"})
	del(t, db, "cats/2")
	wait(t, all)
	eq(t, "all docs delete", ids(t, all, "Coll = 'cats'", nil), []string{"cats/1"})
	if s := all.Stats(); s.EntriesCount != 3 {
		t.Fatalf("entries %d", s.EntriesCount)
	}
}

func TestJavaScriptErrorsAreRecordedAndIndexingContinues(t *testing.T) {
	db, dir := newDB(t)
	for i := 0; i < 6; i++ {
		put(t, db, [3]string{fmt.Sprintf("items/%d", i), "Items", fmt.Sprintf(`{"N":%d}`, i)})
	}
	ix := openIndex(t, db, dir, Definition{Name: "Items/Bad", Type: TypeJavaScriptMap, Maps: []string{
		"map('Items', d => { if (d.N === 2) throw new Error('boom'); if (d.N === 4) { while (true) {} } return { N: d.N }; })"}},
		Options{MapTimeout: 100 * time.Millisecond})
	wait(t, ix)
	eq(t, "the others", ids(t, ix, "N >= 0", nil), []string{"items/0", "items/1", "items/3", "items/5"})
	errs := ix.Errors()
	if len(errs) != 2 || errs[0].Document != "items/2" || !strings.Contains(errs[0].Error, "boom") || errs[1].Document != "items/4" ||
		!strings.Contains(errs[1].Error, "time limit") || errs[0].Action != "Map" {
		t.Fatalf("errors %+v", errs)
	}
	if s := ix.Stats(); s.MapErrors != 2 || s.MapSuccesses != 4 || s.State != StateNormal {
		t.Fatalf("stats %+v", s)
	}
}

func TestDefinitionsRefused(t *testing.T) {
	for _, c := range []struct {
		def    Definition
		reason string
		msg    string
	}{
		{Definition{Name: "Orders/ByCompany", Type: "Map", Maps: []string{"  from o in docs.Orders select new { o.Company }"}}, "NotSupported", "JavaScript"},
		{Definition{Name: "X", Type: TypeJavaScriptMap, Maps: []string{"docs.Orders.Select(o => o)"}}, "NotSupported", "JavaScript"},
		{Definition{Name: "X", Type: TypeJavaScriptMap, Maps: []string{"map('Orders', o => ({ A: o.A )"}}, "Compilation", "compile"},
		{Definition{Name: "X", Type: TypeJavaScriptMap, Maps: []string{"var x = 1;"}}, "Compilation", "map("},
		{Definition{Name: "X", Type: TypeJavaScriptMapReduce, Maps: []string{"map('Orders', o => o)"}, Reduce: "1 +"}, "Compilation", "compile"},
	} {
		err := Validate(&c.def)
		var de *DefinitionError
		if err == nil || !dberr.Is(err, dberr.BadRequest) || !asDefErr(err, &de) || de.Reason != c.reason || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: %v", c.def.Maps, err)
		}
	}
}

func asDefErr(err error, out **DefinitionError) bool {
	d, ok := err.(*DefinitionError)
	*out = d
	return ok
}

func TestMapReduceStaysCorrectUnderUpdatesAndDeletes(t *testing.T) {
	db, dir := newDB(t)
	put(t, db, [3]string{"orders/1", "Orders", `{"Company":"A","Total":10,"Year":2020}`}, [3]string{"orders/2", "Orders", `{"Company":"A","Total":5,"Year":2021}`},
		[3]string{"orders/3", "Orders", `{"Company":"B","Total":1,"Year":2020}`})
	js := openIndex(t, db, dir, Definition{Name: "Orders/Totals", Type: TypeJavaScriptMapReduce,
		Maps:   []string{"map('Orders', o => ({ Company: o.Company, Total: o.Total, Count: 1 }))"},
		Reduce: "groupBy(x => x.Company).aggregate(g => ({ Company: g.key, Total: g.values.reduce((a, b) => a + b.Total, 0), Count: g.values.reduce((a, b) => a + b.Count, 0) }))"}, Options{})
	comp := openIndex(t, db, dir, Definition{Name: "Orders/ByCompanyYear", Type: TypeJavaScriptMapReduce,
		Maps:   []string{"map('Orders', o => ({ Company: o.Company, Year: o.Year, Count: 1 }))"},
		Reduce: "groupBy(x => ({ Company: x.Company, Year: x.Year })).aggregate(g => ({ Company: g.key.Company, Year: g.key.Year, Count: g.values.length }))"}, Options{})
	auto := openIndex(t, db, dir, Definition{Name: "Auto/Orders/ByCountAndTotalReducedByCompany", Type: TypeAutoMapReduce, Collection: "Orders",
		GroupBy: []string{"Company"}, Fields: []AutoField{{Name: "Count", Aggregation: "Count"}, {Name: "Total", Aggregation: "Sum"}}}, Options{})
	rows := func(ix *Index, where string) string {
		t.Helper()
		res := search(t, ix, "from index 'x' where "+where+" order by Company", nil)
		var out []string
		for _, h := range res.Hits {
			m := mustJSON(t, h.Stored)
			out = append(out, fmt.Sprintf("%v:%v:%v", m["Company"], m["Count"], m["Total"]))
		}
		return strings.Join(out, " ")
	}
	check := func(want string) {
		t.Helper()
		wait(t, js)
		wait(t, auto)
		if got := rows(js, "Count > 0"); got != want {
			t.Fatalf("js reduce: %q, want %q", got, want)
		}
		if got := rows(auto, "Count > 0"); got != want {
			t.Fatalf("auto reduce: %q, want %q", got, want)
		}
	}
	check("A:2:15 B:1:1")
	put(t, db, [3]string{"orders/2", "Orders", `{"Company":"B","Total":7,"Year":2021}`})
	check("A:1:10 B:2:8")
	del(t, db, "orders/1")
	check("B:2:8")
	eq(t, "group by key", nil, nil)
	if got := rows(js, "Company = 'b' and Total > 7"); got != "B:2:8" {
		t.Fatalf("where over reduced rows: %q", got)
	}
	wait(t, comp)
	res := search(t, comp, "from index 'x' where Company = 'B' order by Year", nil)
	if len(res.Hits) != 2 || mustJSON(t, res.Hits[0].Stored)["Year"] != 2020.0 || mustJSON(t, res.Hits[1].Stored)["Count"] != 1.0 {
		t.Fatalf("composite keys: %+v", res.Hits)
	}
}

func TestManager(t *testing.T) {
	db, _ := newDB(t)
	put(t, db, [3]string{"orders/1", "Orders", `{"Name":"a"}`})
	m := NewManager(Options{})
	defer m.Close()
	def := Definition{Name: "Auto/Orders/ByName", Type: TypeAutoMap, Collection: "Orders", Fields: []AutoField{{Name: "Name"}}}
	ix, err := m.Put(db, def)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, ix)
	put(t, db, [3]string{"orders/2", "Orders", `{"Name":"a"}`})
	wait(t, ix) // woken by the manager's commit hook
	eq(t, "both", ids(t, ix, "Name = 'a'", nil), []string{"orders/1", "orders/2"})
	again, _ := m.Put(db, def)
	if again != ix {
		t.Fatal("an unchanged definition must keep the open index")
	}
	def.State = StateDisabled
	m.Put(db, def)
	if ix.State() != StateDisabled {
		t.Fatal("state not applied")
	}
	if got, ok := m.Get("SHOP", "auto/orders/byname"); !ok || got != ix || len(m.List("shop")) != 1 {
		t.Fatal("Get/List")
	}
	if _, err := m.Put(db, Definition{Name: "C", Maps: []string{"from o in docs.Orders select new { o.Name }"}}); !dberr.Is(err, dberr.BadRequest) {
		t.Fatalf("C# through the manager: %v", err)
	}
	if err := m.Delete("shop", def.Name); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Get("shop", def.Name); ok {
		t.Fatal("deleted index still listed")
	}
	if err := m.Delete("shop", def.Name); !dberr.Is(err, dberr.NotFound) {
		t.Fatalf("second delete: %v", err)
	}
}
