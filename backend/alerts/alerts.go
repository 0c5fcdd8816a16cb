// Package alerts is the node's notification center: conditions that need an
// operator's attention (conflicts, runaway and stalled subscriptions, a node
// that does not answer, leader changes, replication errors and lag, index
// errors and stale indexes, certificates about to expire, an identity
// counter about to collide, a damaged database). A watcher raises an alert
// under a key while its condition holds (raising again updates it) and
// clears it when the condition ends. A person may dismiss an alert (hidden
// until the condition clears and comes back) or postpone it (hidden until a
// time). The list is kept in the node's data directory across restarts
// (DESIGN.md).
package alerts

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Level is an alert's severity.
type Level string

// Levels, least severe first.
const (
	Info    Level = "info"
	Warning Level = "warning"
	Error   Level = "error"
)

// Rank orders levels: error 3, warning 2, info 1, anything else 0.
func (l Level) Rank() int {
	switch l {
	case Error:
		return 3
	case Warning:
		return 2
	case Info:
		return 1
	}
	return 0
}

// Alert is one notification.
type Alert struct {
	ID string
	// Key names the condition: raising the same key again updates the
	// alert instead of adding one, and clearing it ends the alert.
	Key      string
	Level    Level
	Node     string // the node that raised it
	Database string // "" for a server-wide alert
	Title    string
	Message  string
	// Link is the studio page that shows the problem ("/studio/db/shop/conflicts").
	Link string
	// OperatorOnly alerts show only to Operators and above (certificates).
	OperatorOnly bool `json:",omitempty"`
	FirstSeen    time.Time
	LastSeen     time.Time
	// Count is how many times the alert was raised with something new
	// (its level, title, message or link changed).
	Count int
	// Dismissed hides the alert until its condition clears.
	Dismissed bool `json:",omitempty"`
	// PostponedUntil hides the alert until then.
	PostponedUntil time.Time `json:",omitzero"`
}

// Hidden tells whether the alert is dismissed or postponed at now.
func (a Alert) Hidden(now time.Time) bool {
	return a.Dismissed || now.Before(a.PostponedUntil)
}

// Limits of what one alert may hold (a watcher's message may quote an
// error from a peer).
const (
	maxTitle   = 200
	maxMessage = 2000
	maxLink    = 1000
	maxKey     = 600
)

// DefaultMax is how many alerts a store keeps when Options.Max is zero.
const DefaultMax = 1000

// maxFile bounds the file a store loads: a larger one is set aside.
const maxFile = 16 << 20

// onceKey starts the key given to an alert raised without one: such an
// alert is removed, not hidden, when dismissed.
const onceKey = "alert/"

// Options configure a store.
type Options struct {
	// Node is this node's tag, given to alerts raised without one.
	Node string
	// Path is the file the store is kept in ("" keeps it in memory). It is
	// rewritten atomically after every change a person would notice; a
	// change of LastSeen alone is written by Flush.
	Path string
	// Max bounds how many alerts are kept (DefaultMax when zero): past
	// it the alert seen longest ago is dropped, hidden ones first.
	Max int
	// Now is the clock (time.Now when nil); tests move it.
	Now func() time.Time
	// Log receives the failures to write the file (slog.Default when nil).
	Log *slog.Logger
}

// Store holds a node's alerts.
type Store struct {
	opts Options

	mu       sync.Mutex
	next     int
	byKey    map[string]*Alert
	onChange []func()
	dirty    bool      // LastSeen moved since the file was written
	wake     time.Time // the earliest postponement that ends
	writeMu  sync.Mutex
}

// New makes an empty store kept in memory.
func New() *Store {
	s, _ := Open(Options{})
	return s
}

