package alerts

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/auth"
)

// clock is a settable clock for the store.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func TestRaiseDismissClear(t *testing.T) {
	s := New()
	changes := 0
	s.OnChange(func() { changes++ })
	s.Raise(Alert{Key: "identity:db:orders|", Level: Warning, Title: "t", Message: "m1"})
	s.Raise(Alert{Key: "identity:db:orders|", Level: Warning, Title: "t", Message: "m1"}) // same: no change
	s.Raise(Alert{Level: Info, Title: "other", Message: "x"})
	if s.Count() != 2 || changes != 2 {
		t.Fatalf("count %d changes %d", s.Count(), changes)
	}
	s.Raise(Alert{Key: "identity:db:orders|", Level: Error, Title: "t", Message: "m2"})
	list := s.List()
	if len(list) != 2 || list[0].Message != "m2" || list[0].Count != 2 {
		t.Fatalf("list %+v", list)
	}
	if !s.Dismiss(list[0].ID) || s.Dismiss(list[0].ID) {
		t.Fatal("dismiss")
	}
	s.Raise(Alert{Key: "identity:db:orders|", Level: Error, Title: "t", Message: "m3"})
	if s.Count() != 1 {
		t.Fatal("a dismissed key came back before it was cleared")
	}
	if a, ok := s.Get("identity:db:orders|"); !ok || a.Message != "m3" || !a.Dismissed {
		t.Fatalf("a dismissed alert is still updated while hidden: %+v", a)
	}
	s.Clear("identity:db:orders|")
	s.Raise(Alert{Key: "identity:db:orders|", Level: Error, Title: "t", Message: "m4"})
	if s.Count() != 2 {
		t.Fatal("a cleared key must be raisable again")
	}
	// An alert raised without a key is removed when dismissed.
	for _, a := range s.List() {
		if a.Title == "other" {
			if !strings.HasPrefix(a.Key, onceKey) || s.DismissKey(a.Key) != nil {
				t.Fatalf("keyless alert %+v", a)
			}
			if _, ok := s.Get(a.Key); ok {
				t.Fatal("a dismissed keyless alert stays in the store")
			}
		}
	}
}

func TestClearDatabase(t *testing.T) {
	s := New()
	s.Raise(Alert{Key: "identity:shop:a|", Database: "shop", Message: "x"})
	s.Raise(Alert{Key: "identity:shop:b|", Database: "shop", Message: "y"})
	s.Raise(Alert{Key: "identity:other:a|", Database: "other", Message: "z"})
	for _, a := range s.List() {
		if a.Key == "identity:shop:a|" {
			s.Dismiss(a.ID) // one of the database's alerts was dismissed
		}
	}
	s.ClearDatabase("SHOP")
	if s.Count() != 1 || s.List()[0].Database != "other" {
		t.Fatalf("left %+v", s.List())
	}
	s.Raise(Alert{Key: "identity:shop:a|", Database: "shop", Message: "x"})
	s.Raise(Alert{Key: "identity:shop:b|", Database: "shop", Message: "y"})
	if s.Count() != 3 {
		t.Fatal("a re-created database must be able to raise its alerts again")
	}
}

// First and last seen follow the clock; an update that changes nothing
// moves LastSeen only and tells no listener.
func TestSeenTimesAndUpdates(t *testing.T) {
	c := newClock()
	s, _ := Open(Options{Node: "B", Now: c.Now})
	changes := 0
	s.OnChange(func() { changes++ })
	t0 := c.Now()
	s.Raise(Alert{Key: "conflicts/shop", Level: Warning, Title: "3 conflicts", Message: "m"})
	c.Add(time.Minute)
	s.Raise(Alert{Key: "conflicts/shop", Level: Warning, Title: "3 conflicts", Message: "m"})
	a, _ := s.Get("conflicts/shop")
	if !a.FirstSeen.Equal(t0) || !a.LastSeen.Equal(t0.Add(time.Minute)) || a.Count != 1 || a.Node != "B" || changes != 1 {
		t.Fatalf("after a repeat: %+v, %d changes", a, changes)
	}
	c.Add(time.Minute)
	s.Raise(Alert{Key: "conflicts/shop", Level: Warning, Title: "5 conflicts", Message: "m", Link: "/studio/db/shop/conflicts"})
	a, _ = s.Get("conflicts/shop")
	if !a.FirstSeen.Equal(t0) || a.Title != "5 conflicts" || a.Link == "" || a.Count != 2 || changes != 2 {
		t.Fatalf("after an update: %+v, %d changes", a, changes)
	}
}

