package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"hash"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/testserver"
)

func sha256b64(b []byte) string {
	s := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(s[:])
}

// oneByteReader hides its reader's type (no bytes.Reader shortcut in
// net/http) and hands out at most 7 bytes a call.
type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) > 7 {
		p = p[:7]
	}
	return o.r.Read(p)
}

func storeUser(t *testing.T, store *DocumentStore, id string) {
	t.Helper()
	s := store.OpenSession()
	if err := s.StoreWithID(&User{Name: "ann"}, id); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
}

// The Go client's attachment calls against a real node: store and read
// back, exists, names, optimistic concurrency, delete, a missing document,
// and the client-side checks.
func TestIntegrationAttachments(t *testing.T) {
	n := testserver.Start(t)
	store, log := newStore(t, []string{n.URL})
	ctx := context.Background()
	storeUser(t, store, "users/1")

	text := []byte("hello, attachments\n")
	put, err := store.PutAttachment(ctx, "users/1", "notes.txt", "text/plain", bytes.NewReader(text), int64(len(text)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if put.Name != "notes.txt" || put.DocumentID != "users/1" || put.Size != int64(len(text)) ||
		put.Hash != sha256b64(text) || put.ContentType != "text/plain" || put.ChangeVector == "" {
		t.Fatalf("put details: %+v", put)
	}

	got, err := store.GetAttachment(ctx, "USERS/1", "notes.txt")
	if err != nil || got == nil {
		t.Fatalf("get: %v %v", got, err)
	}
	data, err := io.ReadAll(got.Data)
	got.Close()
	if err != nil || !bytes.Equal(data, text) {
		t.Fatalf("get body %q %v", data, err)
	}
	if d := got.Details; d.Hash != put.Hash || d.Size != put.Size || d.ContentType != "text/plain" ||
		d.ChangeVector != put.ChangeVector || d.Name != "notes.txt" {
		t.Fatalf("get details: %+v, put %+v", d, put)
	}

	// Unknown size: sent chunked, from a reader net/http cannot measure.
	bin := bytes.Repeat([]byte{0, 1, 2, 250}, 5000)
	put2, err := store.PutAttachment(ctx, "users/1", "data.bin", "", oneByteReader{bytes.NewReader(bin)}, -1, nil)
	if err != nil || put2.Size != int64(len(bin)) || put2.Hash != sha256b64(bin) {
		t.Fatalf("chunked put: %+v %v", put2, err)
	}
	if got, err := store.GetAttachment(ctx, "users/1", "data.bin"); err != nil || got == nil {
		t.Fatalf("get data.bin: %v %v", got, err)
	} else {
		b, err := io.ReadAll(got.Data)
		got.Close()
		if err != nil || !bytes.Equal(b, bin) || got.Details.ContentType != "application/octet-stream" {
			t.Fatalf("data.bin: %d bytes, %v, %+v", len(b), err, got.Details)
		}
	}

	// An empty attachment.
	if e, err := store.PutAttachment(ctx, "users/1", "empty", "", strings.NewReader(""), 0, nil); err != nil || e.Size != 0 || e.Hash != sha256b64(nil) {
		t.Fatalf("empty put: %+v %v", e, err)
	}
	if got, err := store.GetAttachment(ctx, "users/1", "empty"); err != nil || got == nil || got.Details.Size != 0 {
		t.Fatalf("empty get: %v %v", got, err)
	} else {
		b, _ := io.ReadAll(got.Data)
		got.Close()
		if len(b) != 0 {
			t.Fatalf("empty attachment read %d bytes", len(b))
		}
	}

	for _, c := range []struct {
		id, name string
		want     bool
	}{{"users/1", "notes.txt", true}, {"users/1", "NOTES.TXT", false}, {"users/1", "nope", false}, {"users/404", "notes.txt", false}} {
		if ok, err := store.AttachmentExists(ctx, c.id, c.name); err != nil || ok != c.want {
			t.Errorf("exists %s %s: %v %v, want %v", c.id, c.name, ok, err, c.want)
		}
	}

	names, err := store.AttachmentNames(ctx, "users/1")
	if err != nil || len(names) != 3 {
		t.Fatalf("names: %+v %v", names, err)
	}
	byName := map[string]AttachmentName{}
	for _, a := range names {
		byName[a.Name] = a
	}
	if a := byName["notes.txt"]; a.Hash != put.Hash || a.Size != put.Size || a.ContentType != "text/plain" {
		t.Errorf("names: notes.txt is %+v", a)
	}
	if a := byName["data.bin"]; a.Hash != put2.Hash || a.Size != int64(len(bin)) {
		t.Errorf("names: data.bin is %+v", a)
	}
	if _, ok := byName["empty"]; !ok {
		t.Errorf("names: no empty in %+v", names)
	}

	// Optimistic concurrency: put.ChangeVector is stale now.
	stale := put.ChangeVector
	_, err = store.PutAttachment(ctx, "users/1", "late.txt", "text/plain", strings.NewReader("late"), 4, &stale)
	var ce *ConcurrencyError
	if !errors.As(err, &ce) || ce.StatusCode != 409 {
		t.Fatalf("stale put: %v", err)
	}
	if ok, _ := store.AttachmentExists(ctx, "users/1", "late.txt"); ok {
		t.Fatal("a refused put stored its attachment")
	}
	if err := store.DeleteAttachment(ctx, "users/1", "notes.txt", &stale); !errors.As(err, &ce) {
		t.Fatalf("stale delete: %v", err)
	}
	if ok, _ := store.AttachmentExists(ctx, "users/1", "notes.txt"); !ok {
		t.Fatal("a refused delete deleted")
	}
	cur, err := store.GetAttachment(ctx, "users/1", "empty")
	if err != nil || cur == nil {
		t.Fatalf("get: %v %v", cur, err)
	}
	cur.Close()
	cv := cur.Details.ChangeVector
	late, err := store.PutAttachment(ctx, "users/1", "late.txt", "text/plain", strings.NewReader("late"), 4, &cv)
	if err != nil || late.ChangeVector == cv {
		t.Fatalf("put with the current change vector: %+v %v", late, err)
	}

	// Delete, then get returns nil.
	if err := store.DeleteAttachment(ctx, "users/1", "notes.txt", &late.ChangeVector); err != nil {
		t.Fatal(err)
	}
	if got, err := store.GetAttachment(ctx, "users/1", "notes.txt"); err != nil || got != nil {
		t.Fatalf("get after delete: %+v %v", got, err)
	}
	if ok, err := store.AttachmentExists(ctx, "users/1", "notes.txt"); err != nil || ok {
		t.Fatalf("exists after delete: %v %v", ok, err)
	}
	if names, err := store.AttachmentNames(ctx, "users/1"); err != nil || len(names) != 3 {
		t.Fatalf("names after delete: %+v %v", names, err)
	}
	if err := store.DeleteAttachment(ctx, "users/1", "notes.txt", nil); err != nil {
		t.Fatalf("deleting a deleted attachment: %v", err)
	}

	// A missing document.
	_, err = store.PutAttachment(ctx, "users/404", "a.txt", "", strings.NewReader("x"), 1, nil)
	var se *ServerError
	if !errors.As(err, &se) || se.StatusCode != 404 || se.ShortType() != "DocumentDoesNotExistException" ||
		!strings.Contains(se.Message, "users/404") || errors.As(err, &ce) {
		t.Fatalf("put on a missing document: %#v", err)
	}
	if _, err := store.AttachmentNames(ctx, "users/404"); !errors.As(err, &se) || se.StatusCode != 404 || se.ShortType() != "DocumentDoesNotExistException" {
		t.Fatalf("names of a missing document: %v", err)
	}
	if got, err := store.GetAttachment(ctx, "users/404", "a.txt"); err != nil || got != nil {
		t.Fatalf("get on a missing document: %v %v", got, err)
	}

	// A reader that does not hold the announced size fails the put.
	if _, err := store.PutAttachment(ctx, "users/1", "short", "", strings.NewReader("abc"), 10, nil); err == nil {
		t.Fatal("a reader shorter than its size was accepted")
	}
	if _, err := store.PutAttachment(ctx, "users/1", "long", "", strings.NewReader("abcdef"), 3, nil); err == nil || !strings.Contains(err.Error(), "more than the 3 bytes") {
		t.Fatalf("a reader longer than its size: %v", err)
	}
	if _, err := store.PutAttachment(ctx, "users/1", "zero", "", strings.NewReader("a"), 0, nil); err == nil {
		t.Fatal("a non-empty reader announced as 0 bytes was accepted")
	}
	for _, name := range []string{"short", "long", "zero"} {
		if ok, _ := store.AttachmentExists(ctx, "users/1", name); ok {
			t.Errorf("a failed put stored %s", name)
		}
	}

	// Refused without a request.
	before := log.total()
	checks := []struct {
		what string
		err  error
	}{
		{"empty name", func() error {
			_, err := store.PutAttachment(ctx, "users/1", " ", "", strings.NewReader("x"), 1, nil)
			return err
		}()},
		{"empty id", func() error {
			_, err := store.PutAttachment(ctx, "", "a", "", strings.NewReader("x"), 1, nil)
			return err
		}()},
		{"control character", func() error {
			_, err := store.PutAttachment(ctx, "users/1", "a\nb", "", strings.NewReader("x"), 1, nil)
			return err
		}()},
		{"long name", func() error {
			_, err := store.PutAttachment(ctx, "users/1", strings.Repeat("n", 513), "", strings.NewReader("x"), 1, nil)
			return err
		}()},
		{"get, empty name", func() error { _, err := store.GetAttachment(ctx, "users/1", ""); return err }()},
		{"exists, empty id", func() error { _, err := store.AttachmentExists(ctx, "", "a"); return err }()},
		{"delete, empty name", store.DeleteAttachment(ctx, "users/1", "", nil)},
		{"names, empty id", func() error { _, err := store.AttachmentNames(ctx, ""); return err }()},
	}
	for _, c := range checks {
		if c.err == nil || !strings.HasPrefix(c.err.Error(), "rookery: ") {
			t.Errorf("%s: %v", c.what, c.err)
		}
	}
	if after := log.total(); after != before {
		t.Errorf("invalid arguments sent %d requests", after-before)
	}
}

// An upload goes to the next node when the first one cannot be reached
// (no byte of the reader was read yet).
func TestIntegrationAttachmentFailover(t *testing.T) {
	n := testserver.Start(t)
	db := newDatabase(t, n.URL)
	setup := NewDocumentStore([]string{n.URL}, db)
	storeUser(t, setup, "users/1")
	setup.Close()
	conv := DefaultConventions()
	conv.DisableTopologyUpdates = true // use exactly [dead, node]
	store := NewDocumentStoreWithConventions([]string{deadURL(t), n.URL}, db, conv)
	defer store.Close()
	body := []byte("failover content")
	d, err := store.PutAttachment(context.Background(), "users/1", "f", "", oneByteReader{bytes.NewReader(body)}, int64(len(body)), nil)
	if err != nil || d.Hash != sha256b64(body) {
		t.Fatalf("put with a dead first node: %+v %v", d, err)
	}
	if f := store.RequestExecutor().FailoverCount(); f != 1 {
		t.Errorf("failovers %d, want 1", f)
	}
	if ok, err := store.AttachmentExists(context.Background(), "users/1", "f"); err != nil || !ok {
		t.Errorf("exists after the failover: %v %v", ok, err)
	}
}

// genReader yields left pseudo-random bytes (xorshift), hashing what it
// hands out.
type genReader struct {
	left  int64
	state uint64
	k     int
	h     hash.Hash
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.left {
		p = p[:g.left]
	}
	for i := range p {
		if g.k == 0 {
			g.state ^= g.state << 13
			g.state ^= g.state >> 7
			g.state ^= g.state << 17
		}
		p[i] = byte(g.state >> (8 * g.k))
		g.k = (g.k + 1) % 8
	}
	g.h.Write(p)
	g.left -= int64(len(p))
	return len(p), nil
}

// peakHeap samples the Go heap until stop is called and returns its
// largest size.
func peakHeap() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

// A 64 MiB attachment goes up from a generating reader and comes back
// through a hash: the bytes match, and neither way holds the content in
// the heap (client and server share this process's heap, so the bound
// covers both).
func TestIntegrationAttachmentLargeStream(t *testing.T) {
	const size = 64 << 20
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()
	storeUser(t, store, "users/big")

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	const bound = 40 << 20 // well below the 64 MiB a buffered copy would take

	gen := &genReader{left: size, state: 0x9E3779B97F4A7C15, h: sha256.New()}
	stop := peakHeap()
	d, err := store.PutAttachment(ctx, "users/big", "big.bin", "application/x-test", gen, size, nil)
	peakUp := stop()
	if err != nil {
		t.Fatal(err)
	}
	want := base64.StdEncoding.EncodeToString(gen.h.Sum(nil))
	if gen.left != 0 || d.Size != size || d.Hash != want {
		t.Fatalf("put: %+v (left %d, want hash %s)", d, gen.left, want)
	}
	if peakUp > base.HeapAlloc+bound {
		t.Errorf("upload: heap peaked at %d MiB over a base of %d MiB", peakUp>>20, base.HeapAlloc>>20)
	}

	runtime.GC()
	runtime.ReadMemStats(&base)
	stop = peakHeap()
	got, err := store.GetAttachment(ctx, "users/big", "big.bin")
	if err != nil || got == nil {
		t.Fatalf("get: %v %v", got, err)
	}
	h := sha256.New()
	read, err := io.Copy(h, got.Data)
	got.Close()
	peakDown := stop()
	if err != nil || read != size {
		t.Fatalf("download: %d bytes, %v", read, err)
	}
	if s := base64.StdEncoding.EncodeToString(h.Sum(nil)); s != want || got.Details.Hash != want || got.Details.Size != size {
		t.Fatalf("download hash %s, details %+v, want %s", s, got.Details, want)
	}
	if peakDown > base.HeapAlloc+bound {
		t.Errorf("download: heap peaked at %d MiB over a base of %d MiB", peakDown>>20, base.HeapAlloc>>20)
	}
	t.Logf("heap peaks over base: upload %d MiB, download %d MiB", (peakUp-min(peakUp, base.HeapAlloc))>>20, (peakDown-min(peakDown, base.HeapAlloc))>>20)
}
