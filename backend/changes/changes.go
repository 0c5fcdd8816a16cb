// Package changes is the engine of the Changes API (RavenDB's
// /databases/{db}/changes websocket): subscribers per database, their
// filters (watch-doc, watch-prefix, watch-collection, watch-counter, …), and
// the fan-out of document, counter, time-series, index and operation
// notifications to them. It knows no HTTP:
// the web layer reads a subscriber's commands from its socket, applies them
// here, and writes what Take hands it.
//
// The publishers (the storage commit hooks, the index writers, the
// operation registry) only append to their database's pending list and flip a
// one-slot channel: they never wait for a subscriber. One dispatcher
// goroutine per database with subscribers filters and encodes the pending
// notifications, at most once per FrameInterval while they keep coming (the
// first after a quiet spell at once), and appends each subscriber's share to
// its bounded queue, signalling one group of subscribers per tick so that
// the frames are spread out; a subscriber whose queue passes MaxPending is
// dropped with a reason. See DESIGN.md.
package changes

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
)

// Defaults of Options.
const (
	// DefaultMaxPending bounds the notifications queued for one
	// subscriber; one more drops it.
	DefaultMaxPending = 10000
	// DefaultFrameInterval is the shortest time between two dispatches of a
	// database's notifications while they keep coming.
	DefaultFrameInterval = 5 * time.Millisecond
	// DefaultFrameBudget is how many frames a second a database's
	// subscribers get together while changes keep coming: with more
	// subscribers than FrameInterval allows for, each one's frames are
	// spaced further apart (each frame carries more): 100 ms for 100
	// subscribers. Every frame costs a system call and wake-ups on both
	// sides, which the document writes pay for on a busy machine (DESIGN.md).
	DefaultFrameBudget = 1000
	// DefaultMaxWatches bounds the filters of one subscriber.
	DefaultMaxWatches = 1024
	// maxBacklog bounds the notifications a database's dispatcher has not
	// taken yet; past it every subscriber of the database is dropped (the
	// dispatcher cannot keep up, which only a stalled process does).
	maxBacklog = 1 << 20
	// maxFrame bounds what one Take returns, in bytes of notifications.
	maxFrame = 1 << 20
)

// Close codes a dropped subscriber is closed with (RFC 6455).
const (
	CodePolicy    = 1008 // too slow, no longer allowed
	CodeGoingAway = 1001 // database deleted, server stopping
)

// Options configure a Hub; zero fields take the defaults.
type Options struct {
	MaxPending    int
	FrameInterval time.Duration
	FrameBudget   int
	MaxWatches    int
}

// Hub holds every subscriber of a node.
type Hub struct {
	opts Options

	mu    sync.Mutex // subscribe, unsubscribe, feed lifecycle
	feeds atomic.Pointer[map[string]*feed]

	connections   atomic.Int64
	notifications atomic.Int64 // notifications queued to subscribers
	frames        atomic.Int64
	droppedSlow   atomic.Int64
	droppedOther  atomic.Int64
}

// New makes a hub.
func New(opts Options) *Hub {
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.FrameInterval <= 0 {
		opts.FrameInterval = DefaultFrameInterval
	}
	if opts.FrameBudget <= 0 {
		opts.FrameBudget = DefaultFrameBudget
	}
	if opts.MaxWatches <= 0 {
		opts.MaxWatches = DefaultMaxWatches
	}
	h := &Hub{opts: opts}
	empty := map[string]*feed{}
	h.feeds.Store(&empty)
	return h
}

// Stats are the hub's counters.
type Stats struct {
	Connections   int64 // open subscribers
	Notifications int64 // notifications queued to subscribers, ever
	Frames        int64 // frames handed to the web layer, ever
	DroppedSlow   int64 // subscribers dropped because their queue overflowed
	DroppedOther  int64 // dropped for another reason (access, deletion, stop)
}

