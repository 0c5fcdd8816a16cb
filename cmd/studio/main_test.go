package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rookery-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "studio")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build failed: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestEnvMirrorsFlags(t *testing.T) {
	t.Setenv("ROOKERY_HTTP", "127.0.0.1:9999")
	t.Setenv("ROOKERY_DATA_DIR", "/tmp/x")
	t.Setenv("ROOKERY_NODE_TAG", "B")
	o, err := parse([]string{"serve", "--node-tag", "C"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.httpAddr != "127.0.0.1:9999" || o.dataDir != "/tmp/x" || o.nodeTag != "C" {
		t.Fatalf("options %+v", o)
	}
	t.Setenv("ROOKERY_SHUTDOWN_TIMEOUT", "soon")
	if _, err := parse(nil, io.Discard); err == nil || !strings.Contains(err.Error(), "ROOKERY_SHUTDOWN_TIMEOUT") {
		t.Fatalf("bad env value accepted: %v", err)
	}
	if _, err := parse([]string{"frobnicate"}, io.Discard); err == nil {
		t.Fatal("unknown command accepted")
	}
}

// The parser limits are flags with their documented defaults, mirrored by
// ROOKERY_MAX_* variables.
func TestParserLimitFlags(t *testing.T) {
	o, err := parse(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.maxQueryLength != 64<<10 || o.maxQueryDepth != 128 || o.maxJSONDepth != 512 || o.maxChangeVectorLength != 64<<10 ||
		o.maxChangeVectorEntries != 1024 || o.maxWorkerMessage != 64<<10 {
		t.Fatalf("defaults %+v", o)
	}
	t.Setenv("ROOKERY_MAX_JSON_DEPTH", "100")
	t.Setenv("ROOKERY_MAX_WORKER_MESSAGE", "4096")
	o, err = parse([]string{"--max-query-length", "1000", "--max-query-depth", "8", "--max-change-vector-length", "500", "--max-change-vector-entries", "9"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.maxQueryLength != 1000 || o.maxQueryDepth != 8 || o.maxJSONDepth != 100 || o.maxChangeVectorLength != 500 ||
		o.maxChangeVectorEntries != 9 || o.maxWorkerMessage != 4096 {
		t.Fatalf("set %+v", o)
	}
}

func freeAddr(t *testing.T) string {
	// The kernel may hand a just-closed port out again; never give the
	// same address to two nodes of this test binary.
	handedMu.Lock()
	defer handedMu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if !handed[addr] {
			handed[addr] = true
			return addr
		}
	}
}

var (
	handedMu sync.Mutex
	handed   = map[string]bool{}
)

// raftAddrFor gives a data directory a stable free Raft address, so a
// restarted node keeps its address.
var raftAddrs = map[string]string{}

func raftAddrFor(t *testing.T, dataDir string) string {
	if a, ok := raftAddrs[dataDir]; ok {
		return a
	}
	a := freeAddr(t)
	raftAddrs[dataDir] = a
	return a
}

type node struct {
	cmd  *exec.Cmd
	url  string
	logs *bytes.Buffer
	done chan error
}

func start(t *testing.T, dataDir, addr string) *node {
	t.Helper()
	n := &node{url: "http://" + addr, logs: &bytes.Buffer{}, done: make(chan error, 1)}
	n.cmd = exec.Command(binary, "serve", "--http", addr, "--data-dir", dataDir, "--node-tag", "A", "--raft-addr", raftAddrFor(t, dataDir))
	n.cmd.Stdout = n.logs
	n.cmd.Stderr = n.logs
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.done <- n.cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(n.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return n
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.cmd.Process.Kill()
	t.Fatalf("node did not become ready; logs:\n%s", n.logs)
	return nil
}

func (n *node) kill9(t *testing.T) {
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
}

func request(method, url, body string) (*http.Response, []byte, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// writers loop over single PUTs and small batches until they fail; every id
// whose request got 201 is recorded.
func writeUntilKilled(n *node, stop <-chan struct{}, writers int, count *atomic.Int64) []string {
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var ids []string
				var resp *http.Response
				var err error
				if i%2 == 0 {
					id := fmt.Sprintf("w%d-%d/%d", w, time.Now().UnixNano(), i)
					ids = []string{id}
					resp, _, err = request("PUT", n.url+"/databases/dur/docs?id="+id, `{"w":1,"@metadata":{"@collection":"Dur"}}`)
				} else {
					var cmds []string
					for j := 0; j < 5; j++ {
						id := fmt.Sprintf("b%d-%d/%d-%d", w, time.Now().UnixNano(), i, j)
						ids = append(ids, id)
						cmds = append(cmds, `{"Id":"`+id+`","Type":"PUT","Document":{"b":1,"@metadata":{"@collection":"Dur"}}}`)
					}
					resp, _, err = request("POST", n.url+"/databases/dur/bulk_docs", `{"Commands":[`+strings.Join(cmds, ",")+`]}`)
				}
				if err != nil {
					return // the node is gone
				}
				if resp.StatusCode == http.StatusCreated {
					mu.Lock()
					acked = append(acked, ids...)
					mu.Unlock()
					if count != nil {
						count.Add(int64(len(ids)))
					}
				}
			}
		}(w)
	}
	wg.Wait()
	return acked
}

// A write that got 201 survives kill -9, and the database opens clean.
func TestDurabilityUnderKill9(t *testing.T) {
	dataDir := t.TempDir()
	addr := freeAddr(t)
	n := start(t, dataDir, addr)
	if resp, body, err := request("PUT", n.url+"/admin/databases?name=dur", `{"DatabaseName":"dur"}`); err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %v %s", err, body)
	}
	var all []string
	rounds := 5
	if testing.Short() {
		rounds = 2
	}
	for round := 0; round < rounds; round++ {
		stop := make(chan struct{})
		result := make(chan []string)
		var count atomic.Int64
		go func() { result <- writeUntilKilled(n, stop, 4, &count) }()
		// Kill mid-stream once some writes were acknowledged (a slow,
		// loaded machine takes longer to get there; no fixed sleep).
		deadline := time.Now().Add(60 * time.Second)
		for count.Load() < int64(40+round*30) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		n.kill9(t)
		close(stop)
		acked := <-result
		if len(acked) == 0 {
			t.Fatalf("round %d: no write was acknowledged before the kill", round)
		}
		all = append(all, acked...)

		// The file opens clean and its counters agree with its rows.
		db, err := storage.Open(filepath.Join(dataDir, "databases", "dur", "documents.db"), storage.Options{NodeTag: "A"})
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		if err := db.IntegrityCheck(context.Background()); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		db.Close()

		n = start(t, dataDir, addr)
		missing := 0
		for i := 0; i < len(all); i += 200 {
			chunk := all[i:min(i+200, len(all))]
			body, _ := json.Marshal(map[string]any{"Ids": chunk})
			resp, b, err := request("POST", n.url+"/databases/dur/docs", string(body))
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("round %d: load: %v %s", round, err, b)
			}
			var res struct{ Results []json.RawMessage }
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			for j, r := range res.Results {
				if string(r) == "null" {
					missing++
					t.Errorf("round %d: acknowledged %s is missing", round, chunk[j])
				}
			}
		}
		if missing > 0 {
			t.Fatalf("round %d: %d of %d acknowledged writes lost", round, missing, len(all))
		}
		t.Logf("round %d: %d acknowledged writes, all present after kill -9", round, len(all))
	}
	n.kill9(t)
}

// SIGTERM lets in-flight writes finish, then closes the databases: the
// process exits 0 and everything acknowledged is there.
func TestGracefulShutdown(t *testing.T) {
	dataDir := t.TempDir()
	addr := freeAddr(t)
	n := start(t, dataDir, addr)
	if resp, _, err := request("PUT", n.url+"/admin/databases?name=dur", `{"DatabaseName":"dur"}`); err != nil || resp.StatusCode != 201 {
		t.Fatal("create failed")
	}
	stop := make(chan struct{})
	result := make(chan []string)
	go func() { result <- writeUntilKilled(n, stop, 4, nil) }()
	time.Sleep(300 * time.Millisecond)
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := <-n.done
	close(stop)
	acked := <-result
	if err != nil {
		t.Fatalf("exit: %v; logs:\n%s", err, n.logs)
	}
	if !strings.Contains(n.logs.String(), "shut down cleanly") {
		t.Fatalf("no clean shutdown in logs:\n%s", n.logs)
	}
	db, err := storage.Open(filepath.Join(dataDir, "databases", "dur", "documents.db"), storage.Options{NodeTag: "A"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.IntegrityCheck(context.Background()); err != nil {
		t.Fatal(err)
	}
	docs, err := db.GetMany(context.Background(), acked)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range docs {
		if d == nil {
			t.Fatalf("acknowledged %s missing after graceful shutdown", acked[i])
		}
	}
	if len(acked) == 0 {
		t.Fatal("nothing was written")
	}
}
