package web

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/replication"
	"github.com/rookerydb/rookery/backend/subscriptions"
	"github.com/rookerydb/rookery/handlers/httpx"
)

// The watchers of the notification center (backend/alerts): once a second
// they look at what the node knows and raise, update and clear alerts.
// Each owns a key prefix. A condition seen to hold raises its alert; one
// seen to be over clears it; one that cannot be told yet (a node that has
// failed for less than the threshold, an index stale for less than its
// threshold) leaves the alert as it is, so an alert kept across a restart
// is neither lost nor re-dated while the node finds out again.

// Defaults of the alert thresholds (cmd/studio's --alert-… flags).
const (
	// DefaultAlertNodeUnreachable: a member that has not answered for this
	// long is unreachable (a restart of a node takes a few seconds).
	DefaultAlertNodeUnreachable = 10 * time.Second
	// DefaultAlertReplicationError: a destination that has been
	// disconnected with an error for this long, while its node answers.
	DefaultAlertReplicationError = 30 * time.Second
	// DefaultAlertReplicationLag: the oldest change a connected
	// destination has not acknowledged is this old.
	DefaultAlertReplicationLag = 30 * time.Second
	// DefaultAlertIndexStale: an index stale for this long without a
	// break (a large rebuild takes minutes).
	DefaultAlertIndexStale = 10 * time.Minute
	// DefaultAlertLeaderWindow: a leader-change alert clears after this
	// long without another change or election.
	DefaultAlertLeaderWindow = 10 * time.Minute
	// DefaultAlertElections: this many leader changes or elections without
	// a quiet window between them make the alert a warning.
	DefaultAlertElections = 3
	// DefaultAlertCertificateDays: a certificate that expires within this
	// many days is flagged (the Certificates page's badge uses 30 too).
	DefaultAlertCertificateDays = 30
	// DefaultMaxAlerts bounds the alerts a node keeps.
	DefaultMaxAlerts = alerts.DefaultMax
)

// Key prefixes of the watchers' alerts.
const (
	keyConflicts   = "conflicts/"
	keyRunaway     = "subscriptions-runaway/"
	keyStalled     = "subscription-stalled/"
	keyNode        = "node-unreachable/"
	keyLeader      = "cluster-leader/"
	keyLeaderMoves = keyLeader + "changes"
	keyNoLeader    = keyLeader + "none"
	keyReplError   = "replication-error/"
	keyReplLag     = "replication-lag/"
	keyIndexErrors = "index-errors/"
	keyIndexStale  = "index-stale/"
)

const (
	// probeTimeout bounds one probe of another node's /livez.
	probeTimeout = 2 * time.Second
	// indexCheckEvery spaces the index checks (staleness costs a few
	// counts per index).
	indexCheckEvery = 5 * time.Second
	// gatherEvery spaces the fetches of the other nodes' alerts;
	// gatherTimeout bounds one.
	gatherEvery   = 2 * time.Second
	gatherTimeout = 1500 * time.Millisecond
	// flushEvery spaces the writes of LastSeen-only changes.
	flushEvery = 10 * time.Second
	// maxAlertsAnswer bounds a node's answer with its alerts.
	maxAlertsAnswer = 8 << 20
)

// alertThresholds are the watchers' limits (Config's Alert… fields with
// their defaults).
type alertThresholds struct {
	nodeUnreachable, replError, replLag, indexStale, leaderWindow time.Duration
	elections, certificateDays                                    int
}

func (c Config) alertThresholds() alertThresholds {
	return alertThresholds{nodeUnreachable: c.AlertNodeUnreachable, replError: c.AlertReplicationError, replLag: c.AlertReplicationLag,
		indexStale: c.AlertIndexStale, leaderWindow: c.AlertLeaderWindow, elections: c.AlertElections, certificateDays: c.AlertCertificateDays}
}

// probe is what this node last learnt of another node.
type probe struct {
	url          string
	answered     time.Time // last answer (zero: none since this node started)
	failingSince time.Time // first failure since the last answer (zero: answering)
	err          string
}

