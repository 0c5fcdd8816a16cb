package cluster

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func oneNode(t *testing.T) *Cluster {
	t.Helper()
	cl, err := Open(Config{NodeTag: "A", RaftAddr: "127.0.0.1:0", URL: "http://a.test", Dir: t.TempDir(), Bootstrap: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Shutdown() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateDatabase(ctx, Database{Name: "shop", Members: []string{"A"}}); err != nil {
		t.Fatal(err)
	}
	return cl
}

// The index commands: a put records a definition with a version that moves
// only when the definition changes; IfAbsent keeps the first of two auto
// indexes; LockedIgnore keeps the old definition and LockedError refuses
// the new one; set changes state/lock/priority; supersede marks the
// narrower index; delete reports unknown names; deleting the database
// drops its indexes and log; bad commands are refused before the log.
func TestIndexCommands(t *testing.T) {
	cl := oneNode(t)
	ctx := context.Background()
	def := func(s string) json.RawMessage { return json.RawMessage(`{"Maps":["` + s + `"]}`) }
	r, err := cl.PutIndexes(ctx, "shop", IndexPut{Records: []IndexRecord{{Name: "Pets/ByName", Definition: def("a")}}})
	if err != nil || r.Value == 0 {
		t.Fatalf("put: %+v %v", r, err)
	}
	rec, ok := cl.Index("shop", "pets/byname")
	if !ok || rec.Version != uint64(r.Value) || rec.Database != "shop" {
		t.Fatalf("record %+v %v", rec, ok)
	}
	// The same definition again: nothing changes.
	if _, err := cl.PutIndexes(ctx, "shop", IndexPut{Records: []IndexRecord{{Name: "Pets/ByName", Definition: def("a")}}}); err != nil {
		t.Fatal(err)
	}
	if again, _ := cl.Index("shop", "Pets/ByName"); again.Version != rec.Version {
		t.Fatalf("an unchanged definition moved the version: %d -> %d", rec.Version, again.Version)
	}
	// IfAbsent keeps the first.
	if _, err := cl.PutIndexes(ctx, "shop", IndexPut{IfAbsent: true, Records: []IndexRecord{{Name: "Pets/ByName", Definition: def("b")}}}); err != nil {
		t.Fatal(err)
	}
	if again, _ := cl.Index("shop", "Pets/ByName"); string(again.Definition) != string(def("a")) {
		t.Fatalf("IfAbsent replaced the definition: %s", again.Definition)
	}
	// LockedIgnore keeps it, LockedError refuses.
	if _, err := cl.SetIndexes(ctx, "shop", []string{"Pets/ByName"}, IndexSet{Field: "LockMode", Value: "LockedIgnore"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.PutIndexes(ctx, "shop", IndexPut{Records: []IndexRecord{{Name: "Pets/ByName", Definition: def("c")}}}); err != nil {
		t.Fatal(err)
	}
	if again, _ := cl.Index("shop", "Pets/ByName"); string(again.Definition) != string(def("a")) || again.LockMode != "LockedIgnore" {
		t.Fatalf("LockedIgnore: %+v", again)
	}
	if _, err := cl.SetIndexes(ctx, "shop", []string{"Pets/ByName"}, IndexSet{Field: "LockMode", Value: "LockedError"}); err != nil {
		t.Fatal(err)
	}
	r, err = cl.PutIndexes(ctx, "shop", IndexPut{Records: []IndexRecord{{Name: "Pets/ByName", Definition: def("c")}}})
	if err == nil || r.Kind != "conflict" || !strings.Contains(r.Err, "LockedError") {
		t.Fatalf("LockedError: %+v %v", r, err)
	}
	// A new definition keeps the lock mode and priority set on the index.
	if _, err := cl.SetIndexes(ctx, "shop", []string{"Pets/ByName"}, IndexSet{Field: "LockMode", Value: "Unlock"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.SetIndexes(ctx, "shop", []string{"Pets/ByName"}, IndexSet{Field: "Priority", Value: "High"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.PutIndexes(ctx, "shop", IndexPut{Records: []IndexRecord{{Name: "Pets/ByName", Definition: def("d")}}}); err != nil {
		t.Fatal(err)
	}
	if again, _ := cl.Index("shop", "Pets/ByName"); string(again.Definition) != string(def("d")) || again.Priority != "High" || again.Version == rec.Version {
		t.Fatalf("new definition: %+v", again)
	}
	// Supersede and the log.
	if _, err := cl.PutIndexes(ctx, "shop", IndexPut{Records: []IndexRecord{{Name: "Auto/Pets/ByAgeAndName", Auto: true, Definition: def("e")}}, Supersede: []string{"Pets/ByName"}},
		IndexDecision{Index: "Auto/Pets/ByAgeAndName", Action: "extend", Reason: "a query needed Age"}); err != nil {
		t.Fatal(err)
	}
	if old, _ := cl.Index("shop", "Pets/ByName"); old.Superseded != "Auto/Pets/ByAgeAndName" {
		t.Fatalf("superseded: %+v", old)
	}
	if log := cl.IndexLog("SHOP"); len(log) != 1 || log[0].Action != "extend" {
		t.Fatalf("log %+v", log)
	}
	if _, err := cl.SetIndexes(ctx, "shop", []string{"Auto/Pets/ByAgeAndName"}, IndexSet{Field: "State", Value: "Idle"}); err != nil {
		t.Fatal(err)
	}
	if got := cl.Indexes("shop"); len(got) != 2 || got[0].Name != "Auto/Pets/ByAgeAndName" || got[0].State != "Idle" {
		t.Fatalf("list %+v", got)
	}
	// Delete: unknown names are reported, known ones removed.
	r, err = cl.DeleteIndexes(ctx, "shop", []string{"Pets/ByName", "Nope"})
	if err == nil || r.Kind != "not_found" || !strings.Contains(r.Err, "Nope") {
		t.Fatalf("delete: %+v %v", r, err)
	}
	if _, ok := cl.Index("shop", "Pets/ByName"); ok {
		t.Fatal("deleted index still there")
	}
	// Bad commands never reach the log.
	for _, bad := range []IndexPut{
		{Records: []IndexRecord{{Name: "", Definition: def("x")}}},
		{Records: []IndexRecord{{Name: "a\x01b", Definition: def("x")}}},
		{Records: []IndexRecord{{Name: strings.Repeat("n", 300), Definition: def("x")}}},
		{Records: []IndexRecord{{Name: "ok", Definition: json.RawMessage(`{nope`)}}},
		{Records: []IndexRecord{{Name: "ok", Definition: def("x"), State: "Sleepy"}}},
	} {
		if _, err := cl.PutIndexes(ctx, "shop", bad); err == nil {
			t.Fatalf("accepted %+v", bad)
		}
	}
	if _, err := cl.SetIndexes(ctx, "shop", []string{"x"}, IndexSet{Field: "Color", Value: "Red"}); err == nil {
		t.Fatal("accepted a set of an unknown field")
	}
	// Deleting the database drops its indexes and log.
	if _, err := cl.DeleteDatabase(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateDatabase(ctx, Database{Name: "shop", Members: []string{"A"}}); err != nil {
		t.Fatal(err)
	}
	if got := cl.Indexes("shop"); len(got) != 0 || len(cl.IndexLog("shop")) != 0 {
		t.Fatalf("a re-created database inherited %d indexes", len(got))
	}
}
