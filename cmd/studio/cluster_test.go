package main

// Multi-process cluster tests: every node is its own process of the built
// binary (see TestMain), on 127.0.0.1 with its own data dir, HTTP port and
// Raft port. Nodes are killed with SIGKILL and restarted with the same flags.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// ---------------------------------------------------------------------------
// Processes

// syncBuf is a log sink that may be read while the process writes to it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) tail(lines int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := strings.Split(strings.TrimRight(s.b.String(), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// cnode is one cluster node: a process that can be killed and restarted
// with the same flags.
type cnode struct {
	name     string // the tag the test expects this node to have
	url      string
	raftAddr string
	dataDir  string
	args     []string
	logs     *syncBuf // every run of the node, in order
	// dir is the process's working directory ("" for the test's); client
	// makes the test's own requests (nil: plain HTTP, no credentials).
	dir    string
	client *http.Client

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// newNode prepares a node; join is an HTTP URL or "", tag may be "" to let
// the leader assign one.
func newNode(t *testing.T, name, tag, join string) *cnode {
	t.Helper()
	httpAddr, raftAddr := freeAddr(t), freeAddr(t)
	n := &cnode{
		name:     name,
		url:      "http://" + httpAddr,
		raftAddr: raftAddr,
		dataDir:  filepath.Join(t.TempDir(), "node-"+name),
		logs:     &syncBuf{},
	}
	n.args = []string{"serve", "--http", httpAddr, "--data-dir", n.dataDir, "--raft-addr", raftAddr}
	if tag != "" {
		n.args = append(n.args, "--node-tag", tag)
	}
	if join != "" {
		n.args = append(n.args, "--join", join)
	}
	return n
}

// spawn starts the process without waiting for it to be ready.
func (n *cnode) spawn(t *testing.T) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.exited != nil {
		select {
		case <-n.exited:
		default:
			t.Fatalf("node %s: spawn while running", n.name)
		}
	}
	fmt.Fprintf(n.logs, "----- test: %s %s\n", binary, strings.Join(n.args, " "))
	cmd := exec.Command(binary, n.args...)
	cmd.Dir = n.dir
	cmd.Stdout = n.logs
	cmd.Stderr = n.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("node %s: %v", n.name, err)
	}
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(n.logs, "----- test: process exited: %v\n", err)
		close(exited)
	}()
	n.cmd, n.exited = cmd, exited
}

func (n *cnode) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.exited == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// kill9 sends SIGKILL and waits for the process to be gone. Idempotent.
func (n *cnode) kill9() {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// waitReady waits for GET /readyz to answer 200.
func (n *cnode) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !n.running() {
			t.Fatalf("node %s exited before it was ready; log:\n%s", n.name, n.logs.tail(60))
		}
		if st, _, err := callWith(n.poll(), "GET", n.url+"/readyz", ""); err == nil && st == 200 {
			return
		}
		time.Sleep(30 * time.Millisecond)
	}
	t.Fatalf("node %s not ready after %s; log:\n%s", n.name, timeout, n.logs.tail(60))
}

// poll is the client of the test's own short requests to n.
func (n *cnode) poll() *http.Client {
	if n.client != nil {
		return n.client
	}
	return pollClient
}

func (n *cnode) start(t *testing.T) {
	t.Helper()
	n.spawn(t)
	n.waitReady(t, 30*time.Second)
}

// ---------------------------------------------------------------------------
// HTTP

var (
	pollClient  = &http.Client{Timeout: 3 * time.Second}
	writeClient = &http.Client{Timeout: 15 * time.Second}
)

func callWith(cl *http.Client, method, u, body string) (int, []byte, error) {
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := cl.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes(), err
}

func call(method, u, body string) (int, []byte, error) {
	return callWith(pollClient, method, u, body)
}

func getJSON(u string, v any) error { return getJSONWith(pollClient, u, v) }

