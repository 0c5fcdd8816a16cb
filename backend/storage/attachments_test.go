package storage_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"math/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
)

// content is n pseudo-random bytes (generated, never committed).
func content(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func hashOf(b []byte) string {
	s := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(s[:])
}

func putAttachment(t *testing.T, db *storage.DB, id, name, ct string, data []byte) storage.AttachmentInfo {
	t.Helper()
	st, err := db.StageAttachment(bytes.NewReader(data), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Remove()
	var info storage.AttachmentInfo
	err = db.Write(context.Background(), func(tx *storage.Tx) error {
		var err error
		info, err = tx.PutAttachment(id, name, ct, st, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func readAttachment(t *testing.T, db *storage.DB, id, name string) ([]byte, *storage.AttachmentInfo) {
	t.Helper()
	ctx := context.Background()
	info, err := db.Attachment(ctx, id, name)
	if err != nil {
		t.Fatal(err)
	}
	if info == nil {
		return nil, nil
	}
	r := db.OpenContent(ctx, info.Hash)
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b, info
}

func chunkRows(t *testing.T, db *storage.DB) int {
	t.Helper()
	items, err := db.ChangesAfter(context.Background(), 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, it := range items {
		if it.Kind == storage.KindAttachment {
			n++
		}
	}
	return n
}

func TestAttachmentStoredOncePerHashAndSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	db, err := storage.Open(path, storage.Options{Name: "a", NodeTag: "A"})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, db, "users/1", `{"Name":"a","@metadata":{"@collection":"Users"}}`)
	mustPut(t, db, "users/2", `{"Name":"b","@metadata":{"@collection":"Users"}}`)
	data := content(1, 3*storage.AttachmentChunkSize+17) // four chunks
	before, _ := db.Get(ctx, "users/1")
	info := putAttachment(t, db, "users/1", "photo.jpg", "image/jpeg", data)
	if info.Hash != hashOf(data) || info.Size != int64(len(data)) {
		t.Fatalf("info %+v", info)
	}
	after, _ := db.Get(ctx, "users/1")
	if after.Etag <= before.Etag || after.ChangeVector == before.ChangeVector {
		t.Fatalf("storing an attachment must write a new document version: %d %s -> %d %s", before.Etag, before.ChangeVector, after.Etag, after.ChangeVector)
	}
	if !bytes.Contains(after.Body, []byte(`"@flags":"HasAttachments"`)) || !bytes.Contains(after.Body, []byte(`"Name":"photo.jpg"`)) {
		t.Fatalf("body %s", after.Body)
	}
	if got := chunkRows(t, db); got != 4 {
		t.Fatalf("chunk rows %d, want 4", got)
	}
	putAttachment(t, db, "users/2", "copy.bin", "", data) // same bytes: stored once
	if got := chunkRows(t, db); got != 4 {
		t.Fatalf("chunk rows after a second reference %d, want 4 (once per hash)", got)
	}
	// A client PUT of the document (which never carries @attachments) keeps them.
	mustPut(t, db, "users/1", `{"Name":"a2","@metadata":{"@collection":"Users"}}`)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = storage.Open(path, storage.Options{Name: "a", NodeTag: "A"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, ai := readAttachment(t, db, "users/1", "photo.jpg")
	if ai == nil || !bytes.Equal(got, data) || ai.ContentType != "image/jpeg" {
		t.Fatalf("after reopen: %v %d bytes, equal %v", ai, len(got), bytes.Equal(got, data))
	}
	// Deleting one referencing document keeps the content; deleting the last collects it.
	del(t, db, "users/1")
	if got, _ := readAttachment(t, db, "users/2", "copy.bin"); !bytes.Equal(got, data) {
		t.Fatal("content collected while still referenced")
	}
	if ok, _ := db.HasContent(ctx, hashOf(data)); !ok {
		t.Fatal("content gone")
	}
	err = db.Write(ctx, func(tx *storage.Tx) error {
		_, deleted, err := tx.DeleteAttachment("users/2", "copy.bin", nil)
		if !deleted {
			t.Error("DeleteAttachment: not deleted")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := db.HasContent(ctx, hashOf(data)); ok {
		t.Fatal("unreferenced content was not collected")
	}
	d2, _ := db.Get(ctx, "users/2")
	if bytes.Contains(d2.Body, []byte("@attachments")) || bytes.Contains(d2.Body, []byte("HasAttachments")) {
		t.Fatalf("after the last attachment's delete: %s", d2.Body)
	}
	if _, ai := readAttachment(t, db, "users/2", "copy.bin"); ai != nil {
		t.Fatal("deleted attachment still listed")
	}
}

func TestAttachmentReplicationAndUnionMerge(t *testing.T) {
	a, b := openTag(t, "A"), openTag(t, "B")
	mustPut(t, a, "docs/1", `{"V":1,"@metadata":{"@collection":"Docs"}}`)
	replicate(t, a, b)
	da := content(2, storage.AttachmentChunkSize+5)
	db := content(3, 100)
	putAttachment(t, a, "docs/1", "a.bin", "application/octet-stream", da)
	putAttachment(t, b, "docs/1", "b.txt", "text/plain", db)
	replicate(t, a, b)
	replicate(t, b, a)
	replicate(t, a, b)
	for _, n := range []*storage.DB{a, b} {
		ga, ia := readAttachment(t, n, "docs/1", "a.bin")
		gb, ib := readAttachment(t, n, "docs/1", "b.txt")
		if ia == nil || ib == nil || !bytes.Equal(ga, da) || !bytes.Equal(gb, db) {
			t.Fatalf("node %s: union of attachments not served: %v %v", n.NodeTag(), ia, ib)
		}
		if c, _ := n.ConflictCount(context.Background()); c != 0 {
			t.Fatalf("node %s: %d conflicts", n.NodeTag(), c)
		}
	}
	x, _ := a.Get(context.Background(), "docs/1")
	y, _ := b.Get(context.Background(), "docs/1")
	if !bytes.Equal(x.Body, y.Body) || x.ChangeVector != y.ChangeVector {
		t.Fatalf("copies differ:\n%s %s\n%s %s", x.Body, x.ChangeVector, y.Body, y.ChangeVector)
	}
	// The items behind count the chunks too.
	items, _ := a.ChangesAfter(context.Background(), 0, 100000)
	if n, err := a.CountChangesAfter(context.Background(), 0); err != nil || n != int64(len(items)) {
		t.Fatalf("CountChangesAfter %d (%v), ChangesAfter lists %d items", n, err, len(items))
	}
	// A third copy catching up from one of them gets everything.
	c := openTag(t, "C")
	replicate(t, b, c)
	if g, _ := readAttachment(t, c, "docs/1", "a.bin"); !bytes.Equal(g, da) {
		t.Fatal("catch-up copy lacks the content")
	}
}

// A replicated delete releases the content its version listed; the
// content stays until CollectReleased runs with a time after the release,
// and a content coming again (a chunk from another copy) starts its
// release over.
func TestReplicatedDeleteReleasesContent(t *testing.T) {
	ctx := context.Background()
	a, b, c := openTag(t, "A"), openTag(t, "B"), openTag(t, "C")
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	b.SetClock(clock.now)
	x, y := content(11, storage.AttachmentChunkSize+9), content(12, 300)
	mustPut(t, a, "docs/1", `{"V":1,"@metadata":{"@collection":"Docs"}}`)
	mustPut(t, a, "docs/2", `{"V":2,"@metadata":{"@collection":"Docs"}}`)
	putAttachment(t, a, "docs/1", "x.bin", "", x)
	putAttachment(t, a, "docs/2", "y.bin", "", y)
	replicate(t, a, b)
	collected := func(before time.Time) int {
		t.Helper()
		n, err := b.CollectReleased(ctx, before)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	has := func(h string) bool {
		ok, err := b.HasContent(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if n := collected(clock.now().Add(time.Hour)); n != 0 || !has(hashOf(x)) || !has(hashOf(y)) {
		t.Fatalf("collected %d contents that documents list", n)
	}

	del(t, a, "docs/1")
	del(t, a, "docs/2")
	replicate(t, a, b) // released at the clock's time
	if !has(hashOf(x)) || !has(hashOf(y)) {
		t.Fatal("a replicated delete deleted content at once")
	}
	if n := collected(clock.now()); n != 0 {
		t.Fatalf("collected %d contents released at the cut-off, want 0", n)
	}

	// The content of y comes again from C (only its chunks, so far).
	clock.add(10 * time.Minute)
	mustPut(t, c, "docs/3", `{"V":3,"@metadata":{"@collection":"Docs"}}`)
	putAttachment(t, c, "docs/3", "again.bin", "", y)
	items, err := c.ChangesAfter(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var chunks, rest []storage.Item
	for _, it := range items {
		if it.Kind == storage.KindAttachment {
			chunks = append(chunks, it)
		} else {
			rest = append(rest, it)
		}
	}
	if len(chunks) == 0 || len(rest) == 0 {
		t.Fatalf("C's items: %d chunks, %d others", len(chunks), len(rest))
	}
	apply := func(list []storage.Item) {
		t.Helper()
		err := b.Write(ctx, func(tx *storage.Tx) error {
			for _, it := range list {
				if _, err := tx.ApplyReplicated(it); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	apply(chunks)
	// Five minutes later: x was released 10 minutes ago, y's chunk came 5.
	clock.add(5 * time.Minute)
	if n := collected(clock.now().Add(-7 * time.Minute)); n != 1 || has(hashOf(x)) || !has(hashOf(y)) {
		t.Fatalf("collected %d, x kept %v, y kept %v: want x (released 15 min ago) collected and y (its chunk came 5 min ago) kept", n, has(hashOf(x)), has(hashOf(y)))
	}
	apply(rest) // the version listing y arrives: y is in use again
	if n := collected(clock.now().Add(time.Hour)); n != 0 || !has(hashOf(y)) {
		t.Fatalf("collected %d: content listed again must stay", n)
	}
	if got, ai := readAttachment(t, b, "docs/3", "again.bin"); ai == nil || !bytes.Equal(got, y) {
		t.Fatal("docs/3's attachment is not served")
	}

	// A replicated version that drops an attachment releases its content too.
	mustPut(t, a, "docs/4", `{"V":4,"@metadata":{"@collection":"Docs"}}`)
	putAttachment(t, a, "docs/4", "z.bin", "", x)
	replicate(t, a, b)
	if err := a.Write(ctx, func(tx *storage.Tx) error {
		_, _, err := tx.DeleteAttachment("docs/4", "z.bin", nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	replicate(t, a, b)
	if !has(hashOf(x)) {
		t.Fatal("content gone before its release is old enough")
	}
	clock.add(time.Minute)
	if n := collected(clock.now()); n != 1 || has(hashOf(x)) {
		t.Fatalf("collected %d: the content the replicated version dropped stays", n)
	}
}
