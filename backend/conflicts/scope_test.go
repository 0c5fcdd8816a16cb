package conflicts_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/backend/conflicts"
	"github.com/rookerydb/rookery/backend/storage"
)

func TestListIsInNaturalOrderAndPages(t *testing.T) {
	a, b := open(t, "A"), open(t, "B")
	conflicted(t, a, b, "carts", "Carts", 25) // carts/0 … carts/24
	ctx := context.Background()
	list, err := conflicts.List(ctx, a, storage.ConflictFilter{})
	if err != nil || len(list) != 25 {
		t.Fatalf("%d %v", len(list), err)
	}
	for i, c := range list {
		if want := fmt.Sprintf("carts/%d", i); c.ID != want {
			t.Fatalf("position %d is %s, want %s (natural order)", i, c.ID, want)
		}
	}
	page, more := conflicts.PageAfter(list, "", 10)
	if len(page) != 10 || !more || page[9].ID != "carts/9" {
		t.Fatalf("first page %d %v", len(page), more)
	}
	page, more = conflicts.PageAfter(list, storage.LowerID(page[9].ID), 10)
	if len(page) != 10 || !more || page[0].ID != "carts/10" || page[9].ID != "carts/19" {
		t.Fatalf("second page %v %v", page, more)
	}
	page, more = conflicts.PageAfter(list, "carts/19", 10)
	if len(page) != 5 || more || page[4].ID != "carts/24" {
		t.Fatalf("last page %v %v", page, more)
	}
	// A filter keeps the natural order.
	list, _ = conflicts.List(ctx, a, storage.ConflictFilter{Prefix: "carts/1"})
	var got []string
	for _, c := range list {
		got = append(got, c.ID)
	}
	if strings.Join(got, ",") != "carts/1,carts/10,carts/11,carts/12,carts/13,carts/14,carts/15,carts/16,carts/17,carts/18,carts/19" {
		t.Fatalf("filtered %v", got)
	}
}

