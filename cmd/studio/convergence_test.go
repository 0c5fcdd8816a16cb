package main

// The replication convergence test. Three node processes; each node's
// replication to each other node goes through its own fault proxy (six
// links, A>B being A's replication to B: upstream carries A's batches,
// downstream B's acks). Writers on every node put and delete shared ids
// (so the same id is edited concurrently on several nodes) and node-private
// ids, while a chaos loop cuts, black-holes, holds and slows random links
// and isolates random nodes. Then everything heals, the writers stop, and
// the nodes must agree: the same documents with the same change vectors and
// bodies, the same conflicts, and no acknowledged write lost.
//
// The chaos schedule and the writers' choices come from one seed, logged
// at the start; -convergence.seed=N replays them (the interleaving of the
// processes is not replayed, so a failure may need a few runs).
// -convergence.duration sets how long the writers and the chaos run.

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/faultproxy"
)

var (
	convSeed     = flag.Int64("convergence.seed", 0, "seed of the convergence tests' chaos and writers (0: a new one, logged)")
	convDuration = flag.Duration("convergence.duration", 6*time.Second, "how long the convergence tests write under faults, per mode")
	convSettle   = flag.Duration("convergence.settle", 90*time.Second, "how long the nodes may take to agree once the faults are healed")
	convNodeArgs = flag.String("convergence.node-args", "", "extra flags for every node of the fault-proxied clusters, space-separated (e.g. \"--attachments-collect-after 1s\" to collect released content while versions are still travelling)")
)

const (
	convDB     = "conv"
	sharedIDs  = 16 // shared/0..15, written on every node
	privateIDs = 10 // private/{node}/0..9, written on that node only
)

// With ResolveToLatest (the default) every conflict ends resolved, the same
// way on every node.
func TestConvergenceResolveToLatest(t *testing.T) { runConvergence(t, true) }

// With automatic resolution off, conflicts stay, and every node holds the
// same ones.
func TestConvergenceManual(t *testing.T) { runConvergence(t, false) }

func runConvergence(t *testing.T, resolveToLatest bool) {
	seed := *convSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000_000
	}
	t.Logf("seed %d (replay with -run '%s$' -convergence.seed=%d), duration %s", seed, t.Name(), seed, *convDuration)
	started := time.Now()

	pc := startProxiedCluster(t)
	pc.createDatabase(t, pc.nodes[0], convDB)
	setSolver(t, pc.testCluster, resolveToLatest)
	t.Logf("%5.1fs cluster up", time.Since(started).Seconds())

	run := &convRun{failures: map[string]int{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, n := range pc.nodes {
		for w := range 2 {
			wg.Add(1)
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(1+i*2+w)))
			go func() {
				defer wg.Done()
				run.writer(stop, n, w, rng)
			}()
		}
	}
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		pc.chaos(t, stop, rand.New(rand.NewPCG(uint64(seed), 0)), started)
	}()
	time.Sleep(*convDuration)
	close(stop)
	wg.Wait()
	<-chaosDone

	// One conflict for sure: the same new id written on every node while
	// no link carries anything, in the order A, B, C.
	pc.faultAll(faultproxy.Fault{Mode: faultproxy.Cut})
	for _, n := range pc.nodes {
		tok := "final-" + n.name
		w := &write{node: n.name, id: "final/conflict", token: tok}
		run.do(n, []*write{w})
		if !w.acked {
			t.Fatalf("final/conflict on %s was not acknowledged: %v", n.name, run.failures)
		}
	}
	pc.healAll()
	acked := run.acked()
	t.Logf("%5.1fs writes stopped, links healed: %d acknowledged writes, failures %v", time.Since(started).Seconds(), acked, run.failures)
	for k, c := range run.failures {
		if k != "network error" {
			t.Errorf("unexpected answer to a write (%d times): %s", c, k)
		}
	}
	if acked < 100 {
		t.Fatalf("only %d writes acknowledged", acked)
	}

	var states []*nodeState
	eventually(t, *convSettle, "the nodes agree", func() (bool, string) {
		states = states[:0]
		for _, n := range pc.nodes {
			s, err := snapshot(n, convDB)
			if err != nil {
				return false, n.name + ": " + err.Error()
			}
			states = append(states, s)
		}
		return agree(states)
	})
	t.Logf("%5.1fs the nodes agree: %d documents, %d conflicted ids, %d tombstones", time.Since(started).Seconds(), len(states[0].docs), len(states[0].conflicts), states[0].tombstones)
	for _, name := range pc.names {
		s := pc.links[name].Stats()
		t.Logf("link %s: %+v", name, s)
		if s.Accepted == 0 || s.Forwarded[faultproxy.Upstream] == 0 || s.Forwarded[faultproxy.Downstream] == 0 {
			t.Errorf("link %s carried nothing: replication did not go through its proxy", name)
		}
	}

	var logs []logEntry
	for _, n := range pc.nodes {
		l, err := resolutionLog(n, convDB)
		if err != nil {
			t.Fatalf("resolution log of %s: %v", n.name, err)
		}
		logs = append(logs, l...)
	}
	strategies := map[string]int{}
	for _, e := range logs {
		strategies[e.node+" "+e.Strategy+" "+e.By]++
	}
	t.Logf("%d resolutions logged: %v", len(logs), strategies)
	final := states[0]
	if resolveToLatest {
		if len(final.conflicts) > 0 {
			t.Errorf("resolve-to-latest left %d conflicted ids: %v", len(final.conflicts), keys(final.conflicts))
		}
		if len(logs) == 0 {
			t.Errorf("no resolution logged, though final/conflict was written on three partitioned nodes")
		}
		for _, e := range logs {
			if e.By == "auto" && e.Strategy != "latest" {
				t.Errorf("%s resolved %s automatically with %q, want latest", e.node, e.Id, e.Strategy)
			}
		}
		if d, ok := final.docs["final/conflict"]; !ok || d.token != "final-C" {
			t.Errorf("final/conflict resolved to %+v, want the latest version, final-C", d)
		}
	} else {
		for _, e := range logs {
			if e.By == "auto" {
				t.Errorf("%s resolved %s automatically (%s) with the solver off", e.node, e.Id, e.Strategy)
			}
		}
		vs := final.conflicts["final/conflict"]
		want := run.versionsOf("final/conflict")
		if len(vs) != 3 || !sameVersions(vs, want) {
			t.Errorf("final/conflict: conflict versions %v, want the three writes %v", vs, want)
		}
	}
	checkNodeOrder(t, run, t.Errorf)
	checkPrivate(t, run, final, logs, t.Errorf)
	checkAccounted(t, run, final, logs, t.Errorf)
	t.Logf("%5.1fs done", time.Since(started).Seconds())
}

