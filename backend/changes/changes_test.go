package changes

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
)

func str(s string) *string { return &s }

// next waits for the subscriber's next messages (decoded), or fails.
func next(t *testing.T, s *Sub) []map[string]any {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case <-s.Ready():
		case <-deadline:
			t.Fatal("no message within 5 s")
		}
		msgs, _, reason := s.Take()
		if reason != "" {
			t.Fatalf("dropped: %s", reason)
		}
		if len(msgs) == 0 {
			continue
		}
		var out []map[string]any
		for _, m := range msgs {
			var v map[string]any
			if err := json.Unmarshal(m, &v); err != nil {
				t.Fatalf("bad message %s: %v", m, err)
			}
			out = append(out, v)
		}
		return out
	}
}

// quiet checks the subscriber gets nothing for a while.
func quiet(t *testing.T, s *Sub) {
	t.Helper()
	select {
	case <-s.Ready():
		msgs, _, _ := s.Take()
		if len(msgs) > 0 {
			t.Fatalf("unexpected messages: %q", msgs)
		}
	case <-time.After(50 * time.Millisecond):
	}
}

func ids(msgs []map[string]any) []string {
	var out []string
	for _, m := range msgs {
		v, _ := m["Value"].(map[string]any)
		key := v["Id"]
		if key == nil {
			key = v["Name"]
		}
		if key == nil {
			key = v["OperationId"]
			delete(v, "Type")
		}
		out = append(out, fmt.Sprintf("%v:%v:%v", m["Type"], v["Type"], key))
	}
	return out
}

