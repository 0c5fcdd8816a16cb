package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// echoServer is a real TCP server on loopback that writes back what it
// reads, and also hands every chunk it receives to the test, so a test can
// tell the two directions apart.
type echoServer struct {
	ln       net.Listener
	received chan []byte
	mute     chan struct{} // closed: stop echoing (keep receiving)
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln, received: make(chan []byte, 4096), mute: make(chan struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						b := append([]byte(nil), buf[:n]...)
						select {
						case e.received <- b:
						default:
						}
						select {
						case <-e.mute:
						default:
							if _, err := c.Write(b); err != nil {
								return
							}
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return e
}

func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := Listen(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readFull reads exactly n bytes or fails after a generous deadline.
func readFull(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return b
}

// nothingArrives checks that no byte can be read for a while. It cannot
// fail because the machine is slow: a correct proxy delivers nothing.
func nothingArrives(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	defer c.SetReadDeadline(time.Time{})
	b := make([]byte, 1)
	n, err := c.Read(b)
	if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: read %d bytes (%q), %v; want nothing and an open connection", what, n, b[:n], err)
	}
}

// closed checks that the connection was closed or reset by the proxy.
func closed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	b := make([]byte, 64)
	for {
		n, err := c.Read(b)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("%s: the connection is still open", what)
			}
			return // EOF or reset
		}
		if n > 0 {
			t.Fatalf("%s: read %q from a connection that should be closed", what, b[:n])
		}
	}
}

// refuseChecked dials and checks that the proxy refuses: the kernel may
// complete the handshake before the proxy resets the connection, so the
// dial itself may succeed or be reset.
func refuseChecked(t *testing.T, p *Proxy, what string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("%s: dial: %v", what, err)
		}
		return
	}
	defer c.Close()
	_, _ = c.Write([]byte("x"))
	closed(t, c, what)
}

func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
	if got := string(readFull(t, c, len(msg))); got != msg {
		t.Fatalf("echo: got %q, want %q", got, msg)
	}
}

func TestPassForwardsBothWays(t *testing.T) {
	e := startEcho(t)
	p := startProxy(t, e.ln.Addr().String())
	if p.Target() != e.ln.Addr().String() {
		t.Fatalf("Target %q", p.Target())
	}
	c := dial(t, p)
	roundTrip(t, c, "hello")
	roundTrip(t, c, "again")
	// The proxy counts a chunk after writing it, so the echo can reach the
	// client a moment before the count moves.
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := p.Stats()
		if s.Accepted == 1 && s.Forwarded[Upstream] == 10 && s.Forwarded[Downstream] == 10 && s.Dropped == [2]int64{} {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", s)
		}
		time.Sleep(time.Millisecond)
	}
}

// Latency is added to every chunk, in order, and changing it while bytes
// are queued keeps their order.
func TestDelay(t *testing.T) {
	e := startEcho(t)
	p := startProxy(t, e.ln.Addr().String())
	c := dial(t, p)
	roundTrip(t, c, "warm")

	const lat = 150 * time.Millisecond
	p.Set(Upstream, Fault{Mode: Delay, Latency: lat})
	if f := p.Fault(Upstream); f.Mode != Delay || f.Latency != lat || p.Fault(Downstream).Mode != Pass {
		t.Fatalf("faults %v / %v", f, p.Fault(Downstream))
	}
	start := time.Now()
	roundTrip(t, c, "slow")
	// A lower bound only: the proxy holds every chunk at least lat.
	if el := time.Since(start); el < lat {
		t.Fatalf("round trip took %s with %s of upstream latency", el, lat)
	}

	// A latency so long nothing can arrive, then shorter: the queued bytes
	// come out in the order they were written.
	p.Set(Downstream, Fault{Mode: Delay, Latency: time.Hour})
	var want bytes.Buffer
	for i := range 50 {
		msg := []byte{byte('a' + i%26), byte('0' + i%10)}
		want.Write(msg)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if i == 25 {
			p.Set(Upstream, Fault{Mode: Delay, Latency: time.Millisecond})
		}
	}
	nothingArrives(t, c, "downstream delayed by an hour")
	p.Heal()
	if got := readFull(t, c, want.Len()); !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("after the heal: got %q, want %q", got, want.Bytes())
	}
}

// Held bytes are delivered on heal, intact and in order, on the same
// connection; the writer is pushed back instead of losing anything.
func TestHold(t *testing.T) {
	e := startEcho(t)
	p := startProxy(t, e.ln.Addr().String())
	c := dial(t, p)
	roundTrip(t, c, "before")

	p.Set(Upstream, Fault{Mode: Hold})
	payload := make([]byte, 3<<20) // more than the proxy reads ahead
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		wrote <- err
	}()
	nothingArrives(t, c, "upstream held")
	got := 0 // "before" is in the channel; none of the held bytes may be
	for len(e.received) > 0 {
		got += len(<-e.received)
	}
	if got != len("before") {
		t.Fatalf("the server received %d bytes while upstream was held", got-len("before"))
	}
	p.Heal()
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if got := readFull(t, c, len(payload)); !bytes.Equal(got, payload) {
		t.Fatal("the held payload came back altered")
	}
	if s := p.Stats(); s.Dropped != [2]int64{} || s.Accepted != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// Dropped bytes are gone for good, the connection stays open, and bytes