// watchers raise and clear the node's alerts.
type watchers struct {
	s   *Server
	now func() time.Time
	th  alertThresholds

	ctx    context.Context
	cancel context.CancelFunc

	mu sync.Mutex
	// The leader this node last saw, and the Raft term.
	leaderKnown bool
	leader      string
	term        uint64
	since       time.Time
	noLeader    time.Time // since when no leader is known (zero: one is)
	// The other nodes' probes.
	probes  map[string]*probe
	probing atomic.Bool
	// When a replication destination was first seen disconnected, and an
	// index first seen stale.
	replDown   map[string]time.Time
	staleSince map[string]time.Time
	lastIndex  time.Time
	lastFlush  time.Time

	// The other nodes' alerts as last fetched.
	gmu        sync.Mutex
	peers      map[string]alerts.NodeList
	lastGather time.Time
	gathering  atomic.Bool
	print      uint64
}

func newWatchers(s *Server, now func() time.Time) *watchers {
	w := &watchers{s: s, now: now, th: s.cfg.alertThresholds(), probes: map[string]*probe{}, replDown: map[string]time.Time{},
		staleSince: map[string]time.Time{}, peers: map[string]alerts.NodeList{}}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.lastFlush = now()
	return w
}

// check runs every watcher once; the node's ticker calls it every second.
func (w *watchers) check(ctx context.Context) {
	now := w.now()
	w.probe()
	w.checkLeader(now)
	down := w.checkNodes(now)
	w.checkReplication(now, down)
	w.checkConflicts(ctx)
	w.checkSubscriptions(ctx)
	if now.Sub(w.lastIndex) >= indexCheckEvery {
		w.lastIndex = now
		w.checkIndexes(ctx, now)
	}
	w.s.alerts.Tick()
	if now.Sub(w.lastFlush) >= flushEvery {
		w.lastFlush = now
		w.s.alerts.Flush()
	}
	if now.Sub(w.lastGather) >= gatherEvery && w.gathering.CompareAndSwap(false, true) {
		w.lastGather = now
		go func() {
			defer w.gathering.Store(false)
			w.gather(w.ctx)
		}()
	}
}

// stop ends the probes and fetches in flight and writes the alerts.
func (w *watchers) stop() {
	w.cancel()
	w.s.alerts.Flush()
}

// syncAlerts raises raise, and clears every alert under prefix that is
// neither raised nor in keep (conditions not yet decided).
func (w *watchers) syncAlerts(prefix string, raise []alerts.Alert, keep map[string]bool) {
	all := map[string]bool{}
	for k := range keep {
		all[k] = true
	}
	for _, a := range raise {
		all[a.Key] = true
		w.s.alerts.Raise(a)
	}
	for _, a := range w.s.alerts.All() {
		if strings.HasPrefix(a.Key, prefix) && !all[a.Key] {
			w.s.alerts.Clear(a.Key)
		}
	}
}

func dbPath(db, page string) string { return "/studio/db/" + url.PathEscape(db) + "/" + page }

func lower(s string) string { return strings.ToLower(s) }

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + " s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + " min"
	}
	return strconv.FormatFloat(d.Hours(), 'f', 1, 64) + " h"
}

// ---- Leader changes and elections ----