func getJSONWith(cl *http.Client, u string, v any) error {
	st, b, err := callWith(cl, "GET", u, "")
	if err != nil {
		return err
	}
	if st != 200 {
		return fmt.Errorf("GET %s: %d %s", u, st, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s: %v in %s", u, err, b)
	}
	return nil
}

type clusterTopology struct {
	Topology struct {
		AllNodes map[string]string
		Members  map[string]string
		Etag     int64
	}
	Leader       string
	NodeTag      string
	CurrentState string
	CurrentTerm  int64
	Status       json.RawMessage
}

func (n *cnode) topology() (clusterTopology, error) {
	var ct clusterTopology
	err := getJSONWith(n.poll(), n.url+"/cluster/topology", &ct)
	return ct, err
}

type clusterStatus struct {
	NodeTag      string
	State        string
	Term         uint64
	LastIndex    uint64
	CommitIndex  uint64
	AppliedIndex uint64
	Leader       string
	Nodes        []struct{ Tag, Url, RaftAddr, Suffrage string }
}

func (n *cnode) status() (clusterStatus, error) {
	var cs clusterStatus
	err := getJSONWith(n.poll(), n.url+"/admin/cluster/status", &cs)
	return cs, err
}

type dbTopology struct {
	Nodes []struct{ Url, ClusterTag, ServerRole, Database string }
	Etag  int64
}

type envelope struct{ Url, Type, Message, Error string }

// eventually polls cond until it holds; on timeout it fails with the last
// reason cond gave.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	why := ""
	for {
		ok, w := cond()
		if ok {
			return
		}
		why = w
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s: %s", what, timeout, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// putIdentity stores one document under prefix+"|" and returns the id.
func putIdentity(cl *http.Client, n *cnode, db, prefix, token string) (int, string, []byte, error) {
	body := fmt.Sprintf(`{"Token":%q,"@metadata":{"@collection":"Orders"}}`, token)
	st, b, err := callWith(cl, "PUT", n.url+"/databases/"+db+"/docs?id="+url.QueryEscape(prefix+"|"), body)
	if err != nil || st != http.StatusCreated {
		return st, "", b, err
	}
	var r struct{ Id string }
	if err := json.Unmarshal(b, &r); err != nil || r.Id == "" {
		return st, "", b, fmt.Errorf("201 without an Id: %s", b)
	}
	return st, r.Id, b, nil
}

// bulkIdentities stores one document per token under prefix+"|" in one
// bulk_docs request (plus the explicit-id puts in extra) and returns the
// ids the server gave the identity documents.
func bulkIdentities(cl *http.Client, n *cnode, db, prefix string, tokens []string, extra ...string) (int, []string, []byte, error) {
	var cmds []string
	for _, id := range extra {
		cmds = append(cmds, fmt.Sprintf(`{"Id":%q,"Type":"PUT","Document":{"Token":"extra","@metadata":{"@collection":"Extra"}}}`, id))
	}
	for _, tok := range tokens {
		cmds = append(cmds, fmt.Sprintf(`{"Id":%q,"Type":"PUT","Document":{"Token":%q,"@metadata":{"@collection":"Orders"}}}`, prefix+"|", tok))
	}
	st, b, err := callWith(cl, "POST", n.url+"/databases/"+db+"/bulk_docs", `{"Commands":[`+strings.Join(cmds, ",")+`]}`)
	if err != nil || st != http.StatusCreated {
		return st, nil, b, err
	}
	var r struct {
		Results []map[string]any
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Results) != len(cmds) {
		return st, nil, b, fmt.Errorf("bad bulk_docs answer (%v): %s", err, b)
	}
	var ids []string
	for _, res := range r.Results[len(extra):] {
		id, _ := res["@id"].(string)
		if id == "" {
			return st, nil, b, fmt.Errorf("bulk_docs result without @id: %s", b)
		}
		ids = append(ids, id)
	}
	return st, ids, b, nil
}

// putDoc stores a document with an explicit id.
func putDoc(n *cnode, db, id, token string) (int, []byte, error) {
	return callWith(writeClient, "PUT", n.url+"/databases/"+db+"/docs?id="+url.QueryEscape(id),
		fmt.Sprintf(`{"Token":%q,"@metadata":{"@collection":"Items"}}`, token))
}

// putNewDoc stores a document with an explicit id only if it does not
// exist yet (If-Match with an empty change vector): it never overwrites.
func putNewDoc(n *cnode, db, id, token string) (int, []byte, error) {
	req, err := http.NewRequest("PUT", n.url+"/databases/"+db+"/docs?id="+url.QueryEscape(id),
		strings.NewReader(fmt.Sprintf(`{"Token":%q,"@metadata":{"@collection":"Orders"}}`, token)))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("If-Match", `""`)
	resp, err := writeClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes(), err
}

// tokens loads ids from one node and returns each document's Token; a
// missing document maps to "<missing>".
func tokens(t *testing.T, n *cnode, db string, ids []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := 0; i < len(ids); i += 200 {
		chunk := ids[i:min(i+200, len(ids))]
		body, _ := json.Marshal(map[string]any{"Ids": chunk})
		st, b, err := callWith(writeClient, "POST", n.url+"/databases/"+db+"/docs", string(body))
		if err == nil && st == http.StatusNotFound && len(chunk) == 1 {
			out[chunk[0]] = "<missing>" // one missing id is a 404, as in RavenDB
			continue
		}
		if err != nil || st != 200 {
			t.Fatalf("load from %s: %d %v %s", n.name, st, err, b)
		}
		var res struct{ Results []json.RawMessage }
		if err := json.Unmarshal(b, &res); err != nil || len(res.Results) != len(chunk) {
			t.Fatalf("load from %s: %v %s", n.name, err, b)
		}
		for j, r := range res.Results {
			if string(r) == "null" {
				out[chunk[j]] = "<missing>"
				continue
			}
			var d struct{ Token string }
			if err := json.Unmarshal(r, &d); err != nil {
				t.Fatalf("load %s from %s: %v", chunk[j], n.name, err)
			}
			out[chunk[j]] = d.Token
		}
	}
	return out
}

// identityNumber is N of "orders/N", or -1.
func identityNumber(prefix, id string) int64 {
	rest, ok := strings.CutPrefix(id, prefix+"/")
	if !ok {
		return -1
	}
	v, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || v <= 0 {
		return -1
	}
	return v
}

// ---------------------------------------------------------------------------
// Clusters

type testCluster struct {
	nodes []*cnode // A, B, C
	byTag map[string]*cnode
}

// startCluster starts A (bootstrap), then B and C joining through A's URL,
// each with an explicit tag, and waits until all three agree.
func startCluster(t *testing.T, extra ...string) *testCluster {
	t.Helper()
	a := newNode(t, "A", "A", "")
	b := newNode(t, "B", "B", a.url)
	c := newNode(t, "C", "C", a.url)
	for _, n := range []*cnode{a, b, c} {
		n.args = append(n.args, extra...)
	}
	return startNodes(t, a, b, c)
}

func startNodes(t *testing.T, nodes ...*cnode) *testCluster {
	t.Helper()
	tc := &testCluster{nodes: nodes, byTag: map[string]*cnode{}}
	for _, n := range nodes {
		tc.byTag[n.name] = n
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.kill9()
		}
		if t.Failed() {
			for _, n := range nodes {
				t.Logf("log of node %s (%s, raft %s), last lines:\n%s", n.name, n.url, n.raftAddr, n.logs.tail(40))
			}
		}
	})
	nodes[0].start(t)
	eventually(t, 15*time.Second, "bootstrap node leads", func() (bool, string) {
		ct, err := nodes[0].topology()
		if err != nil {
			return false, err.Error()
		}
		return ct.Leader == nodes[0].name && ct.CurrentState == "Leader", fmt.Sprintf("%+v", ct)
	})
	for i, n := range nodes[1:] {
		n.start(t)
		tc.waitConverged(t, nodes[:i+2], 20*time.Second)
	}
	return tc
}

