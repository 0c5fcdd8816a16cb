package storage_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/backend/storage"
)

// crashCopy copies an open database's files (main file, WAL, etag mark)
// to a new directory, as a kill -9 would leave them: every committed write
// is in the page cache, so in the files.
func crashCopy(t *testing.T, db *storage.DB) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "documents.db")
	for _, suffix := range []string{"", "-wal", storage.MarkSuffix} {
		b, err := os.ReadFile(db.Path() + suffix)
		if err != nil {
			t.Fatalf("copy %s: %v", suffix, err)
		}
		if err := os.WriteFile(dst+suffix, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func writeN(t *testing.T, db *storage.DB, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := put(t, db, fmt.Sprintf("items/%d", i), `{"n":1,"@metadata":{"@collection":"Items"}}`, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func wantDamage(t *testing.T, path string, opts storage.Options, reason string) *storage.DamageError {
	t.Helper()
	db, err := storage.Open(path, opts)
	if err == nil {
		last := db.LastEtag()
		db.Close()
		t.Fatalf("opened %s (last etag %d); want damage %q", path, last, reason)
	}
	d, ok := storage.AsDamage(err)
	if !ok {
		t.Fatalf("error %v (%T) is not a damage report", err, err)
	}
	if d.Reason != reason {
		t.Fatalf("reason %q (%s), want %q", d.Reason, d.Detail, reason)
	}
	return d
}

// A WAL cut or garbled after acknowledged commits rolls the file back to an
// earlier commit; the etag mark says how far this node had acknowledged.
func TestOpenDetectsLostWAL(t *testing.T) {
	cases := map[string]func(t *testing.T, wal string){
		"truncated": func(t *testing.T, wal string) {
			fi, err := os.Stat(wal)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(wal, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		},
		"garbled": func(t *testing.T, wal string) {
			b, err := os.ReadFile(wal)
			if err != nil {
				t.Fatal(err)
			}
			for i := len(b) / 2; i < len(b)/2+64; i++ {
				b[i] ^= 0x5a
			}
			if err := os.WriteFile(wal, b, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"deleted": func(t *testing.T, wal string) {
			if err := os.Remove(wal); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			db := open(t, "")
			writeN(t, db, 0, 60)
			last := db.LastEtag()
			path := crashCopy(t, db)
			damage(t, path+"-wal")
			d := wantDamage(t, path, storage.Options{NodeTag: "A"}, storage.ReasonEtagRegression)
			if !strings.Contains(d.Detail, fmt.Sprintf("up to etag %d", last)) {
				t.Fatalf("detail %q does not name the acknowledged etag %d", d.Detail, last)
			}
			if name != "deleted" && !strings.Contains(d.Detail, storage.WALCopySuffix) {
				t.Fatalf("detail %q does not say where the WAL as found is kept", d.Detail)
			}
			// The verdict is stable: a second open says the same.
			wantDamage(t, path, storage.Options{NodeTag: "A"}, storage.ReasonEtagRegression)
		})
	}
}

// A crash copy that lost nothing opens, and its copy of the WAL is not left
// behind.
func TestOpenAfterCrashIsClean(t *testing.T) {
	db := open(t, "")
	writeN(t, db, 0, 30)
	path := crashCopy(t, db)
	re, err := storage.Open(path, storage.Options{NodeTag: "A"})
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if re.LastEtag() != db.LastEtag() {
		t.Fatalf("last etag %d, want %d", re.LastEtag(), db.LastEtag())
	}
	if _, err := os.Stat(path + storage.WALCopySuffix); !os.IsNotExist(err) {
		t.Fatalf("the WAL copy of a sound open is left behind: %v", err)
	}
}

func TestOpenDetectsDamagedFiles(t *testing.T) {
	closedDB := func(t *testing.T) string {
		db := open(t, "")
		writeN(t, db, 0, 400)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		return db.Path()
	}
	t.Run("truncated main file", func(t *testing.T) {
		path := closedDB(t)
		fi, _ := os.Stat(path)
		if err := os.Truncate(path, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
		d := wantDamage(t, path, storage.Options{NodeTag: "A"}, storage.ReasonUnreadable)
		if !strings.Contains(d.Detail, "truncated") {
			t.Fatalf("detail %q", d.Detail)
		}
		wantDamage(t, path, storage.Options{NodeTag: "A", Integrity: storage.IntegrityOff}, storage.ReasonUnreadable)
	})
	t.Run("empty file with a mark", func(t *testing.T) {
		path := closedDB(t)
		if err := os.Truncate(path, 0); err != nil {
			t.Fatal(err)
		}
		wantDamage(t, path, storage.Options{NodeTag: "A"}, storage.ReasonUnreadable)
	})
	t.Run("garbage", func(t *testing.T) {
		path := closedDB(t)
		if err := os.WriteFile(path, []byte(strings.Repeat("not a database ", 1000)), 0o644); err != nil {
			t.Fatal(err)
		}
		d := wantDamage(t, path, storage.Options{NodeTag: "A"}, storage.ReasonUnreadable)
		if !strings.Contains(d.Detail, "not a SQLite database") {
			t.Fatalf("detail %q", d.Detail)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		path := closedDB(t)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		wantDamage(t, path, storage.Options{NodeTag: "A"}, storage.ReasonMissingFile)
	})
	t.Run("garbled page", func(t *testing.T) {
		path := closedDB(t)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// Garble the middle of the file (b-tree pages, not the header).
		for i := len(b) / 2; i < len(b)/2+4096 && i < len(b); i++ {
			b[i] = 0xff
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		wantDamage(t, path, storage.Options{NodeTag: "A"}, storage.ReasonIntegrity)
		wantDamage(t, path, storage.Options{NodeTag: "A", Integrity: storage.IntegrityFull}, storage.ReasonIntegrity)
	})
	t.Run("another database's file", func(t *testing.T) {
		path := closedDB(t)
		other := closedDB(t)
		b, err := os.ReadFile(other)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		wantDamage(t, path, storage.Options{NodeTag: "A"}, storage.ReasonDatabaseID)
	})
	t.Run("bad integrity mode", func(t *testing.T) {
		if _, err := storage.Open(filepath.Join(t.TempDir(), "x.db"), storage.Options{Integrity: "sometimes"}); err == nil {
			t.Fatal("accepted integrity mode 'sometimes'")
		}
	})
}

// A torn or edited mark proves nothing: the database opens and gets a new
// mark.
func TestTornMarkIsIgnored(t *testing.T) {
	db := open(t, "")
	writeN(t, db, 0, 5)
	path := crashCopy(t, db)
	if err := os.WriteFile(path+storage.MarkSuffix, []byte("rookery-etag-mark 1 garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	re, err := storage.Open(path, storage.Options{NodeTag: "A"})
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, re, 100, 3)
	re.Close()
	b, _ := os.ReadFile(path + storage.MarkSuffix)
	if !strings.Contains(string(b), fmt.Sprintf(" %019d ", re.LastEtag())) {
		t.Fatalf("mark %q does not hold the last etag %d", b, re.LastEtag())
	}
}
