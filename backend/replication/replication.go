// Package replication sends a database's changes to the other copies of it
// and applies what they send, over one persistent connection per
// destination. It speaks a small message protocol over an abstract
// connection; the web layer carries it over a websocket. See DESIGN.md.
package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

// Conn is one message-oriented, ordered, reliable connection.
type Conn interface {
	Send(ctx context.Context, msg []byte) error
	Recv(ctx context.Context) ([]byte, error)
	Close() error
}

// Message types.
const (
	typeHello     = "Hello"
	typePosition  = "Position"
	typeBatch     = "Batch"
	typeAck       = "Ack"
	typeHeartbeat = "Heartbeat"
)

type message struct {
	Type         string
	Database     string `json:",omitempty"`
	SourceID     string `json:",omitempty"` // the sender's database id
	SourceTag    string `json:",omitempty"`
	After        int64  `json:",omitempty"` // batch: the position it was read after
	LastEtag     int64  `json:",omitempty"` // batch: the last source etag it covers
	Accepted     int64  `json:",omitempty"` // position/ack: last source etag accepted
	ChangeVector string `json:",omitempty"` // the receiver's database vector
	Error        string `json:",omitempty"`
	// Items are a batch's items; a batch travels in the binary form of
	// wire.go, never as JSON.
	Items []storage.Item `json:"-"`
}

// DefaultHeartbeat is how often an idle sender proves it is alive.
const DefaultHeartbeat = 2 * time.Second

// IdleTimeout ends an incoming connection whose sender has said nothing for
// that long: a sender sends a batch or a heartbeat at least every
// heartbeat, so the connection is dead, or a message was lost on the way
// (a silent partition) and both ends would wait for each other forever.
// Closing it tells the sender, which reconnects and resumes from the
// accepted position.
const IdleTimeout = 3 * DefaultHeartbeat

// Dialer opens a connection to a destination node's replication endpoint.
type Dialer func(ctx context.Context, destURL, database string) (Conn, error)

// Options tune a sender.
type Options struct {
	// Name is the destination's node tag, reported as Stats.Tag.
	Name string
	// BatchSize bounds the items of one batch (1024 when 0).
	BatchSize int
	// BatchBytes bounds the bytes of one batch, roughly: a batch ends with
	// the item that reaches it (4 MiB when 0).
	BatchBytes int
	// Window is how many batches may be on the wire ahead of their
	// acknowledgement, so reading, sending and applying overlap (4 when 0).
	Window int
	// Heartbeat is the idle interval between heartbeats (DefaultHeartbeat
	// when 0; at most IdleTimeout/3).
	Heartbeat time.Duration
	// Commits tells when the database's recent etags were committed, for
	// SecondsBehind; without it (or beyond it) the rows' last-modified
	// times are used.
	Commits *CommitLog
	Logger  *slog.Logger
	// OnLostWrites is called when the destination has acknowledged writes
	// of this copy beyond its last etag: this copy lost acknowledged
	// writes. The sender then stops; the caller takes the copy out of
	// service.
	OnLostWrites func(LostWritesError)
}

// LostWritesError is a destination's proof that this copy lost writes it
// had acknowledged: the destination accepted (or holds in its vector)
// etags of this copy's database id beyond this copy's last etag.
type LostWritesError struct {
	Database   string
	DatabaseID string
	Peer       string // the destination's tag
	PeerHas    int64  // the highest etag of DatabaseID the destination has
	Have       int64  // this copy's last etag
}

func (e *LostWritesError) Error() string {
	return fmt.Sprintf("node %s has acknowledged writes of this copy (database id %s) up to etag %d, but this copy's last etag is %d: the writes with etags %d to %d are missing here (an older file restored, or a lost write-ahead log)",
		e.Peer, e.DatabaseID, e.PeerHas, e.Have, e.Have+1, e.PeerHas)
}

// lostWrites compares the destination's position and vector with this
// copy: nothing it has of this database id may be beyond the last etag.
func (s *Sender) lostWrites(accepted int64, destCV changevector.Vector) *LostWritesError {
	have := s.db.LastEtag()
	peer := max(accepted, destCV.Get(s.db.DatabaseID()))
	if peer <= have {
		return nil
	}
	return &LostWritesError{Database: s.db.Name(), DatabaseID: s.db.DatabaseID(), Peer: s.name, PeerHas: peer, Have: have}
}

