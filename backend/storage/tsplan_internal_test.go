package storage

import (
	"path/filepath"
	"strings"
	"testing"
)

// The replication read walks every branch in etag order: no sort of the
// time-series rows (a catch-up over a million entries must not sort them).
func TestTimeSeriesReplicationReadNeedsNoSort(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "db.sqlite"), Options{Name: "p", NodeTag: "A"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.reader.Query(`EXPLAIN QUERY PLAN `+sqlReplicationAfter, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	plan := ""
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan += detail + "\n"
	}
	t.Log(plan)
	for _, bad := range []string{"TEMP B-TREE", "SCAN e\n", "SCAN d\n"} {
		if contains(plan, bad) {
			t.Fatalf("plan has %q:\n%s", bad, plan)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// Two concurrent versions that differ only in their time-series names
// merge to the union of the names, and the attachment list they share
// (server-owned, so not in document.Parse's output) stays in the result;
// versions whose attachment lists differ are not this case.
func TestMergeSeriesNamesKeepsAttachments(t *testing.T) {
	const att = `[{"Name":"a.txt","Hash":"h","ContentType":"text/plain","Size":1}]`
	a := []byte(`{"v":1,"@metadata":{"@collection":"Xs","@attachments":` + att + `,"@flags":"HasAttachments, HasTimeSeries","@timeseries":["hr"]}}`)
	b := []byte(`{"v":1,"@metadata":{"@collection":"Xs","@attachments":` + att + `,"@flags":"HasAttachments, HasTimeSeries","@timeseries":["temp"]}}`)
	it := Item{Body: a}
	if !mergeSeriesNames(&it, b) {
		t.Fatal("versions differing only in series names did not merge")
	}
	for _, want := range []string{`"@attachments":` + att, `"hr"`, `"temp"`, `HasAttachments`, `HasTimeSeries`} {
		if !strings.Contains(string(it.Body), want) {
			t.Fatalf("merged body %s lacks %s", it.Body, want)
		}
	}
	c := []byte(`{"v":1,"@metadata":{"@collection":"Xs","@flags":"HasTimeSeries","@timeseries":["temp"]}}`)
	it = Item{Body: a}
	if mergeSeriesNames(&it, c) {
		t.Fatalf("versions with different attachment lists merged as names only: %s", it.Body)
	}
}