// waitConverged waits until every node in nodes answers /cluster/topology
// with the same leader (one of nodes, which calls itself Leader) and
// exactly nodes as members, each with its URL. It returns the leader.
func (tc *testCluster) waitConverged(t *testing.T, nodes []*cnode, timeout time.Duration) *cnode {
	t.Helper()
	want := map[string]string{}
	for _, n := range nodes {
		want[n.name] = n.url
	}
	var leader string
	eventually(t, timeout, fmt.Sprintf("%d nodes agree on leader and members", len(nodes)), func() (bool, string) {
		leader = ""
		for _, n := range nodes {
			ct, err := n.topology()
			if err != nil {
				return false, n.name + ": " + err.Error()
			}
			if ct.NodeTag != n.name {
				return false, fmt.Sprintf("%s: NodeTag %q", n.name, ct.NodeTag)
			}
			if !mapsEqual(ct.Topology.Members, want) || !mapsEqual(ct.Topology.AllNodes, want) {
				return false, fmt.Sprintf("%s: Members %v, AllNodes %v, want %v", n.name, ct.Topology.Members, ct.Topology.AllNodes, want)
			}
			if ct.Leader == "" || (leader != "" && ct.Leader != leader) {
				return false, fmt.Sprintf("%s: Leader %q (others %q)", n.name, ct.Leader, leader)
			}
			leader = ct.Leader
			if (ct.Leader == n.name) != (ct.CurrentState == "Leader") {
				return false, fmt.Sprintf("%s: Leader %q, CurrentState %q", n.name, ct.Leader, ct.CurrentState)
			}
		}
		if want[leader] == "" {
			return false, "leader " + leader + " is not a member"
		}
		return true, ""
	})
	return tc.byTag[leader]
}

func (tc *testCluster) leader(t *testing.T) *cnode {
	t.Helper()
	return tc.waitConverged(t, tc.nodes, 15*time.Second)
}

func (tc *testCluster) others(n *cnode) []*cnode {
	var out []*cnode
	for _, o := range tc.nodes {
		if o != n {
			out = append(out, o)
		}
	}
	return out
}

// createDatabase creates db through via and waits until every node lists
// all of nodes in /topology?name=db and accepts a write to it.
func (tc *testCluster) createDatabase(t *testing.T, via *cnode, db string) {
	t.Helper()
	st, b, err := callWith(writeClient, "PUT", via.url+"/admin/databases?name="+db, `{"DatabaseName":"`+db+`"}`)
	if err != nil || st != http.StatusCreated {
		t.Fatalf("create %s through %s: %d %v %s", db, via.name, st, err, b)
	}
	tc.waitDatabase(t, tc.nodes, db)
}

func (tc *testCluster) waitDatabase(t *testing.T, nodes []*cnode, db string) {
	t.Helper()
	for _, n := range nodes {
		eventually(t, 15*time.Second, "database "+db+" on "+n.name, func() (bool, string) {
			var top dbTopology
			if err := getJSON(n.url+"/topology?name="+db, &top); err != nil {
				return false, err.Error()
			}
			if why := checkDBTopology(top, db, nodes); why != "" {
				return false, why
			}
			st, b, err := putDoc(n, db, "ready/"+n.name, "ready")
			return err == nil && st == 201, fmt.Sprintf("put: %d %v %s", st, err, b)
		})
	}
}