// Stats reads the counters.
func (h *Hub) Stats() Stats {
	return Stats{Connections: h.connections.Load(), Notifications: h.notifications.Load(), Frames: h.frames.Load(),
		DroppedSlow: h.droppedSlow.Load(), DroppedOther: h.droppedOther.Load()}
}

// IndexChange is an index notification (IndexChange on the wire).
type IndexChange struct {
	Type string // BatchCompleted, IndexAdded, IndexRemoved, …
	Name string
	Etag int64
}

// OperationChange is an operation's new state (OperationStatusChange).
type OperationChange struct {
	ID    int64
	State any // {Status, Progress, Result}
}

type kind uint8

const (
	kindDocs kind = iota
	kindIndex
	kindOp
	kindItems // counters and time series
)

// item is what a publisher appended: a commit's document changes, a
// commit's counter and time-series changes, or one index or operation
// notification.
type item struct {
	kind  kind
	docs  []storage.Change
	items []storage.ItemChange
	ix    IndexChange
	op    OperationChange
}

// feed is one database's subscribers and pending notifications.
type feed struct {
	hub  *Hub
	name string

	mu      sync.Mutex
	pending []item
	count   int // notifications in pending
	subs    []*Sub
	seq     uint64 // subscribers so far
	wake    chan struct{}
	stop    chan struct{}

	// itemWatches counts the counter and time-series watches of the
	// subscribers: storage records those changes only while it is above 0.
	itemWatches atomic.Int64
}

func (h *Hub) feed(db string) *feed {
	return (*h.feeds.Load())[strings.ToLower(db)]
}

// Documents publishes a commit's document changes (the storage commit
// hook). It never blocks; with no subscriber of db it costs a map lookup.
// changes must not be modified afterwards (storage hands each commit its
// own slice).
func (h *Hub) Documents(db string, changes []storage.Change) {
	if len(changes) == 0 {
		return
	}
	if f := h.feed(db); f != nil {
		f.publish(item{kind: kindDocs, docs: changes}, len(changes))
	}
}

// Items publishes a commit's counter and time-series changes (the storage
// item hook), as Documents does. items must not be modified afterwards.
func (h *Hub) Items(db string, items []storage.ItemChange) {
	if len(items) == 0 {
		return
	}
	if f := h.feed(db); f != nil {
		f.publish(item{kind: kindItems, items: items}, len(items))
	}
}

// WantsItems tells whether a subscriber of db watches counters or time
// series (storage asks as each transaction begins; one atomic load and a
// map lookup).
func (h *Hub) WantsItems(db string) bool {
	f := h.feed(db)
	return f != nil && f.itemWatches.Load() > 0
}

// Index publishes an index notification.
func (h *Hub) Index(db string, c IndexChange) {
	if f := h.feed(db); f != nil {
		f.publish(item{kind: kindIndex, ix: c}, 1)
	}
}

// Operation publishes an operation's state (server-wide operations, db "",
// have no subscribers).
func (h *Hub) Operation(db string, c OperationChange) {
	if db == "" {
		return
	}
	if f := h.feed(db); f != nil {
		f.publish(item{kind: kindOp, op: c}, 1)
	}
}