// checkLeader raises an alert when the leader changes or an election
// happens (the Raft term moves), and keeps it until leaderWindow passes
// without another; and an error while no leader is known for longer than
// the unreachable threshold.
func (w *watchers) checkLeader(now time.Time) {
	st := w.s.cluster.Status()
	w.mu.Lock()
	var event, changed bool
	prev := w.leader
	switch {
	case !w.leaderKnown:
		if st.LeaderTag != "" { // the first leader this node sees is no change
			w.leaderKnown, w.leader, w.term, w.since = true, st.LeaderTag, st.Term, now
		}
	case st.LeaderTag != "" && (st.Term > w.term || st.LeaderTag != w.leader):
		// An election is told once its leader is known: the new term
		// with the same leader, or another leader.
		event, changed = true, st.LeaderTag != w.leader
		w.term = st.Term
		if changed {
			w.leader, w.since = st.LeaderTag, now
		}
	}
	if st.LeaderTag == "" {
		if w.noLeader.IsZero() {
			w.noLeader = now
		}
	} else {
		w.noLeader = time.Time{}
	}
	leader, term, since, noLeader := w.leader, w.term, w.since, w.noLeader
	w.mu.Unlock()

	store := w.s.alerts
	if event {
		n := 1
		if cur, ok := store.Get(keyLeaderMoves); ok {
			n = cur.Count + 1
		}
		a := alerts.Alert{Key: keyLeaderMoves, Level: alerts.Info, Link: "/studio/cluster"}
		if changed {
			a.Title = "Leader changed: node " + leader + " leads"
			a.Message = fmt.Sprintf("Node %s leads since %s (term %d); before it, node %s. ", leader, stamp(since), term, prev)
		} else {
			a.Title = "Leader election: node " + leader + " kept the lead"
			a.Message = fmt.Sprintf("An election moved the cluster to term %d at %s; node %s leads. ", term, stamp(now), leader)
		}
		if n > 1 {
			a.Message += fmt.Sprintf("%d leader changes or elections so far, none %s apart. ", n, ago(w.th.leaderWindow))
		}
		if n >= w.th.elections {
			a.Level = alerts.Warning
			a.Title = fmt.Sprintf("%d leader changes or elections", n)
			a.Message += "Frequent elections mean the nodes keep losing contact with the leader: look at the network between them and at their load. "
		}
		a.Message += "Seen by node " + w.s.cfg.NodeTag + "; this alert clears after " + ago(w.th.leaderWindow) + " without another."
		store.Raise(a)
	} else if cur, ok := store.Get(keyLeaderMoves); ok && now.Sub(cur.LastSeen) >= w.th.leaderWindow {
		store.Clear(keyLeaderMoves)
	}

	switch {
	case !noLeader.IsZero() && now.Sub(noLeader) >= w.th.nodeUnreachable:
		store.Raise(alerts.Alert{Key: keyNoLeader, Level: alerts.Error, Link: "/studio/cluster", Title: "No leader: the cluster has no quorum",
			Message: fmt.Sprintf("Node %s has seen no leader since %s. Identity, database and subscription changes are refused until a majority of the nodes answer each other again; documents are still written and replicated.",
				w.s.cfg.NodeTag, stamp(noLeader))})
	case noLeader.IsZero():
		store.Clear(keyNoLeader)
	}
}

// ---- Nodes that do not answer ----

// probe asks every other member's /livez, concurrently, at most one round
// at a time.
func (w *watchers) probe() {
	if !w.probing.CompareAndSwap(false, true) {
		return
	}
	self := w.s.cfg.NodeTag
	nodes := w.s.cluster.Nodes()
	go func() {
		defer w.probing.Store(false)
		var wg sync.WaitGroup
		for _, n := range nodes {
			if n.Tag == self || n.URL == "" {
				continue
			}
			wg.Add(1)
			go func(tag, u string) {
				defer wg.Done()
				err := w.ping(u)
				if w.ctx.Err() != nil {
					return
				}
				now := w.now()
				w.mu.Lock()
				p := w.probes[tag]
				if p == nil {
					p = &probe{}
					w.probes[tag] = p
				}
				p.url = u
				if err == nil {
					p.answered, p.failingSince, p.err = now, time.Time{}, ""
				} else {
					if p.failingSince.IsZero() {
						p.failingSince = now
					}
					p.err = err.Error()
				}
				w.mu.Unlock()
			}(n.Tag, n.URL)
		}
		wg.Wait()
	}()
}

func (w *watchers) ping(base string) error {
	ctx, cancel := context.WithTimeout(w.ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/livez", nil)
	if err != nil {
		return err
	}
	resp, err := w.s.nodes.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/livez answered %d", resp.StatusCode)
	}
	return nil
}

