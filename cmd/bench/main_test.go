package main

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// The benchmark tool runs end to end at small sizes, and its probe
// measurement holds the bound (a count, not a time, so it is safe to assert).
func TestBenchSmoke(t *testing.T) {
	var out bytes.Buffer
	c := config{docs: 2000, batch: 500, rounds: 2, studioDocs: 3000, hiloIDs: 20_000, identSingle: 20, identBatch: 200, probeNs: []int{100, 5000}, conflicts: 1000, dir: t.TempDir(),
		lagRate: 300, lagFor: time.Second, catchUp: 3000, subDocs: 3000}
	if err := run(c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"raw SQLite ceiling", "slowest page p50", "3 nodes, batched identities", "HTTP bulk_docs, 4 clients", "hilo/next requests", "batched (100 identity PUTs", "N=5000", "resolved on arrival (latest), 1000 conflicts", "bulk resolution (latest), 1000 stored conflicts",
		"replication lag (201 on origin to commit on other node)", "baseline, local write ack", "catch-up on B after healing", "baseline, local bulk insert on A",
		"raw etag scan of the collection (ceiling)", "delivery to one worker, from Users", "delivery to one worker, with a where clause"} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Fatalf("report lacks %q:\n%s", want, s)
		}
	}
	m := regexp.MustCompile(`20000 ids from one busy client \(last users/(\d+)-A\)`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no HiLo line:\n%s", s)
	}
	if n, _ := strconv.Atoi(m[1]); n != 20000 {
		t.Fatalf("HiLo ids not dense: last is %d", n)
	}
	t.Log("\n" + s)
}
