package catalog

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func openCat(t *testing.T, dir string) *Catalog {
	t.Helper()
	c, err := OpenWith(Config{DataDir: dir, NodeTag: "A", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func putDoc(t *testing.T, db *storage.DB, id string) {
	t.Helper()
	p, err := document.Parse([]byte(`{"@metadata":{"@collection":"Items"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write(context.Background(), func(tx *storage.Tx) error {
		_, err := tx.Put(id, p, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func has(t *testing.T, db *storage.DB, id string) bool {
	t.Helper()
	docs, err := db.GetMany(context.Background(), []string{id})
	if err != nil {
		t.Fatal(err)
	}
	return docs[0] != nil
}

// No name is interpreted: ".deleting" (any case) is a name like another,
// and a delete leaves nothing in databases/.
func TestNamesAreNeverInterpreted(t *testing.T) {
	dir := t.TempDir()
	c := openCat(t, dir)
	names := []string{"a.deleting", "B.DELETING", "c.Deleting.deleting", "trash", "damaged"}
	for _, n := range names {
		db, err := c.Create(n, Options{})
		if err != nil {
			t.Fatal(err)
		}
		putDoc(t, db, "items/1")
	}
	gone, err := c.Create("gone", Options{})
	if err != nil {
		t.Fatal(err)
	}
	putDoc(t, gone, "items/1")
	if err := c.Delete("gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "databases", "gone")); !os.IsNotExist(err) {
		t.Fatalf("the deleted database's directory is still there: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openCat(t, dir)
	defer c.Close()
	for _, n := range names {
		db, err := c.Get(n)
		if err != nil {
			t.Fatalf("%s after a restart: %v", n, err)
		}
		if !has(t, db, "items/1") {
			t.Fatalf("%s lost its document", n)
		}
	}
	if _, err := c.Get("gone"); !dberr.Is(err, dberr.DatabaseMissing) {
		t.Fatalf("gone: %v", err)
	}
}

// The trash is emptied at start: a delete interrupted after the move is
// finished then.
func TestTrashEmptiedAtStart(t *testing.T) {
	dir := t.TempDir()
	left := filepath.Join(dir, "trash", "0123abcd", "documents.db")
	if err := os.MkdirAll(filepath.Dir(left), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(left, []byte("half removed"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := openCat(t, dir)
	defer c.Close()
	if entries, _ := os.ReadDir(filepath.Join(dir, "trash")); len(entries) != 0 {
		t.Fatalf("trash not emptied: %d entries", len(entries))
	}
	if len(c.Names()) != 0 || len(c.Damaged()) != 0 {
		t.Fatalf("the trash became a database: %v %v", c.Names(), c.Damaged())
	}
}

// A directory whose file holds another database (a delete interrupted by a
// version that renamed to "<name>.deleting") is neither served nor removed.
func TestForeignDirectoryIsLeftAlone(t *testing.T) {
	dir := t.TempDir()
	c := openCat(t, dir)
	db, err := c.Create("foo", Options{})
	if err != nil {
		t.Fatal(err)
	}
	putDoc(t, db, "items/1")
	c.Close()
	old := filepath.Join(dir, "databases", "foo.deleting")
	if err := os.Rename(filepath.Join(dir, "databases", "foo"), old); err != nil {
		t.Fatal(err)
	}
	c = openCat(t, dir)
	defer c.Close()
	if c.Has("foo") || c.Has("foo.deleting") {
		t.Fatalf("a foreign directory was opened: %v", c.Names())
	}
	if _, err := os.Stat(filepath.Join(old, "documents.db")); err != nil {
		t.Fatalf("its files were removed: %v", err)
	}
	if _, err := c.Create("foo.deleting", Options{}); !dberr.Is(err, dberr.InvalidOperation) {
		t.Fatalf("creating over a foreign directory: %v", err)
	}
}

func TestDamagedDatabaseIsKeptAndReseeded(t *testing.T) {
	dir := t.TempDir()
	c := openCat(t, dir)
	good, _ := c.Create("good", Options{})
	bad, _ := c.Create("Bad", Options{Separator: "-"})
	putDoc(t, good, "items/1")
	putDoc(t, bad, "items/1")
	oldID := bad.DatabaseID()
	c.Close()
	if err := os.WriteFile(filepath.Join(dir, "databases", "bad", "documents.db"), []byte(strings.Repeat("garbage ", 600)), 0o644); err != nil {
		t.Fatal(err)
	}
	c = openCat(t, dir)
	defer c.Close()
	if db, err := c.Get("good"); err != nil || !has(t, db, "items/1") {
		t.Fatalf("the healthy database: %v", err)
	}
	_, err := c.Get("BAD")
	if !dberr.Is(err, dberr.Unavailable) || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), "reseed?name=bad") {
		t.Fatalf("a request to the damaged database: %v", err)
	}
	if d := c.Damaged(); len(d) != 1 || d[0].Name != "bad" || d[0].Reason != storage.ReasonUnreadable {
		t.Fatalf("Damaged: %+v", d)
	}
	if strings.Join(c.Names(), ",") != "good" || len(c.All()) != 1 || !c.Has("bad") {
		t.Fatalf("Names %v, All %d, Has %v", c.Names(), len(c.All()), c.Has("bad"))
	}
	if _, err := c.Create("bad", Options{}); err == nil {
		t.Fatal("created over a damaged copy")
	}
	if _, err := c.Reseed("good", Options{}); !dberr.Is(err, dberr.InvalidOperation) {
		t.Fatalf("re-seeding a healthy database: %v", err)
	}
	res, err := c.Reseed("Bad", Options{Separator: "-"})
	if err != nil {
		t.Fatal(err)
	}
	if res.DB.DatabaseID() == oldID || res.DB.Separator() != "-" || res.DB.LastEtag() != 0 {
		t.Fatalf("re-seeded copy: id %s (old %s), separator %q, last etag %d", res.DB.DatabaseID(), oldID, res.DB.Separator(), res.DB.LastEtag())
	}
	if b, err := os.ReadFile(filepath.Join(res.Kept, "documents.db")); err != nil || !strings.HasPrefix(string(b), "garbage") {
		t.Fatalf("the damaged files are not kept in %s: %v", res.Kept, err)
	}
	if !strings.HasPrefix(res.Kept, filepath.Join(dir, "damaged")) {
		t.Fatalf("kept in %s", res.Kept)
	}
	if db, err := c.Get("bad"); err != nil || db != res.DB || len(c.Damaged()) != 0 {
		t.Fatalf("after the re-seed: %v", err)
	}
}

// A damage found while serving (a peer's acknowledgement) is recorded on
// disk: the copy stays out of service across a restart, although its file
// opens cleanly.
func TestMarkDamagedSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	c := openCat(t, dir)
	db, _ := c.Create("shop", Options{})
	putDoc(t, db, "items/1")
	var events []string
	c.OnChange(func(e Event) { events = append(events, e.Type+":"+e.Name) })
	if !c.MarkDamaged(db, storage.ReasonPeerRegression, "node B has etag 9") {
		t.Fatal("MarkDamaged did nothing")
	}
	if c.MarkDamaged(db, storage.ReasonPeerRegression, "again") {
		t.Fatal("a closed handle was marked again")
	}
	if _, err := c.Get("shop"); !dberr.Is(err, dberr.Unavailable) || !strings.Contains(err.Error(), "node B has etag 9") {
		t.Fatalf("Get: %v", err)
	}
	if strings.Join(events, ",") != "damaged:shop" {
		t.Fatalf("events %v", events)
	}
	c.Close()
	c = openCat(t, dir)
	defer c.Close()
	d, ok := c.DamageOf("shop")
	if !ok || d.Reason != storage.ReasonPeerRegression || !strings.Contains(d.Detail, "node B has etag 9") || d.Detected.IsZero() {
		t.Fatalf("after a restart: %+v %v", d, ok)
	}
	if err := c.Delete("shop"); err != nil {
		t.Fatal(err)
	}
	if c.Has("shop") {
		t.Fatal("a deleted damaged database is still there")
	}
}
