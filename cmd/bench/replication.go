package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/web"
)

// The replication section measures two things, each against a baseline
// taken in the same run:
//
//   - lag: single-document PUTs at a fixed rate spread over the three nodes
//     of a cluster; for every write, the time from the client receiving its
//     201 to the document's commit on each other node. The baseline is the
//     write's own acknowledgement latency (request sent to 201 received).
//   - catch-up: a destination is cut off (a TCP proxy between the nodes
//     drops the link) while documents are bulk-inserted on the source, then
//     the link is healed; docs/s applied on the destination from its first
//     replicated commit to its last. The baseline is the source's own bulk
//     insert rate of those documents.

// startReplNode starts an in-process node with replication on; peers
// overrides the URL replication dials for some tags (a proxy); certs, when
// not nil, secure the node (TLS, the admin certificate well known).
func startReplNode(dir, tag, join string, peers map[string]string, certs *tlsCerts) (*benchNode, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	cfg := certs.secure(web.Config{HTTPAddr: l.Addr().String(), RaftAddr: "127.0.0.1:0", DataDir: filepath.Join(dir, tag), NodeTag: tag, Join: join,
		Replication: true, ReplicationPeers: peers,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 200 * time.Millisecond})
	url := certs.scheme() + "://" + l.Addr().String()
	srv, err := web.New(cfg)
	if err != nil {
		l.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() { _ = srv.Serve(l); close(done) }()
	return &benchNode{srv: srv, url: url, stop: func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}}, nil
}

