// Package alerts is the node's notification list: conditions that need an
// operator's attention (an identity counter about to collide, later
// replication errors, conflicts, runaway subscriptions). The studio shows
// them with a live count badge; each can be dismissed.
package alerts

import (
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Level of an alert.
type Level string

// Levels.
const (
	Info    Level = "info"
	Warning Level = "warning"
	Error   Level = "error"
)

// Alert is one notification.
type Alert struct {
	ID       string
	Key      string // raising the same key again updates the alert instead of adding one
	Level    Level
	Database string
	Title    string
	Message  string
	Raised   time.Time
	Count    int // how many times it was raised
}

// Store holds the current alerts.
type Store struct {
	mu       sync.Mutex
	next     int
	byID     map[string]*Alert
	byKey    map[string]string
	onChange []func()
	// dismissed keys are remembered (with their database) so that a
	// condition that is still true does not pop up again until it was cleared.
	dismissed map[string]string
}

// New makes an empty store.
func New() *Store {
	return &Store{byID: map[string]*Alert{}, byKey: map[string]string{}, dismissed: map[string]string{}}
}

// OnChange registers fn to run (without locks held) after every change.
func (s *Store) OnChange(fn func()) {
	s.mu.Lock()
	s.onChange = append(s.onChange, fn)
	s.mu.Unlock()
}

func (s *Store) changed() {
	s.mu.Lock()
	fns := append([]func(){}, s.onChange...)
	s.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// Raise adds an alert, or refreshes the one with the same key. A key that
// was dismissed stays quiet until Clear is called for it.
func (s *Store) Raise(a Alert) {
	s.mu.Lock()
	if _, quiet := s.dismissed[a.Key]; a.Key != "" && quiet {
		s.mu.Unlock()
		return
	}
	if id, ok := s.byKey[a.Key]; ok && a.Key != "" {
		cur := s.byID[id]
		if cur.Message == a.Message && cur.Level == a.Level {
			s.mu.Unlock()
			return
		}
		cur.Message, cur.Level, cur.Title = a.Message, a.Level, a.Title
		cur.Raised = time.Now().UTC()
		cur.Count++
		s.mu.Unlock()
		s.changed()
		return
	}
	s.next++
	a.ID = strconv.Itoa(s.next)
	a.Raised = time.Now().UTC()
	a.Count = 1
	s.byID[a.ID] = &a
	if a.Key != "" {
		s.byKey[a.Key] = a.ID
	}
	s.mu.Unlock()
	s.changed()
}

// Clear removes the alert with this key (the condition is gone) and forgets
// that it was dismissed.
func (s *Store) Clear(key string) {
	s.mu.Lock()
	delete(s.dismissed, key)
	id, ok := s.byKey[key]
	if ok {
		delete(s.byKey, key)
		delete(s.byID, id)
	}
	s.mu.Unlock()
	if ok {
		s.changed()
	}
}

// ClearDatabase removes every alert of a database and forgets its
// dismissals (the database was deleted; a new one of the same name starts
// clean).
func (s *Store) ClearDatabase(db string) {
	s.mu.Lock()
	n := 0
	for id, a := range s.byID {
		if strings.EqualFold(a.Database, db) {
			delete(s.byID, id)
			delete(s.byKey, a.Key)
			n++
		}
	}
	for k, d := range s.dismissed {
		if strings.EqualFold(d, db) {
			delete(s.dismissed, k)
		}
	}
	s.mu.Unlock()
	if n > 0 {
		s.changed()
	}
}

// Dismiss removes an alert by id; it reports whether it existed.
func (s *Store) Dismiss(id string) bool {
	s.mu.Lock()
	a, ok := s.byID[id]
	if ok {
		delete(s.byID, id)
		if a.Key != "" {
			delete(s.byKey, a.Key)
			s.dismissed[a.Key] = a.Database
		}
	}
	s.mu.Unlock()
	if ok {
		s.changed()
	}
	return ok
}

// List returns the alerts, newest first.
func (s *Store) List() []Alert {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Alert, 0, len(s.byID))
	for _, a := range s.byID {
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Raised.Equal(out[j].Raised) {
			return out[i].Raised.After(out[j].Raised)
		}
		return out[i].ID > out[j].ID
	})
	return out
}

// Count is how many alerts are open.
func (s *Store) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}