// ---------------------------------------------------------------------------
// The cluster behind proxies

type proxiedCluster struct {
	*testCluster
	links map[string]*faultproxy.Proxy // "A>B": A's replication to B
	names []string
}

func startProxiedCluster(t *testing.T) *proxiedCluster {
	t.Helper()
	a := newNode(t, "A", "A", "")
	b := newNode(t, "B", "B", a.url)
	c := newNode(t, "C", "C", a.url)
	nodes := []*cnode{a, b, c}
	pc := &proxiedCluster{links: map[string]*faultproxy.Proxy{}}
	for _, from := range nodes {
		var peers []string
		for _, to := range nodes {
			if to == from {
				continue
			}
			p := listenProxy(t, strings.TrimPrefix(to.url, "http://"))
			// Registered before the nodes', so it runs after they are killed.
			t.Cleanup(func() { p.Close() })
			name := from.name + ">" + to.name
			pc.links[name] = p
			pc.names = append(pc.names, name)
			peers = append(peers, to.name+"=http://"+p.Addr())
		}
		from.args = append(from.args, "--replication-peers", strings.Join(peers, ","))
		from.args = append(from.args, strings.Fields(*convNodeArgs)...)
	}
	pc.testCluster = startNodes(t, nodes...)
	return pc
}

// listenProxy starts a fault proxy to target on a port no node of this
// test binary was promised: freeAddr closes the ports it hands out until
// the node binds them, so the kernel could give one to the proxy (seen
// once: a node's raft port taken by a proxy, "address already in use").
func listenProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	for {
		p, err := faultproxy.Listen(target)
		if err != nil {
			t.Fatal(err)
		}
		handedMu.Lock()
		taken := handed[p.Addr()]
		handed[p.Addr()] = true
		handedMu.Unlock()
		if !taken {
			return p
		}
		p.Close()
	}
}

func (pc *proxiedCluster) faultAll(f faultproxy.Fault) {
	for _, p := range pc.links {
		p.SetBoth(f)
	}
}

func (pc *proxiedCluster) healAll() {
	for _, p := range pc.links {
		p.Heal()
	}
}

func randomFault(rng *rand.Rand) faultproxy.Fault {
	switch rng.IntN(4) {
	case 0:
		return faultproxy.Fault{Mode: faultproxy.Cut}
	case 1:
		return faultproxy.Fault{Mode: faultproxy.Drop}
	case 2:
		return faultproxy.Fault{Mode: faultproxy.Hold}
	}
	return faultproxy.Fault{Mode: faultproxy.Delay, Latency: time.Duration(1+rng.IntN(400)) * time.Millisecond}
}

// chaos breaks and heals random links until stop.
func (pc *proxiedCluster) chaos(t *testing.T, stop <-chan struct{}, rng *rand.Rand, started time.Time) {
	logf := func(format string, args ...any) {
		t.Logf("%5.1fs chaos: %s", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
	}
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(150+rng.IntN(550)) * time.Millisecond):
		}
		link := pc.names[rng.IntN(len(pc.names))]
		node := pc.nodes[rng.IntN(len(pc.nodes))].name
		switch r := rng.IntN(100); {
		case r < 40: // one link, one or both directions
			f := randomFault(rng)
			switch rng.IntN(3) {
			case 0:
				pc.links[link].Set(faultproxy.Upstream, f)
				logf("%s upstream %v", link, f)
			case 1:
				pc.links[link].Set(faultproxy.Downstream, f)
				logf("%s downstream %v", link, f)
			default:
				pc.links[link].SetBoth(f)
				logf("%s both ways %v", link, f)
			}
		case r < 55: // a node cut off from the others, both ways
			f := randomFault(rng)
			for _, name := range pc.names {
				if strings.Contains(name, node) {
					pc.links[name].SetBoth(f)
				}
			}
			logf("node %s isolated: %v", node, f)
		case r < 65: // a node that receives but cannot send
			f := randomFault(rng)
			for _, name := range pc.names {
				if strings.HasPrefix(name, node+">") {
					pc.links[name].SetBoth(f)
				}
			}
			logf("node %s cannot send: %v", node, f)
		case r < 85:
			pc.links[link].Heal()
			logf("%s healed", link)
		default:
			pc.healAll()
			logf("all healed")
		}
	}
}

// setSolver turns automatic resolution on (resolve to the latest version,
// the default) or off, and waits until every node has the setting.
func setSolver(t *testing.T, tc *testCluster, resolveToLatest bool) {
	t.Helper()
	body := fmt.Sprintf(`{"ResolveToLatest":%v}`, resolveToLatest)
	st, b, err := callWith(writeClient, "POST", tc.nodes[0].url+"/admin/replication/conflicts/solver?name="+convDB, body)
	if err != nil || st/100 != 2 {
		t.Fatalf("POST /admin/replication/conflicts/solver %s: %d %v %s", body, st, err, b)
	}
	for _, n := range tc.nodes {
		eventually(t, 10*time.Second, "the solver setting on "+n.name, func() (bool, string) {
			var cfg struct{ ResolveToLatest bool }
			err := getJSON(n.url+"/databases/"+convDB+"/replication/conflicts/solver", &cfg)
			return err == nil && cfg.ResolveToLatest == resolveToLatest, fmt.Sprintf("%+v %v", cfg, err)
		})
	}
}

