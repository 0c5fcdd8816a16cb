package smuggler_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/internal/testserver"
)

// Time series leave in the dump's TimeSeries section (Rookery's own items)
// and come back on import: the same entries, tags and values, and the
// document lists the series again.
func TestTimeSeriesExportImport(t *testing.T) {
	n := testserver.Start(t)
	createDB(t, n.URL, "tssrc")
	mustCall(t, 201, "PUT", n.URL+"/databases/tssrc/docs?id=meters/1", "application/json", []byte(`{"@metadata":{"@collection":"Meters"}}`))
	var appends []string
	for i := 0; i < 2500; i++ { // three items of at most 1000 entries
		tag := ""
		if i%7 == 0 {
			tag = `,"Tag":"seventh"`
		}
		appends = append(appends, fmt.Sprintf(`{"Timestamp":"2026-12-07T00:%02d:%02d.%03d0000Z","Values":[%d,%g]%s}`, i/600, (i/10)%60, (i%10)*100, i, float64(i)/3, tag))
	}
	for _, name := range []string{"Power", "Voltage"} {
		body := fmt.Sprintf(`{"Commands":[{"Id":"meters/1","Type":"TimeSeries","TimeSeries":{"Name":%q,"Appends":[%s]}}]}`, name, strings.Join(appends, ","))
		mustCall(t, 201, "POST", n.URL+"/databases/tssrc/bulk_docs", "application/json", []byte(body))
	}
	dump := mustCall(t, 200, "POST", n.URL+"/databases/tssrc/smuggler/export", "application/json", []byte(`{}`))
	createDB(t, n.URL, "tsdst")
	if st, b := importDump(t, n.URL, "tsdst", dump, "{}"); st != 200 {
		t.Fatalf("import: %d %s", st, b)
	}
	for _, name := range []string{"Power", "Voltage"} {
		want := mustCall(t, http.StatusOK, "GET", n.URL+"/databases/tssrc/timeseries?docId=meters/1&name="+name, "", nil)
		got := mustCall(t, http.StatusOK, "GET", n.URL+"/databases/tsdst/timeseries?docId=meters/1&name="+name, "", nil)
		var w, g struct {
			TotalResults int
			Entries      []json.RawMessage
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatal(err)
		}
		if w.TotalResults != 2500 || len(g.Entries) != len(w.Entries) {
			t.Fatalf("%s: %d entries exported, %d imported", name, w.TotalResults, len(g.Entries))
		}
		for i := range w.Entries {
			if string(w.Entries[i]) != string(g.Entries[i]) {
				t.Fatalf("%s entry %d: %s, imported %s", name, i, w.Entries[i], g.Entries[i])
			}
		}
	}
	doc := mustCall(t, 200, "GET", n.URL+"/databases/tsdst/docs?id=meters/1", "", nil)
	if !strings.Contains(string(doc), `"@timeseries":["Power","Voltage"]`) {
		t.Fatalf("imported document: %s", doc)
	}
}
