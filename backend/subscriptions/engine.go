package subscriptions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/rql"
	"github.com/rookerydb/rookery/backend/storage"
)

// DB is what delivery and monitoring read from a database copy.
type DB interface {
	Name() string
	NodeTag() string
	DatabaseID() string
	ScanCollection(ctx context.Context, collection string, after int64, limit int, fn func(d *storage.Document) error) error
	CountCollectionAfter(ctx context.Context, collection string, after int64) (int64, error)
	CollectionLastEtag(ctx context.Context, collection string) (int64, error)
	GetMany(ctx context.Context, ids []string) ([]*storage.Document, error)
	DocsRead() int64
}

// Store keeps definitions and progress: the cluster state.
type Store interface {
	Subscriptions(db string) []cluster.Subscription
	Subscription(db, name string) (cluster.Subscription, bool)
	CreateSubscription(ctx context.Context, db, name string, data, progress json.RawMessage) (cluster.Result, error)
	SubscriptionProgress(ctx context.Context, db, name string, expect, next json.RawMessage) (cluster.Result, error)
	UpdateSubscription(ctx context.Context, db, name string, data, progress json.RawMessage) (cluster.Result, error)
	DeleteSubscription(ctx context.Context, db, name string) (cluster.Result, error)
	Setting(db, key string) json.RawMessage
	SetSetting(ctx context.Context, db, key string, value json.RawMessage) (cluster.Result, error)
}

// Strategies a worker may connect with.
const (
	OpenIfFree  = "OpenIfFree"
	TakeOver    = "TakeOver"
	WaitForFree = "WaitForFree"
	Concurrent  = "Concurrent"
)

// Connection statuses a worker can be refused or closed with (RavenDB's
// ConnectionStatus values).
const (
	StatusNotFound    = "NotFound"
	StatusInUse       = "InUse"
	StatusClosed      = "Closed"
	StatusInvalid     = "Invalid"
	StatusConcurrency = "ConcurrencyReconnect"
)

// StatusError refuses or ends a worker's connection.
type StatusError struct {
	Status       string
	Msg          string
	CanReconnect bool // Closed only
	NoDocsLeft   bool // Closed only
}

func (e *StatusError) Error() string { return e.Status + ": " + e.Msg }

// ConnectOptions are a worker's connection options.
type ConnectOptions struct {
	Strategy            string
	MaxDocsPerBatch     int
	CloseWhenNoDocsLeft bool
	ClientAddr          string
}

// Doc is one delivered document: its JSON as clients see it (metadata
// included), or, for a document the query could not process, Err.
type Doc struct {
	ID   string
	Etag int64
	JSON []byte
	Err  string
}

// Batch is what a worker gets between two acknowledgements.
type Batch struct {
	Docs        []Doc
	Includes    map[string]json.RawMessage // id → document, for queries with include
	Scanned     int                        // documents read to fill it
	Redelivered int                        // documents sent before and not acknowledged
	base        json.RawMessage            // the progress it starts from
	end         int64                      // the etag the scan passed
	sentAt      time.Time
}

// Manager runs the workers' sessions of every subscription of this node
// and watches them for the monitor.
type Manager struct {
	store   Store
	open    func(db string) (DB, error)
	nodeTag string
	log     *slog.Logger
	now     func() time.Time

	// OnChange is told (with the database name) when something a page
	// shows changed: a connection, a batch, an ack.
	OnChange func(db string)

	mu    sync.Mutex
	subs  map[string]*live         // by "db/name", lower-cased
	wake  map[string]chan struct{} // by lower-cased database: closed on a commit
	mon   map[string]*dbMonitor    // by lower-cased database
	cache map[backlogKey]backlogEntry
}

// NewManager builds a manager over the cluster state (store) and the open
// databases of this node.
func NewManager(store Store, open func(db string) (DB, error), nodeTag string, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.Default()
	}
	return &Manager{store: store, open: open, nodeTag: nodeTag, log: log, now: time.Now,
		subs: map[string]*live{}, wake: map[string]chan struct{}{}, mon: map[string]*dbMonitor{}, cache: map[backlogKey]backlogEntry{}}
}

