package main

// Compare-exchange and cluster-wide transactions on clusters of real
// processes (issue 15).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/faultproxy"
)

type cmpxchgValue struct {
	Key   string
	Index uint64
	Value struct{ Object json.RawMessage }
}

func getCmpXchg(n *cnode, db, key string) (cmpxchgValue, bool, error) {
	var r struct{ Results []cmpxchgValue }
	if err := getJSON(n.url+"/databases/"+db+"/cmpxchg?key="+url.QueryEscape(key), &r); err != nil {
		return cmpxchgValue{}, false, err
	}
	if len(r.Results) == 0 {
		return cmpxchgValue{}, false, nil
	}
	return r.Results[0], true, nil
}

// clusterTx posts a cluster-wide batch that puts key (expecting index) and
// stores document id, both saying who.
func clusterTx(n *cnode, db, key string, index uint64, id, who string) (int, []byte, error) {
	body := fmt.Sprintf(`{"Commands":[{"Type":"CompareExchangePUT","Id":%q,"Index":%d,"Document":{"Object":%q}},`+
		`{"Type":"PUT","Id":%q,"Document":{"Winner":%q,"@metadata":{"@collection":"Rounds"}}}],"TransactionMode":"ClusterWide"}`, key, index, who, id, who)
	return callWith(writeClient, "POST", n.url+"/databases/"+db+"/bulk_docs?raft-request-id="+url.QueryEscape(who), body)
}

type storedDoc struct {
	Winner   string
	Metadata struct {
		ChangeVector string `json:"@change-vector"`
	} `json:"@metadata"`
}

func getDoc(n *cnode, db, id string) (storedDoc, bool, error) {
	var r struct{ Results []*storedDoc }
	st, b, err := callWith(pollClient, "GET", n.url+"/databases/"+db+"/docs?id="+url.QueryEscape(id), "")
	if err != nil {
		return storedDoc{}, false, err
	}
	if st == http.StatusNotFound {
		return storedDoc{}, false, nil
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Results) == 0 || r.Results[0] == nil {
		return storedDoc{}, false, fmt.Errorf("%d %s", st, b)
	}
	return *r.Results[0], true, nil
}

// Rounds of cluster-wide transactions racing from all three nodes (two
// each) on one compare-exchange key, every one expecting the index the
// key had before the round: exactly one wins (201), the others get 409,
// and every node ends with the winner's value and document, with the same
// change vector. Replication links are held by fault proxies the whole
// time, so the documents reach the other nodes through the Raft entry
// alone. A retry of the winner's request (same raft-request-id) gets the
// first answer.
func TestCmpXchgClusterTxRace(t *testing.T) {
	pc := startProxiedCluster(t)
	const db = "race"
	pc.createDatabase(t, pc.nodes[0], db)
	pc.faultAll(faultproxy.Fault{Mode: faultproxy.Hold})
	defer pc.healAll()

	var index uint64
	for round := 1; round <= 4; round++ {
		id := fmt.Sprintf("rounds/%d", round)
		type outcome struct {
			who  string
			st   int
			body []byte
			err  error
		}
		var mu sync.Mutex
		var outs []outcome
		var wg sync.WaitGroup
		for _, n := range pc.nodes {
			for k := 0; k < 2; k++ {
				who := fmt.Sprintf("%s%d-round%d", n.name, k, round)
				wg.Add(1)
				go func(n *cnode) {
					defer wg.Done()
					st, b, err := clusterTx(n, db, "seat", index, id, who)
					mu.Lock()
					outs = append(outs, outcome{who, st, b, err})
					mu.Unlock()
				}(n)
			}
		}
		wg.Wait()
		winner := ""
		var won struct{ TransactionIndex uint64 }
		for _, o := range outs {
			switch {
			case o.err != nil:
				t.Fatalf("round %d, %s: %v", round, o.who, o.err)
			case o.st == http.StatusCreated:
				if winner != "" {
					t.Fatalf("round %d: two winners, %s and %s", round, winner, o.who)
				}
				winner = o.who
				if err := json.Unmarshal(o.body, &won); err != nil || won.TransactionIndex <= index {
					t.Fatalf("round %d: winner's answer %s", round, o.body)
				}
			case o.st != http.StatusConflict:
				t.Fatalf("round %d, %s: %d %s (want 201 or 409)", round, o.who, o.st, o.body)
			}
		}
		if winner == "" {
			t.Fatalf("round %d: nobody won: %+v", round, outs)
		}
		index = won.TransactionIndex
		// The winner's retry gets the first answer, not a 409.
		if st, b, err := clusterTx(pc.byTag[winner[:1]], db, "seat", index-0, id, winner); err != nil || st != http.StatusCreated {
			t.Fatalf("round %d: retry of %s: %d %v %s", round, winner, st, err, b)
		}
		cvs := map[string]string{}
		for _, n := range pc.nodes {
			eventually(t, 10*time.Second, fmt.Sprintf("round %d on %s", round, n.name), func() (bool, string) {
				v, ok, err := getCmpXchg(n, db, "seat")
				if err != nil || !ok || v.Index != index || string(v.Value.Object) != fmt.Sprintf("%q", winner) {
					return false, fmt.Sprintf("value %+v %v %v", v, ok, err)
				}
				d, ok, err := getDoc(n, db, id)
				if err != nil || !ok || d.Winner != winner {
					return false, fmt.Sprintf("document %+v %v %v", d, ok, err)
				}
				cvs[n.name] = d.Metadata.ChangeVector
				return true, ""
			})
		}
		if cvs["A"] != cvs["B"] || cvs["B"] != cvs["C"] {
			t.Fatalf("round %d: change vectors differ: %v", round, cvs)
		}
	}
}

