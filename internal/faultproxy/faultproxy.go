// Package faultproxy is a TCP proxy for fault-injection tests. It listens on
// a loopback port and forwards every connection to one target; each
// direction of the link (client to server, server to client) can be made to
// pass, add latency, hold its bytes, discard them, or be cut, and healed
// again, while the connections are live.
//
// The faults model what a network does to TCP:
//
//   - Delay: every chunk is forwarded Latency after the proxy read it, in
//     order (a slow link).
//   - Hold: nothing is forwarded, but nothing is lost: the proxy stops
//     reading, so back-pressure reaches the writer as in a partition that
//     heals before TCP gives up. On heal the bytes arrive, in order.
//   - Drop: bytes are read and discarded, including those already queued;
//     connections stay open and nobody is told (a black hole). Bytes sent
//     after the heal are delivered, so the peers see a stream with a gap. A
//     close (FIN) is not lost but held until the heal, as TCP retransmits
//     it.
//   - Cut: every current connection is closed and new ones are refused
//     (accepted and reset at once) until the link is healed. A TCP
//     connection cannot be half cut, so cutting either direction cuts whole
//     connections.
package faultproxy

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Direction is one way of the link.
type Direction int

const (
	// Upstream is client to server: the bytes the dialing side sends.
	Upstream Direction = iota
	// Downstream is server to client.
	Downstream
)

func (d Direction) String() string {
	if d == Upstream {
		return "up"
	}
	return "down"
}

// Mode is what a direction does with its bytes.
type Mode int

const (
	Pass  Mode = iota // forward at once
	Delay             // forward Latency after reading
	Hold              // keep the bytes, forward them on heal
	Drop              // discard the bytes, keep the connection open
	Cut               // close every connection, refuse new ones
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Delay:
		return "delay"
	case Hold:
		return "hold"
	case Drop:
		return "drop"
	case Cut:
		return "cut"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Fault is a direction's behaviour.
type Fault struct {
	Mode    Mode
	Latency time.Duration // for Delay
}

func (f Fault) String() string {
	if f.Mode == Delay {
		return "delay " + f.Latency.String()
	}
	return f.Mode.String()
}

// Stats are the proxy's counters since it started.
type Stats struct {
	Accepted  int64    // connections forwarded
	Refused   int64    // connections refused while cut (or the target refused)
	Cut       int64    // live connections closed by a cut
	Forwarded [2]int64 // bytes delivered, by Direction
	Dropped   [2]int64 // bytes discarded, by Direction
}

// Proxy forwards connections from its listener to the target.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	faults  [2]Fault
	changed chan struct{} // closed and replaced whenever faults change
	links   map[*link]struct{}
	closed  bool

	wg                      sync.WaitGroup
	accepted, refused, cut  atomic.Int64
	forwarded, droppedBytes [2]atomic.Int64
}

// Listen starts a proxy on 127.0.0.1 (a random port) to target
// ("host:port"). Every direction passes until told otherwise.
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, changed: make(chan struct{}), links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address connections are forwarded to.
func (p *Proxy) Target() string { return p.target }

// Set changes one direction's behaviour, for live connections too.
func (p *Proxy) Set(d Direction, f Fault) {
	p.mu.Lock()
	p.faults[d] = f
	p.changedLocked()
	p.mu.Unlock()
}

// SetBoth changes both directions.
func (p *Proxy) SetBoth(f Fault) {
	p.mu.Lock()
	p.faults = [2]Fault{f, f}
	p.changedLocked()
	p.mu.Unlock()
}

// Heal makes both directions pass again; held bytes are delivered.
func (p *Proxy) Heal() { p.SetBoth(Fault{Mode: Pass}) }

// Fault returns a direction's current behaviour.
func (p *Proxy) Fault(d Direction) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults[d]
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	s := Stats{Accepted: p.accepted.Load(), Refused: p.refused.Load(), Cut: p.cut.Load()}
	for d := range 2 {
		s.Forwarded[d] = p.forwarded[d].Load()
		s.Dropped[d] = p.droppedBytes[d].Load()
	}
	return s
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	links := p.takeLinksLocked()
	p.changedLocked()
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range links {
		l.close()
	}
	p.wg.Wait()
	return err
}

