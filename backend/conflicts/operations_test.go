package conflicts_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/conflicts"
	"github.com/rookerydb/rookery/backend/operations"
	"github.com/rookerydb/rookery/backend/storage"
)

func waitOp(t *testing.T, reg *operations.Registry, db string, id int64) operations.State {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := reg.Wait(ctx, db, id)
	if err != nil {
		t.Fatalf("operation %d: %v", id, err)
	}
	return st
}

func bulkLogged(t *testing.T, db *storage.DB) int {
	t.Helper()
	log, _, err := db.Resolutions(context.Background(), storage.ResolutionFilter{By: "bulk operation"}, 10000)
	if err != nil {
		t.Fatal(err)
	}
	return len(log)
}

// Each run of a resolution is an operation of the registry: listed, its
// progress readable while it runs (held still here at the end of its first
// chunk), killed there between two chunks with exactly the first chunk
// resolved, Canceled with the progress as of the stop; a resume is a new
// run that completes with the operation's totals as its result, and the
// killed run stays readable.
func TestBulkRunsAreRegistryOperations(t *testing.T) {
	a, b := open(t, "A"), open(t, "B")
	conflicted(t, a, b, "items", "Items", 60)
	reg := operations.New(operations.Options{})
	defer reg.Close()
	m := conflicts.NewManager(conflicts.NewEngine(nil), nil)
	m.Chunk, m.Operations = 4, reg
	reached, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	first.Store(true)
	m.OnChange = func(string) {
		if first.CompareAndSwap(true, false) {
			close(reached)
			<-release
		}
	}
	op, err := m.Start(a, conflicts.Spec{Strategy: "latest"})
	if err != nil {
		t.Fatal(err)
	}
	id := op.Progress().OperationID
	if id == 0 {
		t.Fatal("the run has no registry id")
	}
	<-reached // the first chunk is done and reported; the run waits
	var listed *operations.Info
	for _, info := range reg.List("c") {
		if info.ID == id {
			listed = &info
		}
	}
	if listed == nil || listed.Kind != conflicts.OperationKind || !listed.Killable || listed.State.Status != operations.InProgress ||
		!strings.Contains(listed.Description, "conflict resolution 1 (latest)") {
		t.Fatalf("listing %+v", reg.List("c"))
	}
	st, err := reg.State("c", id)
	if err != nil {
		t.Fatal(err)
	}
	if rp, ok := st.Progress.(conflicts.RunProgress); st.Status != operations.InProgress || !ok || rp.Processed != 4 || rp.Total != 60 || rp.Resolved != 4 || rp.Operation != op.Progress().ID {
		t.Fatalf("state while running %+v", st)
	}
	if err := reg.Kill("c", id); err != nil {
		t.Fatal(err)
	}
	close(release)
	st = waitOp(t, reg, "c", id)
	if rp, ok := st.Progress.(conflicts.RunProgress); st.Status != operations.Canceled || !ok || rp.Processed != 4 || rp.Resolved != 4 || st.Result != nil {
		t.Fatalf("state after the kill %+v", st)
	}
	_ = op.Wait(context.Background())
	if p := op.Progress(); p.State != conflicts.Cancelled || p.Done != 4 || p.Resolved != 4 {
		t.Fatalf("bulk progress after the kill %+v", p)
	}
	if n, _ := a.ConflictCount(context.Background()); n != 56 {
		t.Fatalf("%d conflicts left after the kill, want 56", n)
	}
	if n := bulkLogged(t, a); n != 4 {
		t.Fatalf("%d resolutions logged after the kill, want 4", n)
	}

	if err := op.Resume(); err != nil {
		t.Fatal(err)
	}
	id2 := op.Progress().OperationID
	if id2 == 0 || id2 == id {
		t.Fatalf("the resumed run's id %d (first %d)", id2, id)
	}
	st = waitOp(t, reg, "c", id2)
	res, ok := st.Result.(conflicts.RunProgress)
	if st.Status != operations.Completed || !ok || res.Processed != 60 || res.Resolved != 60 || res.Skipped != 0 || !strings.Contains(res.Message, "Resolved 60 of 60") {
		t.Fatalf("resumed run %+v", st)
	}
	if st, err := reg.State("c", id); err != nil || st.Status != operations.Canceled {
		t.Fatalf("the killed run is no longer readable as killed: %+v %v", st, err)
	}
	if n, _ := a.ConflictCount(context.Background()); n != 0 {
		t.Fatalf("%d conflicts left", n)
	}
	// A preview writes nothing and is not registered.
	before := len(reg.List("c"))
	pv, err := m.StartPreview(a, conflicts.Spec{Strategy: "latest"})
	if err != nil {
		t.Fatal(err)
	}
	_ = pv.Wait(context.Background())
	if pv.Progress().OperationID != 0 || len(reg.List("c")) != before {
		t.Fatalf("a preview was registered: %+v", pv.Progress())
	}
}

