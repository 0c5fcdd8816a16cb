package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/testserver"
)

// Subscription tests: real nodes (internal/testserver), real workers over
// the TCP protocol.

// Reading is the document type of the subscription tests: Kind "hit"
// matches the subscriptions' where clause, "miss" does not.
type Reading struct {
	ID   string
	Seq  int
	Kind string
}

const hitsQuery = "from Readings where Kind = 'hit'"

// waitLimit is a safety net for waits that should end on their own; no
// test asserts on durations.
const waitLimit = 2 * time.Minute

// writeReadings stores readings from..from+n-1 in sessions of at most 500
// and returns their ids in order; kind says which ones match.
func writeReadings(ctx context.Context, store *DocumentStore, from, n int, hit func(seq int) bool) ([]string, error) {
	ids := make([]string, 0, n)
	for start := from; start < from+n; start += 500 {
		s := store.OpenSessionWithOptions(SessionOptions{Context: ctx})
		for seq := start; seq < min(start+500, from+n); seq++ {
			r := &Reading{Seq: seq, Kind: "miss"}
			if hit(seq) {
				r.Kind = "hit"
			}
			if err := s.Store(r); err != nil {
				return nil, err
			}
			ids = append(ids, r.ID)
		}
		if err := s.SaveChanges(); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

func mustWrite(t *testing.T, store *DocumentStore, from, n int, hit func(int) bool) []string {
	t.Helper()
	ids, err := writeReadings(context.Background(), store, from, n, hit)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func allHit(int) bool { return true }

// cvEtag is the etag of node A's entry in a change vector ("A:12-dbid").
func cvEtag(t testing.TB, cv string) int64 {
	t.Helper()
	for _, e := range strings.Split(cv, ",") {
		e = strings.TrimSpace(e)
		tag, rest, ok := strings.Cut(e, ":")
		if !ok || tag != "A" {
			continue
		}
		num, _, _ := strings.Cut(rest, "-")
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			t.Fatalf("change vector %q: %v", cv, err)
		}
		return n
	}
	t.Fatalf("change vector %q has no entry for node A", cv)
	return 0
}

// runWorker runs w in a goroutine; the channel gets Run's result.
func runWorker(ctx context.Context, w *Worker, h func(context.Context, *Batch) error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, h) }()
	return done
}

func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("gave up waiting for %s", what)
		panic("unreachable")
	}
}

