package main

// Attachments through real processes: kill -9 while they are being
// written, and concurrent attachments on one document across three nodes
// behind fault proxies.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/internal/faultproxy"
)

// attContent is generated test content (never committed).
func attContent(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func attHash(b []byte) string {
	s := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(s[:])
}

func putAttachmentHTTP(cl *http.Client, base, db, id, name, ct string, data []byte) (int, []byte, error) {
	u := fmt.Sprintf("%s/databases/%s/attachments?id=%s&name=%s&contentType=%s", base, db, url.QueryEscape(id), url.QueryEscape(name), url.QueryEscape(ct))
	req, err := http.NewRequest("PUT", u, bytes.NewReader(data))
	if err != nil {
		return 0, nil, err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// getAttachmentHTTP returns the status, the content's SHA-256 and the
// Attachment-Hash header.
func getAttachmentHTTP(base, db, id, name string) (int, string, string, error) {
	resp, err := http.Get(fmt.Sprintf("%s/databases/%s/attachments?id=%s&name=%s", base, db, url.QueryEscape(id), url.QueryEscape(name)))
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, resp.Body); err != nil {
		return resp.StatusCode, "", "", err
	}
	return resp.StatusCode, base64.StdEncoding.EncodeToString(h.Sum(nil)), resp.Header.Get("Attachment-Hash"), nil
}

type ackedAttachment struct{ id, name, hash string }

// Every attachment whose PUT got 201 is there byte for byte after kill -9,
// and the file opens clean.
func TestAttachmentsSurviveKill9(t *testing.T) {
	dataDir := t.TempDir()
	addr := freeAddr(t)
	n := start(t, dataDir, addr)
	if resp, body, err := request("PUT", n.url+"/admin/databases?name=att", `{"DatabaseName":"att"}`); err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %v %s", err, body)
	}
	cl := &http.Client{Timeout: 30 * time.Second}
	var all []ackedAttachment
	for round := 0; round < 2; round++ {
		var mu sync.Mutex
		var acked []ackedAttachment
		var count atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					id := fmt.Sprintf("k%d-%d/%d", round, w, i)
					resp, _, err := request("PUT", n.url+"/databases/att/docs?id="+id, `{"@metadata":{"@collection":"K"}}`)
					if err != nil || resp.StatusCode != 201 {
						return
					}
					seed := uint64(round*1_000_000 + w*10_000 + i)
					for j := 0; j < 2; j++ {
						// 1 KiB to ~700 KiB: one to three chunks; the second
						// attachment of every tenth document repeats the
						// first's content (stored once).
						data := attContent(seed*2+uint64(j), 1024+int(seed*7919%(700<<10)))
						if j == 1 && i%10 == 0 {
							data = attContent(seed*2, 1024+int(seed*7919%(700<<10)))
						}
						name := fmt.Sprintf("file-%d.bin", j)
						st, _, err := putAttachmentHTTP(cl, n.url, "att", id, name, "application/octet-stream", data)
						if err != nil {
							return
						}
						if st == 201 {
							mu.Lock()
							acked = append(acked, ackedAttachment{id, name, attHash(data)})
							mu.Unlock()
							count.Add(1)
						}
					}
				}
			}(w)
		}
		deadline := time.Now().Add(60 * time.Second)
		for count.Load() < int64(30+round*20) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		n.kill9(t)
		close(stop)
		wg.Wait()
		if len(acked) == 0 {
			t.Fatalf("round %d: no attachment acknowledged before the kill", round)
		}
		all = append(all, acked...)

		db, err := storage.Open(filepath.Join(dataDir, "databases", "att", "documents.db"), storage.Options{NodeTag: "A"})
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		if err := db.IntegrityCheck(context.Background()); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		db.Close()

		n = start(t, dataDir, addr)
		for _, a := range all {
			st, got, header, err := getAttachmentHTTP(n.url, "att", a.id, a.name)
			if err != nil || st != 200 || got != a.hash || header != a.hash {
				t.Fatalf("round %d: acknowledged %s/%s: status %d, content %s, header %s, want %s (%v)", round, a.id, a.name, st, got, header, a.hash, err)
			}
		}
		t.Logf("round %d: %d acknowledged attachments, all byte-exact after kill -9", round, len(all))
	}
	n.kill9(t)
}

type attDoc struct {
	cv    string
	names []string // name=hash
}

