package replication

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/changevector"
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
		_, last, got, err := decodeBatch(msg)
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
	_, last, got, err := decodeBatch(enc.bytes())
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
		if _, _, _, err := decodeBatch(msg[:cut]); err == nil {
			t.Fatalf("a batch cut to %d of %d bytes decoded", cut, len(msg))
		}
	}
	if _, _, _, err := decodeBatch(append(append([]byte(nil), msg...), 0)); err == nil {
		t.Fatal("trailing bytes accepted")
	}
	for i := batchHeader; i < len(msg); i++ {
		bad := append([]byte(nil), msg...)
		bad[i] = 0xff
		_, _, _, _ = decodeBatch(bad) // must not panic
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
	// Huge counts and lengths, and a body nested 100k levels.
	f.Add([]byte{batchMarker0, batchMarker1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	enc.reset()
	deep := storage.Item{Type: "Put", ID: "d", Body: []byte(strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000))}
	enc.add(&deep)
	f.Add(append([]byte(nil), enc.bytes()...))
	enc.reset()
	rev := storage.Item{Type: "Put", Kind: storage.KindRevision, RevisionFlags: storage.RevisionConflicted, Unordered: true, ID: "r", ChangeVector: "A:1-x", Body: []byte(`{}`)}
	enc.add(&rev)
	f.Add(append([]byte(nil), enc.bytes()...))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, last, items, err := decodeBatch(b)
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
			_, l2, items2, err := decodeBatch(again.bytes())
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

// pipe is an in-memory, ordered message connection (one end of two).
type pipe struct {
	in, out chan []byte
	closed  chan struct{}
}

func pipePair() (*pipe, *pipe) {
	a, b := make(chan []byte, 64), make(chan []byte, 64)
	done := make(chan struct{})
	return &pipe{in: a, out: b, closed: done}, &pipe{in: b, out: a, closed: done}
}

func (p *pipe) Send(ctx context.Context, msg []byte) error {
	select {
	case p.out <- append([]byte(nil), msg...):
		return nil
	case <-p.closed:
		return errors.New("closed")
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pipe) Recv(ctx context.Context) ([]byte, error) {
	select {
	case m := <-p.in:
		return m, nil
	case <-p.closed:
		return nil, errors.New("closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *pipe) Close() error { return nil }

func batchOf(after, last int64, items ...storage.Item) []byte {
	var enc batchEncoder
	enc.reset()
	for i := range items {
		enc.add(&items[i])
	}
	enc.after, enc.last = after, last
	return append([]byte(nil), enc.bytes()...)
}

func item(id, cv string, etag int64) storage.Item {
	return storage.Item{Type: "Put", ID: id, Collection: "Items", ChangeVector: cv, Etag: etag, LastModified: time.Now().UTC(), Body: []byte(`{"a":1}`)}
}

// receiver starts Receive on a fresh database and says Hello as source
// "src"; it returns the sender's end and the database.
func receiver(t *testing.T) (*pipe, *storage.DB, chan error) {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "r.db"), storage.Options{Name: "r", NodeTag: "B"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	recvEnd, sendEnd := pipePair()
	done, finished := make(chan error, 1), make(chan struct{})
	go func() {
		done <- Receive(ctx, recvEnd, func(string) (*storage.DB, error) { return db, nil })
		close(finished)
	}()
	t.Cleanup(func() { cancel(); <-finished; db.Close() })
	if err := send(ctx, sendEnd, message{Type: typeHello, Database: "r", SourceID: "src", SourceTag: "A"}); err != nil {
		t.Fatal(err)
	}
	if pos, err := recv(ctx, sendEnd); err != nil || pos.Type != typePosition || pos.Accepted != 0 {
		t.Fatalf("position: %+v %v", pos, err)
	}
	return sendEnd, db, done
}

func storedPosition(t *testing.T, db *storage.DB) int64 {
	t.Helper()
	var at int64
	err := db.Write(context.Background(), func(tx *storage.Tx) (err error) {
		at, err = tx.SourceEtag("src")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// Batches sent back to back are applied in order and acknowledged in
// order; a batch the receiver already has is acknowledged without being
// written (its position is stored with the next batch that writes).
func TestReceivePipelined(t *testing.T) {
	ctx := context.Background()
	c, db, _ := receiver(t)
	for i := int64(1); i <= 3; i++ {
		if err := c.Send(ctx, batchOf((i-1)*10, i*10, item(fmt.Sprintf("items/%d", i), fmt.Sprintf("A:%d-srcdbid", i*10), i*10))); err != nil {
			t.Fatal(err)
		}
	}
	for i := int64(1); i <= 3; i++ {
		ack, err := recv(ctx, c)
		if err != nil || ack.Type != typeAck || ack.Accepted != i*10 {
			t.Fatalf("ack %d: %+v %v", i, ack, err)
		}
	}
	if at := storedPosition(t, db); at != 30 {
		t.Fatalf("stored position %d, want 30", at)
	}
	writes := db.Writes()
	// The same item again, under a later position: nothing to write.
	if err := c.Send(ctx, batchOf(30, 40, item("items/3", "A:30-srcdbid", 40))); err != nil {
		t.Fatal(err)
	}
	if ack, err := recv(ctx, c); err != nil || ack.Accepted != 40 {
		t.Fatalf("ack of a known batch: %+v %v", ack, err)
	}
	if at := storedPosition(t, db); at != 30 || db.Writes() != writes {
		t.Fatalf("a known batch was written: position %d, writes %d→%d", at, writes, db.Writes())
	}
	// The next batch that writes stores the later position.
	if err := c.Send(ctx, batchOf(40, 50, item("items/5", "A:50-srcdbid", 50))); err != nil {
		t.Fatal(err)
	}
	if ack, err := recv(ctx, c); err != nil || ack.Accepted != 50 {
		t.Fatalf("ack: %+v %v", ack, err)
	}
	if at := storedPosition(t, db); at != 50 {
		t.Fatalf("stored position %d, want 50", at)
	}
}

// A batch that does not start where the previous one ended (one went
// missing on the way: the fault proxy's Drop mode loses whole messages)
// ends the connection, and the position stays before the missing items, so
// a reconnecting sender resends them.
func TestReceiveRefusesAGap(t *testing.T) {
	ctx := context.Background()
	c, db, done := receiver(t)
	if err := c.Send(ctx, batchOf(0, 10, item("items/1", "A:10-srcdbid", 10))); err != nil {
		t.Fatal(err)
	}
	if ack, err := recv(ctx, c); err != nil || ack.Accepted != 10 {
		t.Fatalf("ack: %+v %v", ack, err)
	}
	// The batch (10, 20] is lost; (20, 30] arrives.
	if err := c.Send(ctx, batchOf(20, 30, item("items/3", "A:30-srcdbid", 30))); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "a batch is missing") {
			t.Fatalf("Receive ended with %v, want a missing batch", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Receive accepted a batch after a gap")
	}
	if at := storedPosition(t, db); at != 10 {
		t.Fatalf("stored position %d, want 10 (before the missing batch)", at)
	}
	if d, _ := db.Get(ctx, "items/3"); d != nil {
		t.Fatal("the batch after the gap was applied")
	}
}

// A batch that fails ends the connection with an error acknowledgement,
// and the batch queued behind it does not move the position past it.
func TestReceiveFailedBatchStopsTheNext(t *testing.T) {
	ctx := context.Background()
	c, db, done := receiver(t)
	bad := item("items/bad", "not a vector", 10)
	if err := c.Send(ctx, batchOf(0, 10, bad)); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, batchOf(10, 20, item("items/good", "A:20-srcdbid", 20))); err != nil {
		t.Fatal(err)
	}
	if _, err := recv(ctx, c); err == nil || !strings.Contains(err.Error(), "destination: ") {
		t.Fatalf("want an error acknowledgement, got %v", err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Receive ended without an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Receive did not end after a failed batch")
	}
	if at := storedPosition(t, db); at != 0 {
		t.Fatalf("stored position %d after a failed first batch", at)
	}
	if d, _ := db.Get(ctx, "items/good"); d != nil {
		t.Fatal("the batch behind a failed one was applied")
	}
}

// What a peer sends is bounded: a batch whose item count the message
// cannot hold or that passes MaxBatchItems is refused before anything is
// allocated, a control message longer than a change vector and its fields
// is refused, and a body nested past the JSON depth limit ends the
// connection without being stored.
func TestReceiveBounds(t *testing.T) {
	hdr := func(count uint32, rest int) []byte {
		b := make([]byte, batchHeader+rest)
		b[0], b[1] = batchMarker0, batchMarker1
		binary.LittleEndian.PutUint32(b[10:], count)
		return b
	}
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"count 2^32-1 in 100 bytes", hdr(0xffffffff, 100)},
		{"count over len/7", hdr(15, 100)},
		{"count over MaxBatchItems", hdr(MaxBatchItems+1, 7*(MaxBatchItems+1))},
	} {
		if _, _, _, err := decodeBatch(c.b); err == nil {
			t.Errorf("%s: decoded", c.name)
		}
	}
	empty := storage.Item{Type: "Delete"}
	items := make([]storage.Item, 100)
	for i := range items {
		items[i] = empty
	}
	if _, _, got, err := decodeBatch(batchOf(0, 1, items...)); err != nil || len(got) != 100 {
		t.Fatalf("100 minimal items: %d %v", len(got), err)
	}

	ctx := context.Background()
	c, _, done := receiver(t)
	if err := c.Send(ctx, []byte(`{"Type":"Heartbeat","Error":"`+strings.Repeat("x", changevector.MaxLength()+maxControlExtra)+`"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "control message") {
			t.Fatalf("a huge control message: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Receive did not end after a huge control message")
	}

	c, db, done := receiver(t)
	deep := item("items/deep", "A:10-srcdbid", 10)
	deep.Body = []byte(`{"a":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}`)
	if err := c.Send(ctx, batchOf(0, 10, deep)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "--max-json-depth") {
			t.Fatalf("a deep body: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Receive did not end after a deep body")
	}
	if d, _ := db.Get(ctx, "items/deep"); d != nil {
		t.Fatal("a body past the depth limit was stored")
	}
}

// A sender that says nothing for IdleTimeout while the receiver owes it
// nothing is given up on.
func TestReceiveIdleSender(t *testing.T) {
	t.Parallel()
	_, _, done := receiver(t)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "nothing from the sender") {
			t.Fatalf("Receive ended with %v", err)
		}
	case <-time.After(IdleTimeout + 10*time.Second):
		t.Fatal("an idle sender was waited on forever")
	}
}

// While a batch it received is still being applied, the receiver owes the
// sender an acknowledgement: the sender's silence is not idleness, however
// long the apply takes.
func TestReceiveSlowApplyIsNotIdle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, db, done := receiver(t)
	// Hold the database's writer for longer than IdleTimeout.
	held := make(chan struct{})
	go db.Write(ctx, func(*storage.Tx) error {
		close(held)
		time.Sleep(IdleTimeout + 2*time.Second)
		return nil
	})
	<-held
	if err := c.Send(ctx, batchOf(0, 10, item("items/slow", "A:10-srcdbid", 10))); err != nil {
		t.Fatal(err)
	}
	ack, err := recv(ctx, c)
	if err != nil || ack.Type != typeAck || ack.Accepted != 10 {
		t.Fatalf("ack after a slow apply: %+v %v", ack, err)
	}
	select {
	case err := <-done:
		t.Fatalf("the receiver gave up while it owed an acknowledgement: %v", err)
	default:
	}
}
