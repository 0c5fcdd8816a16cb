package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/internal/testserver"
)

func TestBulkInsert(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()

	for _, compress := range []bool{false, true} {
		bi, err := store.BulkInsert(ctx, BulkInsertOptions{Compress: compress})
		if err != nil {
			t.Fatal(err)
		}
		var first *User
		for i := 0; i < 5000; i++ {
			u := &User{Name: fmt.Sprintf("u%d", i), Age: i % 90}
			if err := bi.Store(u); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = u
			}
		}
		if !strings.HasPrefix(first.ID, "users/") {
			t.Fatalf("HiLo id not set: %q", first.ID)
		}
		if err := bi.StoreWithID(&Order{Company: "c", Total: 3}, fmt.Sprintf("orders/given-%v", compress)); err != nil {
			t.Fatal(err)
		}
		if err := bi.Finish(); err != nil {
			t.Fatalf("compress=%v: %v", compress, err)
		}
		if bi.OperationID() <= 0 {
			t.Fatalf("operation id %d", bi.OperationID())
		}
		s := store.OpenSession()
		var got *User
		if ok, err := s.Load(first.ID, &got); err != nil || !ok || got.Name != "u0" {
			t.Fatalf("load %s: %v %v %+v", first.ID, ok, err, got)
		}
		var o *Order
		if ok, err := s.Load(fmt.Sprintf("orders/given-%v", compress), &o); err != nil || !ok || o.Total != 3 {
			t.Fatalf("load order: %v %v %+v", ok, err, o)
		}
	}
	var stats struct{ CountOfDocuments int64 }
	if err := store.dbCallBody(ctx, "GET", "/stats", nil, &stats); err != nil {
		t.Fatal(err)
	}
	if stats.CountOfDocuments != 10003 { // and the HiLo document
		t.Fatalf("%d documents, want 10003", stats.CountOfDocuments)
	}

	// A refused document: Finish reports the server's error, the documents
	// before it are stored.
	bi, err := store.BulkInsert(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	for i := 0; i < 3000 && serr == nil; i++ {
		id := fmt.Sprintf("bad/%d", i)
		if i == 2000 {
			id = strings.Repeat("y", 700)
		}
		serr = bi.StoreWithID(&User{Name: "x"}, id)
	}
	if serr == nil {
		serr = bi.Finish()
	}
	var se *ServerError
	if !errors.As(serr, &se) || !strings.Contains(se.Message, "the limit is 512") {
		t.Fatalf("error = %v, want the server's id-length error", serr)
	}
	if err := store.dbCallBody(ctx, "GET", "/stats", nil, &stats); err != nil {
		t.Fatal(err)
	}
	if stats.CountOfDocuments != 12003 {
		t.Fatalf("%d documents after the refused bulk insert, want 12003", stats.CountOfDocuments)
	}
}
