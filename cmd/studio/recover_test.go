package main

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestSecurityF4QuorumRecovery: a cluster whose quorum is gone for good
// (here B of two voters is dead and never comes back) refuses every
// cluster write; `studio cluster recover` on the stopped survivor rewrites
// its Raft configuration to itself, and started again it leads, commits,
// and removes B. It is the documented way back from a lost quorum.
func TestSecurityF4QuorumRecovery(t *testing.T) {
	a := newNode(t, "A", "A", "")
	b := newNode(t, "B", "B", a.url)
	tc := startNodes(t, a, b)
	tc.createDatabase(t, a, "before")

	b.kill9() // gone for good
	eventually(t, 15*time.Second, "A notices it has no quorum", func() (bool, string) {
		st, body, err := callWith(writeClient, "PUT", a.url+"/admin/databases?name=during", `{"DatabaseName":"during"}`)
		return err == nil && st == http.StatusServiceUnavailable, string(body)
	})

	// Recovery refuses to run on a running node, then works on a stopped one.
	out, err := exec.Command(binary, "cluster", "recover", "--data-dir", a.dataDir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "stop the node first") {
		t.Fatalf("recover on a running node: %v %s", err, out)
	}
	a.kill9()
	out, err = exec.Command(binary, "cluster", "recover", "--data-dir", a.dataDir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "A="+a.raftAddr) {
		t.Fatalf("recover: %v %s", err, out)
	}
	a.start(t)
	eventually(t, 15*time.Second, "A leads alone", func() (bool, string) {
		st, err := a.status()
		return err == nil && st.State == "leader", ""
	})
	st, body, err := callWith(writeClient, "PUT", a.url+"/admin/databases?name=after", `{"DatabaseName":"after"}`)
	if err != nil || st != http.StatusCreated {
		t.Fatalf("a cluster write after recovery: %d %v %s", st, err, body)
	}
	// B is still in the node list until the operator removes it, which
	// no longer needs the old quorum.
	if st, body, err := callWith(writeClient, "POST", a.url+"/admin/cluster/remove?tag=B", ""); err != nil || st != http.StatusOK {
		t.Fatalf("remove B: %d %v %s", st, err, body)
	}
	top, err := a.topology()
	if err != nil || len(top.Topology.AllNodes) != 1 {
		t.Fatalf("topology after removing B: %+v %v", top, err)
	}
	if st, _, err := call("GET", a.url+"/databases/before/docs?id=ready/A", ""); err != nil || st != http.StatusOK {
		t.Fatalf("data from before the recovery: %d %v", st, err)
	}
}
