package storage

import (
	"path/filepath"
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
