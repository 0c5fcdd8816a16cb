package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"time"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

// Time series (section "extensions", part "timeseries"): appends/s through
// the engine (tx.TimeSeries in the writer's transactions) against raw
// SQLite inserting the same rows into the same table, and the p50 of a
// range read of 1 hour and of 1 day of a series of -ts-points points (one a
// second) through the engine against the same SELECT on raw SQLite, all in
// one run.

var (
	tsPoints = flag.Int("ts-points", 1_000_000, "extensions/timeseries: points in the series (one a second; 0 skips the time-series part)")
	tsBatch  = flag.Int("ts-batch", 1000, "extensions/timeseries: points per transaction")
	tsReads  = flag.Int("ts-reads", 20, "extensions/timeseries: range reads per measurement")
)

const tsBenchStart = int64(1_796_601_600_000) // 2026-12-07T00:00:00Z

func tsBenchValues(i int) []float64 { return []float64{float64(i), float64(i%100) / 3} }

// extensionsTimeSeries is the time-series part of the extensions section.
func extensionsTimeSeries(out io.Writer, c config) error {
	if *tsPoints <= 0 {
		return nil
	}
	return timeseriesBench(out, c.dir)
}

func timeseriesBench(out io.Writer, dir string) error {
	n, batch := *tsPoints, max(*tsBatch, 1)
	fmt.Fprintf(out, "\n## Time series: %d points (one a second, 2 values), %d per transaction\n", n, batch)
	ctx := context.Background()

	// The engine.
	db, err := storage.Open(filepath.Join(dir, "ts-engine.db"), storage.Options{Name: "ts", NodeTag: "A"})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Write(ctx, func(tx *storage.Tx) error {
		p, err := document.Parse([]byte(`{"@metadata":{"@collection":"Meters"}}`))
		if err != nil {
			return err
		}
		_, err = tx.Put("meters/1", p, nil)
		return err
	}); err != nil {
		return err
	}
	start := time.Now()
	for i := 0; i < n; i += batch {
		op := storage.TSOp{Name: "Power"}
		for j := i; j < min(i+batch, n); j++ {
			op.Appends = append(op.Appends, storage.TSAppend{Timestamp: tsBenchStart + int64(j)*1000, Values: tsBenchValues(j)})
		}
		if err := db.Write(ctx, func(tx *storage.Tx) error { return tx.TimeSeries("meters/1", op) }); err != nil {
			return err
		}
	}
	engineRate := float64(n) / time.Since(start).Seconds()

	// Raw SQLite: the same rows into the same table.
	raw, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "ts-raw.db")+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		return err
	}
	defer raw.Close()
	raw.SetMaxOpenConns(1)
	if _, err := raw.Exec(storage.Schema); err != nil {
		return err
	}
	start = time.Now()
	for i := 0; i < n; i += batch {
		tx, err := raw.Begin()
		if err != nil {
			return err
		}
		stmt, err := tx.Prepare(`INSERT INTO ts_entries(doc_key, lname, ts, lamport, data, etag) VALUES('meters/1', 'power', ?, 1, ?, ?)`)
		if err != nil {
			return err
		}
		for j := i; j < min(i+batch, n); j++ {
			if _, err := stmt.Exec(tsBenchStart+int64(j)*1000, tsBenchData(tsBenchValues(j)), j+2); err != nil {
				return err
			}
		}
		stmt.Close()
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	rawRate := float64(n) / time.Since(start).Seconds()
	fmt.Fprintf(out, "appends, engine (tx.TimeSeries):         %10.0f points/s\n", engineRate)
	fmt.Fprintf(out, "appends, raw SQLite (same rows, table):  %10.0f points/s   engine/raw %.2f\n", rawRate, engineRate/rawRate)

	// Range reads at random places in the series.
	rng := rand.New(rand.NewPCG(1, 2))
	for _, span := range []struct {
		name   string
		points int
	}{{"1 hour", 3600}, {"1 day", 86400}} {
		if span.points > n {
			fmt.Fprintf(out, "range read of %s: skipped (the series has %d points)\n", span.name, n)
			continue
		}
		var eng, rw []time.Duration
		var got int
		for r := 0; r < max(*tsReads, 1); r++ {
			from := tsBenchStart + int64(rng.IntN(n-span.points+1))*1000
			to := from + int64(span.points-1)*1000
			t0 := time.Now()
			rd, err := db.ReadTimeSeries(ctx)
			if err != nil {
				return err
			}
			got = 0
			sum := 0.0
			err = rd.Range("meters/1", "Power", from, to, 0, -1, func(e *storage.TSEntry) error {
				got++
				sum += e.Values[0]
				return nil
			})
			rd.Close()
			if err != nil {
				return err
			}
			eng = append(eng, time.Since(t0))
			if got != span.points {
				return fmt.Errorf("engine read %d points of %d", got, span.points)
			}
			t0 = time.Now()
			rows, err := raw.Query(`SELECT ts, lamport, data FROM ts_entries WHERE doc_key = 'meters/1' AND lname = 'power' AND ts >= ? AND ts <= ? ORDER BY ts`, from, to)
			if err != nil {
				return err
			}
			got = 0
			var ts, lamport int64
			var data sql.RawBytes
			for rows.Next() {
				if err := rows.Scan(&ts, &lamport, &data); err != nil {
					rows.Close()
					return err
				}
				sum += math.Float64frombits(binary.LittleEndian.Uint64(data[1:]))
				got++
			}
			rows.Close()
			rw = append(rw, time.Since(t0))
			if got != span.points {
				return fmt.Errorf("raw read %d points of %d", got, span.points)
			}
		}
		pe, pr := tsP50(eng), tsP50(rw)
		fmt.Fprintf(out, "range read of %-6s (%5d points): engine p50 %8.2f ms, raw SQLite p50 %8.2f ms   engine/raw %.2f\n",
			span.name, span.points, tsMillis(pe), tsMillis(pr), float64(pe)/float64(pr))
	}
	return nil
}

// tsBenchData is the engine's encoding of an entry without a tag (see
// storage.encodeTSData): a zero byte, then the values.
func tsBenchData(values []float64) []byte {
	b := []byte{0}
	for _, v := range values {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

func tsP50(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func tsMillis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
