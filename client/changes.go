package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// DocumentChange is a document put or deleted (RavenDB's DocumentChange).
type DocumentChange struct {
	Type           string `json:"Type"` // "Put" or "Delete"
	ID             string `json:"Id"`
	CollectionName string `json:"CollectionName"`
	ChangeVector   string `json:"ChangeVector"`
}

// IndexChange is an index event: "BatchCompleted" (documents indexed),
// "IndexAdded", "IndexRemoved".
type IndexChange struct {
	Type string `json:"Type"`
	Name string `json:"Name"`
	Etag int64  `json:"Etag"`
}

// OperationStatusChange is a new state of a long-running operation.
type OperationStatusChange struct {
	OperationID int64          `json:"OperationId"`
	State       OperationState `json:"State"`
}

// CounterChange is a counter of a document changed (RavenDB's
// CounterChange): Type "Put" (a counter that was not there, or came by
// replication), "Increment" or "Delete"; Value is the counter's total after
// the change (0 once deleted).
type CounterChange struct {
	Type           string `json:"Type"`
	Name           string `json:"Name"`
	Value          int64  `json:"Value"`
	DocumentID     string `json:"DocumentId"`
	CollectionName string `json:"CollectionName"`
	ChangeVector   string `json:"ChangeVector"`
}

// TimeSeriesChange is a time series of a document changed (RavenDB's
// TimeSeriesChange): Type "Put" (entries appended between From and To) or
// "Delete" (the range From to To deleted; an open end is year 1 or 9999).
type TimeSeriesChange struct {
	Type           string    `json:"Type"`
	Name           string    `json:"Name"`
	DocumentID     string    `json:"DocumentId"`
	CollectionName string    `json:"CollectionName"`
	ChangeVector   string    `json:"ChangeVector"`
	From           time.Time `json:"From"`
	To             time.Time `json:"To"`
}

// ChangesBuffer is how many notifications a subscription holds for its
// reader; one more ends the subscription with ErrChangesTooSlow.
const ChangesBuffer = 4096

// ErrChangesTooSlow ends a subscription whose reader let ChangesBuffer
// notifications pile up: the connection's other subscriptions must not
// wait for it.
var ErrChangesTooSlow = errors.New("rookery: changes subscription: the reader fell ChangesBuffer notifications behind")

// ErrChangesClosed is what subscriptions of a Changes closed by Close end
// with.
var ErrChangesClosed = errors.New("rookery: changes connection closed")

// ChangesClosedError is the server closing the connection: Code 1008 with
// "too slow: N notifications pending" (the client did not read fast
// enough), "no longer allowed" (its certificate was revoked or lost the
// database); 1001 when the database was deleted or the server stops.
type ChangesClosedError struct {
	Code   int
	Reason string
}

func (e *ChangesClosedError) Error() string {
	return fmt.Sprintf("rookery: the server closed the changes connection (%d %s)", e.Code, e.Reason)
}

// Changes is one websocket to a database's Changes API
// (/databases/{db}/changes), shared by every subscription made from it.
// It does not reconnect: when the connection ends, every subscription's
// channel is closed and Err says why; open a new Changes to go on.
type Changes struct {
	conn   *websocket.Conn
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan error
	subs    map[changeSink]struct{}
	err     error
}

// changeSink is a subscription as the read loop sees it.
type changeSink interface {
	offer(kind string, v any)
	end(err error)
}