// checkDBTopology says what is wrong with a /topology answer that should
// list exactly nodes, or "".
func checkDBTopology(top dbTopology, db string, nodes []*cnode) string {
	want := map[string]string{}
	for _, n := range nodes {
		want[n.name] = n.url
	}
	got := map[string]string{}
	for _, tn := range top.Nodes {
		if tn.ServerRole != "Member" || tn.Database != db {
			return fmt.Sprintf("node entry %+v", tn)
		}
		got[tn.ClusterTag] = tn.Url
	}
	if len(top.Nodes) != len(nodes) || !mapsEqual(got, want) {
		return fmt.Sprintf("Nodes %+v, want %v", top.Nodes, want)
	}
	if top.Etag <= 0 {
		return fmt.Sprintf("Etag %d", top.Etag)
	}
	return ""
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// Tests

// A bootstraps; B joins through A with its tag; C joins through B (a
// follower, so the join is forwarded) without a tag and is given "C".
func TestClusterForms(t *testing.T) {
	a := newNode(t, "A", "A", "")
	b := newNode(t, "B", "B", a.url)
	c := newNode(t, "C", "", b.url)
	tc := startNodes(t, a, b, c)
	leader := tc.leader(t)

	var term int64 = -1
	for _, n := range tc.nodes {
		ct, err := n.topology()
		if err != nil {
			t.Fatal(err)
		}
		if len(ct.Topology.AllNodes) != 3 || !mapsEqual(ct.Topology.AllNodes, ct.Topology.Members) {
			t.Errorf("%s: AllNodes %v, Members %v", n.name, ct.Topology.AllNodes, ct.Topology.Members)
		}
		if ct.Topology.Etag <= 0 {
			t.Errorf("%s: topology Etag %d", n.name, ct.Topology.Etag)
		}
		if len(ct.Status) == 0 || ct.Status[0] != '{' {
			t.Errorf("%s: Status must be an object, got %s", n.name, ct.Status)
		}
		if n != leader && ct.CurrentState != "Follower" {
			t.Errorf("%s: CurrentState %q, want Follower", n.name, ct.CurrentState)
		}
		if ct.CurrentTerm <= 0 || (term >= 0 && ct.CurrentTerm != term) {
			t.Errorf("%s: CurrentTerm %d (others %d)", n.name, ct.CurrentTerm, term)
		}
		term = ct.CurrentTerm

		cs, err := n.status()
		if err != nil {
			t.Fatal(err)
		}
		if cs.NodeTag != n.name || cs.Leader != leader.name || cs.Term == 0 || cs.AppliedIndex == 0 || cs.CommitIndex < cs.AppliedIndex || cs.LastIndex < cs.CommitIndex {
			t.Errorf("%s: /admin/cluster/status %+v", n.name, cs)
		}
		if (n == leader) != strings.EqualFold(cs.State, "leader") {
			t.Errorf("%s: State %q, leader is %s", n.name, cs.State, leader.name)
		}
		if len(cs.Nodes) != 3 {
			t.Errorf("%s: status Nodes %+v", n.name, cs.Nodes)
		}
		for _, sn := range cs.Nodes {
			m := tc.byTag[sn.Tag]
			if m == nil || sn.Url != m.url || sn.RaftAddr != m.raftAddr || !strings.EqualFold(sn.Suffrage, "voter") {
				t.Errorf("%s: status node %+v", n.name, sn)
			}
		}
	}
}

// A database created through a follower exists on every node, each node's
// /topology lists all three, and each node takes writes and identities.
func TestClusterDatabaseOnAllMembers(t *testing.T) {
	tc := startCluster(t)
	leader := tc.leader(t)
	via := tc.others(leader)[0]
	tc.createDatabase(t, via, "alldb")

	for _, n := range tc.nodes {
		var top dbTopology
		if err := getJSON(n.url+"/topology?name=alldb", &top); err != nil {
			t.Fatal(err)
		}
		if why := checkDBTopology(top, "alldb", tc.nodes); why != "" {
			t.Errorf("%s: %s", n.name, why)
		}
		id, tok := "items/written-on-"+n.name, "token-"+n.name
		if st, b, err := putDoc(n, "alldb", id, tok); err != nil || st != 201 {
			t.Fatalf("put on %s: %d %v %s", n.name, st, err, b)
		}
		if got := tokens(t, n, "alldb", []string{id})[id]; got != tok {
			t.Errorf("%s: %s has token %q, want %q", n.name, id, got, tok)
		}
	}

	// Identities from every node, single and in a batch through a follower:
	// all distinct, and a batch is one entry of the Raft log.
	seen := map[string]string{}
	for _, n := range tc.nodes {
		st, id, b, err := putIdentity(writeClient, n, "alldb", "orders", "single-"+n.name)
		if err != nil || st != 201 || identityNumber("orders", id) < 0 {
			t.Fatalf("identity PUT on %s: %d %v %s", n.name, st, err, b)
		}
		if prev, dup := seen[id]; dup {
			t.Errorf("%s got %s, already given to %s", n.name, id, prev)
		}
		seen[id] = n.name
	}
	before, err := leader.status()
	if err != nil {
		t.Fatal(err)
	}
	st, ids, b, err := bulkIdentities(writeClient, via, "alldb", "orders", []string{"b1", "b2", "b3", "b4", "b5"})
	if err != nil || st != 201 {
		t.Fatalf("bulk_docs on %s: %d %v %s", via.name, st, err, b)
	}
	after, err := leader.status()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if prev, dup := seen[id]; dup || identityNumber("orders", id) < 0 {
			t.Errorf("batch id %s (seen on %q)", id, prev)
		}
		seen[id] = via.name
	}
	if after.LastIndex != before.LastIndex+1 {
		t.Errorf("a batch of 5 identities moved the leader's LastIndex from %d to %d, want one entry", before.LastIndex, after.LastIndex)
	}
	got := tokens(t, via, "alldb", ids)
	for i, id := range ids {
		if want := fmt.Sprintf("b%d", i+1); got[id] != want {
			t.Errorf("%s on %s: token %q, want %q", id, via.name, got[id], want)
		}
	}

	// ReplicationFactor limits the members.
	if st, b, err := callWith(writeClient, "PUT", leader.url+"/admin/databases?name=rf2", `{"DatabaseName":"rf2","ReplicationFactor":2}`); err != nil || st != 201 {
		t.Fatalf("create rf2: %d %v %s", st, err, b)
	}
	eventually(t, 10*time.Second, "rf2 has two members", func() (bool, string) {
		var top dbTopology
		if err := getJSON(leader.url+"/topology?name=rf2", &top); err != nil {
			return false, err.Error()
		}
		tags := map[string]bool{}
		for _, tn := range top.Nodes {
			if tc.byTag[tn.ClusterTag] == nil || tn.Url != tc.byTag[tn.ClusterTag].url {
				return false, fmt.Sprintf("entry %+v", tn)
			}
			tags[tn.ClusterTag] = true
		}
		return len(top.Nodes) == 2 && len(tags) == 2, fmt.Sprintf("%+v", top)
	})

	// The npm client sends ?replicationFactor=1 on every create; the
	// database still goes to every node (the body decides).
	if st, b, err := callWith(writeClient, "PUT", leader.url+"/admin/databases?name=npmdefault&replicationFactor=1", `{"DatabaseName":"npmdefault"}`); err != nil || st != 201 {
		t.Fatalf("create npmdefault: %d %v %s", st, err, b)
	}
	var top dbTopology
	if err := getJSON(leader.url+"/topology?name=npmdefault", &top); err != nil || len(top.Nodes) != 3 {
		t.Fatalf("npmdefault members: %+v %v", top, err)
	}
}

