package conflicts_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/conflicts"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

// settings is a fixed configuration source, standing in for the cluster
// state's copy of the database record.
type settings map[string]json.RawMessage

func (s settings) Setting(db, key string) json.RawMessage { return s[db+"/"+key] }

func cfgJSON(t *testing.T, c conflicts.Config) json.RawMessage {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(c)
	return b
}

func open(t *testing.T, tag string) *storage.DB {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db.sqlite"), storage.Options{Name: "c", NodeTag: tag})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func put(t *testing.T, db *storage.DB, id, body string) storage.Info {
	t.Helper()
	p, err := document.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var info storage.Info
	err = db.Write(context.Background(), func(tx *storage.Tx) error {
		var err error
		info, err = tx.Put(id, p, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func exchange(t *testing.T, from, to *storage.DB) map[storage.Outcome]int {
	t.Helper()
	out, err := storage.Exchange(context.Background(), from, to, 5)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// conflicted makes n conflicted ids on a (no resolver): written on a and b,
// then b's versions sent to a.
func conflicted(t *testing.T, a, b *storage.DB, prefix, coll string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s/%d", prefix, i)
		put(t, a, id, fmt.Sprintf(`{"n":%d,"from":"A","@metadata":{"@collection":%q}}`, i, coll))
		put(t, b, id, fmt.Sprintf(`{"n":%d,"from":"B","@metadata":{"@collection":%q}}`, i*10, coll))
	}
	exchange(t, b, a)
}

func v(cv string, lm int, body string) storage.Version {
	return storage.Version{ID: "x/1", Collection: "Xs", ChangeVector: cv, LastModified: time.Unix(int64(lm), 0).UTC(), Body: []byte(body)}
}

func TestLatestIsDeterministic(t *testing.T) {
	e := conflicts.NewEngine(nil)
	ctx := context.Background()
	vs := []storage.Version{
		v("A:5-aaaaaaaaaaaaaaaaaaaaaa", 10, `{"w":"a"}`),
		v("B:7-bbbbbbbbbbbbbbbbbbbbbb", 30, `{"w":"b"}`),
		v("C:2-cccccccccccccccccccccc", 20, `{"w":"c"}`),
	}
	for _, perm := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}, {2, 0, 1}} {
		in := []storage.Version{vs[perm[0]], vs[perm[1]], vs[perm[2]]}
		d, err := e.Decide(ctx, conflicts.Latest, "", "A", in)
		if err != nil || d.Declined || string(d.Resolution.Body) != `{"w":"b"}` {
			t.Fatalf("order %v: %+v %v", perm, d, err)
		}
	}
	// A tie on time goes to the smallest change vector string, whatever
	// the order.
	tie := []storage.Version{v("C:1-cccccccccccccccccccccc", 5, `{"w":"c"}`), v("B:1-bbbbbbbbbbbbbbbbbbbbbb", 5, `{"w":"b"}`)}
	for i := 0; i < 2; i++ {
		d, _ := e.Decide(ctx, conflicts.Latest, "", "A", []storage.Version{tie[i], tie[1-i]})
		if string(d.Resolution.Body) != `{"w":"b"}` {
			t.Fatalf("tie picked %s", d.Resolution.Body)
		}
	}
}

func TestPreferNode(t *testing.T) {
	e := conflicts.NewEngine(nil)
	ctx := context.Background()
	vs := []storage.Version{
		v("A:9-aaaaaaaaaaaaaaaaaaaaaa, B:3-bbbbbbbbbbbbbbbbbbbbbb", 50, `{"w":"a"}`),
		v("A:4-aaaaaaaaaaaaaaaaaaaaaa, B:8-bbbbbbbbbbbbbbbbbbbbbb", 10, `{"w":"b"}`),
	}
	for _, c := range []struct{ strategy, node, want string }{
		{"node:B", "A", `{"w":"b"}`}, // B's latest write wins though older
		{"node:A", "B", `{"w":"a"}`},
		{"local", "B", `{"w":"b"}`},  // local = node:<the deciding node>
		{"node:C", "A", `{"w":"a"}`}, // nobody saw C: latest
	} {
		d, err := e.Decide(ctx, c.strategy, "", c.node, vs)
		if err != nil || string(d.Resolution.Body) != c.want {
			t.Errorf("%s on %s: %s %v, want %s", c.strategy, c.node, d.Resolution.Body, err, c.want)
		}
	}
}

func TestScriptSandbox(t *testing.T) {
	e := conflicts.NewEngine(nil)
	e.TimeLimit = 50 * time.Millisecond
	ctx := context.Background()
	vs := []storage.Version{
		v("A:1-aaaaaaaaaaaaaaaaaaaaaa", 1, `{"Total":3,"Name":"a","@metadata":{"@collection":"Xs"}}`),
		v("B:1-bbbbbbbbbbbbbbbbbbbbbb", 2, `{"Total":7,"Name":"b","@metadata":{"@collection":"Xs"}}`),
	}
	maxTotal := `var out = docs[0]; for (var i = 1; i < docs.length; i++) { out.Total = Math.max(out.Total, docs[i].Total); } out["@metadata"]["@collection"] = "Elsewhere"; return out;`
	d, err := e.Decide(ctx, conflicts.Script, maxTotal, "A", vs)
	if err != nil || d.Declined || d.Winner != -1 {
		t.Fatalf("merge: %+v %v", d, err)
	}
	var got map[string]any
	if err := json.Unmarshal(d.Resolution.Body, &got); err != nil {
		t.Fatal(err)
	}
	if got["Total"] != float64(7) || got["Name"] != "a" {
		t.Fatalf("merged %s", d.Resolution.Body)
	}
	if md := got["@metadata"].(map[string]any); md["@collection"] != "Xs" || md["@id"] != nil || md["@change-vector"] != nil {
		t.Fatalf("the collection is kept and server metadata dropped: %s", d.Resolution.Body)
	}
	if !d.Resolution.LastModified.Equal(time.Unix(2, 0)) {
		t.Fatalf("merged time %v", d.Resolution.LastModified)
	}
	// Versions see their metadata.
	d, err = e.Decide(ctx, conflicts.Script, `return docs[0]["@metadata"]["@change-vector"] == "A:1-aaaaaaaaaaaaaaaaaaaaaa" ? resolveToTombstone : null;`, "A", vs)
	if err != nil || !d.Resolution.Tombstone {
		t.Fatalf("tombstone: %+v %v", d, err)
	}
	d, err = e.Decide(ctx, conflicts.Script, `return null;`, "A", vs)
	if err != nil || !d.Declined {
		t.Fatalf("declined: %+v %v", d, err)
	}
	for name, c := range map[string]struct{ script, want string }{
		"infinite loop": {`while (true) {}`, "time limit"},
		"throw":         {`throw new Error("no way");`, "no way"},
		"number":        {`return 42;`, "returned number"},
		"array":         {`return docs;`, "returned an array"},
		"string":        {`return "x";`, "returned string"},
		"undefined var": {`return nothing.here;`, "nothing"},
	} {
		_, err := e.Decide(ctx, conflicts.Script, c.script, "A", vs)
		var se *conflicts.ScriptError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a script error with %q", name, err, c.want)
		}
	}
	// The pool still works after an interrupted runtime.
	if d, err := e.Decide(ctx, conflicts.Script, maxTotal, "A", vs); err != nil || d.Declined {
		t.Fatalf("after failures: %+v %v", d, err)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []struct {
		cfg  conflicts.Config
		want string
	}{
		{conflicts.Config{Default: "local"}, "diverge"},
		{conflicts.Config{Default: "newest"}, "unknown strategy"},
		{conflicts.Config{Default: "node:b1"}, "node tag"},
		{conflicts.Config{Default: "script"}, "needs a script"},
		{conflicts.Config{Default: "script", Script: "return {"}, "does not compile"},
		{conflicts.Config{Collections: map[string]conflicts.CollectionConfig{"Orders": {Strategy: "script", Script: "}"}}}, "Orders"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	ok := conflicts.Config{Default: "Node:b", Collections: map[string]conflicts.CollectionConfig{"Orders": {Strategy: "MANUAL"}}}
	if err := ok.Validate(); err != nil || ok.Default != "node:B" || ok.Collections["Orders"].Strategy != "manual" {
		t.Fatalf("%+v %v", ok, err)
	}
	if s, _ := ok.For("orders"); s != "manual" {
		t.Fatalf("per collection, any case: %s", s)
	}
	if s, _ := (conflicts.Config{}).For("x"); s != "latest" {
		t.Fatalf("default %s", s)
	}
}

// snapshot is a copy's documents (with vectors and bodies) and conflicts.
func snapshot(t *testing.T, db *storage.DB) string {
	t.Helper()
	ctx := context.Background()
	items, err := db.ChangesAfter(ctx, 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, it := range items {
		lines = append(lines, fmt.Sprintf("%s %s %s %s", it.Type, strings.ToLower(it.ID), it.ChangeVector, it.Body))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// Three copies with automatic resolution, random writes, deletes and
// pairwise exchanges: after a full exchange they are identical, hold no
// conflicts, and every write is either a current document or a version in
// some copy's resolution log, or was overwritten by a later write on the
// copy that made it.
func TestAutoResolutionConverges(t *testing.T) {
	for _, strategy := range []conflicts.Config{
		{},
		{Default: "node:B"},
		{Default: "script", Script: `var best = docs[0]; for (var i = 1; i < docs.length; i++) { if (docs[i].n > best.n) best = docs[i]; } return best;`},
	} {
		t.Run(strategy.Default+"default", func(t *testing.T) {
			seed := time.Now().UnixNano()
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewSource(seed))
			set := settings{"c/conflicts": cfgJSON(t, strategy)}
			copies := []*storage.DB{open(t, "A"), open(t, "B"), open(t, "C")}
			for i, db := range copies {
				db.SetResolver(&conflicts.Auto{Engine: conflicts.NewEngine(nil), Settings: set, NodeTag: string(rune('A' + i))})
			}
			type write struct{ id, tok, cv string }
			var writes []write
			for step := 0; step < 400; step++ {
				i := rng.Intn(3)
				db := copies[i]
				id := fmt.Sprintf("docs/%d", rng.Intn(12))
				switch r := rng.Intn(10); {
				case r < 6:
					tok := fmt.Sprintf("t%d", step)
					info := put(t, db, id, fmt.Sprintf(`{"n":%d,"tok":%q,"@metadata":{"@collection":"Docs"}}`, rng.Intn(1000), tok))
					writes = append(writes, write{id, tok, info.ChangeVector})
				case r < 7:
					var info storage.Info
					if err := db.Write(context.Background(), func(tx *storage.Tx) error {
						var err error
						info, _, err = tx.Delete(id, nil)
						return err
					}); err != nil {
						t.Fatal(err)
					}
					if info.ChangeVector != "" {
						writes = append(writes, write{id, "", info.ChangeVector})
					}
				default:
					j := rng.Intn(3)
					if j != i {
						exchange(t, copies[j], db)
					}
				}
			}
			for round := 0; round < 3; round++ {
				for i := range copies {
					for j := range copies {
						if i != j {
							exchange(t, copies[i], copies[j])
						}
					}
				}
			}
			want := snapshot(t, copies[0])
			for i, db := range copies[1:] {
				if got := snapshot(t, db); got != want {
					t.Fatalf("copy %d differs from A:\n%s\n----\n%s", i+1, got, want)
				}
				if n, _ := db.ConflictCount(context.Background()); n != 0 {
					t.Fatalf("copy %d keeps %d conflicts", i+1, n)
				}
			}
			// Every token is somewhere: current, or in a resolution log.
			found := map[string]bool{}
			collect := func(body []byte) {
				var d struct{ Tok string }
				_ = json.Unmarshal(body, &d)
				found[d.Tok] = true
			}
			items, _ := copies[0].ChangesAfter(context.Background(), 0, 1<<30)
			for _, it := range items {
				collect(it.Body)
			}
			for _, db := range copies {
				log, _, err := db.Resolutions(context.Background(), storage.ResolutionFilter{}, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range log {
					for _, v := range e.Versions {
						collect(v.Body)
					}
				}
			}
			// A write that a later write of the same id had seen (its
			// vector dominates) was overwritten in order, not lost. Every
			// other write must be current or in a resolution log.
			for _, w := range writes {
				if w.tok == "" || found[w.tok] {
					continue
				}
				superseded := false
				for _, later := range writes {
					if later.id == w.id {
						if st, _ := changevector.CompareStrings(later.cv, w.cv); st == changevector.Update {
							superseded = true
							break
						}
					}
				}
				if !superseded {
					t.Errorf("write %s of %s (%s) is lost: not current, not logged, not overwritten by a later write", w.tok, w.id, w.cv)
				}
			}
		})
	}
}

func TestManualResolutionIsLoggedAndRestorable(t *testing.T) {
	a, b := open(t, "A"), open(t, "B")
	conflicted(t, a, b, "orders", "Orders", 1)
	if n, _ := a.ConflictCount(context.Background()); n != 1 {
		t.Fatalf("conflicts %d", n)
	}
	err := a.Write(context.Background(), func(tx *storage.Tx) error {
		tx.SetActor("studio")
		p, _ := document.Parse([]byte(`{"n":99,"@metadata":{"@collection":"Orders"}}`))
		_, err := tx.Put("orders/0", p, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	log, total, err := a.Resolutions(context.Background(), storage.ResolutionFilter{ID: "ORDERS/0"}, 10)
	if err != nil || total != 1 || len(log) != 1 {
		t.Fatalf("log %v %d %v", log, total, err)
	}
	e := log[0]
	if e.Strategy != "manual" || e.By != "studio" || e.Node != "A" || len(e.Versions) != 2 || !strings.Contains(string(e.Result.Body), `"n":99`) {
		t.Fatalf("entry %+v", e)
	}
	// The log keeps both losing versions' bodies.
	var froms []string
	for _, v := range e.Versions {
		var d struct{ From string }
		_ = json.Unmarshal(v.Body, &d)
		froms = append(froms, d.From)
	}
	sort.Strings(froms)
	if strings.Join(froms, ",") != "A,B" {
		t.Fatalf("versions %v", froms)
	}
	// Resolving to B's version by hand, then the change reaching B: B
	// takes it as an update.
	if got := exchange(t, a, b); got[storage.Applied] == 0 {
		t.Fatalf("to B %v", got)
	}
}

func TestBulkPreviewApplyAndChangedSince(t *testing.T) {
	a, b := open(t, "A"), open(t, "B")
	conflicted(t, a, b, "orders", "Orders", 30)
	conflicted(t, a, b, "users", "Users", 5)
	m := conflicts.NewManager(conflicts.NewEngine(nil), nil)
	m.Chunk = 7
	ctx := context.Background()

	items, total, err := m.Preview(ctx, a, conflicts.Spec{Strategy: "node:B", Scope: conflicts.Scope{Collection: "orders"}}, 10)
	if err != nil || total != 30 || len(items) != 10 {
		t.Fatalf("preview %d %d %v", len(items), total, err)
	}
	for _, it := range items {
		if it.Result == nil || !strings.Contains(string(it.Result.Body), `"from":"B"`) || it.Fingerprint == "" {
			t.Fatalf("preview item %+v", it)
		}
	}
	// Nothing was written by the preview.
	if n, _ := a.ConflictCount(ctx); n != 35 {
		t.Fatalf("after preview %d conflicts", n)
	}
	// Pin the operation to the preview; then one previewed id changes.
	expected := map[string]string{}
	for _, it := range items {
		expected[it.ID] = it.Fingerprint
	}
	changed := items[3].ID
	put(t, b, changed, `{"n":-1,"from":"B2","@metadata":{"@collection":"Orders"}}`)
	exchange(t, b, a) // a new version of one previewed id: still conflicted, different set
	op, err := m.Start(a, conflicts.Spec{Strategy: "node:B", Expected: expected, By: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	p := op.Progress()
	if p.State != conflicts.Done || p.Total != 10 || p.Resolved != 9 || p.Skipped != 1 || p.Errors != 0 {
		t.Fatalf("progress %+v", p)
	}
	if vs, _ := a.ConflictVersions(ctx, []string{changed}); len(vs[storage.LowerID(changed)]) == 0 {
		t.Fatal("the id that changed since the preview was resolved anyway")
	}
	log, _, _ := a.Resolutions(ctx, storage.ResolutionFilter{By: "bulk operation"}, 100)
	if len(log) != 9 || log[0].Strategy != "node:B" || !strings.Contains(log[0].By, "tester") {
		t.Fatalf("log %d entries, first %+v", len(log), log[0])
	}
	// The resolved documents load, with B's content, and replicate to B as
	// updates that resolve nothing there (B had no conflict).
	got, err := a.Get(ctx, items[0].ID)
	if err != nil || got == nil || !strings.Contains(string(got.Body), `"from":"B"`) {
		t.Fatalf("resolved doc %v %v", got, err)
	}

	// The whole users collection with a script.
	op, err = m.Start(a, conflicts.Spec{Strategy: "script", Script: `return resolveToTombstone;`, Scope: conflicts.Scope{Prefix: "USERS/"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = op.Wait(ctx)
	if p := op.Progress(); p.Resolved != 5 || p.State != conflicts.Done {
		t.Fatalf("users %+v", p)
	}
	if d, _ := a.Get(ctx, "users/1"); d != nil {
		t.Fatal("users/1 should be deleted")
	}
	if _, err := m.Start(a, conflicts.Spec{Strategy: "manual"}); err == nil {
		t.Fatal("manual is not a bulk strategy")
	}
}

func TestBulkCancelAndResume(t *testing.T) {
	a, b := open(t, "A"), open(t, "B")
	conflicted(t, a, b, "items", "Items", 60)
	m := conflicts.NewManager(conflicts.NewEngine(nil), nil)
	m.Chunk = 4
	ctx := context.Background()
	// Each chunk reports through OnChange; blocking there holds the
	// operation still until the test has looked at it.
	ticks := make(chan struct{})
	var draining atomic.Bool
	m.OnChange = func(string) {
		if !draining.Load() {
			ticks <- struct{}{}
		}
	}
	op, err := m.Start(a, conflicts.Spec{Strategy: "latest"})
	if err != nil {
		t.Fatal(err)
	}
	for range ticks {
		if op.Progress().Done >= 8 {
			draining.Store(true)
			op.Cancel()
			break
		}
	}
	go func() {
		for range ticks { // a report already on its way
		}
	}()
	_ = op.Wait(ctx)
	p := op.Progress()
	if p.State != conflicts.Cancelled || p.Done >= 60 || p.Resolved == 0 {
		t.Fatalf("after cancel %+v", p)
	}
	left, _ := a.ConflictCount(ctx)
	if left != 60-p.Resolved {
		t.Fatalf("%d left, %d resolved", left, p.Resolved)
	}
	if err := op.Resume(); err != nil {
		t.Fatal(err)
	}
	_ = op.Wait(ctx)
	p = op.Progress()
	if p.State != conflicts.Done || p.Resolved != 60 || p.Done != 60 {
		t.Fatalf("after resume %+v", p)
	}
	if n, _ := a.ConflictCount(ctx); n != 0 {
		t.Fatalf("%d conflicts left", n)
	}
	if err := op.Resume(); err == nil {
		t.Fatal("a finished operation cannot be resumed")
	}
}

// A copy that resolved automatically and a copy that stored the same
// conflict (its resolver declined: a script that timed out there, or a
// configuration change not applied yet) still converge: the resolution
// carries an entry of its own, so the storing copy takes it as an update
// instead of skipping it as already seen.
func TestResolutionReachesACopyThatStoredTheConflict(t *testing.T) {
	a, b, c := open(t, "A"), open(t, "B"), open(t, "C")
	b.SetResolver(&conflicts.Auto{Engine: conflicts.NewEngine(nil), Settings: settings{}, NodeTag: "B"})
	put(t, a, "x/1", `{"v":"a","@metadata":{"@collection":"Xs"}}`)
	put(t, c, "x/1", `{"v":"c","@metadata":{"@collection":"Xs"}}`)
	exchange(t, a, c) // C: no resolver, the conflict is stored
	if n, _ := c.ConflictCount(context.Background()); n != 1 {
		t.Fatalf("C conflicts %d", n)
	}
	exchange(t, a, b)
	if got := exchange(t, c, b); got[storage.Resolved] != 1 {
		t.Fatalf("B should resolve on arrival: %v", got)
	}
	// At least the resolution itself; the conflict's versions and the
	// resolution travel as revisions too (kept even without a revisions
	// configuration), and apply as well.
	if got := exchange(t, b, c); got[storage.Applied] < 1 {
		t.Fatalf("C should take B's resolution as an update: %v", got)
	}
	if n, _ := c.ConflictCount(context.Background()); n != 0 {
		t.Fatalf("C still has %d conflicts", n)
	}
	for round := 0; round < 2; round++ {
		for _, p := range [][2]*storage.DB{{a, b}, {a, c}, {b, a}, {b, c}, {c, a}, {c, b}} {
			exchange(t, p[0], p[1])
		}
	}
	if snapshot(t, a) != snapshot(t, b) || snapshot(t, b) != snapshot(t, c) {
		t.Fatalf("copies differ:\nA %s\nB %s\nC %s", snapshot(t, a), snapshot(t, b), snapshot(t, c))
	}
}

// Optimistic concurrency on a conflicted id: "must be new" and a vector
// from before the conflict are refused (nothing is resolved); a write
// without an expectation, or one whose vector saw every version, resolves.
func TestConcurrencyOnAConflictedID(t *testing.T) {
	a, b := open(t, "A"), open(t, "B")
	before := put(t, a, "k/1", `{"v":0,"@metadata":{"@collection":"Ks"}}`)
	exchange(t, a, b)
	put(t, a, "k/1", `{"v":"a","@metadata":{"@collection":"Ks"}}`)
	put(t, b, "k/1", `{"v":"b","@metadata":{"@collection":"Ks"}}`)
	exchange(t, b, a)
	write := func(expected *string) error {
		p, _ := document.Parse([]byte(`{"v":"resolved","@metadata":{"@collection":"Ks"}}`))
		return a.Write(context.Background(), func(tx *storage.Tx) error { _, err := tx.Put("k/1", p, expected); return err })
	}
	empty, stale := "", before.ChangeVector
	for _, exp := range []*string{&empty, &stale} {
		err := write(exp)
		if err == nil || !strings.Contains(err.Error(), "in conflict") {
			t.Fatalf("expected %q: %v", *exp, err)
		}
		if n, _ := a.ConflictCount(context.Background()); n != 1 {
			t.Fatal("a refused write must leave the conflict")
		}
	}
	all := a.ChangeVector() // has seen every version
	if err := write(&all); err != nil {
		t.Fatal(err)
	}
	if n, _ := a.ConflictCount(context.Background()); n != 0 {
		t.Fatal("resolved")
	}
}
