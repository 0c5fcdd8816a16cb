package storage_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
)

// TestPutManyEqualsPutOneByOne writes the same sequence (new ids, ids
// repeated within a run, overwrites of existing documents spelled another
// way, generated ids, new and existing collections) into two copies of one
// database, once by Put one by one and once by PutMany, and compares the
// files row by row after reopening: with and without tombstones.
func TestPutManyEqualsPutOneByOne(t *testing.T) {
	for _, tombstones := range []bool{false, true} {
		t.Run(fmt.Sprintf("tombstones=%v", tombstones), func(t *testing.T) {
			dir := t.TempDir()
			basePath := filepath.Join(dir, "base.db")
			base, err := storage.Open(basePath, storage.Options{Name: "test", NodeTag: "A"})
			if err != nil {
				t.Fatal(err)
			}
			err = base.Write(context.Background(), func(tx *storage.Tx) error {
				for i := 0; i < 40; i++ {
					if _, err := tx.Put(fmt.Sprintf("users/%d", i), doc(t, fmt.Sprintf(`{"n":%d,"@metadata":{"@collection":"Users"}}`, i)), nil); err != nil {
						return err
					}
				}
				if tombstones {
					for i := 30; i < 35; i++ {
						if _, _, err := tx.Delete(fmt.Sprintf("users/%d", i), nil); err != nil {
							return err
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := base.Close(); err != nil {
				t.Fatal(err)
			}
			pathA, pathB := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
			copyFile(t, basePath, pathA)
			copyFile(t, basePath, pathB)

			var items []storage.PutItem
			add := func(id, js string) { items = append(items, storage.PutItem{ID: id, Doc: doc(t, js)}) }
			for i := 0; i < 300; i++ {
				switch {
				case i%37 == 5:
					add(fmt.Sprintf("USERS/%d", i%40), fmt.Sprintf(`{"over":%d,"@metadata":{"@collection":"Users"}}`, i))
				case i%53 == 7:
					add("items/", fmt.Sprintf(`{"gen":%d,"@metadata":{"@collection":"Items"}}`, i))
				case i%41 == 9:
					add(fmt.Sprintf("items/%d", i-3), fmt.Sprintf(`{"again":%d,"@metadata":{"@collection":"items"}}`, i))
				case i%2 == 0:
					add(fmt.Sprintf("items/%d", i), fmt.Sprintf(`{"i":%d,"@metadata":{"@collection":"Items"}}`, i))
				default:
					add(fmt.Sprintf("Orders/%d-A", i), fmt.Sprintf(`{"o":%d,"@metadata":{"@collection":"orders"}}`, i))
				}
			}
			// A run with the same id three times and a deleted id.
			for k := 0; k < 40; k++ {
				add(fmt.Sprintf("dups/%d", k%3), fmt.Sprintf(`{"d":%d,"@metadata":{"@collection":"Dups"}}`, k))
			}
			add("users/31", `{"back":true,"@metadata":{"@collection":"Users"}}`)

			var infosA, infosB []storage.Info
			dbA, err := storage.Open(pathA, storage.Options{Name: "test", NodeTag: "A"})
			if err != nil {
				t.Fatal(err)
			}
			err = dbA.Write(context.Background(), func(tx *storage.Tx) error {
				for _, it := range items {
					info, err := tx.Put(it.ID, it.Doc, nil)
					if err != nil {
						return err
					}
					infosA = append(infosA, info)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			statsA := dbA.Stats()
			dbA.Close()
			dbB, err := storage.Open(pathB, storage.Options{Name: "test", NodeTag: "A"})
			if err != nil {
				t.Fatal(err)
			}
			err = dbB.Write(context.Background(), func(tx *storage.Tx) error {
				var err error
				infosB, err = tx.PutMany(items)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			statsB := dbB.Stats()
			dbB.Close()
			if len(infosA) != len(infosB) {
				t.Fatalf("%d infos by Put, %d by PutMany", len(infosA), len(infosB))
			}
			for i := range infosA {
				a, b := infosA[i], infosB[i]
				a.LastModified, b.LastModified = time.Time{}, time.Time{}
				if a != b {
					t.Fatalf("item %d: Put gave %+v, PutMany %+v", i, infosA[i], infosB[i])
				}
			}
			if statsA.LastEtag != statsB.LastEtag || statsA.ChangeVector != statsB.ChangeVector || statsA.Documents != statsB.Documents || statsA.Tombstones != statsB.Tombstones {
				t.Fatalf("stats differ: %+v vs %+v", statsA, statsB)
			}
			dumpA, dumpB := dumpFile(t, pathA), dumpFile(t, pathB)
			if !reflect.DeepEqual(dumpA, dumpB) {
				for k := range dumpA {
					if !reflect.DeepEqual(dumpA[k], dumpB[k]) {
						t.Errorf("table %s differs:\nPut:     %v\nPutMany: %v", k, dumpA[k], dumpB[k])
					}
				}
				t.FailNow()
			}
			if len(dumpA["docs"]) < 200 {
				t.Fatalf("only %d documents", len(dumpA["docs"]))
			}
			// Reopened, both serve the same counts.
			for _, p := range []string{pathA, pathB} {
				db, err := storage.Open(p, storage.Options{Name: "test", NodeTag: "A"})
				if err != nil {
					t.Fatal(err)
				}
				if s := db.Stats(); s.LastEtag != statsA.LastEtag || s.Documents != statsA.Documents {
					t.Fatalf("%s reopened: %+v, want %+v", p, s, statsA)
				}
				db.Close()
			}
		})
	}
}

// TestPutManyFailureRollsBack: an item that fails (a collection change)
// fails the request and leaves nothing of it.
func TestPutManyFailureRollsBack(t *testing.T) {
	db := open(t, "")
	if _, err := put(t, db, "x/1", `{"@metadata":{"@collection":"X"}}`, nil); err != nil {
		t.Fatal(err)
	}
	var items []storage.PutItem
	for i := 0; i < 64; i++ {
		items = append(items, storage.PutItem{ID: fmt.Sprintf("y/%d", i), Doc: doc(t, `{"@metadata":{"@collection":"Y"}}`)})
	}
	items[40].ID = "x/1"
	err := db.Write(context.Background(), func(tx *storage.Tx) error {
		_, err := tx.PutMany(items)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "Changing") {
		t.Fatalf("err = %v, want a collection-change error", err)
	}
	if s := db.Stats(); s.Documents != 1 || s.LastEtag != 1 {
		t.Fatalf("stats after the failed request: %+v", s)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// dumpFile reads every table that PutMany could touch, in a fixed order,
// leaving out the write times.
func dumpFile(t *testing.T, path string) map[string][]string {
	t.Helper()
	c, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out := map[string][]string{}
	for name, q := range map[string]string{
		"docs":        `SELECT etag, key, id, collection, change_vector, flags, hex(body) FROM docs ORDER BY etag`,
		"tombstones":  `SELECT etag, key, id, collection, deleted_etag, change_vector FROM tombstones ORDER BY etag`,
		"collections": `SELECT key, name, docs, tombstones FROM collections ORDER BY key`,
		"id_numbers":  `SELECT key, prefix, suffix, docs, max_n FROM id_numbers ORDER BY key`,
		"meta":        `SELECT key, value FROM meta WHERE key IN ('last_etag', 'change_vector') ORDER BY key`,
	} {
		rows, err := c.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			out[name] = append(out[name], fmt.Sprint(vals...))
		}
		rows.Close()
	}
	return out
}