// checkNodes raises an error for each member that has not answered for
// the threshold, clears it once the member answers, and returns the
// members held unreachable.
func (w *watchers) checkNodes(now time.Time) map[string]bool {
	members := map[string]bool{}
	voters := 0
	for _, n := range w.s.cluster.Nodes() {
		members[n.Tag] = true
	}
	for _, sv := range w.s.cluster.Status().Servers {
		if sv.Suffrage == "voter" {
			voters++
		}
	}
	down := map[string]bool{}
	var raise []alerts.Alert
	keep := map[string]bool{}
	w.mu.Lock()
	for tag, p := range w.probes {
		if !members[tag] {
			delete(w.probes, tag)
			continue
		}
		key := keyNode + tag
		switch {
		case p.failingSince.IsZero():
		case now.Sub(p.failingSince) >= w.th.nodeUnreachable:
			down[tag] = true
			last := "it has not answered since this node started"
			if !p.answered.IsZero() {
				last = "it last answered at " + stamp(p.answered)
			}
			raise = append(raise, alerts.Alert{Key: key, Level: alerts.Error, Link: "/studio/cluster",
				Title: "Node " + tag + " is unreachable",
				Message: fmt.Sprintf("Node %s (%s) has not answered node %s for %s (%s): %s. Its copies of the databases are not updated, replication to it waits, and the cluster runs on the other nodes (%d voters in all).",
					tag, p.url, w.s.cfg.NodeTag, ago(now.Sub(p.failingSince)), last, p.err, voters)})
		default:
			keep[key] = true // failing, not for long enough yet
		}
	}
	for tag := range members {
		if _, probed := w.probes[tag]; !probed && tag != w.s.cfg.NodeTag {
			keep[keyNode+tag] = true // not probed yet since this node started
		}
	}
	w.mu.Unlock()
	w.syncAlerts(keyNode, raise, keep)
	return down
}

// ---- Replication ----

type senderOf struct {
	db string
	st replication.Stats
}

// allSenders are the figures of every outgoing replication destination.
func (s *Server) allSenders() []senderOf {
	type one struct {
		db  string
		snd *replication.Sender
	}
	s.repl.mu.Lock()
	var all []one
	for _, rs := range s.repl.senders {
		all = append(all, one{rs.handle.Name(), rs.s})
	}
	s.repl.mu.Unlock()
	out := make([]senderOf, 0, len(all))
	for _, o := range all {
		out = append(out, senderOf{db: o.db, st: o.snd.Stats()})
	}
	return out
}

// checkReplication raises an alert for each destination disconnected with
// an error for replError (unless its node is unreachable: that alert says
// it), and for each whose oldest unacknowledged change is older than
// replLag.
func (w *watchers) checkReplication(now time.Time, down map[string]bool) {
	var errs, lags []alerts.Alert
	keepErr, keepLag := map[string]bool{}, map[string]bool{}
	seen := map[string]bool{}
	self := w.s.cfg.NodeTag
	for _, o := range w.s.allSenders() {
		st := o.st
		id := lower(o.db) + "/" + self + ">" + st.Tag
		seen[id] = true
		link := dbPath(o.db, "replication")
		w.mu.Lock()
		if st.Connected {
			delete(w.replDown, id)
		} else if _, ok := w.replDown[id]; !ok {
			w.replDown[id] = now
		}
		downSince, isDown := w.replDown[id]
		w.mu.Unlock()
		switch {
		case !isDown:
		case down[st.Tag]:
		case st.LastError != "" && now.Sub(downSince) >= w.th.replError:
			errs = append(errs, alerts.Alert{Key: keyReplError + id, Level: alerts.Error, Database: o.db, Link: link,
				Title: fmt.Sprintf("Replication of %s from %s to %s fails", o.db, self, st.Tag),
				Message: fmt.Sprintf("Node %s has not been able to replicate %s to node %s (%s) for %s, although %s answers: %s (%d failed connections). %d changes wait.",
					self, o.db, st.Tag, st.Destination, ago(now.Sub(downSince)), st.Tag, st.LastError, st.Errors, st.ItemsBehind)})
		default:
			keepErr[keyReplError+id] = true
		}
		lag := time.Duration(st.SecondsBehind * float64(time.Second))
		switch {
		case st.Connected && lag >= w.th.replLag:
			lags = append(lags, alerts.Alert{Key: keyReplLag + id, Level: alerts.Warning, Database: o.db, Link: link,
				Title: fmt.Sprintf("Replication of %s from %s to %s lags %s", o.db, self, st.Tag, ago(lag)),
				Message: fmt.Sprintf("Node %s (%s) has not acknowledged %d changes of %s from node %s; the oldest was written %s ago (threshold %s). It receives %.0f documents/s.",
					st.Tag, st.Destination, st.ItemsBehind, o.db, self, ago(lag), ago(w.th.replLag), st.DocsPerSec)})
		case !st.Connected && lag > 0:
			keepLag[keyReplLag+id] = true // the error alert speaks for it
		}
	}
	w.mu.Lock()
	for id := range w.replDown {
		if !seen[id] {
			delete(w.replDown, id)
		}
	}
	w.mu.Unlock()
	w.syncAlerts(keyReplError, errs, keepErr)
	w.syncAlerts(keyReplLag, lags, keepLag)
}