// openOn waits until every node has opened the database.
func openOn(nodes []*benchNode, name string) ([]*storage.DB, error) {
	deadline := time.Now().Add(20 * time.Second)
	var dbs []*storage.DB
	for _, n := range nodes {
		for {
			db, err := n.srv.Catalog().Get(name)
			if err == nil {
				dbs = append(dbs, db)
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("database %s never opened on %s", name, n.url)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return dbs, nil
}

// commitTimes records when documents commit on one node (a commit hook).
type commitTimes struct {
	mu sync.Mutex
	at map[string]time.Time
}

func watchCommits(db *storage.DB, prefix string) *commitTimes {
	ct := &commitTimes{at: map[string]time.Time{}}
	db.OnCommit(func(changes []storage.Change) {
		now := time.Now()
		ct.mu.Lock()
		for _, c := range changes {
			if strings.HasPrefix(c.ID, prefix) {
				if _, ok := ct.at[c.ID]; !ok {
					ct.at[c.ID] = now
				}
			}
		}
		ct.mu.Unlock()
	})
	return ct
}

func (ct *commitTimes) get(id string) (time.Time, bool) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	t, ok := ct.at[id]
	return t, ok
}

func (ct *commitTimes) count() int {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return len(ct.at)
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// replicationLag writes rate documents/s for the given duration, round-robin
// over three nodes, and reports lag percentiles against the writes' own ack
// latency.
func replicationLag(out io.Writer, dir string, rate int, dur time.Duration) error {
	lc, err := startLagCluster(dir, nil)
	if err != nil {
		return err
	}
	defer lc.stop()
	r, err := lc.measure("lag/", rate, dur)
	if err != nil {
		return err
	}
	acks, lags := r.acks, r.lags
	fmt.Fprintf(out, "%d single-document PUTs at %d/s (achieved %.0f/s) round-robin over 3 nodes, lag measured on the 2 other nodes each\n", len(acks), rate, r.achieved)
	fmt.Fprintf(out, "baseline, local write ack (request to 201): p50 %s  p99 %s  max %s\n", ms(percentile(acks, 0.5)), ms(percentile(acks, 0.99)), ms(acks[len(acks)-1]))
	fmt.Fprintf(out, "replication lag (201 on origin to commit on other node): p50 %s  p99 %s  max %s (goal p99 < 10 ms; %d of %d committed before the 201 arrived)\n",
		ms(percentile(lags, 0.5)), ms(percentile(lags, 0.99)), ms(lags[len(lags)-1]), r.early, len(lags))
	fmt.Fprintf(out, "lag p99 / ack p99: %.2fx\n", float64(percentile(lags, 0.99))/float64(max(percentile(acks, 0.99), 1)))
	return nil
}

// lagCluster is three replicating nodes with one database, "lag", whose
// commits are watched on every node, and the client that writes to them.
type lagCluster struct {
	nodes  []*benchNode
	bc     *benchClient
	client *http.Client
	watch  []*commitTimes
	seen   int // writes measured so far (each watcher holds them all)
	stop   func()
}

// startLagCluster starts the three nodes (secured with certs when not nil).
func startLagCluster(dir string, certs *tlsCerts) (_ *lagCluster, err error) {
	lc := &lagCluster{}
	var stops []func()
	lc.stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			lc.stop()
		}
	}()
	join := ""
	for _, tag := range []string{"A", "B", "C"} {
		n, err := startReplNode(dir, tag, join, nil, certs)
		if err != nil {
			return nil, err
		}
		stops = append(stops, n.stop)
		lc.nodes = append(lc.nodes, n)
		join = lc.nodes[0].url
	}
	lc.bc = newBenchClient(certs.clientConfig(), nil)
	lc.client = lc.bc.hc
	if err := waitMembers(lc.nodes[0], 3); err != nil {
		return nil, err
	}
	if err := createDBWith(lc.client, lc.nodes[0].url, "lag"); err != nil {
		return nil, err
	}
	dbs, err := openOn(lc.nodes, "lag")
	if err != nil {
		return nil, err
	}
	for _, db := range dbs {
		lc.watch = append(lc.watch, watchCommits(db, "lag/"))
	}
	// Warm the senders and open as many connections as the writers use,
	// so the measurement opens none (a TLS handshake costs milliseconds).
	for i, n := range lc.nodes {
		var next atomic.Int64
		_, err := parallel(lagWriters, func() error {
			for j := next.Add(1); j <= 2*lagWriters; j = next.Add(1) {
				if err := lc.put(n, fmt.Sprintf("warm/%d-%d", i, j)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	time.Sleep(500 * time.Millisecond)
	return lc, nil
}

func (lc *lagCluster) put(n *benchNode, id string) error {
	req, _ := http.NewRequest("PUT", n.url+"/databases/lag/docs?id="+id, strings.NewReader(`{"n":1,"@metadata":{"@collection":"Lag"}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := lc.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		return fmt.Errorf("PUT %s: %d", id, resp.StatusCode)
	}
	return nil
}

// lagWriters is how many requests the lag measurement has in flight at most.
const lagWriters = 32

// lagResult is one measurement: every write's ack latency and, for every
// write and every node other than its origin, the lag; both sorted.
type lagResult struct {
	acks, lags []time.Duration
	achieved   float64 // writes/s actually issued
	early      int     // lags that were negative (counted as 0)
	dials      int64   // connections the client opened meanwhile
	cpuPerOp   float64 // µs of CPU (the whole process) per write
}

// measure writes rate documents/s for dur (ids prefix+"0", prefix+"1", …;
// prefix starts with "lag/" and differs between calls), round-robin over
// the nodes, and waits until every write reached every node.
func (lc *lagCluster) measure(prefix string, rate int, dur time.Duration) (*lagResult, error) {
	nodes := lc.nodes
	type write struct {
		id     string
		origin int
		sent   time.Time
		acked  time.Time
	}
	total := int(float64(rate) * dur.Seconds())
	writes := make([]write, total)
	jobs := make(chan int, total)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	dials0, cpu0 := lc.bc.dials.Load(), cpuTime()
	for w := 0; w < lagWriters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				wr := &writes[i]
				wr.sent = time.Now()
				if err := lc.put(nodes[wr.origin], wr.id); err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				wr.acked = time.Now()
			}
		}()
	}
	// Open loop: writes are issued on schedule whether or not earlier ones
	// have finished, so a slow spell shows in the figures.
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := 0; i < total; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		writes[i] = write{id: fmt.Sprintf("%s%d", prefix, i), origin: i % len(nodes)}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	// Wait until every write reached every node.
	lc.seen += total
	deadline := time.Now().Add(30 * time.Second)
	for _, w := range lc.watch {
		for w.count() < lc.seen {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("replication did not deliver every write within 30 s (%d of %d)", w.count(), lc.seen)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	r := &lagResult{achieved: float64(total) / elapsed.Seconds(), dials: lc.bc.dials.Load() - dials0,
		cpuPerOp: float64((cpuTime() - cpu0).Microseconds()) / float64(total)}
	for _, wr := range writes {
		r.acks = append(r.acks, wr.acked.Sub(wr.sent))
		for i, w := range lc.watch {
			if i == wr.origin {
				continue
			}
			at, _ := w.get(wr.id)
			d := at.Sub(wr.acked)
			if d < 0 {
				r.early++ // committed there before the client had its 201
				d = 0
			}
			r.lags = append(r.lags, d)
		}
	}
	sortDurations(r.acks)
	sortDurations(r.lags)
	return r, nil
}

func sortDurations(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }

// waitMembers waits until the cluster has n nodes with URLs.
func waitMembers(n *benchNode, want int) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		nodes := n.srv.Cluster().Nodes()
		ok := len(nodes) == want
		for _, x := range nodes {
			ok = ok && x.URL != ""
		}
		if ok {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("the cluster never reached its size")
}

// replicationCatchUp measures how fast a destination that was cut off
// catches up with docs documents written meanwhile.
func replicationCatchUp(out io.Writer, dir string, docs []benchDoc, batch int) error {
	p, err := newCutProxy()
	if err != nil {
		return err
	}
	defer p.close()
	a, err := startReplNode(dir, "A", "", map[string]string{"B": p.url()}, nil)
	if err != nil {
		return err
	}
	defer a.stop()
	b, err := startReplNode(dir, "B", a.url, nil, nil)
	if err != nil {
		return err
	}
	defer b.stop()
	p.setTarget(strings.TrimPrefix(b.url, "http://"))
	if err := waitMembers(a, 2); err != nil {
		return err
	}
	p.setCut(true)
	if err := createDB(a.url, "catchup"); err != nil {
		return err
	}
	dbs, err := openOn([]*benchNode{a, b}, "catchup")
	if err != nil {
		return err
	}
	dest := watchCommits(dbs[1], "users/")
	local, err := bulkInto(a.url, "catchup", docs, batch)
	if err != nil {
		return err
	}
	if n := dest.count(); n != 0 {
		return fmt.Errorf("the cut link let %d documents through", n)
	}
	healed := time.Now()
	cpu0 := cpuTime()
	p.setCut(false)
	deadline := time.Now().Add(5 * time.Minute)
	for dest.count() < len(docs) {
		if time.Now().After(deadline) {
			return fmt.Errorf("catch-up incomplete: %d of %d", dest.count(), len(docs))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cpu := cpuTime() - cpu0
	first, last := time.Time{}, time.Time{}
	dest.mu.Lock()
	firstBatch := 0
	for _, t := range dest.at {
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	for _, t := range dest.at {
		if t.Equal(first) {
			firstBatch++
		}
	}
	dest.mu.Unlock()
	rate := float64(len(docs)-firstBatch) / last.Sub(first).Seconds()
	fmt.Fprintf(out, "%d documents of ~%d bytes bulk-inserted on A while the link to B was cut (%d per request)\n", len(docs), len(docs[0].body), batch)
	fmt.Fprintf(out, "baseline, local bulk insert on A: %8.0f docs/s\n", local)
	fmt.Fprintf(out, "catch-up on B after healing:      %8.0f docs/s  ratio %.2fx (goal >= 40000 docs/s; first commit on B %s after healing, all in %s)\n",
		rate, rate/local, first.Sub(healed).Round(time.Millisecond), last.Sub(healed).Round(time.Millisecond))
	// CPU per document is less sensitive to the machine's other load than
	// the rate (on an idle machine the Go scheduler's spinning adds a
	// little, which is why the lag section does not report it).
	fmt.Fprintf(out, "CPU of both nodes during the catch-up: %.1f µs per document\n", float64(cpu.Microseconds())/float64(len(docs)))
	return nil
}

// bulkInto inserts docs through bulk_docs from one client and returns docs/s.
func bulkInto(url, db string, docs []benchDoc, batch int) (float64, error) {
	start := time.Now()
	for i := 0; i < len(docs); i += batch {
		var b strings.Builder
		b.WriteString(`{"Commands":[`)
		for j := i; j < min(i+batch, len(docs)); j++ {
			if j > i {
				b.WriteByte(',')
			}
			b.WriteString(`{"Id":"` + docs[j].id + `","Document":`)
			b.Write(docs[j].body)
			b.WriteString(`,"Type":"PUT"}`)
		}
		b.WriteString(`]}`)
		if err := expect201("POST", url+"/databases/"+db+"/bulk_docs", []byte(b.String())); err != nil {
			return 0, err
		}
	}
	return float64(len(docs)) / time.Since(start).Seconds(), nil
}

// cutProxy forwards TCP connections to target until cut: cutting drops
// every open connection and refuses new ones until healed.
type cutProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
}

func newCutProxy() (*cutProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &cutProxy{l: l, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

func (p *cutProxy) url() string { return "http://" + p.l.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut || p.target == "" {
			p.mu.Unlock()
			c.Close()
			continue
		}
		target := p.target
		p.mu.Unlock()
		go p.pipe(c, target)
	}
}

func (p *cutProxy) pipe(c net.Conn, target string) {
	up, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

func (p *cutProxy) setTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.mu.Unlock()
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
	}
}

func (p *cutProxy) close() {
	p.setCut(true)
	p.l.Close()
}