func attachmentsOn(n *cnode, db, id string) (*attDoc, error) {
	resp, err := http.Get(n.url + "/databases/" + db + "/docs?id=" + url.QueryEscape(id))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %d", id, resp.StatusCode)
	}
	var out struct {
		Results []struct {
			Metadata struct {
				CV          string                  `json:"@change-vector"`
				Flags       string                  `json:"@flags"`
				Attachments []storage.AttachmentRef `json:"@attachments"`
			} `json:"@metadata"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	if len(out.Results) != 1 {
		return nil, fmt.Errorf("GET %s: %d results", id, len(out.Results))
	}
	m := out.Results[0].Metadata
	d := &attDoc{cv: m.CV}
	for _, a := range m.Attachments {
		d.names = append(d.names, a.Name+"="+a.Hash)
	}
	if len(m.Attachments) > 0 && !strings.Contains(m.Flags, "HasAttachments") {
		return nil, fmt.Errorf("%s lists attachments without the HasAttachments flag: %q", id, m.Flags)
	}
	sort.Strings(d.names)
	return d, nil
}

// Attachments added to the same documents on three partitioned nodes, then
// more while random links fail (cut, dropped, delayed, corrupted): once
// healed, every node has the same document versions listing the union of
// the attachments (for a name written on several nodes, one version
// everywhere), no conflict, and serves every content byte for byte.
func TestConvergenceAttachmentsUnion(t *testing.T) {
	const db = "attconv"
	pc := startProxiedCluster(t)
	pc.createDatabase(t, pc.nodes[0], db)
	docs := []string{"shared/1", "shared/2"}
	for _, id := range docs {
		if st, b, err := putDoc(pc.nodes[0], db, id, "base"); err != nil || st != 201 {
			t.Fatalf("put %s: %d %v %s", id, st, err, b)
		}
	}
	for _, n := range pc.nodes {
		for _, id := range docs {
			eventually(t, 20*time.Second, id+" on "+n.name, func() (bool, string) {
				_, err := attachmentsOn(n, db, id)
				return err == nil, fmt.Sprint(err)
			})
		}
	}
	cl := &http.Client{Timeout: 20 * time.Second}
	want := map[string]map[string]string{} // id -> name -> candidate hashes (winner computed below)
	cands := map[string]map[string][]string{}
	var mu sync.Mutex
	put := func(n *cnode, id, name string, data []byte) bool {
		st, _, err := putAttachmentHTTP(cl, n.url, db, id, name, "application/octet-stream", data)
		if err != nil || st != 201 {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if cands[id] == nil {
			cands[id] = map[string][]string{}
		}
		cands[id][name] = append(cands[id][name], attHash(data))
		return true
	}
	// Partitioned: every node adds its own attachment and one of a shared
	// name (different bytes on each) to both documents.
	pc.faultAll(faultproxy.Fault{Mode: faultproxy.Cut})
	for i, n := range pc.nodes {
		for _, id := range docs {
			if !put(n, id, "from-"+n.name+".bin", attContent(uint64(100+i), 300<<10)) ||
				!put(n, id, "common.bin", attContent(uint64(200+i), 5000+i)) {
				t.Fatalf("put on %s (partitioned) failed", n.name)
			}
		}
	}
	attachmentsUnderChaos(t, pc, docs, put)
	pc.healAll()

	for id, names := range cands {
		want[id] = map[string]string{}
		for name, hs := range names {
			sort.Strings(hs)
			want[id][name] = hs[len(hs)-1] // the greater hash wins a name
		}
	}
	eventually(t, 90*time.Second, "the nodes agree on the attachments", func() (bool, string) {
		for _, id := range docs {
			var first *attDoc
			for _, n := range pc.nodes {
				d, err := attachmentsOn(n, db, id)
				if err != nil {
					return false, n.name + ": " + err.Error()
				}
				var exp []string
				for name, h := range want[id] {
					exp = append(exp, name+"="+h)
				}
				sort.Strings(exp)
				if strings.Join(d.names, ",") != strings.Join(exp, ",") {
					return false, fmt.Sprintf("%s %s: %v, want %v", n.name, id, d.names, exp)
				}
				if first == nil {
					first = d
				} else if d.cv != first.cv {
					return false, fmt.Sprintf("%s %s: change vector %s, other %s", n.name, id, d.cv, first.cv)
				}
			}
		}
		return true, ""
	})
	for _, n := range pc.nodes {
		var conflicts struct{ TotalResults int }
		if err := getJSON(n.url+"/databases/"+db+"/replication/conflicts", &conflicts); err != nil {
			t.Fatal(err)
		}
		if conflicts.TotalResults != 0 {
			t.Errorf("%s: %d conflicts; versions differing only in attachments must merge", n.name, conflicts.TotalResults)
		}
		// Every listed content is served. A chunk re-stamped on a relaying
		// node takes a new etag and can travel after the version that
		// lists it, so content may come a little after the lists agree.
		for id, names := range want {
			for name, h := range names {
				asked := time.Now()
				late := false
				eventually(t, 30*time.Second, n.name+" serves "+id+"/"+name, func() (bool, string) {
					st, got, _, err := getAttachmentHTTP(n.url, db, id, name)
					if err != nil || st != 200 || got != h {
						late = true
						return false, fmt.Sprintf("%d %s, want %s (%v)", st, got, h, err)
					}
					return true, ""
				})
				if late {
					t.Logf("%s: %s/%s served %s after the lists agreed", n.name, id, name, time.Since(asked).Round(time.Millisecond))
				}
			}
		}
	}
}

// attachmentsUnderChaos adds attachments on every node while random links
// fail.
func attachmentsUnderChaos(t *testing.T, pc *proxiedCluster, docs []string, put func(n *cnode, id, name string, data []byte) bool) {
	stop := make(chan struct{})
	chaosDone := make(chan struct{})
	started := time.Now()
	go func() {
		defer close(chaosDone)
		pc.chaos(t, stop, rand.New(rand.NewPCG(uint64(started.UnixNano()), 0)), started)
	}()
	var wg sync.WaitGroup
	for i, n := range pc.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 12; k++ {
				id := docs[k%len(docs)]
				put(n, id, fmt.Sprintf("chaos-%s-%d.bin", n.name, k), attContent(uint64(1000+i*100+k), 1000+k*25000))
				time.Sleep(250 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-chaosDone
	pc.healAll()
}

// A document deleted on one node takes its attachment content with it on
// every node: at once where it was deleted, and after
// --attachments-collect-after where the delete came by replication. A
// content another document still lists stays everywhere.
func TestReplicatedDeleteCollectsContent(t *testing.T) {
	const db = "attgc"
	tc := startCluster(t, "--attachments-collect-after", "2s")
	a := tc.nodes[0]
	tc.createDatabase(t, a, db)
	cl := &http.Client{Timeout: 20 * time.Second}
	own, shared := attContent(301, 600<<10), attContent(302, 4000)
	for _, id := range []string{"gc/1", "gc/2"} {
		if st, b, err := putDoc(a, db, id, id); err != nil || st != 201 {
			t.Fatalf("put %s: %d %v %s", id, st, err, b)
		}
	}
	for _, p := range []struct {
		id, name string
		data     []byte
	}{{"gc/1", "own.bin", own}, {"gc/1", "shared.bin", shared}, {"gc/2", "shared.bin", shared}} {
		if st, b, err := putAttachmentHTTP(cl, a.url, db, p.id, p.name, "application/octet-stream", p.data); err != nil || st != 201 {
			t.Fatalf("attachment %s/%s: %d %v %s", p.id, p.name, st, err, b)
		}
	}
	unique := func(n *cnode) (int64, error) {
		var s struct{ CountOfUniqueAttachments int64 }
		err := getJSON(n.url+"/databases/"+db+"/stats", &s)
		return s.CountOfUniqueAttachments, err
	}
	for _, n := range tc.nodes {
		eventually(t, 30*time.Second, "both contents on "+n.name, func() (bool, string) {
			st, got, _, err := getAttachmentHTTP(n.url, db, "gc/1", "own.bin")
			if err != nil || st != 200 || got != attHash(own) {
				return false, fmt.Sprintf("own.bin: %d %v", st, err)
			}
			u, err := unique(n)
			return err == nil && u == 2, fmt.Sprintf("%d unique contents (%v)", u, err)
		})
	}
	if st, b, err := callWith(writeClient, "DELETE", a.url+"/databases/"+db+"/docs?id=gc/1", ""); err != nil || st != 204 {
		t.Fatalf("delete: %d %v %s", st, err, b)
	}
	if u, err := unique(a); err != nil || u != 1 {
		t.Fatalf("on %s, where the delete happened: %d unique contents (%v), want 1 at once", a.name, u, err)
	}
	for _, n := range tc.nodes {
		eventually(t, 30*time.Second, "the released content deleted on "+n.name, func() (bool, string) {
			u, err := unique(n)
			return err == nil && u == 1, fmt.Sprintf("%d unique contents (%v)", u, err)
		})
		if st, got, _, err := getAttachmentHTTP(n.url, db, "gc/2", "shared.bin"); err != nil || st != 200 || got != attHash(shared) {
			t.Fatalf("%s: the content gc/2 still lists: %d %s %v", n.name, st, got, err)
		}
	}
}