// written after the heal get through.
func TestDropIsSilent(t *testing.T) {
	e := startEcho(t)
	p := startProxy(t, e.ln.Addr().String())
	c := dial(t, p)
	roundTrip(t, c, "before")

	p.Set(Downstream, Fault{Mode: Drop})
	if _, err := c.Write([]byte("lost-on-the-way-back")); err != nil {
		t.Fatal(err)
	}
	// Upstream still passes: the server gets it, the echo is dropped.
	deadline := time.After(10 * time.Second)
	for got := ""; got != "lost-on-the-way-back"; {
		select {
		case b := <-e.received:
			if string(b) != "before" {
				got += string(b)
			}
		case <-deadline:
			t.Fatalf("the server did not receive the upstream bytes (got %q)", got)
		}
	}
	nothingArrives(t, c, "downstream dropped")

	p.Set(Upstream, Fault{Mode: Drop})
	if _, err := c.Write([]byte("never")); err != nil {
		t.Fatal(err)
	}
	nothingArrives(t, c, "both directions dropped")
	select {
	case b := <-e.received:
		t.Fatalf("the server received %q while upstream was dropped", b)
	default:
	}

	p.Heal()
	roundTrip(t, c, "after") // same connection, nothing of the dropped bytes
	s := p.Stats()
	if s.Dropped[Downstream] != int64(len("lost-on-the-way-back")) || s.Dropped[Upstream] != int64(len("never")) || s.Accepted != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// A close sent while its direction drops is not lost: it arrives on heal.
func TestDropHoldsTheClose(t *testing.T) {
	e := startEcho(t)
	p := startProxy(t, e.ln.Addr().String())
	c := dial(t, p)
	roundTrip(t, c, "before")
	p.Set(Upstream, Fault{Mode: Drop})
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// The echo server closes its side when it reads EOF; it has not.
	nothingArrives(t, c, "client closed its side while upstream drops")
	p.Heal()
	closed(t, c, "after the heal the server hears the close and closes too")
}

// A cut closes the live connections and refuses new ones until healed.
func TestCut(t *testing.T) {
	e := startEcho(t)
	p := startProxy(t, e.ln.Addr().String())
	c1 := dial(t, p)
	roundTrip(t, c1, "one")
	c2 := dial(t, p)
	roundTrip(t, c2, "two")

	p.Set(Downstream, Fault{Mode: Cut})
	closed(t, c1, "live connection after the cut")
	closed(t, c2, "second live connection after the cut")
	refuseChecked(t, p, "new connection while cut")

	p.Heal()
	roundTrip(t, dial(t, p), "three")
	s := p.Stats()
	if s.Cut != 2 || s.Refused != 1 || s.Accepted != 3 {
		t.Fatalf("stats %+v", s)
	}
}

// A proxy whose target is down refuses, and works once the target is up.
func TestTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := startProxy(t, addr)
	refuseChecked(t, p, "connection to a dead target")
	if s := p.Stats(); s.Refused != 1 || s.Accepted != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// Closing the proxy closes its connections and its listener.
func TestClose(t *testing.T) {
	e := startEcho(t)
	p := startProxy(t, e.ln.Addr().String())
	c := dial(t, p)
	roundTrip(t, c, "x")
	p.Set(Upstream, Fault{Mode: Hold}) // a pump waiting on a fault must end too
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	closed(t, c, "connection after Close")
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("the listener still accepts after Close")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// Random faults flipped under a steady stream of numbered messages never
// reorder or corrupt what gets through: with Drop off, nothing is lost.
func TestFaultsKeepTheStreamIntact(t *testing.T) {
	e := startEcho(t)
	p := startProxy(t, e.ln.Addr().String())
	c := dial(t, p)
	rng := rand.New(rand.NewPCG(7, 7))
	var sent bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 400 {
			switch rng.IntN(4) {
			case 0:
				p.Set(Direction(rng.IntN(2)), Fault{Mode: Hold})
			case 1:
				p.Set(Direction(rng.IntN(2)), Fault{Mode: Delay, Latency: time.Duration(rng.IntN(3000)) * time.Microsecond})
			default:
				p.Heal()
			}
			msg := []byte{byte(i >> 8), byte(i), '|'}
			sent.Write(msg)
			if _, err := c.Write(msg); err != nil {
				t.Error(err)
				return
			}
		}
		p.Heal()
	}()
	<-done
	if got := readFull(t, c, sent.Len()); !bytes.Equal(got, sent.Bytes()) {
		t.Fatal("the stream came back reordered or altered")
	}
}
