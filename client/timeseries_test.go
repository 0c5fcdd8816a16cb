package client

import (
	"context"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/testserver"
)

func TestIntegrationTimeSeries(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()
	s := store.OpenSession()
	if err := s.StoreWithID(&User{Name: "Meter"}, "users/1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	var entries []TimeSeriesEntry
	for i := 0; i < 100; i++ {
		e := TimeSeriesEntry{Timestamp: base.Add(time.Duration(i) * time.Second), Values: []float64{float64(i), -float64(i)}}
		if i%10 == 0 {
			e.Tag = "tenth"
		}
		entries = append(entries, e)
	}
	if err := store.TimeSeriesAppend(ctx, "users/1", "HeartRate", entries...); err != nil {
		t.Fatal(err)
	}
	got, err := store.TimeSeriesGet(ctx, "users/1", "heartrate", base.Add(10*time.Second), base.Add(29*time.Second), 5, 3)
	if err != nil || got == nil {
		t.Fatalf("get: %v %v", got, err)
	}
	if got.TotalResults != 20 || len(got.Entries) != 3 || got.Name != "HeartRate" {
		t.Fatalf("range: %+v", got)
	}
	if e := got.Entries[0]; !e.Timestamp.Equal(base.Add(15*time.Second)) || e.Values[1] != -15 || e.Tag != "" {
		t.Fatalf("first entry: %+v", e)
	}
	if err := store.TimeSeriesDelete(ctx, "users/1", "HeartRate", base.Add(50*time.Second), time.Time{}); err != nil {
		t.Fatal(err)
	}
	all, err := store.TimeSeriesGet(ctx, "users/1", "HeartRate", time.Time{}, time.Time{}, 0, 0)
	if err != nil || all == nil || len(all.Entries) != 50 || all.Entries[10].Tag != "tenth" {
		t.Fatalf("after delete: %+v %v", all, err)
	}
	if none, err := store.TimeSeriesGet(ctx, "users/1", "Nope", time.Time{}, time.Time{}, 0, 0); none != nil || err != nil {
		t.Fatalf("missing series: %+v %v", none, err)
	}
	if err := store.TimeSeriesAppend(ctx, "users/404", "HeartRate", entries[0]); err == nil {
		t.Fatal("appending to a missing document worked")
	}
}
