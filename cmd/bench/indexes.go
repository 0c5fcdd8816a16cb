package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/trace"
	"slices"
	"sort"
	"time"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/rql"
	"github.com/rookerydb/rookery/backend/storage"
)

// indexesBench measures the index engine against raw SQLite in the same run:
// indexing throughput of a 3-field auto map, query latency (equality, range,
// full text; take 10) against the same SQL on the same index file, a
// LoadDocument fan-out (one document referenced by refDocs others) with the
// document write latency while it runs, and the first query on a new auto
// index.
func indexesBench(out io.Writer, dir string, n, refDocs int) error {
	ctx := context.Background()
	dbPath := filepath.Join(dir, "indexes-bench", "db.sqlite")
	if err := os.MkdirAll(filepath.Dir(dbPath), 0o755); err != nil {
		return err
	}
	db, err := storage.Open(dbPath, storage.Options{Name: "bench"})
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Fprintf(out, "\n## Indexes (N=%d)\n", n)
	if err := putDocs(ctx, db, n, func(i int) (string, string) {
		return fmt.Sprintf("people/%d", i), fmt.Sprintf(`{"Name":"Name%d","Age":%d,"City":"City %d","Bio":"likes word%d and word%d","@metadata":{"@collection":"People"}}`, i%1000, i%100, i%50, i%1000, i%37)
	}); err != nil {
		return err
	}

	// Raw baseline: read the collection, extract the 3 fields, insert rows
	// of the same shape into a fresh SQLite file with the same indexes.
	rawPath := filepath.Join(dir, "indexes-bench", "raw.db")
	start := time.Now()
	if err := rawIndex(ctx, db, rawPath); err != nil {
		return err
	}
	raw := time.Since(start)

	def := index.Definition{Name: "Auto/People/ByAgeAndCityAndSearch(Name)", Type: index.TypeAutoMap, Collection: "People",
		Fields: []index.AutoField{{Name: "Age"}, {Name: "City"}, {Name: "Name", Search: true}}}
	m := index.NewManager(index.Options{})
	defer m.Close()
	start = time.Now()
	ix, err := m.Put(db, def)
	if err != nil {
		return err
	}
	if err := ix.WaitNonStale(ctx, 0); err != nil {
		return err
	}
	took := time.Since(start)
	fmt.Fprintf(out, "indexing, raw SQLite (read, extract 3 fields, insert)  %8.0f docs/s\n", float64(n)/raw.Seconds())
	fmt.Fprintf(out, "indexing, 3-field auto map (1 full-text)               %8.0f docs/s  (%.2fx raw, target >= 0.7x)\n", float64(n)/took.Seconds(), raw.Seconds()/took.Seconds())

	// Query latency against the same SQL on the same file.
	rdb, err := sql.Open("sqlite", "file:"+ix.Path()+"?_pragma=query_only(1)")
	if err != nil {
		return err
	}
	defer rdb.Close()
	for _, q := range []struct{ name, rql string }{
		{"equality", "from index 'x' where City = 'city 7'"},
		{"range", "from index 'x' where Age between 41 and 41"},
		{"full-text", "from index 'x' where search(Name, 'name7')"},
	} {
		pq, err := rql.Parse(q.rql)
		if err != nil {
			return err
		}
		sq := index.SearchQuery{Where: pq.Where, Take: 10}
		count, page, args, err := ix.Compile(sq)
		if err != nil {
			return err
		}
		const iters = 300
		var engine, rawT []time.Duration
		for i := 0; i < iters; i++ {
			t0 := time.Now()
			res, err := ix.Search(ctx, sq)
			if err != nil {
				return err
			}
			engine = append(engine, time.Since(t0))
			if len(res.Hits) == 0 {
				return fmt.Errorf("%s: %d hits", q.name, len(res.Hits))
			}
			t0 = time.Now()
			var total int64
			if err := rdb.QueryRowContext(ctx, count, args...).Scan(&total); err != nil {
				return err
			}
			rows, err := rdb.QueryContext(ctx, page, args...)
			if err != nil {
				return err
			}
			for rows.Next() {
				var d, id, st sql.NullString
				_ = rows.Scan(&d, &id, &st)
			}
			rows.Close()
			rawT = append(rawT, time.Since(t0))
		}
		e50, e99 := pct(engine, 50), pct(engine, 99)
		r50, r99 := pct(rawT, 50), pct(rawT, 99)
		fmt.Fprintf(out, "query %-9s take(10): p50 %7.3f ms p99 %7.3f ms; same SQL raw p50 %7.3f ms p99 %7.3f ms (p50 %.2fx raw, target <= 1.5x, < 2 ms)\n",
			q.name, msf(e50), msf(e99), msf(r50), msf(r99), float64(e50)/float64(r50))
	}

	// LoadDocument fan-out.
	if err := putDocs(ctx, db, 1, func(int) (string, string) {
		return "owners/1", `{"Name":"Oren","@metadata":{"@collection":"Owners"}}`
	}); err != nil {
		return err
	}
	if err := putDocs(ctx, db, refDocs, func(i int) (string, string) {
		return fmt.Sprintf("pets/%d", i), fmt.Sprintf(`{"Name":"pet%d","Owner":"owners/1","@metadata":{"@collection":"Pets"}}`, i)
	}); err != nil {
		return err
	}
	pets, err := m.Put(db, index.Definition{Name: "Pets/ByOwnerName", Type: index.TypeJavaScriptMap,
		Maps: []string{"map('Pets', p => ({ Name: p.Name, OwnerName: (load(p.Owner, 'Owners') || {}).Name }))"}})
	if err != nil {
		return err
	}
	if err := pets.WaitNonStale(ctx, 0); err != nil {
		return err
	}
	// Rounds: each renames the owner (re-mapping its refDocs pets) while
	// one writer measures document writes back to back, then measures as
	// many writes idle. Idle and busy windows alternate, so a drift of the
	// machine (the disk's fsync latency moves over minutes) weighs on both
	// sides alike; the percentiles pool every round.
	const rounds = 5
	var idle, busy []time.Duration
	var remapTimes []time.Duration
	var remapped int64
	var perRound []int64
	var tf *os.File
	if p := os.Getenv("ROOKERY_BENCH_TRACE"); p != "" {
		// A runtime trace of the re-map windows (go tool trace -pprof=sched).
		if tf, err = os.Create(p); err != nil {
			return err
		}
		if err := trace.Start(tf); err != nil {
			return err
		}
	}
	d0 := takeDiag(dbPath)
	warm, err := writeLatencies(ctx, db, 300, nil)
	if err != nil {
		return err
	}
	idle = append(idle, warm...)
	for r := 0; r < rounds; r++ {
		before := pets.Stats().MapReferenceAttempts
		if err := putDocs(ctx, db, 1, func(int) (string, string) {
			return "owners/1", fmt.Sprintf(`{"Name":"Ayende %d","@metadata":{"@collection":"Owners"}}`, r)
		}); err != nil {
			return err
		}
		start := time.Now()
		done := make(chan time.Duration, 1)
		go func() {
			_ = pets.WaitNonStale(ctx, 0)
			done <- time.Since(start)
		}()
		b, err := writeLatencies(ctx, db, 300, done)
		if err != nil {
			return err
		}
		busy = append(busy, b...)
		remapTimes = append(remapTimes, <-done)
		perRound = append(perRound, pets.Stats().MapReferenceAttempts-before)
		remapped += perRound[len(perRound)-1]
		a, err := writeLatencies(ctx, db, len(b), nil)
		if err != nil {
			return err
		}
		idle = append(idle, a...)
	}
	d1 := takeDiag(dbPath)
	if tf != nil {
		trace.Stop()
		tf.Close()
	}
	slices.Sort(remapTimes)
	each := fmt.Sprintf("re-mapped %d documents each time", perRound[0])
	for _, n := range perRound {
		if n != perRound[0] {
			each = fmt.Sprintf("re-mapped %v documents", perRound)
		}
	}
	fmt.Fprintf(out, "LoadDocument: one owner referenced by %d pets updated, %d times: %s (%d in all), in %.0f ms (median; %.0f to %.0f)\n",
		refDocs, rounds, each, remapped, msf(remapTimes[rounds/2]), msf(remapTimes[0]), msf(remapTimes[rounds-1]))
	fmt.Fprintf(out, "document write p99 while re-mapping %.3f ms (%d writes, p50 %.3f ms, max %.3f ms), idle %.3f ms (%d writes in the windows between, p50 %.3f ms, max %.3f ms) (%.2fx, target <= 1.5x)\n",
		msf(pct(busy, 99)), len(busy), msf(pct(busy, 50)), msf(pct(busy, 100)), msf(pct(idle, 99)), len(idle), msf(pct(idle, 50)), msf(pct(idle, 100)), float64(pct(busy, 99))/float64(pct(idle, 99)))
	d1.report(out, d0)

	// First query on a new auto index.
	start = time.Now()
	first, err := m.Put(db, index.Definition{Name: "Auto/People/ByBio", Type: index.TypeAutoMap, Collection: "People", Fields: []index.AutoField{{Name: "Bio"}}})
	if err != nil {
		return err
	}
	if err := first.WaitNonStale(ctx, db.LastEtag()); err != nil {
		return err
	}
	fmt.Fprintf(out, "first query on a new auto index over %d documents: non-stale after %.0f ms\n", n, msf(time.Since(start)))
	return nil
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func pct(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, len(s)*p/100)]
}

