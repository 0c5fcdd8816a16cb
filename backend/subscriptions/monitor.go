package subscriptions

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rookerydb/rookery/backend/rql"
	"github.com/rookerydb/rookery/backend/storage"
)

// Statuses over the sliding window, in the manner of Kafka's Burrow.
const (
	OK      = "OK"
	Slow    = "SLOW"    // progressing, but the backlog grows
	Stalled = "STALLED" // a worker is connected, but nothing is acknowledged while there is a backlog
	Stopped = "STOPPED" // no worker while there is a backlog
	Rewound = "REWOUND" // the position moved back
)

// Runaway rules.
const (
	RuleBurst     = "burst"          // many subscriptions created in a short window
	RuleDuplicate = "duplicate"      // subscriptions with identical queries
	RuleFromStart = "from-beginning" // subscriptions repeatedly starting from the beginning of time
	RuleScan      = "scan-share"     // subscription scans dominate the database's reads
	RuleChurn     = "churn"          // connections that connect, read and vanish
)

// SettingKey is the database setting (in the cluster state) holding the
// monitor's thresholds.
const SettingKey = "subscriptions.monitor"

// Thresholds tune the statuses and the runaway rules.
type Thresholds struct {
	WindowSeconds  int     // the status window
	StallSeconds   int     // no acknowledgement for this long with a backlog: STALLED
	BurstCount     int     // this many subscriptions created...
	BurstSeconds   int     // ...within this many seconds: burst
	DuplicateCount int     // this many subscriptions with one query: duplicate
	FromStartCount int     // this many created from the beginning of time within BurstSeconds, or rewound this often: from-beginning
	ScanShare      float64 // subscriptions of one query reading this share of the database's documents...
	ScanMinDocs    int64   // ...and at least this many within the window: scan-share
	ChurnCount     int     // this many connections within BurstSeconds...
	ChurnSeconds   int     // ...each shorter than this: churn
	// SlowSeconds is the hysteresis of SLOW: reported only after the
	// backlog kept growing for this long, and back to OK only after it
	// stopped growing for as long.
	SlowSeconds int
}

// DefaultThresholds are used for what a database does not set.
var DefaultThresholds = Thresholds{WindowSeconds: 30, StallSeconds: 30, BurstCount: 20, BurstSeconds: 60, DuplicateCount: 5,
	FromStartCount: 10, ScanShare: 0.5, ScanMinDocs: 10000, ChurnCount: 10, ChurnSeconds: 10, SlowSeconds: 10}

// WithDefaults fills unset thresholds.
func (t Thresholds) WithDefaults() Thresholds {
	d := DefaultThresholds
	fill := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	fill(&t.WindowSeconds, d.WindowSeconds)
	fill(&t.StallSeconds, d.StallSeconds)
	fill(&t.BurstCount, d.BurstCount)
	fill(&t.BurstSeconds, d.BurstSeconds)
	fill(&t.DuplicateCount, d.DuplicateCount)
	fill(&t.FromStartCount, d.FromStartCount)
	fill(&t.ChurnCount, d.ChurnCount)
	fill(&t.ChurnSeconds, d.ChurnSeconds)
	fill(&t.SlowSeconds, d.SlowSeconds)
	if t.ScanShare <= 0 || t.ScanShare > 1 {
		t.ScanShare = d.ScanShare
	}
	if t.ScanMinDocs <= 0 {
		t.ScanMinDocs = d.ScanMinDocs
	}
	return t
}

// Thresholds returns a database's thresholds.
func (m *Manager) Thresholds(db string) Thresholds {
	var t Thresholds
	if raw := m.store.Setting(db, SettingKey); len(raw) > 0 {
		_ = json.Unmarshal(raw, &t)
	}
	return t.WithDefaults()
}

// Finding is one runaway flag with its reason.
type Finding struct {
	Subscription string
	Rule         string
	Reason       string
}

// Worker is a connected worker.
type Worker struct {
	Addr     string
	Strategy string
	Since    time.Time
}

