package main

// Findings 7 and 11: no acknowledged write is lost in silence. Real
// processes of the built binary, real files, kill -9.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spawnLive starts a single node with extra flags and waits until it
// answers /livez (its /readyz may rightly say 503: a damaged database).
func spawnLive(t *testing.T, dataDir, addr string, extra ...string) *node {
	t.Helper()
	n := &node{url: "http://" + addr, logs: &bytes.Buffer{}, done: make(chan error, 1)}
	args := append([]string{"serve", "--http", addr, "--data-dir", dataDir, "--node-tag", "A", "--raft-addr", raftAddrFor(t, dataDir)}, extra...)
	n.cmd = exec.Command(binary, args...)
	n.cmd.Stdout = n.logs
	n.cmd.Stderr = n.logs
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.done <- n.cmd.Wait() }()
	t.Cleanup(func() { _ = n.cmd.Process.Signal(syscall.SIGKILL) })
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-n.done:
			n.done <- err
			t.Fatalf("node exited (%v) before it served; logs:\n%s", err, n.logs)
		default:
		}
		if resp, err := http.Get(n.url + "/livez"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return n
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("node did not serve; logs:\n%s", n.logs)
	return nil
}

// stopGracefully sends SIGTERM and waits: the databases close, their WAL
// folded into the main file.
func (n *node) stopGracefully(t *testing.T) {
	t.Helper()
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-n.done; err != nil {
		t.Fatalf("graceful stop: %v; logs:\n%s", err, n.logs)
	}
}

func mustStatus(t *testing.T, method, u, body string, want int) []byte {
	t.Helper()
	resp, b, err := request(method, u, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, u, resp.StatusCode, b, want)
	}
	return b
}

func putDocs(t *testing.T, base, db, prefix string, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s/%d", prefix, i)
		mustStatus(t, "PUT", base+"/databases/"+db+"/docs?id="+url.QueryEscape(id), fmt.Sprintf(`{"N":%d,"@metadata":{"@collection":"Items"}}`, i), http.StatusCreated)
		ids = append(ids, id)
	}
	return ids
}

// present counts which of ids a node serves.
func present(t *testing.T, base, db string, ids []string) int {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"Ids": ids})
	resp, b, err := request("POST", base+"/databases/"+db+"/docs", string(body))
	if err != nil || resp.StatusCode != 200 {
		return -1
	}
	var res struct{ Results []json.RawMessage }
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("load: %v %s", err, b)
	}
	n := 0
	for _, r := range res.Results {
		if string(r) != "null" {
			n++
		}
	}
	return n
}

// Finding 7: a database whose name ends in ".deleting" (any case) keeps
// its acknowledged writes across kill -9 and a clean restart; deletes leave
// nothing behind in databases/.
func TestSecurityF7DeletingSuffixKeepsWrites(t *testing.T) {
	dataDir := t.TempDir()
	addr := freeAddr(t)
	n := start(t, dataDir, addr)
	names := []string{"x.deleting", "Y.DELETING", "orders.Deleting"}
	written := map[string][]string{}
	for _, db := range append(names, "gone") {
		mustStatus(t, "PUT", n.url+"/admin/databases?name="+db, `{"DatabaseName":"`+db+`"}`, http.StatusCreated)
		written[db] = putDocs(t, n.url, db, "items", 25)
	}
	mustStatus(t, "DELETE", n.url+"/admin/databases", `{"DatabaseNames":["gone"],"HardDelete":true}`, http.StatusOK)
	check := func(when string) {
		t.Helper()
		for _, db := range names {
			if got := present(t, n.url, db, written[db]); got != len(written[db]) {
				t.Fatalf("%s: database %s serves %d of %d acknowledged documents; logs:\n%s", when, db, got, len(written[db]), n.logs)
			}
		}
		entries, _ := os.ReadDir(filepath.Join(dataDir, "databases"))
		var dirs []string
		for _, e := range entries {
			dirs = append(dirs, e.Name())
		}
		if strings.Contains(strings.Join(dirs, ","), "gone") {
			t.Fatalf("%s: a deleted database's directory is still in databases/: %v", when, dirs)
		}
	}
	check("before any restart")
	n.kill9(t)
	n = start(t, dataDir, addr)
	check("after kill -9")
	n.stopGracefully(t)
	n = start(t, dataDir, addr)
	check("after a clean restart")
	trash, _ := os.ReadDir(filepath.Join(dataDir, "trash"))
	if len(trash) != 0 {
		t.Fatalf("the trash was not emptied at start: %d entries", len(trash))
	}
	n.kill9(t)
}