// ---- Conflicts ----

// checkConflicts raises one alert per database holding conflicts, with
// the count, and clears it when none is left.
func (w *watchers) checkConflicts(ctx context.Context) {
	var raise []alerts.Alert
	keep := map[string]bool{}
	for _, db := range w.s.catalog.All() {
		key := keyConflicts + lower(db.Name())
		n, err := db.ConflictCount(ctx)
		if err != nil {
			keep[key] = true
			continue
		}
		if n == 0 {
			continue
		}
		title := fmt.Sprintf("%d conflicted documents in %s", n, db.Name())
		if n == 1 {
			title = "1 conflicted document in " + db.Name()
		}
		msg := fmt.Sprintf("Node %s's copy of %s holds %d documents with concurrent versions that its conflict strategy kept for a person (manual, or a script that failed). Loading one answers 409. Resolve them on the Conflicts page.", w.s.cfg.NodeTag, db.Name(), n)
		if cur, ok := w.s.alerts.Get(key); ok && cur.Title != title {
			if was, err := strconv.Atoi(strings.Fields(cur.Title)[0]); err == nil && was < n {
				msg += fmt.Sprintf(" %d new since the last count (%d).", n-was, was)
			}
		}
		raise = append(raise, alerts.Alert{Key: key, Level: alerts.Warning, Database: db.Name(), Link: dbPath(db.Name(), "conflicts"), Title: title, Message: msg})
	}
	w.syncAlerts(keyConflicts, raise, keep)
}

// ---- Subscriptions ----

// checkSubscriptions raises one alert per database with runaway
// subscriptions (the monitor's findings) and one per stalled subscription.
func (w *watchers) checkSubscriptions(ctx context.Context) {
	var runaway, stalled []alerts.Alert
	for _, name := range w.s.catalog.Names() {
		r := w.s.subs.Report(ctx, name)
		if len(r.Findings) > 0 {
			subs := map[string]bool{}
			rules := map[string]int{}
			var order []string
			for _, f := range r.Findings {
				if !subs[f.Subscription] {
					subs[f.Subscription] = true
					order = append(order, f.Subscription)
				}
				rules[f.Rule]++
			}
			sort.Strings(order)
			var parts []string
			for rule, n := range rules {
				parts = append(parts, fmt.Sprintf("%s %d", rule, n))
			}
			sort.Strings(parts)
			names := order
			if len(names) > 5 {
				names = append(append([]string{}, names[:5]...), fmt.Sprintf("and %d more", len(order)-5))
			}
			runaway = append(runaway, alerts.Alert{Key: keyRunaway + lower(name), Level: alerts.Warning, Database: name, Link: dbPath(name, "subscriptions"),
				Title:   fmt.Sprintf("%d runaway subscriptions in %s", len(order), name),
				Message: fmt.Sprintf("The subscription monitor flags %s (%s): %s. Look at them, and disable the flagged ones, on the Subscriptions page.", strings.Join(names, ", "), strings.Join(parts, ", "), r.Findings[0].Reason)})
		}
		for _, st := range r.Subscriptions {
			if st.Status != subscriptions.Stalled || st.Disabled {
				continue
			}
			worker := "a worker"
			if len(st.Workers) > 0 {
				worker = "a worker (" + st.Workers[0].Addr + ")"
			}
			last := "nothing yet"
			if st.LastAck != nil {
				last = "nothing since " + stamp(*st.LastAck)
			}
			stalled = append(stalled, alerts.Alert{Key: keyStalled + lower(name) + "/" + lower(st.Name), Level: alerts.Warning, Database: name,
				Link:  dbPath(name, "subscriptions/"+url.PathEscape(st.Name)),
				Title: fmt.Sprintf("Subscription %s in %s is stalled", st.Name, name),
				Message: fmt.Sprintf("On node %s %s is connected but has acknowledged %s while %d documents wait (lag %.0f s, %d in flight). The worker may be stuck processing a batch.",
					w.s.cfg.NodeTag, worker, last, st.Backlog, st.LagSeconds, st.InFlight)})
		}
	}
	w.syncAlerts(keyRunaway, runaway, nil)
	w.syncAlerts(keyStalled, stalled, nil)
}

