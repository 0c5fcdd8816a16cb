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
