package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// configureRevisions sets a database's revisions configuration through n
// and waits until every node in all serves it.
func configureRevisions(t *testing.T, n *cnode, all []*cnode, db, cfg string) {
	t.Helper()
	st, b, err := callWith(writeClient, "POST", n.url+"/databases/"+db+"/admin/revisions/config", cfg)
	if err != nil || st != 200 || !strings.Contains(string(b), `"RaftCommandIndex"`) {
		t.Fatalf("configure revisions: %d %v %s", st, err, b)
	}
	for _, m := range all {
		eventually(t, 10*time.Second, "revisions configuration on "+m.name, func() (bool, string) {
			st, b, err := callWith(m.poll(), "GET", m.url+"/databases/"+db+"/revisions/config", "")
			return err == nil && st == 200 && string(b) != "null", fmt.Sprintf("%d %v %s", st, err, b)
		})
	}
}

// putVersion stores a version of id through n and returns its change
// vector when the write was acknowledged ("" otherwise).
func putVersion(n *cnode, db, id string, v int) (string, error) {
	st, b, err := callWith(writeClient, "PUT", n.url+"/databases/"+db+"/docs?id="+url.QueryEscape(id),
		fmt.Sprintf(`{"V":%d,"By":%q,"@metadata":{"@collection":"Items"}}`, v, n.name))
	if err != nil {
		return "", err
	}
	if st != 201 {
		return "", fmt.Errorf("put %s: %d %s", id, st, b)
	}
	var out struct{ ChangeVector string }
	if err := json.Unmarshal(b, &out); err != nil {
		return "", err
	}
	return out.ChangeVector, nil
}

// missingRevisions returns the change vectors of cvs that n does not hold
// as revisions.
func missingRevisions(n *cnode, db string, cvs []string) ([]string, error) {
	var missing []string
	for i := 0; i < len(cvs); i += 100 {
		chunk := cvs[i:min(i+100, len(cvs))]
		q := url.Values{"changeVector": chunk, "metadataOnly": {"true"}}
		st, b, err := callWith(writeClient, "GET", n.url+"/databases/"+db+"/revisions?"+q.Encode(), "")
		if err != nil {
			return nil, err
		}
		if st == 404 {
			missing = append(missing, chunk...)
			continue
		}
		var res struct{ Results []json.RawMessage }
		if st != 200 || json.Unmarshal(b, &res) != nil || len(res.Results) != len(chunk) {
			return nil, fmt.Errorf("revisions by change vector: %d %s", st, b)
		}
		for j, r := range res.Results {
			if string(r) == "null" {
				missing = append(missing, chunk[j])
			}
		}
	}
	return missing, nil
}

// revisionSet is n's revisions of id as sorted "change vector flags" lines.
func revisionSet(n *cnode, db, id string) (string, error) {
	st, b, err := callWith(n.poll(), "GET", n.url+"/databases/"+db+"/revisions?metadataOnly=true&pageSize=1024&id="+url.QueryEscape(id), "")
	if err != nil {
		return "", err
	}
	var res struct {
		Results []struct {
			Meta map[string]any `json:"@metadata"`
		}
		TotalResults int
	}
	if st != 200 || json.Unmarshal(b, &res) != nil {
		return "", fmt.Errorf("%d %s", st, b)
	}
	var lines []string
	for _, r := range res.Results {
		lines = append(lines, fmt.Sprintf("%v %v", r.Meta["@change-vector"], r.Meta["@flags"]))
	}
	sort.Strings(lines)
	return fmt.Sprintf("%d:", res.TotalResults) + strings.Join(lines, "|"), nil
}

// Three copies written concurrently (shared ids conflict and resolve),
// one of them killed -9 and restarted in the middle, end up with the same
// revisions; every acknowledged write's change vector is a revision on
// every copy.
func TestRevisionsConverge(t *testing.T) {
	tc := startCluster(t)
	a := tc.nodes[0]
	tc.createDatabase(t, a, "revs")
	configureRevisions(t, tc.nodes[1], tc.nodes, "revs", `{"Default":{"MinimumRevisionsToKeep":1000}}`)

	var mu sync.Mutex
	var acked []string
	ids := map[string]bool{}
	write := func(nodes []*cnode, from, to int) {
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Add(1)
			go func(n *cnode) {
				defer wg.Done()
				for v := from; v < to; v++ {
					id := fmt.Sprintf("items/shared-%d", v%3)
					if v%2 == 1 {
						id = "items/own-" + n.name
					}
					cv, err := putVersion(n, "revs", id, v)
					if err != nil {
						continue // a node being killed
					}
					mu.Lock()
					acked = append(acked, cv)
					ids[id] = true
					mu.Unlock()
				}
			}(n)
		}
		wg.Wait()
	}
	write(tc.nodes, 0, 12)
	c := tc.byTag["C"]
	c.kill9()
	write(tc.nodes[:2], 12, 24)
	c.start(t)
	write(tc.nodes, 24, 30)

	var idList []string
	for id := range ids {
		idList = append(idList, id)
	}
	sort.Strings(idList)
	eventually(t, 60*time.Second, "the copies hold the same revisions", func() (bool, string) {
		for _, id := range idList {
			want, err := revisionSet(a, "revs", id)
			if err != nil {
				return false, err.Error()
			}
			for _, n := range tc.nodes[1:] {
				got, err := revisionSet(n, "revs", id)
				if err != nil {
					return false, err.Error()
				}
				if got != want {
					return false, fmt.Sprintf("%s on %s:\n%s\nA:\n%s", id, n.name, got, want)
				}
			}
		}
		return true, ""
	})
	for _, n := range tc.nodes {
		missing, err := missingRevisions(n, "revs", acked)
		if err != nil {
			t.Fatal(err)
		}
		if len(missing) > 0 {
			t.Errorf("%s lacks %d of %d acknowledged writes' revisions, e.g. %s", n.name, len(missing), len(acked), missing[0])
		}
	}
	// Conflicts happened on the shared ids and were kept as revisions.
	set, _ := revisionSet(a, "revs", "items/shared-0")
	t.Logf("%d acknowledged writes; items/shared-0 has %s", len(acked), set[:strings.IndexByte(set, ':')])
}