func key(db, name string) string { return strings.ToLower(db) + "/" + strings.ToLower(name) }

// live is one subscription's runtime state on this node.
type live struct {
	db, name string
	active   *Session
	free     chan struct{} // closed when active lets go
	stats    stats
}

func (m *Manager) liveOf(db, name string) *live {
	k := key(db, name)
	l := m.subs[k]
	if l == nil {
		l = &live{db: db, name: name, free: make(chan struct{})}
		m.subs[k] = l
	}
	return l
}

// Notify wakes the workers waiting on db: call it after every commit.
func (m *Manager) Notify(db string) {
	k := strings.ToLower(db)
	m.mu.Lock()
	if ch, ok := m.wake[k]; ok {
		close(ch)
		delete(m.wake, k)
	}
	m.mu.Unlock()
}

func (m *Manager) wakeChan(db string) <-chan struct{} {
	k := strings.ToLower(db)
	m.mu.Lock()
	defer m.mu.Unlock()
	ch, ok := m.wake[k]
	if !ok {
		ch = make(chan struct{})
		m.wake[k] = ch
	}
	return ch
}

func (m *Manager) changed(db string) {
	if m.OnChange != nil {
		m.OnChange(db)
	}
}

// Session is one worker's connection to a subscription.
type Session struct {
	m       *Manager
	l       *live
	db      DB
	name    string
	data    json.RawMessage // the definition it was opened with
	query   *rql.Query
	opts    ConnectOptions
	conn    *connRecord
	ctx     context.Context
	cancel  context.CancelCauseFunc
	pending *Batch
	closed  bool
	// ahead is the next batch, read while the worker handles the pending
	// one (used when the ack moves the position to where it started).
	ahead *readAhead
}

type readAhead struct {
	after int64
	done  chan struct{}
	b     *Batch
	err   error
}

// readAhead starts reading the batch after etag after.
func (s *Session) readAhead(after int64) {
	ra := &readAhead{after: after, done: make(chan struct{})}
	s.ahead = ra
	go func() {
		defer close(ra.done)
		ra.b, ra.err = s.read(s.ctx, after)
	}()
}

// takeAhead returns the batch read ahead if it starts at after.
func (s *Session) takeAhead(after int64) *Batch {
	ra := s.ahead
	if ra == nil {
		return nil
	}
	s.ahead = nil
	<-ra.done
	if ra.err != nil || ra.after != after || len(ra.b.Docs) == 0 {
		return nil
	}
	return ra.b
}