// ---------------------------------------------------------------------------
// Writers

// write is one write a test writer sent: a put (with a unique token in its
// body) or a delete of one id on one node.
type write struct {
	node, id string
	del      bool
	token    string // puts: the body's Token; deletes: a name for messages
	cv       string // the change vector the node acknowledged
	acked    bool
	noop     bool // an acknowledged delete that found nothing to delete
	maybe    bool // no answer: it may or may not have been committed
	sent     time.Time
	ackedAt  time.Time
}

func (w *write) String() string {
	kind := "put"
	if w.del {
		kind = "delete"
	}
	return fmt.Sprintf("%s %s %s on %s [%s]", kind, w.id, w.token, w.node, w.cv)
}

type convRun struct {
	mu       sync.Mutex
	writes   []*write
	failures map[string]int
}

func (r *convRun) acked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, w := range r.writes {
		if w.acked {
			n++
		}
	}
	return n
}

func (r *convRun) versionsOf(id string) []version {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []version
	for _, w := range r.writes {
		if w.id == id && w.acked && !w.noop {
			out = append(out, version{cv: w.cv, tomb: w.del, token: w.token})
		}
	}
	return out
}

func (r *convRun) writer(stop <-chan struct{}, n *cnode, w int, rng *rand.Rand) {
	for seq := 0; ; {
		select {
		case <-stop:
			return
		default:
		}
		k := 1
		if rng.IntN(6) == 0 {
			k = 2 + rng.IntN(2) // a batch of a few commands
		}
		var ops []*write
		for range k {
			seq++
			op := &write{node: n.name, token: fmt.Sprintf("%s-w%d-%d", n.name, w, seq)}
			if rng.IntN(5) < 3 {
				op.id = fmt.Sprintf("shared/%d", rng.IntN(sharedIDs))
			} else {
				op.id = fmt.Sprintf("private/%s/%d", n.name, rng.IntN(privateIDs))
			}
			op.del = rng.IntN(4) == 0
			ops = append(ops, op)
		}
		r.do(n, ops)
		time.Sleep(time.Duration(rng.IntN(6)) * time.Millisecond)
	}
}

func docBody(w *write) string {
	return fmt.Sprintf(`{"Token":%q,"Node":%q,"@metadata":{"@collection":"Items"}}`, w.token, w.node)
}

// do sends ops to n, as one PUT /docs when it is a single put, otherwise as
// one bulk_docs batch, and records the outcome.
func (r *convRun) do(n *cnode, ops []*write) {
	now := time.Now()
	for _, w := range ops {
		w.sent = now
	}
	var st int
	var b []byte
	var err error
	if len(ops) == 1 && !ops[0].del {
		st, b, err = callWith(writeClient, "PUT", n.url+"/databases/"+convDB+"/docs?id="+url.QueryEscape(ops[0].id), docBody(ops[0]))
	} else {
		var cmds []string
		for _, w := range ops {
			if w.del {
				cmds = append(cmds, fmt.Sprintf(`{"Id":%q,"Type":"DELETE","ChangeVector":null}`, w.id))
			} else {
				cmds = append(cmds, fmt.Sprintf(`{"Id":%q,"Type":"PUT","ChangeVector":null,"Document":%s}`, w.id, docBody(w)))
			}
		}
		st, b, err = callWith(writeClient, "POST", n.url+"/databases/"+convDB+"/bulk_docs", `{"Commands":[`+strings.Join(cmds, ",")+`]}`)
	}
	at := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, ops...)
	fail := func(key string) {
		r.failures[key]++
	}
	switch {
	case err != nil:
		for _, w := range ops {
			w.maybe = true
		}
		fail("network error")
		return
	case st != http.StatusCreated:
		fail(fmt.Sprintf("%d %.200s", st, b))
		return
	}
	if len(ops) == 1 && !ops[0].del {
		var res struct{ Id, ChangeVector string }
		if json.Unmarshal(b, &res) != nil || res.ChangeVector == "" {
			fail(fmt.Sprintf("201 without a change vector: %.200s", b))
			return
		}
		ops[0].cv, ops[0].acked, ops[0].ackedAt = res.ChangeVector, true, at
		return
	}
	var res struct{ Results []map[string]any }
	if json.Unmarshal(b, &res) != nil || len(res.Results) != len(ops) {
		fail(fmt.Sprintf("bad bulk_docs answer: %.200s", b))
		return
	}
	for i, w := range ops {
		m := res.Results[i]
		cv, _ := m["@change-vector"].(string)
		if w.del {
			cv, _ = m["ChangeVector"].(string)
			if deleted, _ := m["Deleted"].(bool); !deleted {
				w.noop, w.acked, w.ackedAt = true, true, at
				continue
			}
		}
		if cv == "" {
			fail(fmt.Sprintf("bulk_docs result without a change vector: %v", m))
			continue
		}
		w.cv, w.acked, w.ackedAt = cv, true, at
	}
}

// ---------------------------------------------------------------------------
// Snapshots: what one node holds

// version is one version of a document: a document or a tombstone with its
// change vector, as found on a node, in a conflict or in a resolution log.
type version struct {
	cv    string
	tomb  bool
	token string // the Token of a document's body
}

func (v version) String() string {
	if v.tomb {
		return "tombstone [" + v.cv + "]"
	}
	return v.token + " [" + v.cv + "]"
}

type docState struct {
	cv, token string
	json      string // the document as listed, re-encoded with sorted keys
}

type nodeState struct {
	node       string
	etag       int64
	cv         string // the database change vector
	tombstones int64
	docs       map[string]docState  // by lower-case id
	conflicts  map[string][]version // by lower-case id, versions sorted by vector
}

