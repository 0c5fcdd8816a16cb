package alerts

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/names"
)

// certificatePrefix starts the keys of the certificate expiry alerts,
// which show to Operators and above only.
const certificatePrefix = "certificate/"

// Visible tells whether id may see a: a database's alert only who may read
// the database, a certificate's only Operators and above.
func Visible(id *auth.Identity, a Alert) bool {
	switch {
	case a.Database != "" && !id.Allows(auth.DatabaseRead, a.Database):
		return false
	case (a.OperatorOnly || strings.HasPrefix(a.Key, certificatePrefix)) && !id.Allows(auth.OperatorOnly, ""):
		return false
	}
	return id != nil
}

// NodeList is one node's alerts as it reported them, or why it did not.
type NodeList struct {
	Node   string
	Alerts []Alert
	// Err is why the node's alerts are missing ("" when it answered).
	Err string
}

// Entry is one condition across the cluster: the alerts of every node
// that raised its key, merged. Alert is the most severe of them (the most
// recently seen among equals), with the earliest FirstSeen and the latest
// LastSeen of all.
type Entry struct {
	Alert
	// Nodes are the nodes that raised it, sorted.
	Nodes []string
	// Reports are each node's own alert, in Nodes' order.
	Reports []Alert
	// Hidden: dismissed or postponed on every node that raised it.
	Hidden bool
}

// NodeState says whether a node's alerts are in a gathering.
type NodeState struct {
	Tag       string
	Reachable bool
	Error     string `json:",omitempty"`
}

// Gathered is every node's alerts, merged by key.
type Gathered struct {
	At      time.Time
	Entries []Entry
	Nodes   []NodeState
}

// Merge groups the nodes' alerts by key. Conditions of the whole cluster
// (a node that does not answer, a leader change, a runaway subscription
// burst) are raised by every node that sees them and become one entry
// naming those nodes.
func Merge(lists []NodeList, now time.Time) Gathered {
	g := Gathered{At: now.UTC()}
	byKey := map[string]*Entry{}
	var keys []string
	for _, l := range lists {
		g.Nodes = append(g.Nodes, NodeState{Tag: l.Node, Reachable: l.Err == "", Error: l.Err})
		for _, a := range l.Alerts {
			if a.Node == "" {
				a.Node = l.Node
			}
			e, ok := byKey[a.Key]
			if !ok {
				e = &Entry{Alert: a, Hidden: true}
				byKey[a.Key] = e
				keys = append(keys, a.Key)
			}
			e.Nodes = append(e.Nodes, a.Node)
			e.Reports = append(e.Reports, a)
			e.Hidden = e.Hidden && a.Hidden(now)
			first, last := e.FirstSeen, e.LastSeen
			if r, er := a.Level.Rank(), e.Level.Rank(); r > er || (r == er && a.LastSeen.After(e.LastSeen)) {
				e.Alert = a
			}
			if !first.IsZero() && first.Before(a.FirstSeen) {
				e.FirstSeen = first
			} else {
				e.FirstSeen = a.FirstSeen
			}
			if last.After(a.LastSeen) {
				e.LastSeen = last
			} else {
				e.LastSeen = a.LastSeen
			}
		}
	}
	slices.SortFunc(g.Nodes, func(a, b NodeState) int { return cmp.Compare(a.Tag, b.Tag) })
	for _, k := range keys {
		e := byKey[k]
		idx := make([]int, len(e.Nodes))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(i, j int) int { return cmp.Compare(e.Nodes[i], e.Nodes[j]) })
		nodes, reports := make([]string, len(idx)), make([]Alert, len(idx))
		for i, j := range idx {
			nodes[i], reports[i] = e.Nodes[j], e.Reports[j]
		}
		e.Nodes, e.Reports = nodes, reports
		// Dismissed when every node dismissed it; otherwise, while hidden,
		// it shows again when the last postponement ends.
		e.Dismissed = e.Hidden && !slices.ContainsFunc(reports, func(a Alert) bool { return !a.Dismissed })
		e.PostponedUntil = time.Time{}
		if e.Hidden && !e.Dismissed {
			for _, r := range reports {
				if r.PostponedUntil.After(e.PostponedUntil) {
					e.PostponedUntil = r.PostponedUntil
				}
			}
		}
		g.Entries = append(g.Entries, *e)
	}
	slices.SortFunc(g.Entries, func(a, b Entry) int {
		if c := cmp.Compare(b.Level.Rank(), a.Level.Rank()); c != 0 {
			return c
		}
		if c := b.FirstSeen.Compare(a.FirstSeen); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return g
}

// For is what id may see of g: the entries it may see (hidden ones only
// when hidden is true).
func (g Gathered) For(id *auth.Identity, hidden bool) Gathered {
	out := Gathered{At: g.At, Nodes: g.Nodes, Entries: []Entry{}}
	for _, e := range g.Entries {
		if !Visible(id, e.Alert) || (e.Hidden && !hidden) {
			continue
		}
		out.Entries = append(out.Entries, e)
	}
	return out
}

// Shown counts the entries that are not hidden.
func (g Gathered) Shown() int {
	n := 0
	for _, e := range g.Entries {
		if !e.Hidden {
			n++
		}
	}
	return n
}

// Find returns the entry with this key.
func (g Gathered) Find(key string) (Entry, bool) {
	for _, e := range g.Entries {
		if e.Key == key {
			return e, true
		}
	}
	return Entry{}, false
}

// Actions a person takes on an alert.
const (
	Dismiss  = "dismiss"
	Postpone = "postpone"
	Restore  = "restore"
)

// Center is the cluster-wide notification center the handlers serve: every
// node's alerts gathered (the node's own always current, the others' as
// last fetched), and an action applied on every node that raised a key.
type Center interface {
	Gathered(ctx context.Context) Gathered
	// Act applies action (Dismiss, Postpone until a time, Restore) to the
	// key on every node holding it; ErrNotFound when none does.
	Act(ctx context.Context, key, action string, until time.Time) error
}

// MaxPostpone is the longest postponement.
const MaxPostpone = 365 * 24 * time.Hour

// ParsePostpone reads how long to postpone an alert: a Go duration
// ("90m", "1h") or a number of days ("1d", "7d"), more than 0 and at most
// a year.
func ParsePostpone(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || len(days) > 4 {
			return 0, fmt.Errorf("%q is not a number of days such as 1d", names.Clip(v, 40))
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, fmt.Errorf("%q is not a duration such as 1h or 1d", names.Clip(v, 40))
		}
	}
	if d <= 0 || d > MaxPostpone {
		return 0, fmt.Errorf("an alert is postponed for more than 0 and at most 365 days, not %s", names.Clip(v, 40))
	}
	return d, nil
}