// Changes opens the Changes API of database (the store's database when
// ""). ctx bounds the connection's opening only; Close ends it.
func (s *DocumentStore) Changes(ctx context.Context, database string) (*Changes, error) {
	if err := s.init(); err != nil {
		return nil, err
	}
	e := s.executor
	if database != "" && !strings.EqualFold(database, s.database) {
		e = newRequestExecutor(database, s.urls, s.conv)
		defer e.close()
	}
	if err := e.ensureTopology(ctx); err != nil {
		return nil, err
	}
	hc := e.http
	if hc.Timeout > 0 {
		// The websocket library refuses a client with an overall timeout:
		// the connection is meant to stay open. ctx bounds the opening.
		c := *hc
		c.Timeout = 0
		hc = &c
	}
	var errs []error
	for _, n := range e.Topology().Nodes {
		u := "ws" + strings.TrimPrefix(n.URL, "http") + "/databases/" + e.database + "/changes"
		conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: hc})
		if err == nil {
			return newChanges(conn), nil
		}
		if resp != nil && resp.StatusCode >= 400 {
			var body []byte
			if resp.Body != nil {
				body, _ = io.ReadAll(io.LimitReader(resp.Body, 1024))
			}
			herr := e.errorFrom("GET", u, &response{status: resp.StatusCode, header: resp.Header, body: body})
			if resp.StatusCode == 401 || resp.StatusCode == 403 {
				return nil, herr // the same identity is refused everywhere
			}
			err = herr
		}
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, &AllNodesFailedError{Method: "GET", Path: "/databases/" + e.database + "/changes", Errors: errs}
}

func newChanges(conn *websocket.Conn) *Changes {
	conn.SetReadLimit(64 << 20) // a frame holds at most about 1 MiB of messages
	ctx, cancel := context.WithCancel(context.Background())
	c := &Changes{conn: conn, cancel: cancel, done: make(chan struct{}), pending: map[int64]chan error{}, subs: map[changeSink]struct{}{}}
	go c.read(ctx)
	return c
}

// Close ends the connection and every subscription (their Err is
// ErrChangesClosed).
func (c *Changes) Close() error {
	c.finish(ErrChangesClosed)
	c.conn.Close(websocket.StatusNormalClosure, "")
	c.cancel()
	<-c.done
	return nil
}

// Err is why the connection ended (nil while it is open).
func (c *Changes) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *Changes) finish(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	subs := c.subs
	c.subs = map[changeSink]struct{}{}
	pending := c.pending
	c.pending = map[int64]chan error{}
	c.mu.Unlock()
	for _, ch := range pending {
		ch <- err
	}
	for s := range subs {
		s.end(err)
	}
}

type wireMessage struct {
	Type           string         `json:"Type"`
	CommandID      int64          `json:"CommandId"`
	Exception      string         `json:"Exception"`
	Value          jsontext.Value `json:"Value"`
	TopologyChange bool           `json:"TopologyChange"`
}

func (c *Changes) read(ctx context.Context) {
	defer close(c.done)
	var buf []byte
	var docBuf []DocumentChange
	var recent recentStrings
	for {
		data, err := readChangesFrame(ctx, c.conn, buf[:0])
		if cap(data) <= maxKeptFrame {
			buf = data // reused for the next frame
		} else {
			buf = nil
		}
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				err = &ChangesClosedError{Code: int(ce.Code), Reason: ce.Reason}
			} else if ctx.Err() != nil {
				err = ErrChangesClosed
			}
			c.finish(err)
			return
		}
		// Most frames are document changes only, in the one form the
		// server writes: read those without the JSON decoder.
		if docs, ok := fastDocumentChanges(data, docBuf[:0], &recent); ok {
			docBuf = docs
			if len(docs) > 0 {
				subs := c.sinks()
				for i := range docs {
					var boxed any
					for _, s := range subs {
						if ds, ok := s.(*ChangesSubscription[DocumentChange]); ok {
							ds.offerDoc(docs[i]) // no interface value made
							continue
						}
						if boxed == nil {
							boxed = docs[i]
						}
						s.offer("DocumentChange", boxed)
					}
				}
			}
			continue
		}
		data = bytes.Clone(data) // buf is reused; the decoded values must not share it
		// json v2: one pass that validates as it decodes (v1 checks the
		// whole frame first, then again each Value); a subscriber process
		// with 100 connections at 1,000 writes/s spent most of a core there.
		var msgs []wireMessage
		if len(data) > 0 && data[0] == '[' {
			err = jsonv2.Unmarshal(data, &msgs)
		} else {
			var m wireMessage
			err = jsonv2.Unmarshal(data, &m)
			msgs = []wireMessage{m}
		}
		if err != nil {
			c.finish(fmt.Errorf("rookery: changes: bad frame: %w", err))
			c.conn.CloseNow()
			return
		}
		for _, m := range msgs {
			c.handle(m)
		}
	}
}

