package history

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// clock is a controllable clock: tests move it by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time                 { return c.t }
func (c *clock) step(d time.Duration) time.Time { c.t = c.t.Add(d); return c.t }

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func wkey(db string) Key { return Key{Kind: KindWrites, Database: db, Node: "A"} }

// An hour of five-second samples is kept, and no more: the window spans
// exactly the retention, oldest first.
func TestStoreKeepsTheRetention(t *testing.T) {
	c := newClock()
	s := New(Options{Retention: time.Hour, Interval: 5 * time.Second})
	for i := 0; i < 1000; i++ {
		s.Record(c.step(5*time.Second), []Point{{wkey("db1"), float64(i)}})
	}
	w := s.Window(time.Time{}, nil)
	if len(w.Times) != 721 || w.Times[len(w.Times)-1]-w.Times[0] != 3600 {
		t.Fatalf("%d times spanning %d s, want 721 spanning 3600", len(w.Times), w.Times[len(w.Times)-1]-w.Times[0])
	}
	if w.Interval != 5 || len(w.Series) != 1 || w.Series[0].Unit != "writes/s" {
		t.Fatalf("window: interval %d, %d series", w.Interval, len(w.Series))
	}
	v := w.Series[0].Values
	if v[0] != 279 || v[len(v)-1] != 999 {
		t.Fatalf("oldest %v newest %v, want 279 and 999", v[0], v[len(v)-1])
	}
	for i := 1; i < len(w.Times); i++ {
		if w.Times[i]-w.Times[i-1] != 5 {
			t.Fatalf("times not 5 s apart at %d: %v", i, w.Times[i-1:i+1])
		}
	}
}

// Sample times are truncated to the interval (so nodes align), a second
// sample in the same interval replaces the first's values, and since
// returns only newer samples.
func TestStoreAlignsAndReturnsSince(t *testing.T) {
	c := newClock()
	s := New(Options{Retention: time.Minute, Interval: 5 * time.Second})
	s.Record(c.step(1200*time.Millisecond), []Point{{wkey("a"), 1}})
	s.Record(c.step(1*time.Second), []Point{{wkey("a"), 2}})
	first := c.t
	s.Record(c.step(5*time.Second), []Point{{wkey("a"), 3}})
	w := s.Window(time.Time{}, nil)
	if len(w.Times) != 2 || w.Times[0]%5 != 0 || w.Series[0].Values[0] != 2 || w.Series[0].Values[1] != 3 {
		t.Fatalf("window %+v", w)
	}
	w = s.Window(first.Truncate(5*time.Second), nil)
	if len(w.Times) != 1 || w.Series[0].Values[0] != 3 {
		t.Fatalf("since: %+v", w)
	}
	if w := s.Window(c.t, nil); len(w.Times) != 0 || len(w.Series) != 0 {
		t.Fatalf("nothing newer: %+v", w)
	}
}

// A series missing from a sample has a gap there (null in JSON), a series
// reported by nobody for the whole retention is forgotten, and match
// filters series.
func TestStoreGapsExpiryAndMatch(t *testing.T) {
	c := newClock()
	s := New(Options{Retention: 30 * time.Second, Interval: 5 * time.Second})
	lag := Key{Kind: KindReplItems, Database: "db1", Node: "A", Peer: "B"}
	s.Record(c.step(5*time.Second), []Point{{wkey("a"), 1}, {lag, 8}})
	s.Record(c.step(5*time.Second), []Point{{wkey("a"), 2}})
	s.Record(c.step(5*time.Second), []Point{{wkey("a"), 3}, {lag, 0}})
	w := s.Window(time.Time{}, func(k Key) bool { return k.Kind == KindReplItems })
	if len(w.Series) != 1 || w.Series[0].Key != lag || w.Series[0].Unit != "items" {
		t.Fatalf("match: %+v", w.Series)
	}
	b, _ := json.Marshal(w.Series[0].Values)
	if string(b) != "[8,null,0]" {
		t.Fatalf("values %s, want [8,null,0]", b)
	}
	var back Values
	if err := json.Unmarshal(b, &back); err != nil || back[0] != 8 || !math.IsNaN(back[1]) || back[2] != 0 {
		t.Fatalf("round trip %v %v", back, err)
	}
	for i := 0; i < 6; i++ {
		s.Record(c.step(5*time.Second), []Point{{wkey("a"), 4}})
	}
	if s.Len() != 2 {
		t.Fatalf("%d series while lag's last value is still within the retention", s.Len())
	}
	s.Record(c.step(5*time.Second), []Point{{wkey("a"), 4}})
	if s.Len() != 1 {
		t.Fatalf("%d series, want the lag series forgotten after a retention without values", s.Len())
	}
	if w := s.Window(time.Time{}, nil); len(w.Series) != 1 || w.Series[0].Key != wkey("a") {
		t.Fatalf("after expiry: %+v", w.Series)
	}
}