// changedLocked wakes every pump waiting on the faults, and cuts the live
// connections when a direction is now cut.
func (p *Proxy) changedLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
	if p.isCutLocked() {
		links := p.takeLinksLocked()
		p.cut.Add(int64(len(links)))
		for _, l := range links {
			l.close()
		}
	}
}

func (p *Proxy) isCutLocked() bool {
	return p.faults[Upstream].Mode == Cut || p.faults[Downstream].Mode == Cut
}

func (p *Proxy) takeLinksLocked() []*link {
	out := make([]*link, 0, len(p.links))
	for l := range p.links {
		out = append(out, l)
		delete(p.links, l)
	}
	return out
}

// state is a direction's fault and the channel that closes when it changes.
func (p *Proxy) state(d Direction) (Fault, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults[d], p.changed
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(5 * time.Millisecond) // e.g. out of file descriptors
			continue
		}
		p.mu.Lock()
		refuse := p.closed || p.isCutLocked()
		p.mu.Unlock()
		if refuse {
			p.refused.Add(1)
			reset(c)
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// reset closes a connection with an RST rather than a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		p.refused.Add(1)
		reset(client)
		return
	}
	l := &link{client: client, server: server, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed || p.isCutLocked() { // cut while dialing
		p.mu.Unlock()
		p.refused.Add(1)
		reset(client)
		_ = server.Close()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	p.accepted.Add(1)

	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { defer pumps.Done(); p.pump(l, client, server, Upstream) }()
	go func() { defer pumps.Done(); p.pump(l, server, client, Downstream) }()
	pumps.Wait()
	l.close()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// link is one proxied connection: the accepted client side and the dialed
// server side.
type link struct {
	client, server net.Conn
	once           sync.Once
	done           chan struct{}
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		reset(l.client)
		reset(l.server)
	})
}

type chunk struct {
	data []byte // nil: the source reached EOF
	at   time.Time
}

// chunkQueue bounds what one direction reads ahead of what it forwards.
const chunkQueue = 16

// pump forwards one direction: a reader that stamps chunks as it reads
// them, and a writer that applies the direction's fault to each chunk.
func (p *Proxy) pump(l *link, src, dst net.Conn, d Direction) {
	q := make(chan chunk, chunkQueue)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case q <- chunk{data: buf[:n], at: time.Now()}:
				case <-l.done:
					return
				}
			}
			if err != nil {
				select {
				case q <- chunk{at: time.Now()}:
				case <-l.done:
				}
				return
			}
		}
	}()
	for c := range q {
		if !p.deliver(l, dst, d, c) {
			l.close()
			for range q { // let the reader finish
			}
			return
		}
		if c.data == nil {
			return // EOF passed on; the other direction may go on
		}
	}
}

// deliver applies the current fault to one chunk; false ends the link.
func (p *Proxy) deliver(l *link, dst net.Conn, d Direction, c chunk) bool {
	for {
		f, changed := p.state(d)
		switch f.Mode {
		case Cut:
			return false
		case Drop:
			if c.data != nil {
				p.droppedBytes[d].Add(int64(len(c.data)))
				return true
			}
			// The close is held rather than lost: TCP retransmits a FIN
			// until it is acknowledged, so the peer hears of it on heal.
			fallthrough
		case Hold:
			select {
			case <-changed:
				continue
			case <-l.done:
				return false
			}
		case Delay:
			if wait := time.Until(c.at.Add(f.Latency)); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-changed:
					t.Stop()
					continue // the fault changed: decide again
				case <-l.done:
					t.Stop()
					return false
				}
				continue
			}
		}
		if c.data == nil {
			if tc, ok := dst.(*net.TCPConn); ok {
				return tc.CloseWrite() == nil
			}
			return false
		}
		if _, err := dst.Write(c.data); err != nil {
			return false
		}
		p.forwarded[d].Add(int64(len(c.data)))
		return true
	}
}
