package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/subscriptions"
)

func httpDo(t *testing.T, method, url, body string, want int) []byte {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return b
}

// On a 3-node cluster a subscription created on one node is served by
// every node, an ack on one node moves the progress every node sees, a
// node whose copy has no entry in the progress starts over (at least once,
// never skipping), and a mentor node is where workers are sent.
func TestSubscriptionsAcrossTheCluster(t *testing.T) {
	nodes := startReplCluster(t)
	a, b, c := nodes[0], nodes[1], nodes[2]
	for i := 1; i <= 30; i++ {
		httpDo(t, "PUT", fmt.Sprintf("%s/databases/rep/docs?id=orders/%d", a.url, i), fmt.Sprintf(`{"N":%d,"@metadata":{"@collection":"Orders"}}`, i), 201)
	}
	waitSame(t, nodes, "30 orders")
	httpDo(t, "PUT", b.url+"/databases/rep/subscriptions", `{"Name":"s","Query":"from Orders where N > 10","MentorNode":"C"}`, 201)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deliver := func(n *replNode) []string {
		t.Helper()
		var sess *subscriptions.Session
		deadline := time.Now().Add(10 * time.Second)
		for {
			var err error
			if sess, err = n.srv.subs.Open(ctx, "rep", "s", subscriptions.ConnectOptions{MaxDocsPerBatch: 10, ClientAddr: "test"}); err == nil {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("%s: %v", n.tag, err)
			}
			time.Sleep(20 * time.Millisecond) // the definition reaches this node through Raft
		}
		defer sess.Close()
		batch, err := sess.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := sess.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range batch.Docs {
			ids = append(ids, d.ID)
		}
		return ids
	}
	want := func(from, to int) []string {
		var out []string
		for i := from; i <= to; i++ {
			out = append(out, fmt.Sprintf("orders/%d", i))
		}
		return out
	}
	if got := deliver(b); !slices.Equal(got, want(11, 20)) {
		t.Fatalf("first batch on B: %v", got)
	}
	// Every node sees the progress B acknowledged.
	bdb, _ := b.srv.Catalog().Get("rep")
	seen := func(n *replNode) int64 {
		sub, _, _ := n.srv.subs.Find("rep", "s", nil)
		return subscriptions.ParseProgress(sub.Progress).Etag(bdb.DatabaseID())
	}
	// waitAll waits until every node's copy holds B's progress as B has it:
	// an ack is a compare-and-set on the progress a node saw when it read
	// the batch, so a node still applying B's last ack would refuse its own.
	waitAll := func() {
		t.Helper()
		target := seen(b)
		if target == 0 {
			t.Fatal("B's own copy has no progress after its ack")
		}
		for _, n := range nodes {
			deadline := time.Now().Add(10 * time.Second)
			for seen(n) < target {
				if time.Now().After(deadline) {
					t.Fatalf("%s never saw B's progress %d (has %d)", n.tag, target, seen(n))
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	waitAll()
	// B goes on from its position; A, whose copy has no entry, starts over.
	if got := deliver(b); !slices.Equal(got, want(21, 30)) {
		t.Fatalf("second batch on B: %v", got)
	}
	waitAll()
	if got := deliver(a); !slices.Equal(got, want(11, 20)) {
		t.Fatalf("first batch on A: %v", got)
	}
	// Workers are sent to the mentor node.
	var info struct{ Url, NodeTag string }
	if err := json.Unmarshal(httpDo(t, "GET", a.url+"/info/remote-task/tcp?database=rep&remote-task=s&tag=Subscription%2Frep&verify-database=true", "", 200), &info); err != nil {
		t.Fatal(err)
	}
	if info.NodeTag != "C" || info.Url != "tcp://"+strings.TrimPrefix(c.url, "http://") {
		t.Fatalf("tcp info %+v, want node C at %s", info, c.url)
	}
}