// The series count is capped: points of new series over the cap are
// dropped and counted, the kept ones go on, and memory stays what the cap
// allows.
func TestStoreCapsSeries(t *testing.T) {
	c := newClock()
	s := New(Options{Retention: time.Hour, Interval: 5 * time.Second, MaxSeries: 50})
	for i := 0; i < 20; i++ {
		var pts []Point
		for j := 0; j < 100; j++ {
			pts = append(pts, Point{Key{Kind: KindSubBacklog, Database: "db", Name: strings.Repeat("x", j%7) + string(rune('a'+j%26)) + string(rune('a'+j/26))}, float64(j)})
		}
		s.Record(c.step(5*time.Second), pts)
	}
	if s.Len() != 50 || s.Dropped() != 20*50 {
		t.Fatalf("%d series kept, %d dropped; want 50 and 1000", s.Len(), s.Dropped())
	}
	if w := s.Window(time.Time{}, nil); len(w.Series) != 50 || len(w.Series[0].Values) != 20 {
		t.Fatalf("window of a capped store: %d series", len(w.Series))
	}
}

func TestOptions(t *testing.T) {
	o, err := Options{}.WithDefaults()
	if err != nil || o.Retention != time.Hour || o.Interval != 5*time.Second || o.MaxSeries != 1000 {
		t.Fatalf("defaults %+v %v", o, err)
	}
	for _, bad := range []Options{
		{Interval: 500 * time.Millisecond},
		{Retention: time.Second, Interval: 5 * time.Second},
		{Retention: 1000 * time.Hour, Interval: time.Second},
		{MaxSeries: -1},
	} {
		if _, err := bad.WithDefaults(); err == nil || !strings.Contains(err.Error(), "--history-") {
			t.Errorf("%+v: %v, want an error naming the flag", bad, err)
		}
	}
}

// Windows of several nodes merge on the union of their times; each node's
// series keeps its own values and has gaps where it had no sample.
func TestMerge(t *testing.T) {
	ab := Key{Kind: KindReplItems, Database: "db", Node: "A", Peer: "B"}
	ba := Key{Kind: KindReplItems, Database: "db", Node: "B", Peer: "A"}
	wa := Window{Interval: 5, Times: []int64{100, 105, 110}, Series: []Series{{Key: ab, Unit: "items", Values: Values{1, 2, 3}}}}
	wb := Window{Interval: 5, Times: []int64{105, 110, 115}, Series: []Series{{Key: ba, Unit: "items", Values: Values{7, math.NaN(), 9}}}}
	m := Merge(0, wa, wb)
	if len(m.Times) != 4 || m.Times[0] != 100 || m.Times[3] != 115 || len(m.Series) != 2 {
		t.Fatalf("merge %+v", m)
	}
	got, _ := json.Marshal(m.Series)
	want := `[{"Kind":"repl_items","Database":"db","Node":"A","Peer":"B","Unit":"items","Values":[1,2,3,null]},{"Kind":"repl_items","Database":"db","Node":"B","Peer":"A","Unit":"items","Values":[null,7,null,9]}]`
	if string(got) != want {
		t.Fatalf("merged\n%s\nwant\n%s", got, want)
	}
	if m := Merge(2, wa, wb); len(m.Times) != 2 || m.Times[0] != 110 || m.Series[1].Values[1] != 9 {
		t.Fatalf("capped merge %+v", m)
	}
}

func TestRates(t *testing.T) {
	c := newClock()
	var r Rates
	if _, ok := r.Rate("db", 100, c.now()); ok {
		t.Fatal("a first reading has no rate")
	}
	if v, ok := r.Rate("db", 150, c.step(5*time.Second)); !ok || v != 10 {
		t.Fatalf("rate %v %v, want 10", v, ok)
	}
	if _, ok := r.Rate("db", 20, c.step(5*time.Second)); ok {
		t.Fatal("a counter that went down (reopened) has no rate")
	}
	if v, ok := r.Rate("db", 30, c.step(2*time.Second)); !ok || v != 5 {
		t.Fatalf("after a reset: %v %v, want 5", v, ok)
	}
	r.EndRound()
	r.Rate("other", 1, c.step(time.Second))
	r.EndRound()
	if r.Len() != 1 {
		t.Fatalf("%d counters; the one not read in the last round should be forgotten", r.Len())
	}
}

// A node's "since" moves only when its reachability changes; OnChange is
// told of each change.
func TestReachability(t *testing.T) {
	c := newClock()
	var r Reachability
	var changes []string
	r.OnChange(func(n NodeState) {
		changes = append(changes, n.Tag+map[bool]string{true: " up", false: " down"}[n.Reachable])
	})
	if st := r.State("C"); st.Checked {
		t.Fatal("unchecked node reported as checked")
	}
	up := c.now()
	r.Observe("C", true, "follower", "", up)
	r.Observe("C", true, "follower", "", c.step(time.Second))
	down := c.step(time.Second)
	r.Observe("C", false, "", "connection refused", down)
	r.Observe("C", false, "", "connection refused", c.step(time.Second))
	st := r.State("C")
	if st.Reachable || !st.Since.Equal(down) || st.Problem != "connection refused" || !st.LastSeen.Equal(up.Add(time.Second)) || st.Role != "follower" {
		t.Fatalf("down: %+v", st)
	}
	back := c.step(time.Second)
	r.Observe("C", true, "follower", "", back)
	if st := r.State("C"); !st.Reachable || !st.Since.Equal(back) || st.Problem != "" {
		t.Fatalf("back: %+v", st)
	}
	if strings.Join(changes, ",") != "C up,C down,C up" {
		t.Fatalf("changes %v", changes)
	}
	r.Observe("D", true, "leader", "", back)
	r.Forget(map[string]bool{"C": true})
	if all := r.All(); len(all) != 1 || all[0].Tag != "C" {
		t.Fatalf("after forget: %+v", all)
	}
}