// snapshot reads everything a node holds, once its replication is idle; it
// fails when the node wrote anything meanwhile.
func snapshot(n *cnode, db string) (*nodeState, error) {
	base := n.url + "/databases/" + db
	var st1, st2 struct {
		LastDocEtag          int64
		DatabaseChangeVector string
		CountOfTombstones    int64
	}
	if err := getJSON(base+"/stats", &st1); err != nil {
		return nil, err
	}
	var rs struct {
		Destinations []struct {
			Destination string
			Connected   bool
			ItemsBehind int64
		}
	}
	if err := getJSON(base+"/replication/stats", &rs); err != nil {
		return nil, err
	}
	if len(rs.Destinations) != 2 {
		return nil, fmt.Errorf("replicating to %d destinations, want 2", len(rs.Destinations))
	}
	for _, d := range rs.Destinations {
		if !d.Connected || d.ItemsBehind != 0 {
			return nil, fmt.Errorf("replication to %s: connected %v, %d items behind", d.Destination, d.Connected, d.ItemsBehind)
		}
	}
	s := &nodeState{node: n.name, etag: st1.LastDocEtag, cv: st1.DatabaseChangeVector, tombstones: st1.CountOfTombstones,
		docs: map[string]docState{}, conflicts: map[string][]version{}}
	const page = 1024
	for start := 0; ; start += page {
		var res struct{ Results []json.RawMessage }
		if err := getJSON(fmt.Sprintf("%s/docs?startsWith=&start=%d&pageSize=%d", base, start, page), &res); err != nil {
			return nil, err
		}
		for _, raw := range res.Results {
			var d struct {
				Token    string
				Metadata struct {
					ID string `json:"@id"`
					CV string `json:"@change-vector"`
				} `json:"@metadata"`
			}
			var all map[string]any
			if err := json.Unmarshal(raw, &d); err != nil {
				return nil, err
			}
			if err := json.Unmarshal(raw, &all); err != nil {
				return nil, err
			}
			canon, _ := json.Marshal(all) // maps marshal with sorted keys
			s.docs[strings.ToLower(d.Metadata.ID)] = docState{cv: d.Metadata.CV, token: d.Token, json: string(canon)}
		}
		if len(res.Results) < page {
			break
		}
	}
	ids, err := conflictedIDs(base)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		var res struct {
			Id      string
			Results []struct {
				ChangeVector string
				Doc          json.RawMessage
			}
		}
		if err := getJSON(base+"/replication/conflicts?docId="+url.QueryEscape(id), &res); err != nil {
			return nil, err
		}
		var vs []version
		for _, r := range res.Results {
			vs = append(vs, versionOf(r.ChangeVector, r.Doc))
		}
		sortVersions(vs)
		s.conflicts[strings.ToLower(id)] = vs
	}
	if err := getJSON(base+"/stats", &st2); err != nil {
		return nil, err
	}
	if st2.LastDocEtag != st1.LastDocEtag {
		return nil, fmt.Errorf("etag moved from %d to %d while reading", st1.LastDocEtag, st2.LastDocEtag)
	}
	return s, nil
}

func conflictedIDs(base string) ([]string, error) {
	var ids []string
	const page = 1024
	for start := 0; ; start += page {
		var res struct {
			TotalResults int
			Results      []struct{ Id string }
		}
		if err := getJSON(fmt.Sprintf("%s/replication/conflicts?start=%d&pageSize=%d", base, start, page), &res); err != nil {
			return nil, err
		}
		for _, r := range res.Results {
			ids = append(ids, r.Id)
		}
		if len(res.Results) < page {
			return ids, nil
		}
	}
}

// versionOf reads a version whose document is doc (null: a tombstone).
func versionOf(cv string, doc json.RawMessage) version {
	v := version{cv: cv}
	if len(doc) == 0 || string(doc) == "null" {
		v.tomb = true
		return v
	}
	var d struct{ Token string }
	_ = json.Unmarshal(doc, &d)
	v.token = d.Token
	return v
}

func sortVersions(vs []version) {
	sort.Slice(vs, func(i, j int) bool { return vs[i].cv < vs[j].cv })
}

func sameVersions(a, b []version) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	sortVersions(a)
	sortVersions(b)
	return slices.Equal(a, b)
}

// agree compares the nodes' snapshots with the first one's.
func agree(states []*nodeState) (bool, string) {
	var diffs []string
	a := states[0]
	for _, b := range states[1:] {
		pair := a.node + "/" + b.node
		if a.cv != b.cv {
			diffs = append(diffs, fmt.Sprintf("%s: database vectors %q and %q", pair, a.cv, b.cv))
		}
		if a.tombstones != b.tombstones {
			diffs = append(diffs, fmt.Sprintf("%s: %d and %d tombstones", pair, a.tombstones, b.tombstones))
		}
		for _, id := range union(keys(a.docs), keys(b.docs)) {
			da, oka := a.docs[id]
			db, okb := b.docs[id]
			if oka != okb || da.json != db.json {
				d := fmt.Sprintf("%s: document %s: %s / %s", pair, id, docText(da, oka), docText(db, okb))
				if oka && okb && da.token == db.token && da.cv == db.cv {
					d += fmt.Sprintf(" (same version, other JSON: %s / %s)", da.json, db.json)
				}
				diffs = append(diffs, d)
			}
		}
		for _, id := range union(keys(a.conflicts), keys(b.conflicts)) {
			if va, vb := a.conflicts[id], b.conflicts[id]; !slices.Equal(va, vb) {
				diffs = append(diffs, fmt.Sprintf("%s: conflict %s: %v / %v", pair, id, va, vb))
			}
		}
	}
	if len(diffs) == 0 {
		return true, ""
	}
	return false, fmt.Sprintf("%d differences, first: %s", len(diffs), strings.Join(diffs[:min(5, len(diffs))], "; "))
}

