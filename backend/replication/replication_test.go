package replication

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
)

// A batch survives its binary form byte for byte: ids, collections and
// vectors with any characters, empty and missing bodies, deletes, negative
// and zero times.
func TestBatchRoundTrip(t *testing.T) {
	items := []storage.Item{
		{Type: "Put", ID: "users/1", Collection: "Users", ChangeVector: "A:1-abc", Etag: 1, LastModified: time.Unix(0, 1_700_000_000_123_456_789).UTC(), Body: []byte(`{"name":"x"}`)},
		{Type: "Delete", ID: "ünïcode/\x00/é", Collection: "@empty", ChangeVector: "A:2-abc, B:9-def", Etag: 300, LastModified: time.Unix(0, 0).UTC(), Unordered: true},
		{Type: "Put", ID: "merged/1", Collection: "M", ChangeVector: "A:3-abc, B:9-def", Etag: 301, LastModified: time.Unix(0, 5).UTC(), Body: []byte(`{}`), Unordered: true},
		{Type: "Put", ID: "big", Collection: "", ChangeVector: "", Etag: math.MaxInt64, LastModified: time.Unix(-5, 0).UTC(), Body: bytes.Repeat([]byte{0xff, '"'}, 70_000)},
	}
	var enc batchEncoder
	for round := 0; round < 2; round++ { // the buffer is reused
		enc.reset()
		for i := range items {
			enc.add(&items[i])
		}
		enc.last = 1234
		msg := enc.bytes()
		if !isBatch(msg) {
			t.Fatal("not recognised as a batch")
		}
		last, got, err := decodeBatch(msg)
		if err != nil {
			t.Fatal(err)
		}
		if last != 1234 || len(got) != len(items) {
			t.Fatalf("last %d, %d items", last, len(got))
		}
		for i := range items {
			w, g := items[i], got[i]
			if w.Type != g.Type || w.Unordered != g.Unordered || w.ID != g.ID || w.Collection != g.Collection || w.ChangeVector != g.ChangeVector || w.Etag != g.Etag ||
				!w.LastModified.Equal(g.LastModified) || !bytes.Equal(w.Body, g.Body) {
				t.Fatalf("item %d: sent %+v, got %+v", i, w, g)
			}
		}
	}
	// An empty batch (every item skipped) still carries its position.
	enc.reset()
	enc.last = 99
	last, got, err := decodeBatch(enc.bytes())
	if err != nil || last != 99 || len(got) != 0 {
		t.Fatalf("empty batch: %d %d %v", last, len(got), err)
	}
}

// A damaged batch is an error, never a panic or a short read taken as
// complete.
func TestBatchDamaged(t *testing.T) {
	var enc batchEncoder
	enc.reset()
	it := storage.Item{Type: "Put", ID: "a/1", Collection: "A", ChangeVector: "A:1-x", Etag: 1, LastModified: time.Now(), Body: []byte(`{"a":1}`)}
	enc.add(&it)
	enc.add(&it)
	enc.last = 1
	msg := append([]byte(nil), enc.bytes()...)
	for cut := 0; cut < len(msg); cut++ {
		if _, _, err := decodeBatch(msg[:cut]); err == nil {
			t.Fatalf("a batch cut to %d of %d bytes decoded", cut, len(msg))
		}
	}
	if _, _, err := decodeBatch(append(append([]byte(nil), msg...), 0)); err == nil {
		t.Fatal("trailing bytes accepted")
	}
	for i := batchHeader; i < len(msg); i++ {
		bad := append([]byte(nil), msg...)
		bad[i] = 0xff
		_, _, _ = decodeBatch(bad) // must not panic
	}
}