// Open makes a store and loads its file when there is one. A file that
// cannot be read is set aside (renamed with ".unreadable") and the store
// starts empty: losing the list must not stop the node.
func Open(o Options) (*Store, error) {
	if o.Max <= 0 {
		o.Max = DefaultMax
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	s := &Store{opts: o, byKey: map[string]*Alert{}}
	if o.Path == "" {
		return s, nil
	}
	if err := os.MkdirAll(filepath.Dir(o.Path), 0o755); err != nil {
		return nil, err
	}
	if err := s.load(); err != nil {
		o.Log.Warn("the alerts file is unreadable; it was set aside and the node starts with no alerts", "path", o.Path, "error", err)
		if rerr := os.Rename(o.Path, o.Path+".unreadable"); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return nil, fmt.Errorf("setting aside the unreadable alerts file %s: %w", o.Path, rerr)
		}
		s.byKey, s.next = map[string]*Alert{}, 0
	}
	return s, nil
}

// file is the stored form.
type file struct {
	Version int
	Next    int
	Alerts  []Alert
}

func (s *Store) load() error {
	f, err := os.Open(s.opts.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > maxFile {
		return fmt.Errorf("%d bytes, over the %d-byte limit", fi.Size(), maxFile)
	}
	var st file
	dec := json.NewDecoder(f)
	if err := dec.Decode(&st); err != nil {
		return err
	}
	if st.Version != 1 {
		return fmt.Errorf("version %d, not 1", st.Version)
	}
	s.next = st.Next
	for i := range st.Alerts {
		a := st.Alerts[i]
		if a.Key == "" || a.ID == "" {
			continue
		}
		clip(&a)
		s.byKey[a.Key] = &a
		if n, err := strconv.Atoi(a.ID); err == nil && n > s.next {
			s.next = n
		}
	}
	s.evict()
	s.setWake(s.opts.Now())
	return nil
}

// save writes the file atomically: a temporary file in the same directory,
// synced, renamed over the old one, and the directory synced.
func (s *Store) save() {
	if s.opts.Path == "" {
		return
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	st := file{Version: 1, Next: s.next, Alerts: make([]Alert, 0, len(s.byKey))}
	for _, a := range s.byKey {
		st.Alerts = append(st.Alerts, *a)
	}
	s.dirty = false
	s.mu.Unlock()
	slices.SortFunc(st.Alerts, func(a, b Alert) int { return cmp.Compare(a.Key, b.Key) })
	if err := writeAtomic(s.opts.Path, st); err != nil {
		s.opts.Log.Error("could not write the alerts file", "path", s.opts.Path, "error", err)
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
	}
}

func writeAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; cleans up a failure
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Flush writes the file when only LastSeen times changed since the last
// write (the node calls it every few seconds and when it stops).
func (s *Store) Flush() {
	s.mu.Lock()
	dirty := s.dirty
	s.mu.Unlock()
	if dirty {
		s.save()
	}
}

// OnChange registers fn to run (without locks held) after every change
// that shows: an alert raised, updated, cleared, dismissed, postponed, or
// shown again when its postponement ended.
func (s *Store) OnChange(fn func()) {
	s.mu.Lock()
	s.onChange = append(s.onChange, fn)
	s.mu.Unlock()
}

func (s *Store) changed() {
	s.save()
	s.mu.Lock()
	fns := append([]func(){}, s.onChange...)
	s.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

func clip(a *Alert) {
	cut := func(v *string, n int) {
		if len(*v) > n {
			i := n
			for i > 0 && (*v)[i]&0xC0 == 0x80 { // do not split a UTF-8 sequence
				i--
			}
			*v = (*v)[:i] + "…"
		}
	}
	cut(&a.Title, maxTitle)
	cut(&a.Message, maxMessage)
	cut(&a.Link, maxLink)
	cut(&a.Key, maxKey)
}

// Raise adds an alert, or updates the one with the same key: its LastSeen
// moves to now, and a new level, title, message or link replaces the old
// one (and counts). A dismissed or postponed alert stays hidden.
func (s *Store) Raise(a Alert) {
	now := s.opts.Now().UTC()
	clip(&a)
	s.mu.Lock()
	if a.Node == "" {
		a.Node = s.opts.Node
	}
	if cur, ok := s.byKey[a.Key]; ok && a.Key != "" {
		cur.LastSeen = now
		if cur.Message == a.Message && cur.Level == a.Level && cur.Title == a.Title && cur.Link == a.Link && cur.Database == a.Database && cur.OperatorOnly == a.OperatorOnly {
			s.dirty = true
			s.mu.Unlock()
			return
		}
		cur.Message, cur.Level, cur.Title, cur.Link, cur.Database, cur.OperatorOnly, cur.Node = a.Message, a.Level, a.Title, a.Link, a.Database, a.OperatorOnly, a.Node
		cur.Count++
		s.mu.Unlock()
		s.changed()
		return
	}
	s.next++
	a.ID = strconv.Itoa(s.next)
	if a.Key == "" {
		a.Key = onceKey + a.ID
	}
	a.FirstSeen, a.LastSeen, a.Count = now, now, 1
	a.Dismissed, a.PostponedUntil = false, time.Time{}
	s.byKey[a.Key] = &a
	s.evict()
	s.mu.Unlock()
	s.changed()
}

// evict drops alerts past the limit: hidden ones first, then the one seen
// longest ago. Called with mu held.
func (s *Store) evict() {
	if len(s.byKey) <= s.opts.Max {
		return
	}
	now := s.opts.Now()
	all := make([]*Alert, 0, len(s.byKey))
	for _, a := range s.byKey {
		all = append(all, a)
	}
	slices.SortFunc(all, func(a, b *Alert) int {
		if ha, hb := a.Hidden(now), b.Hidden(now); ha != hb {
			if ha {
				return -1
			}
			return 1
		}
		return a.LastSeen.Compare(b.LastSeen)
	})
	for _, a := range all[:len(all)-s.opts.Max] {
		delete(s.byKey, a.Key)
	}
}

// Sync makes the alerts whose keys start with prefix exactly want: each is
// raised, and every other alert under the prefix is cleared. A watcher
// that owns a prefix calls it with the conditions that hold now, so an
// alert kept across a restart whose condition ended meanwhile is cleared.
func (s *Store) Sync(prefix string, want []Alert) {
	keep := map[string]bool{}
	for _, a := range want {
		if !strings.HasPrefix(a.Key, prefix) {
			continue
		}
		keep[a.Key] = true
		s.Raise(a)
	}
	s.mu.Lock()
	var gone []string
	for k := range s.byKey {
		if strings.HasPrefix(k, prefix) && !keep[k] {
			gone = append(gone, k)
		}
	}
	s.mu.Unlock()
	for _, k := range gone {
		s.Clear(k)
	}
}

// Clear ends the alert with this key (its condition is gone), whether it
// was shown, dismissed or postponed: when the condition comes back it is
// a new alert.
func (s *Store) Clear(key string) {
	s.mu.Lock()
	_, ok := s.byKey[key]
	delete(s.byKey, key)
	s.mu.Unlock()
	if ok {
		s.changed()
	}
}

// ClearPrefix ends every alert whose key starts with prefix.
func (s *Store) ClearPrefix(prefix string) { s.Sync(prefix, nil) }

// ClearDatabase ends every alert of a database (the database was deleted;
// a new one of the same name starts clean).
func (s *Store) ClearDatabase(db string) {
	s.mu.Lock()
	n := 0
	for k, a := range s.byKey {
		if a.Database != "" && strings.EqualFold(a.Database, db) {
			delete(s.byKey, k)
			n++
		}
	}
	s.mu.Unlock()
	if n > 0 {
		s.changed()
	}
}

// ErrNotFound is the answer for a key or id the store does not hold.
var ErrNotFound = errors.New("no such alert")

func (s *Store) keyOfID(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, a := range s.byKey {
		if a.ID == id {
			return k, true
		}
	}
	return "", false
}

// Dismiss hides an alert by id until its condition clears; it reports
// whether a shown alert was dismissed.
func (s *Store) Dismiss(id string) bool {
	key, ok := s.keyOfID(id)
	if !ok {
		return false
	}
	s.mu.Lock()
	a := s.byKey[key]
	shown := a != nil && !a.Dismissed
	s.mu.Unlock()
	return shown && s.DismissKey(key) == nil
}

// DismissKey hides the alert with this key until its condition clears (an
// alert raised without a key is removed).
func (s *Store) DismissKey(key string) error {
	s.mu.Lock()
	a, ok := s.byKey[key]
	if !ok {
		s.mu.Unlock()
		return ErrNotFound
	}
	if strings.HasPrefix(key, onceKey) {
		delete(s.byKey, key)
	} else {
		a.Dismissed = true
	}
	s.mu.Unlock()
	s.changed()
	return nil
}

// PostponeKey hides the alert with this key until the given time (it
// shows again then if its condition still holds).
func (s *Store) PostponeKey(key string, until time.Time) error {
	s.mu.Lock()
	a, ok := s.byKey[key]
	if !ok {
		s.mu.Unlock()
		return ErrNotFound
	}
	a.PostponedUntil = until.UTC()
	s.setWake(s.opts.Now())
	s.mu.Unlock()
	s.changed()
	return nil
}

// RestoreKey shows a dismissed or postponed alert again.
func (s *Store) RestoreKey(key string) error {
	s.mu.Lock()
	a, ok := s.byKey[key]
	if !ok {
		s.mu.Unlock()
		return ErrNotFound
	}
	a.Dismissed, a.PostponedUntil = false, time.Time{}
	s.setWake(s.opts.Now())
	s.mu.Unlock()
	s.changed()
	return nil
}

// setWake records the earliest postponement still running. Called with mu
// held.
func (s *Store) setWake(now time.Time) {
	s.wake = time.Time{}
	for _, a := range s.byKey {
		if now.Before(a.PostponedUntil) && (s.wake.IsZero() || a.PostponedUntil.Before(s.wake)) {
			s.wake = a.PostponedUntil
		}
	}
}

// Tick tells the store's listeners when a postponement ended (the alert
// shows again); the node calls it every second.
func (s *Store) Tick() {
	now := s.opts.Now()
	s.mu.Lock()
	due := !s.wake.IsZero() && !now.Before(s.wake)
	if due {
		s.setWake(now)
	}
	s.mu.Unlock()
	if due {
		s.changed()
	}
}

// sorted orders alerts for people: most severe first, then the newest
// first, then by key (stable whatever the LastSeen times do).
func sorted(out []Alert) []Alert {
	slices.SortFunc(out, func(a, b Alert) int {
		if c := cmp.Compare(b.Level.Rank(), a.Level.Rank()); c != 0 {
			return c
		}
		if c := b.FirstSeen.Compare(a.FirstSeen); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return out
}

// List returns the alerts shown now (neither dismissed nor postponed).
func (s *Store) List() []Alert {
	now := s.opts.Now()
	s.mu.Lock()
	out := make([]Alert, 0, len(s.byKey))
	for _, a := range s.byKey {
		if !a.Hidden(now) {
			out = append(out, *a)
		}
	}
	s.mu.Unlock()
	return sorted(out)
}

// All returns every alert, hidden ones included.
func (s *Store) All() []Alert {
	s.mu.Lock()
	out := make([]Alert, 0, len(s.byKey))
	for _, a := range s.byKey {
		out = append(out, *a)
	}
	s.mu.Unlock()
	return sorted(out)
}

// Get returns the alert with this key.
func (s *Store) Get(key string) (Alert, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.byKey[key]
	if !ok {
		return Alert{}, false
	}
	return *a, true
}

// Count is how many alerts are shown now.
func (s *Store) Count() int { return len(s.List()) }

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.opts.Now() }

// Node is the tag the store gives its alerts.
func (s *Store) Node() string { return s.opts.Node }
