package studio

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rookerydb/rookery/backend/subscriptions"
	"github.com/rookerydb/rookery/handlers/httpx"
	"github.com/rookerydb/rookery/views"
)

// The Subscriptions page is cluster-wide. Each node's monitor knows only
// its own side of a subscription: the worker connected to it, its rates
// and errors, its copy's position. A worker consuming on A left B and C
// showing STOPPED, 0 % (their copies' positions never moved). So the page
// asks every member of the database for its report (this node from
// memory, the others at GET /internal/subscriptions/monitor with this
// node's credentials, concurrently, cached for about a second so live
// pages and ticks share one request) and shows each subscription with the
// figures of the node responsible for it:
//
//  1. the node its worker is connected to (the latest connection, when a
//     worker is connected on more than one);
//  2. else the node whose delivery last moved its position (the cluster
//     state records it);
//  3. else its mentor node;
//  4. else nobody has served it yet: this node's figures, which are then
//     the truth (no worker anywhere that answered).
//
// A responsible node that does not answer makes its rows "unreachable":
// no status, progress or backlog is shown for them, never this node's
// figures in their place.

const (
	// subPeerTimeout bounds how long the page waits for another node.
	subPeerTimeout = 2500 * time.Millisecond
	// subPeerFresh is how long an answer is reused; subPeerRetry how long
	// a failure is (so a node that hangs does not hold every render).
	subPeerFresh = 900 * time.Millisecond
	subPeerRetry = 3 * time.Second
	// subPeerMaxBody bounds a node's answer.
	subPeerMaxBody = 16 << 20
)

// subPeerCache holds the other nodes' latest reports.
type subPeerCache struct {
	mu      sync.Mutex
	entries map[string]*subPeerEntry
}

type subPeerEntry struct {
	done chan struct{} // closed when the fetch ended
	at   time.Time
	r    subscriptions.Report
	err  error
}

// get returns base's report of db (one subscription's when name is set),
// fetching it when the cached one is too old; concurrent callers share one
// fetch.
func (c *subPeerCache) get(ctx context.Context, n httpx.NodeClient, base, db, name string) (subscriptions.Report, error) {
	k := base + "\x00" + strings.ToLower(db) + "\x00" + strings.ToLower(name)
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string]*subPeerEntry{}
	}
	e := c.entries[k]
	if e != nil {
		select {
		case <-e.done:
			age := time.Since(e.at)
			if (e.err == nil && age > subPeerFresh) || (e.err != nil && age > subPeerRetry) {
				e = nil
			}
		default: // in flight: share it
		}
	}
	if e == nil {
		e = &subPeerEntry{done: make(chan struct{})}
		c.entries[k] = e
		// Drop what nobody asked for lately (nodes and databases come
		// and go).
		for key, old := range c.entries {
			select {
			case <-old.done:
				if time.Since(old.at) > time.Minute {
					delete(c.entries, key)
				}
			default:
			}
		}
		go func() {
			// Not the page's context: the pages sharing the fetch must get
			// it even if the one that started it goes away.
			fctx, cancel := context.WithTimeout(context.Background(), subPeerTimeout)
			defer cancel()
			q := url.Values{"db": {db}}
			if name != "" {
				q.Set("name", name)
			}
			var r subscriptions.Report
			err := httpx.GetJSON(fctx, n, strings.TrimRight(base, "/")+"/internal/subscriptions/monitor?"+q.Encode(), subPeerMaxBody, &r)
			c.mu.Lock()
			e.r, e.err, e.at = r, err, time.Now()
			c.mu.Unlock()
			close(e.done)
		}()
	}
	c.mu.Unlock()
	select {
	case <-e.done:
	case <-ctx.Done():
		return subscriptions.Report{}, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return e.r, e.err
}

// subNodeReport is one member's report, or why there is none.
type subNodeReport struct {
	node views.SubNode
	r    subscriptions.Report
}