type ack struct {
	id, token string
	node      *cnode
	afterKill bool
	squat     bool // an explicit-id document, not an identity
}

// Eight writers take identities on all three nodes while the leader is
// killed and restarted, and on every node a squatter creates explicit
// orders/N documents just ahead of the identity counter: no acknowledged
// identity is given twice, and no acknowledged document (nor one that
// existed before) is overwritten.
//
// Replication is off here: the claim is about each node's own documents.
// With replication, a squatter written on one node and an identity taken on
// another for the same id are concurrent writes, which become a conflict
// (tested with the conflicts, not here).
func TestClusterIdentitiesUniqueThroughLeaderKill(t *testing.T) {
	tc := startCluster(t, "--replication=false")
	const db = "idkill"
	tc.createDatabase(t, tc.nodes[0], db)

	// Documents with explicit ids inside the identity range, spread over
	// the nodes: an identity taken on their node must step over them.
	pre := map[*cnode][]string{}
	preTok := map[string]string{}
	for i, v := range []int{1, 3, 6, 10, 25, 60, 130, 300, 700} {
		n := tc.nodes[i%3]
		id := fmt.Sprintf("orders/%d", v)
		tok := "pre-" + n.name + "-" + id
		if st, b, err := putNewDoc(n, db, id, tok); err != nil || st != 201 {
			t.Fatalf("pre put %s on %s: %d %v %s", id, n.name, st, err, b)
		}
		pre[n] = append(pre[n], id)
		preTok[n.name+" "+id] = tok
	}

	old := tc.leader(t)
	var (
		mu       sync.Mutex
		acks     []ack
		failures = map[string]int{}
		killed   atomic.Bool
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	var maxSeen atomic.Int64 // highest identity acknowledged so far
	const writers, maxOps = 8, 3000
	for i, n := range tc.nodes {
		wg.Add(1)
		go func(i int, n *cnode) {
			defer wg.Done()
			for op := 0; op < maxOps; op++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("orders/%d", maxSeen.Load()+1+int64((op*7+i*5)%23))
				tok := fmt.Sprintf("squat-%s-%d", n.name, op)
				st, b, err := putNewDoc(n, db, id, tok)
				switch {
				case err == nil && st == 201:
					mu.Lock()
					acks = append(acks, ack{id: id, token: tok, node: n, squat: true})
					mu.Unlock()
				case err == nil && st == 409:
					// it exists already: the identity writers got there first
				case err != nil || st == 503:
					time.Sleep(50 * time.Millisecond) // the node is down or starting
				default:
					mu.Lock()
					failures[fmt.Sprintf("explicit PUT: %d %.200s", st, b)]++
					mu.Unlock()
				}
				time.Sleep(5 * time.Millisecond)
			}
		}(i, n)
	}
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			cur := w % 3
			for op := 0; op < maxOps; op++ {
				select {
				case <-stop:
					return
				default:
				}
				n := tc.nodes[cur]
				afterKill := killed.Load()
				var toks, ids []string
				var st int
				var b []byte
				var err error
				if op%3 == 2 {
					for j := 0; j < 2+op%4; j++ {
						toks = append(toks, fmt.Sprintf("w%d-op%d-%d", w, op, j))
					}
					st, ids, b, err = bulkIdentities(writeClient, n, db, "orders", toks)
				} else {
					toks = []string{fmt.Sprintf("w%d-op%d", w, op)}
					var id string
					st, id, b, err = putIdentity(writeClient, n, db, "orders", toks[0])
					ids = []string{id}
				}
				if err != nil || st != 201 {
					key := fmt.Sprint(st)
					if err != nil && st == 0 {
						key = "network error"
					} else if st != 503 && st != 502 && st != 504 && st != 408 && st != 409 {
						// 409: a squatter created the document between the
						// identity's probe and its write; the batch is refused
						// rather than overwriting.
						key = fmt.Sprintf("%d %.200s", st, b)
					}
					mu.Lock()
					failures[key]++
					mu.Unlock()
					cur = (cur + 1) % 3 // fail over to the next node
					time.Sleep(20 * time.Millisecond)
					continue
				}
				mu.Lock()
				for i, id := range ids {
					acks = append(acks, ack{id: id, token: toks[i], node: n, afterKill: afterKill})
					if v := identityNumber("orders", id); v > maxSeen.Load() {
						maxSeen.Store(v)
					}
				}
				mu.Unlock()
			}
		}(w)
	}

	time.Sleep(1500 * time.Millisecond)
	killed.Store(true)
	killAt := time.Now()
	old.kill9()
	survivors := tc.others(old)
	var elected string
	eventually(t, 20*time.Second, "survivors elect a new leader while "+old.name+" is down", func() (bool, string) {
		var leaders []string
		for _, n := range survivors {
			ct, err := n.topology()
			if err != nil {
				return false, n.name + ": " + err.Error()
			}
			leaders = append(leaders, ct.Leader)
		}
		ok := leaders[0] == leaders[1] && leaders[0] != "" && leaders[0] != old.name
		if ok {
			elected = leaders[0]
		}
		return ok, fmt.Sprintf("survivors report leaders %v", leaders)
	})
	if old.running() {
		t.Fatal("the old leader is running while the new one was elected")
	}
	t.Logf("leader %s killed; %s elected", old.name, elected)
	time.Sleep(time.Until(killAt.Add(time.Second)))
	old.start(t)
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	tc.leader(t) // all three agree again

	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d acknowledged writes; failures: %v", len(acks), failures)
	for k, c := range failures {
		if k != "network error" && k != "503" && k != "502" && k != "504" && k != "408" && k != "409" {
			t.Errorf("unexpected failure answer (%d times): %s", c, k)
		}
	}
	identities, squats, afterKill := 0, 0, 0
	for _, a := range acks {
		switch {
		case a.squat:
			squats++
		case a.afterKill:
			afterKill++
			fallthrough
		default:
			identities++
		}
	}
	t.Logf("%d identities acknowledged, %d after the kill; %d explicit documents created ahead of the counter", identities, afterKill, squats)
	if identities == 0 {
		t.Fatal("no identity write was acknowledged")
	}
	if afterKill == 0 {
		t.Error("no identity write was acknowledged after the leader was killed")
	}

	// 0 duplicate identities across the whole run, and no id acknowledged
	// twice on one node (that would be an overwrite).
	byID := map[string]ack{}
	onNode := map[string]ack{}
	dups := 0
	for _, a := range acks {
		if identityNumber("orders", a.id) < 0 {
			t.Errorf("acknowledged id %q is not orders/N", a.id)
		}
		if prev, ok := onNode[a.node.name+" "+a.id]; ok {
			dups++
			if dups <= 10 {
				t.Errorf("%s acknowledged twice on %s: %s and %s", a.id, a.node.name, prev.token, a.token)
			}
		}
		onNode[a.node.name+" "+a.id] = a
		if a.squat {
			continue
		}
		if prev, ok := byID[a.id]; ok && prev.node != a.node {
			dups++
			if dups <= 10 {
				t.Errorf("duplicate identity %s: %s on %s and %s on %s", a.id, prev.token, prev.node.name, a.token, a.node.name)
			}
		}
		byID[a.id] = a
	}
	if dups > 0 {
		t.Fatalf("%d duplicates among %d acknowledged", dups, len(acks))
	}

	// Every acknowledged document still has its writer's body on its node,
	// and the documents that were there before are untouched.
	overwritten := 0
	for _, n := range tc.nodes {
		var ids []string
		want := map[string]string{}
		for _, a := range acks {
			if a.node == n {
				ids = append(ids, a.id)
				want[a.id] = a.token
			}
		}
		for _, id := range pre[n] {
			if _, clash := want[id]; clash {
				t.Errorf("%s: identity %s was acknowledged over an existing document", n.name, id)
			}
			ids = append(ids, id)
			want[id] = preTok[n.name+" "+id]
		}
		got := tokens(t, n, db, ids)
		for _, id := range ids {
			if got[id] != want[id] {
				overwritten++
				if overwritten <= 10 {
					t.Errorf("%s: %s has %q, want %q", n.name, id, got[id], want[id])
				}
			}
		}
	}
	if overwritten > 0 {
		t.Fatalf("%d documents lost or overwritten", overwritten)
	}

	// The restarted node takes identities again.
	eventually(t, 15*time.Second, "identity on the restarted "+old.name, func() (bool, string) {
		st, id, b, err := putIdentity(writeClient, old, db, "orders", "after-restart")
		if err == nil && st == 201 {
			if _, dup := byID[id]; dup {
				t.Fatalf("after restart %s gave %s again", old.name, id)
			}
			return true, ""
		}
		return false, fmt.Sprintf("%d %v %s", st, err, b)
	})
}