// slowScript resolves to the first version after some work, so a run over
// a hundred ids lasts long enough to be stopped in the middle of a chunk.
const slowScript = `var x = 0; for (var i = 0; i < 20000; i++) { x += i % 7; } var d = docs[0]; d.spin = x; return d;`

// Cancel stops a run between two ids, inside a chunk: what was resolved
// stays resolved (logged, counted), every other id keeps its versions, and
// a resume goes on from exactly there (nothing handled twice, nothing
// left out), both for a scope and for a run pinned to fingerprints.
func TestBulkCancelStopsBetweenIDs(t *testing.T) {
	for _, pinned := range []bool{false, true} {
		name := "scope"
		if pinned {
			name = "pinned"
		}
		t.Run(name, func(t *testing.T) {
			const n = 120
			a, b := open(t, "A"), open(t, "B")
			conflicted(t, a, b, "items", "Items", n)
			reg := operations.New(operations.Options{})
			defer reg.Close()
			e := conflicts.NewEngine(nil)
			e.TimeLimit = 10 * time.Second // slow, but never cut short
			m := conflicts.NewManager(e, nil)
			m.Operations = reg // one chunk (256) holds every id
			ctx := context.Background()
			spec := conflicts.Spec{Strategy: "script", Script: slowScript}
			if pinned {
				list, _, err := a.ConflictList(ctx, storage.ConflictFilter{}, n)
				if err != nil {
					t.Fatal(err)
				}
				ids := make([]string, len(list))
				for i, c := range list {
					ids[i] = c.ID
				}
				versions, err := a.ConflictVersions(ctx, ids)
				if err != nil {
					t.Fatal(err)
				}
				spec.Expected = map[string]string{}
				for _, id := range ids {
					spec.Expected[id] = storage.Fingerprint(versions[storage.LowerID(id)])
				}
			}
			op, err := m.Start(a, spec)
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				left, err := a.ConflictCount(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if left < n {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("nothing was resolved")
				}
				time.Sleep(time.Millisecond)
			}
			op.Cancel()
			st := waitOp(t, reg, "c", op.Progress().OperationID)
			p := op.Progress()
			if st.Status != operations.Canceled || p.State != conflicts.Cancelled {
				t.Fatalf("after cancel: registry %+v, bulk %+v", st, p)
			}
			if p.Done == 0 || p.Done >= n || p.Resolved != p.Done || p.Errors != 0 || p.Skipped != 0 {
				t.Fatalf("the run did not stop inside its chunk: %+v", p)
			}
			if rp := st.Progress.(conflicts.RunProgress); rp.Processed != p.Done || rp.Resolved != p.Resolved {
				t.Fatalf("registry progress %+v, bulk %+v", rp, p)
			}
			if left, _ := a.ConflictCount(ctx); left != n-p.Resolved {
				t.Fatalf("%d conflicts left, %d resolved of %d", left, p.Resolved, n)
			}
			if got := bulkLogged(t, a); got != p.Resolved {
				t.Fatalf("%d resolutions logged, %d counted", got, p.Resolved)
			}
			list, _, _ := a.ConflictList(ctx, storage.ConflictFilter{}, n)
			ids := make([]string, len(list))
			for i, c := range list {
				ids[i] = c.ID
			}
			versions, _ := a.ConflictVersions(ctx, ids)
			for _, id := range ids {
				if vs := versions[storage.LowerID(id)]; len(vs) != 2 {
					t.Fatalf("%s was touched: %d versions", id, len(vs))
				}
			}
			if err := op.Resume(); err != nil {
				t.Fatal(err)
			}
			st = waitOp(t, reg, "c", op.Progress().OperationID)
			p = op.Progress()
			if st.Status != operations.Completed || p.Done != n || p.Resolved != n || p.Skipped != 0 {
				t.Fatalf("after resume: registry %+v, bulk %+v", st, p)
			}
			if left, _ := a.ConflictCount(ctx); left != 0 {
				t.Fatalf("%d conflicts left after resume", left)
			}
		})
	}
}