// Connection states of a destination.
const (
	StateConnecting = "connecting"
	StateConnected  = "connected"
	StateWaiting    = "waiting to retry"
)

// Stats are a destination's replication figures, as its sender sees them.
type Stats struct {
	Destination    string    // the URL the sender dials
	Tag            string    // the destination's node tag (its URL when unnamed)
	State          string    // StateConnected, StateConnecting or StateWaiting
	Connected      bool      // State == StateConnected
	ConnectedSince time.Time // start of the current connection
	LastSentEtag   int64     // last local etag sent
	LastAckEtag    int64     // last local etag the destination acknowledged
	// ItemsBehind is how many local documents, tombstones and conflict
	// versions have an etag above LastAckEtag: 0 exactly when the
	// destination has acknowledged everything (including items it was
	// spared because it already had them).
	ItemsBehind int64
	// SecondsBehind is the age of the oldest of those items (0 when none).
	SecondsBehind float64
	OldestUnacked time.Time // when the oldest of them was committed
	LastBeat      time.Time // last heartbeat the destination answered
	LastAck       time.Time // last acknowledgement of any kind
	BatchesPerSec float64   // acknowledged batches/s over the last few seconds
	DocsPerSec    float64   // items/s sent in those batches
	Batches       int64     // acknowledged batches since the sender started
	Docs          int64     // items sent in them
	Errors        int64     // connections that failed or broke
	LastError     string
	LastErrorAt   time.Time
	NextRetry     time.Time // when State is StateWaiting: the next attempt
}

// SeriesLength is how many once-a-second samples of items behind a sender
// keeps (5 minutes).
const SeriesLength = 300

const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
	// recount is how long a count of items behind is reused while the
	// destination is behind (the count costs a query).
	recount = 250 * time.Millisecond
	// ackTimeout ends a connection whose destination stopped answering.
	ackTimeout = 30 * time.Second
)

// Sender replicates one database to one destination until its context ends.
type Sender struct {
	db   *storage.DB
	name string // the destination's tag, or its URL
	dest string
	dial Dialer
	opt  Options
	wake chan struct{}

	mu      sync.Mutex
	stats   Stats
	rate    rateWindow
	series  [SeriesLength]float64
	nseries int

	countMu sync.Mutex
	counted behindCount
}

type behindCount struct {
	valid     bool
	ack, last int64
	at        time.Time
	items     int64
	oldest    time.Time
}

// NewSender prepares a sender; Run starts it.
func NewSender(db *storage.DB, destURL string, dial Dialer, opt Options) *Sender {
	if opt.BatchSize <= 0 {
		opt.BatchSize = 1024
	}
	if opt.BatchSize > MaxBatchItems {
		opt.BatchSize = MaxBatchItems
	}
	if opt.BatchBytes <= 0 {
		opt.BatchBytes = 4 << 20
	}
	if opt.Window <= 0 {
		opt.Window = 4
	}
	if opt.Heartbeat <= 0 {
		opt.Heartbeat = DefaultHeartbeat
	}
	opt.Heartbeat = min(opt.Heartbeat, IdleTimeout/3) // or the receiver gives up on it
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	name := opt.Name
	if name == "" {
		name = destURL
	}
	return &Sender{db: db, name: name, dest: destURL, dial: dial, opt: opt, wake: make(chan struct{}, 1),
		stats: Stats{Destination: destURL, Tag: name, State: StateConnecting}}
}

// Wake tells the sender there is something new (a local commit). It never
// blocks.
func (s *Sender) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Stats returns the current figures. Items behind and their age are
// computed here, from the database and the commit log.
func (s *Sender) Stats() Stats {
	now := time.Now()
	s.mu.Lock()
	st := s.stats
	st.BatchesPerSec, st.DocsPerSec = s.rate.rates(now)
	s.mu.Unlock()
	st.ItemsBehind, st.OldestUnacked = s.behind(st.LastAckEtag, now)
	if st.ItemsBehind > 0 && !st.OldestUnacked.IsZero() {
		st.SecondsBehind = max(0, now.Sub(st.OldestUnacked).Seconds())
	}
	return st
}

