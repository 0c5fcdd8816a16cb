// Command bench measures Rookery on this machine and prints one report:
//
//   - HTTP bulk_docs inserts of 1 KB documents with 1 and 4 concurrent
//     clients, against the same documents inserted straight into SQLite in
//     1000-row transactions (the ceiling), and the ratio of the two;
//   - Go-client HiLo ids/s and how many hilo/next requests they took;
//   - identity ids/s, single and batched;
//   - next-free-identity probe counts over N existing documents;
//   - replication lag at a fixed write rate over 3 nodes, against the
//     writes' own ack latency, and catch-up docs/s after a cut link,
//     against the source's bulk-insert rate;
//   - what TLS costs: bulk insert, replication lag and new connections on
//     secured nodes against unsecured ones.
//
// Every figure is measured in the same run, so ratios compare like with like.
//
//	go run ./cmd/bench            # full sizes (100k docs, 1M HiLo ids, N up to 1M)
//	go run ./cmd/bench -quick     # small sizes, for a smoke run
package main

import (
	"bytes"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/ids"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/client"
	"github.com/rookerydb/rookery/web"
)

type config struct {
	docs        int             // documents per bulk-insert run
	batch       int             // documents per bulk_docs request / SQLite transaction
	rounds      int             // interleaved bulk-insert rounds
	hiloIDs     int             // ids generated through the Go client
	identSingle int             // identity ids taken one request each
	identBatch  int             // identity ids taken in batches
	probeNs     []int           // existing-document counts for the probe measurement
	studioDocs  int             // documents in the collection behind the studio pages (0 skips)
	liveIdle    time.Duration   // studio: how long each idle live tab is measured (0 skips)
	conflicts   int             // conflicted documents for the resolution measurements (0 skips)
	lagRate     int             // replication lag: writes/s over 3 nodes (0 skips the section)
	lagFor      time.Duration   // replication lag: how long to write
	catchUp     int             // replication catch-up: documents written while the link is cut
	subDocs     int             // documents delivered through a subscription (0 skips)
	handshakes  int             // tls: requests per new-connection measurement (0 skips it)
	tlsDocs     int             // tls: documents per bulk-insert round (0 skips the bulk comparison)
	tlsRounds   int             // tls: interleaved bulk-insert rounds
	indexDocs   int             // indexes: documents in the indexed collection (0 skips)
	smugDocs    int             // smuggler: documents exported and imported (0 skips)
	extDocs     int             // extensions: writes per measured side (0 skips)
	refDocs     int             // indexes: documents referencing one document (LoadDocument)
	pg          string          // bulkinsert: a PostgreSQL DSN, "auto" (a throwaway server) or "" (skip)
	cmpxchgTxs  int             // extensions: cluster-wide transactions per side (0 skips)
	counterIncs int             // extensions: counter increments per round (0 skips counters)
	only        map[string]bool // sections to run; all when empty
	dir         string

	// changes: subscribers, writes/s, rounds, time per round (0 subscribers skips)
	changesSubs, changesRate, changesRounds int
	changesFor                              time.Duration
}