// With two of three nodes dead, the survivor refuses identities fast with a
// 503 naming the missing quorum, but still serves HiLo and explicit-id
// writes; one node back, identities work again.
func TestClusterMinorityRefusesIdentities(t *testing.T) {
	tc := startCluster(t)
	const db = "minority"
	tc.createDatabase(t, tc.nodes[0], db)
	leader := tc.leader(t)
	survivor := tc.others(leader)[0]
	taken := map[string]bool{}
	for i := 0; i < 3; i++ {
		st, id, b, err := putIdentity(writeClient, survivor, db, "orders", "before")
		if err != nil || st != 201 {
			t.Fatalf("identity before the kills: %d %v %s", st, err, b)
		}
		taken[id] = true
	}
	dead := tc.others(survivor)
	for _, n := range dead {
		n.kill9()
	}

	// Bounded by the client's timeout: the survivor must answer, not hang.
	quick := &http.Client{Timeout: 10 * time.Second}
	noQuorum := func(what string, st int, b []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v (no answer within %s)", what, err, quick.Timeout)
		}
		var env envelope
		if st != 503 || json.Unmarshal(b, &env) != nil || env.Type == "" || !strings.Contains(strings.ToLower(env.Message), "quorum") {
			t.Errorf("%s: got %d %s, want 503 with an envelope whose Message mentions the quorum", what, st, b)
		}
	}
	start := time.Now()
	st, _, b, err := putIdentity(quick, survivor, db, "orders", "minority")
	noQuorum("identity PUT", st, b, err)
	t.Logf("identity PUT refused after %s", time.Since(start).Round(time.Millisecond))
	st, b, err = callWith(quick, "POST", survivor.url+"/databases/"+db+"/identity/next?name=orders", "")
	noQuorum("identity/next", st, b, err)
	st, _, b, err = bulkIdentities(quick, survivor, db, "orders", []string{"x"}, "minority/in-refused-batch")
	noQuorum("bulk_docs with an identity", st, b, err)
	if got := tokens(t, survivor, db, []string{"minority/in-refused-batch"}); got["minority/in-refused-batch"] != "<missing>" {
		t.Errorf("the refused batch wrote its explicit-id document: %v", got)
	}

	st, b, err = callWith(quick, "GET", survivor.url+"/databases/"+db+"/hilo/next?tag=users", "")
	var rng struct{ Low, High int64 }
	if err != nil || st != 201 || json.Unmarshal(b, &rng) != nil || rng.High < rng.Low || rng.Low <= 0 {
		t.Errorf("hilo/next without quorum: %d %v %s", st, err, b)
	}
	if st, b, err := putDoc(survivor, db, "minority/explicit", "explicit"); err != nil || st != 201 {
		t.Errorf("explicit-id PUT without quorum: %d %v %s", st, err, b)
	} else if got := tokens(t, survivor, db, []string{"minority/explicit"})["minority/explicit"]; got != "explicit" {
		t.Errorf("minority/explicit has %q", got)
	}

	dead[0].start(t)
	eventually(t, 20*time.Second, "identities with a quorum again", func() (bool, string) {
		st, id, b, err := putIdentity(writeClient, survivor, db, "orders", "back")
		if err == nil && st == 201 {
			if taken[id] {
				t.Fatalf("identity %s given again after recovery", id)
			}
			return true, ""
		}
		return false, fmt.Sprintf("%d %v %s", st, err, b)
	})
	st, b, err = callWith(writeClient, "POST", survivor.url+"/databases/"+db+"/identity/next?name=orders", "")
	if err != nil || st != 200 || !strings.Contains(string(b), "NewIdentityValue") {
		t.Errorf("identity/next after recovery: %d %v %s", st, err, b)
	}
}

