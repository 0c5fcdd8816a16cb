package cluster

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Security is how the Raft port tells cluster nodes from anyone else.
// Exactly one of TLS and Token is used: a secured cluster runs Raft over
// mutual TLS (both sides present their node certificate and check the
// other's with VerifyNode); an unsecured one, which listens on loopback or a
// network the operator allowed, opens every connection with the cluster's
// shared secret. Without either, the port refuses every connection.
type Security struct {
	// TLS is the node's server and client configuration (its certificate,
	// and client certificates requested and verified by VerifyNode).
	TLS *tls.Config
	// VerifyNode checks the certificates a peer presented.
	VerifyNode func(rawCerts [][]byte) error
	// Token returns the cluster's shared secret (nil while this node does
	// not know it yet: a node that has not joined).
	Token func() []byte
}

// tokenMagic opens an unsecured Raft connection, before the secret.
var tokenMagic = []byte("RKRY-RAFT1")

const handshakeTimeout = 5 * time.Second

// streamLayer is Raft's transport with authentication in front: a
// connection reaches Raft only after it proved to be a node's.
type streamLayer struct {
	ln        net.Listener
	advertise net.Addr
	sec       Security
	log       *slog.Logger

	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newStreamLayer(bind string, advertise net.Addr, sec Security, log *slog.Logger) (*streamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	s := &streamLayer{ln: ln, advertise: advertise, sec: sec, log: log, conns: make(chan net.Conn), closed: make(chan struct{})}
	if s.advertise == nil {
		s.advertise = ln.Addr()
	}
	go s.acceptLoop()
	return s, nil
}

func (s *streamLayer) acceptLoop() {
	backoff := 5 * time.Millisecond
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors and the like: wait and go on.
			time.Sleep(backoff)
			backoff = min(backoff*2, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		go s.admit(c)
	}
}

// admit authenticates an incoming connection and hands it to Raft.
func (s *streamLayer) admit(c net.Conn) {
	conn, err := s.serverHandshake(c)
	if err != nil {
		s.log.Warn("raft: refused a connection that is not a cluster node's", "remote", c.RemoteAddr().String(), "error", err)
		c.Close()
		return
	}
	select {
	case s.conns <- conn:
	case <-s.closed:
		conn.Close()
	}
}

func (s *streamLayer) serverHandshake(c net.Conn) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	if s.sec.TLS != nil {
		cfg := s.sec.TLS.Clone()
		cfg.ClientAuth = tls.RequireAnyClientCert
		cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error { return s.sec.VerifyNode(raw) }
		tc := tls.Server(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, err
		}
		return tc, nil
	}
	if s.sec.Token == nil {
		return nil, errors.New("this node has no way to authenticate peers")
	}
	want := s.sec.Token()
	if len(want) == 0 {
		return nil, errors.New("this node does not know the cluster's secret yet (it has not joined)")
	}
	_ = c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	got := make([]byte, len(tokenMagic)+len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		return nil, err
	}
	_ = c.SetReadDeadline(time.Time{})
	if subtle.ConstantTimeCompare(got[:len(tokenMagic)], tokenMagic) != 1 || subtle.ConstantTimeCompare(got[len(tokenMagic):], want) != 1 {
		return nil, errors.New("wrong cluster secret")
	}
	return c, nil
}

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	if s.sec.TLS != nil {
		cfg := s.sec.TLS.Clone()
		cfg.InsecureSkipVerify = true // the peer is checked as a node below, not by host name
		cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error { return s.sec.VerifyNode(raw) }
		return tls.DialWithDialer(&d, "tcp", string(address), cfg)
	}
	if s.sec.Token == nil || len(s.sec.Token()) == 0 {
		return nil, errors.New("raft: this node does not know the cluster's secret yet")
	}
	c, err := d.Dial("tcp", string(address))
	if err != nil {
		return nil, err
	}
	msg := append(append([]byte{}, tokenMagic...), s.sec.Token()...)
	_ = c.SetWriteDeadline(time.Now().Add(handshakeTimeout))
	if _, err := c.Write(msg); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetWriteDeadline(time.Time{})
	return c, nil
}

func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

func (s *streamLayer) Close() error {
	var err error
	s.once.Do(func() {
		close(s.closed)
		err = s.ln.Close()
	})
	return err
}

func (s *streamLayer) Addr() net.Addr { return s.advertise }