func main() {
	if spec := os.Getenv(changesChildEnv); spec != "" {
		if p := os.Getenv("ROOKERY_BENCH_CHILD_CPUPROFILE"); p != "" { // where the subscribers' CPU goes
			if f, err := os.Create(p); err == nil {
				if pprof.StartCPUProfile(f) == nil {
					defer pprof.StopCPUProfile()
				}
			}
		}
		if err := changesChild(spec, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench changes child:", err)
			os.Exit(1)
		}
		return
	}
	var c config
	quick := flag.Bool("quick", false, "small sizes (a smoke run)")
	flag.IntVar(&c.docs, "docs", 100_000, "documents per bulk-insert run")
	flag.IntVar(&c.batch, "batch", 1000, "documents per request and per raw SQLite transaction")
	flag.IntVar(&c.rounds, "rounds", 3, "interleaved bulk-insert rounds (raw, 1 client, 4 clients each)")
	flag.IntVar(&c.hiloIDs, "hilo-ids", 1_000_000, "ids generated through the Go client's HiLo")
	flag.IntVar(&c.identSingle, "identity-single", 2000, "identity ids taken one request each")
	flag.IntVar(&c.identBatch, "identity-batched", 20_000, "identity ids taken 100 per batch")
	probes := flag.String("probe-n", "1000,100000,1000000", "existing-document counts for the probe measurement")
	flag.IntVar(&c.studioDocs, "studio-docs", 1_000_000, "documents in one collection for the studio page timings (0 skips them)")
	flag.DurationVar(&c.liveIdle, "live-idle", 10*time.Second, "studio section: how long each idle live tab's bytes are counted (0 skips the measurement)")
	flag.IntVar(&c.conflicts, "conflicts", 100_000, "conflicted documents resolved on arrival and in bulk (0 skips)")
	flag.IntVar(&c.lagRate, "lag-rate", 1000, "replication lag: writes/s round-robin over 3 nodes (0 skips the lag measurement)")
	flag.DurationVar(&c.lagFor, "lag-for", 10*time.Second, "replication lag: how long to write (0 skips the lag measurement)")
	flag.IntVar(&c.catchUp, "catchup-docs", 100_000, "replication catch-up: documents written while the destination is cut off (0 skips it)")
	flag.IntVar(&c.subDocs, "subscription-docs", 100_000, "documents delivered to one subscription worker per round (0 skips)")
	flag.IntVar(&c.tlsDocs, "tls-docs", 20_000, "tls section: documents per bulk-insert round and side (0 skips the bulk comparison)")
	flag.IntVar(&c.tlsRounds, "tls-rounds", 10, "tls section: interleaved bulk-insert rounds (plain and TLS each, order alternating)")
	flag.IntVar(&c.handshakes, "handshakes", 2000, "tls section: requests on new connections per kind (plain, full handshake, resumed) (0 skips them)")
	flag.IntVar(&c.indexDocs, "index-docs", 1_000_000, "indexes: documents in the indexed collection (0 skips the section)")
	flag.IntVar(&c.smugDocs, "smuggler-docs", 1_000_000, "smuggler: documents exported and imported (0 skips the section)")
	flag.IntVar(&c.extDocs, "extensions-docs", 100_000, "extensions: writes per measured side (0 skips the section)")
	flag.IntVar(&c.refDocs, "ref-docs", 10_000, "indexes: documents referencing one document for the LoadDocument measurement")
	flag.IntVar(&c.changesSubs, "changes-subs", 100, "changes: Changes API subscribers, in a child process (0 skips the section)")
	flag.IntVar(&c.changesRate, "changes-rate", 1000, "changes: document writes per second")
	flag.DurationVar(&c.changesFor, "changes-for", 2500*time.Millisecond, "changes: how long each round writes")
	flag.IntVar(&c.changesRounds, "changes-rounds", 8, "changes: rounds, each with and without subscribers (order alternating; short rounds, many of them, so that both sides meet the same disk and neighbours)")
	flag.StringVar(&c.pg, "pg", "", "bulkinsert section: a PostgreSQL DSN to compare with, or auto (a throwaway server from Debian's postgresql package)")
	flag.IntVar(&c.cmpxchgTxs, "cmpxchg-txs", 500, "extensions: cluster-wide transactions timed through the leader and through a follower, against as many plain bulk_docs (0 skips)")
	flag.IntVar(&c.counterIncs, "counter-incs", 100_000, "extensions: counter increments (and document puts) per round (0 skips counters)")
	flag.StringVar(&c.dir, "dir", "", "scratch directory (a temp dir when empty)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile here")
	only := flag.String("only", "", "run only these sections, comma-separated: "+strings.Join(sections, ","))
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if *quick {
		// Smaller defaults; flags given explicitly still win.
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		quickDefaults := map[string]func(){
			"docs":              func() { c.docs = 5000 },
			"rounds":            func() { c.rounds = 1 },
			"hilo-ids":          func() { c.hiloIDs = 100_000 },
			"identity-single":   func() { c.identSingle = 200 },
			"identity-batched":  func() { c.identBatch = 2000 },
			"probe-n":           func() { *probes = "1000,10000" },
			"studio-docs":       func() { c.studioDocs = 20_000 },
			"live-idle":         func() { c.liveIdle = 3 * time.Second },
			"conflicts":         func() { c.conflicts = 5000 },
			"lag-for":           func() { c.lagFor = 2 * time.Second },
			"catchup-docs":      func() { c.catchUp = 10_000 },
			"subscription-docs": func() { c.subDocs = 10_000 },
			"handshakes":        func() { c.handshakes = 300 },
			"tls-docs":          func() { c.tlsDocs = 2000 },
			"tls-rounds":        func() { c.tlsRounds = 2 },
			"index-docs":        func() { c.indexDocs = 20_000 },
			"changes-subs":      func() { c.changesSubs = 20 },
			"changes-rate":      func() { c.changesRate = 200 },
			"changes-for":       func() { c.changesFor = time.Second },
			"changes-rounds":    func() { c.changesRounds = 2 },
			"ts-points":         func() { *tsPoints = 100_000 },
			"counter-incs":      func() { c.counterIncs = 2000 },
		}
		for name, apply := range quickDefaults {
			if !set[name] {
				apply()
			}
		}
	}
	for _, s := range strings.Split(*probes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bad -probe-n value %q\n", s)
			os.Exit(2)
		}
		c.probeNs = append(c.probeNs, n)
	}
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(sections, s) {
			fmt.Fprintf(os.Stderr, "unknown -only section %q (have %s)\n", s, strings.Join(sections, ","))
			os.Exit(2)
		}
		if c.only == nil {
			c.only = map[string]bool{}
		}
		c.only[s] = true
	}
	if err := run(c, os.Stdout); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// sections are the report's parts, for -only.
