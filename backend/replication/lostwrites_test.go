package replication

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

func putN(t *testing.T, db *storage.DB, from, n int) {
	t.Helper()
	p, err := document.Parse([]byte(`{"@metadata":{"@collection":"Items"}}`))
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < from+n; i++ {
		if err := db.Write(context.Background(), func(tx *storage.Tx) error {
			_, err := tx.Put(fmt.Sprintf("items/%d", i), p, nil)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// copyFiles copies an open database's files as a backup taken at that
// moment would hold them.
func copyFiles(t *testing.T, db *storage.DB) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "documents.db")
	for _, suffix := range []string{"", "-wal", storage.MarkSuffix} {
		b, err := os.ReadFile(db.Path() + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst+suffix, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// A copy restored from an older backup (same database id, lower etag) is
// told by its first destination that writes of its id beyond its last etag
// were acknowledged there; the sender reports it and stops, sending
// nothing.
func TestSenderDetectsLostWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dest, err := storage.Open(filepath.Join(t.TempDir(), "b.db"), storage.Options{Name: "shop", NodeTag: "B"})
	if err != nil {
		t.Fatal(err)
	}
	defer dest.Close()
	dial := func(ctx context.Context, _, _ string) (Conn, error) {
		a, b := pipePair()
		go func() { _ = Receive(ctx, b, func(string) (*storage.DB, error) { return dest, nil }) }()
		return a, nil
	}
	src, err := storage.Open(filepath.Join(t.TempDir(), "a.db"), storage.Options{Name: "shop", NodeTag: "A"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	putN(t, src, 0, 3)
	backup := copyFiles(t, src)
	putN(t, src, 3, 5)
	sctx, stop := context.WithCancel(ctx)
	go NewSender(src, "b", dial, Options{Name: "B"}).Run(sctx)
	for dest.Stats().Documents < 8 {
		if ctx.Err() != nil {
			t.Fatal("the destination never received the 8 documents")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()

	restored, err := storage.Open(backup, storage.Options{Name: "shop", NodeTag: "A"})
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	if restored.DatabaseID() != src.DatabaseID() || restored.LastEtag() != 3 {
		t.Fatalf("restored copy: id %s (want %s), last etag %d", restored.DatabaseID(), src.DatabaseID(), restored.LastEtag())
	}
	putN(t, restored, 100, 1) // etag 4 again: a reused etag
	lost := make(chan LostWritesError, 1)
	done := make(chan struct{})
	go func() {
		NewSender(restored, "b", dial, Options{Name: "B", OnLostWrites: func(l LostWritesError) { lost <- l }}).Run(ctx)
		close(done)
	}()
	select {
	case l := <-lost:
		if l.PeerHas != 8 || l.Have != 4 || l.Peer != "B" || l.DatabaseID != src.DatabaseID() {
			t.Fatalf("report %+v", l)
		}
	case <-ctx.Done():
		t.Fatal("the lost writes were not reported")
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the sender did not stop")
	}
	if docs, _ := dest.GetMany(ctx, []string{"items/100"}); docs[0] != nil {
		t.Fatal("the restored copy's write under a reused etag reached the destination")
	}
}
