package storage_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/rookerydb/rookery/backend/storage"
)

// The listings that show conflicted ids beside the documents: counts per
// collection, and keyset pages by the newest version's etag that merge with
// PageByEtag on one cursor.
func TestConflictListingsBesideDocuments(t *testing.T) {
	ctx := context.Background()
	a, b := openTag(t, "A"), openTag(t, "B")
	if got, err := b.ConflictsPerCollection(ctx); err != nil || len(got) != 0 {
		t.Fatalf("no conflicts yet: %v %v", got, err)
	}
	for _, id := range []string{"orders/1", "orders/2", "orders/3", "carts/1"} {
		coll := "Orders"
		if id == "carts/1" {
			coll = "Carts"
		}
		for _, db := range []*storage.DB{a, b} {
			if _, err := put(t, db, id, fmt.Sprintf(`{"on":%q,"@metadata":{"@collection":%q}}`, db.NodeTag(), coll), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := put(t, b, "orders/4", `{"@metadata":{"@collection":"orders"}}`, nil); err != nil {
		t.Fatal(err)
	}
	if out := replicate(t, a, b); out[storage.Conflicted] != 4 {
		t.Fatalf("outcomes %v, want four conflicts", out)
	}
	per, err := b.ConflictsPerCollection(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if per["orders"].IDs != 3 || per["orders"].Name != "Orders" || per["carts"].IDs != 1 || len(per) != 2 {
		t.Fatalf("per collection %+v", per)
	}
	// Conflicted ids newest first, paged by etag, one collection or all.
	all, err := b.ConflictPageByEtag(ctx, "", 0, 10)
	if err != nil || len(all) != 4 || all[0].ID != "carts/1" || all[0].Versions != 2 {
		t.Fatalf("all: %+v %v", all, err)
	}
	for i := 1; i < len(all); i++ {
		if all[i].LargestEtag >= all[i-1].LargestEtag {
			t.Fatalf("not newest first: %+v", all)
		}
	}
	page, err := b.ConflictPageByEtag(ctx, "ORDERS", all[1].LargestEtag, 10)
	if err != nil || len(page) != 2 || page[0].ID != all[2].ID || page[1].ID != all[3].ID {
		t.Fatalf("orders before %d: %+v %v", all[1].LargestEtag, page, err)
	}
	// The document left (orders/4) and the conflicts never share an etag.
	docs, err := b.PageByEtag(ctx, "", 0, 10, 0)
	if err != nil || len(docs) != 1 || docs[0].ID != "orders/4" {
		t.Fatalf("documents %v %v", docs, err)
	}
	for _, c := range all {
		if c.LargestEtag == docs[0].Etag {
			t.Fatalf("etag %d used twice", c.LargestEtag)
		}
	}
	// Resolving one (a local write) removes it from the listings.
	if _, err := put(t, b, "carts/1", `{"@metadata":{"@collection":"Carts"}}`, nil); err != nil {
		t.Fatal(err)
	}
	if per, err := b.ConflictsPerCollection(ctx); err != nil || len(per) != 1 || per["orders"].IDs != 3 {
		t.Fatalf("after resolving: %+v %v", per, err)
	}
}
