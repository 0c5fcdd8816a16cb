// Package indexes holds the cluster-wide life of a database's indexes that
// no single index decides: which auto indexes to mark idle or delete (the
// seed's rule: only when the collection is being queried through other
// indexes), and the record of when each index and collection was last
// queried on this node.
package indexes

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
)

// The per-database configuration keys, RavenDB's names, and their defaults.
const (
	KeyIdleAfter       = "Indexing.TimeToWaitBeforeMarkingAutoIndexAsIdleInMin"
	KeyDeleteAfter     = "Indexing.TimeToWaitBeforeDeletingAutoIndexMarkedAsIdleInHrs"
	KeySupersededGrace = "Indexing.TimeBeforeDeletionOfSupersededAutoIndexInSec"

	DefaultIdleAfter       = 30 * time.Minute
	DefaultDeleteAfter     = 72 * time.Hour
	DefaultSupersededGrace = 15 * time.Second
)

// Config is a database's cleanup configuration.
type Config struct {
	IdleAfter       time.Duration
	DeleteAfter     time.Duration
	SupersededGrace time.Duration
}

// DefaultConfig is RavenDB's defaults.
func DefaultConfig() Config {
	return Config{IdleAfter: DefaultIdleAfter, DeleteAfter: DefaultDeleteAfter, SupersededGrace: DefaultSupersededGrace}
}

// ParseConfig reads the keys from a database's settings (string values, as
// RavenDB's DatabaseRecord.Settings holds them); absent keys keep their
// defaults, other keys are ignored.
func ParseConfig(settings map[string]string) (Config, error) {
	c := DefaultConfig()
	for _, k := range []struct {
		key  string
		unit time.Duration
		into *time.Duration
	}{{KeyIdleAfter, time.Minute, &c.IdleAfter}, {KeyDeleteAfter, time.Hour, &c.DeleteAfter}, {KeySupersededGrace, time.Second, &c.SupersededGrace}} {
		v, ok := settings[k.key]
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || n < 0 || n > 1e6 {
			return c, dberr.New(dberr.BadRequest, "%s must be a number from 0 to 1000000, not %q", k.key, v)
		}
		*k.into = time.Duration(n * float64(k.unit))
	}
	return c, nil
}

// Usage is what the cleanup knows of one index: its record and the latest
// query time any node saw.
type Usage struct {
	Name       string
	Collection string // the auto index's collection
	Auto       bool
	State      string // "Normal" or "", "Idle", "Disabled"
	Created    time.Time
	// LastQueried is the latest query of the index on any node (zero:
	// none seen).
	LastQueried time.Time
	// Superseded names the wider index that replaces this one.
	Superseded string
	// CaughtUpAt is when the index was first seen non-stale (zero: not
	// yet); it matters for the index that supersedes others.
	CaughtUpAt time.Time
}

// Actions of a decision.
const (
	ActionIdle   = "idle"
	ActionNormal = "normal"
	ActionDelete = "delete"
	ActionKeep   = "keep"
)

// Decision is what the cleanup decided about one index, and why. Code
// names the rule, so a caller can log a kept index once per reason
// rather than at every pass.
type Decision struct {
	Index  string
	Action string
	Code   string
	Reason string
}