// The revisions of acknowledged writes survive kill -9 of a real process.
func TestRevisionsSurviveKill9(t *testing.T) {
	n := newNode(t, "A", "A", "")
	tc := startNodes(t, n)
	tc.createDatabase(t, n, "revdur")
	configureRevisions(t, n, tc.nodes, "revdur", `{"Default":{"MinimumRevisionsToKeep":100000}}`)

	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for v := 0; ; v++ {
				select {
				case <-stop:
					return
				default:
				}
				cv, err := putVersion(n, "revdur", fmt.Sprintf("items/%d-%d", w, v%5), v)
				if err != nil {
					return
				}
				mu.Lock()
				acked = append(acked, cv)
				mu.Unlock()
			}
		}(w)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		k := len(acked)
		mu.Unlock()
		if k >= 150 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	n.kill9()
	close(stop)
	wg.Wait()
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged before the kill")
	}
	n.start(t)
	missing, err := missingRevisions(n, "revdur", acked)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d acknowledged writes' revisions lost after kill -9, e.g. %s", len(missing), len(acked), missing[0])
	}
	t.Logf("%d acknowledged writes, all their revisions present after kill -9", len(acked))
}

// Revisions converge under network faults: three nodes whose replication
// links go through fault proxies (cut, black-holed, held, slowed, nodes
// isolated, as in TestConvergence*), writers on every node putting shared
// and private ids; once healed, every copy holds the same revisions and
// every acknowledged write's revision.
func TestRevisionsConvergeUnderFaults(t *testing.T) {
	seed := time.Now().UnixNano() % 1_000_000_000
	t.Logf("seed %d", seed)
	started := time.Now()
	pc := startProxiedCluster(t)
	pc.createDatabase(t, pc.nodes[0], "revfault")
	configureRevisions(t, pc.nodes[2], pc.nodes, "revfault", `{"Default":{"MinimumRevisionsToKeep":100000}}`)

	var mu sync.Mutex
	var acked []string
	ids := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, n := range pc.nodes {
		wg.Add(1)
		go func(i int, n *cnode) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(i+1)))
			for v := 0; ; v++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("shared/%d", rng.IntN(6))
				if rng.IntN(2) == 0 {
					id = fmt.Sprintf("private/%s/%d", n.name, rng.IntN(4))
				}
				cv, err := putVersion(n, "revfault", id, v)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				mu.Lock()
				acked = append(acked, cv)
				ids[id] = true
				mu.Unlock()
			}
		}(i, n)
	}
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		pc.chaos(t, stop, rand.New(rand.NewPCG(uint64(seed), 0)), started)
	}()
	time.Sleep(4 * time.Second)
	close(stop)
	wg.Wait()
	<-chaosDone
	pc.healAll()
	if len(acked) < 30 {
		t.Fatalf("only %d writes acknowledged", len(acked))
	}
	var idList []string
	for id := range ids {
		idList = append(idList, id)
	}
	sort.Strings(idList)
	eventually(t, 90*time.Second, "the copies hold the same revisions", func() (bool, string) {
		for _, id := range idList {
			want, err := revisionSet(pc.nodes[0], "revfault", id)
			if err != nil {
				return false, err.Error()
			}
			for _, n := range pc.nodes[1:] {
				got, err := revisionSet(n, "revfault", id)
				if err != nil {
					return false, err.Error()
				}
				if got != want {
					return false, fmt.Sprintf("%s differs on %s", id, n.name)
				}
			}
		}
		return true, ""
	})
	for _, n := range pc.nodes {
		missing, err := missingRevisions(n, "revfault", acked)
		if err != nil {
			t.Fatal(err)
		}
		if len(missing) > 0 {
			t.Errorf("%s lacks %d of %d acknowledged writes' revisions", n.name, len(missing), len(acked))
		}
	}
	t.Logf("%5.1fs %d acknowledged writes over %d ids, the same revisions on all three", time.Since(started).Seconds(), len(acked), len(idList))
}
