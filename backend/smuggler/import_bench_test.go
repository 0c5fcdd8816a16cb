package smuggler

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/smuggler/dump"
	"github.com/rookerydb/rookery/backend/storage"
)

// benchDump exports n documents of about 750 bytes (the shape cmd/bench
// uses) into a gzip dump.
func benchDump(b *testing.B, n int) []byte {
	b.Helper()
	db, err := storage.Open(filepath.Join(b.TempDir(), "src.db"), storage.Options{Name: "src", NodeTag: "A"})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	pad := strings.Repeat("lorem ipsum dolor sit amet ", 30)[:700]
	for start := 0; start < n; start += 1000 {
		err := <-db.Submit(context.Background(), func(tx *storage.Tx) error {
			for i := start; i < min(start+1000, n); i++ {
				body := fmt.Sprintf(`{"name":"User %d","email":"user%d@example.com","address":{"street":"%d Main St","city":"Springfield","zip":"%05d"},"tags":["a","b","c"],"age":%d,"notes":"%s","@metadata":{"@collection":"Users"}}`,
					i, i, i, i%100000, 20+i%50, pad)
				p, err := document.Parse([]byte(body))
				if err != nil {
					return err
				}
				if _, err := tx.Put(fmt.Sprintf("users/%d-A", i+1), p, nil); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	var buf bytes.Buffer
	o := Options{OperateOnTypes: "Documents"}
	if err := Export(context.Background(), db, nil, o, &buf, &Result{}); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkImport imports a 20,000-document dump into a fresh database per
// iteration (go test -run x -bench Import -cpuprofile … ./backend/smuggler).
func BenchmarkImport(b *testing.B) {
	const n = 20000
	data := benchDump(b, n)
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		db, err := storage.Open(filepath.Join(b.TempDir(), "dst.db"), storage.Options{Name: "dst", NodeTag: "B"})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res := &Result{}
		if err := Import(context.Background(), db, nil, Options{OperateOnTypes: "Documents"}, bytes.NewReader(data), dump.Limits{}, res); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if got := db.Stats().Documents; got != n {
			b.Fatalf("imported %d documents, want %d", got, n)
		}
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "docs/s")
	// The process's CPU per document (the writer's included) tells more
	// than docs/s on a machine that is busy with other work.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(n*b.N), "cpu-µs/doc")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