// Decide applies the cleanup rules at now. since is when the usage record
// began (the latest start of the nodes that reported): an index is never
// taken as unused for longer than the cluster has been watching it, so a
// restart does not make every index look abandoned. collections maps a
// lower-cased collection name to its latest query through any index or
// collection scan.
//
// The rules (seed 004, RavenDB's cluster observer):
//   - a superseded auto index is deleted once the index replacing it has
//     been caught up for SupersededGrace;
//   - a Normal auto index not queried for IdleAfter becomes Idle, but only
//     when its collection was queried since through other indexes; if
//     nothing queried the collection, the application may simply not be
//     running, and the index is kept;
//   - an Idle auto index queried within IdleAfter is Normal again;
//   - an Idle auto index not queried for DeleteAfter is deleted, with the
//     same condition on its collection.
//
// Static indexes and disabled ones are never touched.
func Decide(now time.Time, cfg Config, since time.Time, idx []Usage, collections map[string]time.Time) []Decision {
	byName := map[string]Usage{}
	for _, u := range idx {
		byName[strings.ToLower(u.Name)] = u
	}
	var out []Decision
	for _, u := range idx {
		if !u.Auto || u.State == "Disabled" {
			continue
		}
		if u.Superseded != "" {
			if d, ok := decideSuperseded(now, cfg, u, byName); ok {
				out = append(out, d)
				continue
			}
		}
		last := latest(u.LastQueried, u.Created, since)
		unused := now.Sub(last)
		coll := collections[strings.ToLower(u.Collection)]
		collNote := func() string {
			if coll.IsZero() {
				return fmt.Sprintf("collection %s has not been queried since %s either", u.Collection, stamp(last))
			}
			return fmt.Sprintf("collection %s was last queried at %s", u.Collection, stamp(coll))
		}
		switch u.State {
		case "Idle":
			if !u.LastQueried.IsZero() && now.Sub(u.LastQueried) < cfg.IdleAfter {
				out = append(out, Decision{Index: u.Name, Action: ActionNormal, Code: "queried-again",
					Reason: fmt.Sprintf("queried again at %s", stamp(u.LastQueried))})
				continue
			}
			if unused < cfg.DeleteAfter {
				continue
			}
			if coll.After(last) {
				out = append(out, Decision{Index: u.Name, Action: ActionDelete, Code: "idle-unused",
					Reason: fmt.Sprintf("idle and not queried for %s (since %s, more than %s = %s), while collection %s was queried through other indexes (last at %s)",
						round(unused), stamp(last), KeyDeleteAfter, round(cfg.DeleteAfter), u.Collection, stamp(coll))})
			} else {
				out = append(out, Decision{Index: u.Name, Action: ActionKeep, Code: "idle-collection-quiet",
					Reason: fmt.Sprintf("idle and not queried for %s, but kept: %s, so the application may not be running", round(unused), collNote())})
			}
		default:
			if unused < cfg.IdleAfter {
				continue
			}
			if coll.After(last) {
				out = append(out, Decision{Index: u.Name, Action: ActionIdle, Code: "unused",
					Reason: fmt.Sprintf("not queried for %s (since %s, more than %s = %s), while collection %s was queried through other indexes (last at %s)",
						round(unused), stamp(last), KeyIdleAfter, round(cfg.IdleAfter), u.Collection, stamp(coll))})
			} else {
				out = append(out, Decision{Index: u.Name, Action: ActionKeep, Code: "collection-quiet",
					Reason: fmt.Sprintf("not queried for %s, but kept Normal: %s, so the application may not be running", round(unused), collNote())})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

func decideSuperseded(now time.Time, cfg Config, u Usage, byName map[string]Usage) (Decision, bool) {
	wider, ok := byName[strings.ToLower(u.Superseded)]
	if !ok {
		return Decision{}, false // the wider index is gone: the ordinary rules apply
	}
	if wider.CaughtUpAt.IsZero() {
		return Decision{Index: u.Name, Action: ActionKeep, Code: "superseded-waiting",
			Reason: fmt.Sprintf("superseded by %s, which has not caught up yet", wider.Name)}, true
	}
	if now.Sub(wider.CaughtUpAt) < cfg.SupersededGrace {
		return Decision{Index: u.Name, Action: ActionKeep, Code: "superseded-grace",
			Reason: fmt.Sprintf("superseded by %s, caught up at %s; deleted %s after that (%s)", wider.Name, stamp(wider.CaughtUpAt), round(cfg.SupersededGrace), KeySupersededGrace)}, true
	}
	return Decision{Index: u.Name, Action: ActionDelete, Code: "superseded",
		Reason: fmt.Sprintf("superseded by %s, which caught up at %s", wider.Name, stamp(wider.CaughtUpAt))}, true
}

func latest(ts ...time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute)
	case d >= time.Minute:
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// Tracker records, on one node, when each index and each collection was
// last queried (a collection counts whichever index or scan served it).
type Tracker struct {
	mu          sync.Mutex
	started     time.Time
	indexes     map[string]time.Time // "db/index", lower-cased
	collections map[string]time.Time // "db/collection", lower-cased
}

// NewTracker starts a record at now.
func NewTracker(now time.Time) *Tracker {
	return &Tracker{started: now, indexes: map[string]time.Time{}, collections: map[string]time.Time{}}
}

// Started is when the record began.
func (t *Tracker) Started() time.Time { return t.started }

// Queried records a query of db at now, served by index ("" for a
// collection scan or an id lookup) over collection ("" when unknown).
func (t *Tracker) Queried(db, index, collection string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if index != "" {
		k := strings.ToLower(db + "/" + index)
		if now.After(t.indexes[k]) {
			t.indexes[k] = now
		}
	}
	if collection != "" {
		k := strings.ToLower(db + "/" + collection)
		if now.After(t.collections[k]) {
			t.collections[k] = now
		}
	}
}

// Report is a node's usage of one database.
type Report struct {
	Started     time.Time
	Indexes     map[string]time.Time // by lower-cased index name
	Collections map[string]time.Time // by lower-cased collection name
}

// Report returns the record of one database.
func (t *Tracker) Report(db string) Report {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := Report{Started: t.started, Indexes: map[string]time.Time{}, Collections: map[string]time.Time{}}
	prefix := strings.ToLower(db) + "/"
	for k, v := range t.indexes {
		if strings.HasPrefix(k, prefix) {
			r.Indexes[k[len(prefix):]] = v
		}
	}
	for k, v := range t.collections {
		if strings.HasPrefix(k, prefix) {
			r.Collections[k[len(prefix):]] = v
		}
	}
	return r
}

// Forget drops a database's record (it was deleted).
func (t *Tracker) Forget(db string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prefix := strings.ToLower(db) + "/"
	for k := range t.indexes {
		if strings.HasPrefix(k, prefix) {
			delete(t.indexes, k)
		}
	}
	for k := range t.collections {
		if strings.HasPrefix(k, prefix) {
			delete(t.collections, k)
		}
	}
}

// Merge combines the reports of several nodes: the latest time of each
// index and collection, and the latest start (the cluster has watched
// usage completely only since every reporting node was up).
func Merge(reports ...Report) Report {
	out := Report{Indexes: map[string]time.Time{}, Collections: map[string]time.Time{}}
	for _, r := range reports {
		out.Started = latest(out.Started, r.Started)
		for k, v := range r.Indexes {
			out.Indexes[k] = latest(out.Indexes[k], v)
		}
		for k, v := range r.Collections {
			out.Collections[k] = latest(out.Collections[k], v)
		}
	}
	return out
}