func (f *feed) publish(it item, n int) {
	f.mu.Lock()
	if f.count+n > maxBacklog {
		subs := f.subs
		f.pending, f.count = nil, 0
		f.mu.Unlock()
		go func() { // not on the publisher's goroutine: drop takes locks
			for _, s := range subs {
				s.drop(CodePolicy, "too slow: the server could not keep up with this database's changes", true)
			}
		}()
		return
	}
	f.pending = append(f.pending, it)
	f.count += n
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// interval is the shortest time between two dispatches of a database with
// subs subscribers: FrameInterval, or longer when that would give them more
// than FrameBudget frames a second together.
func (h *Hub) interval(subs int) time.Duration {
	return max(h.opts.FrameInterval, time.Duration(subs)*time.Second/time.Duration(h.opts.FrameBudget))
}

// groups is how many groups the subscribers of a feed are split into: a
// tick (every FrameInterval while changes keep coming) hands the frames of
// one group, so that each subscriber gets one every groups ticks, at most
// FrameBudget frames a second together, and the frames are spread over the
// interval instead of written to every socket at once.
func (h *Hub) groups(subs int) uint64 {
	iv, fi := h.interval(subs), h.opts.FrameInterval
	return uint64((iv + fi - 1) / fi)
}

// run is the feed's dispatcher.
func (f *feed) run() {
	var last time.Time
	var tick uint64
	owed := 0
	for {
		if owed == 0 {
			select {
			case <-f.stop:
				return
			case <-f.wake:
			}
		}
		if wait := f.hub.opts.FrameInterval - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-f.stop:
				t.Stop()
				return
			case <-t.C:
			}
		}
		f.mu.Lock()
		items, subs := f.pending, f.subs
		f.pending, f.count = nil, 0
		f.mu.Unlock()
		// After a quiet spell every subscriber gets its frame at once; while
		// changes keep coming, one group per tick.
		quiet := time.Since(last) >= f.hub.interval(len(subs))
		last = time.Now()
		tick++
		groups := f.hub.groups(len(subs))
		owed = f.dispatch(items, subs, tick%groups, groups, quiet)
	}
}

// note is one notification being dispatched, with its filter keys and
// its encoding, made once and shared by every subscriber that wants it.
type note struct {
	kind     kind
	doc      *storage.Change
	item     *storage.ItemChange
	ix       *IndexChange
	op       *OperationChange
	id, coll string // lower-cased
	name     string // lower-cased index, counter or series name
	enc      []byte
	encErr   bool
	lowered  bool
}

func (n *note) lower() {
	if n.lowered {
		return
	}
	n.lowered = true
	switch n.kind {
	case kindDocs:
		n.id, n.coll = strings.ToLower(n.doc.ID), strings.ToLower(n.doc.Collection)
	case kindItems:
		n.id, n.name = strings.ToLower(n.item.DocID), strings.ToLower(n.item.Name)
	case kindIndex:
		n.name = strings.ToLower(n.ix.Name)
	}
}

func (n *note) encode() []byte {
	if n.enc != nil || n.encErr {
		return n.enc
	}
	var v any
	switch n.kind {
	case kindDocs:
		v = wireMsg{Type: "DocumentChange", Value: wireDoc{Type: n.doc.Type, ID: n.doc.ID, CollectionName: n.doc.Collection, ChangeVector: n.doc.ChangeVector}}
	case kindItems:
		it := n.item
		if it.Kind == storage.KindCounters {
			v = wireMsg{Type: "CounterChange", Value: wireCounter{Name: it.Name, Value: it.Value, DocumentID: it.DocID,
				CollectionName: it.Collection, ChangeVector: it.ChangeVector, Type: it.Type}}
		} else {
			v = wireMsg{Type: "TimeSeriesChange", Value: wireSeries{Name: it.Name, DocumentID: it.DocID, CollectionName: it.Collection,
				ChangeVector: it.ChangeVector, From: wireDate(it.From), To: wireDate(it.To), Type: it.Type}}
		}
	case kindIndex:
		v = wireMsg{Type: "IndexChange", Value: wireIndex{Type: n.ix.Type, Name: n.ix.Name, Etag: n.ix.Etag}}
	default:
		v = wireMsg{Type: "OperationStatusChange", Value: wireOp{OperationID: n.op.ID, State: n.op.State}}
	}
	b, err := json.Marshal(v)
	if err != nil {
		n.encErr = true
		return nil
	}
	n.enc = b
	return b
}

type wireMsg struct {
	Type  string
	Value any
}

type wireDoc struct {
	Type           string
	ID             string `json:"Id"`
	CollectionName string
	ChangeVector   string
}

