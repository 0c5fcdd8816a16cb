package storage_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
)

// itemHook records a database's item changes while want is set.
func itemHook(db *storage.DB) (*atomic.Bool, chan storage.ItemChange) {
	want := &atomic.Bool{}
	ch := make(chan storage.ItemChange, 1000)
	db.OnItemCommit(want.Load, func(items []storage.ItemChange) {
		for _, it := range items {
			ch <- it
		}
	})
	return want, ch
}

func nextItem(t *testing.T, ch chan storage.ItemChange) storage.ItemChange {
	t.Helper()
	select {
	case it := <-ch:
		return it
	case <-time.After(5 * time.Second):
		t.Fatal("no item change within 5 s")
	}
	return storage.ItemChange{}
}

func itemString(it storage.ItemChange) string {
	if it.Kind == storage.KindCounters {
		return fmt.Sprintf("counter %s %s/%s (%s) = %d @ %s", it.Type, it.DocID, it.Name, it.Collection, it.Value, it.ChangeVector)
	}
	return fmt.Sprintf("series %s %s/%s (%s) [%d,%d] @ %s", it.Type, it.DocID, it.Name, it.Collection, it.From, it.To, it.ChangeVector)
}

func expectItem(t *testing.T, ch chan storage.ItemChange, want string) {
	t.Helper()
	if got := itemString(nextItem(t, ch)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func tsOp(t *testing.T, db *storage.DB, id string, op storage.TSOp) {
	t.Helper()
	if err := db.Write(context.Background(), func(tx *storage.Tx) error { return tx.TimeSeries(id, op) }); err != nil {
		t.Fatal(err)
	}
}

// Counter and time-series writes are handed to OnItemCommit hooks after
// their commit, in RavenDB's terms: Put for a counter that was not live,
// Increment, Delete; a series' appends as one Put over their range, each
// deleted range as a Delete. Nothing is recorded while no hook wants it,
// and a request that failed leaves nothing.
func TestItemChangesOnCommit(t *testing.T) {
	a := open(t, "")
	want, ch := itemHook(a)
	if _, err := put(t, a, "Users/1", `{"@metadata":{"@collection":"Users"}}`, nil); err != nil {
		t.Fatal(err)
	}
	cv := func(etag int64) string { return fmt.Sprintf("A:%d-%s", etag, a.DatabaseID()) }

	if _, err := incr(t, a, "users/1", "Unwatched", 1); err != nil {
		t.Fatal(err)
	}
	want.Store(true)
	c, err := incr(t, a, "USERS/1", "Likes", 5)
	if err != nil {
		t.Fatal(err)
	}
	// The first change heard is the watched one.
	expectItem(t, ch, "counter Put Users/1/Likes (Users) = 5 @ "+cv(c.Etag))
	c, _ = incr(t, a, "users/1", "likes", 2)
	expectItem(t, ch, "counter Increment Users/1/Likes (Users) = 7 @ "+cv(c.Etag))
	if err := a.Write(context.Background(), func(tx *storage.Tx) error { _, err := tx.DeleteCounter("users/1", "LIKES"); return err }); err != nil {
		t.Fatal(err)
	}
	// A deletion marks the parts deleted and keeps their etags: the
	// counter's change vector is the one it had.
	expectItem(t, ch, "counter Delete Users/1/Likes (Users) = 0 @ "+cv(c.Etag))
	c, _ = incr(t, a, "users/1", "Likes", 1)
	expectItem(t, ch, "counter Put Users/1/Likes (Users) = 1 @ "+cv(c.Etag))

	// A failed request in a merged transaction leaves no change behind.
	failed := a.Submit(context.Background(), func(tx *storage.Tx) error {
		if _, err := tx.IncrementCounter("users/1", "Rolledback", 1); err != nil {
			return err
		}
		return errors.New("no")
	})
	c, _ = incr(t, a, "users/1", "Kept", 3)
	if err := <-failed; err == nil {
		t.Fatal("the failing request succeeded")
	}
	expectItem(t, ch, "counter Put Users/1/Kept (Users) = 3 @ "+cv(c.Etag))

	tsOp(t, a, "users/1", storage.TSOp{Name: "HeartRate", Appends: []storage.TSAppend{
		{Timestamp: 3000, Values: []float64{1}}, {Timestamp: 1000, Values: []float64{2}}, {Timestamp: 2000, Values: []float64{3}}}})
	// The series appeared, so the document was put after the entries.
	expectItem(t, ch, "series Put Users/1/HeartRate (Users) [1000,3000] @ "+cv(a.LastEtag()-1))
	tsOp(t, a, "USERS/1", storage.TSOp{Name: "heartrate", Deletes: []storage.TSDelete{{From: 1500, To: 2500}, {From: storage.TSMin, To: 1000}},
		Appends: []storage.TSAppend{{Timestamp: 5000, Values: []float64{4}}}})
	last := a.LastEtag()
	expectItem(t, ch, "series Delete Users/1/heartrate (Users) [1500,2500] @ "+cv(last-2))
	expectItem(t, ch, fmt.Sprintf("series Delete Users/1/heartrate (Users) [%d,1000] @ %s", int64(storage.TSMin), cv(last-1)))
	expectItem(t, ch, "series Put Users/1/heartrate (Users) [5000,5000] @ "+cv(last))

	want.Store(false)
	if _, err := incr(t, a, "users/1", "Likes", 1); err != nil {
		t.Fatal(err)
	}
	tsOp(t, a, "users/1", storage.TSOp{Name: "HeartRate", Appends: []storage.TSAppend{{Timestamp: 9000, Values: []float64{1}}}})
	want.Store(true)
	c, _ = incr(t, a, "users/1", "Last", 1)
	expectItem(t, ch, "counter Put Users/1/Last (Users) = 1 @ "+cv(c.Etag))
}

// What replication changes on the receiving copy is heard there: a merged
// counter as a Put of its new total (a Delete once it is deleted), a
// series' replicated entries as one Put over their range.
func TestItemChangesReplicated(t *testing.T) {
	a, b := open(t, ""), open(t, "")
	want, ch := itemHook(b)
	want.Store(true)
	if _, err := put(t, a, "users/1", `{"@metadata":{"@collection":"Users"}}`, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Exchange(context.Background(), a, b, 100); err != nil {
		t.Fatal(err)
	}
	ca, _ := incr(t, a, "users/1", "Likes", 5)
	tsOp(t, a, "users/1", storage.TSOp{Name: "HeartRate", Appends: []storage.TSAppend{
		{Timestamp: 1000, Values: []float64{1}}, {Timestamp: 2000, Values: []float64{2}}}})
	if _, err := storage.Exchange(context.Background(), a, b, 100); err != nil {
		t.Fatal(err)
	}
	it := nextItem(t, ch)
	if got := itemString(it); got != fmt.Sprintf("counter Put users/1/Likes (Users) = 5 @ A:%d-%s", ca.Etag, a.DatabaseID()) {
		t.Fatalf("replicated counter: %s", got)
	}
	it = nextItem(t, ch)
	if it.Kind != storage.KindTimeSeries || it.Type != "Put" || it.DocID != "users/1" || it.Collection != "Users" ||
		it.Name != "HeartRate" || it.From != 1000 || it.To != 2000 || !strings.HasSuffix(it.ChangeVector, "-"+b.DatabaseID()) {
		t.Fatalf("replicated series: %s", itemString(it))
	}
	// b's own increment, then a's deletion arriving.
	cb, _ := incr(t, b, "users/1", "likes", 2)
	expectItem(t, ch, fmt.Sprintf("counter Increment users/1/Likes (Users) = 7 @ %s", strings.Join(sortedCV(ca.Etag, a.DatabaseID(), cb.Etag, b.DatabaseID()), ", ")))
	if err := a.Write(context.Background(), func(tx *storage.Tx) error { _, err := tx.DeleteCounter("users/1", "likes"); return err }); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Exchange(context.Background(), a, b, 100); err != nil {
		t.Fatal(err)
	}
	// a's deletion covers only a's part (b's increment is not known to a):
	// the counter stays live with b's 2.
	it = nextItem(t, ch)
	if it.Kind != storage.KindCounters || it.Type != "Put" || it.Value != 2 {
		t.Fatalf("after a's deletion: %s", itemString(it))
	}
	// Re-applying what b has already changes nothing, and says nothing.
	if _, err := storage.Exchange(context.Background(), a, b, 100); err != nil {
		t.Fatal(err)
	}
	select {
	case it := <-ch:
		t.Fatalf("unexpected %s", itemString(it))
	case <-time.After(100 * time.Millisecond):
	}
}

// sortedCV is a counter's change vector for two parts, ordered by
// database id as the row keeps them.
func sortedCV(e1 int64, db1 string, e2 int64, db2 string) []string {
	p1, p2 := fmt.Sprintf("A:%d-%s", e1, db1), fmt.Sprintf("A:%d-%s", e2, db2)
	if db2 < db1 {
		return []string{p2, p1}
	}
	return []string{p1, p2}
}