// Killing and restarting every node with the same flags keeps the members,
// the database records, the documents and the identity counters.
func TestClusterRestartKeepsState(t *testing.T) {
	tc := startCluster(t)
	const db = "keep"
	tc.createDatabase(t, tc.nodes[1], db)
	var maxBefore int64
	docs := map[*cnode][]string{}
	for _, n := range tc.nodes {
		for i := 0; i < 2; i++ {
			st, id, b, err := putIdentity(writeClient, n, db, "orders", "kept-"+n.name)
			if err != nil || st != 201 {
				t.Fatalf("identity on %s: %d %v %s", n.name, st, err, b)
			}
			maxBefore = max(maxBefore, identityNumber("orders", id))
			docs[n] = append(docs[n], id)
		}
		if st, b, err := putDoc(n, db, "items/kept-"+n.name, "kept-"+n.name); err != nil || st != 201 {
			t.Fatalf("put on %s: %d %v %s", n.name, st, err, b)
		}
		docs[n] = append(docs[n], "items/kept-"+n.name)
	}
	before := map[string]clusterStatus{}
	lcs, err := tc.leader(t).status()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range tc.nodes {
		eventually(t, 10*time.Second, n.name+" applied everything", func() (bool, string) {
			cs, err := n.status()
			if err != nil {
				return false, err.Error()
			}
			before[n.name] = cs
			return cs.AppliedIndex >= lcs.CommitIndex, fmt.Sprintf("%+v vs leader %+v", cs, lcs)
		})
	}

	for _, n := range tc.nodes {
		n.kill9()
	}
	for _, n := range tc.nodes { // all at once: none can have a quorum alone
		n.spawn(t)
	}
	for _, n := range tc.nodes {
		n.waitReady(t, 30*time.Second)
	}
	tc.waitConverged(t, tc.nodes, 20*time.Second)
	tc.waitDatabase(t, tc.nodes, db)

	for _, n := range tc.nodes {
		cs, err := n.status()
		if err != nil {
			t.Fatal(err)
		}
		if cs.LastIndex < before[n.name].AppliedIndex || cs.Term < before[n.name].Term || len(cs.Nodes) != 3 {
			t.Errorf("%s: status after restart %+v, before %+v", n.name, cs, before[n.name])
		}
		got := tokens(t, n, db, docs[n])
		for _, id := range docs[n] {
			if !strings.HasPrefix(got[id], "kept-"+n.name) {
				t.Errorf("%s: %s has %q after restart", n.name, id, got[id])
			}
		}
		st, id, b, err := putIdentity(writeClient, n, db, "orders", "after")
		if err != nil || st != 201 {
			t.Fatalf("identity on %s after restart: %d %v %s", n.name, st, err, b)
		}
		if v := identityNumber("orders", id); v <= maxBefore {
			t.Errorf("%s: identity after restart is %s, but orders/%d was given before: the counter was lost", n.name, id, maxBefore)
		}
	}
}

