package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// Worker strategies: what a worker does when another worker holds the
// subscription.
const (
	// OpenIfFree fails with ErrSubscriptionInUse (the default).
	OpenIfFree = "OpenIfFree"
	// TakeOver disconnects the other worker, which ends with
	// ErrSubscriptionInUse.
	TakeOver = "TakeOver"
	// WaitForFree waits until the other worker disconnects.
	WaitForFree = "WaitForFree"
)

// WorkerOptions configure a subscription worker.
type WorkerOptions struct {
	// Name is the subscription's name.
	Name string
	// Strategy is OpenIfFree (default), TakeOver or WaitForFree.
	Strategy string
	// MaxDocsPerBatch bounds a batch; default 4096.
	MaxDocsPerBatch int
	// CloseWhenNoDocsLeft makes Run return nil once every document was
	// processed, instead of waiting for new ones.
	CloseWhenNoDocsLeft bool
	// RetryDelay is the wait before reconnecting after a network error or
	// a reconnectable close; default 5 s.
	RetryDelay time.Duration
	// OnError, if set, is told each error the worker recovers from by
	// reconnecting (network errors, server errors, reconnect requests).
	OnError func(error)
	// OnAcknowledged, if set, is called with each batch after the server
	// confirmed its acknowledgement (the subscription moved past it).
	OnAcknowledged func(*Batch)
}

// Worker processes a subscription's documents in batches. Make it with
// Subscriptions.GetWorker and start it with Run.
type Worker struct {
	store   *DocumentStore
	opts    WorkerOptions
	running atomic.Bool

	// Test hooks: afterLocate gets where the worker is about to connect,
	// afterOptions each connection once the options were sent, afterAck
	// once an acknowledgement was sent on it.
	afterLocate  func(*tcpInfo)
	afterOptions func(net.Conn)
	afterAck     func(net.Conn)
}

// Batch is what the worker hands to its handler: documents in the order
// the server sent them (etag order), and the documents the query includes.
type Batch struct {
	Items []BatchItem
	// Includes holds the included documents (with @metadata), by id, when
	// the subscription query has an include clause.
	Includes map[string]json.RawMessage
}

// BatchItem is one document of a batch.
type BatchItem struct {
	ID           string
	ChangeVector string
	// Raw is the document as the server sent it, @metadata included.
	Raw      json.RawMessage
	Metadata map[string]any
	// Exception is set when the server could not process this document
	// (e.g. the query failed on it); Raw then holds only its metadata.
	Exception string

	types *typeCache
}

// Decode unmarshals the document into v, a pointer (to a struct, whose id
// field is set by the store's conventions, or to a map, without
// @metadata).
func (it *BatchItem) Decode(v any) error {
	if it.Exception != "" {
		return fmt.Errorf("rookery: subscription document %q: %s", it.ID, it.Exception)
	}
	if err := json.Unmarshal(it.Raw, v); err != nil {
		return fmt.Errorf("rookery: subscription document %q into %T: %w", it.ID, v, err)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return nil
	}
	switch e := rv.Elem(); e.Kind() {
	case reflect.Map:
		if e.Type().Key().Kind() == reflect.String && !e.IsNil() {
			e.SetMapIndex(reflect.ValueOf("@metadata").Convert(e.Type().Key()), reflect.Value{})
		}
	case reflect.Struct:
		if it.types != nil {
			setEntityID(rv, it.types.get(e.Type()), it.ID)
		}
	}
	return nil
}

// GetWorker returns a worker for a subscription. It does no I/O; Run
// connects.
func (c *Subscriptions) GetWorker(o WorkerOptions) *Worker {
	if o.Strategy == "" {
		o.Strategy = OpenIfFree
	}
	if o.MaxDocsPerBatch <= 0 {
		o.MaxDocsPerBatch = 4096
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = 5 * time.Second
	}
	return &Worker{store: c.store, opts: o}
}

// Name is the subscription's name.
func (w *Worker) Name() string { return w.opts.Name }

