package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/replication"
)

// senderStats is a node's figures for one destination of database rep.
func senderStats(t *testing.T, n *replNode, dest string) replication.Stats {
	t.Helper()
	for _, st := range n.srv.destinationStats("rep") {
		if st.Tag == dest {
			return st
		}
	}
	t.Fatalf("%s has no sender to %s", n.tag, dest)
	return replication.Stats{}
}

// waitStats polls a node's figures for a destination until ok holds.
func waitStats(t *testing.T, n *replNode, dest, what string, ok func(replication.Stats) bool) replication.Stats {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var st replication.Stats
		found := false
		for _, s := range n.srv.destinationStats("rep") {
			if s.Tag == dest {
				st, found = s, true
			}
		}
		if found && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s→%s: %s never held; last %+v", n.tag, dest, what, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func writeDocs(t *testing.T, n *replNode, prefix string, count int) {
	t.Helper()
	var cmds []string
	for j := 0; j < count; j++ {
		cmds = append(cmds, fmt.Sprintf(`{"Id":"%s/%d","Type":"PUT","Document":{"n":%d,"@metadata":{"@collection":"Items"}}}`, prefix, j, j))
	}
	post(t, n.url+"/databases/rep/bulk_docs", `{"Commands":[`+strings.Join(cmds, ",")+`]}`)
}