// Open connects a worker to subscription name of database db, applying
// its strategy. It fails with a *StatusError the worker understands.
func (m *Manager) Open(ctx context.Context, dbName, name string, o ConnectOptions) (*Session, error) {
	if o.Strategy == "" {
		o.Strategy = OpenIfFree
	}
	if o.MaxDocsPerBatch <= 0 {
		o.MaxDocsPerBatch = 4096
	}
	db, err := m.open(dbName)
	if err != nil {
		return nil, &StatusError{Status: StatusNotFound, Msg: fmt.Sprintf("Database '%s' does not exist", dbName)}
	}
	sub, def, err := m.Find(db.Name(), name, nil)
	if err != nil {
		return nil, &StatusError{Status: StatusNotFound, Msg: fmt.Sprintf("Subscription '%s' does not exist in database '%s'", name, db.Name())}
	}
	if def.Disabled {
		return nil, &StatusError{Status: StatusClosed, Msg: fmt.Sprintf("Subscription '%s' is disabled", sub.Name)}
	}
	if o.Strategy == Concurrent {
		return nil, &StatusError{Status: StatusInvalid, Msg: "Concurrent subscription workers are not supported; use OpenIfFree, TakeOver or WaitForFree"}
	}
	q, err := rql.Parse(def.Query)
	if err != nil {
		return nil, &StatusError{Status: StatusInvalid, Msg: err.Error()}
	}
	for {
		m.mu.Lock()
		l := m.liveOf(db.Name(), sub.Name)
		if l.active == nil || o.Strategy == TakeOver {
			if old := l.active; old != nil {
				old.cancel(&StatusError{Status: StatusInUse, Msg: fmt.Sprintf("Subscription '%s' was taken over by a worker from %s", sub.Name, o.ClientAddr)})
				old.release()
			}
			s := &Session{m: m, l: l, db: db, name: sub.Name, data: sub.Data, query: q, opts: o}
			s.ctx, s.cancel = context.WithCancelCause(context.Background())
			l.active = s
			s.conn = l.stats.connected(o, m.now())
			m.mu.Unlock()
			m.changed(db.Name())
			return s, nil
		}
		if o.Strategy != WaitForFree {
			// Read the holder under the lock: it may let go the moment
			// the lock is released.
			holder := l.active.opts.ClientAddr
			m.mu.Unlock()
			return nil, &StatusError{Status: StatusInUse, Msg: fmt.Sprintf("Subscription '%s' is in use by a worker from %s (strategy %s)", sub.Name, holder, o.Strategy)}
		}
		free := l.free
		m.mu.Unlock()
		select {
		case <-free:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if _, def, err = m.Find(db.Name(), name, nil); err != nil {
			return nil, &StatusError{Status: StatusNotFound, Msg: fmt.Sprintf("Subscription '%s' does not exist", name)}
		}
		if def.Disabled {
			return nil, &StatusError{Status: StatusClosed, Msg: fmt.Sprintf("Subscription '%s' is disabled", sub.Name)}
		}
	}
}

// release lets go of the subscription; m.mu is held.
func (s *Session) release() {
	if s.closed {
		return
	}
	s.closed = true
	s.l.stats.disconnected(s.conn, s.m.now())
	if s.l.active == s {
		s.l.active = nil
		close(s.l.free)
		s.l.free = make(chan struct{})
	}
}

// Close ends the session (the worker went away). An unacknowledged batch
// is delivered again to the next worker.
func (s *Session) Close() {
	s.cancel(errors.New("closed"))
	s.m.mu.Lock()
	s.release()
	s.m.mu.Unlock()
	s.m.changed(s.db.Name())
}

// Done is closed when the session was ended from outside (taken over,
// dropped, the subscription disabled, changed or deleted); Err says why.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Err is why the session ended.
func (s *Session) Err() error { return context.Cause(s.ctx) }

// Name is the subscription's name.
func (s *Session) Name() string { return s.name }

// Kick ends the session with err (a *StatusError for the worker).
func (s *Session) Kick(err error) {
	s.cancel(err)
	s.m.mu.Lock()
	s.release()
	s.m.mu.Unlock()
	s.m.changed(s.db.Name())
}

func (s *Session) current() (cluster.Subscription, error) {
	if sub, ok := s.m.record(s.db.Name(), s.name, nil); ok {
		return sub, nil
	}
	return cluster.Subscription{}, &StatusError{Status: StatusNotFound, Msg: fmt.Sprintf("Subscription '%s' was deleted", s.name)}
}

// scanLimit is how many documents one batch may read: enough to fill it
// through a selective query, small enough to answer soon. A pass that
// finds nothing still records its progress, so nothing is read twice.
func scanLimit(batch int) int { return max(batch*4, 8192) }

// maxBatchBytes bounds a batch's size in bytes.
const maxBatchBytes = 32 << 20

// Next returns the next batch, waiting for documents when there are none.
// The previous batch must have been acknowledged.
func (s *Session) Next(ctx context.Context) (*Batch, error) {
	if s.pending != nil {
		return s.pending, nil // not acknowledged: the same batch again
	}
	dbName := s.db.Name()
	for {
		if err := s.alive(ctx); err != nil {
			return nil, err
		}
		wake := s.m.wakeChan(dbName)
		sub, err := s.current()
		if err != nil {
			return nil, err
		}
		prog := ParseProgress(sub.Progress)
		after := prog.Etag(s.db.DatabaseID())
		b := s.takeAhead(after)
		if b == nil {
			if b, err = s.read(ctx, after); err != nil {
				return nil, err
			}
		}
		b.base = sub.Progress
		if len(b.Docs) > 0 {
			b.sentAt = s.m.now()
			s.m.mu.Lock()
			b.Redelivered = s.l.stats.sent(s.conn, b, s.m.now())
			s.pending = b
			s.m.mu.Unlock()
			s.m.changed(dbName)
			if len(b.Docs) >= s.opts.MaxDocsPerBatch {
				// A full batch: more is probably waiting. Read it while
				// the worker is busy with this one.
				s.readAhead(b.end)
			}
			return b, nil
		}
		if b.Scanned > 0 {
			// Nothing matched: record the pass so no one reads it again.
			s.m.mu.Lock()
			s.l.stats.skipped(b.Scanned)
			s.m.mu.Unlock()
			next := prog.Advanced(s.db.NodeTag(), s.db.DatabaseID(), b.end)
			if _, err := s.m.store.SubscriptionProgress(ctx, dbName, s.name, sub.Progress, next.Raw()); err != nil {
				return nil, s.progressErr(err)
			}
			continue
		}
		if s.opts.CloseWhenNoDocsLeft {
			return nil, &StatusError{Status: StatusClosed, Msg: fmt.Sprintf("Subscription '%s' has no documents left", s.name), NoDocsLeft: true}
		}
		select {
		case <-wake:
		case <-s.ctx.Done():
		case <-ctx.Done():
		}
	}
}

func (s *Session) alive(ctx context.Context) error {
	if err := context.Cause(s.ctx); err != nil {
		return err
	}
	return ctx.Err()
}

func (s *Session) progressErr(err error) error {
	if dberr.Is(err, dberr.Concurrency) {
		return &StatusError{Status: StatusConcurrency, Msg: fmt.Sprintf("Subscription '%s' was moved by someone else: %v", s.name, err)}
	}
	if dberr.Is(err, dberr.NotFound) {
		return &StatusError{Status: StatusNotFound, Msg: err.Error()}
	}
	return err
}

// read fills a batch from the documents after etag after.
func (s *Session) read(ctx context.Context, after int64) (*Batch, error) {
	b := &Batch{end: after}
	q := s.query
	var includes []string
	size := 0
	full := errors.New("full")
	err := s.db.ScanCollection(ctx, q.Collection, after, scanLimit(s.opts.MaxDocsPerBatch), func(d *storage.Document) error {
		b.Scanned++
		b.end = d.Etag
		doc, ok, err := evaluate(q, d)
		if err != nil {
			b.Docs = append(b.Docs, Doc{ID: d.ID, Etag: d.Etag, JSON: metadataOnly(d), Err: err.Error()})
			return nil
		}
		if !ok {
			return nil
		}
		out := render(q, doc, d)
		for _, path := range q.Include {
			for _, v := range path.Values(doc) {
				if id, ok := v.(string); ok && id != "" {
					includes = append(includes, id)
				}
			}
		}
		b.Docs = append(b.Docs, Doc{ID: d.ID, Etag: d.Etag, JSON: out})
		size += len(out)
		if len(b.Docs) >= s.opts.MaxDocsPerBatch || size >= maxBatchBytes {
			return full
		}
		return nil
	})
	if err != nil && err != full {
		return nil, err
	}
	if len(includes) > 0 {
		docs, err := s.db.GetMany(ctx, includes)
		if err != nil {
			return nil, err
		}
		b.Includes = map[string]json.RawMessage{}
		for _, d := range docs {
			if d != nil {
				b.Includes[d.ID] = d.AppendJSON(nil)
			}
		}
	}
	return b, nil
}

func metadataOnly(d *storage.Document) []byte {
	out, _ := json.Marshal(map[string]any{"@metadata": map[string]any{"@id": d.ID, "@change-vector": d.ChangeVector, "@collection": d.Collection}})
	return out
}

// Ack records the pending batch as processed: the progress moves past it
// (through the cluster, compare-and-set) and the next Next reads after it.
func (s *Session) Ack(ctx context.Context) error {
	b := s.pending
	if b == nil {
		return &StatusError{Status: StatusInvalid, Msg: "Acknowledge without a batch"}
	}
	if err := s.alive(ctx); err != nil {
		return err
	}
	prog := ParseProgress(b.base)
	now := s.m.now().UTC()
	next := prog.Advanced(s.db.NodeTag(), s.db.DatabaseID(), b.end)
	next.AckAt = &now
	next.Batches++
	next.Docs += int64(len(b.Docs))
	if _, err := s.m.store.SubscriptionProgress(ctx, s.db.Name(), s.name, b.base, next.Raw()); err != nil {
		s.m.mu.Lock()
		s.l.stats.failed(err, s.m.now())
		s.m.mu.Unlock()
		return s.progressErr(err)
	}
	s.m.mu.Lock()
	s.l.stats.acked(s.conn, b, s.m.now())
	s.pending = nil
	s.m.mu.Unlock()
	s.m.changed(s.db.Name())
	return nil
}

// Failed records a worker error for the monitor (the batch stays pending).
func (s *Session) Failed(err error) {
	s.m.mu.Lock()
	s.l.stats.failed(err, s.m.now())
	s.m.mu.Unlock()
}

// Reconcile ends the sessions whose subscription was deleted, disabled or
// changed: call it when the cluster state changes.
func (m *Manager) Reconcile() {
	m.mu.Lock()
	var kicks []func()
	for _, l := range m.subs {
		s := l.active
		if s == nil {
			continue
		}
		sub, err := s.current()
		var why error
		switch {
		case err != nil:
			why = err
		case string(sub.Data) != string(s.data):
			if d, err := Parse(sub.Data); err == nil && d.Disabled {
				why = &StatusError{Status: StatusClosed, Msg: fmt.Sprintf("Subscription '%s' was disabled", s.name)}
			} else {
				why = &StatusError{Status: StatusClosed, Msg: fmt.Sprintf("Subscription '%s' was changed; reconnect", s.name), CanReconnect: true}
			}
		}
		if why != nil {
			kicks = append(kicks, func() { s.Kick(why) })
		}
	}
	m.mu.Unlock()
	for _, k := range kicks {
		k()
	}
}

// Drop ends the connections to a subscription (an operator's request).
// It reports whether a worker was connected.
func (m *Manager) Drop(db, name string) (bool, error) {
	sub, ok := m.record(db, name, nil)
	if !ok {
		return false, dberr.New(dberr.NotFound, "Subscription '%s' does not exist", name)
	}
	m.mu.Lock()
	l := m.subs[key(db, sub.Name)]
	var s *Session
	if l != nil {
		s = l.active
	}
	m.mu.Unlock()
	if s == nil {
		return false, nil
	}
	s.Kick(&StatusError{Status: StatusClosed, Msg: fmt.Sprintf("The connection to subscription '%s' was dropped by an operator", sub.Name)})
	return true, nil
}

// LastConnection is when a worker last connected to the subscription on
// this node (nil: never).
func (m *Manager) LastConnection(db, name string) *time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.subs[key(db, name)]; l != nil && !l.stats.lastConnect.IsZero() {
		t := l.stats.lastConnect.UTC()
		return &t
	}
	return nil
}

// Forget drops the runtime state of subscriptions that no longer exist.
func (m *Manager) Forget(db string, exists func(name string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := strings.ToLower(db) + "/"
	for k, l := range m.subs {
		if strings.HasPrefix(k, prefix) && l.active == nil && !exists(l.name) {
			delete(m.subs, k)
		}
	}
}
