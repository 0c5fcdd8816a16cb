package web

import (
	"bufio"
	"errors"
	"net"
	"sync"
	"time"
)

// sniffListener serves two protocols on one port: a connection whose first
// byte is '{' is a subscription worker (its header is a JSON object); any
// other goes to the HTTP server, which reads from Accept.
type sniffListener struct {
	net.Listener
	tcp    func(net.Conn)
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	errMu  sync.Mutex
	err    error
}

func newSniffListener(l net.Listener, tcp func(net.Conn)) *sniffListener {
	s := &sniffListener{Listener: l, tcp: tcp, conns: make(chan net.Conn), closed: make(chan struct{})}
	go s.loop()
	return s
}

func (s *sniffListener) loop() {
	for {
		c, err := s.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			s.errMu.Lock()
			s.err = err
			s.errMu.Unlock()
			s.Close()
			return
		}
		go s.route(c)
	}
}

// peekedConn is a connection whose first bytes were read into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (s *sniffListener) route(c net.Conn) {
	// A connection that never speaks is closed after the HTTP server's
	// idle timeout would have closed it anyway.
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Minute))
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
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

func (s *sniffListener) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.closed:
		s.errMu.Lock()
		defer s.errMu.Unlock()
		if s.err != nil {
			return nil, s.err
		}
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
