package main

// Time series across real processes: appends on all three nodes to one
// series while the replication links are cut, held and slowed (every
// acknowledged timestamp ends on every node, and the nodes hold identical
// entries), and appends through a SIGKILL (every acknowledged append is
// there after the restart).

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const tsBase = int64(1_796_601_600_000) // 2026-12-07T00:00:00Z in unix ms

func tsStamp(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.0000000Z")
}

// tsAppendBody is a bulk_docs body appending one entry per timestamp.
func tsAppendBody(id, name string, stamps []int64, value float64, tag string) string {
	var appends []string
	for _, ms := range stamps {
		appends = append(appends, fmt.Sprintf(`{"Timestamp":%q,"Values":[%g,%d],"Tag":%q}`, tsStamp(ms), value, ms%1000, tag))
	}
	return fmt.Sprintf(`{"Commands":[{"Id":%q,"Type":"TimeSeries","TimeSeries":{"Name":%q,"Appends":[%s],"Deletes":null}}]}`,
		id, name, strings.Join(appends, ","))
}

type tsEntryJSON struct {
	Timestamp string
	Tag       *string
	Values    []float64
}

// tsEntries reads a whole series from base ("" when absent).
func tsEntries(base, db, id, name string) ([]tsEntryJSON, error) {
	st, b, err := callWith(pollClient, "GET", base+"/databases/"+db+"/timeseries?docId="+url.QueryEscape(id)+"&name="+url.QueryEscape(name), "")
	if err != nil {
		return nil, err
	}
	if st == 404 {
		return nil, nil
	}
	if st != 200 {
		return nil, fmt.Errorf("%d %.200s", st, b)
	}
	var res struct {
		Entries      []tsEntryJSON
		TotalResults int
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, err
	}
	if res.TotalResults != len(res.Entries) {
		return nil, fmt.Errorf("TotalResults %d for %d entries", res.TotalResults, len(res.Entries))
	}
	return res.Entries, nil
}

func TestTimeSeriesConvergenceUnderFaults(t *testing.T) {
	seed := *convSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000_000
	}
	t.Logf("seed %d, duration %s", seed, *convDuration)
	started := time.Now()
	pc := startProxiedCluster(t)
	const db = "tsconv"
	pc.createDatabase(t, pc.nodes[0], db)
	if st, b, err := putDoc(pc.nodes[0], db, "sensors/1", "sensor"); err != nil || st != 201 {
		t.Fatalf("put: %d %v %s", st, err, b)
	}
	for _, n := range pc.nodes {
		eventually(t, 20*time.Second, "sensors/1 on "+n.name, func() (bool, string) {
			st, _, err := callWith(pollClient, "GET", n.url+"/databases/"+db+"/docs?id=sensors/1", "")
			return err == nil && st == 200, fmt.Sprint(st, err)
		})
	}

	var mu sync.Mutex
	acked := map[int64]bool{}
	failures := map[string]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, n := range pc.nodes {
		for w := range 2 {
			wg.Add(1)
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(1+i*2+w)))
			go func() {
				defer wg.Done()
				for seq := 0; ; seq++ {
					select {
					case <-stop:
						return
					default:
					}
					// Half the timestamps are shared by every writer (0-199 s),
					// half are this writer's own.
					var stamps []int64
					for k := 0; k < 1+rng.IntN(20); k++ {
						if rng.IntN(2) == 0 {
							stamps = append(stamps, tsBase+int64(rng.IntN(200))*1000)
						} else {
							stamps = append(stamps, tsBase+1_000_000+int64(i*2+w)*1_000_000+int64(seq*20+k)*1000)
						}
					}
					body := tsAppendBody("sensors/1", "Temperature", stamps, float64(seq), n.name)
					st, b, err := callWith(writeClient, "POST", n.url+"/databases/"+db+"/bulk_docs", body)
					mu.Lock()
					switch {
					case err != nil:
						failures["network error"]++
					case st != 201:
						failures[fmt.Sprintf("%d %.200s", st, b)]++
					default:
						for _, s := range stamps {
							acked[s] = true
						}
					}
					mu.Unlock()
					time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
				}
			}()
		}
	}
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		pc.chaos(t, stop, rand.New(rand.NewPCG(uint64(seed), 0)), started)
	}()
	time.Sleep(*convDuration)
	close(stop)
	wg.Wait()
	<-chaosDone
	pc.healAll()
	t.Logf("%5.1fs writes stopped: %d acknowledged timestamps, failures %v", time.Since(started).Seconds(), len(acked), failures)
	for k, c := range failures {
		if k != "network error" {
			t.Errorf("unexpected answer to an append (%d times): %s", c, k)
		}
	}
	if len(acked) < 50 {
		t.Fatalf("only %d timestamps acknowledged", len(acked))
	}
	var states [][]tsEntryJSON
	eventually(t, *convSettle, "the nodes hold the same entries", func() (bool, string) {
		states = states[:0]
		for _, n := range pc.nodes {
			es, err := tsEntries(n.url, db, "sensors/1", "Temperature")
			if err != nil {
				return false, n.name + ": " + err.Error()
			}
			states = append(states, es)
		}
		for i := 1; i < len(states); i++ {
			if !reflect.DeepEqual(states[0], states[i]) {
				return false, fmt.Sprintf("%s has %d entries, %s %d", pc.nodes[0].name, len(states[0]), pc.nodes[i].name, len(states[i]))
			}
		}
		return true, ""
	})
	have := map[int64]bool{}
	for _, e := range states[0] {
		ts, err := time.Parse(time.RFC3339Nano, e.Timestamp)
		if err != nil {
			t.Fatal(err)
		}
		have[ts.UnixMilli()] = true
	}
	for ms := range acked {
		if !have[ms] {
			t.Errorf("acknowledged timestamp %s is missing", tsStamp(ms))
		}
	}
	// The document lists the series on every node and is not in conflict.
	for _, n := range pc.nodes {
		st, b, err := callWith(pollClient, "GET", n.url+"/databases/"+db+"/docs?id=sensors/1", "")
		if err != nil || st != 200 || !strings.Contains(string(b), `"@timeseries":["Temperature"]`) {
			t.Errorf("sensors/1 on %s: %d %v %.300s", n.name, st, err, b)
		}
	}
	for _, name := range pc.names {
		if s := pc.links[name].Stats(); s.Accepted == 0 {
			t.Errorf("link %s carried nothing", name)
		}
	}
	t.Logf("%5.1fs %d entries identical on every node, every acknowledged timestamp present", time.Since(started).Seconds(), len(states[0]))
}