// Removing C leaves A and B, which drop it from their topology and still
// take identities.
func TestClusterRemoveNode(t *testing.T) {
	tc := startCluster(t)
	leader := tc.leader(t)
	c := tc.byTag["C"]
	if leader == c {
		if st, b, err := callWith(writeClient, "POST", c.url+"/admin/cluster/stepdown", ""); err != nil || st/100 != 2 {
			t.Fatalf("stepdown: %d %v %s", st, err, b)
		}
		eventually(t, 15*time.Second, "C hands over leadership", func() (bool, string) {
			l := tc.leader(t)
			return l != c, "leader is " + l.name
		})
		leader = tc.leader(t)
	}
	st, b, err := callWith(writeClient, "POST", leader.url+"/admin/cluster/remove?tag=C", "")
	if err != nil || st/100 != 2 {
		t.Fatalf("remove C through %s: %d %v %s", leader.name, st, err, b)
	}
	rest := []*cnode{tc.byTag["A"], tc.byTag["B"]}
	tc.waitConverged(t, rest, 15*time.Second) // Members and AllNodes are exactly A and B
	for _, n := range rest {
		eventually(t, 10*time.Second, n.name+" status drops C", func() (bool, string) {
			cs, err := n.status()
			if err != nil {
				return false, err.Error()
			}
			var tags []string
			for _, sn := range cs.Nodes {
				tags = append(tags, sn.Tag)
			}
			sort.Strings(tags)
			return strings.Join(tags, ",") == "A,B", fmt.Sprintf("status nodes %v", tags)
		})
	}
	c.kill9()
	tc.nodes = rest
	tc.createDatabase(t, leader, "afterremove")
	for _, n := range rest {
		if st, _, b, err := putIdentity(writeClient, n, "afterremove", "orders", "x"); err != nil || st != 201 {
			t.Errorf("identity on %s after removing C: %d %v %s", n.name, st, err, b)
		}
	}
}
