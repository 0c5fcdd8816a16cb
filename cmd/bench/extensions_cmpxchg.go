package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// extensionsCmpXchg measures cluster-wide transaction latency (a
// compare-exchange put and a document in one Raft entry, answered once the
// receiving node has written the document) through the leader and through
// a follower (which forwards to the leader), against a plain bulk_docs of
// the same document in the same run, on 3 nodes.
func extensionsCmpXchg(out io.Writer, c config) error {
	n := c.cmpxchgTxs
	if n <= 0 {
		return nil
	}
	fmt.Fprintf(out, "\n## Compare exchange: cluster-wide transactions on 3 nodes, %d through the leader and as many through a follower, each against as many plain bulk_docs on the same node\n", n)
	dir := filepath.Join(c.dir, "cmpxchg-bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	a, err := startBenchNode(dir, "A", "")
	if err != nil {
		return err
	}
	defer a.stop()
	b, err := startBenchNode(dir, "B", a.url)
	if err != nil {
		return err
	}
	defer b.stop()
	cn, err := startBenchNode(dir, "C", a.url)
	if err != nil {
		return err
	}
	defer cn.stop()
	if err := createDB(a.url, "cx3"); err != nil {
		return err
	}
	leader, follower := a, b
	if !a.srv.Cluster().IsLeader() {
		leader, follower = b, a
		if !b.srv.Cluster().IsLeader() {
			leader, follower = cn, a
		}
	}
	// Wait until the database is served everywhere.
	for _, node := range []*benchNode{leader, follower} {
		deadline := time.Now().Add(20 * time.Second)
		for expect201("PUT", node.url+"/databases/cx3/docs?id=warm/1", []byte(`{}`)) != nil {
			if time.Now().After(deadline) {
				return fmt.Errorf("database cx3 not ready on %s", node.url)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	timeIt := func(url string, body func(i int) string) ([]time.Duration, error) {
		lat := make([]time.Duration, 0, n)
		for i := 0; i < n; i++ {
			start := time.Now()
			if err := expect201("POST", url, []byte(body(i))); err != nil {
				return nil, err
			}
			lat = append(lat, time.Since(start))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return lat, nil
	}
	plain := func(i int) string {
		return fmt.Sprintf(`{"Commands":[{"Id":"plain/%d","Type":"PUT","Document":{"N":%d,"@metadata":{"@collection":"Plain"}}}]}`, i, i)
	}
	for _, side := range []struct {
		name string
		n    *benchNode
	}{{"leader", leader}, {"follower", follower}} {
		tx := func(i int) string {
			return fmt.Sprintf(`{"Commands":[{"Type":"CompareExchangePUT","Id":"bench/%s/%d","Index":0,"Document":{"Object":%d}},`+
				`{"Id":"tx/%s/%d","Type":"PUT","Document":{"N":%d,"@metadata":{"@collection":"Tx"}}}],"TransactionMode":"ClusterWide"}`, side.name, i, i, side.name, i, i)
		}
		txLat, err := timeIt(side.n.url+"/databases/cx3/bulk_docs", tx)
		if err != nil {
			return err
		}
		plainLat, err := timeIt(side.n.url+"/databases/cx3/bulk_docs", plain)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "3 nodes, cluster-wide tx (1 cmpxchg + 1 doc) via the %-8s p50 %s p99 %s; plain bulk_docs same node p50 %s p99 %s (%d each)\n",
			side.name+":", ms(percentile(txLat, 0.5)), ms(percentile(txLat, 0.99)), ms(percentile(plainLat, 0.5)), ms(percentile(plainLat, 0.99)), n)
	}
	return nil
}