type wireCounter struct {
	Name           string
	Value          int64
	DocumentID     string `json:"DocumentId"`
	CollectionName string
	ChangeVector   string
	Type           string
}

type wireSeries struct {
	Name           string
	DocumentID     string `json:"DocumentId"`
	CollectionName string
	ChangeVector   string
	From, To       string
	Type           string
}

// Dates of a TimeSeriesChange as RavenDB writes them (UTC, 7 fraction
// digits); an open end, or one outside years 1 to 9999, is DateTime's
// MinValue or MaxValue.
const (
	seriesMinDate = "0001-01-01T00:00:00.0000000Z"
	seriesMaxDate = "9999-12-31T23:59:59.9999999Z"
	seriesFormat  = "2006-01-02T15:04:05.0000000Z"
	minSeriesMs   = -62135596800000 // 0001-01-01T00:00:00Z
	maxSeriesMs   = 253402300799999 // 9999-12-31T23:59:59.999Z
)

func wireDate(ms int64) string {
	switch {
	case ms < minSeriesMs:
		return seriesMinDate
	case ms > maxSeriesMs:
		return seriesMaxDate
	}
	return time.UnixMilli(ms).UTC().Format(seriesFormat)
}

type wireIndex struct {
	Type string
	Name string
	Etag int64
}

type wireOp struct {
	OperationID int64 `json:"OperationId"`
	State       any
}

// dispatch queues items to the subscribers that want them, and signals
// the subscribers of group turn that are owed a frame (every subscriber
// owed one when every is set); it returns how many are still owed one.
func (f *feed) dispatch(items []item, subs []*Sub, turn, groups uint64, every bool) (owed int) {
	var notes []note
	for i := range items {
		it := &items[i]
		switch it.kind {
		case kindDocs:
			for j := range it.docs {
				notes = append(notes, note{kind: kindDocs, doc: &it.docs[j]})
			}
		case kindItems:
			for j := range it.items {
				notes = append(notes, note{kind: kindItems, item: &it.items[j]})
			}
		case kindIndex:
			notes = append(notes, note{kind: kindIndex, ix: &it.ix})
		case kindOp:
			notes = append(notes, note{kind: kindOp, op: &it.op})
		}
	}
	var out [][]byte
	for _, s := range subs {
		out = out[:0]
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			continue
		}
		for i := range notes {
			n := &notes[i]
			if !s.wantsLocked(n) {
				continue
			}
			if b := n.encode(); b != nil {
				out = append(out, b)
			}
		}
		over := 0
		if len(out) > 0 {
			s.queue = append(s.queue, out...)
			if len(s.queue) > f.hub.opts.MaxPending {
				over = len(s.queue)
			}
			s.owed = true
		}
		signal := s.owed && (every || s.seq%groups == turn)
		if signal {
			s.owed = false
		} else if s.owed {
			owed++
		}
		s.mu.Unlock()
		if len(out) > 0 {
			f.hub.notifications.Add(int64(len(out)))
		}
		if over > 0 {
			s.drop(CodePolicy, fmt.Sprintf("too slow: %d notifications pending", over), true)
			continue
		}
		if signal {
			s.signal()
		}
	}
	return owed
}

// Sub is one subscriber (one websocket of a client).
type Sub struct {
	hub  *Hub
	feed *feed

	ready chan struct{}
	seq   uint64 // the subscriber's number in its feed: its group

	mu     sync.Mutex
	queue  [][]byte
	owed   bool // queued notifications not signalled yet (its group's turn is to come)
	closed bool
	code   int
	reason string

	watches     int
	allDocs     int
	docs        map[string]int
	prefixes    map[string]int
	collections map[string]int
	allIndexes  int
	indexes     map[string]int
	allOps      int
	ops         map[int64]int

	// Counters and time series: all, by name, by document, by both.
	allCounters, allSeries      int
	counters, series            map[string]int
	docCounters, docSeries      map[string]int
	docCounter, docSeriesByName map[[2]string]int
	itemWatches                 int // the sum of the above, added to the feed's
}