// Connection is a recent connection.
type Connection struct {
	Addr     string
	Strategy string
	Since    time.Time
	Ended    *time.Time `json:",omitempty"`
	Docs     int64
	Acks     int64
}

// BatchInfo is a recent batch.
type BatchInfo struct {
	At          time.Time
	Docs        int
	Scanned     int
	FirstEtag   int64
	LastEtag    int64
	AckedAt     *time.Time `json:",omitempty"`
	Redelivered int
	Worker      string
}

// Stats is everything the monitor knows of one subscription.
type Stats struct {
	Name       string
	ID         int64
	Query      string
	Collection string
	Disabled   bool
	Start      string
	Created    time.Time
	Status     string
	Workers    []Worker
	// Position is the progress vector; PositionEtag this copy's part.
	Position     string
	PositionEtag int64
	// LastEtag is the collection's newest document; Progress is
	// PositionEtag against it (0..1).
	LastEtag int64
	Progress float64
	// Backlog is the documents matching the query not yet acknowledged
	// (estimated from a sample when not exact); ToScan the documents of
	// the collection after the position.
	Backlog      int64
	BacklogExact bool
	ToScan       int64
	LagSeconds   float64
	// Oldest is when the oldest document not acknowledged was written
	// (zero without a backlog): LagSeconds is its age at the sample. The
	// studio shows it as a time, so an idle page's rows do not change.
	Oldest        time.Time
	InFlight      int
	InFlightAge   float64 // seconds
	DocsPerSec    float64
	BatchesPerSec float64
	AckP50Ms      float64
	AckP99Ms      float64
	Redeliveries  int64
	Errors        int64
	LastError     string     `json:",omitempty"`
	LastErrorAt   *time.Time `json:",omitempty"`
	// RecoveredAt is the first batch acknowledged after the last error:
	// set, the error is a past one; nil, it is current.
	RecoveredAt *time.Time `json:",omitempty"`
	// LastNode is the node whose delivery last moved the position (from
	// the cluster state); MentorNode the node the definition asks for.
	LastNode   string `json:",omitempty"`
	MentorNode string `json:",omitempty"`
	DocsRead   int64
	DocsSent   int64
	DocsAcked  int64
	Batches    int64
	// ScanCost is documents read per document sent (0 before any send).
	ScanCost    float64
	LastAck     *time.Time `json:",omitempty"`
	LastConnect *time.Time `json:",omitempty"`
	// BacklogHistory is one backlog figure per sample, oldest first.
	BacklogHistory []int64
	Flags          []Finding
	Connections    []Connection
	History        []BatchInfo

	rewinds int // how often the starting point was moved back
}

// Report is a database's subscriptions as the monitor sees them.
type Report struct {
	Database string
	// Node is the tag of the node that computed the report: the workers,
	// rates, errors and statuses are this node's, the position its copy's.
	Node           string
	At             time.Time
	Subscriptions  []Stats
	Findings       []Finding
	Thresholds     Thresholds
	DocsReadPerSec float64 // by every reader of the database
}

type dbMonitor struct {
	at     time.Time
	report Report
	reads  []readSample
}

type readSample struct {
	At   time.Time
	Read int64
}

type backlogKey struct {
	db, collection, query string
	after, last           int64
}

type backlogEntry struct {
	toScan, backlog int64
	exact           bool
	oldest          time.Time
	used            time.Time
}

// sampleDocs is how many documents after the position the monitor reads to
// estimate a filtered backlog and the oldest unprocessed change.
const sampleDocs = 2000

