package main

// Counters across real processes: three nodes behind fault proxies
// incrementing the same counters at once (they must end with the exact
// sum everywhere, with no conflict), and a node killed with SIGKILL while
// increments are in flight (every acknowledged increment survives).

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const counterDocs = 2

var counterNames = []string{"hits", "Misses", "views"}

// counterLedger keeps, per node and per "doc|counter", the sum of the
// acknowledged increments and of those whose outcome is unknown.
type counterLedger struct {
	mu       sync.Mutex
	acked    map[string]map[string]int64
	unknown  map[string]map[string]int64
	requests int
	failures map[string]int
}

func newCounterLedger() *counterLedger {
	return &counterLedger{acked: map[string]map[string]int64{}, unknown: map[string]map[string]int64{}, failures: map[string]int{}}
}

func (l *counterLedger) add(m map[string]map[string]int64, node, key string, d int64) {
	if m[node] == nil {
		m[node] = map[string]int64{}
	}
	m[node][key] += d
}

// total sums a ledger over the nodes.
func counterTotal(m map[string]map[string]int64, key string) int64 {
	var s int64
	for _, per := range m {
		s += per[key]
	}
	return s
}

type counterInc struct {
	doc, name string
	delta     int64
}

// incrementCounters sends one bulk_docs with a Counters command per
// increment; it reports the HTTP status (0 on a transport error).
func incrementCounters(n *cnode, db string, incs []counterInc) (int, []byte, error) {
	type op struct {
		Type        string
		CounterName string
		Delta       int64
	}
	type cmd struct {
		Type     string
		Id       string
		Counters struct {
			DocumentId string
			Operations []op
		}
	}
	var cmds []cmd
	for _, in := range incs {
		c := cmd{Type: "Counters", Id: in.doc}
		c.Counters.DocumentId = in.doc
		c.Counters.Operations = []op{{Type: "Increment", CounterName: in.name, Delta: in.delta}}
		cmds = append(cmds, c)
	}
	body, _ := json.Marshal(map[string]any{"Commands": cmds})
	return callWith(writeClient, "POST", n.url+"/databases/"+db+"/bulk_docs", string(body))
}

func (l *counterLedger) writer(stop <-chan struct{}, n *cnode, db string, rng *rand.Rand) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		var incs []counterInc
		for range 1 + rng.IntN(5) {
			incs = append(incs, counterInc{
				doc:   fmt.Sprintf("counted/%d", rng.IntN(counterDocs)),
				name:  counterNames[rng.IntN(len(counterNames))],
				delta: int64(rng.IntN(21) - 5),
			})
		}
		st, body, err := incrementCounters(n, db, incs)
		l.mu.Lock()
		l.requests++
		target := l.acked
		if err != nil || st != http.StatusCreated {
			target = l.unknown
			if err != nil {
				l.failures["network error"]++
			} else {
				l.failures[fmt.Sprintf("%d %.200s", st, body)]++
			}
		}
		for _, in := range incs {
			l.add(target, n.name, in.doc+"|"+counterLower(in.name), in.delta)
		}
		l.mu.Unlock()
		time.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond)
	}
}

func counterLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}

type counterDetail struct {
	DocumentId    string
	CounterName   string
	TotalValue    int64
	CounterValues map[string]int64
}

// readCounters returns "doc|counter" -> detail for every counter of the
// test's documents on n.
func readCounters(n *cnode, db string) (map[string]counterDetail, error) {
	out := map[string]counterDetail{}
	for d := range counterDocs {
		doc := fmt.Sprintf("counted/%d", d)
		var res struct{ Counters []*counterDetail }
		if err := getJSON(n.url+"/databases/"+db+"/counters?full=true&docId="+url.QueryEscape(doc), &res); err != nil {
			return nil, err
		}
		for _, c := range res.Counters {
			if c != nil {
				out[doc+"|"+counterLower(c.CounterName)] = *c
			}
		}
	}
	return out, nil
}