// subReports asks every member of db for its report (name: only that
// subscription's). This node comes first.
func (s *Studio) subReports(ctx context.Context, db, name string) []subNodeReport {
	self := subNodeReport{node: views.SubNode{Tag: s.NodeTag, Self: true, Answered: true}, r: s.Subscriptions.Report(ctx, db)}
	out := []subNodeReport{self}
	if s.Cluster == nil {
		return out
	}
	rec, ok := s.Cluster.Database(db)
	if !ok {
		return out
	}
	urls := map[string]string{}
	for _, n := range s.Cluster.Nodes() {
		urls[n.Tag] = n.URL
	}
	members := slices.Clone(rec.Members)
	slices.Sort(members)
	for _, tag := range members {
		if tag != s.NodeTag {
			out = append(out, subNodeReport{node: views.SubNode{Tag: tag}})
		}
	}
	// out is complete: the goroutines below fill its elements in place.
	var wg sync.WaitGroup
	for i := 1; i < len(out); i++ {
		nr := &out[i]
		base := urls[nr.node.Tag]
		if base == "" {
			nr.node.Problem = "no URL known yet"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.subPeers.get(ctx, s.peers(), base, db, name)
			if err != nil {
				nr.node.Problem = err.Error()
				return
			}
			nr.r, nr.node.Answered = r, true
		}()
	}
	wg.Wait()
	return out
}

// mergeSubscriptions makes the cluster-wide rows: the subscriptions this
// node's report lists (the definitions are the cluster's, the same
// everywhere), each with the responsible node's figures.
func mergeSubscriptions(reports []subNodeReport) []views.SubRow {
	members := map[string]int{}
	for i, nr := range reports {
		members[nr.node.Tag] = i
	}
	find := func(i int, name string) (subscriptions.Stats, bool) {
		for _, st := range reports[i].r.Subscriptions {
			if strings.EqualFold(st.Name, name) {
				return st, true
			}
		}
		return subscriptions.Stats{}, false
	}
	local := reports[0]
	rows := make([]views.SubRow, 0, len(local.r.Subscriptions))
	for _, own := range local.r.Subscriptions {
		row := views.SubRow{Stats: own}
		// 1. A connected worker (the latest, when on several nodes).
		var since time.Time
		for i, nr := range reports {
			if !nr.node.Answered {
				continue
			}
			st, ok := find(i, own.Name)
			if !ok || len(st.Workers) == 0 {
				continue
			}
			switch {
			case row.Node == "":
				row.Node, row.Why, since = nr.node.Tag, views.SubWhyWorker, st.Workers[0].Since
			case st.Workers[0].Since.After(since):
				row.AlsoOn = append(row.AlsoOn, row.Node)
				row.Node, since = nr.node.Tag, st.Workers[0].Since
			default:
				row.AlsoOn = append(row.AlsoOn, nr.node.Tag)
			}
		}
		// 2. The node that last delivered; 3. the mentor node.
		if row.Node == "" {
			for _, c := range []struct{ tag, why string }{{own.LastNode, views.SubWhyLastNode}, {own.MentorNode, views.SubWhyMentor}} {
				if _, ok := members[c.tag]; ok && c.tag != "" {
					row.Node, row.Why = c.tag, c.why
					break
				}
			}
		}
		// 4. Nobody yet: this node's figures.
		if row.Node == "" {
			row.Node, row.Why = local.node.Tag, views.SubWhyNobody
		}
		i := members[row.Node]
		row.Self = reports[i].node.Self
		switch st, ok := find(i, own.Name); {
		case !reports[i].node.Answered:
			row.Unreachable, row.Problem = true, reports[i].node.Problem
			row.Stats = definitionOnly(own)
		case ok:
			// The definition is this node's (current); the figures are
			// the responsible node's.
			st.Disabled, st.Query = own.Disabled, own.Query
			row.Stats = st
		default:
			// The node answered but does not know the subscription yet
			// (created a moment ago): its figures are not there.
			row.Unreachable, row.Problem = true, "node "+row.Node+" does not report it yet"
			row.Stats = definitionOnly(own)
		}
		rows = append(rows, row)
	}
	return rows
}

// definitionOnly keeps what the cluster state says of a subscription and
// drops the figures a node measured: for a row whose responsible node did
// not answer. The flags kept are the ones judged on definitions (the same
// on every node).
func definitionOnly(st subscriptions.Stats) subscriptions.Stats {
	out := subscriptions.Stats{Name: st.Name, ID: st.ID, Query: st.Query, Collection: st.Collection, Disabled: st.Disabled, Start: st.Start,
		Created: st.Created, Position: st.Position, LastAck: st.LastAck, LastNode: st.LastNode, MentorNode: st.MentorNode}
	for _, f := range st.Flags {
		switch f.Rule {
		case subscriptions.RuleBurst, subscriptions.RuleDuplicate, subscriptions.RuleFromStart:
			out.Flags = append(out.Flags, f)
		}
	}
	return out
}