// behind counts the items above the acknowledged etag and finds when the
// oldest of them was committed.
func (s *Sender) behind(ack int64, now time.Time) (int64, time.Time) {
	last := s.db.LastEtag()
	if ack >= last {
		return 0, time.Time{}
	}
	s.countMu.Lock()
	defer s.countMu.Unlock()
	c := &s.counted
	if c.valid && ((c.ack == ack && c.last == last) || now.Sub(c.at) < recount) {
		return c.items, c.oldest
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := s.db.CountReplicationAfter(ctx, ack)
	if err != nil {
		if c.valid {
			return c.items, c.oldest
		}
		return last - ack, time.Time{}
	}
	var oldest time.Time
	if n > 0 {
		ok := false
		if s.opt.Commits != nil {
			oldest, ok = s.opt.Commits.OldestAfter(ack)
		}
		if !ok {
			if items, err := s.db.ChangesAfterBytes(ctx, ack, 1, 1); err == nil && len(items) > 0 {
				oldest = items[0].LastModified
			}
		}
	}
	*c = behindCount{valid: true, ack: ack, last: last, at: now, items: n, oldest: oldest}
	return n, oldest
}

// SampleBehind adds the current items behind to the sender's series; call
// it once a second.
func (s *Sender) SampleBehind() {
	st := s.Stats()
	s.mu.Lock()
	s.series[s.nseries%SeriesLength] = float64(st.ItemsBehind)
	s.nseries++
	s.mu.Unlock()
}

// BehindSeries returns the samples of items behind, oldest first (up to
// SeriesLength of them).
func (s *Sender) BehindSeries() []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(s.nseries, SeriesLength)
	out := make([]float64, n)
	for i := range out {
		out[i] = s.series[(s.nseries-n+i)%SeriesLength]
	}
	return out
}

func (s *Sender) setState(state string) {
	s.mu.Lock()
	s.stats.State, s.stats.Connected = state, state == StateConnected
	if state != StateWaiting {
		s.stats.NextRetry = time.Time{}
	}
	s.mu.Unlock()
}

// fail records why a connection ended and when the next attempt is.
func (s *Sender) fail(err error, retryIn time.Duration) (wasConnected bool) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	wasConnected = s.stats.Connected
	s.stats.State, s.stats.Connected = StateWaiting, false
	s.stats.Errors++
	s.stats.LastError = err.Error()
	s.stats.LastErrorAt = now
	s.stats.NextRetry = now.Add(retryIn)
	return wasConnected
}

