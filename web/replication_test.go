package web

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
)

type replNode struct {
	srv          *Server
	url, raft    string
	dir, tag     string
	join         string
	done         chan struct{}
	listenerAddr string
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (n *replNode) start(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", n.listenerAddr)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{HTTPAddr: n.listenerAddr, RaftAddr: n.raft, DataDir: n.dir, NodeTag: n.tag, Join: n.join, Replication: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 150 * time.Millisecond})
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	n.srv, n.done = srv, make(chan struct{})
	go func() { srv.Serve(l); close(n.done) }()
}

func (n *replNode) stop() {
	if n.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n.srv.Shutdown(ctx)
	<-n.done
	n.srv = nil
}

func startReplCluster(t *testing.T) []*replNode {
	t.Helper()
	base := t.TempDir()
	var nodes []*replNode
	for i, tag := range []string{"A", "B", "C"} {
		addr := freePort(t)
		n := &replNode{tag: tag, dir: filepath.Join(base, tag), raft: freePort(t), listenerAddr: addr, url: "http://" + addr}
		if i > 0 {
			n.join = nodes[0].url
		}
		n.start(t)
		nodes = append(nodes, n)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.stop()
		}
	})
	createDB(t, nodes[0].url, "rep")
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range nodes {
		for {
			if _, err := n.srv.Catalog().Get("rep"); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never opened the database", n.tag)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nodes
}

// copyState is a database copy's documents, tombstones and conflicts.
func copyState(t *testing.T, n *replNode) string {
	db, err := n.srv.Catalog().Get("rep")
	if err != nil {
		return "missing: " + err.Error()
	}
	items, err := db.ChangesAfter(context.Background(), 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, it := range items {
		lines = append(lines, fmt.Sprintf("%s %s %s %s", it.Type, strings.ToLower(it.ID), it.ChangeVector, it.Body))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func waitSame(t *testing.T, nodes []*replNode, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s0 := copyState(t, nodes[0])
		same := true
		for _, n := range nodes[1:] {
			if copyState(t, n) != s0 {
				same = false
			}
		}
		if same {
			return
		}
		if time.Now().After(deadline) {
			for _, n := range nodes {
				t.Logf("%s:\n%s", n.tag, copyState(t, n))
			}
			t.Fatalf("copies did not converge: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestReplicationBetweenThreeNodes(t *testing.T) {
	nodes := startReplCluster(t)
	// Writes on every node reach every node.
	for i, n := range nodes {
		var cmds []string
		for j := 0; j < 50; j++ {
			cmds = append(cmds, fmt.Sprintf(`{"Id":"%s/%d","Type":"PUT","Document":{"n":%d,"@metadata":{"@collection":"Items"}}}`, strings.ToLower(n.tag), j, i*100+j))
		}
		post(t, n.url+"/databases/rep/bulk_docs", `{"Commands":[`+strings.Join(cmds, ",")+`]}`)
	}
	waitSame(t, nodes, "after writes on every node")
	// A delete on B of a document written on A travels as a tombstone.
	post(t, nodes[1].url+"/databases/rep/bulk_docs", `{"Commands":[{"Id":"a/3","Type":"DELETE"}]}`)
	waitSame(t, nodes, "after a delete")
	db, _ := nodes[2].srv.Catalog().Get("rep")
	if st := db.Stats(); st.Documents != 149 || st.Tombstones != 1 {
		t.Fatalf("C stats %+v", st)
	}

	// Concurrent writes to the same id on two nodes converge (to the same
	// conflict on every copy until resolved).
	post(t, nodes[0].url+"/databases/rep/bulk_docs", `{"Commands":[{"Id":"shared/1","Type":"PUT","Document":{"by":"A"}}]}`)
	post(t, nodes[1].url+"/databases/rep/bulk_docs", `{"Commands":[{"Id":"shared/1","Type":"PUT","Document":{"by":"B"}}]}`)
	waitSame(t, nodes, "after concurrent writes")

	// A node that was down catches up from where it left off.
	nodes[2].stop()
	var cmds []string
	for j := 0; j < 300; j++ {
		cmds = append(cmds, fmt.Sprintf(`{"Id":"late/%d","Type":"PUT","Document":{"n":%d}}`, j, j))
	}
	post(t, nodes[0].url+"/databases/rep/bulk_docs", `{"Commands":[`+strings.Join(cmds, ",")+`]}`)
	nodes[2].start(t)
	waitSame(t, nodes, "after C caught up")
	var src storage.Stats
	if db, err := nodes[2].srv.Catalog().Get("rep"); err == nil {
		src = db.Stats()
	}
	if src.Documents < 449 {
		t.Fatalf("C after catch-up: %+v", src)
	}
}