var sections = []string{"bulk", "bulkinsert", "hilo", "identities", "cluster", "replication", "tls", "studio", "conflicts", "subscriptions", "probe", "indexes", "smuggler", "changes", "extensions"}

// runs tells whether a section is part of this run.
func (c config) runs(section string) bool { return len(c.only) == 0 || c.only[section] }

func run(c config, out io.Writer) error {
	if c.dir == "" {
		d, err := os.MkdirTemp("", "rookery-bench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		c.dir = d
	}
	fmt.Fprintf(out, "rookery bench: %s %s/%s, %d CPUs, %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), time.Now().UTC().Format(time.RFC3339))
	srv, url, stop, err := startServer(filepath.Join(c.dir, "server"))
	if err != nil {
		return err
	}
	defer stop()
	_ = srv

	if c.runs("bulk") {
		if err := bulk(out, c, url); err != nil {
			return err
		}
	}

	if c.runs("bulkinsert") {
		if err := bulkInsertSection(out, c, url); err != nil {
			return err
		}
	}

	if c.runs("hilo") {
		fmt.Fprintf(out, "\n## HiLo through the Go client\n")
		if err := hilo(out, url, c.hiloIDs); err != nil {
			return err
		}
	}

	if c.runs("identities") {
		fmt.Fprintf(out, "\n## Identities over HTTP\n")
		if err := identities(out, url, c.identSingle, c.identBatch); err != nil {
			return err
		}
	}

	if c.runs("cluster") {
		fmt.Fprintf(out, "\n## Identities through Raft on a 3-node cluster (in-process nodes, loopback)\n")
		if err := clusterIdentities(out, filepath.Join(c.dir, "cluster"), c.identSingle, c.identBatch, c.hiloIDs); err != nil {
			return err
		}
	}

	if c.lagRate > 0 && c.lagFor > 0 && c.runs("replication") {
		fmt.Fprintf(out, "\n## Replication lag on 3 nodes (in-process nodes, loopback)\n")
		if err := replicationLag(out, filepath.Join(c.dir, "lag"), c.lagRate, c.lagFor); err != nil {
			return err
		}
	}
	if c.catchUp > 0 && c.runs("replication") {
		fmt.Fprintf(out, "\n## Replication catch-up after a cut link (2 nodes, TCP proxy between them)\n")
		if err := replicationCatchUp(out, filepath.Join(c.dir, "catchup"), makeDocs(c.catchUp), c.batch); err != nil {
			return err
		}
	}

	if c.runs("tls") {
		fmt.Fprintf(out, "\n## TLS against plain HTTP (in-process nodes, loopback, certificates from backend/pki.Setup)\n")
		if err := tlsSection(out, c); err != nil {
			return err
		}
	}

	if c.studioDocs > 0 && c.runs("studio") {
		fmt.Fprintf(out, "\n## Studio pages, server-side render with %d documents in one collection (30 requests each)\n", c.studioDocs)
		if err := studioPages(out, c.dir, c.studioDocs, 30); err != nil {
			return err
		}
		if c.liveIdle > 0 {
			fmt.Fprintf(out, "\n## Studio live updates: bytes per second per idle live tab\n")
			if err := liveIdle(out, c.dir, min(c.studioDocs, 20_000), c.liveIdle); err != nil {
				return err
			}
		}
	}

	if c.conflicts > 0 && c.runs("conflicts") {
		fmt.Fprintf(out, "\n## Conflict resolution, %d conflicted documents (storage engine, no HTTP)\n", c.conflicts)
		if err := conflictBench(out, c.dir, c.conflicts); err != nil {
			return err
		}
	}

	if c.subDocs > 0 && c.runs("subscriptions") {
		fmt.Fprintf(out, "\n## Subscription delivery, %d documents to one worker (Go client, TCP worker protocol, loopback, batches of 4096), %d rounds\n", c.subDocs, c.rounds)
		if err := subscriptionDelivery(out, c.dir, c.subDocs, c.rounds); err != nil {
			return err
		}
	}

	if c.runs("probe") {
		fmt.Fprintf(out, "\n## Next free identity over N existing documents (prefix/1..prefix/N, counter at 0)\n")
		for _, n := range c.probeNs {
			if err := probe(out, filepath.Join(c.dir, fmt.Sprintf("probe-%d.db", n)), n); err != nil {
				return err
			}
		}
	}

	if c.runs("indexes") && c.indexDocs > 0 {
		if err := indexesBench(out, c.dir, c.indexDocs, c.refDocs); err != nil {
			return err
		}
	}
	if c.runs("changes") && c.changesSubs > 0 && c.changesRate > 0 && c.changesFor > 0 {
		if err := changesBench(out, url, c.changesSubs, c.changesRate, c.changesFor, max(c.changesRounds, 1)); err != nil {
			return err
		}
	}
	if c.runs("smuggler") && c.smugDocs > 0 {
		d := filepath.Join(c.dir, "smuggler-bench")
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := smugglerBench(out, d, c.smugDocs); err != nil {
			return err
		}
	}
	if c.runs("extensions") {
		for _, part := range []func(io.Writer, config) error{extensionsCmpXchg, extensionsRevisions, extensionsTimeSeries} {
			if err := part(out, c); err != nil {
				return err
			}
		}
		if err := extensionsBench(out, c, url, "attachments"); err != nil {
			return err
		}
		if err := extensionsBench(out, c, url, "counters"); err != nil {
			return err
		}
	}
	return nil
}

// extensionsBench runs one document extension's part of the extensions
// section.
func extensionsBench(out io.Writer, c config, url, part string) error {
	switch part {
	case "counters":
		if c.counterIncs > 0 {
			return countersBench(out, c, url)
		}
	case "attachments":
		return attachmentsBench(out, c.dir, url)
	}
	return nil
}

// bulk compares HTTP bulk_docs inserts with raw SQLite inserts of the same
// documents.
func bulk(out io.Writer, c config, url string) error {
	docs := makeDocs(c.docs)
	fmt.Fprintf(out, "\n## Bulk insert: %d documents of ~%d bytes, %d per request / transaction, %d interleaved rounds\n", c.docs, len(docs[0].body), c.batch, c.rounds)
	// The disk is shared and noisy: measure the ceiling and the HTTP path
	// back to back in every round, and compare per round.
	var raws, ones, fours, ratio1, ratio4 []float64
	for r := 0; r < c.rounds; r++ {
		raw, err := rawSQLite(filepath.Join(c.dir, fmt.Sprintf("raw-%d.db", r)), docs, c.batch)
		if err != nil {
			return err
		}
		one, err := httpInsert(url, fmt.Sprintf("bulk1r%d", r), docs, c.batch, 1)
		if err != nil {
			return err
		}
		four, err := httpInsert(url, fmt.Sprintf("bulk4r%d", r), docs, c.batch, 4)
		if err != nil {
			return err
		}
		raws, ones, fours = append(raws, raw), append(ones, one), append(fours, four)
		ratio1, ratio4 = append(ratio1, one/raw), append(ratio4, four/raw)
		fmt.Fprintf(out, "round %d: raw %6.0f, HTTP 1 client %6.0f (%.2fx), 4 clients %6.0f (%.2fx) docs/s\n", r+1, raw, one, one/raw, four, four/raw)
	}
	fmt.Fprintf(out, "raw SQLite ceiling (same schema, WAL, synchronous=FULL): %8.0f docs/s (median)\n", median(raws))
	fmt.Fprintf(out, "HTTP bulk_docs, 1 client:                                 %8.0f docs/s  ratio %.2fx (median; rounds %.2f-%.2f)\n", median(ones), median(ratio1), minOf(ratio1), maxOf(ratio1))
	fmt.Fprintf(out, "HTTP bulk_docs, 4 clients:                                %8.0f docs/s  ratio %.2fx (median; rounds %.2f-%.2f; target >= 0.6x)\n", median(fours), median(ratio4), minOf(ratio4), maxOf(ratio4))
	return nil
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minOf(v []float64) float64 { return slices.Min(v) }
func maxOf(v []float64) float64 { return slices.Max(v) }

func startServer(dir string) (*web.Server, string, func(), error) {
	srv, err := web.New(web.Config{DataDir: dir, NodeTag: "A", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		return nil, "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	done := make(chan struct{})
	go func() { _ = srv.Serve(l); close(done) }()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
	return srv, "http://" + l.Addr().String(), stop, nil
}

type benchDoc struct {
	id   string
	body []byte // as a client sends it
}

func makeDocs(n int) []benchDoc {
	pad := strings.Repeat("lorem ipsum dolor sit amet ", 30)[:700]
	docs := make([]benchDoc, n)
	for i := range docs {
		id := fmt.Sprintf("users/%d-A", i+1)
		body := fmt.Sprintf(`{"name":"User %d","email":"user%d@example.com","address":{"street":"%d Main St","city":"Springfield","zip":"%05d"},"tags":["a","b","c"],"age":%d,"notes":"%s","@metadata":{"@collection":"Users","Raven-Node-Type":"User"}}`,
			i, i, i, i%100000, 20+i%50, pad)
		docs[i] = benchDoc{id: id, body: []byte(body)}
	}
	return docs
}

// rawSQLite inserts the documents' stored forms straight into a file with
// the same schema and pragmas as a Rookery database, batch rows per
// transaction: the ceiling for the HTTP path.
func rawSQLite(path string, docs []benchDoc, batch int) (float64, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(storage.Schema); err != nil {
		return 0, err
	}
	parsed := make([]document.Parsed, len(docs))
	for i, d := range docs {
		if parsed[i], err = document.Parse(d.body); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	for i := 0; i < len(docs); i += batch {
		tx, err := db.Begin()
		if err != nil {
			return 0, err
		}
		stmt, err := tx.Prepare(`INSERT INTO docs(etag, key, id, collection, change_vector, last_modified, flags, body) VALUES(?, ?, ?, ?, ?, ?, 0, ?)`)
		if err != nil {
			return 0, err
		}
		now := time.Now().UnixNano()
		for j := i; j < min(i+batch, len(docs)); j++ {
			if _, err := stmt.Exec(j+1, strings.ToLower(docs[j].id), docs[j].id, "Users", "A:"+strconv.Itoa(j+1)+"-ZzT6GeIb4ECL4n7G0SwfPQ", now, parsed[j].Body); err != nil {
				return 0, err
			}
		}
		stmt.Close()
		if err := tx.Commit(); err != nil {
			return 0, err
		}
	}
	return float64(len(docs)) / time.Since(start).Seconds(), nil
}

func do(method, url string, body []byte) ([]byte, int, error) {
	return doWith(http.DefaultClient, method, url, body)
}

// doWith sends one request through hc and reads the whole answer.
func doWith(hc *http.Client, method, url string, body []byte) ([]byte, int, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

func createDB(url, name string) error { return createDBWith(http.DefaultClient, url, name) }

func createDBWith(hc *http.Client, url, name string) error {
	b, code, err := doWith(hc, "PUT", url+"/admin/databases?name="+name, []byte(`{"DatabaseName":"`+name+`"}`))
	if err != nil {
		return err
	}
	if code != 201 {
		return fmt.Errorf("create database %s: %d %s", name, code, b)
	}
	return nil
}

// httpInsert sends prebuilt bulk_docs bodies from `clients` goroutines.
func httpInsert(url, db string, docs []benchDoc, batch, clients int) (float64, error) {
	if err := createDB(url, db); err != nil {
		return 0, err
	}
	return postBodies(http.DefaultClient, url, db, bulkBodies(docs, batch), clients, len(docs))
}

// bulkBodies are the bulk_docs request bodies that insert docs, batch per
// request.
func bulkBodies(docs []benchDoc, batch int) [][]byte {
	var bodies [][]byte
	for i := 0; i < len(docs); i += batch {
		var b strings.Builder
		b.WriteString(`{"Commands":[`)
		for j := i; j < min(i+batch, len(docs)); j++ {
			if j > i {
				b.WriteByte(',')
			}
			b.WriteString(`{"Id":"` + docs[j].id + `","Document":`)
			b.Write(docs[j].body)
			b.WriteString(`,"Type":"PUT"}`)
		}
		b.WriteString(`]}`)
		bodies = append(bodies, []byte(b.String()))
	}
	return bodies
}

// postBodies POSTs the bodies to db's bulk_docs through hc from `clients`
// goroutines and returns docs/s (n documents in all).
func postBodies(hc *http.Client, url, db string, bodies [][]byte, clients, n int) (float64, error) {
	work := make(chan []byte, len(bodies))
	for _, b := range bodies {
		work <- b
	}
	close(work)
	elapsed, err := parallel(clients, func() error {
		for body := range work {
			if err := expect201With(hc, "POST", url+"/databases/"+db+"/bulk_docs", body); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return float64(n) / elapsed.Seconds(), nil
}

// parallel runs fn on n goroutines and returns how long they took and the
// first error.
func parallel(n int, fn func() error) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	return elapsed, <-errs
}

func expect201(method, url string, body []byte) error {
	return expect201With(http.DefaultClient, method, url, body)
}

func expect201With(hc *http.Client, method, url string, body []byte) error {
	b, code, err := doWith(hc, method, url, body)
	if err == nil && code != 201 {
		err = fmt.Errorf("%s %s: %d %.200s", method, url, code, b)
	}
	return err
}

func hilo(out io.Writer, url string, n int) error {
	if err := createDB(url, "hilo"); err != nil {
		return err
	}
	store := client.NewDocumentStore([]string{url}, "hilo")
	defer store.Close()
	ctx := context.Background()
	// Warm the executor (topology) so the loop measures ids only.
	if _, err := store.GenerateID(ctx, "warmup"); err != nil {
		return err
	}
	before := store.HiLoRequests()
	start := time.Now()
	var last string
	for i := 0; i < n; i++ {
		id, err := store.GenerateID(ctx, "users")
		if err != nil {
			return err
		}
		last = id
	}
	elapsed := time.Since(start)
	reqs := store.HiLoRequests() - before
	perM := float64(reqs) * 1e6 / float64(n)
	fmt.Fprintf(out, "%d ids from one busy client (last %s): %.0f ids/s, %d hilo/next requests (%.1f per 1M ids; target <= 16)\n", n, last, float64(n)/elapsed.Seconds(), reqs, perM)
	// Fast path only: ids handed out from a range already held.
	const fast = 2_000_000
	fastStart := time.Now()
	got := 0
	for got < fast {
		if _, err := store.GenerateID(ctx, "fastpath"); err != nil {
			return err
		}
		got++
	}
	fastReqs := store.HiLoRequests() - before - reqs
	fmt.Fprintf(out, "%d ids incl. %d range fetches: %.0f ids/s (the pure fast path is measured by: go test -run x -bench HiLo ./client/)\n", fast, fastReqs, float64(fast)/time.Since(fastStart).Seconds())
	return nil
}

func identities(out io.Writer, url string, single, batched int) error {
	if err := createDB(url, "ident"); err != nil {
		return err
	}
	for _, clients := range []int{1, 4} {
		rate, err := singleIdentities(url, single, clients)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "single (one PUT docs?id=singles| per id, %d client(s)): %8.0f ids/s\n", clients, rate)
	}
	const per = 100
	var b strings.Builder
	b.WriteString(`{"Commands":[`)
	for j := 0; j < per; j++ {
		if j > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"Id":"batched|","Type":"PUT","Document":{"@metadata":{"@collection":"Batched"}}}`)
	}
	b.WriteString(`]}`)
	body := []byte(b.String())
	start := time.Now()
	for i := 0; i < batched; i += per {
		rb, code, err := do("POST", url+"/databases/ident/bulk_docs", body)
		if err != nil || code != 201 {
			return fmt.Errorf("identity batch: %v %d %.200s", err, code, rb)
		}
	}
	fmt.Fprintf(out, "batched (%d identity PUTs per bulk_docs, 1 client):  %8.0f ids/s\n", per, float64(batched)/time.Since(start).Seconds())
	return nil
}

// singleIdentities takes n identity ids, one PUT each, from `clients`
// concurrent clients; concurrent requests share commits (group commit).
func singleIdentities(url string, n, clients int) (float64, error) {
	elapsed, err := parallel(clients, func() error {
		for i := 0; i < n/clients; i++ {
			if err := expect201("PUT", url+"/databases/ident/docs?id=singles%7C", []byte(`{"@metadata":{"@collection":"Singles"}}`)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return float64(n/clients*clients) / elapsed.Seconds(), nil
}

// probe fills a database with items/1..items/N and measures how many
// existence probes the next identity value takes.
func probe(out io.Writer, path string, n int) error {
	db, err := storage.Open(path, storage.Options{Name: "probe", NodeTag: "A"})
	if err != nil {
		return err
	}
	defer db.Close()
	ctx := context.Background()
	empty, _ := document.Parse([]byte(`{"@metadata":{"@collection":"Items"}}`))
	const chunk = 20_000
	for i := 1; i <= n; i += chunk {
		err := db.Write(ctx, func(tx *storage.Tx) error {
			for j := i; j < min(i+chunk, n+1); j++ {
				if _, err := tx.Put("items/"+strconv.Itoa(j), empty, nil); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	var value int64
	var probes int
	start := time.Now()
	err = db.Write(ctx, func(tx *storage.Tx) error {
		taken := func(v int64) (bool, error) { return tx.Exists(ids.IdentityID("items|", "/", v)) }
		busy, err := taken(1)
		if err != nil {
			return err
		}
		probes = 1
		value = 1
		if busy {
			var more int
			value, more, err = ids.NextFree(1, taken)
			probes += more
		}
		return err
	})
	if err != nil {
		return err
	}
	bound := 2*math.Log2(float64(n)) + 2
	verdict := "ok"
	if float64(probes) > bound || value != int64(n)+1 {
		verdict = "OVER BOUND"
	}
	fmt.Fprintf(out, "N=%-8d next free = items/%d after %2d probes (bound 2*log2(N)+2 = %.1f: %s) in %v\n", n, value, probes, bound, verdict, time.Since(start).Round(time.Microsecond))
	if verdict != "ok" {
		return fmt.Errorf("probe count over bound for N=%d", n)
	}
	return nil
}

// extensionsRevisions is the extensions section's revisions part.
func extensionsRevisions(out io.Writer, c config) error {
	if c.extDocs <= 0 {
		return nil
	}
	fmt.Fprintf(out, "\n## Revisions, %d writes per side (storage engine, no HTTP)\n", c.extDocs)
	return revisionsBench(out, c.dir, c.extDocs)
}
