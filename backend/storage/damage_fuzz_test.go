package storage

import (
	"bytes"
	"testing"
)

// The etag mark is read at every open: any bytes (a torn write, an edit, a
// foreign file, a huge one) are either a valid mark or ignored, never a
// panic; a written mark always reads back.
func FuzzParseMark(f *testing.F) {
	f.Add(formatMark("AAAAAAAAAAAAAAAAAAAAAA", 42))
	f.Add([]byte("rookery-etag-mark 1 "))
	f.Add(bytes.Repeat([]byte{0xff}, 200))
	f.Add(append(formatMark("j/EKHD4ISJONF3CDiNqZ2A", 9223372036854775807), "trailing"...))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<20 {
			return
		}
		m, ok := parseMark(b)
		if !ok {
			return
		}
		if len(m.dbid) != 22 || m.etag < 0 {
			t.Fatalf("accepted %+v", m)
		}
		again, ok := parseMark(formatMark(m.dbid, m.etag))
		if !ok || again != m {
			t.Fatalf("%+v does not round-trip: %+v %v", m, again, ok)
		}
	})
}

// BenchmarkWriteMark is what the etag mark adds to a group commit (one
// pwrite, no fsync), to set against the commit's own fsync.
func BenchmarkWriteMark(b *testing.B) {
	db, err := Open(b.TempDir()+"/db.sqlite", Options{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		db.writeMark(int64(i))
	}
}