func docText(d docState, ok bool) string {
	if !ok {
		return "absent"
	}
	return d.token + " [" + d.cv + "]"
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func union(a, b []string) []string {
	out := slices.Concat(a, b)
	sort.Strings(out)
	return slices.Compact(out)
}

// ---------------------------------------------------------------------------
// Resolution logs

type logEntry struct {
	Seq                    int64
	Id, Strategy, By, Node string
	Versions               []logVersion
	Result                 *logVersion
	node                   string // the node whose log it is
}

type logVersion struct {
	ChangeVector string
	Tombstone    bool
	Doc          json.RawMessage
}

func (v logVersion) version() version {
	if v.Tombstone {
		return version{cv: v.ChangeVector, tomb: true}
	}
	return versionOf(v.ChangeVector, v.Doc)
}

// resolutionLog reads a node's whole resolution log, newest first, a page
// at a time (the log pages by sequence number: before=).
func resolutionLog(n *cnode, db string) ([]logEntry, error) {
	var out []logEntry
	const page = 1000
	before := int64(0)
	for {
		u := fmt.Sprintf("%s/databases/%s/conflicts/log?pageSize=%d", n.url, db, page)
		if before > 0 {
			u += fmt.Sprintf("&before=%d", before)
		}
		var res struct {
			TotalResults int
			Results      []logEntry
		}
		if err := getJSON(u, &res); err != nil {
			return nil, err
		}
		for _, e := range res.Results {
			e.node = n.name
			out = append(out, e)
			if before == 0 || e.Seq < before {
				before = e.Seq
			}
		}
		if len(res.Results) < page {
			if len(out) != res.TotalResults {
				return nil, fmt.Errorf("read %d log entries, TotalResults %d", len(out), res.TotalResults)
			}
			return out, nil
		}
	}
}

// ---------------------------------------------------------------------------
// Change vectors, read here independently of the server's own code

type vec map[string]int64 // database id → etag

func parseVec(t *testing.T, s string) vec {
	t.Helper()
	v := vec{}
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		_, rest, ok1 := strings.Cut(e, ":")
		num, dbid, ok2 := strings.Cut(rest, "-")
		n, err := strconv.ParseInt(num, 10, 64)
		if !ok1 || !ok2 || err != nil || dbid == "" {
			t.Fatalf("bad change vector %q", s)
		}
		v[dbid] = max(v[dbid], n)
	}
	return v
}

// leq: b has seen everything a has.
func (a vec) leq(b vec) bool {
	for id, n := range a {
		if b[id] < n {
			return false
		}
	}
	return true
}

func (a vec) equal(b vec) bool { return a.leq(b) && b.leq(a) }