func TestSummaryPerCollectionUnderTheConfiguredStrategies(t *testing.T) {
	a, b := open(t, "A"), open(t, "B")
	conflicted(t, a, b, "carts", "Carts", 12)
	conflicted(t, a, b, "users", "Users", 5)
	conflicted(t, a, b, "notes", "Notes", 4)
	conflicted(t, a, b, "bins", "Bins", 3)
	conflicted(t, a, b, "bad", "Bad", 2)
	engine := conflicts.NewEngine(nil)
	cfg := conflicts.Config{Default: "node:B", Collections: map[string]conflicts.CollectionConfig{
		"Users": {Strategy: "manual"},
		"Notes": {Strategy: "script", Script: `var d = docs[0]; d.merged = true; return d;`},
		"Bins":  {Strategy: "script", Script: `return resolveToTombstone;`},
		"Bad":   {Strategy: "script", Script: `throw new Error("nope");`},
	}}
	st := settings{"c/conflicts": cfgJSON(t, cfg)}
	m := conflicts.NewManager(engine, &conflicts.Auto{Engine: engine, Settings: st, NodeTag: "A"})
	m.Chunk = 5
	sum, err := m.Summary(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Total != 26 || len(sum.Collections) != 5 {
		t.Fatalf("summary %+v", sum)
	}
	byName := map[string]conflicts.CollectionSummary{}
	var order []string
	for _, c := range sum.Collections {
		byName[c.Collection] = c
		order = append(order, c.Collection)
	}
	if strings.Join(order, ",") != "Bad,Bins,Carts,Notes,Users" {
		t.Fatalf("order %v", order)
	}
	for name, want := range map[string]conflicts.CollectionSummary{
		"Carts": {Collection: "Carts", Count: 12, Strategy: "node:B", ToVersion: 12},
		"Users": {Collection: "Users", Count: 5, Strategy: "manual", Declined: 5},
		"Notes": {Collection: "Notes", Count: 4, Strategy: "script", Merged: 4},
		"Bins":  {Collection: "Bins", Count: 3, Strategy: "script", ToDeletion: 3},
	} {
		if got := byName[name]; got != want {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	if bad := byName["Bad"]; bad.Count != 2 || bad.Errors != 2 || !strings.Contains(bad.LastError, "nope") {
		t.Errorf("Bad: %+v", bad)
	}
	if conflicts.VersionKind("node:B") != "node B's version" || conflicts.VersionKind("latest") != "the newest version" {
		t.Error("version kinds")
	}
	// Nothing was written.
	if n, _ := a.ConflictCount(context.Background()); n != 26 {
		t.Fatalf("%d conflicts after the summary", n)
	}
}

// A preview covers the whole scope (here 300 ids, far over a page or a
// chunk), and applying it resolves exactly what it showed, in one
// operation with progress.
func TestPreviewOperationCoversTheWholeScopeAndApplies(t *testing.T) {
	a, b := open(t, "A"), open(t, "B")
	conflicted(t, a, b, "carts", "Carts", 300)
	conflicted(t, a, b, "users", "Users", 3)
	m := conflicts.NewManager(conflicts.NewEngine(nil), nil)
	m.Chunk = 64
	ctx := context.Background()
	pv, err := m.StartPreview(a, conflicts.Spec{Strategy: "node:B", Scope: conflicts.Scope{Collection: "carts"}, By: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	if err := pv.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	p := pv.Progress()
	if p.Kind != conflicts.KindPreview || p.State != conflicts.Done || p.Total != 300 || p.Done != 300 || p.Resolved != 300 {
		t.Fatalf("preview %+v", p)
	}
	items := pv.Items()
	if len(items) != 300 {
		t.Fatalf("%d items", len(items))
	}
	for i, it := range items {
		if want := fmt.Sprintf("carts/%d", i); it.ID != want {
			t.Fatalf("item %d is %s, want %s", i, it.ID, want)
		}
		if it.Outcome() != conflicts.OutcomeVersion || it.Versions[it.Winner].Body != nil || it.Result.Body != nil {
			t.Fatalf("item %+v: a preview keeps no bodies", it)
		}
	}
	if n, _ := a.ConflictCount(ctx); n != 303 {
		t.Fatalf("the preview wrote: %d conflicts left", n)
	}
	// One previewed id changes before the apply: it is skipped.
	put(t, b, "carts/7", `{"n":-1,"from":"B2","@metadata":{"@collection":"Carts"}}`)
	exchange(t, b, a)
	op, err := m.ApplyPreview(a, pv, "tester")
	if err != nil {
		t.Fatal(err)
	}
	_ = op.Wait(ctx)
	p = op.Progress()
	if p.Kind != conflicts.KindResolve || p.State != conflicts.Done || p.Total != 300 || p.Done != 300 || p.Resolved != 299 || p.Skipped != 1 {
		t.Fatalf("apply %+v", p)
	}
	if n, _ := a.ConflictCount(ctx); n != 4 { // carts/7 and the 3 users
		t.Fatalf("%d conflicts left", n)
	}
	// A preview is applied by a resolution only: applying an operation that
	// is not a preview is refused.
	if _, err := m.ApplyPreview(a, op, "tester"); err == nil {
		t.Fatal("applied a resolution as a preview")
	}
}

func TestOldPreviewsExpire(t *testing.T) {
	a, b := open(t, "A"), open(t, "B")
	conflicted(t, a, b, "carts", "Carts", 3)
	m := conflicts.NewManager(conflicts.NewEngine(nil), nil)
	m.KeepPreviews = 2
	ctx := context.Background()
	var ops []*conflicts.Operation
	for range 4 {
		op, err := m.StartPreview(a, conflicts.Spec{Strategy: "latest"})
		if err != nil {
			t.Fatal(err)
		}
		_ = op.Wait(ctx)
		ops = append(ops, op)
	}
	if _, err := m.StartPreview(a, conflicts.Spec{Strategy: "latest"}); err != nil { // trims
		t.Fatal(err)
	}
	if !ops[0].Progress().Expired || ops[0].Items() != nil {
		t.Fatal("the oldest preview kept its items")
	}
	if _, err := m.ApplyPreview(a, ops[0], "x"); err == nil || !strings.Contains(err.Error(), "preview again") {
		t.Fatalf("applying an expired preview: %v", err)
	}
	if ops[3].Progress().Expired || len(ops[3].Items()) != 3 {
		t.Fatal("a recent preview lost its items")
	}
}