func (c *Changes) handle(m wireMessage) {
	var v any
	switch m.Type {
	case "Confirm":
		c.mu.Lock()
		ch := c.pending[m.CommandID]
		delete(c.pending, m.CommandID)
		c.mu.Unlock()
		if ch != nil {
			ch <- nil
		}
		return
	case "Error":
		c.finish(&ServerError{Type: "ChangesError", Message: m.Exception})
		return
	case "DocumentChange":
		var d DocumentChange
		if jsonv2.Unmarshal(m.Value, &d) != nil {
			return
		}
		v = d
	case "IndexChange":
		var ic IndexChange
		if jsonv2.Unmarshal(m.Value, &ic) != nil {
			return
		}
		v = ic
	case "OperationStatusChange":
		var oc OperationStatusChange
		if jsonv2.Unmarshal(m.Value, &oc) != nil {
			return
		}
		v = oc
	case "CounterChange":
		var cc CounterChange
		if jsonv2.Unmarshal(m.Value, &cc) != nil {
			return
		}
		v = cc
	case "TimeSeriesChange":
		var tc TimeSeriesChange
		if jsonv2.Unmarshal(m.Value, &tc) != nil {
			return
		}
		v = tc
	default:
		return // the supported features, topology changes, kinds Rookery does not have
	}
	for _, s := range c.sinks() {
		s.offer(m.Type, v)
	}
}

// sinks lists the connection's subscriptions.
func (c *Changes) sinks() []changeSink {
	c.mu.Lock()
	defer c.mu.Unlock()
	subs := make([]changeSink, 0, len(c.subs))
	for s := range c.subs {
		subs = append(subs, s)
	}
	return subs
}

// maxKeptFrame is the largest read buffer a connection keeps between
// frames (a frame holds at most about 1 MiB of messages).
const maxKeptFrame = 2 << 20

