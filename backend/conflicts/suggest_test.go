package conflicts_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/conflicts"
	"github.com/rookerydb/rookery/backend/storage"
)

// The merge suggestion keeps the versions' field order (the latest
// version's, then fields only older versions have); it used to come out of
// a Go map, sorted by name.
func TestSuggestKeepsFieldOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	older := storage.Version{ID: "carts/1", Collection: "Carts", ChangeVector: "A:1-x", LastModified: t0,
		Body: []byte(`{"zeta":1,"total":5,"onlyOld":"o","alpha":{"y":1,"b":2},"@metadata":{"@collection":"Carts"}}`)}
	newer := storage.Version{ID: "carts/1", Collection: "Carts", ChangeVector: "B:1-y", LastModified: t0.Add(time.Second),
		Body: []byte(`{"zeta":1,"total":7,"alpha":{"y":1,"b":2},"mid":true,"@metadata":{"@collection":"Carts"}}`)}
	body, conflicting := conflicts.Suggest([]storage.Version{older, newer})
	want := `{
  "zeta": 1,
  "total": 7,
  "alpha": {
    "y": 1,
    "b": 2
  },
  "mid": true,
  "@metadata": {
    "@collection": "Carts"
  }
}`
	if string(body) != want {
		t.Fatalf("merged body:\n%s\nwant:\n%s", body, want)
	}
	if strings.Join(conflicting, ",") != "mid,onlyOld,total" {
		t.Fatalf("conflicting fields %v, want mid, onlyOld, total", conflicting)
	}

	// A field only the older version has, and agreed on by all: kept, after
	// the latest version's fields, in the older version's place order.
	a := storage.Version{Collection: "Carts", ChangeVector: "A:2-x", LastModified: t0, Body: []byte(`{"b":1,"c":2,"a":3}`)}
	b := storage.Version{Collection: "Carts", ChangeVector: "B:2-y", LastModified: t0.Add(time.Second), Body: []byte(`{"c":2,"b":1,"a":3}`)}
	body, conflicting = conflicts.Suggest([]storage.Version{a, b})
	if got := strings.Join(strings.Fields(string(body)), " "); got != `{ "c": 2, "b": 1, "a": 3, "@metadata": { "@collection": "Carts" } }` {
		t.Fatalf("merged body %s: want the latest version's order c, b, a", got)
	}
	if len(conflicting) != 0 {
		t.Fatalf("conflicting %v, want none", conflicting)
	}
}