// handlerError is an error the user's handler returned.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }

// Run connects to the subscription and calls handler with each batch, one
// at a time. A batch is acknowledged when handler returns nil; the server
// then moves past it. It runs until:
//
//   - ctx ends: the connection is closed at once, a batch in flight is not
//     acknowledged (the server delivers it again), and Run returns
//     ctx.Err() once handler has returned;
//   - handler returns an error: the batch is not acknowledged and Run
//     returns that error;
//   - the server refuses or closes the subscription for good: Run returns
//     a *SubscriptionError (errors.Is ErrSubscriptionNotFound,
//     ErrSubscriptionInUse, ErrSubscriptionClosed, ErrSubscriptionInvalid),
//     or *DatabaseDoesNotExistError;
//   - the node refuses the store's certificate (none, unknown, or without
//     read access to the database): Run returns an error that is
//     ErrAuthorization (an *AuthorizationError from the HTTP request
//     locating the node, or a *SubscriptionError with Status
//     AuthorizationFailed from the TCP handshake);
//   - CloseWhenNoDocsLeft is set and nothing is left: Run returns nil.
//
// Network errors, server errors and reconnect requests (Closed with
// CanReconnect, ConcurrencyReconnect) make it connect again after
// RetryDelay, as often as needed. Delivery is at least once: a batch whose
// acknowledgement did not reach the server is delivered again. Run may not
// be called again while it runs.
func (w *Worker) Run(ctx context.Context, handler func(ctx context.Context, b *Batch) error) error {
	if handler == nil {
		return errors.New("rookery: Run needs a handler")
	}
	if w.opts.Name == "" {
		return errors.New("rookery: the worker needs the subscription's name")
	}
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("rookery: the worker is already running")
	}
	defer w.running.Store(false)
	if err := w.store.init(); err != nil {
		return err
	}
	for {
		err := w.connection(ctx, handler)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var he *handlerError
		if errors.As(err, &he) {
			return he.err
		}
		var se *SubscriptionError
		switch {
		case errors.As(err, &se):
			if se.NoDocsLeft {
				return nil
			}
			if !se.retryable() {
				return se
			}
		case sameOnEveryNode(err), errors.Is(err, ErrStoreClosed):
			return err
		}
		if w.opts.OnError != nil {
			w.opts.OnError(err)
		}
		t := time.NewTimer(w.opts.RetryDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// The Subscription TCP protocol version spoken (protocol reference §7.4).
const subscriptionTCPVersion = 53000

// subscriptionReadTimeout is how long the server may stay silent: it sends
// heartbeats every few seconds, so a longer silence is a dead connection.
const subscriptionReadTimeout = time.Minute

// tcpInfo is the answer of GET /info/remote-task/tcp.
type tcpInfo struct {
	URL     string   `json:"Url"`
	URLs    []string `json:"Urls"`
	NodeTag string
	// Certificate is the node's certificate (base64 DER) on a secured
	// node: the worker connects with TLS and the node must present it.
	Certificate string
}

// locate asks the database's nodes (with the executor's failover) where
// the subscription's workers connect.
func (w *Worker) locate(ctx context.Context) (*tcpInfo, error) {
	e := w.store.executor
	if err := e.ensureTopology(ctx); err != nil {
		return nil, err
	}
	db := w.store.database
	q := "database=" + url.QueryEscape(db) + "&remote-task=" + url.QueryEscape(w.opts.Name) +
		"&tag=" + url.QueryEscape("Subscription/"+db) + "&verify-database=true"
	resp, err := e.execute(ctx, &request{method: http.MethodGet, path: "/info/remote-task/tcp", query: q})
	if err != nil {
		return nil, err
	}
	if resp.status != http.StatusOK {
		return nil, e.errorFrom(http.MethodGet, "/info/remote-task/tcp", resp)
	}
	var info tcpInfo
	if err := json.Unmarshal(resp.body, &info); err != nil {
		return nil, fmt.Errorf("rookery: GET /info/remote-task/tcp: %w", err)
	}
	return &info, nil
}

// dial connects to the first reachable address of info (Urls, then Url),
// with TLS when the node announced its certificate or the store speaks
// https (see workerTLSConfig).
func (w *Worker) dial(ctx context.Context, info *tcpInfo) (net.Conn, error) {
	var tlsCfg *tls.Config
	if info.Certificate != "" || w.store.https {
		var err error
		if tlsCfg, err = workerTLSConfig(w.store.conv, info.Certificate); err != nil {
			return nil, err
		}
	}
	var errs []error
	seen := map[string]bool{}
	for _, raw := range append(append([]string(nil), info.URLs...), info.URL) {
		if raw == "" || seen[raw] {
			continue
		}
		seen[raw] = true
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "tcp" || u.Port() == "" {
			errs = append(errs, fmt.Errorf("rookery: unusable subscription address %q", raw))
			continue
		}
		d := net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
		if tlsCfg == nil {
			c, err := d.DialContext(ctx, "tcp", u.Host)
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
			continue
		}
		td := tls.Dialer{NetDialer: &d, Config: tlsCfg}
		c, err := td.DialContext(ctx, "tcp", u.Host)
		if err == nil {
			return c, nil
		}
		errs = append(errs, fmt.Errorf("rookery: subscription connection to %s: %w", u.Host, err))
	}
	if len(errs) == 0 {
		return nil, errors.New("rookery: the server gave no subscription address")
	}
	return nil, errors.Join(errs...)
}

// deadlineReader extends the read deadline before every read, so a
// connection stays alive as long as the server writes something
// (heartbeats included) within the timeout.
type deadlineReader struct {
	c       net.Conn
	timeout time.Duration
}

func (r deadlineReader) Read(p []byte) (int, error) {
	_ = r.c.SetReadDeadline(time.Now().Add(r.timeout))
	return r.c.Read(p)
}

func writeJSONMessage(c net.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_ = c.SetWriteDeadline(time.Now().Add(subscriptionReadTimeout))
	_, err = c.Write(b)
	return err
}

// serverMessage is any message of the server after the header response.
type serverMessage struct {
	Type      string
	Status    string
	Message   string
	Exception string
	Data      json.RawMessage
	Includes  map[string]json.RawMessage
}

// statusError turns a ConnectionStatus other than Accepted into an error.
func (w *Worker) statusError(m *serverMessage) *SubscriptionError {
	se := &SubscriptionError{Name: w.opts.Name, Status: m.Status, Message: orDefault(m.Message, m.Exception)}
	if len(m.Data) > 0 {
		var d struct{ CanReconnect, NoDocsLeft bool }
		if json.Unmarshal(m.Data, &d) == nil {
			se.CanReconnect, se.NoDocsLeft = d.CanReconnect, d.NoDocsLeft
		}
	}
	return se
}

// errorMessage turns {"Type":"Error"} into an error.
func (w *Worker) errorMessage(m *serverMessage) error {
	if strings.Contains(m.Exception, "DatabaseDoesNotExist") {
		return &DatabaseDoesNotExistError{Database: w.store.database, Message: firstLine(m.Exception)}
	}
	return fmt.Errorf("rookery: subscription %q: server error: %s", w.opts.Name, firstLine(orDefault(m.Exception, m.Message)))
}

// timeSpan formats d as a .NET TimeSpan ("[d.]hh:mm:ss[.fffffff]").
func timeSpan(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	h := d / time.Hour
	d -= h * time.Hour
	m := d / time.Minute
	d -= m * time.Minute
	s := d / time.Second
	d -= s * time.Second
	out := fmt.Sprintf("%02d:%02d:%02d", h, m, s)
	if days > 0 {
		out = fmt.Sprintf("%d.%s", days, out)
	}
	if d > 0 {
		out += fmt.Sprintf(".%07d", d/100)
	}
	return out
}

// connection runs one connection: locate, connect, negotiate, then batches
// until something ends it.
func (w *Worker) connection(ctx context.Context, handler func(context.Context, *Batch) error) error {
	info, err := w.locate(ctx)
	if err != nil {
		return err
	}
	if w.afterLocate != nil {
		w.afterLocate(info)
	}
	conn, err := w.dial(ctx, info)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Ending ctx closes the connection, whatever the worker is doing.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	dec := jsontext.NewDecoder(deadlineReader{c: conn, timeout: subscriptionReadTimeout}, streamOptions...)
	db := w.store.database
	if err := writeJSONMessage(conn, map[string]any{
		"DatabaseName": db, "Operation": "Subscription", "OperationVersion": subscriptionTCPVersion,
		"AuthorizeInfo": nil, "LicensedFeatures": map[string]bool{"dataCompression": false},
	}); err != nil {
		return err
	}
	var hr struct {
		Status  string
		Version int
		Message string
	}
	if raw, err := dec.ReadValue(); err != nil {
		return err
	} else if err := json.Unmarshal(raw, &hr); err != nil {
		return err
	}
	if hr.Status == SubscriptionStatusAuthorizationFailed {
		// The node does not accept this worker's certificate for the
		// database; another attempt would be refused the same way.
		return &SubscriptionError{Name: w.opts.Name, Status: hr.Status, Message: orDefault(hr.Message, "the node refused this worker's certificate")}
	}
	if hr.Status != "Ok" || hr.Version != subscriptionTCPVersion {
		if hr.Status == "Ok" || hr.Status == "TcpVersionMismatch" {
			// Say why before leaving, as RavenDB's clients do.
			_ = writeJSONMessage(conn, map[string]any{"DatabaseName": db, "Operation": "Drop", "OperationVersion": subscriptionTCPVersion,
				"Info": fmt.Sprintf("Couldn't agree on subscription tcp version: ours %d, theirs %d", subscriptionTCPVersion, hr.Version)})
		}
		return &SubscriptionError{Name: w.opts.Name, Status: orDefault(hr.Status, "TcpVersionMismatch"),
			Message: orDefault(hr.Message, fmt.Sprintf("the server speaks subscription protocol version %d, this client %d", hr.Version, subscriptionTCPVersion))}
	}
	if err := writeJSONMessage(conn, map[string]any{
		"SubscriptionName":                w.opts.Name,
		"TimeToWaitBeforeConnectionRetry": timeSpan(w.opts.RetryDelay),
		"IgnoreSubscriberErrors":          false,
		"Strategy":                        w.opts.Strategy,
		"MaxDocsPerBatch":                 w.opts.MaxDocsPerBatch,
		"MaxErroneousPeriod":              "00:05:00",
		"CloseWhenNoDocsLeft":             w.opts.CloseWhenNoDocsLeft,
	}); err != nil {
		return err
	}
	if w.afterOptions != nil {
		w.afterOptions(conn)
	}

	// The connection status comes first (heartbeats aside).
	var st serverMessage
	if err := readMessage(dec, &st); err != nil {
		return err
	}
	switch {
	case st.Type == "Error":
		return w.errorMessage(&st)
	case st.Type != "ConnectionStatus":
		return fmt.Errorf("rookery: subscription %q: expected the connection status, got %q", w.opts.Name, st.Type)
	case st.Status != "Accepted":
		return w.statusError(&st)
	}

	meta := jsontext.NewDecoder(bytes.NewReader(nil), streamOptions...) // reused for every item's metadata
	var acked *Batch                                                    // acknowledged, waiting for Confirm
	batch := &Batch{}
	for {
		var m serverMessage
		if err := readMessage(dec, &m); err != nil {
			return err
		}
		switch m.Type {
		case "Data":
			batch.Items = append(batch.Items, w.item(&m, meta))
		case "Includes":
			if batch.Includes == nil {
				batch.Includes = map[string]json.RawMessage{}
			}
			for id, d := range m.Includes {
				batch.Includes[id] = d
			}
		case "CounterIncludes", "TimeSeriesIncludes":
			// Not supported by this client; the documents are still delivered.
		case "EndOfBatch":
			b := batch
			batch = &Batch{}
			if err := handler(ctx, b); err != nil {
				return &handlerError{err}
			}
			if err := ctx.Err(); err != nil {
				return err // not acknowledged: delivered again
			}
			if err := writeJSONMessage(conn, map[string]string{"Type": "Acknowledge"}); err != nil {
				return err
			}
			acked = b
			if w.afterAck != nil {
				w.afterAck(conn)
			}
		case "Confirm":
			if acked != nil && w.opts.OnAcknowledged != nil {
				w.opts.OnAcknowledged(acked)
			}
			acked = nil
		case "ConnectionStatus":
			return w.statusError(&m)
		case "Error":
			return w.errorMessage(&m)
		default:
			return fmt.Errorf("rookery: subscription %q: unexpected message %q from the server", w.opts.Name, m.Type)
		}
	}
}

// item builds a batch item from a Data message. Only the metadata is
// decoded; the rest of the document is skipped over (Decode reads it).
func (w *Worker) item(m *serverMessage, meta *jsontext.Decoder) BatchItem {
	it := BatchItem{Raw: m.Data, Exception: m.Exception, types: w.store.types}
	md, err := metadataOf(meta, m.Data)
	if err != nil && it.Exception == "" {
		it.Exception = "the document is not a JSON object: " + err.Error()
	}
	if md == nil {
		md = map[string]any{}
	}
	it.Metadata = md
	it.ID, _ = md["@id"].(string)
	it.ChangeVector, _ = md["@change-vector"].(string)
	return it
}

// streamOptions skip the checks the server's own output does not need:
// duplicate names and UTF-8 validity are the document's business.
var streamOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// metadataOf decodes a document's @metadata member, skipping the others.
func metadataOf(d *jsontext.Decoder, doc []byte) (map[string]any, error) {
	d.Reset(bytes.NewReader(doc), streamOptions...)
	if tok, err := d.ReadToken(); err != nil {
		return nil, err
	} else if tok.Kind() != '{' {
		return nil, fmt.Errorf("found %v", tok.Kind())
	}
	for d.PeekKind() != '}' {
		name, err := d.ReadToken()
		if err != nil {
			return nil, err
		}
		if name.String() != "@metadata" {
			if err := d.SkipValue(); err != nil {
				return nil, err
			}
			continue
		}
		v, err := d.ReadValue()
		if err != nil {
			return nil, err
		}
		var md map[string]any
		return md, json.Unmarshal(v, &md)
	}
	return nil, nil
}

// readMessage reads one server message off the stream in a single pass:
// Data stays raw (copied out of the decoder's buffer), the small members
// are decoded.
func readMessage(d *jsontext.Decoder, m *serverMessage) error {
	tok, err := d.ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != '{' {
		return fmt.Errorf("rookery: subscription: expected a message object from the server, found %v", tok.Kind())
	}
	for d.PeekKind() != '}' {
		name, err := d.ReadToken()
		if err != nil {
			return err
		}
		key := name.String() // before the next read voids the token
		v, err := d.ReadValue()
		if err != nil {
			return err
		}
		switch key {
		case "Type":
			m.Type = jsonString(v)
		case "Status":
			m.Status = jsonString(v)
		case "Message":
			m.Message = jsonString(v)
		case "Exception":
			m.Exception = jsonString(v)
		case "Data":
			m.Data = bytes.Clone(v)
		case "Includes":
			if err := json.Unmarshal(v, &m.Includes); err != nil {
				return err
			}
		}
	}
	_, err = d.ReadToken()
	return err
}

// jsonString is a JSON string's text ("" for null or another kind).
func jsonString(v jsontext.Value) string {
	if v.Kind() != '"' {
		return ""
	}
	b, err := jsontext.AppendUnquote(nil, v)
	if err != nil {
		return ""
	}
	return string(b)
}
