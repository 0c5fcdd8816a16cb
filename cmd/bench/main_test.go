package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The benchmark tool runs end to end at small sizes, and its probe
// measurement holds the bound (a count, not a time, so it is safe to assert).
func TestBenchSmoke(t *testing.T) {
	var out bytes.Buffer
	c := config{docs: 2000, batch: 500, rounds: 2, studioDocs: 3000, liveIdle: time.Second, hiloIDs: 20_000, identSingle: 20, identBatch: 200, probeNs: []int{100, 5000}, conflicts: 1000, dir: t.TempDir(),
		lagRate: 300, lagFor: time.Second, catchUp: 3000, subDocs: 3000}
	// The tls and extensions sections have their own smoke tests.
	for _, s := range sections {
		if s != "tls" && s != "extensions" {
			if c.only == nil {
				c.only = map[string]bool{}
			}
			c.only[s] = true
		}
	}
	if err := run(c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"raw SQLite ceiling", "slowest page p50", "bytes per second per idle live tab, worst:", "/studio/db/ops/conflicts", "3 nodes, batched identities", "HTTP bulk_docs, 4 clients", "hilo/next requests", "batched (100 identity PUTs", "N=5000", "resolved on arrival (latest), 1000 conflicts", "bulk resolution (latest), 1000 stored conflicts",
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

// The tls section runs end to end at small sizes: it negotiates TLS 1.3 with
// the certificates studio setup makes (node ECDSA P-256, client RSA-2048),
// both sides of the bulk comparison reuse their connections (so the ratio
// compares TLS with plain, not handshakes with none), and the resumed
// handshakes really resumed. Counts only, no times.
func TestBenchTLSSmoke(t *testing.T) {
	var out bytes.Buffer
	c := config{batch: 250, tlsDocs: 2000, tlsRounds: 2, handshakes: 40, lagRate: 200, lagFor: time.Second, rounds: 2,
		only: map[string]bool{"tls": true}, dir: t.TempDir()}
	if err := run(c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"negotiated: HTTP/1.1, TLS 1.3,", "node certificate ECDSA P-256, client certificate RSA-2048 (identified as admin, ClusterAdmin)",
		"round 2 (TLS first): plain", "TLS / plain throughput:", "TLS / plain CPU per document",
		"new TLS connection, full handshake:", "a new TLS connection costs",
		"plain cluster: write ack p50", "TLS   cluster: write ack p50", "TLS / plain replication lag: p50"} {
		if !strings.Contains(s, want) {
			t.Fatalf("report lacks %q:\n%s", want, s)
		}
	}
	// 2 rounds of 8 requests and a database creation per side: a client
	// that did not keep its connections would open 18 during the rounds.
	for _, side := range []string{"plain:", "TLS:"} {
		m := regexp.MustCompile(`HTTP bulk_docs, 4 clients, ` + side + ` .* connections opened: (\d+) before the rounds, (\d+) during them`).FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("no bulk line for %s:\n%s", side, s)
		}
		if n, _ := strconv.Atoi(m[2]); n > 4 {
			t.Fatalf("%s bulk insert opened %d connections during the rounds; keep-alive should have reused those opened before:\n%s", side, n, s)
		}
	}
	if !strings.Contains(s, "(40 connections opened, 40 of 40 resumed)") {
		t.Fatalf("the resumed handshakes did not all resume:\n%s", s)
	}
	if !regexp.MustCompile(`full handshake: .*\(40 connections opened\)`).MatchString(s) {
		t.Fatalf("the full-handshake line should open one connection per request:\n%s", s)
	}
	t.Log("\n" + s)
}

// The indexes section runs end to end at small sizes, and the LoadDocument
// fan-out re-maps exactly the referencing documents (a count, safe to assert).
func TestBenchIndexesSmoke(t *testing.T) {
	var out bytes.Buffer
	c := config{indexDocs: 3000, refDocs: 500, only: map[string]bool{"indexes": true}, dir: t.TempDir()}
	if err := run(c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"indexing, raw SQLite", "query equality", "query range", "query full-text", "re-mapped 500 documents", "first query on a new auto index"} {
		if !strings.Contains(s, want) {
			t.Fatalf("report lacks %q:\n%s", want, s)
		}
	}
	t.Log("\n" + s)
}

// The smuggler section runs end to end at a small size: the node as its own
// process, export, import, and the report's lines.
func TestBenchSmugglerSmoke(t *testing.T) {
	var out bytes.Buffer
	c := config{smugDocs: 2000, only: map[string]bool{"smuggler": true}, dir: t.TempDir()}
	if err := run(c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"HTTP bulk insert", "export (one request", "import (one multipart request", "export peak RSS with 200 documents"} {
		if !strings.Contains(s, want) {
			t.Fatalf("report lacks %q:\n%s", want, s)
		}
	}
	t.Log("\n" + s)
}