// ---- Indexes ----

// checkIndexes raises an alert for each index of this node with errors or
// in the error state, and for each stale for longer than indexStale.
func (w *watchers) checkIndexes(ctx context.Context, now time.Time) {
	var errs, stale []alerts.Alert
	keep := map[string]bool{}
	seen := map[string]bool{}
	self := w.s.cfg.NodeTag
	for _, db := range w.s.catalog.All() {
		for _, ix := range w.s.indexes.List(db.Name()) {
			id := lower(db.Name()) + "/" + lower(ix.Name())
			link := dbPath(db.Name(), "index?name="+url.QueryEscape(ix.Name()))
			state := ix.State()
			if list := ix.Errors(); state == index.StateError || len(list) > 0 {
				a := alerts.Alert{Key: keyIndexErrors + id, Level: alerts.Warning, Database: db.Name(), Link: link,
					Title: fmt.Sprintf("Index %s in %s has %d errors", ix.Name(), db.Name(), len(list))}
				if state == index.StateError {
					a.Level, a.Title = alerts.Error, fmt.Sprintf("Index %s in %s failed and stopped", ix.Name(), db.Name())
				}
				a.Message = "On node " + self + ". "
				if n := len(list); n > 0 {
					e := list[n-1]
					a.Message += fmt.Sprintf("The last error (%s of %q at %s): %s. ", e.Action, e.Document, stamp(e.Timestamp), e.Error)
				}
				a.Message += "The index page lists them; fix the documents or the definition, then reset the index."
				errs = append(errs, a)
			}
			if state == index.StateDisabled {
				continue
			}
			isStale, reasons := ix.Stale(ctx)
			if !isStale {
				continue
			}
			seen[id] = true
			w.mu.Lock()
			since, ok := w.staleSince[id]
			if !ok {
				since = now
				w.staleSince[id] = now
			}
			w.mu.Unlock()
			if now.Sub(since) < w.th.indexStale {
				keep[keyIndexStale+id] = true
				continue
			}
			if len(reasons) > 3 {
				reasons = append(reasons[:3], fmt.Sprintf("and %d more", len(reasons)-3))
			}
			stale = append(stale, alerts.Alert{Key: keyIndexStale + id, Level: alerts.Warning, Database: db.Name(), Link: link,
				Title: fmt.Sprintf("Index %s in %s is stale", ix.Name(), db.Name()),
				Message: fmt.Sprintf("On node %s the index has been stale since %s (threshold %s): %s. Queries on it wait or answer stale results.",
					self, stamp(since), ago(w.th.indexStale), strings.Join(reasons, "; "))})
		}
	}
	w.mu.Lock()
	for id := range w.staleSince {
		if !seen[id] {
			delete(w.staleSince, id)
		}
	}
	w.mu.Unlock()
	w.syncAlerts(keyIndexErrors, errs, nil)
	w.syncAlerts(keyIndexStale, stale, keep)
}

// ---- Every node's alerts ----

