package operations

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func wait(t *testing.T, r *Registry, db string, id int64) State {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := r.Wait(ctx, db, id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// An operation is readable from the moment Start returns, reports
// progress while it runs, and stays readable (Completed, with its result)
// after it ends, until the keep period passes.
func TestLifecycle(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var seen []string
	var mu sync.Mutex
	r := New(Options{Keep: time.Minute, Now: c.now, OnChange: func(i Info) { mu.Lock(); seen = append(seen, i.State.Status); mu.Unlock() }})
	defer r.Close()
	release := make(chan struct{})
	reported := make(chan struct{})
	id, err := r.Start("Shop", 0, "DeleteByQuery", "from Orders", true, func(ctx context.Context, p *Progress) (any, error) {
		p.Set(map[string]int{"Processed": 5})
		close(reported)
		<-release
		return map[string]int{"Total": 10}, nil
	})
	if err != nil || id != 1 {
		t.Fatalf("start: %d %v", id, err)
	}
	<-reported
	st, err := r.State("shop", id)
	if err != nil || st.Status != InProgress || st.Progress.(map[string]int)["Processed"] != 5 {
		t.Fatalf("running: %+v %v", st, err)
	}
	if _, err := r.State("other", id); !dberr.Is(err, dberr.NotFound) {
		t.Fatalf("another database's operation is visible: %v", err)
	}
	close(release)
	st = wait(t, r, "shop", id)
	if st.Status != Completed || st.Result.(map[string]int)["Total"] != 10 {
		t.Fatalf("completed: %+v", st)
	}
	c.add(59 * time.Second)
	if st, err := r.State("shop", id); err != nil || st.Status != Completed {
		t.Fatalf("forgotten before the keep period: %+v %v", st, err)
	}
	c.add(2 * time.Second)
	if _, err := r.State("shop", id); !dberr.Is(err, dberr.NotFound) {
		t.Fatalf("kept past the keep period: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 3 || seen[0] != InProgress || seen[len(seen)-1] != Completed {
		t.Fatalf("changes %v", seen)
	}
}

// A failing job is Faulted with the exception the clients raise; a killed
// one is Canceled; a panic faults it without taking the node down; a
// reserved id is used as given and cannot be used twice.
func TestFaultKillAndIDs(t *testing.T) {
	r := New(Options{Describe: func(err error) ExceptionResult {
		return ExceptionResult{Type: "System.InvalidOperationException", Message: err.Error(), Error: err.Error(), StatusCode: 400}
	}})
	defer r.Close()
	id, _ := r.Start("db", 0, "UpdateByQuery", "", true, func(context.Context, *Progress) (any, error) { return nil, errors.New("bad script") })
	st := wait(t, r, "db", id)
	if ex, ok := st.Result.(ExceptionResult); st.Status != Faulted || !ok || ex.Type != "System.InvalidOperationException" || ex.Message != "bad script" {
		t.Fatalf("faulted: %+v", st)
	}
	id, _ = r.Start("db", 0, "UpdateByQuery", "", true, func(context.Context, *Progress) (any, error) { panic("boom") })
	if st := wait(t, r, "db", id); st.Status != Faulted {
		t.Fatalf("panic: %+v", st)
	}
	id, _ = r.Start("db", 0, "DeleteByQuery", "", true, func(ctx context.Context, _ *Progress) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if err := r.Kill("db", id); err != nil {
		t.Fatal(err)
	}
	if st := wait(t, r, "db", id); st.Status != Canceled {
		t.Fatalf("killed: %+v", st)
	}
	id, _ = r.Start("db", 0, "IndexReset", "", false, func(context.Context, *Progress) (any, error) { return nil, nil })
	if err := r.Kill("db", id); !dberr.Is(err, dberr.InvalidOperation) {
		t.Fatalf("killed an unkillable operation: %v", err)
	}
	if err := r.Kill("db", 999); !dberr.Is(err, dberr.NotFound) {
		t.Fatalf("kill unknown: %v", err)
	}
	reserved := r.NextID()
	got, err := r.Start("db", reserved, "DeleteByQuery", "", true, func(context.Context, *Progress) (any, error) { return nil, nil })
	if err != nil || got != reserved {
		t.Fatalf("reserved id: %d %v (want %d)", got, err, reserved)
	}
	if _, err := r.Start("db", reserved, "DeleteByQuery", "", true, func(context.Context, *Progress) (any, error) { return nil, nil }); !dberr.Is(err, dberr.Concurrency) {
		t.Fatalf("reused an id: %v", err)
	}
	if next := r.NextID(); next <= reserved {
		t.Fatalf("next id %d after %d", next, reserved)
	}
	if list := r.List("DB"); len(list) != 5 || list[0].ID < list[len(list)-1].ID {
		t.Fatalf("list %+v", list)
	}
}

// At most MaxKept finished operations are kept: the oldest go first.
func TestMaxKept(t *testing.T) {
	r := New(Options{MaxKept: 3})
	defer r.Close()
	var ids []int64
	for i := 0; i < 6; i++ {
		id, _ := r.Start("db", 0, "X", "", false, func(context.Context, *Progress) (any, error) { return nil, nil })
		wait(t, r, "db", id)
		ids = append(ids, id)
	}
	if n := len(r.List("db")); n != 3 {
		t.Fatalf("%d kept", n)
	}
	if _, err := r.State("db", ids[0]); err == nil {
		t.Fatal("the oldest was kept")
	}
	if _, err := r.State("db", ids[5]); err != nil {
		t.Fatalf("the newest was dropped: %v", err)
	}
}

// Running lists the running operations of every database and the
// server-wide ones, newest first, and drops each as it ends.
func TestRunningAcrossDatabases(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	release := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{}), "": make(chan struct{})}
	ids := map[string]int64{}
	for _, db := range []string{"a", "b", ""} {
		ch := release[db]
		id, err := r.Start(db, 0, "DatabaseImport", "import "+db, true, func(ctx context.Context, p *Progress) (any, error) {
			<-ch
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ids[db] = id
	}
	got := r.Running()
	if len(got) != 3 || got[0].Database != "" || got[1].Database != "b" || got[2].Database != "a" {
		t.Fatalf("running: %+v", got)
	}
	close(release["b"])
	wait(t, r, "b", ids["b"])
	got = r.Running()
	if len(got) != 2 || got[0].ID != ids[""] || got[1].ID != ids["a"] {
		t.Fatalf("after b ended: %+v", got)
	}
	close(release["a"])
	close(release[""])
	wait(t, r, "a", ids["a"])
	wait(t, r, "", ids[""])
	if got := r.Running(); len(got) != 0 {
		t.Fatalf("after all ended: %+v", got)
	}
}

// A job tells a kill from the registry closing (Killed), and knows its id.
func TestKilledIsNotClosed(t *testing.T) {
	r := New(Options{})
	type seen struct {
		id     int64
		killed bool
	}
	ended := make(chan seen, 2)
	job := func(ctx context.Context, p *Progress) (any, error) {
		<-ctx.Done()
		ended <- seen{p.ID(), Killed(ctx)}
		return nil, ctx.Err()
	}
	killed, _ := r.Start("db", 0, "X", "", true, job)
	closed, _ := r.Start("db", 0, "X", "", true, job)
	if err := r.Kill("db", killed); err != nil {
		t.Fatal(err)
	}
	if s := <-ended; s.id != killed || !s.killed {
		t.Fatalf("killed job saw %+v, want id %d killed", s, killed)
	}
	if st := wait(t, r, "db", killed); st.Status != Canceled {
		t.Fatalf("killed: %+v", st)
	}
	r.Close()
	if s := <-ended; s.id != closed || s.killed {
		t.Fatalf("job of a closing registry saw %+v, want id %d not killed", s, closed)
	}
	if st, err := r.State("db", closed); err != nil || st.Status != Canceled {
		t.Fatalf("closed: %+v %v", st, err)
	}
}