// Subscribe registers a subscriber of database db. The caller must Close
// it.
func (h *Hub) Subscribe(db string) *Sub {
	key := strings.ToLower(db)
	h.mu.Lock()
	defer h.mu.Unlock()
	cur := *h.feeds.Load()
	f := cur[key]
	if f == nil {
		f = &feed{hub: h, name: db, wake: make(chan struct{}, 1), stop: make(chan struct{})}
		next := make(map[string]*feed, len(cur)+1)
		for k, v := range cur {
			next[k] = v
		}
		next[key] = f
		h.feeds.Store(&next)
		go f.run()
	}
	s := &Sub{hub: h, feed: f, ready: make(chan struct{}, 1), docs: map[string]int{}, prefixes: map[string]int{},
		collections: map[string]int{}, indexes: map[string]int{}, ops: map[int64]int{},
		counters: map[string]int{}, series: map[string]int{}, docCounters: map[string]int{}, docSeries: map[string]int{},
		docCounter: map[[2]string]int{}, docSeriesByName: map[[2]string]int{}}
	f.mu.Lock()
	f.seq++
	s.seq = f.seq
	f.subs = append(append([]*Sub(nil), f.subs...), s) // copied: dispatchers hold the old slice
	f.mu.Unlock()
	h.connections.Add(1)
	return s
}

// remove takes s out of its feed, and the feed out of the hub when it was
// the last one. Called once per Sub.
func (h *Hub) remove(s *Sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := s.feed
	f.mu.Lock()
	subs := make([]*Sub, 0, len(f.subs))
	for _, o := range f.subs {
		if o != s {
			subs = append(subs, o)
		}
	}
	f.subs = subs
	empty := len(subs) == 0
	f.mu.Unlock()
	s.mu.Lock() // closed: Apply no longer changes itemWatches
	f.itemWatches.Add(-int64(s.itemWatches))
	s.itemWatches = 0
	s.mu.Unlock()
	h.connections.Add(-1)
	if !empty {
		return
	}
	cur := *h.feeds.Load()
	next := make(map[string]*feed, len(cur))
	for k, v := range cur {
		if v != f {
			next[k] = v
		}
	}
	h.feeds.Store(&next)
	close(f.stop)
}

// Ready is signalled when the subscriber has something to Take (or was
// dropped).
func (s *Sub) Ready() <-chan struct{} { return s.ready }

func (s *Sub) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Take hands out the queued messages, at most about 1 MiB of them (Ready
// is signalled again when more are left). Once the subscriber was dropped
// and its last messages taken (a drop discards the queue, Fail keeps it),
// it returns no messages and the close code and reason.
func (s *Sub) Take() (msgs [][]byte, code int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return nil, s.code, s.reason
	}
	size, n := 0, 0
	for n < len(s.queue) && (n == 0 || size+len(s.queue[n]) <= maxFrame) {
		size += len(s.queue[n]) + 1
		n++
	}
	msgs = s.queue[:n:n]
	if n == len(s.queue) {
		s.queue = nil
	} else {
		s.queue = s.queue[n:]
	}
	if len(s.queue) > 0 || s.reason != "" {
		s.signal()
	}
	s.hub.frames.Add(1)
	return msgs, 0, ""
}

// Send queues a message of the web layer's (a Confirm, an Error) in order
// with the notifications; it counts against MaxPending like them.
func (s *Sub) Send(msg []byte) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.queue = append(s.queue, msg)
	over := len(s.queue)
	s.mu.Unlock()
	if over > s.hub.opts.MaxPending {
		s.drop(CodePolicy, fmt.Sprintf("too slow: %d notifications pending", over), true)
		return
	}
	s.signal()
}