// gather fetches every other member's alerts (concurrently, gatherTimeout
// at most) and wakes the live pages when what they hold changed.
func (w *watchers) gather(ctx context.Context) {
	self := w.s.cfg.NodeTag
	nodes := w.s.cluster.Nodes()
	lists := make([]alerts.NodeList, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		if n.Tag == self {
			continue
		}
		wg.Add(1)
		go func(i int, tag, base string) {
			defer wg.Done()
			l := alerts.NodeList{Node: tag}
			if base == "" {
				l.Err = "no HTTP URL known yet"
			} else {
				ctx, cancel := context.WithTimeout(ctx, gatherTimeout)
				defer cancel()
				var out []alerts.Alert
				if err := httpx.GetJSON(ctx, w.s.nodes, strings.TrimRight(base, "/")+"/internal/notifications", maxAlertsAnswer, &out); err != nil {
					l.Err = err.Error()
				} else {
					l.Alerts = out
				}
			}
			lists[i] = l
		}(i, n.Tag, n.URL)
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	peers := map[string]alerts.NodeList{}
	h := fnv.New64a()
	for _, l := range lists {
		if l.Node == "" {
			continue
		}
		peers[l.Node] = l
		fmt.Fprintf(h, "%s|%t|", l.Node, l.Err == "")
		for _, a := range l.Alerts {
			fmt.Fprintf(h, "%s|%s|%s|%s|%t|%d|", a.Key, a.Level, a.Title, a.Message, a.Dismissed, a.PostponedUntil.Unix())
		}
	}
	sum := h.Sum64()
	w.gmu.Lock()
	w.peers = peers
	changed := sum != w.print
	w.print = sum
	w.gmu.Unlock()
	if changed && w.s.hub != nil {
		w.s.hub.Notify("")
	}
}

// Gathered is every node's alerts: this node's as they are now, the
// others' as last fetched (at most a few seconds old).
func (w *watchers) Gathered(ctx context.Context) alerts.Gathered {
	self := w.s.cfg.NodeTag
	lists := []alerts.NodeList{{Node: self, Alerts: w.s.alerts.All()}}
	members := map[string]bool{}
	for _, n := range w.s.cluster.Nodes() {
		members[n.Tag] = true
	}
	w.gmu.Lock()
	for tag := range members {
		if tag == self {
			continue
		}
		l, ok := w.peers[tag]
		if !ok {
			l = alerts.NodeList{Node: tag, Err: "not asked yet"}
		}
		lists = append(lists, l)
	}
	w.gmu.Unlock()
	return alerts.Merge(lists, w.now())
}

// Act applies a person's action to a key on this node and on every other
// member (the ones that do not hold it answer 404), then fetches the
// others' alerts again so the next page shows the result.
func (w *watchers) Act(ctx context.Context, key, action string, until time.Time) error {
	applied := false
	if err := applyAction(w.s.alerts, key, action, until); err == nil {
		applied = true
	} else if !errors.Is(err, alerts.ErrNotFound) {
		return err
	}
	self := w.s.cfg.NodeTag
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, n := range w.s.cluster.Nodes() {
		if n.Tag == self || n.URL == "" {
			continue
		}
		wg.Add(1)
		go func(base string) {
			defer wg.Done()
			q := url.Values{"key": {key}, "action": {action}}
			if !until.IsZero() {
				q.Set("until", until.UTC().Format(time.RFC3339Nano))
			}
			ctx, cancel := context.WithTimeout(ctx, gatherTimeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/internal/notifications/action?"+q.Encode(), nil)
			if err != nil {
				return
			}
			resp, err := w.s.nodes.Do(req)
			if err != nil {
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent {
				mu.Lock()
				applied = true
				mu.Unlock()
			}
		}(n.URL)
	}
	wg.Wait()
	w.gather(ctx)
	if !applied {
		return alerts.ErrNotFound
	}
	return nil
}

func applyAction(st *alerts.Store, key, action string, until time.Time) error {
	switch action {
	case alerts.Dismiss:
		return st.DismissKey(key)
	case alerts.Postpone:
		return st.PostponeKey(key, until)
	case alerts.Restore:
		return st.RestoreKey(key)
	}
	return dberr.New(dberr.BadRequest, "action must be dismiss, postpone or restore, not %q", action)
}

// internalAlerts serves GET /internal/notifications to the other nodes:
// every alert of this node, hidden ones included.
func (s *Server) internalAlerts(c echo.Context) error {
	return c.JSON(http.StatusOK, s.alerts.All())
}

// internalAlertAction serves POST /internal/notifications/action: another
// node passes on a person's action (its handler checked who may).
func (s *Server) internalAlertAction(c echo.Context) error {
	var until time.Time
	if v := c.QueryParam("until"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return dberr.New(dberr.BadRequest, "until must be an RFC 3339 time: %v", err)
		}
		until = t
	}
	err := applyAction(s.alerts, c.QueryParam("key"), c.QueryParam("action"), until)
	if errors.Is(err, alerts.ErrNotFound) {
		return dberr.New(dberr.NotFound, "This node holds no alert %q", c.QueryParam("key"))
	}
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
