package client

import (
	"context"
	"testing"

	"github.com/rookerydb/rookery/internal/testserver"
)

// The Go client's compare-exchange calls against a real node: create with
// index 0, a stale create fails with the current index, update, list by
// prefix, delete by index.
func TestIntegrationCompareExchange(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()
	r, err := store.PutCompareExchangeValue(ctx, "emails/a", map[string]string{"User": "users/1"}, 0)
	if err != nil || !r.Successful || r.Index == 0 || string(r.Value) != `{"User":"users/1"}` {
		t.Fatalf("create: %+v %v", r, err)
	}
	again, err := store.PutCompareExchangeValue(ctx, "emails/a", "x", 0)
	if err != nil || again.Successful || again.Index != r.Index {
		t.Fatalf("second create: %+v %v", again, err)
	}
	upd, err := store.PutCompareExchangeValue(ctx, "emails/a", "users/2", r.Index)
	if err != nil || !upd.Successful || upd.Index <= r.Index {
		t.Fatalf("update: %+v %v", upd, err)
	}
	if _, err := store.PutCompareExchangeValue(ctx, "emails/b", 2, 0); err != nil {
		t.Fatal(err)
	}
	v, err := store.GetCompareExchangeValue(ctx, "EMAILS/A")
	if err != nil || v == nil || v.Key != "emails/a" || v.Index != upd.Index || string(v.Value) != `"users/2"` {
		t.Fatalf("get: %+v %v", v, err)
	}
	if v, err := store.GetCompareExchangeValue(ctx, "nope"); err != nil || v != nil {
		t.Fatalf("missing: %+v %v", v, err)
	}
	list, err := store.GetCompareExchangeValues(ctx, "emails/", 1, 10)
	if err != nil || len(list) != 1 || list[0].Key != "emails/b" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if d, err := store.DeleteCompareExchangeValue(ctx, "emails/a", r.Index); err != nil || d.Successful {
		t.Fatalf("stale delete: %+v %v", d, err)
	}
	if d, err := store.DeleteCompareExchangeValue(ctx, "emails/a", upd.Index); err != nil || !d.Successful {
		t.Fatalf("delete: %+v %v", d, err)
	}
	if _, err := store.PutCompareExchangeValue(ctx, "", 1, 0); err == nil {
		t.Fatal("an empty key must fail")
	}
}