// Run connects, reconnecting with backoff, and sends until ctx ends.
func (s *Sender) Run(ctx context.Context) {
	backoff := minBackoff
	for ctx.Err() == nil {
		s.setState(StateConnecting)
		connected, err := s.session(ctx)
		if ctx.Err() != nil {
			return
		}
		var lost *LostWritesError
		if errors.As(err, &lost) {
			s.fail(err, 0)
			s.opt.Logger.Error("replication: this copy lost acknowledged writes", "database", s.db.Name(), "destination", s.name, "error", err)
			if s.opt.OnLostWrites != nil {
				s.opt.OnLostWrites(*lost)
			}
			return
		}
		if connected {
			backoff = minBackoff // a connection that worked retries at once
		}
		if err == nil {
			err = errors.New("connection closed")
		}
		if s.fail(err, backoff) {
			s.opt.Logger.Warn("replication connection lost", "database", s.db.Name(), "destination", s.name, "error", err)
		} else {
			s.opt.Logger.Debug("replication connection failed", "database", s.db.Name(), "destination", s.name, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

func send(ctx context.Context, c Conn, m message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return c.Send(ctx, b)
}

func recv(ctx context.Context, c Conn) (message, error) {
	var m message
	b, err := c.Recv(ctx)
	if err != nil {
		return m, err
	}
	if isBatch(b) {
		m.Type = typeBatch
		m.After, m.LastEtag, m.Items, err = decodeBatch(b)
		return m, err
	}
	// A control message holds a change vector and a short error at most.
	if max := changevector.MaxLength() + maxControlExtra; len(b) > max {
		return m, fmt.Errorf("bad replication message: a %d-byte control message, more than %d bytes", len(b), max)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("bad replication message: %w", err)
	}
	if m.Error != "" {
		return m, errors.New("destination: " + m.Error)
	}
	return m, nil
}

// maxControlExtra is what a control message may hold besides a change
// vector (its other fields, an error message).
const maxControlExtra = 64 << 10

// recvWithin is recv with a deadline.
func recvWithin(ctx context.Context, c Conn, d time.Duration) (message, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	m, err := recv(ctx, c)
	if err != nil && ctx.Err() == context.DeadlineExceeded {
		return m, fmt.Errorf("nothing from the sender for %s: %w", d, err)
	}
	return m, err
}

// session is one connection's life: handshake, then batches in etag order,
// up to Window of them ahead of their acknowledgements. connected reports
// whether the handshake succeeded.
func (s *Sender) session(ctx context.Context) (connected bool, err error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := s.dial(dctx, s.dest, s.db.Name())
	if err != nil {
		return false, err
	}
	defer conn.Close()
	if err := send(dctx, conn, message{Type: typeHello, Database: s.db.Name(), SourceID: s.db.DatabaseID(), SourceTag: s.db.NodeTag()}); err != nil {
		return false, err
	}
	pos, err := recv(dctx, conn)
	if err != nil {
		return false, err
	}
	if pos.Type != typePosition {
		return false, fmt.Errorf("expected %s, got %s", typePosition, pos.Type)
	}
	sent := pos.Accepted
	destCV, _ := changevector.Parse(pos.ChangeVector)
	if lost := s.lostWrites(pos.Accepted, destCV); lost != nil {
		return false, lost
	}
	now := time.Now()
	s.mu.Lock()
	s.stats.State, s.stats.Connected, s.stats.ConnectedSince = StateConnected, true, now
	s.stats.LastAckEtag, s.stats.LastSentEtag, s.stats.LastAck, s.stats.NextRetry = sent, sent, now, time.Time{}
	s.mu.Unlock()

	// Acknowledgements are read on their own goroutine, so the next batch
	// is read and sent while the destination applies the previous one.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	acks := make(chan message, s.opt.Window+1)
	readErr := make(chan error, 1)
	go func() {
		for {
			m, err := recv(sctx, conn)
			if err != nil {
				readErr <- err
				stop() // a send blocked on the broken connection gives up
				return
			}
			select {
			case acks <- m:
			case <-sctx.Done():
				return
			}
		}
	}()
	type pending struct {
		items int64
		beat  bool
		at    time.Time
	}
	var inflight []pending
	// broken prefers the reader's error (the cause) to a failed send's.
	broken := func(err error) error {
		select {
		case rerr := <-readErr:
			return rerr
		default:
			return err
		}
	}
	overdue := func() <-chan time.Time {
		if len(inflight) == 0 {
			return nil
		}
		return time.After(time.Until(inflight[0].at.Add(ackTimeout)))
	}
	errSilent := fmt.Errorf("no acknowledgement for %s", ackTimeout)
	acked := func(m message) error {
		if m.Type != typeAck {
			return fmt.Errorf("expected %s, got %s", typeAck, m.Type)
		}
		if len(inflight) == 0 {
			return errors.New("acknowledgement of nothing")
		}
		p := inflight[0]
		inflight = inflight[1:]
		destCV, _ = changevector.Parse(m.ChangeVector)
		now := time.Now()
		s.mu.Lock()
		s.stats.LastAckEtag = max(s.stats.LastAckEtag, m.Accepted)
		s.stats.LastAck = now
		if p.beat {
			s.stats.LastBeat = now
		} else {
			s.stats.Batches++
			s.stats.Docs += p.items
			s.rate.add(now, p.items)
		}
		s.mu.Unlock()
		return nil
	}
	beat := time.NewTicker(s.opt.Heartbeat)
	defer beat.Stop()
	var enc batchEncoder
	for {
		// Take the acknowledgements that have arrived; wait for one when
		// the window is full.
		for waiting := true; waiting; {
			if len(inflight) >= s.opt.Window {
				select {
				case <-ctx.Done():
					return true, nil
				case err := <-readErr:
					return true, err
				case m := <-acks:
					if err := acked(m); err != nil {
						return true, err
					}
				case <-overdue():
					return true, errSilent
				}
				continue
			}
			select {
			case m := <-acks:
				if err := acked(m); err != nil {
					return true, err
				}
			default:
				waiting = false
			}
		}
		// Send only what the destination lacks: an item already merged
		// into its vector (it came from there, or via a third node) is
		// skipped, but the batch still moves the position past it.
		enc.reset()
		last := int64(0)
		err := s.db.ScanReplicationAfter(ctx, sent, s.opt.BatchSize, s.opt.BatchBytes, func(it *storage.Item) error {
			last = it.Etag
			if it.Skippable(destCV) {
				return nil
			}
			enc.add(it)
			return nil
		})
		if err != nil {
			return true, err
		}
		if last == 0 {
			select {
			case <-ctx.Done():
				return true, nil
			case err := <-readErr:
				return true, err
			case m := <-acks:
				if err := acked(m); err != nil {
					return true, err
				}
			case <-s.wake:
			case <-overdue():
				return true, errSilent
			case <-beat.C:
				// A heartbeat while idle: its answer refreshes the
				// destination's vector (items it got from a third node
				// are then skipped) and shows the link is alive.
				if len(inflight) == 0 {
					if err := send(sctx, conn, message{Type: typeHeartbeat, LastEtag: sent}); err != nil {
						return true, broken(err)
					}
					inflight = append(inflight, pending{beat: true, at: time.Now()})
				}
			}
			continue
		}
		enc.after, enc.last = sent, last
		if err := conn.Send(sctx, enc.bytes()); err != nil {
			return true, broken(err)
		}
		inflight = append(inflight, pending{items: int64(enc.count), at: time.Now()})
		sent = last
		s.mu.Lock()
		s.stats.LastSentEtag = sent
		s.mu.Unlock()
	}
}

// hasAll tells whether the database has every item by the rule a sender
// skips items with (storage.Item.Skippable against this copy's own
// vector): never true for an Unordered item or a conflict version, which
// ApplyReplicated must judge.
func hasAll(db *storage.DB, items []storage.Item) bool {
	if len(items) == 0 {
		return true
	}
	have, err := changevector.ParseStored(db.ChangeVector())
	if err != nil {
		return false
	}
	for _, it := range items {
		if it.ChangeVector == "" || !it.Skippable(have) {
			return false
		}
	}
	return true
}

// rateWindow counts acknowledged batches and items per second over the
// last rateSeconds whole seconds and the current one.
type rateWindow struct {
	sec           [rateSeconds + 1]int64
	batches, docs [rateSeconds + 1]int64
}

const rateSeconds = 5

func (w *rateWindow) add(now time.Time, items int64) {
	sec := now.Unix()
	i := sec % int64(len(w.sec))
	if w.sec[i] != sec {
		w.sec[i], w.batches[i], w.docs[i] = sec, 0, 0
	}
	w.batches[i]++
	w.docs[i] += items
}

func (w *rateWindow) rates(now time.Time) (batchesPerSec, docsPerSec float64) {
	sec := now.Unix()
	var b, d int64
	for i := range w.sec {
		if w.sec[i] >= sec-rateSeconds && w.sec[i] <= sec {
			b += w.batches[i]
			d += w.docs[i]
		}
	}
	span := rateSeconds + float64(now.Nanosecond())/1e9
	return float64(b) / span, float64(d) / span
}

// Receive serves one incoming replication connection for the database that
// lookup returns, until the connection ends. Each batch is applied in one
// transaction and acknowledged, in order, with the new position and vector.
func Receive(ctx context.Context, conn Conn, lookup func(name string) (*storage.DB, error)) error {
	hello, err := recvWithin(ctx, conn, IdleTimeout)
	if err != nil {
		return err
	}
	if hello.Type != typeHello || hello.SourceID == "" {
		return fmt.Errorf("expected %s", typeHello)
	}
	db, err := lookup(hello.Database)
	if err != nil {
		_ = send(ctx, conn, message{Type: typePosition, Error: err.Error()})
		return err
	}
	var accepted int64
	if err := db.Write(ctx, func(tx *storage.Tx) error {
		accepted, err = tx.SourceEtag(hello.SourceID)
		return err
	}); err != nil {
		return err
	}
	if err := send(ctx, conn, message{Type: typePosition, Accepted: accepted, ChangeVector: db.ChangeVector()}); err != nil {
		return err
	}
	// Batches are handed to the database as they arrive (storage.Submit),
	// so the next one is queued while the previous one commits and several
	// may share a commit; acknowledgements go out in order, each once its
	// batch is durable, from their own goroutine.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type pendingAck struct {
		done <-chan error // nil: nothing was written (a heartbeat, or a batch the receiver has)
		last int64
	}
	pending := make(chan pendingAck, 16)
	ackErr := make(chan error, 1)
	// The idle rule (IdleTimeout) holds only while the receiver owes
	// nothing: a sender whose window is full of batches still being
	// applied is waiting for this side, not silent.
	var owed, lastHeard atomic.Int64
	lastHeard.Store(time.Now().UnixNano())
	var idle atomic.Bool
	go func() {
		t := time.NewTicker(IdleTimeout / 12)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if owed.Load() == 0 && time.Since(time.Unix(0, lastHeard.Load())) > IdleTimeout {
				idle.Store(true)
				cancel()
				return
			}
		}
	}()
	go func() {
		defer close(ackErr)
		for p := range pending {
			if p.done != nil {
				if err := <-p.done; err != nil {
					_ = send(ctx, conn, message{Type: typeAck, Error: err.Error()})
					ackErr <- err
					cancel()
					return
				}
			}
			accepted = max(accepted, p.last)
			if err := send(ctx, conn, message{Type: typeAck, Accepted: accepted, ChangeVector: db.ChangeVector()}); err != nil {
				ackErr <- err
				cancel()
				return
			}
			lastHeard.Store(time.Now().UnixNano()) // the sender's clock starts again from here
			owed.Add(-1)
		}
	}()
	fail := func(err error) error {
		close(pending)
		if aerr := <-ackErr; aerr != nil {
			return aerr // the cause
		}
		return err
	}
	written := int64(0) // the last etag of the last batch this connection wrote
	expect := accepted  // where the next batch must start
	for {
		m, err := recv(ctx, conn)
		if err != nil {
			if idle.Load() {
				err = fmt.Errorf("nothing from the sender for %s: %w", IdleTimeout, err)
			}
			return fail(err)
		}
		lastHeard.Store(time.Now().UnixNano())
		owed.Add(1)
		var p pendingAck
		switch m.Type {
		case typeHeartbeat:
		case typeBatch:
			// Batches must follow each other: one that does not start
			// where the previous one ended (or at the handshake's
			// position) means a batch went missing on the way, and
			// applying this one would move the position past its items
			// for good. Failing the connection makes the sender resend
			// from this side's position.
			if m.After != expect {
				return fail(fmt.Errorf("a batch is missing: this one starts after etag %d, the previous one ended at %d", m.After, expect))
			}
			expect = m.LastEtag
			p.last = m.LastEtag
			if hasAll(db, m.Items) {
				// Everything in it is here already (it came by another
				// path, or the sender skipped it all): acknowledge without
				// a transaction. The position is stored with the next
				// batch that writes; until then a reconnecting sender
				// resends from the stored one, and those items are
				// skipped again.
				break
			}
			// Nothing nested past the limit is stored, whichever way it came.
			for _, it := range m.Items {
				if it.Body != nil && it.Kind == storage.KindDocument {
					if err := document.CheckDepth(it.Body); err != nil {
						return fail(fmt.Errorf("replicated item %s: %w", it.ID, err))
					}
				}
			}
			prev := written
			p.done = db.Submit(ctx, func(tx *storage.Tx) error {
				// Only on top of the previous batch: if it failed, the
				// position must not move past its items.
				if prev > 0 {
					if at, err := tx.SourceEtag(hello.SourceID); err != nil || at < prev {
						return errors.Join(errors.New("the previous batch was not applied"), err)
					}
				}
				for _, it := range m.Items {
					if _, err := tx.ApplyReplicated(it); err != nil {
						return err
					}
				}
				return tx.SetSourceEtag(hello.SourceID, m.LastEtag)
			})
			written = m.LastEtag
		default:
			return fail(fmt.Errorf("unexpected message %s", m.Type))
		}
		select {
		case pending <- p:
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
}
