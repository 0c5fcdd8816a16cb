package web

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"
)

// readHeaderTimeout bounds how long a new connection may stay silent: the
// first byte (which picks the protocol) and then the HTTP request headers
// must each arrive within it.
const readHeaderTimeout = 10 * time.Second

// DefaultMaxConnections is the connection cap when none is configured,
// derived from the process's open-file limit (RLIMIT_NOFILE, which Go raises
// to the hard limit at start): three quarters of it, minus 256, and at least
// 32. The quarter plus 256 descriptors left over are for what does not come
// in through the HTTP port: every database's SQLite files (a writer and up to
// eight readers, each with the database and its WAL open, plus the shared
// memory file: about 20 per database), the Raft log, snapshots and transport,
// outgoing replication connections, and the log files. With a limit of 20,000
// that is 14,744 connections and 5,256 descriptors to spare (about 250
// databases); with 1,024 it is 512.
func DefaultMaxConnections() int {
	return maxConnectionsFor(openFileLimit())
}

func maxConnectionsFor(nofile uint64) int {
	const most = 1 << 20
	if nofile > 4*most {
		return most
	}
	n := int(nofile)*3/4 - 256
	return max(n, 32)
}

// acceptBackoff is how long the accept loop waits after a failed Accept
// before trying again: it starts at acceptBackoffMin and doubles up to
// acceptBackoffMax, as net/http does.
var (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// sniffListener serves two protocols on one port: a connection whose first
// byte is '{' is a subscription worker (its header is a JSON object); any
// other goes to the HTTP server, which reads from Accept.
//
// At most maxConns connections of both kinds are open at once
// (netutil.LimitListener: Accept waits for one to close, and the kernel
// keeps newcomers in its backlog meanwhile). A failed Accept (no descriptor
// left, a connection aborted before it was accepted, ...) never ends the
// loop: it is counted, logged at most every few seconds, and retried after a
// short backoff, so the port serves again as soon as descriptors free up.
// Only Close ends it.
type sniffListener struct {
	net.Listener
	tcp       func(net.Conn)
	firstByte time.Duration
	log       *slog.Logger
	errs      *prometheus.CounterVec
	conns     chan net.Conn
	closed    chan struct{}
	once      sync.Once
}

type listenerOptions struct {
	maxConns int
	// tls, when set, wraps the connections in TLS above the connection cap
	// and below the sniffing (the handshake happens on the first peek).
	tls       *tls.Config
	firstByte time.Duration
	log       *slog.Logger
	errs      *prometheus.CounterVec // rookery_http_accept_errors_total{reason}
}

func newSniffListener(l net.Listener, tcp func(net.Conn), o listenerOptions) *sniffListener {
	if o.maxConns > 0 {
		l = netutil.LimitListener(l, o.maxConns)
	}
	if o.tls != nil {
		l = tls.NewListener(l, o.tls)
	}
	if o.firstByte <= 0 {
		o.firstByte = readHeaderTimeout
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	s := &sniffListener{Listener: l, tcp: tcp, firstByte: o.firstByte, log: o.log, errs: o.errs,
		conns: make(chan net.Conn), closed: make(chan struct{})}
	go s.loop()
	return s
}

func (s *sniffListener) loop() {
	var backoff time.Duration
	var lastLog time.Time
	suppressed := 0
	for {
		c, err := s.Listener.Accept()
		if err == nil {
			backoff = 0
			go s.route(c)
			continue
		}
		select {
		case <-s.closed:
			return
		default:
		}
		if errors.Is(err, net.ErrClosed) {
			// Closed under us (not by Close): nothing more will come.
			s.Close()
			return
		}
		reason := acceptErrorReason(err)
		if s.errs != nil {
			s.errs.WithLabelValues(reason).Inc()
		}
		if backoff == 0 {
			backoff = acceptBackoffMin
		} else {
			backoff = min(2*backoff, acceptBackoffMax)
		}
		if now := time.Now(); now.Sub(lastLog) >= 10*time.Second {
			s.log.Warn("accept failed; retrying", "reason", reason, "error", err, "retry_in", backoff, "suppressed_since_last_log", suppressed)
			lastLog, suppressed = now, 0
		} else {
			suppressed++
		}
		select {
		case <-time.After(backoff):
		case <-s.closed:
			return
		}
	}
}

// acceptErrorReason names an Accept failure for the metric's label.
func acceptErrorReason(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.EMFILE:
			return "emfile"
		case syscall.ENFILE:
			return "enfile"
		case syscall.ECONNABORTED:
			return "econnaborted"
		case syscall.ENOBUFS, syscall.ENOMEM:
			return "nomem"
		}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "other"
}

// peekedConn is a connection whose first bytes were read into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// NetConn is the connection underneath (a *tls.Conn on a secured node).
func (c *peekedConn) NetConn() net.Conn { return c.Conn }

func (s *sniffListener) route(c net.Conn) {
	// A connection that says nothing is closed as soon as the HTTP server
	// would close one that sends no headers, so silent connections do not
	// pile up against the connection cap.
	_ = c.SetReadDeadline(time.Now().Add(s.firstByte))
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		// A plain HTTP request to a TLS port: say what to do instead of
		// closing without a word (net/http does the same).
		var rh tls.RecordHeaderError
		if errors.As(err, &rh) && rh.Conn != nil {
			_ = rh.Conn.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(rh.Conn, "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nThis node serves HTTPS: use https:// and a client certificate.\n")
		}
		c.Close()
		return
	}
	pc := &peekedConn{Conn: c, r: br}
	if first[0] == '{' {
		s.tcp(pc)
		return
	}
	select {
	case s.conns <- pc:
	case <-s.closed:
		c.Close()
	}
}

// Accept hands the HTTP server its next connection. It fails only once the
// listener is closed.
func (s *sniffListener) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

func (s *sniffListener) Close() error {
	var err error
	s.once.Do(func() {
		close(s.closed)
		err = s.Listener.Close()
	})
	return err
}