// readChangesFrame reads the next message into buf (reused: conn.Read makes a
// new slice for every frame, grown from 512 bytes, which a process with 100
// connections at 1,000 writes/s paid for 4,000 times a second).
func readChangesFrame(ctx context.Context, conn *websocket.Conn, buf []byte) ([]byte, error) {
	_, r, err := conn.Reader(ctx)
	if err != nil {
		return buf, err
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// recentStrings keeps the last Type and CollectionName a connection read,
// so that a frame of changes to one collection makes those strings once.
type recentStrings struct{ typ, coll string }

// intern returns b as a string, the one kept in *last when they are equal.
func intern(b []byte, last *string) string {
	if string(b) == *last {
		return *last
	}
	*last = string(b)
	return *last
}

// docChangePrefix opens every message of a document-changes frame as the
// server writes it.
const docChangePrefix = `{"Type":"DocumentChange","Value":{`

// fastDocumentChanges reads a frame that is a JSON array of document
// changes in exactly the form the server writes: no whitespace, each
// message docChangePrefix, then the members Type, Id, CollectionName and
// ChangeVector (any order, each at most once) as strings without escapes
// or null, then "}}". Anything else (another kind of message, an escape,
// a member it does not know, invalid UTF-8) gives ok false, and the caller
// decodes the frame with the JSON decoder, 4-5 times slower
// (BenchmarkChangesFrame); FuzzChangesFrame checks the two agree.
func fastDocumentChanges(data []byte, out []DocumentChange, recent *recentStrings) (_ []DocumentChange, ok bool) {
	if recent == nil {
		recent = &recentStrings{}
	}
	if len(data) < 2 || data[0] != '[' {
		return out, false
	}
	i := 1
	if data[i] == ']' {
		return out, i+1 == len(data)
	}
	for {
		if !bytes.HasPrefix(data[i:], []byte(docChangePrefix)) {
			return out, false
		}
		i += len(docChangePrefix)
		var d DocumentChange
		seen := 0
		for n := 0; ; n++ {
			if i >= len(data) {
				return out, false
			}
			if data[i] == '}' {
				break
			}
			if n > 0 {
				if data[i] != ',' {
					return out, false
				}
				i++
			}
			key, j, ok := plainString(data, i)
			if !ok || j >= len(data) || data[j] != ':' {
				return out, false
			}
			i = j + 1
			var field *string
			var bit int
			switch string(key) {
			case "Type":
				field, bit = &d.Type, 1
			case "Id":
				field, bit = &d.ID, 2
			case "CollectionName":
				field, bit = &d.CollectionName, 4
			case "ChangeVector":
				field, bit = &d.ChangeVector, 8
			default:
				return out, false
			}
			if seen&bit != 0 {
				return out, false // a duplicate member: the decoder refuses it
			}
			seen |= bit
			if bytes.HasPrefix(data[i:], []byte("null")) {
				i += 4
				continue
			}
			v, j, ok := plainString(data, i)
			if !ok {
				return out, false
			}
			switch bit {
			case 1:
				*field = intern(v, &recent.typ)
			case 4:
				*field = intern(v, &recent.coll)
			default:
				*field = string(v)
			}
			i = j
		}
		// data[i] is the Value's '}'; the message's follows.
		if i+1 >= len(data) || data[i+1] != '}' {
			return out, false
		}
		i += 2
		out = append(out, d)
		if i >= len(data) {
			return out, false
		}
		switch data[i] {
		case ']':
			return out, i+1 == len(data)
		case ',':
			i++
		default:
			return out, false
		}
	}
}

// plainString reads the JSON string at data[i] when it has no escape and
// no control character and is valid UTF-8: its contents and the index past
// its closing quote.
func plainString(data []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, 0, false
	}
	ascii := true
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			s = data[i+1 : j]
			return s, j + 1, ascii || utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, 0, false
}

// send sends a command and waits for its confirmation. params are the
// two-argument commands' [document id, name].
func (c *Changes) send(ctx context.Context, command string, param *string, params []string) error {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.nextID++
	id := c.nextID
	ch := make(chan error, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	b, _ := json.Marshal(struct {
		CommandID int64    `json:"CommandId"`
		Command   string   `json:"Command"`
		Param     *string  `json:"Param"`
		Params    []string `json:"Params,omitempty"`
	}{id, command, param, params})
	if err := c.conn.Write(ctx, websocket.MessageText, b); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return ctx.Err()
	}
}

// ChangesSubscription delivers the notifications of one watch on C, in the
// order the server sent them. C is closed when the subscription ends
// (Close, the connection ending, or its reader falling ChangesBuffer
// behind); Err then says why.
type ChangesSubscription[T any] struct {
	// C delivers the notifications.
	C <-chan T

	c       *Changes
	ch      chan T
	kind    string
	filter  func(T) bool
	unwatch string
	param   *string
	params  []string

	mu     sync.Mutex
	ended  bool
	err    error
	closed sync.Once
}

func (s *ChangesSubscription[T]) offer(kind string, v any) {
	if kind != s.kind {
		return
	}
	t, ok := v.(T)
	if !ok || !s.filter(t) {
		return
	}
	s.deliver(t)
}

func (s *ChangesSubscription[T]) deliver(t T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	select {
	case s.ch <- t:
	default:
		s.endLocked(ErrChangesTooSlow)
		go func() {
			s.c.mu.Lock()
			delete(s.c.subs, s)
			s.c.mu.Unlock()
		}()
	}
}

// offerDoc is offer for a subscription to document changes, without
// making an interface value of d.
func (s *ChangesSubscription[T]) offerDoc(d T) {
	if s.kind != "DocumentChange" || !s.filter(d) {
		return
	}
	s.deliver(d)
}

func (s *ChangesSubscription[T]) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLocked(err)
}

func (s *ChangesSubscription[T]) endLocked(err error) {
	if s.ended {
		return
	}
	s.ended, s.err = true, err
	close(s.ch)
}

// Err is why the subscription ended: nil after Close, ErrChangesTooSlow,
// or the connection's end (*ChangesClosedError, ErrChangesClosed, a
// network error).
func (s *ChangesSubscription[T]) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close stops the watch (unwatch on the server) and closes C.
func (s *ChangesSubscription[T]) Close() error {
	var err error
	s.closed.Do(func() {
		s.c.mu.Lock()
		_, open := s.c.subs[s]
		delete(s.c.subs, s)
		s.c.mu.Unlock()
		s.end(nil)
		if open {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if e := s.c.send(ctx, s.unwatch, s.param, s.params); e != nil && !errors.Is(e, ErrChangesClosed) {
				err = e
			}
		}
	})
	return err
}