func mergeVecs(vs ...vec) vec {
	out := vec{}
	for _, v := range vs {
		for id, n := range v {
			out[id] = max(out[id], n)
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Checks

// checkNodeOrder: a node's writes of one id are causally ordered. A write
// of an id sent after another write of that id was acknowledged by the same
// node has a change vector that dominates it: a node never forgets what it
// held of an id. (Across ids there is no such order any more: a local
// write's vector is built from what the node holds of the id, not from the
// database vector; see "Change vectors" in backend/storage/DESIGN.md.)
func checkNodeOrder(t *testing.T, r *convRun, errorf func(string, ...any)) {
	t.Helper()
	byNode := map[string][]*write{}
	for _, w := range r.writes {
		if w.acked && !w.noop {
			k := w.node + " " + strings.ToLower(w.id)
			byNode[k] = append(byNode[k], w)
		}
	}
	bad := 0
	for node, ws := range byNode {
		byAck := slices.Clone(ws)
		sort.Slice(byAck, func(i, j int) bool { return byAck[i].ackedAt.Before(byAck[j].ackedAt) })
		prefix := make([]vec, len(byAck)+1) // prefix[i]: merge of the first i acknowledged
		prefix[0] = vec{}
		for i, w := range byAck {
			prefix[i+1] = mergeVecs(prefix[i], parseVec(t, w.cv))
		}
		for _, w := range ws {
			i := sort.Search(len(byAck), func(i int) bool { return !byAck[i].ackedAt.Before(w.sent) })
			if !prefix[i].leq(parseVec(t, w.cv)) {
				bad++
				if bad <= 5 {
					errorf("%s: %v does not dominate the %d writes of its id the node acknowledged before it was sent", node, w, i)
				}
			}
		}
	}
}

// checkPrivate: an id written on one node only never conflicts, and ends
// as that node's last write of it everywhere.
func checkPrivate(t *testing.T, r *convRun, final *nodeState, logs []logEntry, errorf func(string, ...any)) {
	t.Helper()
	last := map[string]*write{}
	uncertain := map[string]bool{}
	for _, w := range r.writes {
		if !strings.HasPrefix(w.id, "private/") {
			continue
		}
		if w.maybe {
			uncertain[w.id] = true
		}
		if !w.acked || w.noop {
			continue
		}
		if p := last[w.id]; p == nil || parseVec(t, p.cv).leq(parseVec(t, w.cv)) {
			last[w.id] = w
		} else if !parseVec(t, w.cv).leq(parseVec(t, p.cv)) {
			errorf("two writes of %s on one node are concurrent: %v and %v", w.id, p, w)
		}
	}
	for _, id := range keys(final.conflicts) {
		if strings.HasPrefix(id, "private/") {
			errorf("private id %s is in conflict: %v", id, final.conflicts[id])
		}
	}
	for _, e := range logs {
		if strings.HasPrefix(strings.ToLower(e.Id), "private/") {
			errorf("private id %s was resolved by %s: %+v", e.Id, e.node, e)
		}
	}
	for _, id := range keys(last) {
		if uncertain[id] {
			continue // a write without an answer may be the last one
		}
		w := last[id]
		d, ok := final.docs[strings.ToLower(id)]
		switch {
		case w.del && ok:
			errorf("%s was last deleted (%v), but it exists: %s", id, w, docText(d, ok))
		case !w.del && (!ok || d.token != w.token || d.cv != w.cv):
			errorf("%s: last write %v, but the nodes hold %s", id, w, docText(d, ok))
		}
	}
}

// checkAccounted: no acknowledged write is lost.
//
// A write is a version of its id: (change vector, body token) for a put,
// (change vector, tombstone) for a delete. At the end, the versions present
// for an id are: its document on the nodes, its stored conflict versions,
// every version a resolution on some node replaced or produced (the
// resolution logs), and, when the id ends deleted everywhere, its tombstone
// (the API does not show tombstones; the final tombstone has seen every
// version of the id that is not in conflict with it, so its vector is taken
// to be at least each maximal delete of the id).
//
// An acknowledged write w is accounted for when some present version s of
// its id has seen it: vector(w) <= vector(s), and when the vectors are
// equal s is w itself (same token, or both tombstones). Equality is w still
// being there, as the document, as a conflict version or in a log. Strict
// domination is w having been superseded: s was written, or produced by a
// resolution, on a node whose vector already held w's, so that node had w
// (or a later version of the id) when it overwrote it. That covers a
// sequential overwrite on w's own node (its next write of the id dominates
// w), an overwrite on another node after w replicated there, and a local
// write that resolved a conflict holding w. Domination is transitive, so a
// chain of overwrites ends at a present version. What it does not accept is
// a version that vanished without anything having seen it: a concurrent
// write that replaced it instead of conflicting, a conflict version dropped
// without a logged resolution, a delete lost in transit.
//
// Domination stands for "that node had w" because a local write's vector
// is built from what its node held of the id (backend/storage/DESIGN.md,
// "Change vectors"); with the database vector as the base, a node's vector
// could claim a write it never received and get past this check.
//
// The present versions must also have an origin: each document and
// conflict version is an acknowledged (or unanswered) write with the same
// vector and token, a logged resolution result, or, for a tombstone, the
// merge of concurrent deletes. Otherwise a version made up by a resolution
// that left no log entry could account for writes it dropped.
func checkAccounted(t *testing.T, r *convRun, final *nodeState, logs []logEntry, errorf func(string, ...any)) {
	t.Helper()
	vecs := map[string]vec{}
	pv := func(s string) vec {
		v, ok := vecs[s]
		if !ok {
			v = parseVec(t, s)
			vecs[s] = v
		}
		return v
	}
	content := func(tomb bool, token string) string {
		if tomb {
			return "tombstone"
		}
		return "put " + token
	}
	// The versions known to have been made, by id and content: acknowledged
	// writes and logged resolution results.
	type made struct {
		cv   vec
		what string
	}
	known := map[string]map[string][]made{}
	addKnown := func(id, c string, m made) {
		if known[id] == nil {
			known[id] = map[string][]made{}
		}
		known[id][c] = append(known[id][c], m)
	}
	byID := map[string][]*write{}
	maybeTok := map[string]bool{}
	for _, w := range r.writes {
		if w.maybe {
			maybeTok[w.token] = true
		}
		if w.acked && !w.noop {
			id := strings.ToLower(w.id)
			byID[id] = append(byID[id], w)
			addKnown(id, content(w.del, w.token), made{pv(w.cv), w.String()})
		}
	}
	results := map[string][]version{}  // by id: logged resolution results
	replaced := map[string][]version{} // by id: logged replaced versions
	for _, e := range logs {
		id := strings.ToLower(e.Id)
		for _, v := range e.Versions {
			replaced[id] = append(replaced[id], v.version())
		}
		if e.Result != nil {
			v := e.Result.version()
			results[id] = append(results[id], v)
			addKnown(id, content(v.tomb, v.token), made{pv(v.cv), "resolved by " + e.node + " to " + v.String()})
		}
	}

	// origin says where a present version comes from, or "".
	origin := func(id string, v version) string {
		vv := pv(v.cv)
		same := known[id][content(v.tomb, v.token)]
		for _, m := range same {
			if m.cv.equal(vv) {
				return m.what
			}
		}
		if !v.tomb && maybeTok[v.token] {
			return "unanswered write"
		}
		// Concurrent versions with the same content (two deletes, or one
		// document arriving as the result of two resolutions) merge into
		// one version with the merged vector.
		var under []vec
		for _, m := range same {
			if m.cv.leq(vv) {
				under = append(under, m.cv)
			}
		}
		if len(under) > 1 && mergeVecs(under...).equal(vv) {
			return "merge"
		}
		return ""
	}
	sources := func(id string, v version) string {
		var out []string
		for _, m := range known[id][content(v.tomb, v.token)] {
			out = append(out, m.what)
		}
		return strings.Join(out, "; ")
	}

	ids := map[string]bool{}
	for id := range byID {
		ids[id] = true
	}
	for id := range final.docs {
		ids[id] = true
	}
	for id := range final.conflicts {
		ids[id] = true
	}
	type presentVersion struct {
		v   version
		vec vec
	}
	lost, unknown, checked := 0, 0, 0
	for _, id := range keys(ids) {
		if strings.HasPrefix(id, "ready/") {
			continue // written by the test harness before the writers
		}
		var present []presentVersion
		seen := map[string]bool{}
		add := func(v version, what string, mustHaveOrigin bool) {
			k := content(v.tomb, v.token) + " " + v.cv
			if seen[k] {
				return
			}
			seen[k] = true
			if mustHaveOrigin && origin(id, v) == "" {
				unknown++
				if unknown <= 10 {
					errorf("%s: %s %v matches no write and no logged resolution (versions with its content: %s)", id, what, v, sources(id, v))
				}
			}
			present = append(present, presentVersion{v, pv(v.cv)})
		}
		// The likeliest to have seen most writes first: the loop below
		// stops at the first present version that has seen a write.
		d, live := final.docs[id]
		if live {
			add(version{cv: d.cv, token: d.token}, "document", true)
		}
		for _, v := range final.conflicts[id] {
			add(v, "conflict version", true)
		}
		for _, v := range results[id] {
			add(v, "resolution result", false)
		}
		for _, v := range replaced[id] {
			add(v, "version replaced by a resolution", true)
		}
		if !live && len(final.conflicts[id]) == 0 {
			// Deleted everywhere: the maximal deletes stand for the
			// tombstone.
			for _, w := range byID[id] {
				if !w.del {
					continue
				}
				wv, maximal := pv(w.cv), true
				for _, o := range byID[id] {
					if ov := pv(o.cv); o != w && wv.leq(ov) && !ov.leq(wv) {
						maximal = false
						break
					}
				}
				if maximal {
					add(version{cv: w.cv, tomb: true}, "final delete", false)
				}
			}
		}
		for _, w := range byID[id] {
			checked++
			wv := pv(w.cv)
			ok := false
			for _, p := range present {
				if !wv.leq(p.vec) {
					continue
				}
				if p.vec.leq(wv) && (p.v.tomb != w.del || (!w.del && p.v.token != w.token)) {
					errorf("%s: %v and the present version %v have the same vector", id, w, p.v)
					continue
				}
				ok = true
				break
			}
			if !ok {
				lost++
				if lost <= 10 {
					var ps []string
					for _, p := range present {
						ps = append(ps, p.v.String())
					}
					errorf("lost: %v; present versions of %s: %v", w, id, ps)
				}
			}
		}
	}
	t.Logf("%d acknowledged writes checked: %d lost, %d present versions of unknown origin", checked, lost, unknown)
}

// A silent partition: A's replication batches vanish on the way (the
// connections stay open, nobody is told), then the network heals. A's
// writes must still reach B and C: a link that lost a message must not
// wait for its answer forever.
func TestReplicationRecoversFromSilentDrop(t *testing.T) {
	pc := startProxiedCluster(t)
	pc.createDatabase(t, pc.nodes[0], convDB)
	a := pc.byTag["A"]
	for _, n := range pc.nodes { // every link connected and idle
		eventually(t, 20*time.Second, n.name+" replication idle", func() (bool, string) {
			_, err := snapshot(n, convDB)
			return err == nil, fmt.Sprint(err)
		})
	}
	links := []*faultproxy.Proxy{pc.links["A>B"], pc.links["A>C"]}
	for _, p := range links {
		p.Set(faultproxy.Upstream, faultproxy.Fault{Mode: faultproxy.Drop})
	}
	if st, b, err := putDoc(a, convDB, "silent/1", "sent-into-the-void"); err != nil || st != 201 {
		t.Fatalf("put on A: %d %v %s", st, err, b)
	}
	for i, p := range links {
		eventually(t, 10*time.Second, "the batch to "+[]string{"B", "C"}[i]+" is dropped", func() (bool, string) {
			s := p.Stats()
			return s.Dropped[faultproxy.Upstream] > 0, fmt.Sprintf("%+v", s)
		})
	}
	pc.healAll()
	healed := time.Now()
	for _, n := range pc.others(a) {
		eventually(t, 45*time.Second, "silent/1 on "+n.name+" after the heal", func() (bool, string) {
			got := tokens(t, n, convDB, []string{"silent/1"})["silent/1"]
			return got == "sent-into-the-void", got
		})
	}
	t.Logf("delivered %s after the heal", time.Since(healed).Round(100*time.Millisecond))
}

// delivered waits until from's replication through its proxy to "to" is
// connected and has nothing left to send.
func (pc *proxiedCluster) delivered(t *testing.T, from, to string) {
	t.Helper()
	dest := "http://" + pc.links[from+">"+to].Addr()
	eventually(t, 20*time.Second, from+" has sent everything to "+to, func() (bool, string) {
		var rs struct {
			Destinations []struct {
				Destination string
				Connected   bool
				ItemsBehind int64
			}
		}
		if err := getJSON(pc.byTag[from].url+"/databases/"+convDB+"/replication/stats", &rs); err != nil {
			return false, err.Error()
		}
		for _, d := range rs.Destinations {
			if d.Destination == dest {
				return d.Connected && d.ItemsBehind == 0, fmt.Sprintf("%+v", d)
			}
		}
		return false, fmt.Sprintf("no destination %s in %+v", dest, rs)
	})
}

// Two concurrent deletes and a concurrent put of one id, delivered in an
// order that makes A merge the deletes into one tombstone (a new version
// whose vector is the merge of theirs, with no entry of its own) before the
// put makes it a conflict, while C, already in conflict, stores the two
// deletes as they are. With automatic resolution off, every node must end
// with the same conflict versions.
func TestReplicationConvergesMergedTombstoneInConflict(t *testing.T) {
	pc := startProxiedCluster(t)
	pc.createDatabase(t, pc.nodes[0], convDB)
	setSolver(t, pc.testCluster, false)
	a, b, c := pc.byTag["A"], pc.byTag["B"], pc.byTag["C"]
	const id = "items/x"
	if st, body, err := putDoc(a, convDB, id, "original"); err != nil || st != 201 {
		t.Fatalf("put on A: %d %v %s", st, err, body)
	}
	for _, n := range []*cnode{b, c} {
		eventually(t, 20*time.Second, id+" on "+n.name, func() (bool, string) {
			got := tokens(t, n, convDB, []string{id})[id]
			return got == "original", got
		})
	}

	pc.faultAll(faultproxy.Fault{Mode: faultproxy.Cut})
	del := func(n *cnode) {
		t.Helper()
		st, body, err := callWith(writeClient, "POST", n.url+"/databases/"+convDB+"/bulk_docs", `{"Commands":[{"Id":"`+id+`","Type":"DELETE"}]}`)
		if err != nil || st != 201 || !strings.Contains(string(body), `"Deleted":true`) {
			t.Fatalf("delete on %s: %d %v %s", n.name, st, err, body)
		}
	}
	del(a)
	del(b)
	if st, body, err := putDoc(c, convDB, id, "put-on-C"); err != nil || st != 201 {
		t.Fatalf("put on C: %d %v %s", st, err, body)
	}

	step := func(link string) {
		t.Helper()
		pc.links[link].Heal()
		from, to, _ := strings.Cut(link, ">")
		pc.delivered(t, from, to)
	}
	step("A>C") // C: conflict {put, A's delete}
	step("B>C") // C: conflict {put, A's delete, B's delete}
	// A's sender to C learns C's vector (which now holds both deletes) from
	// the acknowledgement of an unrelated write.
	if st, body, err := putDoc(a, convDB, "items/unrelated", "x"); err != nil || st != 201 {
		t.Fatalf("put on A: %d %v %s", st, err, body)
	}
	pc.delivered(t, "A", "C")
	step("B>A") // A: both deletes merge into one tombstone
	step("C>A") // A: conflict {merged delete, put}
	pc.healAll()

	var states []*nodeState
	eventually(t, 30*time.Second, "the nodes agree on "+id, func() (bool, string) {
		states = states[:0]
		for _, n := range pc.nodes {
			s, err := snapshot(n, convDB)
			if err != nil {
				return false, n.name + ": " + err.Error()
			}
			states = append(states, s)
		}
		return agree(states)
	})
	if vs := states[0].conflicts[id]; len(vs) < 2 {
		t.Errorf("%s: conflict versions %v, want the put and the deletes", id, vs)
	}
}

// The convergence checks themselves, on made-up histories: they accept
// overwrites, kept conflicts and logged resolutions, and catch a write
// replaced by a concurrent one, a resolution nobody logged, a put dropped
// under a concurrent delete and a node that forgot its own write.
func TestConvergenceChecksCatchLosses(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var seq time.Duration
	w := func(node, id string, del bool, token, cv string) *write {
		seq += time.Second
		return &write{node: node, id: id, del: del, token: token, cv: cv, acked: true, sent: t0.Add(seq), ackedAt: t0.Add(seq + time.Millisecond)}
	}
	run := &convRun{writes: []*write{
		// a sequential overwrite on A
		w("A", "x", false, "t1", "A:1-a"), w("A", "x", false, "t2", "A:2-a"),
		// an overwrite on B after the first write replicated there
		w("A", "y", false, "t3", "A:3-a"), w("B", "y", false, "t4", "A:3-a, B:1-b"),
		// concurrent, and t5 replaced by t6 without a conflict: lost
		w("A", "z", false, "t5", "A:4-a"), w("B", "z", false, "t6", "B:2-b"),
		// concurrent, kept as a conflict
		w("A", "c", false, "t7", "A:5-a"), w("B", "c", false, "t8", "B:3-b"),
		// concurrent, resolved and logged
		w("A", "r", false, "t9", "A:6-a"), w("B", "r", false, "t10", "B:4-b"),
		// concurrent, resolved without a log entry
		w("A", "u", false, "t11", "A:7-a"), w("B", "u", false, "t12", "B:5-b"),
		// concurrent deletes
		w("A", "d", true, "d1", "A:8-a"), w("B", "d", true, "d2", "B:6-b"),
		// a put dropped under a concurrent delete
		w("A", "e", false, "t15", "A:9-a"), w("B", "e", true, "d3", "B:7-b"),
	}}
	final := &nodeState{
		docs: map[string]docState{
			"x": {cv: "A:2-a", token: "t2"},
			"y": {cv: "A:3-a, B:1-b", token: "t4"},
			"z": {cv: "B:2-b", token: "t6"},
			"r": {cv: "A:6-a, B:4-b", token: "t10"},
			"u": {cv: "A:7-a, B:5-b", token: "t12"},
		},
		conflicts: map[string][]version{"c": {{cv: "A:5-a", token: "t7"}, {cv: "B:3-b", token: "t8"}}},
	}
	doc := func(token string) json.RawMessage { return json.RawMessage(`{"Token":"` + token + `"}`) }
	logs := []logEntry{{Id: "r", Strategy: "latest", By: "auto", node: "B",
		Versions: []logVersion{{ChangeVector: "A:6-a", Doc: doc("t9")}, {ChangeVector: "B:4-b", Doc: doc("t10")}},
		Result:   &logVersion{ChangeVector: "A:6-a, B:4-b", Doc: doc("t10")}}}

	var problems []string
	errorf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	checkAccounted(t, run, final, logs, errorf)
	want := []string{"lost: put z t5 on A", "u: document t12 [A:7-a, B:5-b] matches no write", "lost: put e t15 on A"}
	if len(problems) != len(want) {
		t.Fatalf("problems found:\n%s\nwant %d: %v", strings.Join(problems, "\n"), len(want), want)
	}
	for _, p := range problems {
		if !slices.ContainsFunc(want, func(w string) bool { return strings.HasPrefix(p, w) }) {
			t.Errorf("unexpected problem: %s", p)
		}
	}

	// A private id ends as its node's last write, and never conflicts.
	problems = nil
	private := &convRun{writes: []*write{
		w("A", "private/A/1", false, "p1", "A:1-a"), w("A", "private/A/1", false, "p2", "A:2-a"),
		w("A", "private/A/2", false, "p3", "A:3-a"), w("A", "private/A/2", true, "p4", "A:4-a"),
		w("A", "private/A/3", false, "p5", "A:5-a"),
	}}
	privFinal := &nodeState{
		docs: map[string]docState{
			"private/a/1": {cv: "A:1-a", token: "p1"}, // the older write
			"private/a/2": {cv: "A:3-a", token: "p3"}, // deleted after
		},
		conflicts: map[string][]version{"private/a/3": {{cv: "A:5-a", token: "p5"}, {cv: "B:1-b", token: "x"}}},
	}
	checkPrivate(t, private, privFinal, nil, errorf)
	if len(problems) != 4 {
		t.Errorf("private id problems: %d, want 4 (an old version, a resurrected delete, a conflict, a missing last write):\n%s", len(problems), strings.Join(problems, "\n"))
	}

	// A node's later write of an id must dominate what it acknowledged
	// before of that id; another id's write need not.
	problems = nil
	order := &convRun{writes: []*write{w("A", "p", false, "o1", "A:1-a, B:4-b"), w("A", "p", false, "o2", "A:2-a, B:3-b"), w("A", "q", false, "o3", "A:3-a")}}
	checkNodeOrder(t, order, errorf)
	if len(problems) != 1 || !strings.Contains(problems[0], "o2") {
		t.Errorf("node order problems: %v", problems)
	}
}
