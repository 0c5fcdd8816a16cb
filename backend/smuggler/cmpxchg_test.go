package smuggler_test

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"compress/gzip"

	"github.com/rookerydb/rookery/internal/testserver"
)

// Compare-exchange values go out in the CompareExchange section (the value
// a JSON-encoded string, as RavenDB writes it) and come back on import,
// with their metadata; atomic guards stay behind; a RavenDB-style dump's
// CompareExchangeTombstones remove keys.
func TestCompareExchangeExportImport(t *testing.T) {
	n := testserver.Start(t)
	createDB(t, n.URL, "cxsrc")
	mustCall(t, 200, "PUT", n.URL+"/databases/cxsrc/cmpxchg?key=emails/a&index=0", "application/json", []byte(`{"Object":{"User":"users/1"},"@metadata":{"@expires":"2100-01-01T00:00:00.0000000Z"}}`))
	mustCall(t, 200, "PUT", n.URL+"/databases/cxsrc/cmpxchg?key=counter&index=0", "application/json", []byte(`{"Object":7}`))
	mustCall(t, 201, "POST", n.URL+"/databases/cxsrc/bulk_docs", "application/json",
		[]byte(`{"Commands":[{"Type":"PUT","Id":"users/1","Document":{"@metadata":{"@collection":"Users"}}}],"TransactionMode":"ClusterWide"}`))
	dump := mustCall(t, 200, "POST", n.URL+"/databases/cxsrc/smuggler/export", "application/json", []byte(`{}`))
	text := string(dump)
	if zr, err := gzip.NewReader(bytes.NewReader(dump)); err == nil {
		if b, err := io.ReadAll(zr); err == nil {
			text = string(b)
		}
	}
	if !strings.Contains(text, `"CompareExchange":[`) || !strings.Contains(text, `{"Key":"counter","Value":"{\"Object\":7}"}`) {
		t.Fatalf("no CompareExchange section as RavenDB writes it:\n%s", text)
	}
	if strings.Contains(text, "rvn-atomic/") {
		t.Fatalf("atomic guards exported:\n%s", text)
	}

	createDB(t, n.URL, "cxdst")
	mustCall(t, 200, "PUT", n.URL+"/databases/cxdst/cmpxchg?key=gone&index=0", "application/json", []byte(`{"Object":1}`))
	if st, b := importDump(t, n.URL, "cxdst", dump, "{}"); st != 200 {
		t.Fatalf("import: %d %s", st, b)
	}
	var got struct {
		Results []struct {
			Key   string
			Index int64
			Value json.RawMessage
		}
	}
	b := mustCall(t, 200, "GET", n.URL+"/databases/cxdst/cmpxchg?startsWith=", "", nil)
	if err := json.Unmarshal(b, &got); err != nil || len(got.Results) != 3 {
		t.Fatalf("after import: %s", b)
	}
	if got.Results[1].Key != "emails/a" || !strings.Contains(string(got.Results[1].Value), `"@expires":"2100-01-01T00:00:00.0000000Z"`) {
		t.Fatalf("imported value: %s", b)
	}
	// A RavenDB dump: the value as a string, and a tombstone.
	raven := `{"BuildVersion":60000,"CompareExchange":[{"Key":"from/raven","Value":"{\"Object\":{\"A\":1}}"}],"CompareExchangeTombstones":[{"Key":"gone"}]}`
	if st, b := importDump(t, n.URL, "cxdst", []byte(raven), "{}"); st != 200 {
		t.Fatalf("import of a RavenDB dump: %d %s", st, b)
	}
	b = mustCall(t, 200, "GET", n.URL+"/databases/cxdst/cmpxchg?key=from/raven&key=gone", "", nil)
	if err := json.Unmarshal(b, &got); err != nil || len(got.Results) != 1 || string(got.Results[0].Value) != `{"Object":{"A":1}}` {
		t.Fatalf("after the RavenDB dump: %s", b)
	}
}
