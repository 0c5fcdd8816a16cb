package testserver

import (
	"context"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/cluster"
)

// Cluster starts a real one-node Raft cluster (node A, loopback, short
// timeouts) that leads before it returns, and records the given databases
// on it. It is shut down when the test ends.
func Cluster(t testing.TB, databases ...string) *cluster.Cluster {
	t.Helper()
	c, err := cluster.Open(cluster.Config{NodeTag: "A", RaftAddr: "127.0.0.1:0", URL: "http://a.test", Dir: t.TempDir(), Bootstrap: true,
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, LeaderLeaseTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range databases {
		if _, err := c.CreateDatabase(ctx, cluster.Database{Name: name, Members: []string{"A"}}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}
