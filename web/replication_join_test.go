package web

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A node that joins the cluster later becomes a member of the databases
// that live on every node and receives everything written before it came:
// documents, tombstones and resolved conflicts, with the same change
// vectors.
func TestNodeAddedLaterReceivesEverything(t *testing.T) {
	nodes := startReplCluster(t)
	for i, n := range nodes {
		var cmds []string
		for j := 0; j < 200; j++ {
			cmds = append(cmds, fmt.Sprintf(`{"Id":"%s/%d","Type":"PUT","Document":{"n":%d,"@metadata":{"@collection":"Items"}}}`, strings.ToLower(n.tag), j, i*1000+j))
		}
		post(t, n.url+"/databases/rep/bulk_docs", `{"Commands":[`+strings.Join(cmds, ",")+`]}`)
	}
	waitSame(t, nodes, "after the writes") // B deletes a document it has received
	post(t, nodes[1].url+"/databases/rep/bulk_docs", `{"Commands":[{"Id":"a/7","Type":"DELETE"}]}`)
	post(t, nodes[0].url+"/databases/rep/bulk_docs", `{"Commands":[{"Id":"shared/1","Type":"PUT","Document":{"by":"A"}}]}`)
	post(t, nodes[2].url+"/databases/rep/bulk_docs", `{"Commands":[{"Id":"shared/1","Type":"PUT","Document":{"by":"C"}}]}`)
	waitSame(t, nodes, "before D joins")

	addr := freePort(t)
	d := &replNode{tag: "D", dir: filepath.Join(t.TempDir(), "D"), raft: freePort(t), listenerAddr: addr, url: "http://" + addr, join: nodes[0].url}
	d.start(t)
	t.Cleanup(d.stop)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if d.srv != nil {
			if _, err := d.srv.Catalog().Get("rep"); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("D never became a member of rep")
		}
		time.Sleep(20 * time.Millisecond)
	}
	all := append(append([]*replNode{}, nodes...), d)
	waitSame(t, all, "after D joined")
	db, _ := d.srv.Catalog().Get("rep")
	if st := db.Stats(); st.Documents != 600 || st.Tombstones != 1 {
		t.Fatalf("D stats %+v", st)
	}
	// And D's own writes reach the others.
	post(t, d.url+"/databases/rep/bulk_docs", `{"Commands":[{"Id":"d/1","Type":"PUT","Document":{"from":"D"}}]}`)
	waitSame(t, all, "after a write on D")
}