// backlog measures what is left after etag after, cached by position and
// collection end, so identical subscriptions and idle ones cost nothing.
func (m *Manager) backlog(ctx context.Context, db DB, q *rql.Query, query string, after, last int64) backlogEntry {
	k := backlogKey{strings.ToLower(db.Name()), strings.ToLower(q.Collection), query, after, last}
	now := m.now()
	m.mu.Lock()
	e, ok := m.cache[k]
	if ok {
		e.used = now
		m.cache[k] = e
	}
	m.mu.Unlock()
	if ok {
		return e
	}
	e = backlogEntry{used: now, exact: true}
	if after < last {
		e.toScan, _ = db.CountCollectionAfter(ctx, q.Collection, after)
		limit := sampleDocs
		if q.Where == nil {
			limit = 1
		}
		scanned, matched := 0, int64(0)
		_ = db.ScanCollection(ctx, q.Collection, after, limit, func(d *storage.Document) error {
			scanned++
			if q.Where != nil {
				if _, ok, _ := evaluate(q, d); !ok {
					return nil
				}
			}
			matched++
			if e.oldest.IsZero() {
				e.oldest = d.LastModified
			}
			return nil
		})
		switch {
		case q.Where == nil:
			e.backlog = e.toScan
		case int64(scanned) >= e.toScan:
			e.backlog = matched
		default:
			e.backlog = int64(float64(matched) / float64(scanned) * float64(e.toScan))
			e.exact = false
		}
	}
	m.mu.Lock()
	m.cache[k] = e
	m.mu.Unlock()
	return e
}

// Sample refreshes the reports of the given databases: call it once a
// second; the statuses and rates are computed over the samples.
func (m *Manager) Sample(ctx context.Context, dbs []string) {
	for _, name := range dbs {
		m.compute(ctx, name)
	}
	m.mu.Lock()
	cutoff := m.now().Add(-time.Minute)
	for k, e := range m.cache {
		if e.used.Before(cutoff) {
			delete(m.cache, k)
		}
	}
	m.mu.Unlock()
}

// Report returns a database's report. Its figures are computed at most
// once a second (each computation is a sample of the windows); the
// definitions are always current, so an action shows at once: a deleted
// subscription is gone, a disabled or edited one shows as such.
func (m *Manager) Report(ctx context.Context, db string) Report {
	return m.ReportWithin(ctx, db, 900*time.Millisecond)
}

// ReportWithin is Report with figures up to maxAge old: another node's
// page asks with a few seconds, so its question never adds a computation
// to the once-a-second samples of a busy node.
func (m *Manager) ReportWithin(ctx context.Context, db string, maxAge time.Duration) Report {
	m.mu.Lock()
	mon := m.mon[strings.ToLower(db)]
	fresh := mon != nil && m.now().Sub(mon.at) < maxAge
	var r Report
	if fresh {
		r = mon.report
	}
	m.mu.Unlock()
	if !fresh {
		return m.compute(ctx, db)
	}
	rows := make([]Stats, 0, len(r.Subscriptions))
	for _, st := range r.Subscriptions {
		sub, ok := m.store.Subscription(db, st.Name)
		if !ok {
			continue
		}
		if def, err := Parse(sub.Data); err == nil {
			st.Disabled, st.Query = def.Disabled, def.Query
		}
		rows = append(rows, st)
	}
	findings := make([]Finding, 0, len(r.Findings))
	for _, f := range r.Findings {
		if _, ok := m.store.Subscription(db, f.Subscription); ok {
			findings = append(findings, f)
		}
	}
	r.Subscriptions, r.Findings = rows, findings
	return r
}