func TestTimeSeriesSurvivesKill9(t *testing.T) {
	dataDir := t.TempDir()
	addr := freeAddr(t)
	n := start(t, dataDir, addr)
	if resp, body, err := request("PUT", n.url+"/admin/databases?name=tsdur", `{"DatabaseName":"tsdur"}`); err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %v %s", err, body)
	}
	if resp, body, err := request("PUT", n.url+"/databases/tsdur/docs?id=meters/1", `{"@metadata":{"@collection":"Meters"}}`); err != nil || resp.StatusCode != 201 {
		t.Fatalf("put: %v %s", err, body)
	}
	var all []int64
	for round := 0; round < 2; round++ {
		var mu sync.Mutex
		var acked []int64
		var count atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for seq := 0; ; seq++ {
					select {
					case <-stop:
						return
					default:
					}
					var stamps []int64
					for k := range 10 {
						stamps = append(stamps, tsBase+int64(round)*100_000_000+int64(w)*10_000_000+int64(seq*10+k)*1000)
					}
					resp, _, err := request("POST", n.url+"/databases/tsdur/bulk_docs", tsAppendBody("meters/1", "Power", stamps, float64(seq), ""))
					if err != nil {
						return
					}
					if resp.StatusCode == 201 {
						mu.Lock()
						acked = append(acked, stamps...)
						mu.Unlock()
						count.Add(1)
					}
				}
			}()
		}
		deadline := time.Now().Add(60 * time.Second)
		for count.Load() < 30 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		n.kill9(t)
		close(stop)
		wg.Wait()
		if len(acked) == 0 {
			t.Fatalf("round %d: nothing acknowledged before the kill", round)
		}
		all = append(all, acked...)
		n = start(t, dataDir, addr)
		es, err := tsEntries(n.url, "tsdur", "meters/1", "Power")
		if err != nil {
			t.Fatal(err)
		}
		have := map[int64]bool{}
		for _, e := range es {
			ts, _ := time.Parse(time.RFC3339Nano, e.Timestamp)
			have[ts.UnixMilli()] = true
		}
		missing := 0
		for _, ms := range all {
			if !have[ms] {
				missing++
			}
		}
		if missing > 0 {
			t.Fatalf("round %d: %d of %d acknowledged appends lost", round, missing, len(all))
		}
		t.Logf("round %d: %d acknowledged appends, all present after kill -9 (%d entries)", round, len(all), len(es))
	}
	n.kill9(t)
}
