package storage_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
)

func tsWrite(t *testing.T, db *storage.DB, id string, op storage.TSOp) error {
	t.Helper()
	return db.Write(context.Background(), func(tx *storage.Tx) error { return tx.TimeSeries(id, op) })
}

type tsRow struct {
	TS     int64
	Tag    string
	Values string
}

func tsRead(t *testing.T, db *storage.DB, id, name string, from, to int64, start, page int) []tsRow {
	t.Helper()
	r, err := db.ReadTimeSeries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []tsRow
	err = r.Range(id, name, from, to, start, page, func(e *storage.TSEntry) error {
		row := tsRow{TS: e.Timestamp, Values: fmt.Sprint(e.Values)}
		if e.Tag != nil {
			row.Tag = *e.Tag
		}
		out = append(out, row)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func appends(tag string, from, n int64, v float64) []storage.TSAppend {
	var out []storage.TSAppend
	for i := int64(0); i < n; i++ {
		a := storage.TSAppend{Timestamp: from + i*1000, Values: []float64{v + float64(i), -1}}
		if tag != "" {
			s := tag
			a.Tag = &s
		}
		out = append(out, a)
	}
	return out
}

func TestTimeSeriesAppendRangeDeleteReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	db := open(t, path)
	if _, err := put(t, db, "Users/1", `{"name":"a","@metadata":{"@collection":"Users"}}`, nil); err != nil {
		t.Fatal(err)
	}
	// A missing document is a 404, an incremental series a 400.
	if err := tsWrite(t, db, "users/2", storage.TSOp{Name: "HR", Appends: appends("", 0, 1, 1)}); !dberr.Is(err, dberr.InvalidOperation) {
		t.Fatalf("missing document: %v", err)
	}
	if err := tsWrite(t, db, "users/1", storage.TSOp{Name: "INC:x", Appends: appends("", 0, 1, 1)}); !dberr.Is(err, dberr.BadRequest) {
		t.Fatalf("incremental: %v", err)
	}
	if err := tsWrite(t, db, "users/1", storage.TSOp{Name: "HeartRate", Appends: appends("watch", 1000, 10, 60)}); err != nil {
		t.Fatal(err)
	}
	// The document carries the name and the flag.
	d, err := db.Get(context.Background(), "users/1")
	if err != nil {
		t.Fatal(err)
	}
	if js := string(d.AppendJSON(nil)); !strings.Contains(js, `"@timeseries":["HeartRate"]`) || !strings.Contains(js, `"@flags":"HasTimeSeries"`) {
		t.Fatalf("metadata: %s", js)
	}
	// A client's put keeps them.
	if _, err := put(t, db, "users/1", `{"name":"b","@metadata":{"@collection":"Users"}}`, nil); err != nil {
		t.Fatal(err)
	}
	d, _ = db.Get(context.Background(), "users/1")
	if js := string(d.AppendJSON(nil)); !strings.Contains(js, `"@timeseries":["HeartRate"]`) || !strings.Contains(js, `"name":"b"`) {
		t.Fatalf("after put: %s", js)
	}
	got := tsRead(t, db, "USERS/1", "heartrate", 3000, 6000, 0, -1)
	if len(got) != 4 || got[0].TS != 3000 || got[3].TS != 6000 || got[0].Tag != "watch" || got[0].Values != "[62 -1]" {
		t.Fatalf("range: %+v", got)
	}
	if got := tsRead(t, db, "users/1", "HeartRate", storage.TSMin, storage.TSMax, 8, 5); len(got) != 2 || got[0].TS != 9000 {
		t.Fatalf("page: %+v", got)
	}
	// Overwrite one timestamp, delete a range.
	if err := tsWrite(t, db, "users/1", storage.TSOp{Name: "HeartRate",
		Appends: []storage.TSAppend{{Timestamp: 2000, Values: []float64{99}}},
		Deletes: []storage.TSDelete{{From: 4000, To: 7000}}}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = open(t, path)
	got = tsRead(t, db, "users/1", "HeartRate", storage.TSMin, storage.TSMax, 0, -1)
	var ts []int64
	for _, g := range got {
		ts = append(ts, g.TS)
	}
	if !reflect.DeepEqual(ts, []int64{1000, 2000, 3000, 8000, 9000, 10000}) || got[1].Values != "[99]" || got[1].Tag != "" {
		t.Fatalf("after reopen: %+v", got)
	}
	// The clock survived the reopen: a new append still wins.
	if err := tsWrite(t, db, "users/1", storage.TSOp{Name: "HeartRate", Appends: []storage.TSAppend{{Timestamp: 2000, Values: []float64{7}}}}); err != nil {
		t.Fatal(err)
	}
	if got := tsRead(t, db, "users/1", "HeartRate", 2000, 2000, 0, -1); len(got) != 1 || got[0].Values != "[7]" {
		t.Fatalf("overwrite after reopen: %+v", got)
	}
	// Deleting everything removes the name; deleting the document the series.
	if err := tsWrite(t, db, "users/1", storage.TSOp{Name: "HeartRate", Deletes: []storage.TSDelete{{From: storage.TSMin, To: storage.TSMax}}}); err != nil {
		t.Fatal(err)
	}
	d, _ = db.Get(context.Background(), "users/1")
	if js := string(d.AppendJSON(nil)); strings.Contains(js, "@timeseries") || strings.Contains(js, "HasTimeSeries") {
		t.Fatalf("after delete all: %s", js)
	}
	if err := tsWrite(t, db, "users/1", storage.TSOp{Name: "Temp", Appends: appends("", 0, 3, 1)}); err != nil {
		t.Fatal(err)
	}
	del(t, db, "users/1")
	if got := tsRead(t, db, "users/1", "Temp", storage.TSMin, storage.TSMax, 0, -1); len(got) != 0 {
		t.Fatalf("series outlived its document: %+v", got)
	}
}

func TestTimeSeriesMergeRule(t *testing.T) {
	a, b, c := openTag(t, "A"), openTag(t, "B"), openTag(t, "C")
	for _, db := range []*storage.DB{a, b, c} {
		if _, err := put(t, db, "d/1", `{"@metadata":{"@collection":"D"}}`, strp("")); err != nil {
			t.Fatal(err)
		}
	}
	// Concurrent appends to one series, sharing timestamps 5000-9000.
	if err := tsWrite(t, a, "d/1", storage.TSOp{Name: "S", Appends: appends("a", 0, 10, 100)}); err != nil {
		t.Fatal(err)
	}
	if err := tsWrite(t, b, "d/1", storage.TSOp{Name: "s", Appends: appends("b", 5000, 10, 200)}); err != nil {
		t.Fatal(err)
	}
	if err := tsWrite(t, c, "d/1", storage.TSOp{Name: "S", Appends: appends("", 8000, 3, 300), Deletes: []storage.TSDelete{{From: 0, To: 1000}}}); err != nil {
		t.Fatal(err)
	}
	dbs := []*storage.DB{a, b, c}
	for round := 0; round < 3; round++ {
		for i, from := range dbs {
			for j, to := range dbs {
				if i != j {
					replicate(t, from, to)
				}
			}
		}
	}
	want := tsRead(t, a, "d/1", "S", storage.TSMin, storage.TSMax, 0, -1)
	for _, db := range dbs[1:] {
		if got := tsRead(t, db, "d/1", "S", storage.TSMin, storage.TSMax, 0, -1); !reflect.DeepEqual(got, want) {
			t.Fatalf("copies differ:\n%+v\n%+v", want, got)
		}
	}
	seen := map[int64]bool{}
	for _, w := range want {
		seen[w.TS] = true
	}
	for ts := int64(0); ts <= 14000; ts += 1000 {
		if !seen[ts] {
			t.Errorf("timestamp %d missing", ts)
		}
	}
	// The documents merged (same names) rather than conflicted.
	for _, db := range dbs {
		d, err := db.Get(context.Background(), "d/1")
		if err != nil || d == nil {
			t.Fatalf("document: %v %v", d, err)
		}
		if js := string(d.AppendJSON(nil)); !strings.Contains(js, `"@timeseries":[`) {
			t.Fatalf("document lost its names: %s", js)
		}
	}
	// A delete on one copy reaches the others, and stays applied.
	if err := tsWrite(t, b, "d/1", storage.TSOp{Name: "S", Deletes: []storage.TSDelete{{From: 2000, To: 6000}}}); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		for i, from := range dbs {
			for j, to := range dbs {
				if i != j {
					replicate(t, from, to)
				}
			}
		}
	}
	want = tsRead(t, a, "d/1", "S", storage.TSMin, storage.TSMax, 0, -1)
	for _, w := range want {
		if w.TS >= 2000 && w.TS <= 6000 {
			t.Fatalf("deleted entry %d came back", w.TS)
		}
	}
	for _, db := range dbs[1:] {
		if got := tsRead(t, db, "d/1", "S", storage.TSMin, storage.TSMax, 0, -1); !reflect.DeepEqual(got, want) {
			t.Fatalf("copies differ after delete:\n%+v\n%+v", want, got)
		}
	}
}
