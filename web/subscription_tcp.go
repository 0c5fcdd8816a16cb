package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/backend/subscriptions"
)

// The subscription worker protocol (protocol reference §7.4): concatenated
// JSON objects both ways over a plain TCP connection.

// subscriptionTCPVersion is the only Subscription protocol version served.
const subscriptionTCPVersion = 53000

// heartbeatEvery is how often an idle or waiting connection gets "\r\n":
// the write fails on a dead worker, which ends its session.
var heartbeatEvery = 3 * time.Second

// subscriptionConns tracks the open worker connections, closed on shutdown.
type subscriptionConns struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func (t *subscriptionConns) add(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	if t.conns == nil {
		t.conns = map[net.Conn]struct{}{}
	}
	t.conns[c] = struct{}{}
	t.wg.Add(1)
	return true
}

func (t *subscriptionConns) remove(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
	t.wg.Done()
}

func (t *subscriptionConns) closeAll() {
	t.mu.Lock()
	t.closed = true
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
}

// tcpConn writes whole messages under a lock (heartbeats come from another
// goroutine).
type tcpConn struct {
	c  net.Conn
	mu sync.Mutex
}

func (w *tcpConn) write(b []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.c.SetWriteDeadline(time.Now().Add(time.Minute))
	_, err := w.c.Write(b)
	return err
}

func (w *tcpConn) json(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return w.write(b)
}

type tcpHeader struct {
	DatabaseName     string
	Operation        string
	OperationVersion int
	Info             string
}

type workerOptions struct {
	SubscriptionName    string
	Strategy            string
	MaxDocsPerBatch     int
	CloseWhenNoDocsLeft bool
}

type workerMessage struct {
	Type string
}

// serveSubscriptionConn runs one worker connection.
func (s *Server) serveSubscriptionConn(c net.Conn) {
	if !s.subConns.add(c) {
		c.Close()
		return
	}
	defer s.subConns.remove(c)
	defer c.Close()
	log := s.log.With("remote", c.RemoteAddr().String())
	w := &tcpConn{c: c}
	dec := newWorkerReader(c, s.cfg.MaxWorkerMessage, document.MaxDepth())
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))

	// Header and version negotiation.
	var h tcpHeader
	for tries := 0; ; tries++ {
		if err := dec.next(&h); err != nil {
			logWorkerError(log, "subscription connection: bad header", err)
			return
		}
		if h.Operation == "Drop" || h.OperationVersion == -1 {
			return
		}
		if h.Operation != "Subscription" {
			_ = w.json(map[string]any{"Status": "TcpVersionMismatch", "Version": -1, "Message": fmt.Sprintf("This port serves subscription workers only, not %q", h.Operation)})
			return
		}
		if h.OperationVersion == subscriptionTCPVersion {
			break
		}
		if tries >= 4 {
			return
		}
		_ = w.json(map[string]any{"Status": "TcpVersionMismatch", "Version": subscriptionTCPVersion, "LicensedFeatures": map[string]any{"DataCompression": false},
			"Message": fmt.Sprintf("Subscription protocol version %d is not supported; this server speaks %d", h.OperationVersion, subscriptionTCPVersion)})
	}
	if err := s.authorizeWorker(c, h.DatabaseName); err != nil {
		_ = w.json(map[string]any{"Status": "AuthorizationFailed", "Version": subscriptionTCPVersion, "Message": err.Error()})
		return
	}
	if err := w.json(map[string]any{"Status": "Ok", "Version": subscriptionTCPVersion, "LicensedFeatures": map[string]any{"DataCompression": false}}); err != nil {
		return
	}
	var o workerOptions
	if err := dec.next(&o); err != nil {
		logWorkerError(log, "subscription connection: bad options", err)
		return
	}
	_ = c.SetReadDeadline(time.Time{})

	ctx, cancel := context.WithCancel(s.subStop)
	defer cancel()
	go func() { // heartbeats from now on, also while waiting for a free subscription
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if w.write([]byte("\r\n")) != nil {
					cancel()
					return
				}
			}
		}
	}()
	msgs := make(chan workerMessage, 4)
	readLog := log
	go func() { // the worker's messages; EOF or an error ends the session
		defer cancel()
		for {
			var m workerMessage
			if err := dec.next(&m); err != nil {
				logWorkerError(readLog, "subscription connection: bad message", err)
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()

	sess, err := s.subs.Open(ctx, h.DatabaseName, o.SubscriptionName, subscriptions.ConnectOptions{Strategy: o.Strategy,
		MaxDocsPerBatch: o.MaxDocsPerBatch, CloseWhenNoDocsLeft: o.CloseWhenNoDocsLeft, ClientAddr: c.RemoteAddr().String()})
	if err != nil {
		writeStatus(w, err)
		return
	}
	defer sess.Close()
	log = log.With("database", h.DatabaseName, "subscription", sess.Name())
	log.Debug("subscription worker connected", "strategy", o.Strategy)
	if err := w.json(map[string]string{"Type": "ConnectionStatus", "Status": "Accepted"}); err != nil {
		return
	}
	buf := make([]byte, 0, 1<<16)
	for {
		b, err := sess.Next(ctx)
		if err != nil {
			if ctx.Err() == nil || sess.Err() != nil {
				writeStatus(w, firstErr(sess.Err(), err))
			}
			return
		}
		buf = appendBatch(buf[:0], b)
		if err := w.write(buf); err != nil {
			return
		}
		select {
		case m := <-msgs:
			if m.Type != "Acknowledge" {
				sess.Failed(fmt.Errorf("unexpected %q from the worker instead of Acknowledge", m.Type))
				_ = w.json(map[string]string{"Type": "Error", "Exception": "Expected Acknowledge, got " + m.Type})
				return
			}
			if err := sess.Ack(ctx); err != nil {
				writeStatus(w, err)
				return
			}
			if err := w.json(map[string]string{"Type": "Confirm"}); err != nil {
				return
			}
		case <-sess.Done():
			writeStatus(w, sess.Err())
			return
		case <-ctx.Done():
			return // the worker left: the batch is delivered again
		}
	}
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// appendBatch writes a batch as Data messages, Includes and EndOfBatch.
func appendBatch(buf []byte, b *subscriptions.Batch) []byte {
	for _, d := range b.Docs {
		buf = append(buf, `{"Type":"Data","Data":`...)
		buf = append(buf, d.JSON...)
		if d.Err != "" {
			buf = append(buf, `,"Exception":`...)
			buf = document.AppendString(buf, d.Err)
		}
		buf = append(buf, '}')
	}
	if len(b.Includes) > 0 {
		inc, _ := json.Marshal(map[string]any{"Type": "Includes", "Includes": b.Includes})
		buf = append(buf, inc...)
	}
	return append(buf, `{"Type":"EndOfBatch"}`...)
}

// writeStatus tells the worker why it cannot go on.
func writeStatus(w *tcpConn, err error) {
	var se *subscriptions.StatusError
	if errors.As(err, &se) {
		msg := map[string]any{"Type": "ConnectionStatus", "Status": se.Status, "Message": se.Msg, "Exception": se.Msg}
		if se.Status == subscriptions.StatusClosed {
			msg["Data"] = map[string]any{"CanReconnect": se.CanReconnect, "NoDocsLeft": se.NoDocsLeft}
		}
		_ = w.json(msg)
		return
	}
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, storage.ErrClosed) {
		return
	}
	_ = w.json(map[string]string{"Type": "Error", "Exception": err.Error()})
}