func metricsText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The lag figures of every sender: exactly 0 items behind once the copies
// agree (items a destination already had included), the count and age of
// what a stopped destination lacks while it is down, with its state and
// last error, and 0 again once it is back. /metrics and the stats endpoint
// report the same figures, and a removed database's destinations leave
// /metrics.
func TestReplicationLagFigures(t *testing.T) {
	nodes := startReplCluster(t)
	a, b, c := nodes[0], nodes[1], nodes[2]
	// Writes on B reach A and C; A's and C's senders then pass over items
	// their destinations already have, which must still count as sent.
	writeDocs(t, b, "b", 40)
	writeDocs(t, a, "a", 10)
	waitSame(t, nodes, "after writes on A and B")
	for _, n := range nodes {
		db, _ := n.srv.Catalog().Get("rep")
		for _, other := range nodes {
			if other == n {
				continue
			}
			st := waitStats(t, n, other.tag, "in sync", func(s replication.Stats) bool {
				return s.ItemsBehind == 0 && s.LastAckEtag == db.LastEtag()
			})
			if st.State != replication.StateConnected || !st.Connected || st.SecondsBehind != 0 || !st.OldestUnacked.IsZero() {
				t.Fatalf("%s→%s in sync: %+v", n.tag, other.tag, st)
			}
		}
	}
	if st := senderStats(t, b, "A"); st.Docs < 40 || st.Batches < 1 || st.LastSentEtag < st.LastAckEtag {
		t.Fatalf("B→A sent figures: %+v", st)
	}

	// C goes down; A writes 25 documents that C lacks.
	c.stop()
	waitStats(t, a, "C", "notices C is gone", func(s replication.Stats) bool { return !s.Connected && s.LastError != "" })
	before := time.Now()
	writeDocs(t, a, "late", 25)
	st := waitStats(t, a, "C", "25 items behind, a second old", func(s replication.Stats) bool {
		return s.ItemsBehind == 25 && s.SecondsBehind >= 1
	})
	after := time.Now()
	if st.State == replication.StateConnected || st.Connected || st.LastErrorAt.IsZero() || st.Errors < 1 {
		t.Fatalf("A→C while C is down: %+v", st)
	}
	if st.OldestUnacked.Before(before) || st.OldestUnacked.After(after) {
		t.Fatalf("oldest unacknowledged change committed at %v, not between %v and %v", st.OldestUnacked, before, after)
	}
	if st.State == replication.StateWaiting && !st.NextRetry.After(st.LastErrorAt) {
		t.Fatalf("waiting to retry without a next attempt after the error: %+v", st)
	}
	// B got the 25 from A; it is as far behind towards C.
	waitStats(t, b, "C", "B is 25 behind C too", func(s replication.Stats) bool { return s.ItemsBehind == 25 && !s.Connected })
	waitStats(t, a, "B", "A→B in sync while C is down", func(s replication.Stats) bool { return s.ItemsBehind == 0 && s.Connected })

	// The same figures through /metrics and the stats endpoint.
	m := metricsText(t, a.url)
	for _, want := range []string{
		`rookery_replication_items_behind{database="rep",destination="C"} 25`,
		`rookery_replication_state{database="rep",destination="C",state="connected"} 0`,
		`rookery_replication_state{database="rep",destination="B",state="connected"} 1`,
		`rookery_replication_last_acknowledged_etag{database="rep",destination="B"}`,
		`rookery_replication_docs_total{database="rep",destination="B"}`,
	} {
		if !strings.Contains(m, want) {
			t.Fatalf("/metrics lacks %s:\n%s", want, grepLines(m, "rookery_replication_"))
		}
	}
	if v := metricValue(t, m, `rookery_replication_seconds_behind{database="rep",destination="C"}`); v < 1 {
		t.Fatalf("seconds behind in /metrics: %v", v)
	}
	if v := metricValue(t, m, `rookery_replication_errors_total{database="rep",destination="C"}`); v < 1 {
		t.Fatalf("errors in /metrics: %v", v)
	}
	resp, err := http.Get(a.url + "/databases/rep/replication/stats")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Enabled      bool
		Destinations []replication.Stats
	}
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if err != nil || !body.Enabled || len(body.Destinations) != 2 || body.Destinations[1].Tag != "C" || body.Destinations[1].Destination != c.url || body.Destinations[1].ItemsBehind != 25 || body.Destinations[1].LastError == "" {
		t.Fatalf("stats endpoint: %v %+v", err, body)
	}

	// C comes back: exactly 0 behind from A and from B.
	c.start(t)
	waitSame(t, nodes, "after C came back")
	dbA, _ := a.srv.Catalog().Get("rep")
	st = waitStats(t, a, "C", "A→C back in sync", func(s replication.Stats) bool {
		return s.ItemsBehind == 0 && s.Connected && s.LastAckEtag == dbA.LastEtag()
	})
	if st.SecondsBehind != 0 || st.State != replication.StateConnected || !st.NextRetry.IsZero() {
		t.Fatalf("A→C after recovery: %+v", st)
	}
	waitStats(t, b, "C", "B→C back in sync", func(s replication.Stats) bool { return s.ItemsBehind == 0 && s.Connected })

	// Deleting the database removes its senders and their metrics.
	req, _ := http.NewRequest("DELETE", a.url+"/admin/databases", strings.NewReader(`{"DatabaseNames":["rep"],"HardDelete":true}`))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Contains(grepLines(metricsText(t, a.url), "rookery_replication_"), `database="rep"`) {
		if time.Now().After(deadline) {
			t.Fatalf("metrics of a deleted database stay:\n%s", grepLines(metricsText(t, a.url), "rookery_replication_"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func metricValue(t *testing.T, text, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no %s in /metrics", series)
	}
	var v float64
	fmt.Sscan(m[1], &v)
	return v
}

// A dead destination that accepts connections but never answers is given
// up on (the handshake times out) and reported, not waited on forever.
func TestReplicationSilentDestination(t *testing.T) {
	nodes := startReplCluster(t)
	a := nodes[0]
	// Point a sender straight at a listener that accepts and says nothing.
	l := silentListener(t)
	db, _ := a.srv.Catalog().Get("rep")
	snd := replication.NewSender(db, "http://"+l, a.srv.dialReplication, replication.Options{Name: "Z"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go snd.Run(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := snd.Stats()
		if st.State == replication.StateWaiting && st.LastError != "" && st.Errors >= 1 {
			if st.Connected || st.ItemsBehind != 0 {
				// An empty database: nothing is behind even unconnected.
				t.Fatalf("silent destination: %+v", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sender never gave up on a silent destination: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// silentListener accepts connections and never answers on them.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}