func (m *Manager) compute(ctx context.Context, dbName string) Report {
	now := m.now()
	th := m.Thresholds(dbName)
	r := Report{Database: dbName, Node: m.nodeTag, At: now.UTC(), Thresholds: th, Subscriptions: []Stats{}, Findings: []Finding{}}
	db, err := m.open(dbName)
	if err != nil {
		return r
	}
	subs := m.store.Subscriptions(db.Name())
	lastEtags := map[string]int64{}
	type computed struct {
		st   Stats
		pos  int64
		back int64
	}
	out := make([]computed, 0, len(subs))
	for _, sub := range subs {
		def, err := Parse(sub.Data)
		if err != nil {
			continue
		}
		q, err := rql.Parse(def.Query)
		if err != nil {
			continue
		}
		prog := ParseProgress(sub.Progress)
		pos := prog.Etag(db.DatabaseID())
		last, ok := lastEtags[strings.ToLower(q.Collection)]
		if !ok {
			last, _ = db.CollectionLastEtag(ctx, q.Collection)
			lastEtags[strings.ToLower(q.Collection)] = last
		}
		b := m.backlog(ctx, db, q, def.Query, pos, last)
		st := Stats{Name: sub.Name, ID: sub.ID, Query: def.Query, Collection: q.Collection, Disabled: def.Disabled, Start: def.Start,
			Created: def.Created, Position: prog.Vector, PositionEtag: pos, LastEtag: last, Backlog: b.backlog, BacklogExact: b.exact,
			ToScan: b.toScan, LastAck: prog.AckAt, LastNode: prog.Node, MentorNode: def.MentorNode, rewinds: prog.Rewinds}
		if last > 0 {
			st.Progress = min(1, float64(pos)/float64(last))
		} else {
			st.Progress = 1
		}
		if b.backlog > 0 && !b.oldest.IsZero() {
			st.LagSeconds = now.Sub(b.oldest).Seconds()
			st.Oldest = b.oldest
		}
		out = append(out, computed{st: st, pos: pos, back: b.backlog})
	}

	exists := make(map[string]bool, len(subs))
	for _, sub := range subs {
		exists[strings.ToLower(sub.Name)] = true
	}
	m.Forget(db.Name(), func(name string) bool { return exists[strings.ToLower(name)] })
	m.mu.Lock()
	mon := m.mon[strings.ToLower(dbName)]
	if mon == nil {
		mon = &dbMonitor{}
		m.mon[strings.ToLower(dbName)] = mon
	}
	mon.reads = trim(append(mon.reads, readSample{At: now, Read: db.DocsRead()}), keepSamples)
	window := time.Duration(th.WindowSeconds) * time.Second
	dbReadsWindow := float64(0)
	if first := firstSince(mon.reads, now.Add(-window), func(s readSample) time.Time { return s.At }); first >= 0 {
		a, z := mon.reads[first], mon.reads[len(mon.reads)-1]
		dbReadsWindow = float64(z.Read - a.Read)
		if dt := z.At.Sub(a.At).Seconds(); dt > 0 {
			r.DocsReadPerSec = dbReadsWindow / dt
		}
	}
	subReadsWindow := map[string]int64{}
	for i := range out {
		c := &out[i]
		l := m.liveOf(db.Name(), c.st.Name)
		st := &l.stats
		connected := l.active != nil
		st.samples = trim(append(st.samples, sample{At: now, Position: c.pos, Backlog: c.back, Acked: st.docsAcked,
			Batches: st.batchesAcked, Read: st.docsRead, Connected: connected}), keepSamples)
		s := &c.st
		if connected {
			s.Workers = []Worker{{Addr: l.active.opts.ClientAddr, Strategy: l.active.opts.Strategy, Since: l.active.conn.Since.UTC()}}
		}
		if st.inflight != nil {
			s.InFlight = st.inflight.Docs
			s.InFlightAge = now.Sub(st.inflight.At).Seconds()
		}
		s.AckP50Ms, s.AckP99Ms = st.percentile(0.50), st.percentile(0.99)
		s.Redeliveries, s.Errors, s.LastError = st.redeliveries, st.errors, st.lastError
		if !st.lastErrorAt.IsZero() {
			t := st.lastErrorAt.UTC()
			s.LastErrorAt = &t
			if !st.recoveredAt.IsZero() {
				t := st.recoveredAt.UTC()
				s.RecoveredAt = &t
			}
		}
		s.DocsRead, s.DocsSent, s.DocsAcked, s.Batches = st.docsRead, st.docsSent, st.docsAcked, st.batchesAcked
		if st.docsSent > 0 {
			s.ScanCost = float64(st.docsRead) / float64(st.docsSent)
		}
		if !st.lastConnect.IsZero() {
			t := st.lastConnect.UTC()
			s.LastConnect = &t
		}
		first := firstSince(st.samples, now.Add(-window), func(x sample) time.Time { return x.At })
		win := st.samples[first:]
		a, z := win[0], win[len(win)-1]
		if dt := z.At.Sub(a.At).Seconds(); dt > 0 {
			s.DocsPerSec = float64(z.Acked-a.Acked) / dt
			s.BatchesPerSec = float64(z.Batches-a.Batches) / dt
		}
		subReadsWindow[s.Name] = z.Read - a.Read
		s.Status = st.health.next(status(win, s, connected, st, now, th), now, time.Duration(th.SlowSeconds)*time.Second)
		hist := st.samples[max(0, len(st.samples)-60):]
		s.BacklogHistory = make([]int64, len(hist))
		for j, x := range hist {
			s.BacklogHistory[j] = x.Backlog
		}
		for _, cr := range st.conns[max(0, len(st.conns)-20):] {
			cn := Connection{Addr: cr.Addr, Strategy: cr.Strategy, Since: cr.Since.UTC(), Docs: cr.Docs, Acks: cr.Acks}
			if !cr.Ended.IsZero() {
				t := cr.Ended.UTC()
				cn.Ended = &t
			}
			s.Connections = append(s.Connections, cn)
		}
		for _, br := range st.batches[max(0, len(st.batches)-20):] {
			bi := BatchInfo{At: br.At.UTC(), Docs: br.Docs, Scanned: br.Scanned, FirstEtag: br.FirstEtag, LastEtag: br.LastEtag,
				Redelivered: br.Redelivered, Worker: br.Worker}
			if !br.AckedAt.IsZero() {
				t := br.AckedAt.UTC()
				bi.AckedAt = &t
			}
			s.History = append(s.History, bi)
		}
	}
	churn := map[string][2]int{} // by name: short connections in the burst window, all there
	for _, c := range out {
		l := m.subs[key(db.Name(), c.st.Name)]
		short, total := 0, 0
		for _, cr := range l.stats.conns {
			if cr.Since.Before(now.Add(-time.Duration(th.BurstSeconds) * time.Second)) {
				continue
			}
			total++
			if !cr.Ended.IsZero() && cr.Ended.Sub(cr.Since) < time.Duration(th.ChurnSeconds)*time.Second {
				short++
			}
		}
		churn[c.st.Name] = [2]int{short, total}
	}
	m.mu.Unlock()

	stats := make([]Stats, len(out))
	for i := range out {
		stats[i] = out[i].st
	}
	r.Findings = findings(stats, th, now, subReadsWindow, dbReadsWindow, churn)
	byName := map[string]int{}
	for i := range stats {
		byName[stats[i].Name] = i
	}
	for _, f := range r.Findings {
		i := byName[f.Subscription]
		stats[i].Flags = append(stats[i].Flags, f)
	}
	r.Subscriptions = stats
	m.mu.Lock()
	mon.at, mon.report = now, r
	m.mu.Unlock()
	return r
}