func TestCountersConvergeUnderFaults(t *testing.T) {
	seed := *convSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000_000
	}
	t.Logf("seed %d, duration %s", seed, *convDuration)
	started := time.Now()
	pc := startProxiedCluster(t)
	const db = "ctr"
	pc.createDatabase(t, pc.nodes[0], db)
	// The documents are written once, on A, and reach B and C before the
	// increments start (a document written on every node would conflict).
	for d := range counterDocs {
		if st, b, err := putDoc(pc.nodes[0], db, fmt.Sprintf("counted/%d", d), "c"); err != nil || st != http.StatusCreated {
			t.Fatalf("put: %d %v %s", st, err, b)
		}
	}
	for _, n := range pc.nodes {
		eventually(t, 20*time.Second, "documents on "+n.name, func() (bool, string) {
			for d := range counterDocs {
				if st, _, err := call("GET", n.url+"/databases/"+db+"/docs?id="+url.QueryEscape(fmt.Sprintf("counted/%d", d)), ""); err != nil || st != 200 {
					return false, fmt.Sprintf("%d %v", st, err)
				}
			}
			return true, ""
		})
	}

	l := newCounterLedger()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, n := range pc.nodes {
		for w := range 2 {
			wg.Add(1)
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(1+i*2+w)))
			go func() {
				defer wg.Done()
				l.writer(stop, n, db, rng)
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
	pc.healAll()
	t.Logf("%5.1fs writes stopped, links healed: %d requests, failures %v", time.Since(started).Seconds(), l.requests, l.failures)
	if len(l.failures) > 0 {
		t.Errorf("increments not acknowledged: %v", l.failures)
	}
	if l.requests < 50 {
		t.Fatalf("only %d requests", l.requests)
	}

	var keys []string
	for d := range counterDocs {
		for _, name := range counterNames {
			keys = append(keys, fmt.Sprintf("counted/%d|%s", d, counterLower(name)))
		}
	}
	eventually(t, *convSettle, "every node holds the exact sums", func() (bool, string) {
		for _, n := range pc.nodes {
			got, err := readCounters(n, db)
			if err != nil {
				return false, n.name + ": " + err.Error()
			}
			for _, k := range keys {
				want := counterTotal(l.acked, k)
				if counterTotal(l.unknown, k) != 0 {
					return false, "unknown outcomes" // reported above
				}
				c, ok := got[k]
				if !ok && want == 0 {
					continue // never incremented, or summing to 0
				}
				if c.TotalValue != want {
					return false, fmt.Sprintf("%s: %s = %d, want %d", n.name, k, c.TotalValue, want)
				}
			}
		}
		return true, ""
	})
	// Each node's part holds exactly what was acknowledged on that node.
	got, err := readCounters(pc.nodes[1], db)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		parts := map[string]int64{}
		for key, v := range got[k].CounterValues {
			parts[key[:1]] += v // keys are "TAG:etag-dbid"
		}
		for _, n := range pc.nodes {
			if parts[n.name] != l.acked[n.name][k] {
				t.Errorf("%s: part of %s = %d, acknowledged there %d (%v)", k, n.name, parts[n.name], l.acked[n.name][k], got[k].CounterValues)
			}
		}
	}
	for _, n := range pc.nodes {
		ids, err := conflictedIDs(n.url + "/databases/" + db)
		if err != nil || len(ids) != 0 {
			t.Errorf("%s: conflicts %v %v", n.name, ids, err)
		}
	}
	t.Logf("%5.1fs done", time.Since(started).Seconds())
}

func TestCountersSurviveKill9(t *testing.T) {
	a := newNode(t, "A", "A", "")
	tc := startNodes(t, a)
	const db = "ctrkill"
	tc.createDatabase(t, a, db)
	for d := range counterDocs {
		if st, b, err := putDoc(a, db, fmt.Sprintf("counted/%d", d), "c"); err != nil || st != http.StatusCreated {
			t.Fatalf("put: %d %v %s", st, err, b)
		}
	}
	l := newCounterLedger()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent atomic.Int64
	for w := range 4 {
		wg.Add(1)
		rng := rand.New(rand.NewPCG(uint64(w), 7))
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				in := counterInc{doc: fmt.Sprintf("counted/%d", rng.IntN(counterDocs)), name: counterNames[rng.IntN(len(counterNames))], delta: int64(1 + rng.IntN(9))}
				sent.Add(1)
				st, _, err := incrementCounters(a, db, []counterInc{in})
				l.mu.Lock()
				if err == nil && st == http.StatusCreated {
					l.add(l.acked, "A", in.doc+"|"+counterLower(in.name), in.delta)
				} else {
					l.add(l.unknown, "A", in.doc+"|"+counterLower(in.name), in.delta)
				}
				l.mu.Unlock()
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	a.kill9()
	close(stop)
	wg.Wait()
	t.Logf("%d increments sent before the kill", sent.Load())
	a.start(t)
	var got map[string]counterDetail
	eventually(t, 20*time.Second, "counters readable after the restart", func() (bool, string) {
		var err error
		got, err = readCounters(a, db)
		return err == nil, fmt.Sprint(err)
	})
	ackedAny := false
	for d := range counterDocs {
		for _, name := range counterNames {
			k := fmt.Sprintf("counted/%d|%s", d, counterLower(name))
			lo, hi := counterTotal(l.acked, k), counterTotal(l.acked, k)+counterTotal(l.unknown, k)
			if lo > 0 {
				ackedAny = true
			}
			if v := got[k].TotalValue; v < lo || v > hi {
				t.Errorf("%s = %d after kill -9, want within [%d, %d] (acknowledged, + in flight)", k, v, lo, hi)
			}
		}
	}
	if !ackedAny {
		t.Fatal("no increment was acknowledged before the kill")
	}
}
