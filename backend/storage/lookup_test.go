package storage_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
)

// ExistingIDs answers for stored and conflicted ids, case-insensitively,
// across its statement chunks; ConflictOf describes a conflicted id.
func TestExistingIDsAndConflictOf(t *testing.T) {
	ctx := context.Background()
	db := openTag(t, "A")
	for i := range 450 {
		if _, err := put(t, db, fmt.Sprintf("Users/%d", i), `{"@metadata":{"@collection":"Users"}}`, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := put(t, db, "orders/1", `{"by":"A","@metadata":{"@collection":"Orders"}}`, nil); err != nil {
		t.Fatal(err)
	}
	// A concurrent version from B: orders/1 becomes a conflict.
	err := db.Write(ctx, func(tx *storage.Tx) error {
		o, err := tx.ApplyReplicated(storage.Item{Type: "Put", ID: "Orders/1", Collection: "Orders", ChangeVector: "B:5-Qfo6Xn1dQEeVq0mZ1W2yXB",
			LastModified: time.Now().Add(time.Hour), Body: []byte(`{"by":"B","@metadata":{"@collection":"Orders"}}`)})
		if err == nil && o != storage.Conflicted {
			err = fmt.Errorf("outcome %v, want a conflict", o)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	var ask []string
	for i := 0; i < 500; i += 2 { // 250 ids: two statement chunks; 25 of them missing
		ask = append(ask, fmt.Sprintf("users/%d", i))
	}
	ask = append(ask, "USERS/0", "orders/1", "nobody/1")
	got, err := db.ExistingIDs(ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 226 { // users/0…users/448 (225) and orders/1
		t.Fatalf("%d ids found, want 226", len(got))
	}
	if st := got["users/448"]; st.ID != "Users/448" || st.Conflicted {
		t.Fatalf("users/448: %+v", st)
	}
	if _, ok := got["users/450"]; ok {
		t.Fatal("a missing id was found")
	}
	if st := got["orders/1"]; !st.Conflicted {
		t.Fatalf("orders/1: %+v, want conflicted", st)
	}
	if none, err := db.ExistingIDs(ctx, nil); err != nil || len(none) != 0 {
		t.Fatalf("no ids: %v %v", none, err)
	}

	b, ok, err := db.ConflictOf(ctx, "ORDERS/1")
	if err != nil || !ok || b.Versions != 2 || b.Tombstones != 0 || b.Collection != "Orders" || b.Latest.IsZero() {
		t.Fatalf("ConflictOf: %+v %v %v", b, ok, err)
	}
	if _, ok, err := db.ConflictOf(ctx, "users/1"); ok || err != nil {
		t.Fatalf("users/1 is not in conflict: %v %v", ok, err)
	}
}