func firstSince[T any](s []T, since time.Time, at func(T) time.Time) int {
	if len(s) == 0 {
		return -1
	}
	i := sort.Search(len(s), func(i int) bool { return !at(s[i]).Before(since) })
	if i == len(s) {
		i = len(s) - 1
	}
	return i
}

// status judges a subscription over the window's samples.
func status(win []sample, s *Stats, connected bool, st *stats, now time.Time, th Thresholds) string {
	for i := 1; i < len(win); i++ {
		if win[i].Position < win[i-1].Position {
			return Rewound
		}
	}
	if s.Backlog <= 0 {
		return OK
	}
	if !connected {
		return Stopped
	}
	stall := time.Duration(th.StallSeconds) * time.Second
	lastMove := st.lastConnect
	if s.LastAck != nil && s.LastAck.After(lastMove) {
		lastMove = *s.LastAck
	}
	if now.Sub(lastMove) >= stall {
		return Stalled
	}
	if len(win) >= 5 && win[len(win)-1].Acked > win[0].Acked && backlogGrew(win) {
		return Slow
	}
	return OK
}

// backlogGrew tells whether the backlog grew across the window: its lowest
// figure in the window's last quarter is above its highest in the first.
// Comparing two single samples (first, last) called a healthy subscription
// SLOW whenever a batch happened to be waiting at the window's end.
func backlogGrew(win []sample) bool {
	k := max(1, len(win)/4)
	hi := win[0].Backlog
	for _, x := range win[:k] {
		hi = max(hi, x.Backlog)
	}
	lo := win[len(win)-1].Backlog
	for _, x := range win[len(win)-k:] {
		lo = min(lo, x.Backlog)
	}
	return lo > hi
}