func putDocs(ctx context.Context, db *storage.DB, n int, gen func(int) (string, string)) error {
	for i := 0; i < n; i += 1000 {
		err := db.Write(ctx, func(tx *storage.Tx) error {
			for j := i; j < min(n, i+1000); j++ {
				id, body := gen(j)
				p, err := document.Parse([]byte(body))
				if err != nil {
					return err
				}
				if _, err := tx.Put(id, p, nil); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// writeLatencies times single-document writes (until stop yields, when
// given, but at least n writes).
func writeLatencies(ctx context.Context, db *storage.DB, n int, stop chan time.Duration) ([]time.Duration, error) {
	var out []time.Duration
	for i := 0; ; i++ {
		if i >= n {
			if stop == nil {
				return out, nil
			}
			select {
			case d := <-stop:
				stop <- d
				return out, nil
			default:
			}
		}
		t0 := time.Now()
		if err := putDocs(ctx, db, 1, func(int) (string, string) {
			return fmt.Sprintf("writes/%d", i%100), `{"X":1,"@metadata":{"@collection":"Writes"}}`
		}); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0))
	}
}

// rawIndex is the baseline: the same rows in the same table shape, inserted
// with one prepared statement per 8192-row transaction.
func rawIndex(ctx context.Context, db *storage.DB, path string) error {
	w, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return err
	}
	defer w.Close()
	w.SetMaxOpenConns(1)
	if _, err := w.Exec(`CREATE TABLE entries(eid INTEGER PRIMARY KEY, doc TEXT NOT NULL, id TEXT, stored TEXT, c1, x1, c2, x2, c3, x3);
		CREATE INDEX entries_doc ON entries(doc); CREATE INDEX e1 ON entries(c1); CREATE INDEX e2 ON entries(c2); CREATE INDEX e3 ON entries(c3);
		CREATE VIRTUAL TABLE fts3 USING fts5(v)`); err != nil {
		return err
	}
	var after int64
	for {
		tx, err := w.Begin()
		if err != nil {
			return err
		}
		ins, err := tx.Prepare(`INSERT INTO entries(doc, id, c1, c2, c3) VALUES(?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		fts, err := tx.Prepare(`INSERT INTO fts3(rowid, v) VALUES(?, ?)`)
		if err != nil {
			return err
		}
		got := 0
		err = db.ScanCollection(ctx, "People", after, 8192, func(d *storage.Document) error {
			var body map[string]any
			if err := json.Unmarshal(d.Body, &body); err != nil {
				return err
			}
			res, err := ins.Exec(storage.LowerID(d.ID), d.ID, body["Age"], body["City"], body["Name"])
			if err != nil {
				return err
			}
			eid, _ := res.LastInsertId()
			if _, err := fts.Exec(eid, body["Name"]); err != nil {
				return err
			}
			after = d.Etag
			got++
			return nil
		})
		ins.Close()
		fts.Close()
		if err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		if got < 8192 {
			return nil
		}
	}
}

// diagSnap is what tells why writes slow down while an index works: the
// database's WAL size (it grows when a read snapshot stays open, and every
// commit then appends to it), garbage collections, and how long runnable
// goroutines waited for a processor.
type diagSnap struct {
	wal           int64
	gcs, allocs   uint64
	pauses, sched *metrics.Float64Histogram
}

func takeDiag(dbPath string) diagSnap {
	ms := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/allocs:bytes"},
		{Name: "/sched/pauses/total/gc:seconds"}, {Name: "/sched/latencies:seconds"}}
	metrics.Read(ms)
	var wal int64
	if fi, err := os.Stat(dbPath + "-wal"); err == nil {
		wal = fi.Size()
	}
	return diagSnap{wal: wal, gcs: ms[0].Value.Uint64(), allocs: ms[1].Value.Uint64(),
		pauses: ms[2].Value.Float64Histogram(), sched: ms[3].Value.Float64Histogram()}
}

// histP99 is the 99th percentile (a bucket's upper bound, in ms) of what a
// runtime histogram gained between two reads.
func histP99(a, b *metrics.Float64Histogram) float64 {
	var n, acc uint64
	for i := range b.Counts {
		n += b.Counts[i] - a.Counts[i]
	}
	for i := range b.Counts {
		acc += b.Counts[i] - a.Counts[i]
		if n > 0 && acc*100 >= n*99 {
			return b.Buckets[i+1] * 1000
		}
	}
	return 0
}

func (s diagSnap) report(out io.Writer, a diagSnap) {
	fmt.Fprintf(out, "  while re-mapping: database WAL %.1f -> %.1f MB, %d GCs (pause p99 %.2f ms), %d MB allocated, goroutine wait for a processor p99 %.2f ms\n",
		float64(a.wal)/(1<<20), float64(s.wal)/(1<<20), s.gcs-a.gcs, histP99(a.pauses, s.pauses), (s.allocs-a.allocs)>>20, histP99(a.sched, s.sched))
}
