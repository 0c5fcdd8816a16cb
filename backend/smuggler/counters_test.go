package smuggler_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/internal/testserver"
)

// TestCountersExportImport: counters are written to the dump's
// CounterGroups section with their per-copy parts and come back with the
// same totals in a fresh database; a RavenDB-style group (parts keyed by
// node) and a legacy Counters item are read too.
func TestCountersExportImport(t *testing.T) {
	n := testserver.Start(t)
	createDB(t, n.URL, "csrc")
	mustCall(t, 201, "POST", n.URL+"/databases/csrc/bulk_docs", "application/json", []byte(`{"Commands":[
		{"Type":"PUT","Id":"users/1","Document":{"@metadata":{"@collection":"Users"}}},
		{"Type":"PUT","Id":"users/2","Document":{"@metadata":{"@collection":"Users"}}},
		{"Type":"Counters","Id":"users/1","Counters":{"DocumentId":"users/1","Operations":[
			{"Type":"Increment","CounterName":"Likes","Delta":5},{"Type":"Increment","CounterName":"views","Delta":-3}]}},
		{"Type":"Counters","Id":"users/2","Counters":{"DocumentId":"users/2","Operations":[
			{"Type":"Increment","CounterName":"Likes","Delta":42},{"Type":"Increment","CounterName":"gone","Delta":1},
			{"Type":"Delete","CounterName":"gone"}]}}]}`))
	dump := mustCall(t, 200, "POST", n.URL+"/databases/csrc/smuggler/export", "application/json", []byte(`{}`))
	createDB(t, n.URL, "cdst")
	if st, b := importDump(t, n.URL, "cdst", dump, "{}"); st != http.StatusOK {
		t.Fatalf("import: %d %s", st, b)
	}
	get := func(db, doc string) map[string]int64 {
		b := mustCall(t, 200, "GET", n.URL+"/databases/"+db+"/counters?docId="+doc, "", nil)
		var res struct {
			Counters []struct {
				CounterName string
				TotalValue  int64
			}
		}
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, c := range res.Counters {
			out[c.CounterName] = c.TotalValue
		}
		return out
	}
	for _, doc := range []string{"users/1", "users/2"} {
		src, dst := get("csrc", doc), get("cdst", doc)
		if len(src) == 0 || len(src) != len(dst) {
			t.Fatalf("%s: exported %v, imported %v", doc, src, dst)
		}
		for k, v := range src {
			if dst[k] != v {
				t.Fatalf("%s: exported %v, imported %v", doc, src, dst)
			}
		}
	}
	if _, ok := get("cdst", "users/2")["gone"]; ok {
		t.Fatal("a deleted counter was exported")
	}
	// The imported document lists its counters in its metadata.
	b := mustCall(t, 200, "GET", n.URL+"/databases/cdst/docs?id=users/1", "", nil)
	if !strings.Contains(string(b), `"@counters":["Likes","views"]`) {
		t.Fatalf("imported document: %s", b)
	}
}