func subscribe[T any](ctx context.Context, c *Changes, kind, what string, param *string, filter func(T) bool) (*ChangesSubscription[T], error) {
	return subscribeParams(ctx, c, kind, what, param, nil, filter)
}

func subscribeParams[T any](ctx context.Context, c *Changes, kind, what string, param *string, params []string, filter func(T) bool) (*ChangesSubscription[T], error) {
	ch := make(chan T, ChangesBuffer)
	s := &ChangesSubscription[T]{C: ch, c: c, ch: ch, kind: kind, filter: filter, unwatch: "unwatch-" + what, param: param, params: params}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.subs[s] = struct{}{}
	c.mu.Unlock()
	if err := c.send(ctx, "watch-"+what, param, params); err != nil {
		c.mu.Lock()
		delete(c.subs, s)
		c.mu.Unlock()
		s.end(err)
		return nil, err
	}
	return s, nil
}

func ptr(s string) *string { return &s }

// ForDocument watches one document (ids are case-insensitive). It returns
// once the server confirmed the watch: every later change is delivered.
func (c *Changes) ForDocument(ctx context.Context, id string) (*ChangesSubscription[DocumentChange], error) {
	if strings.TrimSpace(id) == "" {
		return nil, errors.New("rookery: ForDocument needs an id")
	}
	return subscribe(ctx, c, "DocumentChange", "doc", ptr(id), func(d DocumentChange) bool { return strings.EqualFold(d.ID, id) })
}

// ForDocumentsInCollection watches the documents of a collection.
func (c *Changes) ForDocumentsInCollection(ctx context.Context, collection string) (*ChangesSubscription[DocumentChange], error) {
	if strings.TrimSpace(collection) == "" {
		return nil, errors.New("rookery: ForDocumentsInCollection needs a collection")
	}
	return subscribe(ctx, c, "DocumentChange", "collection", ptr(collection), func(d DocumentChange) bool { return strings.EqualFold(d.CollectionName, collection) })
}

// ForDocumentsStartingWith watches the documents whose id starts with
// prefix (case-insensitive).
func (c *Changes) ForDocumentsStartingWith(ctx context.Context, prefix string) (*ChangesSubscription[DocumentChange], error) {
	if strings.TrimSpace(prefix) == "" {
		return nil, errors.New("rookery: ForDocumentsStartingWith needs a prefix")
	}
	lp := strings.ToLower(prefix)
	return subscribe(ctx, c, "DocumentChange", "prefix", ptr(prefix), func(d DocumentChange) bool { return strings.HasPrefix(strings.ToLower(d.ID), lp) })
}

// ForAllDocuments watches every document of the database.
func (c *Changes) ForAllDocuments(ctx context.Context) (*ChangesSubscription[DocumentChange], error) {
	return subscribe(ctx, c, "DocumentChange", "docs", nil, func(DocumentChange) bool { return true })
}

// ForIndex watches one index.
func (c *Changes) ForIndex(ctx context.Context, name string) (*ChangesSubscription[IndexChange], error) {
	if strings.TrimSpace(name) == "" {
		return nil, errors.New("rookery: ForIndex needs an index name")
	}
	return subscribe(ctx, c, "IndexChange", "index", ptr(name), func(i IndexChange) bool { return strings.EqualFold(i.Name, name) })
}

// ForAllIndexes watches every index of the database.
func (c *Changes) ForAllIndexes(ctx context.Context) (*ChangesSubscription[IndexChange], error) {
	return subscribe(ctx, c, "IndexChange", "indexes", nil, func(IndexChange) bool { return true })
}

// ForOperation watches one operation (an id from Operation.ID, or one
// reserved before starting it).
func (c *Changes) ForOperation(ctx context.Context, id int64) (*ChangesSubscription[OperationStatusChange], error) {
	return subscribe(ctx, c, "OperationStatusChange", "operation", ptr(strconv.FormatInt(id, 10)), func(o OperationStatusChange) bool { return o.OperationID == id })
}