// Drop ends the subscription: what was queued is discarded, Take returns
// code and reason, and the web layer closes the socket with them. Dropping
// twice keeps the first reason.
func (s *Sub) Drop(code int, reason string) { s.drop(code, reason, false) }

// Fail ends the subscription after one last message (an Error): Take
// returns what was queued and msg, then code and reason.
func (s *Sub) Fail(code int, reason string, msg []byte) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed, s.code, s.reason = true, code, reason
	s.queue = append(s.queue, msg)
	s.mu.Unlock()
	s.hub.droppedOther.Add(1)
	s.hub.remove(s)
	s.signal()
}

func (s *Sub) drop(code int, reason string, slow bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed, s.code, s.reason, s.queue = true, code, reason, nil
	s.mu.Unlock()
	if slow {
		s.hub.droppedSlow.Add(1)
	} else {
		s.hub.droppedOther.Add(1)
	}
	s.hub.remove(s)
	s.signal()
}

// Close ends the subscription when its socket went away (no reason to
// give anybody).
func (s *Sub) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed, s.queue = true, nil
	s.mu.Unlock()
	s.hub.remove(s)
}

// DropDatabase drops every subscriber of db (the database was deleted).
func (h *Hub) DropDatabase(db, reason string) {
	f := h.feed(db)
	if f == nil {
		return
	}
	f.mu.Lock()
	subs := f.subs
	f.mu.Unlock()
	for _, s := range subs {
		s.Drop(CodeGoingAway, reason)
	}
}

// DropAll drops every subscriber (the server is stopping).
func (h *Hub) DropAll(reason string) {
	for _, f := range *h.feeds.Load() {
		f.mu.Lock()
		subs := f.subs
		f.mu.Unlock()
		for _, s := range subs {
			s.Drop(CodeGoingAway, reason)
		}
	}
}

// CommandError is a command the subscriber cannot have (unknown, a bad
// parameter, too many watches): the web layer answers it with an Error.
type CommandError struct{ Msg string }

func (e *CommandError) Error() string { return e.Msg }

func cmdErr(format string, a ...any) error { return &CommandError{Msg: fmt.Sprintf(format, a...)} }

