package subscriptions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/backend/subscriptions"
	"github.com/rookerydb/rookery/internal/testserver"
)

// env is a real database file and a real one-node Raft cluster holding the
// definitions and progress, with a manager over them.
type env struct {
	t   *testing.T
	db  *storage.DB
	m   *subscriptions.Manager
	cl  *cluster.Cluster
	ctx context.Context
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cl := testserver.Cluster(t, "db")
	db, err := storage.Open(filepath.Join(t.TempDir(), "db.sqlite"), storage.Options{Name: "db", NodeTag: "A"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	m := subscriptions.NewManager(cl, func(name string) (subscriptions.DB, error) {
		if !strings.EqualFold(name, "db") {
			return nil, errors.New("no such database")
		}
		return db, nil
	}, "A", nil)
	db.OnCommit(func([]storage.Change) { m.Notify("db") })
	cl.OnChange(func() { go m.Reconcile() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return &env{t: t, db: db, m: m, cl: cl, ctx: ctx}
}

func (e *env) put(id, collection, fields string) {
	e.t.Helper()
	p, err := document.Parse([]byte(fmt.Sprintf(`{%s"@metadata":{"@collection":%q}}`, fields, collection)))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.db.Write(e.ctx, func(tx *storage.Tx) error { _, err := tx.Put(id, p, nil); return err }); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) create(name, query string) {
	e.t.Helper()
	def, err := subscriptions.FromOptions(subscriptions.Options{Name: name, Query: query}, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	raw, _ := json.Marshal(def)
	if _, err := e.cl.CreateSubscription(e.ctx, "db", name, raw, nil); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) open(name, strategy string, batch int) *subscriptions.Session {
	e.t.Helper()
	s, err := e.m.Open(e.ctx, "db", name, subscriptions.ConnectOptions{Strategy: strategy, MaxDocsPerBatch: batch, ClientAddr: "test"})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) next(s *subscriptions.Session) []string {
	e.t.Helper()
	b, err := s.Next(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, d := range b.Docs {
		out = append(out, d.ID)
	}
	return out
}

func statusOf(err error) string {
	var se *subscriptions.StatusError
	if errors.As(err, &se) {
		return se.Status
	}
	return ""
}

// Delivery follows etag order and the where clause, in batches; an update
// gives a document a new etag so it comes again; the progress moves only
// on ack, so a batch not acknowledged is delivered again to the next
// session.
func TestDeliveryOrderAckAndRedelivery(t *testing.T) {
	e := newEnv(t)
	for i := 1; i <= 10; i++ {
		e.put(fmt.Sprintf("orders/%d", i), "Orders", fmt.Sprintf(`"Total":%d,`, i))
		e.put(fmt.Sprintf("users/%d", i), "Users", ``)
	}
	e.create("big", "from Orders where Total > 4")
	s := e.open("big", "", 3)
	if got := e.next(s); !slices.Equal(got, []string{"orders/5", "orders/6", "orders/7"}) {
		t.Fatalf("first batch %v", got)
	}
	if err := s.Ack(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.next(s); !slices.Equal(got, []string{"orders/8", "orders/9", "orders/10"}) {
		t.Fatalf("second batch %v", got)
	}
	s.Close() // not acknowledged: the worker died

	s2 := e.open("big", "", 3)
	b, err := s2.Next(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{b.Docs[0].ID, b.Docs[2].ID}; !slices.Equal(got, []string{"orders/8", "orders/10"}) || b.Redelivered != 3 {
		t.Fatalf("redelivery %v, redelivered %d", got, b.Redelivered)
	}
	if err := s2.Ack(e.ctx); err != nil {
		t.Fatal(err)
	}
	// A new matching document and an update of an old one wake the
	// waiting session.
	done := make(chan []string)
	go func() {
		b, err := s2.Next(e.ctx)
		if err != nil {
			done <- []string{err.Error()}
			return
		}
		var out []string
		for _, d := range b.Docs {
			out = append(out, d.ID)
		}
		done <- out
	}()
	e.put("orders/11", "Orders", `"Total":3,`) // does not match
	e.put("orders/5", "Orders", `"Total":50,`)
	if got := <-done; !slices.Equal(got, []string{"orders/5"}) {
		t.Fatalf("after the update: %v", got)
	}
	// Two batches acknowledged; the pass over orders/11 alone (etag 21,
	// no match) was recorded without a batch.
	sub, _, _ := e.m.Find("db", "big", nil)
	if p := subscriptions.ParseProgress(sub.Progress); p.Batches != 2 || p.Docs != 6 || p.Etag(e.db.DatabaseID()) != 21 {
		t.Fatalf("progress %+v (etag %d)", p, p.Etag(e.db.DatabaseID()))
	}
}

// A pass that matches nothing is recorded, so the next session does not
// read those documents again.
func TestSkippedDocumentsAreNotReadTwice(t *testing.T) {
	e := newEnv(t)
	for i := 1; i <= 50; i++ {
		e.put(fmt.Sprintf("orders/%d", i), "Orders", `"Total":1,`)
	}
	e.create("none", "from Orders where Total > 100")
	s := e.open("none", "", 10)
	got := make(chan *subscriptions.Batch)
	go func() {
		b, err := s.Next(e.ctx)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	// The pass over the 50 documents is recorded before the session waits.
	waitFor(t, func() bool {
		sub, _, _ := e.m.Find("db", "none", nil)
		return subscriptions.ParseProgress(sub.Progress).Etag(e.db.DatabaseID()) == 50
	})
	e.put("orders/x", "Orders", `"Total":1000,`) // the only match
	if b := <-got; len(b.Docs) != 1 || b.Docs[0].ID != "orders/x" {
		t.Fatalf("got %v", b.Docs)
	}
	s.Close()
	r := e.m.Report(e.ctx, "db")
	st := r.Subscriptions[0]
	if st.DocsRead != 51 || st.DocsSent != 1 {
		t.Fatalf("read %d sent %d", st.DocsRead, st.DocsSent)
	}
	s2 := e.open("none", "", 10)
	b, err := s2.Next(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Docs) != 1 || b.Docs[0].ID != "orders/x" || b.Scanned != 1 {
		t.Fatalf("redelivered %d docs after reading %d", len(b.Docs), b.Scanned)
	}
}

// OpenIfFree refuses a busy subscription; TakeOver ends the holder with
// InUse; WaitForFree gets it when the holder leaves.
func TestStrategies(t *testing.T) {
	e := newEnv(t)
	e.put("orders/1", "Orders", ``)
	e.create("s", "from Orders")
	first := e.open("s", subscriptions.OpenIfFree, 10)
	if _, err := e.m.Open(e.ctx, "db", "s", subscriptions.ConnectOptions{Strategy: subscriptions.OpenIfFree}); statusOf(err) != subscriptions.StatusInUse {
		t.Fatalf("OpenIfFree on a busy subscription: %v", err)
	}
	second := e.open("s", subscriptions.TakeOver, 10)
	<-first.Done()
	if statusOf(first.Err()) != subscriptions.StatusInUse {
		t.Fatalf("taken over: %v", first.Err())
	}
	if _, err := first.Next(e.ctx); statusOf(err) != subscriptions.StatusInUse {
		t.Fatalf("the old session still reads: %v", err)
	}
	got := make(chan *subscriptions.Session)
	go func() {
		s, err := e.m.Open(e.ctx, "db", "s", subscriptions.ConnectOptions{Strategy: subscriptions.WaitForFree})
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	select {
	case <-got:
		t.Fatal("WaitForFree connected while the subscription was busy")
	case <-time.After(100 * time.Millisecond):
	}
	second.Close()
	third := <-got
	if ids := e.next(third); !slices.Equal(ids, []string{"orders/1"}) {
		t.Fatalf("WaitForFree got %v", ids)
	}
	if _, err := e.m.Open(e.ctx, "db", "s", subscriptions.ConnectOptions{Strategy: subscriptions.Concurrent}); statusOf(err) != subscriptions.StatusInvalid {
		t.Fatalf("Concurrent: %v", err)
	}
	if _, err := e.m.Open(e.ctx, "db", "nope", subscriptions.ConnectOptions{}); statusOf(err) != subscriptions.StatusNotFound {
		t.Fatalf("unknown subscription: %v", err)
	}
}

// Disabling, changing or deleting a subscription ends its session; an ack
// that lost a race with a changed progress is refused.
func TestReconcileEndsSessions(t *testing.T) {
	e := newEnv(t)
	e.put("orders/1", "Orders", ``)
	e.create("s", "from Orders")
	s := e.open("s", "", 10)
	e.next(s)
	sub, def, _ := e.m.Find("db", "s", nil)
	// Someone else moves the progress: the pending ack must fail.
	if _, err := e.cl.SubscriptionProgress(e.ctx, "db", "s", sub.Progress, subscriptions.Progress{Vector: "A:1-" + e.db.DatabaseID()}.Raw()); err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(e.ctx); statusOf(err) != subscriptions.StatusConcurrency {
		t.Fatalf("ack after a concurrent move: %v", err)
	}
	def.Disabled = true
	raw, _ := json.Marshal(def)
	if _, err := e.cl.UpdateSubscription(e.ctx, "db", "s", raw, nil); err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	var se *subscriptions.StatusError
	if !errors.As(s.Err(), &se) || se.Status != subscriptions.StatusClosed || se.CanReconnect {
		t.Fatalf("disabled: %v", s.Err())
	}
	if _, err := e.m.Open(e.ctx, "db", "s", subscriptions.ConnectOptions{}); statusOf(err) != subscriptions.StatusClosed {
		t.Fatalf("open a disabled subscription: %v", err)
	}
	def.Disabled = false
	raw, _ = json.Marshal(def)
	if _, err := e.cl.UpdateSubscription(e.ctx, "db", "s", raw, nil); err != nil {
		t.Fatal(err)
	}
	s2 := e.open("s", "", 10)
	if _, err := e.cl.DeleteSubscription(e.ctx, "db", "s"); err != nil {
		t.Fatal(err)
	}
	<-s2.Done()
	if statusOf(s2.Err()) != subscriptions.StatusNotFound {
		t.Fatalf("deleted: %v", s2.Err())
	}
}

// CloseWhenNoDocsLeft ends the session once everything was delivered.
func TestCloseWhenNoDocsLeft(t *testing.T) {
	e := newEnv(t)
	e.put("orders/1", "Orders", ``)
	e.create("s", "from Orders")
	s, err := e.m.Open(e.ctx, "db", "s", subscriptions.ConnectOptions{CloseWhenNoDocsLeft: true})
	if err != nil {
		t.Fatal(err)
	}
	e.next(s)
	if err := s.Ack(e.ctx); err != nil {
		t.Fatal(err)
	}
	_, err = s.Next(e.ctx)
	var se *subscriptions.StatusError
	if !errors.As(err, &se) || !se.NoDocsLeft {
		t.Fatalf("no docs left: %v", err)
	}
}

// Projections and includes: select shapes the delivered document; include
// brings the referenced documents along.
func TestSelectAndInclude(t *testing.T) {
	e := newEnv(t)
	e.put("companies/1", "Companies", `"Name":"Acme",`)
	e.put("orders/1", "Orders", `"Company":"companies/1","Total":5,"Lines":[{"P":1},{"P":2}],`)
	e.create("s", "from Orders as o select o.Total, o.Lines[].P as Prices include Company")
	s := e.open("s", "", 10)
	b, err := s.Next(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b.Docs[0].JSON, &got); err != nil {
		t.Fatal(err)
	}
	if got["Total"] != 5.0 || fmt.Sprint(got["Prices"]) != "[1 2]" || got["Company"] != nil {
		t.Fatalf("projection %s", b.Docs[0].JSON)
	}
	if inc := string(b.Includes["companies/1"]); !strings.Contains(inc, `"Name":"Acme"`) {
		t.Fatalf("includes %v", b.Includes)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The monitor's report says which node computed it and which node's
// delivery last moved the position; a worker's error is current until a
// batch is acknowledged after it, then it is a past error with the time of
// that batch; a new error makes it current again.
func TestReportNodeAndErrorRecovery(t *testing.T) {
	e := newEnv(t)
	for i := 1; i <= 4; i++ {
		e.put(fmt.Sprintf("orders/%d", i), "Orders", ``)
	}
	e.create("feed", "from Orders")
	row := func() subscriptions.Stats {
		t.Helper()
		e.m.Sample(e.ctx, []string{"db"})
		for _, st := range e.m.Report(e.ctx, "db").Subscriptions {
			if st.Name == "feed" {
				return st
			}
		}
		t.Fatal("feed is not in the report")
		return subscriptions.Stats{}
	}
	if r := e.m.Report(e.ctx, "db"); r.Node != "A" {
		t.Fatalf("report node %q", r.Node)
	}
	if st := row(); st.LastNode != "" || st.LastError != "" {
		t.Fatalf("before any delivery: %+v", st)
	}
	s := e.open("feed", "", 2)
	e.next(s)
	s.Failed(errors.New("unexpected \"Nope\" from the worker"))
	if st := row(); st.LastError == "" || st.LastErrorAt == nil || st.RecoveredAt != nil {
		t.Fatalf("current error: %+v", st)
	}
	if err := s.Ack(e.ctx); err != nil {
		t.Fatal(err)
	}
	st := row()
	if st.RecoveredAt == nil || st.RecoveredAt.Before(*st.LastErrorAt) || st.LastError == "" || st.LastNode != "A" {
		t.Fatalf("after an acknowledged batch: %+v", st)
	}
	sub, _, _ := e.m.Find("db", "feed", nil)
	if p := subscriptions.ParseProgress(sub.Progress); p.Node != "A" {
		t.Fatalf("progress node %q", p.Node)
	}
	e.next(s)
	s.Failed(errors.New("again"))
	if st := row(); st.RecoveredAt != nil || st.LastError != "again" {
		t.Fatalf("a new error is current: %+v", st)
	}
}