// expectDamaged checks every way a damaged database is reported, and that
// another database of the node serves.
func expectDamaged(t *testing.T, n *node, db, reason, healthy string, healthyIDs []string) {
	t.Helper()
	resp, body, err := request("GET", n.url+"/readyz", "")
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), db+": "+reason) {
		t.Fatalf("/readyz: %v %v %q; want 503 naming %s (%s); logs:\n%s", resp != nil && resp.StatusCode == 200, err, body, db, reason, n.logs)
	}
	_, metrics, _ := request("GET", n.url+"/metrics", "")
	if want := fmt.Sprintf(`rookery_database_damaged{database=%q,reason=%q} 1`, db, reason); !strings.Contains(string(metrics), want) {
		t.Fatalf("/metrics lacks %s", want)
	}
	for _, method := range []string{"GET", "PUT"} {
		resp, body, err := request(method, n.url+"/databases/"+db+"/docs?id=items/1", `{"@metadata":{"@collection":"Items"}}`)
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("%s on the damaged database: %v %s; want 503", method, err, body)
		}
		var env envelope
		if err := json.Unmarshal(body, &env); err != nil || !strings.Contains(env.Type, "DatabaseDisabledException") ||
			!strings.Contains(env.Message, "damaged") || !strings.Contains(env.Message, "/admin/databases/reseed?name="+db) {
			t.Fatalf("%s on the damaged database: envelope %s", method, body)
		}
	}
	if got := present(t, n.url, healthy, healthyIDs); got != len(healthyIDs) {
		t.Fatalf("the healthy database %s serves %d of %d documents", healthy, got, len(healthyIDs))
	}
	mustStatus(t, "PUT", n.url+"/databases/"+healthy+"/docs?id=after/1", `{"@metadata":{"@collection":"Items"}}`, http.StatusCreated)
	_, page, _ := request("GET", n.url+"/studio/databases", "")
	_, alertsPage, _ := request("GET", n.url+"/studio/alerts", "")
	if !strings.Contains(string(page), "Damaged: "+reason) || !strings.Contains(string(alertsPage), "is damaged and not served") {
		t.Fatalf("the studio shows no damage badge (Databases page) and alert (Alerts page) for %s", db)
	}
}

