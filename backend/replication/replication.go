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
	"time"

	"github.com/rookerydb/rookery/backend/changevector"
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

// wireItem is an item on the wire; the body travels as the stored bytes.
type wireItem struct {
	Type         string
	ID           string
	Collection   string
	ChangeVector string
	Etag         int64
	LastModified time.Time
	Body         json.RawMessage `json:",omitempty"`
	Unordered    bool            `json:",omitempty"` // see storage.Item
}

type message struct {
	Type         string
	Database     string     `json:",omitempty"`
	SourceID     string     `json:",omitempty"` // the sender's database id
	SourceTag    string     `json:",omitempty"`
	Items        []wireItem `json:",omitempty"`
	LastEtag     int64      `json:",omitempty"` // batch: the last source etag it covers
	Accepted     int64      `json:",omitempty"` // position/ack: last source etag accepted
	ChangeVector string     `json:",omitempty"` // the receiver's database vector
	Error        string     `json:",omitempty"`
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
	BatchSize int           // items per batch (1024 when 0)
	Heartbeat time.Duration // DefaultHeartbeat when 0; at most IdleTimeout/3
	Logger    *slog.Logger
}

// Stats are a destination's replication figures.
type Stats struct {
	Destination  string
	Connected    bool
	LastSentEtag int64
	LastAckEtag  int64
	ItemsBehind  int64 // source items after the acknowledged etag
	OldestUnsent time.Time
	LastError    string
	LastErrorAt  time.Time
	Batches      int64
	Docs         int64
	LastBeat     time.Time
}

// Sender replicates one database to one destination until its context ends.
type Sender struct {
	db   *storage.DB
	dest string
	dial Dialer
	opt  Options
	wake chan struct{}

	mu    sync.Mutex
	stats Stats
}

// NewSender prepares a sender; Run starts it.
func NewSender(db *storage.DB, destURL string, dial Dialer, opt Options) *Sender {
	if opt.BatchSize <= 0 {
		opt.BatchSize = 1024
	}
	if opt.Heartbeat <= 0 {
		opt.Heartbeat = DefaultHeartbeat
	}
	opt.Heartbeat = min(opt.Heartbeat, IdleTimeout/3) // or the receiver gives up on it
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	return &Sender{db: db, dest: destURL, dial: dial, opt: opt, wake: make(chan struct{}, 1), stats: Stats{Destination: destURL}}
}

// Wake tells the sender there is something new (a local commit). It never
// blocks.
func (s *Sender) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Stats returns the current figures.
func (s *Sender) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.ItemsBehind = max(0, s.db.LastEtag()-st.LastAckEtag)
	return st
}

func (s *Sender) fail(err error) {
	s.mu.Lock()
	s.stats.Connected = false
	s.stats.LastError = err.Error()
	s.stats.LastErrorAt = time.Now()
	s.mu.Unlock()
}

// Run connects, reconnecting with backoff, and sends until ctx ends.
func (s *Sender) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.fail(err)
			s.opt.Logger.Debug("replication connection ended", "database", s.db.Name(), "destination", s.dest, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
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
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("bad replication message: %w", err)
	}
	if m.Error != "" {
		return m, errors.New("destination: " + m.Error)
	}
	return m, nil
}

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

// session is one connection's life: handshake, then batches in etag order.
func (s *Sender) session(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, err := s.dial(dctx, s.dest, s.db.Name())
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := send(ctx, conn, message{Type: typeHello, Database: s.db.Name(), SourceID: s.db.DatabaseID(), SourceTag: s.db.NodeTag()}); err != nil {
		return err
	}
	pos, err := recv(ctx, conn)
	if err != nil {
		return err
	}
	if pos.Type != typePosition {
		return fmt.Errorf("expected %s, got %s", typePosition, pos.Type)
	}
	after := pos.Accepted
	destCV, _ := changevector.Parse(pos.ChangeVector)
	s.mu.Lock()
	s.stats.Connected, s.stats.LastAckEtag, s.stats.LastSentEtag, s.stats.LastError = true, after, after, ""
	s.mu.Unlock()
	beat := time.NewTicker(s.opt.Heartbeat)
	defer beat.Stop()
	for {
		items, err := s.db.ChangesAfter(ctx, after, s.opt.BatchSize)
		if err != nil {
			return err
		}
		if len(items) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-s.wake:
				continue
			case <-beat.C:
				if err := send(ctx, conn, message{Type: typeHeartbeat, LastEtag: after}); err != nil {
					return err
				}
				ack, err := recv(ctx, conn)
				if err != nil {
					return err
				}
				destCV, _ = changevector.Parse(ack.ChangeVector)
				s.mu.Lock()
				s.stats.LastBeat = time.Now()
				s.mu.Unlock()
				continue
			}
		}
		// Send only what the destination lacks: an item already merged
		// into its vector (it came from there, or via a third node) is
		// skipped, but the batch still moves the position past it.
		batch := message{Type: typeBatch, LastEtag: items[len(items)-1].Etag}
		for _, it := range items {
			if it.Skippable(destCV) {
				continue
			}
			batch.Items = append(batch.Items, wireItem{Type: it.Type, ID: it.ID, Collection: it.Collection, ChangeVector: it.ChangeVector, Etag: it.Etag, LastModified: it.LastModified, Body: it.Body, Unordered: it.Unordered})
		}
		if err := send(ctx, conn, batch); err != nil {
			return err
		}
		s.mu.Lock()
		s.stats.LastSentEtag = batch.LastEtag
		s.mu.Unlock()
		ack, err := recv(ctx, conn)
		if err != nil {
			return err
		}
		if ack.Type != typeAck {
			return fmt.Errorf("expected %s, got %s", typeAck, ack.Type)
		}
		after = ack.Accepted
		destCV, _ = changevector.Parse(ack.ChangeVector)
		s.mu.Lock()
		s.stats.LastAckEtag = after
		s.stats.Batches++
		s.stats.Docs += int64(len(batch.Items))
		s.mu.Unlock()
	}
}

// Receive serves one incoming replication connection for the database that
// lookup returns, until the connection ends. Each batch is applied in one
// transaction and acknowledged with the new position and vector.
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
	for {
		m, err := recvWithin(ctx, conn, IdleTimeout)
		if err != nil {
			return err
		}
		switch m.Type {
		case typeHeartbeat:
		case typeBatch:
			err := db.Write(ctx, func(tx *storage.Tx) error {
				for _, w := range m.Items {
					it := storage.Item{Type: w.Type, ID: w.ID, Collection: w.Collection, ChangeVector: w.ChangeVector, Etag: w.Etag, LastModified: w.LastModified, Body: w.Body, Unordered: w.Unordered}
					if _, err := tx.ApplyReplicated(it); err != nil {
						return err
					}
				}
				return tx.SetSourceEtag(hello.SourceID, m.LastEtag)
			})
			if err != nil {
				_ = send(ctx, conn, message{Type: typeAck, Error: err.Error()})
				return err
			}
			accepted = max(accepted, m.LastEtag)
		default:
			return fmt.Errorf("unexpected message %s", m.Type)
		}
		if err := send(ctx, conn, message{Type: typeAck, Accepted: accepted, ChangeVector: db.ChangeVector()}); err != nil {
			return err
		}
	}
}