func FuzzDecodeBatch(f *testing.F) {
	var enc batchEncoder
	enc.reset()
	it := storage.Item{Type: "Delete", ID: "x", Etag: 7, LastModified: time.Unix(1, 2)}
	enc.add(&it)
	enc.last = 7
	f.Add(append([]byte(nil), enc.bytes()...))
	f.Add([]byte{batchMarker0, batchMarker1})
	f.Fuzz(func(t *testing.T, b []byte) {
		last, items, err := decodeBatch(b)
		if err != nil {
			return
		}
		// What decodes re-encodes to the same bytes.
		var again batchEncoder
		again.reset()
		for i := range items {
			again.add(&items[i])
		}
		again.last = last
		if !bytes.Equal(again.bytes(), b) {
			// Re-encoding writes canonical varints and kinds; a
			// non-canonical input may differ but must decode the same.
			l2, items2, err := decodeBatch(again.bytes())
			if err != nil || l2 != last || fmt.Sprint(items2) != fmt.Sprint(items) {
				t.Fatalf("re-encoding changed the batch")
			}
		}
	})
}

// The commit log answers with the commit time of the first etag above a
// position, folds commits closer than markEvery into one mark stamped with
// the first, and says it cannot tell for positions it does not cover.
func TestCommitLog(t *testing.T) {
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := base
	l := NewCommitLog(10)
	l.now = func() time.Time { return now }
	commit := func(etags ...int64) {
		var ch []storage.Change
		for _, e := range etags {
			ch = append(ch, storage.Change{Etag: e})
		}
		l.Record(ch)
	}
	if _, ok := l.OldestAfter(10); ok {
		t.Fatal("an empty log answered")
	}
	commit(11, 12)
	now = now.Add(time.Second)
	commit(13)
	now = now.Add(3 * time.Millisecond) // folded into the mark of 13
	commit(14)
	now = now.Add(time.Second)
	commit(15)
	for _, c := range []struct {
		after int64
		at    time.Time
		ok    bool
	}{
		{5, time.Time{}, false}, // before the log began
		{10, base, true},
		{11, base, true},
		{12, base.Add(time.Second), true},
		{13, base.Add(time.Second), true},
		{14, base.Add(2*time.Second + 3*time.Millisecond), true},
		{15, time.Time{}, false}, // nothing above it
	} {
		at, ok := l.OldestAfter(c.after)
		if ok != c.ok || !at.Equal(c.at) {
			t.Fatalf("OldestAfter(%d) = %v %v, want %v %v", c.after, at, ok, c.at, c.ok)
		}
	}
	// Once the ring wraps, the oldest marks are forgotten and the floor
	// moves up with them.
	e := int64(15)
	for i := 0; i < logMarks; i++ {
		now = now.Add(time.Second)
		e++
		commit(e)
	}
	if _, ok := l.OldestAfter(10); ok {
		t.Fatal("a forgotten position answered")
	}
	at, ok := l.OldestAfter(e - 1)
	if !ok || !at.Equal(now) {
		t.Fatalf("newest mark: %v %v, want %v", at, ok, now)
	}
	at, ok = l.OldestAfter(e - logMarks)
	if !ok || !at.Equal(now.Add(-time.Duration(logMarks-1)*time.Second)) {
		t.Fatalf("oldest kept mark: %v %v", at, ok)
	}
}

// Rates cover the last rateSeconds whole seconds and the current one.
func TestRateWindow(t *testing.T) {
	var w rateWindow
	t0 := time.Unix(1_000_000, 0)
	for s := 0; s < 10; s++ {
		w.add(t0.Add(time.Duration(s)*time.Second), 100)
		w.add(t0.Add(time.Duration(s)*time.Second+500*time.Millisecond), 100)
	}
	// At 9.5 s: seconds 4..9 are in the window, 12 batches of 100 over 5.5 s.
	b, d := w.rates(t0.Add(9*time.Second + 500*time.Millisecond))
	if math.Abs(b-12/5.5) > 1e-9 || math.Abs(d-1200/5.5) > 1e-9 {
		t.Fatalf("rates %v %v", b, d)
	}
	// Long after, nothing.
	if b, d := w.rates(t0.Add(time.Minute)); b != 0 || d != 0 {
		t.Fatalf("stale rates %v %v", b, d)
	}
}