// Values and a cluster transaction's documents survive kill -9 of every
// node: after the restart each node serves them from its own state.
func TestCmpXchgRestartKeepsValues(t *testing.T) {
	tc := startCluster(t)
	const db = "keep"
	tc.createDatabase(t, tc.nodes[0], db)
	want := map[string]uint64{}
	for i, n := range tc.nodes {
		key := "keys/" + n.name
		st, b, err := callWith(writeClient, "PUT", n.url+"/databases/"+db+"/cmpxchg?key="+url.QueryEscape(key)+"&index=0", fmt.Sprintf(`{"Object":{"n":%d}}`, i))
		var r struct {
			Successful bool
			Index      uint64
		}
		if err != nil || st != http.StatusOK || json.Unmarshal(b, &r) != nil || !r.Successful {
			t.Fatalf("put %s through %s: %d %v %s", key, n.name, st, err, b)
		}
		want[key] = r.Index
	}
	st, b, err := clusterTx(tc.nodes[1], db, "seat", 0, "rounds/1", "B-kept")
	if err != nil || st != http.StatusCreated {
		t.Fatalf("cluster transaction: %d %v %s", st, err, b)
	}
	var tx struct{ TransactionIndex uint64 }
	_ = json.Unmarshal(b, &tx)
	want["seat"] = tx.TransactionIndex
	// Every node has applied it before the kill.
	for _, n := range tc.nodes {
		eventually(t, 10*time.Second, "applied on "+n.name, func() (bool, string) {
			d, ok, err := getDoc(n, db, "rounds/1")
			return ok && d.Winner == "B-kept", fmt.Sprintf("%+v %v %v", d, ok, err)
		})
	}

	for _, n := range tc.nodes {
		n.kill9()
	}
	for _, n := range tc.nodes {
		n.spawn(t)
	}
	for _, n := range tc.nodes {
		n.waitReady(t, 30*time.Second)
	}
	tc.waitConverged(t, tc.nodes, 20*time.Second)
	for _, n := range tc.nodes {
		for key, index := range want {
			eventually(t, 10*time.Second, key+" on "+n.name, func() (bool, string) {
				v, ok, err := getCmpXchg(n, db, key)
				return ok && v.Index == index, fmt.Sprintf("%+v %v %v (want index %d)", v, ok, err, index)
			})
		}
		d, ok, err := getDoc(n, db, "rounds/1")
		if err != nil || !ok || d.Winner != "B-kept" {
			t.Fatalf("%s: document after restart %+v %v %v", n.name, d, ok, err)
		}
	}
	// And the values still compare: a create of an existing key fails.
	if st, b, _ := clusterTx(tc.nodes[2], db, "seat", 0, "rounds/2", "C-late"); st != http.StatusConflict {
		t.Fatalf("create of a kept key after restart: %d %s", st, b)
	}
}