func normalizeQuery(q string) string { return strings.ToLower(strings.Join(strings.Fields(q), " ")) }

// findings applies the runaway rules.
func findings(stats []Stats, th Thresholds, now time.Time, subReads map[string]int64, dbReads float64, churn map[string][2]int) []Finding {
	var out []Finding
	burstWindow := time.Duration(th.BurstSeconds) * time.Second
	var recent []string
	fromStart := map[string][]string{} // collection → recent subscriptions from the beginning of time
	groups := map[string][]string{}    // normalized query → subscriptions
	for _, s := range stats {
		if now.Sub(s.Created) <= burstWindow {
			recent = append(recent, s.Name)
			if s.Start == BeginningOfTime || s.Start == "" {
				fromStart[strings.ToLower(s.Collection)] = append(fromStart[strings.ToLower(s.Collection)], s.Name)
			}
		}
		groups[normalizeQuery(s.Query)] = append(groups[normalizeQuery(s.Query)], s.Name)
	}
	if len(recent) >= th.BurstCount {
		for _, n := range recent {
			out = append(out, Finding{n, RuleBurst, fmt.Sprintf("%d subscriptions were created in the last %ds (threshold %d)", len(recent), th.BurstSeconds, th.BurstCount)})
		}
	}
	for _, names := range fromStart {
		if len(names) >= th.FromStartCount {
			for _, n := range names {
				out = append(out, Finding{n, RuleFromStart, fmt.Sprintf("%d subscriptions on this collection started from the beginning of time in the last %ds (threshold %d)", len(names), th.BurstSeconds, th.FromStartCount)})
			}
		}
	}
	for _, s := range stats {
		if p := s.rewinds; p >= th.FromStartCount {
			out = append(out, Finding{s.Name, RuleFromStart, fmt.Sprintf("its starting point was moved back %d times (threshold %d)", p, th.FromStartCount)})
		}
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, q := range keys {
		names := groups[q]
		if len(names) >= th.DuplicateCount {
			for _, n := range names {
				out = append(out, Finding{n, RuleDuplicate, fmt.Sprintf("%d subscriptions run the same query '%s' (threshold %d)", len(names), q, th.DuplicateCount)})
			}
		}
		var read int64
		short, total := 0, 0
		for _, n := range names {
			read += subReads[n]
			short += churn[n][0]
			total += churn[n][1]
		}
		if dbReads > 0 && read >= th.ScanMinDocs && float64(read)/dbReads >= th.ScanShare {
			who := "this subscription"
			if len(names) > 1 {
				who = fmt.Sprintf("the %d subscriptions running '%s'", len(names), q)
			}
			for _, n := range names {
				out = append(out, Finding{n, RuleScan, fmt.Sprintf("%s read %d documents, %.0f%% of the database's reads in the last %ds (threshold %.0f%%)", who, read, 100*float64(read)/dbReads, th.WindowSeconds, 100*th.ScanShare)})
			}
		}
		if short >= th.ChurnCount {
			for _, n := range names {
				out = append(out, Finding{n, RuleChurn, fmt.Sprintf("%d of %d connections in the last %ds lasted under %ds (threshold %d)", short, total, th.BurstSeconds, th.ChurnSeconds, th.ChurnCount)})
			}
		}
	}
	order := make(map[string]int, len(stats))
	for i, s := range stats {
		order[s.Name] = i
	}
	sort.SliceStable(out, func(i, j int) bool { return order[out[i].Subscription] < order[out[j].Subscription] })
	return out
}
