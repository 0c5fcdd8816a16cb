package storage_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/backend/storage"
)

func TestIDNumbers(t *testing.T) {
	db := open(t, "")
	for _, id := range []string{"users/1-A", "users/7-A", "users/3-B", "companies/5", "companies/12", "companies/x", "plain", "orders/07"} {
		if _, err := put(t, db, id, `{}`, nil); err != nil {
			t.Fatal(err)
		}
	}
	err := db.Write(context.Background(), func(tx *storage.Tx) error {
		_, _, err := tx.Delete("companies/12", nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]storage.IDNumbers{}
	for _, v := range db.IDNumbers("") {
		got[v.Prefix+v.Suffix] = v
	}
	if v := got["users/-A"]; v.Docs != 2 || v.MaxN != 7 {
		t.Fatalf("users/-A %+v", v)
	}
	if v := got["users/-B"]; v.Docs != 1 || v.MaxN != 3 {
		t.Fatalf("users/-B %+v", v)
	}
	if v := got["companies/"]; v.Docs != 1 || v.MaxN != 12 {
		t.Fatalf("companies/ %+v (the high-water mark stays after a delete)", v)
	}
	if len(got) != 3 {
		t.Fatalf("unexpected shapes %v", got)
	}
	if len(db.IDNumbers("Users/")) != 2 {
		t.Fatal("prefix filter")
	}
}

func TestKeysetPaging(t *testing.T) {
	db := open(t, "")
	for i := 0; i < 25; i++ {
		coll := "Users"
		if i%5 == 0 {
			coll = "Orders"
		}
		if _, err := put(t, db, fmt.Sprintf("%s/%02d", coll, i), `{"@metadata":{"@collection":"`+coll+`"}}`, nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	var all []string
	before := int64(0)
	for {
		page, err := db.PageByEtag(ctx, "users", before, 7, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, d := range page {
			all = append(all, d.ID)
		}
		before = page[len(page)-1].Etag
	}
	if len(all) != 20 || all[0] != "Users/24" || all[19] != "Users/01" {
		t.Fatalf("pages %v", all)
	}
	page, err := db.PageByID(ctx, "users/1", "", "", 100, 0)
	if err != nil || len(page) != 8 || page[0].ID != "Users/11" {
		t.Fatalf("by id %d %v", len(page), err)
	}
	page, err = db.PageByID(ctx, "users/1", "Users", "users/14", 100, 0)
	if err != nil || len(page) != 4 || page[0].ID != "Users/16" {
		t.Fatalf("after %d %v", len(page), err)
	}
	if page, _ := db.PageByEtag(ctx, "nope", 0, 10, 0); len(page) != 0 {
		t.Fatal("unknown collection")
	}
}

// Finding 10: the studio's page reads return at most maxBody bytes of each
// body (SQLite cuts it), with the whole length beside it; small bodies come
// whole.
func TestSecurityF10PageReadsBoundedPrefix(t *testing.T) {
	db := open(t, "")
	big := `{"x":"` + strings.Repeat("a", 100<<20) + `","@metadata":{"@collection":"Big"}}`
	if _, err := put(t, db, "big/1", big, nil); err != nil {
		t.Fatal(err)
	}
	big = ""
	if _, err := put(t, db, "big/2", `{"x":1,"@metadata":{"@collection":"Big"}}`, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	check := func(what string, docs []*storage.Document, err error) {
		t.Helper()
		if err != nil || len(docs) != 2 {
			t.Fatalf("%s: %d docs, %v", what, len(docs), err)
		}
		returned := 0
		for _, d := range docs {
			returned += len(d.Body)
			switch d.ID {
			case "big/1":
				if len(d.Body) != 8192 || d.Size < 100<<20 || !d.Truncated() || !strings.HasPrefix(string(d.Body), `{"x":"aaa`) {
					t.Fatalf("%s: big/1 body %d bytes, size %d", what, len(d.Body), d.Size)
				}
			case "big/2":
				if d.Truncated() || int(d.Size) != len(d.Body) || !strings.HasPrefix(string(d.Body), `{"x":1`) {
					t.Fatalf("%s: big/2 body %q, size %d", what, d.Body, d.Size)
				}
			}
		}
		if returned > 2*8192 {
			t.Fatalf("%s: SQLite returned %d body bytes", what, returned)
		}
	}
	docs, err := db.PageByEtag(ctx, "Big", 0, 10, 8192)
	check("PageByEtag", docs, err)
	docs, err = db.PageByID(ctx, "big/", "", "", 10, 8192)
	check("PageByID", docs, err)
	d, err := db.GetPrefix(ctx, "big/1", 8192)
	if err != nil || len(d.Body) != 8192 || !d.Truncated() {
		t.Fatalf("GetPrefix: %v %+v", err, d)
	}
	if d, err := db.GetPrefix(ctx, "nope", 8192); d != nil || err != nil {
		t.Fatalf("GetPrefix of a missing id: %v %v", d, err)
	}
}