func TestSubscriptionDefinitionsRoundTrip(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()
	subs := store.Subscriptions()

	name, err := subs.Create(ctx, SubscriptionOptions{Name: "Hits", Query: hitsQuery})
	if err != nil || name != "Hits" {
		t.Fatalf("Create = %q, %v", name, err)
	}
	unnamed, err := subs.Create(ctx, SubscriptionOptions{Query: "from Readings", Disabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := strconv.ParseInt(unnamed, 10, 64); err != nil {
		t.Fatalf("unnamed subscription is called %q, want its id", unnamed)
	}

	st, err := subs.State(ctx, "Hits")
	if err != nil {
		t.Fatal(err)
	}
	if st.SubscriptionName != "Hits" || st.Query != hitsQuery || st.Disabled || st.SubscriptionID <= 0 || st.ChangeVectorForNextBatchStartingPoint != "" {
		t.Fatalf("state = %+v", st)
	}
	if st, err := subs.State(ctx, unnamed); err != nil || !st.Disabled {
		t.Fatalf("unnamed created disabled: %+v, %v", st, err)
	}
	list, err := subs.List(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list {
		names = append(names, s.SubscriptionName)
	}
	if len(names) != 2 || !contains(names, "Hits") || !contains(names, unnamed) {
		t.Fatalf("List = %v", names)
	}
	if page, err := subs.List(ctx, 1, 10); err != nil || len(page) != 1 {
		t.Fatalf("List from 1 = %d, %v", len(page), err)
	}

	// Update: a new query, the position kept; then disable and enable.
	if _, err := subs.Update(ctx, SubscriptionOptions{Name: "Hits", Query: "from Readings where Kind = 'miss'"}); err != nil {
		t.Fatal(err)
	}
	if st, _ := subs.State(ctx, "Hits"); st.Query != "from Readings where Kind = 'miss'" || st.Disabled {
		t.Fatalf("after Update: %+v", st)
	}
	if err := subs.Disable(ctx, "Hits"); err != nil {
		t.Fatal(err)
	}
	if st, _ := subs.State(ctx, "Hits"); !st.Disabled {
		t.Fatal("Disable did not disable")
	}
	if err := subs.Enable(ctx, "Hits"); err != nil {
		t.Fatal(err)
	}
	if st, _ := subs.State(ctx, "Hits"); st.Disabled {
		t.Fatal("Enable did not enable")
	}
	if err := subs.DropConnection(ctx, "Hits"); err != nil {
		t.Fatalf("DropConnection without a worker: %v", err)
	}

	// LastDocument starts after the collection's last document.
	ids := mustWrite(t, store, 0, 3, allHit)
	if _, err := subs.Create(ctx, SubscriptionOptions{Name: "FromNow", Query: "from Readings", ChangeVector: LastDocument}); err != nil {
		t.Fatal(err)
	}
	st, err = subs.State(ctx, "FromNow")
	if err != nil || st.ChangeVectorForNextBatchStartingPoint == "" {
		t.Fatalf("LastDocument state: %+v, %v", st, err)
	}
	s := store.OpenSession()
	var last *Reading
	if _, err := s.Load(ids[2], &last); err != nil {
		t.Fatal(err)
	}
	cv, _ := s.GetChangeVectorFor(last)
	if got, want := cvEtag(t, st.ChangeVectorForNextBatchStartingPoint), cvEtag(t, cv); got != want {
		t.Fatalf("LastDocument starts after etag %d, the last document has %d", got, want)
	}

	// Errors: a bad query, unknown names.
	var se *ServerError
	if _, err := subs.Create(ctx, SubscriptionOptions{Name: "Bad", Query: "from Readings where Kind ="}); !errors.As(err, &se) || se.StatusCode != 400 {
		t.Fatalf("bad query: %v", err)
	}
	if err := subs.Delete(ctx, "Hits"); err != nil {
		t.Fatal(err)
	}
	if _, err := subs.State(ctx, "Hits"); !errors.Is(err, ErrSubscriptionNotFound) {
		t.Fatalf("State after Delete: %v", err)
	}
	for what, err := range map[string]error{
		"Delete":  subs.Delete(ctx, "Hits"),
		"Enable":  subs.Enable(ctx, "Hits"),
		"Drop":    subs.DropConnection(ctx, "Hits"),
		"Disable": subs.Disable(ctx, "Hits"),
	} {
		if !errors.Is(err, ErrSubscriptionNotFound) {
			t.Errorf("%s of a deleted subscription: %v", what, err)
		}
	}
	if _, err := subs.Update(ctx, SubscriptionOptions{Name: "Hits", Query: hitsQuery}); !errors.Is(err, ErrSubscriptionNotFound) {
		t.Errorf("Update of a deleted subscription: %v", err)
	}
	err = subs.GetWorker(WorkerOptions{Name: "Hits", RetryDelay: time.Millisecond}).Run(ctx, func(context.Context, *Batch) error { return nil })
	var sub *SubscriptionError
	if !errors.Is(err, ErrSubscriptionNotFound) || !errors.As(err, &sub) || sub.Status != SubscriptionStatusNotFound {
		t.Fatalf("worker of a deleted subscription: %v", err)
	}
	err = subs.GetWorker(WorkerOptions{Name: unnamed, RetryDelay: time.Millisecond}).Run(ctx, func(context.Context, *Batch) error { return nil })
	if !errors.Is(err, ErrSubscriptionClosed) {
		t.Fatalf("worker of a disabled subscription: %v", err)
	}

	missing := NewDocumentStore([]string{n.URL}, "nosuchdb")
	defer missing.Close()
	var dm *DatabaseDoesNotExistError
	if _, err := missing.Subscriptions().Create(ctx, SubscriptionOptions{Query: hitsQuery}); !errors.As(err, &dm) {
		t.Fatalf("Create on a missing database: %v", err)
	}
	err = missing.Subscriptions().GetWorker(WorkerOptions{Name: "x", RetryDelay: time.Millisecond}).Run(ctx, func(context.Context, *Batch) error { return nil })
	if !errors.As(err, &dm) {
		t.Fatalf("worker on a missing database: %v", err)
	}
}

func TestSubscriptionWorkerExistingAndNewDocuments(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()
	subs := store.Subscriptions()
	hit := func(seq int) bool { return seq%2 == 0 }
	ids := mustWrite(t, store, 0, 50, hit)
	if _, err := subs.Create(ctx, SubscriptionOptions{Name: "Hits", Query: hitsQuery}); err != nil {
		t.Fatal(err)
	}

	type seen struct {
		id   string
		seq  int
		etag int64
	}
	var (
		mu       sync.Mutex
		got      []seen
		bad      []string
		acked    atomic.Int64
		progress = make(chan int64, 100) // acknowledged documents so far
	)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := subs.GetWorker(WorkerOptions{Name: "Hits", MaxDocsPerBatch: 7, RetryDelay: 10 * time.Millisecond,
		OnAcknowledged: func(b *Batch) { progress <- acked.Add(int64(len(b.Items))) }})
	done := runWorker(wctx, w, func(_ context.Context, b *Batch) error {
		if len(b.Items) == 0 || len(b.Items) > 7 {
			return fmt.Errorf("batch of %d", len(b.Items))
		}
		mu.Lock()
		defer mu.Unlock()
		for _, it := range b.Items {
			var r Reading
			if err := it.Decode(&r); err != nil {
				return err
			}
			if r.ID != it.ID || r.Kind != "hit" || it.Metadata["@collection"] != "Readings" {
				bad = append(bad, fmt.Sprintf("%+v %v", r, it.Metadata))
			}
			got = append(got, seen{it.ID, r.Seq, cvEtag(t, it.ChangeVector)})
		}
		return nil
	})
	waitAcked := func(want int64) {
		t.Helper()
		for {
			if wait(t, progress, fmt.Sprintf("%d acknowledged documents", want)) >= want {
				return
			}
		}
	}

	waitAcked(25)
	st1, err := subs.State(ctx, "Hits")
	if err != nil {
		t.Fatal(err)
	}
	// New documents arrive while the worker waits.
	ids = append(ids, mustWrite(t, store, 50, 30, hit)...)
	waitAcked(40)
	st2, err := subs.State(ctx, "Hits")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := wait(t, done, "Run to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel = %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("unexpected documents: %v", bad)
	}
	var want []string
	for i, id := range ids {
		if hit(i) {
			want = append(want, id)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got %d documents, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].id != want[i] {
			t.Fatalf("document %d is %s, want %s", i, got[i].id, want[i])
		}
		if i > 0 && got[i].etag <= got[i-1].etag {
			t.Fatalf("not in etag order: %s (etag %d) after %s (etag %d)", got[i].id, got[i].etag, got[i-1].id, got[i-1].etag)
		}
	}
	p1, p2 := cvEtag(t, st1.ChangeVectorForNextBatchStartingPoint), cvEtag(t, st2.ChangeVectorForNextBatchStartingPoint)
	if p1 < got[24].etag || p2 < got[39].etag || p2 <= p1 {
		t.Fatalf("position %d after 25 documents (last etag %d), %d after 40 (last etag %d)", p1, got[24].etag, p2, got[39].etag)
	}
	if st2.LastBatchAckTime == nil || st2.LastClientConnectionTime == nil {
		t.Fatalf("state after acknowledgements: %+v", st2)
	}
}

func TestSubscriptionWorkerEnds(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()
	subs := store.Subscriptions()
	ids := mustWrite(t, store, 0, 10, allHit)
	if _, err := subs.Create(ctx, SubscriptionOptions{Name: "All", Query: "from Readings"}); err != nil {
		t.Fatal(err)
	}

	// A handler error: no acknowledgement, Run returns it, and the next
	// worker gets the same batch.
	boom := errors.New("boom")
	var first []string
	err := subs.GetWorker(WorkerOptions{Name: "All", MaxDocsPerBatch: 4}).Run(ctx, func(_ context.Context, b *Batch) error {
		for _, it := range b.Items {
			first = append(first, it.ID)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Run with a failing handler = %v", err)
	}
	if !slicesEqual(first, ids[:4]) {
		t.Fatalf("first batch %v", first)
	}

	// CloseWhenNoDocsLeft: everything once, then nil.
	var all []string
	batches := 0
	err = subs.GetWorker(WorkerOptions{Name: "All", MaxDocsPerBatch: 4, CloseWhenNoDocsLeft: true, Strategy: WaitForFree}).Run(ctx, func(_ context.Context, b *Batch) error {
		batches++
		for _, it := range b.Items {
			all = append(all, it.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Run with CloseWhenNoDocsLeft = %v", err)
	}
	if !slicesEqual(all, ids) || batches != 3 {
		t.Fatalf("%d batches: %v, want %v", batches, all, ids)
	}

	// Cancelling while the handler works: not acknowledged, delivered again.
	more := mustWrite(t, store, 10, 3, allHit)
	wctx, cancel := context.WithCancel(ctx)
	inHandler := make(chan struct{})
	done := runWorker(wctx, subs.GetWorker(WorkerOptions{Name: "All", Strategy: WaitForFree}), func(ctx context.Context, b *Batch) error {
		close(inHandler)
		<-ctx.Done()
		return nil // even a nil: ctx ended, so no acknowledgement
	})
	wait(t, inHandler, "the handler")
	cancel()
	if err := wait(t, done, "Run to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	var again []string
	err = subs.GetWorker(WorkerOptions{Name: "All", CloseWhenNoDocsLeft: true, Strategy: WaitForFree}).Run(ctx, func(_ context.Context, b *Batch) error {
		for _, it := range b.Items {
			again = append(again, it.ID)
		}
		return nil
	})
	if err != nil || !slicesEqual(again, more) {
		t.Fatalf("after a cancelled batch: %v, %v, want %v", again, err, more)
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSubscriptionTimeSpan(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Second:                       "00:00:05",
		10 * time.Millisecond:                 "00:00:00.0100000",
		5*time.Minute + 1500*time.Millisecond: "00:05:01.5000000",
		26 * time.Hour:                        "1.02:00:00",
	} {
		if got := timeSpan(d); got != want {
			t.Errorf("timeSpan(%v) = %q, want %q", d, got, want)
		}
	}
}

// collector gathers what a worker's handler got.
type collector struct {
	mu    sync.Mutex
	ids   []string
	batch chan int // total documents after each batch
}

func newCollector() *collector { return &collector{batch: make(chan int, 1000)} }

func (c *collector) handle(_ context.Context, b *Batch) error {
	c.mu.Lock()
	for _, it := range b.Items {
		c.ids = append(c.ids, it.ID)
	}
	n := len(c.ids)
	c.mu.Unlock()
	c.batch <- n
	return nil
}

func (c *collector) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.ids...)
}

// waitCount waits until the handler has seen at least n documents.
func (c *collector) waitCount(t *testing.T, n int) {
	t.Helper()
	for wait(t, c.batch, fmt.Sprintf("%d documents", n)) < n {
	}
}

func TestSubscriptionStrategies(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()
	subs := store.Subscriptions()
	ids := mustWrite(t, store, 0, 20, allHit)
	for _, name := range []string{"Free", "Take", "Wait"} {
		if _, err := subs.Create(ctx, SubscriptionOptions{Name: name, Query: "from Readings"}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("OpenIfFree", func(t *testing.T) {
		c1 := newCollector()
		ctx1, cancel1 := context.WithCancel(ctx)
		done1 := runWorker(ctx1, subs.GetWorker(WorkerOptions{Name: "Free", RetryDelay: 10 * time.Millisecond}), c1.handle)
		c1.waitCount(t, 1) // the first worker holds the subscription
		err := subs.GetWorker(WorkerOptions{Name: "Free", RetryDelay: 10 * time.Millisecond}).Run(ctx, func(context.Context, *Batch) error {
			return errors.New("the second worker got a batch")
		})
		var se *SubscriptionError
		if !errors.Is(err, ErrSubscriptionInUse) || !errors.As(err, &se) || se.Status != SubscriptionStatusInUse {
			t.Fatalf("second OpenIfFree worker: %v", err)
		}
		cancel1()
		if err := wait(t, done1, "the first worker"); !errors.Is(err, context.Canceled) {
			t.Fatalf("first worker: %v", err)
		}
	})

	t.Run("TakeOver", func(t *testing.T) {
		c1, c2 := newCollector(), newCollector()
		acked := make(chan int, 100)
		var total atomic.Int64
		done1 := runWorker(ctx, subs.GetWorker(WorkerOptions{Name: "Take", RetryDelay: 10 * time.Millisecond,
			OnAcknowledged: func(b *Batch) { acked <- int(total.Add(int64(len(b.Items)))) }}), c1.handle)
		for wait(t, acked, "the first worker's acknowledgements") < len(ids) {
		}
		ctx2, cancel2 := context.WithCancel(ctx)
		defer cancel2()
		done2 := runWorker(ctx2, subs.GetWorker(WorkerOptions{Name: "Take", Strategy: TakeOver, RetryDelay: 10 * time.Millisecond}), c2.handle)
		if err := wait(t, done1, "the first worker to be taken over"); !errors.Is(err, ErrSubscriptionInUse) {
			t.Fatalf("taken-over worker: %v", err)
		}
		more := mustWrite(t, store, 20, 5, allHit)
		c2.waitCount(t, 5)
		cancel2()
		if err := wait(t, done2, "the second worker"); !errors.Is(err, context.Canceled) {
			t.Fatalf("second worker: %v", err)
		}
		if !slicesEqual(c1.got(), ids) || !slicesEqual(c2.got(), more) {
			t.Fatalf("first worker got %v, second %v; want %v and %v", c1.got(), c2.got(), ids, more)
		}
		ids = append(ids, more...)
	})

	t.Run("WaitForFree", func(t *testing.T) {
		ctx1, cancel1 := context.WithCancel(ctx)
		inSecond := make(chan struct{})
		var batches int
		done1 := runWorker(ctx1, subs.GetWorker(WorkerOptions{Name: "Wait", MaxDocsPerBatch: 5}), func(ctx context.Context, b *Batch) error {
			if batches++; batches == 1 {
				return nil // acknowledged
			}
			close(inSecond) // the second batch stays in flight until the worker stops
			<-ctx.Done()
			return ctx.Err()
		})
		wait(t, inSecond, "the first worker's second batch")

		var firstStopped atomic.Bool
		var early atomic.Int64
		c2 := newCollector()
		waiting := make(chan struct{}, 1)
		w2 := subs.GetWorker(WorkerOptions{Name: "Wait", Strategy: WaitForFree, RetryDelay: 10 * time.Millisecond})
		w2.afterOptions = func(net.Conn) { waiting <- struct{}{} }
		ctx2, cancel2 := context.WithCancel(ctx)
		defer cancel2()
		done2 := runWorker(ctx2, w2, func(ctx context.Context, b *Batch) error {
			if !firstStopped.Load() {
				early.Add(1)
			}
			return c2.handle(ctx, b)
		})
		wait(t, waiting, "the second worker to ask")

		firstStopped.Store(true)
		cancel1()
		if err := wait(t, done1, "the first worker"); !errors.Is(err, context.Canceled) {
			t.Fatalf("first worker: %v", err)
		}
		c2.waitCount(t, len(ids)-5)
		cancel2()
		if err := wait(t, done2, "the second worker"); !errors.Is(err, context.Canceled) {
			t.Fatalf("second worker: %v", err)
		}
		if early.Load() != 0 {
			t.Fatalf("the waiting worker got %d batches while the first one held the subscription", early.Load())
		}
		// Everything after the first, acknowledged batch, the unacknowledged
		// second batch included.
		if !slicesEqual(c2.got(), ids[5:]) {
			t.Fatalf("second worker got %v, want %v", c2.got(), ids[5:])
		}
	})
}

func TestSubscriptionClosedByServer(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()
	subs := store.Subscriptions()
	ids := mustWrite(t, store, 0, 6, func(seq int) bool { return seq < 3 })

	// connected starts a worker on a new subscription and returns once it
	// processed its first batch.
	connected := func(t *testing.T, name string, o WorkerOptions) (<-chan error, *collector) {
		t.Helper()
		if _, err := subs.Create(ctx, SubscriptionOptions{Name: name, Query: hitsQuery}); err != nil {
			t.Fatal(err)
		}
		o.Name = name
		o.RetryDelay = 10 * time.Millisecond
		c := newCollector()
		done := runWorker(ctx, subs.GetWorker(o), c.handle)
		c.waitCount(t, 3)
		return done, c
	}

	t.Run("Delete", func(t *testing.T) {
		done, _ := connected(t, "Deleted", WorkerOptions{})
		if err := subs.Delete(ctx, "Deleted"); err != nil {
			t.Fatal(err)
		}
		if err := wait(t, done, "the worker"); !errors.Is(err, ErrSubscriptionNotFound) {
			t.Fatalf("worker of a deleted subscription: %v", err)
		}
	})
	t.Run("Disable", func(t *testing.T) {
		done, _ := connected(t, "Disabled", WorkerOptions{})
		if err := subs.Disable(ctx, "Disabled"); err != nil {
			t.Fatal(err)
		}
		err := wait(t, done, "the worker")
		var se *SubscriptionError
		if !errors.Is(err, ErrSubscriptionClosed) || !errors.As(err, &se) || se.CanReconnect {
			t.Fatalf("worker of a disabled subscription: %v", err)
		}
	})
	t.Run("DropConnection", func(t *testing.T) {
		done, _ := connected(t, "Dropped", WorkerOptions{})
		if err := subs.DropConnection(ctx, "Dropped"); err != nil {
			t.Fatal(err)
		}
		if err := wait(t, done, "the worker"); !errors.Is(err, ErrSubscriptionClosed) {
			t.Fatalf("dropped worker: %v", err)
		}
	})
	t.Run("UpdateReconnects", func(t *testing.T) {
		var reasons []error
		var mu sync.Mutex
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if _, err := subs.Create(ctx, SubscriptionOptions{Name: "Updated", Query: hitsQuery}); err != nil {
			t.Fatal(err)
		}
		c := newCollector()
		acked := make(chan struct{}, 10)
		done := runWorker(wctx, subs.GetWorker(WorkerOptions{Name: "Updated", RetryDelay: 10 * time.Millisecond,
			OnAcknowledged: func(*Batch) { acked <- struct{}{} },
			OnError:        func(err error) { mu.Lock(); reasons = append(reasons, err); mu.Unlock() }}), c.handle)
		c.waitCount(t, 3)
		wait(t, acked, "the acknowledgement") // else the update may overtake it (ConcurrencyReconnect)
		// A new query from the beginning: the worker is closed, reconnects
		// and gets the other documents.
		if _, err := subs.Update(ctx, SubscriptionOptions{Name: "Updated", Query: "from Readings where Kind = 'miss'", ChangeVector: BeginningOfTime}); err != nil {
			t.Fatal(err)
		}
		c.waitCount(t, 6)
		cancel()
		if err := wait(t, done, "the worker"); !errors.Is(err, context.Canceled) {
			t.Fatalf("worker: %v", err)
		}
		if !slicesEqual(c.got(), ids) {
			t.Fatalf("got %v, want %v", c.got(), ids)
		}
		mu.Lock()
		defer mu.Unlock()
		var se *SubscriptionError
		if len(reasons) != 1 || !errors.As(reasons[0], &se) || se.Status != SubscriptionStatusClosed || !se.CanReconnect {
			t.Fatalf("reconnect reasons: %v", reasons)
		}
	})
	t.Run("ConnectionLost", func(t *testing.T) {
		if _, err := subs.Create(ctx, SubscriptionOptions{Name: "Lost", Query: hitsQuery}); err != nil {
			t.Fatal(err)
		}
		var conns []net.Conn
		var mu sync.Mutex
		errs := make(chan error, 10)
		w := subs.GetWorker(WorkerOptions{Name: "Lost", RetryDelay: 10 * time.Millisecond, OnError: func(err error) { errs <- err }})
		w.afterOptions = func(c net.Conn) { mu.Lock(); conns = append(conns, c); mu.Unlock() }
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		c := newCollector()
		done := runWorker(wctx, w, func(ctx context.Context, b *Batch) error {
			if len(c.got()) == 0 {
				mu.Lock()
				conns[0].Close() // the network fails during the first batch
				mu.Unlock()
			}
			return c.handle(ctx, b)
		})
		wait(t, errs, "the network error")
		c.waitCount(t, 6) // the first batch again, from a new connection
		more := mustWrite(t, store, 6, 2, allHit)
		c.waitCount(t, 8)
		cancel()
		if err := wait(t, done, "the worker"); !errors.Is(err, context.Canceled) {
			t.Fatalf("worker: %v", err)
		}
		want := append(append(append([]string(nil), ids[:3]...), ids[:3]...), more...)
		if !slicesEqual(c.got(), want) {
			t.Fatalf("got %v, want %v", c.got(), want)
		}
	})
}

// TestSubscriptionCrashingWorkers is the crash test of issue 6: 10,000
// matching documents (and 2,000 that the where clause leaves out), workers
// that crash at random points (cancelled before, while or after handling a
// batch; connection cut in the middle of a batch or right after the
// acknowledgement was sent), a new worker after each crash, and more
// documents written meanwhile. In the end every matching document was
// handled in a batch whose acknowledgement was sent, and nothing else was
// delivered.
func TestSubscriptionCrashingWorkers(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()
	subs := store.Subscriptions()
	hit := func(seq int) bool { return seq%6 != 5 }

	const initial, chunks, chunk = 12_000, 50, 24
	ids := mustWrite(t, store, 0, initial, hit)
	if _, err := subs.Create(ctx, SubscriptionOptions{Name: "Crash", Query: hitsQuery}); err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	var (
		mu         sync.Mutex
		delivered  = map[string]int{}  // id → times the server delivered it
		processed  = map[string]bool{} // handled in a batch whose acknowledgement was sent
		confirmed  = map[string]bool{} // … and confirmed by the server
		problems   []string
		deliveries int
		ackedDocs  atomic.Int64
		ackTick    = make(chan struct{}, 1)
	)
	problem := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}

	// The writer adds chunks while the workers work, paced by their
	// acknowledgements; it is done long before the initial documents are
	// (10,000 matching, the last chunk after 49·150 acknowledged).
	var written []string
	writerDone := make(chan error, 1)
	go func() {
		for i := range chunks {
			for ackedDocs.Load() < int64(i*150) {
				select {
				case <-ackTick:
				case <-time.After(waitLimit):
					writerDone <- errors.New("the writer waited too long for acknowledgements")
					return
				}
			}
			more, err := writeReadings(ctx, store, initial+i*chunk, chunk, hit)
			if err != nil {
				writerDone <- err
				return
			}
			mu.Lock()
			written = append(written, more...)
			mu.Unlock()
		}
		writerDone <- nil
	}()
	writerFinished := false
	var writerErr error

	crashes := map[string]int{}
	workers, reconnects := 0, 0
	for round := 0; ; round++ {
		if round > 5000 {
			t.Fatal("the workers do not get through the documents")
		}
		if !writerFinished {
			select {
			case writerErr = <-writerDone:
				writerFinished = true
			default:
			}
		}
		finalRound := writerFinished // nothing is written after this worker starts

		// Crash plan: handle crashAt batches, then crash in one of five
		// ways; the two network failures do not end the worker, which
		// reconnects and gets a new plan.
		wctx, cancel := context.WithCancel(ctx)
		var conn net.Conn
		var lastEtag int64
		var crashAt, mode, networkFailures int
		var pending []string // the batch handed to the handler last
		cutAfterAck := false
		plan := func() {
			crashAt, mode = rng.IntN(4), rng.IntN(5)
			if networkFailures >= 2 {
				mode = rng.IntN(3)
			}
		}
		plan()
		strategy := []string{TakeOver, WaitForFree}[rng.IntN(2)]
		w := subs.GetWorker(WorkerOptions{Name: "Crash", Strategy: strategy, MaxDocsPerBatch: 1 + rng.IntN(256),
			CloseWhenNoDocsLeft: true, RetryDelay: 5 * time.Millisecond,
			OnError: func(error) { reconnects++ },
			OnAcknowledged: func(b *Batch) {
				mu.Lock()
				for _, it := range b.Items {
					confirmed[it.ID] = true
				}
				mu.Unlock()
			}})
		w.afterOptions = func(c net.Conn) { conn, lastEtag = c, 0 }
		w.afterAck = func(c net.Conn) {
			mu.Lock()
			for _, id := range pending {
				processed[id] = true
			}
			mu.Unlock()
			ackedDocs.Add(int64(len(pending)))
			select {
			case ackTick <- struct{}{}:
			default:
			}
			if cutAfterAck {
				cutAfterAck = false
				c.Close() // the confirmation is lost; the acknowledgement may or may not have arrived
			}
		}
		handle := func(items []BatchItem) {
			mu.Lock()
			defer mu.Unlock()
			for _, it := range items {
				var r Reading
				if err := it.Decode(&r); err != nil {
					problem("%s: %v", it.ID, err)
				} else if r.Kind != "hit" || !hit(r.Seq) {
					problem("%s does not match the query: %+v", it.ID, r)
				}
			}
		}
		batches := 0
		err := w.Run(wctx, func(hctx context.Context, b *Batch) error {
			pending = pending[:0]
			mu.Lock()
			for _, it := range b.Items {
				delivered[it.ID]++
				deliveries++
				if e := cvEtag(t, it.ChangeVector); e <= lastEtag {
					problem("%s (etag %d) after etag %d on one connection", it.ID, e, lastEtag)
				} else {
					lastEtag = e
				}
			}
			mu.Unlock()
			if batches++; batches <= crashAt {
				handle(b.Items)
				for _, it := range b.Items {
					pending = append(pending, it.ID)
				}
				return nil
			}
			batches = 0
			crashes[[]string{"cancel before", "cancel midway", "cancel after", "cut midway", "cut after ack"}[mode]]++
			k := rng.IntN(len(b.Items) + 1)
			switch mode {
			case 0: // cancelled before handling anything
				cancel()
				return hctx.Err()
			case 1: // cancelled midway
				handle(b.Items[:k])
				cancel()
				return hctx.Err()
			case 2: // cancelled after handling it all, before the acknowledgement
				handle(b.Items)
				cancel()
				return nil
			case 3: // the connection breaks midway; the handler finishes
				handle(b.Items[:k])
				conn.Close()
				handle(b.Items[k:])
			case 4: // the connection breaks right after the acknowledgement
				handle(b.Items)
				cutAfterAck = true
			}
			networkFailures++
			plan()
			for _, it := range b.Items {
				pending = append(pending, it.ID)
			}
			return nil
		})
		cancel()
		workers++
		if err == nil {
			if finalRound {
				break // nothing left, and nothing more comes
			}
			continue
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("worker %d: %v", workers, err)
		}
	}
	if writerErr != nil {
		t.Fatal(writerErr)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("problems:\n%s", strings.Join(problems, "\n"))
	}
	all := append(ids, written...)
	want, missing := 0, []string{}
	for i, id := range all {
		if !hit(i) {
			if delivered[id] > 0 {
				t.Errorf("%s does not match and was delivered", id)
			}
			continue
		}
		want++
		if !processed[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d matching documents were never processed, e.g. %v", len(missing), want, missing[:min(5, len(missing))])
	}
	for id := range confirmed {
		if !processed[id] {
			t.Errorf("%s confirmed without an acknowledgement", id)
		}
	}
	if len(delivered) != want {
		t.Fatalf("%d distinct documents delivered, want %d", len(delivered), want)
	}
	st, err := subs.State(ctx, "Crash")
	if err != nil {
		t.Fatal(err)
	}
	s := store.OpenSession()
	var last *Reading
	if _, err := s.Load(all[len(all)-1], &last); err != nil {
		t.Fatal(err)
	}
	cv, _ := s.GetChangeVectorFor(last)
	if cvEtag(t, st.ChangeVectorForNextBatchStartingPoint) < cvEtag(t, cv) {
		t.Fatalf("position %s is before the last document (%s)", st.ChangeVectorForNextBatchStartingPoint, cv)
	}
	t.Logf("%d matching documents (%d written during the test), %d workers, crashes %v, %d reconnects; %d deliveries, %d redeliveries; %d documents processed without a confirmation",
		want, len(written), workers, crashes, reconnects, deliveries, deliveries-len(delivered), len(processed)-len(confirmed))
}

func TestSubscriptionIncludesAndDecode(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()
	s := store.OpenSession()
	acme := &Company{Name: "Acme"}
	if err := s.Store(acme); err != nil {
		t.Fatal(err)
	}
	o := &Order{Company: acme.ID, Total: 12.5}
	if err := s.Store(o); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	subs := store.Subscriptions()
	if _, err := subs.Create(ctx, SubscriptionOptions{Name: "WithCompany", Query: "from Orders as o include o.Company"}); err != nil {
		t.Fatal(err)
	}
	var b *Batch
	err := subs.GetWorker(WorkerOptions{Name: "WithCompany", CloseWhenNoDocsLeft: true}).Run(ctx, func(_ context.Context, got *Batch) error {
		b = got
		return nil
	})
	if err != nil || b == nil || len(b.Items) != 1 {
		t.Fatalf("Run = %v, batch %+v", err, b)
	}
	it := b.Items[0]
	var got Order
	if err := it.Decode(&got); err != nil || got.ID != o.ID || got.Total != 12.5 || got.Company != acme.ID {
		t.Fatalf("Decode = %+v, %v", got, err)
	}
	var m map[string]any
	if err := it.Decode(&m); err != nil || m["Total"] != 12.5 || m["@metadata"] != nil {
		t.Fatalf("Decode into a map = %v, %v", m, err)
	}
	if it.ID != o.ID || it.ChangeVector == "" || it.Metadata["@collection"] != "Orders" {
		t.Fatalf("item %+v", it)
	}
	var c Company
	if raw, ok := b.Includes[acme.ID]; !ok || json.Unmarshal(raw, &c) != nil || c.Name != "Acme" {
		t.Fatalf("includes %s", b.Includes)
	}
}