// Finding 11: a WAL cut or garbled after acknowledged commits is reported,
// never served; the node's other databases serve on; the damaged copy
// accepts no write (so no etag is reused); a lone copy is not re-seeded.
func TestSecurityF11LostWALIsReported(t *testing.T) {
	for _, how := range []string{"truncated", "garbled"} {
		t.Run(how, func(t *testing.T) {
			dataDir := t.TempDir()
			addr := freeAddr(t)
			n := start(t, dataDir, addr)
			for _, db := range []string{"dmg", "ok"} {
				mustStatus(t, "PUT", n.url+"/admin/databases?name="+db, `{"DatabaseName":"`+db+`"}`, http.StatusCreated)
			}
			okIDs := putDocs(t, n.url, "ok", "items", 10)
			putDocs(t, n.url, "dmg", "items", 120) // 120 commits, each acknowledged with 201
			n.kill9(t)
			wal := filepath.Join(dataDir, "databases", "dmg", "documents.db-wal")
			fi, err := os.Stat(wal)
			if err != nil || fi.Size() < 32+3*4120 {
				t.Fatalf("WAL after kill -9: %v %v", fi, err)
			}
			keep := int64(32 + 2*4120) // the header and two frames
			if how == "truncated" {
				err = os.Truncate(wal, keep)
			} else {
				var f *os.File
				if f, err = os.OpenFile(wal, os.O_WRONLY, 0); err == nil {
					_, err = f.WriteAt([]byte(strings.Repeat("garbage!", 64)), keep+100)
					f.Close()
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			n = spawnLive(t, dataDir, addr)
			expectDamaged(t, n, "dmg", "etag-regression", "ok", okIDs)
			b := mustStatus(t, "POST", n.url+"/admin/databases/reseed?name=dmg", "", http.StatusBadRequest)
			if !strings.Contains(string(b), "no other member") {
				t.Fatalf("re-seed of a lone copy: %s", b)
			}
			// Still damaged after another restart: nothing was served or
			// written in between.
			n.kill9(t)
			n = spawnLive(t, dataDir, addr)
			expectDamaged(t, n, "dmg", "etag-regression", "ok", okIDs)
			n.kill9(t)
		})
	}
}

// Finding 11: a truncated database file no longer stops the node.
func TestSecurityF11TruncatedDatabaseFile(t *testing.T) {
	dataDir := t.TempDir()
	addr := freeAddr(t)
	n := start(t, dataDir, addr)
	for _, db := range []string{"dmg", "ok"} {
		mustStatus(t, "PUT", n.url+"/admin/databases?name="+db, `{"DatabaseName":"`+db+`"}`, http.StatusCreated)
	}
	okIDs := putDocs(t, n.url, "ok", "items", 10)
	putDocs(t, n.url, "dmg", "items", 200)
	n.stopGracefully(t)
	path := filepath.Join(dataDir, "databases", "dmg", "documents.db")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	n = spawnLive(t, dataDir, addr)
	expectDamaged(t, n, "dmg", "unreadable", "ok", okIDs)
	n.kill9(t)
}

// Finding 11: garbage in raft.db is one line saying what to do, never a
// panic or a fault.
func TestSecurityF11GarbageRaftDB(t *testing.T) {
	dataDir := t.TempDir()
	addr := freeAddr(t)
	n := start(t, dataDir, addr)
	mustStatus(t, "PUT", n.url+"/admin/databases?name=x", `{"DatabaseName":"x"}`, http.StatusCreated)
	n.stopGracefully(t)
	raftDB := filepath.Join(dataDir, "raft", "raft.db")
	good, err := os.ReadFile(raftDB)
	if err != nil || len(good) < 3*4096 {
		t.Fatalf("raft.db: %d bytes, %v", len(good), err)
	}
	variants := map[string][]byte{
		"zeroed after the meta pages": append(append([]byte(nil), good[:8192]...), make([]byte, len(good)-8192)...),
		"truncated":                   good[:len(good)/2],
		"text":                        []byte(strings.Repeat("not a raft log\n", 300)),
	}
	for name, content := range variants {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(raftDB, content, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(binary, "serve", "--http", addr, "--data-dir", dataDir, "--node-tag", "A", "--raft-addr", raftAddrFor(t, dataDir))
			done := make(chan struct{})
			var out []byte
			var runErr error
			go func() { out, runErr = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("the node did not stop on a broken raft.db; output:\n%s", out)
			}
			text := string(out)
			if runErr == nil || strings.Contains(text, "goroutine ") || strings.Contains(text, "panic") || strings.Contains(text, "fatal error") {
				t.Fatalf("exit %v; want one error line and no panic; output:\n%s", runErr, text)
			}
			var line string
			for _, l := range strings.Split(text, "\n") {
				if strings.Contains(l, "raft.db") {
					if line != "" {
						t.Fatalf("more than one line about raft.db:\n%s", text)
					}
					line = l
				}
			}
			if !strings.HasPrefix(line, "studio: ") || !strings.Contains(line, raftDB+" is not a valid Raft log store") || !strings.Contains(line, "move it away") {
				t.Fatalf("the error line %q does not explain; output:\n%s", line, text)
			}
		})
	}
	if err := os.WriteFile(raftDB, good, 0o600); err != nil {
		t.Fatal(err)
	}
	n = start(t, dataDir, addr)
	n.kill9(t)
}

// waitLive restarts a cluster node without waiting for /readyz.
func (n *cnode) waitLive(t *testing.T) {
	t.Helper()
	eventually(t, 30*time.Second, "node "+n.name+" serves", func() (bool, string) {
		if !n.running() {
			t.Fatalf("node %s exited; log:\n%s", n.name, n.logs.tail(40))
		}
		st, _, err := call("GET", n.url+"/livez", "")
		return err == nil && st == 200, fmt.Sprint(st, err)
	})
}

func dbStats(t *testing.T, n *cnode, db string) (id string, lastEtag int64, docs int64) {
	t.Helper()
	var s struct {
		DatabaseId       string
		LastDocEtag      int64
		CountOfDocuments int64
	}
	if err := getJSON(n.url+"/databases/"+db+"/stats", &s); err != nil {
		t.Fatal(err)
	}
	return s.DatabaseId, s.LastDocEtag, s.CountOfDocuments
}

// Finding 11: an older copy of A's files (a restored backup, consistent
// with its own etag mark) is caught by what B has acknowledged from A; A
// stops serving it, and a re-seed brings every document back from B under
// a new database id.
func TestSecurityF11PeerRegressionAndReseed(t *testing.T) {
	a := newNode(t, "A", "A", "")
	b := newNode(t, "B", "B", a.url)
	tc := startNodes(t, a, b)
	tc.createDatabase(t, a, "shop")
	var early, late, fromB []string
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("early/%d", i)
		if st, body, err := putDoc(a, "shop", id, id); err != nil || st != http.StatusCreated {
			t.Fatalf("put %s: %d %v %s", id, st, err, body)
		}
		early = append(early, id)
	}
	oldID, _, _ := dbStats(t, a, "shop")
	// A clean stop, and a copy of A's database directory: the "backup".
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	<-a.exited
	dir := filepath.Join(a.dataDir, "databases", "shop")
	backup := filepath.Join(t.TempDir(), "shop-backup")
	if err := os.CopyFS(backup, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	a.start(t)
	for i := 0; i < 30; i++ {
		id := fmt.Sprintf("late/%d", i)
		if st, body, err := putDoc(a, "shop", id, id); err != nil || st != http.StatusCreated {
			t.Fatalf("put %s: %d %v %s", id, st, err, body)
		}
		late = append(late, id)
	}
	for i := 0; i < 5; i++ {
		id := fmt.Sprintf("fromB/%d", i)
		if st, body, err := putDoc(b, "shop", id, id); err != nil || st != http.StatusCreated {
			t.Fatalf("put %s on B: %d %v %s", id, st, err, body)
		}
		fromB = append(fromB, id)
	}
	all := append(append(append([]string{}, early...), late...), fromB...)
	eventually(t, 30*time.Second, "B has every document of A", func() (bool, string) {
		got := tokens(t, b, "shop", all)
		for _, id := range all {
			if got[id] == "<missing>" {
				return false, id + " missing on B"
			}
		}
		return true, ""
	})
	_, ackedEtag, _ := dbStats(t, a, "shop")
	// A dies; its database directory is replaced by the older copy.
	a.kill9()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(backup)); err != nil {
		t.Fatal(err)
	}
	a.spawn(t)
	a.waitLive(t)
	eventually(t, 20*time.Second, "A reports shop damaged", func() (bool, string) {
		st, body, err := call("GET", a.url+"/readyz", "")
		return err == nil && st == http.StatusServiceUnavailable && strings.Contains(string(body), "shop: peer-regression"), fmt.Sprintf("%d %v %s", st, err, body)
	})
	st, body, _ := call("GET", a.url+"/databases/shop/docs?id="+url.QueryEscape(late[0]), "")
	// B's stored position for A may stop short of A's last etag: items B
	// already had (those B wrote itself) move the position without a
	// write of their own. It is past the restored copy's end either way.
	var named int64
	if m := regexp.MustCompile(`up to etag (\d+)`).FindSubmatch(body); m != nil {
		named, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if st != http.StatusServiceUnavailable || named <= int64(len(early)) || named > ackedEtag {
		t.Fatalf("A still answers for shop: %d %s (want 503 naming an etag in (%d, %d])", st, body, len(early), ackedEtag)
	}
	_, metrics, _ := call("GET", a.url+"/metrics", "")
	if !strings.Contains(string(metrics), `rookery_database_damaged{database="shop",reason="peer-regression"} 1`) {
		t.Fatal("/metrics on A lacks the damaged gauge")
	}
	// The verdict survives a restart (the older copy would open cleanly).
	a.kill9()
	a.spawn(t)
	a.waitLive(t)
	if st, body, _ := call("GET", a.url+"/readyz", ""); st != http.StatusServiceUnavailable || !strings.Contains(string(body), "shop: peer-regression") {
		t.Fatalf("after a restart A's /readyz: %d %s", st, body)
	}
	// The studio offers the way out.
	if _, page, _ := call("GET", a.url+"/studio/databases", ""); !strings.Contains(string(page), `data-testid="database-reseed"`) || !strings.Contains(string(page), "Damaged: peer-regression") {
		t.Fatal("the studio's Databases page on A shows no damage badge and Re-seed button for shop")
	}
	// Re-seed from B.
	st, body, err := callWith(writeClient, "POST", a.url+"/admin/databases/reseed?name=shop", "")
	if err != nil || st != http.StatusOK {
		t.Fatalf("reseed: %d %v %s", st, err, body)
	}
	var res struct{ Message string }
	_ = json.Unmarshal(body, &res)
	kept := filepath.Join(a.dataDir, "damaged")
	if entries, _ := os.ReadDir(kept); len(entries) != 1 || !strings.Contains(res.Message, kept) {
		t.Fatalf("the damaged copy is not kept in %s (%d entries); message %q", kept, len(entries), res.Message)
	}
	eventually(t, 30*time.Second, "A serves every document again", func() (bool, string) {
		st, _, err := call("GET", a.url+"/readyz", "")
		if err != nil || st != 200 {
			return false, fmt.Sprint("readyz ", st, err)
		}
		got := tokens(t, a, "shop", all)
		for _, id := range all {
			if got[id] != id {
				return false, id + " on A: " + got[id]
			}
		}
		return true, ""
	})
	newID, _, _ := dbStats(t, a, "shop")
	if newID == oldID || newID == "" {
		t.Fatalf("the re-seeded copy kept database id %q", oldID)
	}
	// It takes writes again, and they reach B.
	if st, body, err := putDoc(a, "shop", "after/1", "after"); err != nil || st != http.StatusCreated {
		t.Fatalf("write after re-seed: %d %v %s", st, err, body)
	}
	eventually(t, 20*time.Second, "the new copy replicates to B", func() (bool, string) {
		got := tokens(t, b, "shop", []string{"after/1"})
		return got["after/1"] == "after", got["after/1"]
	})
}

// A database whose deletion was committed but whose files were still on
// disk when the node died (here: put back by hand) is not served again nor
// adopted back into the cluster: a node that restarts waits until its
// state is current, then removes files no record owns.
func TestSecurityF7DeletedDatabaseStaysDeleted(t *testing.T) {
	dataDir := t.TempDir()
	addr := freeAddr(t)
	n := start(t, dataDir, addr)
	for _, db := range []string{"gone", "kept"} {
		mustStatus(t, "PUT", n.url+"/admin/databases?name="+db, `{"DatabaseName":"`+db+`"}`, http.StatusCreated)
		putDocs(t, n.url, db, "items", 5)
	}
	n.stopGracefully(t)
	dir := filepath.Join(dataDir, "databases", "gone")
	backup := filepath.Join(t.TempDir(), "gone")
	if err := os.CopyFS(backup, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	n = start(t, dataDir, addr)
	mustStatus(t, "DELETE", n.url+"/admin/databases", `{"DatabaseNames":["gone"],"HardDelete":true}`, http.StatusOK)
	n.kill9(t)
	if err := os.CopyFS(dir, os.DirFS(backup)); err != nil {
		t.Fatal(err)
	}
	n = start(t, dataDir, addr)
	resp, body, err := request("GET", n.url+"/databases/gone/docs?id=items/0", "")
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "DatabaseDoesNotExist") {
		t.Fatalf("the deleted database answers: %v %v %s", err, resp, body)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the deleted database's files are still in databases/: %v", err)
	}
	resp, body, _ = request("GET", n.url+"/databases", "")
	if resp.StatusCode != 200 || strings.Contains(string(body), `"gone"`) || !strings.Contains(string(body), `"kept"`) {
		t.Fatalf("databases: %d %s", resp.StatusCode, body)
	}
	n.kill9(t)
}