// ForAllOperations watches every operation of the database.
func (c *Changes) ForAllOperations(ctx context.Context) (*ChangesSubscription[OperationStatusChange], error) {
	return subscribe(ctx, c, "OperationStatusChange", "operations", nil, func(OperationStatusChange) bool { return true })
}

// ForAllCounters watches every counter of the database.
func (c *Changes) ForAllCounters(ctx context.Context) (*ChangesSubscription[CounterChange], error) {
	return subscribe(ctx, c, "CounterChange", "counters", nil, func(CounterChange) bool { return true })
}

// ForCounter watches the counters of every document with this name
// (case-insensitive).
func (c *Changes) ForCounter(ctx context.Context, name string) (*ChangesSubscription[CounterChange], error) {
	if strings.TrimSpace(name) == "" {
		return nil, errors.New("rookery: ForCounter needs a counter name")
	}
	return subscribe(ctx, c, "CounterChange", "counter", ptr(name), func(cc CounterChange) bool { return strings.EqualFold(cc.Name, name) })
}

// ForCountersOfDocument watches every counter of one document.
func (c *Changes) ForCountersOfDocument(ctx context.Context, id string) (*ChangesSubscription[CounterChange], error) {
	if strings.TrimSpace(id) == "" {
		return nil, errors.New("rookery: ForCountersOfDocument needs a document id")
	}
	return subscribe(ctx, c, "CounterChange", "document-counters", ptr(id), func(cc CounterChange) bool { return strings.EqualFold(cc.DocumentID, id) })
}

// ForCounterOfDocument watches one counter of one document.
func (c *Changes) ForCounterOfDocument(ctx context.Context, id, name string) (*ChangesSubscription[CounterChange], error) {
	if strings.TrimSpace(id) == "" || strings.TrimSpace(name) == "" {
		return nil, errors.New("rookery: ForCounterOfDocument needs a document id and a counter name")
	}
	return subscribeParams(ctx, c, "CounterChange", "document-counter", nil, []string{id, name}, func(cc CounterChange) bool {
		return strings.EqualFold(cc.DocumentID, id) && strings.EqualFold(cc.Name, name)
	})
}

// ForAllTimeSeries watches every time series of the database.
func (c *Changes) ForAllTimeSeries(ctx context.Context) (*ChangesSubscription[TimeSeriesChange], error) {
	return subscribe(ctx, c, "TimeSeriesChange", "all-timeseries", nil, func(TimeSeriesChange) bool { return true })
}

// ForTimeSeries watches the time series of every document with this name
// (case-insensitive).
func (c *Changes) ForTimeSeries(ctx context.Context, name string) (*ChangesSubscription[TimeSeriesChange], error) {
	if strings.TrimSpace(name) == "" {
		return nil, errors.New("rookery: ForTimeSeries needs a time series name")
	}
	return subscribe(ctx, c, "TimeSeriesChange", "timeseries", ptr(name), func(tc TimeSeriesChange) bool { return strings.EqualFold(tc.Name, name) })
}

// ForTimeSeriesOfDocument watches the time series of one document: every
// one when name is "", else the one named.
func (c *Changes) ForTimeSeriesOfDocument(ctx context.Context, id, name string) (*ChangesSubscription[TimeSeriesChange], error) {
	if strings.TrimSpace(id) == "" {
		return nil, errors.New("rookery: ForTimeSeriesOfDocument needs a document id")
	}
	if name == "" {
		return subscribe(ctx, c, "TimeSeriesChange", "all-document-timeseries", ptr(id), func(tc TimeSeriesChange) bool { return strings.EqualFold(tc.DocumentID, id) })
	}
	if strings.TrimSpace(name) == "" {
		return nil, errors.New("rookery: ForTimeSeriesOfDocument: a blank time series name")
	}
	return subscribeParams(ctx, c, "TimeSeriesChange", "document-timeseries", nil, []string{id, name}, func(tc TimeSeriesChange) bool {
		return strings.EqualFold(tc.DocumentID, id) && strings.EqualFold(tc.Name, name)
	})
}