func TestPostpone(t *testing.T) {
	c := newClock()
	s, _ := Open(Options{Now: c.Now})
	changes := 0
	s.OnChange(func() { changes++ })
	s.Raise(Alert{Key: "node-unreachable/C", Level: Error, Title: "C"})
	if err := s.PostponeKey("node-unreachable/C", c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if s.Count() != 0 || len(s.All()) != 1 {
		t.Fatal("a postponed alert shows")
	}
	c.Add(59 * time.Minute)
	s.Tick()
	if s.Count() != 0 || changes != 2 {
		t.Fatalf("shown before its time: %d, %d changes", s.Count(), changes)
	}
	c.Add(2 * time.Minute)
	s.Tick()
	if s.Count() != 1 || changes != 3 {
		t.Fatalf("not shown again after an hour: %d, %d changes", s.Count(), changes)
	}
	if s.PostponeKey("nope", c.Now()) != ErrNotFound || s.DismissKey("nope") != ErrNotFound || s.RestoreKey("nope") != ErrNotFound {
		t.Fatal("unknown keys")
	}
	s.DismissKey("node-unreachable/C")
	if s.Count() != 0 {
		t.Fatal("dismissed shows")
	}
	s.RestoreKey("node-unreachable/C")
	if s.Count() != 1 {
		t.Fatal("restored does not show")
	}
}

// Sync raises what a watcher wants under its prefix and clears the rest,
// leaving other prefixes alone.
func TestSync(t *testing.T) {
	s := New()
	s.Raise(Alert{Key: "replication-lag/shop/A>B", Title: "old"})
	s.Raise(Alert{Key: "replication-lag/shop/A>C", Title: "old"})
	s.Raise(Alert{Key: "conflicts/shop", Title: "other watcher"})
	s.Sync("replication-lag/", []Alert{{Key: "replication-lag/shop/A>C", Title: "new"}, {Key: "conflicts/x", Title: "not mine"}})
	keys := []string{}
	for _, a := range s.All() {
		keys = append(keys, a.Key+"="+a.Title)
	}
	got := strings.Join(keys, ",")
	if got != "conflicts/shop=other watcher,replication-lag/shop/A>C=new" {
		t.Fatalf("after sync: %s", got)
	}
}

// The store survives a restart: alerts, their times, dismissals and
// postponements, and ids keep counting up. LastSeen alone is written by
// Flush.
func TestPersistAcrossRestart(t *testing.T) {
	c := newClock()
	path := filepath.Join(t.TempDir(), "alerts", "alerts.json")
	s, err := Open(Options{Node: "A", Path: path, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	s.Raise(Alert{Key: "conflicts/shop", Level: Warning, Database: "shop", Title: "3 conflicts", Link: "/studio/db/shop/conflicts"})
	s.Raise(Alert{Key: "leader-changes", Level: Info, Title: "leader"})
	s.Raise(Alert{Key: "index-stale/shop/Orders", Level: Warning, Title: "stale"})
	s.DismissKey("leader-changes")
	s.PostponeKey("index-stale/shop/Orders", c.Now().Add(24*time.Hour))
	first, _ := s.Get("conflicts/shop")
	c.Add(time.Minute)
	s.Raise(Alert{Key: "conflicts/shop", Level: Warning, Database: "shop", Title: "3 conflicts", Link: "/studio/db/shop/conflicts"})
	s.Flush()
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*"))
	if len(matches) != 1 {
		t.Fatalf("files left beside the alerts file: %v", matches)
	}

	r, err := Open(Options{Node: "A", Path: path, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	a, ok := r.Get("conflicts/shop")
	if !ok || !a.FirstSeen.Equal(first.FirstSeen) || !a.LastSeen.Equal(c.Now()) || a.Link != "/studio/db/shop/conflicts" || a.Node != "A" || a.ID != first.ID {
		t.Fatalf("after a restart: %+v (was %+v)", a, first)
	}
	if r.Count() != 1 {
		t.Fatalf("dismissed or postponed alerts show after a restart: %+v", r.List())
	}
	if l, _ := r.Get("leader-changes"); !l.Dismissed {
		t.Fatal("the dismissal was lost")
	}
	if p, _ := r.Get("index-stale/shop/Orders"); !p.PostponedUntil.Equal(c.Now().Add(23*time.Hour + 59*time.Minute)) {
		t.Fatalf("the postponement was lost: %v", p.PostponedUntil)
	}
	r.Raise(Alert{Key: "new", Title: "n"})
	if n, _ := r.Get("new"); n.ID != "4" {
		t.Fatalf("ids start again after a restart: %s", n.ID)
	}
	c.Add(24 * time.Hour)
	r.Tick()
	if r.Count() != 3 {
		t.Fatalf("postponement did not end after the restart: %d", r.Count())
	}
}

// An unreadable file is set aside and the node starts with no alerts.
func TestUnreadableFileSetAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "alerts.json")
	for _, body := range []string{"{not json", `{"Version":7,"Alerts":[]}`, strings.Repeat(" ", maxFile+1)} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Open(Options{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		if len(s.All()) != 0 {
			t.Fatal("alerts from an unreadable file")
		}
		if _, err := os.Stat(path + ".unreadable"); err != nil {
			t.Fatalf("not set aside: %v", err)
		}
		s.Raise(Alert{Key: "k"})
		if r, _ := Open(Options{Path: path}); len(r.All()) != 1 {
			t.Fatal("the store does not write a fresh file after setting one aside")
		}
	}
}

// The store keeps at most Max alerts, dropping hidden ones first, then
// the one seen longest ago; what it holds is bounded in size.
func TestBounded(t *testing.T) {
	c := newClock()
	path := filepath.Join(t.TempDir(), "alerts.json")
	s, _ := Open(Options{Path: path, Max: 3, Now: c.Now})
	s.Raise(Alert{Key: "a"})
	c.Add(time.Second)
	s.Raise(Alert{Key: "b"})
	c.Add(time.Second)
	s.Raise(Alert{Key: "c"})
	s.DismissKey("c")
	c.Add(time.Second)
	s.Raise(Alert{Key: "d"})
	if _, ok := s.Get("c"); ok || len(s.All()) != 3 {
		t.Fatalf("the hidden alert was not dropped first: %+v", s.All())
	}
	c.Add(time.Second)
	s.Raise(Alert{Key: "e"})
	if _, ok := s.Get("a"); ok || len(s.All()) != 3 {
		t.Fatalf("the oldest was not dropped: %+v", s.All())
	}
	huge := strings.Repeat("é", 10_000)
	s.Raise(Alert{Key: "f", Title: huge, Message: huge, Link: huge})
	f, _ := s.Get("f")
	if len(f.Title) > maxTitle+3 || len(f.Message) > maxMessage+3 || len(f.Link) > maxLink+3 || !strings.HasSuffix(f.Message, "…") {
		t.Fatalf("not clipped: %d %d %d", len(f.Title), len(f.Message), len(f.Link))
	}
	if !strings.HasPrefix(f.Message, "é") || strings.ContainsRune(f.Message, '\uFFFD') {
		t.Fatal("clipping split a character")
	}
	if fi, _ := os.Stat(path); fi.Size() > 20_000 {
		t.Fatalf("file of %d bytes for 3 alerts", fi.Size())
	}
}

// Merge groups every node's alerts by key, names the nodes, keeps the
// earliest first-seen and the latest last-seen, the most severe level,
// and reports nodes that did not answer.
func TestMerge(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	lists := []NodeList{
		{Node: "B", Alerts: []Alert{
			{Key: "node-unreachable/C", Node: "B", Level: Error, Title: "C down (B)", FirstSeen: t0.Add(time.Second), LastSeen: t0.Add(50 * time.Second)},
			{Key: "conflicts/shop", Node: "B", Level: Warning, Database: "shop", FirstSeen: t0, LastSeen: t0, Dismissed: true},
		}},
		{Node: "A", Alerts: []Alert{
			{Key: "node-unreachable/C", Node: "A", Level: Error, Title: "C down (A)", FirstSeen: t0.Add(2 * time.Second), LastSeen: t0.Add(60 * time.Second)},
			{Key: "conflicts/shop", Node: "A", Level: Warning, Database: "shop", FirstSeen: t0, LastSeen: t0, PostponedUntil: now.Add(time.Hour)},
			{Key: "replication-lag/shop/A>B", Node: "A", Level: Warning, Database: "shop", FirstSeen: t0, LastSeen: t0},
		}},
		{Node: "C", Err: "connection refused"},
	}
	g := Merge(lists, now)
	if len(g.Nodes) != 3 || g.Nodes[2].Tag != "C" || g.Nodes[2].Reachable || g.Nodes[0].Error != "" {
		t.Fatalf("nodes %+v", g.Nodes)
	}
	e, ok := g.Find("node-unreachable/C")
	if !ok || strings.Join(e.Nodes, ",") != "A,B" || !e.FirstSeen.Equal(t0.Add(time.Second)) || !e.LastSeen.Equal(t0.Add(60*time.Second)) || e.Title != "C down (A)" || e.Hidden {
		t.Fatalf("merged %+v", e)
	}
	if g.Entries[0].Key != "node-unreachable/C" {
		t.Fatal("the error is not first")
	}
	c, _ := g.Find("conflicts/shop")
	if !c.Hidden || c.Dismissed || !c.PostponedUntil.Equal(now.Add(time.Hour)) {
		t.Fatalf("hidden on both nodes (dismissed on one, postponed on the other): %+v", c)
	}
	if g.Shown() != 2 {
		t.Fatalf("shown %d", g.Shown())
	}

	reader := &auth.Identity{Name: "r", Clearance: auth.ValidUser, Permissions: map[string]auth.Access{"other": auth.Read}}
	if got := g.For(reader, true); len(got.Entries) != 1 || got.Entries[0].Key != "node-unreachable/C" {
		t.Fatalf("a user without access to shop sees %+v", got.Entries)
	}
	op := &auth.Identity{Name: "op", Clearance: auth.Operator}
	if got := g.For(op, false); len(got.Entries) != 2 {
		t.Fatalf("an operator sees %d shown entries", len(got.Entries))
	}
	if got := g.For(op, true); len(got.Entries) != 3 {
		t.Fatalf("an operator sees %d entries with the hidden ones", len(got.Entries))
	}
	if Visible(reader, Alert{Key: "certificate/expiring/x"}) || !Visible(op, Alert{Key: "certificate/expiring/x"}) || Visible(nil, Alert{Key: "x"}) {
		t.Fatal("certificate alerts are for operators, nothing for nobody")
	}
}