// Apply runs one client command (watch-doc, unwatch-doc, watch-docs, …).
// The two-argument ones (watch-document-counter, watch-document-timeseries)
// take params [document id, name]. Commands of features Rookery does not
// have (topology changes, aggressive caching) are accepted and never fire,
// as a RavenDB server with none of them would. A closed subscriber accepts
// everything and changes nothing.
func (s *Sub) Apply(command string, param *string, params []string) error {
	p := ""
	if param != nil {
		p = *param
	}
	watch := true
	name := command
	if rest, ok := strings.CutPrefix(command, "unwatch-"); ok {
		watch, name = false, rest
	} else if rest, ok := strings.CutPrefix(command, "watch-"); ok {
		name = rest
	} else {
		return cmdErr("Command argument is mandatory and must be watch-… or unwatch-…, got '%s'", command)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if watch && s.watches >= s.hub.opts.MaxWatches {
		return cmdErr("too many watches on one connection (at most %d)", s.hub.opts.MaxWatches)
	}
	delta := 1
	if !watch {
		delta = -1
	}
	counted := true
	switch name {
	case "docs":
		s.allDocs = max(0, s.allDocs+delta)
	case "indexes":
		s.allIndexes = max(0, s.allIndexes+delta)
	case "operations":
		s.allOps = max(0, s.allOps+delta)
	case "doc":
		if err := needParam(name, p); err != nil {
			return err
		}
		bump(s.docs, strings.ToLower(p), delta)
	case "prefix":
		if err := needParam(name, p); err != nil {
			return err
		}
		bump(s.prefixes, strings.ToLower(p), delta)
	case "collection":
		if err := needParam(name, p); err != nil {
			return err
		}
		bump(s.collections, strings.ToLower(p), delta)
	case "index":
		if err := needParam(name, p); err != nil {
			return err
		}
		bump(s.indexes, strings.ToLower(p), delta)
	case "operation":
		id, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if err != nil {
			return cmdErr("Unable to parse operation id '%s' of %s", p, command)
		}
		bump(s.ops, id, delta)
	case "counters", "all-timeseries":
		all := &s.allCounters
		if name == "all-timeseries" {
			all = &s.allSeries
		}
		old := *all
		*all = max(0, old+delta)
		s.addItemWatches(*all - old)
	case "counter", "document-counters", "timeseries", "all-document-timeseries":
		if err := needParam(name, p); err != nil {
			return err
		}
		m := s.counters
		switch name {
		case "document-counters":
			m = s.docCounters
		case "timeseries":
			m = s.series
		case "all-document-timeseries":
			m = s.docSeries
		}
		s.addItemWatches(bump(m, strings.ToLower(p), delta))
	case "document-counter", "document-timeseries":
		if len(params) != 2 || strings.TrimSpace(params[0]) == "" || strings.TrimSpace(params[1]) == "" {
			return cmdErr("%s needs Params [document id, name]", command)
		}
		m := s.docCounter
		if name == "document-timeseries" {
			m = s.docSeriesByName
		}
		s.addItemWatches(bump(m, [2]string{strings.ToLower(params[0]), strings.ToLower(params[1])}, delta))
	case "topology-change", "aggressive-caching":
		counted = false // nothing to watch in Rookery
	default:
		return cmdErr("Command argument is not valid: '%s'", command)
	}
	if counted {
		s.watches = max(0, s.watches+delta)
	}
	return nil
}

func needParam(cmd, p string) error {
	if strings.TrimSpace(p) == "" {
		return cmdErr("watch-%s needs a Param", cmd)
	}
	return nil
}

// bump counts a watch of k up or down (never below 0) and returns by how
// much it moved.
func bump[K comparable](m map[K]int, k K, delta int) int {
	old := m[k]
	if v := old + delta; v > 0 {
		m[k] = v
		return v - old
	}
	delete(m, k)
	return -old
}

// addItemWatches moves the counter and time-series watches of s, and of
// its feed (s.mu held, s not closed).
func (s *Sub) addItemWatches(d int) {
	if d != 0 {
		s.itemWatches += d
		s.feed.itemWatches.Add(int64(d))
	}
}

// wantsLocked is the subscriber's filter (s.mu held).
func (s *Sub) wantsLocked(n *note) bool {
	switch n.kind {
	case kindDocs:
		if s.allDocs > 0 {
			return true
		}
		if len(s.docs) == 0 && len(s.prefixes) == 0 && len(s.collections) == 0 {
			return false
		}
		n.lower()
		if s.docs[n.id] > 0 || s.collections[n.coll] > 0 {
			return true
		}
		for p := range s.prefixes {
			if strings.HasPrefix(n.id, p) {
				return true
			}
		}
		return false
	case kindItems:
		all, byName, byDoc, byBoth := s.allCounters, s.counters, s.docCounters, s.docCounter
		if n.item.Kind != storage.KindCounters {
			all, byName, byDoc, byBoth = s.allSeries, s.series, s.docSeries, s.docSeriesByName
		}
		if all > 0 {
			return true
		}
		if len(byName) == 0 && len(byDoc) == 0 && len(byBoth) == 0 {
			return false
		}
		n.lower()
		return byName[n.name] > 0 || byDoc[n.id] > 0 || byBoth[[2]string{n.id, n.name}] > 0
	case kindIndex:
		if s.allIndexes > 0 {
			return true
		}
		if len(s.indexes) == 0 {
			return false
		}
		n.lower()
		return s.indexes[n.name] > 0
	default:
		return s.allOps > 0 || s.ops[n.op.ID] > 0
	}
}