func TestFilters(t *testing.T) {
	h := New(Options{FrameInterval: time.Millisecond})
	cases := []struct {
		cmd, param string
		want       []string
	}{
		{"watch-doc", "Users/1", []string{"DocumentChange:Put:users/1", "DocumentChange:Delete:users/1"}},
		{"watch-prefix", "USERS/", []string{"DocumentChange:Put:users/1", "DocumentChange:Put:users/2", "DocumentChange:Delete:users/1"}},
		{"watch-collection", "orders", []string{"DocumentChange:Put:orders/1"}},
		{"watch-docs", "", []string{"DocumentChange:Put:users/1", "DocumentChange:Put:users/2", "DocumentChange:Put:orders/1", "DocumentChange:Delete:users/1"}},
		{"watch-index", "Orders/ByTotal", []string{"IndexChange:BatchCompleted:Orders/ByTotal"}},
		{"watch-indexes", "", []string{"IndexChange:BatchCompleted:Orders/ByTotal", "IndexChange:IndexAdded:Other"}},
		{"watch-operation", "7", []string{"OperationStatusChange:<nil>:7"}},
		{"watch-operations", "", []string{"OperationStatusChange:<nil>:7", "OperationStatusChange:<nil>:8"}},
	}
	for _, tc := range cases {
		t.Run(tc.cmd, func(t *testing.T) {
			s := h.Subscribe("Shop")
			defer s.Close()
			var p *string
			if tc.param != "" {
				p = str(tc.param)
			}
			if err := s.Apply(tc.cmd, p, nil); err != nil {
				t.Fatal(err)
			}
			// Another database's subscriber and changes are not seen.
			other := h.Subscribe("other")
			defer other.Close()
			h.Documents("other", []storage.Change{{Type: "Put", ID: "users/1", Collection: "Users"}})
			h.Documents("SHOP", []storage.Change{
				{Type: "Put", ID: "users/1", Collection: "Users", ChangeVector: "A:1-x"},
				{Type: "Put", ID: "users/2", Collection: "Users", ChangeVector: "A:2-x"},
				{Type: "Put", ID: "orders/1", Collection: "Orders", ChangeVector: "A:3-x"},
			})
			h.Documents("shop", []storage.Change{{Type: "Delete", ID: "users/1", Collection: "Users", ChangeVector: "A:4-x"}})
			h.Index("shop", IndexChange{Type: "BatchCompleted", Name: "Orders/ByTotal", Etag: 4})
			h.Index("shop", IndexChange{Type: "IndexAdded", Name: "Other"})
			h.Operation("shop", OperationChange{ID: 7, State: map[string]any{"Status": "Completed"}})
			h.Operation("shop", OperationChange{ID: 8, State: map[string]any{"Status": "InProgress"}})
			h.Operation("", OperationChange{ID: 9})
			var got []string
			for len(got) < len(tc.want) {
				got = append(got, ids(next(t, s))...)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			quiet(t, s)
			// Unwatching stops them.
			if err := s.Apply(strings.Replace(tc.cmd, "watch-", "unwatch-", 1), p, nil); err != nil {
				t.Fatal(err)
			}
			h.Documents("shop", []storage.Change{{Type: "Put", ID: "users/1", Collection: "Users"}, {Type: "Put", ID: "orders/1", Collection: "Orders"}})
			h.Index("shop", IndexChange{Type: "BatchCompleted", Name: "Orders/ByTotal"})
			h.Operation("shop", OperationChange{ID: 7})
			quiet(t, s)
		})
	}
}

func TestWireShapes(t *testing.T) {
	h := New(Options{FrameInterval: time.Millisecond})
	s := h.Subscribe("db")
	defer s.Close()
	for _, c := range []string{"watch-docs", "watch-indexes", "watch-operations"} {
		if err := s.Apply(c, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	h.Documents("db", []storage.Change{{Type: "Put", ID: "a/1", Collection: "As", ChangeVector: "A:1-abc"}})
	h.Index("db", IndexChange{Type: "BatchCompleted", Name: "Ix", Etag: 1})
	h.Operation("db", OperationChange{ID: 3, State: map[string]any{"Status": "Completed", "Result": nil, "Progress": nil}})
	var raw []string
	for len(raw) < 3 {
		<-s.Ready()
		msgs, _, _ := s.Take()
		for _, m := range msgs {
			raw = append(raw, string(m))
		}
	}
	want := []string{
		`{"Type":"DocumentChange","Value":{"Type":"Put","Id":"a/1","CollectionName":"As","ChangeVector":"A:1-abc"}}`,
		`{"Type":"IndexChange","Value":{"Type":"BatchCompleted","Name":"Ix","Etag":1}}`,
		`{"Type":"OperationStatusChange","Value":{"OperationId":3,"State":{"Progress":null,"Result":null,"Status":"Completed"}}}`,
	}
	for i := range want {
		if raw[i] != want[i] {
			t.Errorf("message %d:\n got %s\nwant %s", i, raw[i], want[i])
		}
	}
}

func TestBadCommands(t *testing.T) {
	h := New(Options{MaxWatches: 2})
	s := h.Subscribe("db")
	defer s.Close()
	for _, c := range []struct {
		cmd   string
		param *string
	}{{"frobnicate", nil}, {"watch-nothing", nil}, {"watch-doc", nil}, {"watch-doc", str("  ")}, {"watch-operation", str("x")}} {
		if err := s.Apply(c.cmd, c.param, nil); err == nil {
			t.Errorf("%s %v: accepted", c.cmd, c.param)
		}
	}
	// Counter and time-series watches need their parameters.
	for _, c := range []struct {
		cmd    string
		param  *string
		params []string
	}{{"watch-counter", nil, nil}, {"watch-document-counters", str(" "), nil}, {"watch-timeseries", nil, nil},
		{"watch-all-document-timeseries", nil, nil}, {"watch-document-counter", str("d/1"), nil},
		{"watch-document-counter", nil, []string{"d/1"}}, {"watch-document-timeseries", nil, []string{"d/1", ""}},
		{"unwatch-document-timeseries", nil, []string{"d/1", "x", "y"}}} {
		if err := s.Apply(c.cmd, c.param, c.params); err == nil {
			t.Errorf("%s %v %v: accepted", c.cmd, c.param, c.params)
		}
	}
	// Features Rookery lacks are accepted (and never fire); they do not
	// count against MaxWatches.
	for _, c := range []string{"watch-topology-change", "watch-aggressive-caching", "unwatch-topology-change"} {
		if err := s.Apply(c, str(""), nil); err != nil {
			t.Errorf("%s: %v", c, err)
		}
	}
	if err := s.Apply("watch-doc", str("a"), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply("watch-doc", str("b"), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply("watch-doc", str("c"), nil); err == nil {
		t.Fatal("a third watch passed MaxWatches 2")
	}
}

// A subscriber that never takes is dropped once its queue passes
// MaxPending, while the publisher never waits and the others keep getting
// everything.
func TestSlowSubscriberDroppedPublisherNeverBlocks(t *testing.T) {
	h := New(Options{MaxPending: 100, FrameInterval: time.Millisecond})
	slow := h.Subscribe("db")
	defer slow.Close()
	fast := h.Subscribe("db")
	defer fast.Close()
	for _, s := range []*Sub{slow, fast} {
		if err := s.Apply("watch-docs", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan int)
	var taken atomic.Int64
	go func() {
		n := 0
		for n < 1000 {
			<-fast.Ready()
			msgs, _, reason := fast.Take()
			if reason != "" {
				break
			}
			n += len(msgs)
			taken.Store(int64(n))
		}
		got <- n
	}()
	var worst time.Duration
	for i := range 1000 {
		start := time.Now()
		h.Documents("db", []storage.Change{{Type: "Put", ID: fmt.Sprintf("d/%d", i), Collection: "Ds"}})
		worst = max(worst, time.Since(start))
		if i%50 == 0 {
			// Several dispatches; and the fast subscriber is let catch up to
			// within 20 (on a loaded machine under -race its goroutine can
			// fall MaxPending behind and be dropped too, seen in CI). The
			// slow one never takes, so it still passes MaxPending.
			time.Sleep(2 * time.Millisecond)
			for wait := time.Now().Add(5 * time.Second); taken.Load() < int64(i-20) && time.Now().Before(wait); {
				time.Sleep(time.Millisecond)
			}
		}
	}
	if worst > 50*time.Millisecond {
		t.Errorf("a publish took %v", worst)
	}
	if n := <-got; n != 1000 {
		t.Fatalf("the fast subscriber got %d of 1000", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		msgs, code, reason := slow.Take()
		if reason != "" {
			if code != CodePolicy || !strings.HasPrefix(reason, "too slow: ") || !strings.Contains(reason, "notifications pending") {
				t.Fatalf("closed with %d %q", code, reason)
			}
			if len(msgs) != 0 {
				t.Fatal("a dropped subscriber still has messages")
			}
			break
		}
		if len(msgs) > 0 {
			t.Fatalf("the slow subscriber's queue was not discarded (%d messages)", len(msgs))
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow subscriber was never dropped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := h.Stats()
	if st.DroppedSlow != 1 || st.Connections != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Fail delivers its last message before the close; Drop discards the
// queue; a database with no subscriber left has no feed.
func TestFailDropAndFeedLifecycle(t *testing.T) {
	h := New(Options{FrameInterval: time.Millisecond})
	s := h.Subscribe("db")
	s.Send([]byte(`{"x":1}`))
	s.Fail(CodePolicy, "bad command", []byte(`{"Type":"Error"}`))
	msgs, _, reason := s.Take()
	if len(msgs) != 2 || reason != "" {
		t.Fatalf("got %q %q", msgs, reason)
	}
	if _, code, reason := s.Take(); code != CodePolicy || reason != "bad command" {
		t.Fatalf("got %d %q", code, reason)
	}
	s.Close()
	if h.feed("db") != nil {
		t.Fatal("the feed outlived its last subscriber")
	}
	a, b := h.Subscribe("x"), h.Subscribe("y")
	a.Send([]byte(`{}`))
	h.DropDatabase("X", "database deleted")
	if msgs, code, reason := a.Take(); len(msgs) != 0 || code != CodeGoingAway || reason != "database deleted" {
		t.Fatalf("got %q %d %q", msgs, code, reason)
	}
	if _, _, reason := b.Take(); reason != "" {
		t.Fatal("another database's subscriber was dropped")
	}
	h.DropAll("server stopping")
	if _, _, reason := b.Take(); reason != "server stopping" {
		t.Fatalf("got %q", reason)
	}
	a.Close()
	b.Close()
	if h.Stats().Connections != 0 {
		t.Fatal(h.Stats())
	}
}

// Frames are paced: while changes keep coming a subscriber gets at most one
// frame per FrameInterval, each carrying what accumulated.
func TestPacing(t *testing.T) {
	h := New(Options{FrameInterval: 50 * time.Millisecond})
	s := h.Subscribe("db")
	defer s.Close()
	if err := s.Apply("watch-docs", nil, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	frames, n := 0, 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			h.Documents("db", []storage.Change{{Type: "Put", ID: fmt.Sprint("d/", i)}})
			time.Sleep(time.Millisecond)
		}
	}()
	for n < 200 {
		select {
		case <-s.Ready():
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d of 200", n)
		}
		msgs, _, _ := s.Take()
		if len(msgs) > 0 {
			frames++
			n += len(msgs)
		}
	}
	<-done
	el := time.Since(start)
	if limit := int(el/(50*time.Millisecond)) + 2; frames > limit {
		t.Fatalf("%d frames in %v (at most %d)", frames, el, limit)
	}
}

// With many subscribers the frames are spaced so that together they get at
// most FrameBudget a second; each still receives every notification.
func TestFrameBudget(t *testing.T) {
	const subs, budget = 50, 500 // 100 ms between frames, not FrameInterval's 1 ms
	h := New(Options{FrameInterval: time.Millisecond, FrameBudget: budget})
	var all []*Sub
	for range subs {
		s := h.Subscribe("db")
		defer s.Close()
		if err := s.Apply("watch-docs", nil, nil); err != nil {
			t.Fatal(err)
		}
		all = append(all, s)
	}
	start := time.Now()
	go func() {
		for i := range 300 {
			h.Documents("db", []storage.Change{{Type: "Put", ID: fmt.Sprint("d/", i)}})
			time.Sleep(time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	frames := make([]int, subs)
	for i, s := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 300; {
				select {
				case <-s.Ready():
				case <-time.After(5 * time.Second):
					t.Errorf("subscriber %d: only %d of 300", i, n)
					return
				}
				msgs, _, _ := s.Take()
				if len(msgs) > 0 {
					frames[i]++
					n += len(msgs)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	limit := int(el/(subs*time.Second/budget)) + 2
	for i, f := range frames {
		if f > limit {
			t.Fatalf("subscriber %d: %d frames in %v (at most %d at %d frames/s for %d subscribers)", i, f, el, limit, budget, subs)
		}
	}
}

// While changes keep coming, each tick hands its frames to one group of
// subscribers (every groups-th in subscription order), so the frames are
// spread over the interval instead of written to every socket at once; the
// others keep what was queued for them until their turn. After a quiet
// spell every subscriber that is owed a frame gets it at once.
func TestDispatchStaggersGroups(t *testing.T) {
	const n, groups = 20, 5 // 20 subscribers at 4,000 frames/s: 5 ms apart, 5 ticks of 1 ms
	h := New(Options{FrameInterval: time.Millisecond, FrameBudget: 4000})
	if g := h.groups(n); g != groups {
		t.Fatalf("groups(%d) = %d, want %d", n, g, groups)
	}
	if g := h.groups(4); g != 1 {
		t.Fatalf("groups(4) = %d, want 1 (4 subscribers fit in one tick's budget)", g)
	}
	var subs []*Sub
	for range n {
		s := h.Subscribe("db")
		defer s.Close()
		if err := s.Apply("watch-docs", nil, nil); err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	f := h.feed("db")
	doc := func(i int) []item {
		return []item{{kind: kindDocs, docs: []storage.Change{{Type: "Put", ID: fmt.Sprint("d/", i)}}}}
	}
	got := make([]int, n)
	take := func(tick uint64, want func(*Sub) bool) {
		t.Helper()
		for i, s := range subs {
			signalled := false
			select {
			case <-s.Ready():
				signalled = true
			default:
			}
			if signalled != want(s) {
				t.Fatalf("tick %d: subscriber %d (seq %d) signalled %v, want %v", tick, i, s.seq, signalled, want(s))
			}
			if signalled {
				msgs, _, _ := s.Take()
				got[i] += len(msgs)
			}
		}
	}
	for tick := range uint64(groups) {
		owed := f.dispatch(doc(int(tick)), subs, tick, groups, false)
		if want := n - n/groups; owed != want { // everyone got one more; this tick's group was handed all

			t.Fatalf("tick %d: %d owed a frame, want %d", tick, owed, want)
		}
		take(tick, func(s *Sub) bool { return s.seq%groups == tick })
	}
	for i, s := range subs { // each got everything up to its turn
		if want := int(s.seq%groups) + 1; got[i] != want {
			t.Fatalf("subscriber %d (seq %d): %d notifications by its turn, want %d", i, s.seq, got[i], want)
		}
	}
	// A quiet spell: everyone owed gets its frame, whatever the turn.
	if owed := f.dispatch(nil, subs, 1, groups, true); owed != 0 {
		t.Fatalf("%d still owed after a dispatch to all", owed)
	}
	take(groups, func(s *Sub) bool { return s.seq%groups != groups-1 }) // the last group took all 5 at its turn
	for i := range subs {
		if got[i] != groups {
			t.Fatalf("subscriber %d: %d of %d notifications", i, got[i], groups)
		}
	}
}

// itemKeys names counter and time-series notifications
// "Type:Value.Type:DocumentId/Name".
func itemKeys(msgs []map[string]any) []string {
	var out []string
	for _, m := range msgs {
		v, _ := m["Value"].(map[string]any)
		out = append(out, fmt.Sprintf("%v:%v:%v/%v", m["Type"], v["Type"], v["DocumentId"], v["Name"]))
	}
	return out
}

func publishItems(h *Hub, db string) {
	h.Items(db, []storage.ItemChange{
		{Kind: storage.KindCounters, Type: "Put", DocID: "users/1", Collection: "Users", Name: "Likes", Value: 1},
		{Kind: storage.KindCounters, Type: "Increment", DocID: "users/1", Collection: "Users", Name: "Views", Value: 5},
		{Kind: storage.KindCounters, Type: "Increment", DocID: "users/2", Collection: "Users", Name: "likes", Value: 2},
		{Kind: storage.KindTimeSeries, Type: "Put", DocID: "users/1", Collection: "Users", Name: "HeartRate", From: 0, To: 0},
		{Kind: storage.KindTimeSeries, Type: "Put", DocID: "users/2", Collection: "Users", Name: "heartrate", From: 0, To: 0},
	})
	// A document change is not a counter's (nor the reverse).
	h.Documents(db, []storage.Change{{Type: "Put", ID: "users/1", Collection: "Users"}})
	h.Items(db, []storage.ItemChange{
		{Kind: storage.KindTimeSeries, Type: "Delete", DocID: "Users/1", Collection: "Users", Name: "Steps", From: storage.TSMin, To: storage.TSMax},
		{Kind: storage.KindCounters, Type: "Delete", DocID: "USERS/1", Collection: "Users", Name: "LIKES"},
	})
}

// Each counter and time-series watch gets exactly its notifications (ids
// and names case-insensitive), and nothing once unwatched.
func TestItemFilters(t *testing.T) {
	h := New(Options{FrameInterval: time.Millisecond})
	cases := []struct {
		cmd    string
		param  string
		params []string
		want   []string
	}{
		{"watch-counters", "", nil, []string{"CounterChange:Put:users/1/Likes", "CounterChange:Increment:users/1/Views",
			"CounterChange:Increment:users/2/likes", "CounterChange:Delete:USERS/1/LIKES"}},
		{"watch-counter", "LIKES", nil, []string{"CounterChange:Put:users/1/Likes", "CounterChange:Increment:users/2/likes",
			"CounterChange:Delete:USERS/1/LIKES"}},
		{"watch-document-counters", "Users/1", nil, []string{"CounterChange:Put:users/1/Likes", "CounterChange:Increment:users/1/Views",
			"CounterChange:Delete:USERS/1/LIKES"}},
		{"watch-document-counter", "", []string{"users/1", "likes"}, []string{"CounterChange:Put:users/1/Likes", "CounterChange:Delete:USERS/1/LIKES"}},
		{"watch-all-timeseries", "", nil, []string{"TimeSeriesChange:Put:users/1/HeartRate", "TimeSeriesChange:Put:users/2/heartrate",
			"TimeSeriesChange:Delete:Users/1/Steps"}},
		{"watch-timeseries", "HEARTRATE", nil, []string{"TimeSeriesChange:Put:users/1/HeartRate", "TimeSeriesChange:Put:users/2/heartrate"}},
		{"watch-all-document-timeseries", "users/1", nil, []string{"TimeSeriesChange:Put:users/1/HeartRate", "TimeSeriesChange:Delete:Users/1/Steps"}},
		{"watch-document-timeseries", "", []string{"USERS/2", "heartRate"}, []string{"TimeSeriesChange:Put:users/2/heartrate"}},
	}
	for _, tc := range cases {
		t.Run(tc.cmd, func(t *testing.T) {
			s := h.Subscribe("Shop")
			defer s.Close()
			var p *string
			if tc.param != "" {
				p = str(tc.param)
			}
			if h.WantsItems("shop") {
				t.Fatal("items wanted before any counter or time-series watch")
			}
			if err := s.Apply(tc.cmd, p, tc.params); err != nil {
				t.Fatal(err)
			}
			if !h.WantsItems("SHOP") || h.WantsItems("other") {
				t.Fatal("WantsItems does not follow the watch")
			}
			other := h.Subscribe("other")
			defer other.Close()
			publishItems(h, "other")
			publishItems(h, "shop")
			var got []string
			for len(got) < len(tc.want) {
				got = append(got, itemKeys(next(t, s))...)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			quiet(t, s)
			if err := s.Apply(strings.Replace(tc.cmd, "watch-", "unwatch-", 1), p, tc.params); err != nil {
				t.Fatal(err)
			}
			if h.WantsItems("shop") {
				t.Fatal("items still wanted after the unwatch")
			}
			publishItems(h, "shop")
			quiet(t, s)
		})
	}
}

// WantsItems counts the watches of every subscriber: twice the same watch
// needs two unwatches, an extra unwatch does not go below zero, and a
// subscriber that goes away takes its watches along.
func TestWantsItemsCounting(t *testing.T) {
	h := New(Options{FrameInterval: time.Millisecond})
	a, b := h.Subscribe("db"), h.Subscribe("db")
	defer b.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.Apply("unwatch-counters", nil, nil))
	if h.WantsItems("db") {
		t.Fatal("an unwatch made a watch")
	}
	must(a.Apply("watch-counters", nil, nil))
	must(a.Apply("watch-counters", nil, nil))
	must(a.Apply("unwatch-counters", nil, nil))
	if !h.WantsItems("db") {
		t.Fatal("one of two watches left, yet not wanted")
	}
	must(b.Apply("watch-document-timeseries", nil, []string{"d/1", "s"}))
	must(a.Apply("unwatch-counters", nil, nil))
	if !h.WantsItems("db") {
		t.Fatal("b's watch forgotten")
	}
	must(a.Apply("watch-timeseries", str("s"), nil))
	a.Close()
	must(a.Apply("watch-counters", nil, nil)) // closed: changes nothing
	must(b.Apply("unwatch-document-timeseries", nil, []string{"D/1", "S"}))
	if h.WantsItems("db") {
		t.Fatal("wanted after every watch went away")
	}
}

func TestItemWireShapes(t *testing.T) {
	h := New(Options{FrameInterval: time.Millisecond})
	s := h.Subscribe("db")
	defer s.Close()
	for _, c := range []string{"watch-counters", "watch-all-timeseries"} {
		if err := s.Apply(c, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	h.Items("db", []storage.ItemChange{
		{Kind: storage.KindCounters, Type: "Increment", DocID: "users/1", Collection: "Users", Name: "Likes", Value: 42, ChangeVector: "A:7-abc, B:3-def"},
		{Kind: storage.KindTimeSeries, Type: "Put", DocID: "users/1", Collection: "Users", Name: "HeartRate", ChangeVector: "A:8-abc",
			From: 1700000000123, To: 1700000060000},
		{Kind: storage.KindTimeSeries, Type: "Delete", DocID: "users/1", Collection: "Users", Name: "HeartRate", ChangeVector: "A:9-abc",
			From: storage.TSMin, To: storage.TSMax},
		{Kind: storage.KindCounters, Type: "Delete", DocID: "users/1", Collection: "Users", Name: "Likes", ChangeVector: "A:10-abc"},
	})
	var raw []string
	for len(raw) < 4 {
		<-s.Ready()
		msgs, _, _ := s.Take()
		for _, m := range msgs {
			raw = append(raw, string(m))
		}
	}
	want := []string{
		`{"Type":"CounterChange","Value":{"Name":"Likes","Value":42,"DocumentId":"users/1","CollectionName":"Users","ChangeVector":"A:7-abc, B:3-def","Type":"Increment"}}`,
		`{"Type":"TimeSeriesChange","Value":{"Name":"HeartRate","DocumentId":"users/1","CollectionName":"Users","ChangeVector":"A:8-abc","From":"2023-11-14T22:13:20.1230000Z","To":"2023-11-14T22:14:20.0000000Z","Type":"Put"}}`,
		`{"Type":"TimeSeriesChange","Value":{"Name":"HeartRate","DocumentId":"users/1","CollectionName":"Users","ChangeVector":"A:9-abc","From":"0001-01-01T00:00:00.0000000Z","To":"9999-12-31T23:59:59.9999999Z","Type":"Delete"}}`,
		`{"Type":"CounterChange","Value":{"Name":"Likes","Value":0,"DocumentId":"users/1","CollectionName":"Users","ChangeVector":"A:10-abc","Type":"Delete"}}`,
	}
	for i := range want {
		if raw[i] != want[i] {
			t.Errorf("message %d:\n got %s\nwant %s", i, raw[i], want[i])
		}
	}
}

// Counter and time-series notifications count against MaxPending like
// the others: a subscriber that does not take them is dropped, with a
// reason, and the feed stops wanting items once it is gone.
func TestItemsSlowSubscriberDropped(t *testing.T) {
	h := New(Options{MaxPending: 10, FrameInterval: time.Millisecond})
	s := h.Subscribe("db")
	defer s.Close()
	if err := s.Apply("watch-all-timeseries", nil, nil); err != nil {
		t.Fatal(err)
	}
	items := make([]storage.ItemChange, 11)
	for i := range items {
		items[i] = storage.ItemChange{Kind: storage.KindTimeSeries, Type: "Put", DocID: fmt.Sprint("d/", i), Name: "s"}
	}
	h.Items("db", items)
	deadline := time.Now().Add(5 * time.Second)
	for {
		msgs, code, reason := s.Take()
		if reason != "" {
			if code != CodePolicy || reason != "too slow: 11 notifications pending" || len(msgs) != 0 {
				t.Fatalf("closed with %d %q (%d messages)", code, reason, len(msgs))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not dropped")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if h.WantsItems("db") || h.Stats().DroppedSlow != 1 {
		t.Fatalf("after the drop: wants %v, stats %+v", h.WantsItems("db"), h.Stats())
	}
}
