package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/testserver"
)

func recv[T any](t *testing.T, s *ChangesSubscription[T], what string) T {
	t.Helper()
	select {
	case v, ok := <-s.C:
		if !ok {
			t.Fatalf("%s: the subscription ended: %v", what, s.Err())
		}
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing within 10 s", what)
	}
	var zero T
	return zero
}

func none[T any](t *testing.T, s *ChangesSubscription[T], what string) {
	t.Helper()
	select {
	case v, ok := <-s.C:
		if ok {
			t.Fatalf("%s: unexpected %+v", what, v)
		}
	case <-time.After(200 * time.Millisecond):
	}
}

// One Changes connection, several subscriptions: each sees what another
// store writes, filtered as RavenDB's clients filter.
func TestChangesSubscriptions(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	writer := NewDocumentStore([]string{n.URL}, store.Database())
	defer writer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	ch, err := store.Changes(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	doc, err := ch.ForDocument(ctx, "Users/1")
	if err != nil {
		t.Fatal(err)
	}
	coll, err := ch.ForDocumentsInCollection(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	prefix, err := ch.ForDocumentsStartingWith(ctx, "users/")
	if err != nil {
		t.Fatal(err)
	}
	all, err := ch.ForAllDocuments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := ch.ForIndex(ctx, "Orders/ByTotal")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := ch.ForAllOperations(ctx)
	if err != nil {
		t.Fatal(err)
	}

	s := writer.OpenSession()
	if err := s.StoreWithID(&User{Name: "a"}, "users/1"); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreWithID(&User{Name: "b"}, "users/2"); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreWithID(&Order{Total: 5}, "orders/1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if d := recv(t, doc, "ForDocument"); d.Type != "Put" || d.ID != "users/1" || d.CollectionName != "Users" || d.ChangeVector == "" {
		t.Fatalf("ForDocument got %+v", d)
	}
	none(t, doc, "ForDocument (users/2)")
	if d := recv(t, coll, "ForDocumentsInCollection"); d.ID != "orders/1" {
		t.Fatalf("collection got %+v", d)
	}
	if a, b := recv(t, prefix, "prefix"), recv(t, prefix, "prefix"); a.ID != "users/1" || b.ID != "users/2" {
		t.Fatalf("prefix got %+v %+v", a, b)
	}
	for _, want := range []string{"users/1", "users/2", "orders/1"} {
		if d := recv(t, all, "all"); d.ID != want {
			t.Fatalf("all got %+v, want %s", d, want)
		}
	}

	// Closing one subscription leaves the others.
	if err := doc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-doc.C; ok || doc.Err() != nil {
		t.Fatalf("closed subscription: %v", doc.Err())
	}
	d := writer.OpenSession()
	if err := d.Delete("users/1"); err != nil {
		t.Fatal(err)
	}
	if err := d.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, all, "all"); got.Type != "Delete" || got.ID != "users/1" {
		t.Fatalf("delete got %+v", got)
	}

	// An index reports its batches; an operation its states.
	if _, err := writer.PutIndexes(ctx, IndexDefinition{Name: "Orders/ByTotal", Maps: []string{`map('Orders', o => ({ Total: o.Total }))`}}); err != nil {
		t.Fatal(err)
	}
	for {
		if c := recv(t, ix, "ForIndex"); c.Type == "BatchCompleted" {
			if c.Name != "Orders/ByTotal" {
				t.Fatalf("index got %+v", c)
			}
			break
		}
	}
	op, err := writer.DeleteByQuery(ctx, IndexQuery{Query: "from Orders"}, QueryOperationOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		c := recv(t, ops, "ForAllOperations")
		if c.OperationID == op.ID && c.State.Status == "Completed" {
			break
		}
	}
}

// ForOperation with an id reserved before the operation starts; Close
// ends every subscription with ErrChangesClosed; a database that does not
// exist is refused.
func TestChangesForOperationAndClose(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := store.OpenSession()
	for _, id := range []string{"items/1", "items/2"} {
		if err := s.StoreWithID(&User{Name: id}, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	ch, err := store.Changes(ctx, store.Database())
	if err != nil {
		t.Fatal(err)
	}
	// Operation ids are the node's, handed out in order: the next
	// operation started takes the next one.
	_, body, err := store.RequestExecutor().Do(ctx, "GET", "/operations/next-operation-id", nil)
	if err != nil {
		t.Fatal(err)
	}
	var next struct{ Id int64 }
	if err := json.Unmarshal(body, &next); err != nil {
		t.Fatal(err)
	}
	sub, err := ch.ForOperation(ctx, next.Id+1)
	if err != nil {
		t.Fatal(err)
	}
	op, err := store.DeleteByQuery(ctx, IndexQuery{Query: "from Users"}, QueryOperationOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if op.ID != next.Id+1 {
		t.Fatalf("operation %d, watched %d", op.ID, next.Id+1)
	}
	for {
		c := recv(t, sub, "ForOperation")
		if c.OperationID != op.ID {
			t.Fatalf("got operation %d", c.OperationID)
		}
		if c.State.Status == "Completed" {
			break
		}
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-sub.C; ok {
		t.Fatal("still open after Close")
	}
	if !errors.Is(sub.Err(), ErrChangesClosed) {
		t.Fatalf("Err %v", sub.Err())
	}
	if _, err := ch.ForAllDocuments(ctx); !errors.Is(err, ErrChangesClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if _, err := store.Changes(ctx, "no_such_database"); err == nil {
		t.Fatal("a missing database's changes opened")
	}
}

// Over TLS the connection presents the store's certificate; a store with
// none is refused with an authorization error.
func TestChangesSecured(t *testing.T) {
	n := testserver.Start(t, testserver.Options{Secured: true})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const db = "securedchanges"
	store := NewDocumentStoreWithConventions([]string{n.URL}, db, securedConventions(t, n, n.Certs.Admin.PEM))
	defer store.Close()
	if err := store.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	ch, err := store.Changes(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	sub, err := ch.ForDocument(ctx, "readings/1")
	if err != nil {
		t.Fatal(err)
	}
	s := store.OpenSession()
	if err := s.StoreWithID(&Reading{Seq: 1}, "readings/1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if d := recv(t, sub, "secured"); d.ID != "readings/1" {
		t.Fatalf("got %+v", d)
	}
	conv := securedConventions(t, n, "")
	anon := NewDocumentStoreWithConventions([]string{n.URL}, db, conv)
	defer anon.Close()
	if _, err := anon.Changes(ctx, ""); !errors.Is(err, ErrAuthorization) {
		t.Fatalf("without a certificate: %v", err)
	}
}

// Counter and time-series subscriptions: each hears what another store
// writes, filtered by document and name as RavenDB's clients filter, and
// nothing once closed.
func TestChangesCountersAndTimeSeries(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	writer := NewDocumentStore([]string{n.URL}, store.Database())
	defer writer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ch, err := store.Changes(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	one, err := ch.ForCounterOfDocument(ctx, "Users/1", "LIKES")
	if err != nil {
		t.Fatal(err)
	}
	allCounters, err := ch.ForAllCounters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	named, err := ch.ForCounter(ctx, "views")
	if err != nil {
		t.Fatal(err)
	}
	ofDoc, err := ch.ForCountersOfDocument(ctx, "users/2")
	if err != nil {
		t.Fatal(err)
	}
	series, err := ch.ForTimeSeriesOfDocument(ctx, "users/1", "")
	if err != nil {
		t.Fatal(err)
	}
	seriesNamed, err := ch.ForTimeSeriesOfDocument(ctx, "users/1", "steps")
	if err != nil {
		t.Fatal(err)
	}
	allSeries, err := ch.ForAllTimeSeries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName, err := ch.ForTimeSeries(ctx, "HEARTRATE")
	if err != nil {
		t.Fatal(err)
	}

	s := writer.OpenSession()
	for _, id := range []string{"users/1", "users/2"} {
		if err := s.StoreWithID(&User{Name: id}, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.IncrementCounter(ctx, "users/1", "Likes", 5); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.IncrementCounter(ctx, "users/2", "Views", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.IncrementCounter(ctx, "users/1", "likes", 1); err != nil {
		t.Fatal(err)
	}
	if c := recv(t, one, "ForCounterOfDocument"); c.Type != "Put" || c.Name != "Likes" || c.Value != 5 || c.DocumentID != "users/1" ||
		c.CollectionName != "Users" || !strings.HasPrefix(c.ChangeVector, "A:") {
		t.Fatalf("ForCounterOfDocument got %+v", c)
	}
	if c := recv(t, one, "ForCounterOfDocument"); c.Type != "Increment" || c.Value != 6 {
		t.Fatalf("ForCounterOfDocument got %+v", c)
	}
	none(t, one, "ForCounterOfDocument (users/2)")
	var got []string
	for range 3 {
		c := recv(t, allCounters, "ForAllCounters")
		got = append(got, fmt.Sprintf("%s/%s=%d", c.DocumentID, c.Name, c.Value))
	}
	if strings.Join(got, " ") != "users/1/Likes=5 users/2/Views=2 users/1/Likes=6" {
		t.Fatalf("ForAllCounters got %v", got)
	}
	if c := recv(t, named, "ForCounter"); c.DocumentID != "users/2" || c.Name != "Views" {
		t.Fatalf("ForCounter got %+v", c)
	}
	if c := recv(t, ofDoc, "ForCountersOfDocument"); c.DocumentID != "users/2" || c.Value != 2 {
		t.Fatalf("ForCountersOfDocument got %+v", c)
	}
	none(t, named, "ForCounter (likes)")

	at := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	if err := writer.TimeSeriesAppend(ctx, "users/1", "HeartRate", TimeSeriesEntry{Timestamp: at, Values: []float64{70}},
		TimeSeriesEntry{Timestamp: at.Add(time.Minute), Values: []float64{71}}); err != nil {
		t.Fatal(err)
	}
	if err := writer.TimeSeriesAppend(ctx, "users/2", "HeartRate", TimeSeriesEntry{Timestamp: at, Values: []float64{60}}); err != nil {
		t.Fatal(err)
	}
	if err := writer.TimeSeriesDelete(ctx, "users/1", "HeartRate", at, at); err != nil {
		t.Fatal(err)
	}
	if c := recv(t, series, "ForTimeSeriesOfDocument"); c.Type != "Put" || c.Name != "HeartRate" || c.DocumentID != "users/1" ||
		c.CollectionName != "Users" || !c.From.Equal(at) || !c.To.Equal(at.Add(time.Minute)) || c.ChangeVector == "" {
		t.Fatalf("ForTimeSeriesOfDocument got %+v", c)
	}
	if c := recv(t, series, "ForTimeSeriesOfDocument"); c.Type != "Delete" || !c.From.Equal(at) || !c.To.Equal(at) {
		t.Fatalf("ForTimeSeriesOfDocument got %+v", c)
	}
	none(t, seriesNamed, "ForTimeSeriesOfDocument (steps)")
	for _, want := range []string{"Put users/1", "Put users/2", "Delete users/1"} {
		if c := recv(t, allSeries, "ForAllTimeSeries"); c.Type+" "+c.DocumentID != want {
			t.Fatalf("ForAllTimeSeries got %+v, want %s", c, want)
		}
		if c := recv(t, byName, "ForTimeSeries"); c.Type+" "+c.DocumentID != want {
			t.Fatalf("ForTimeSeries got %+v, want %s", c, want)
		}
	}

	// Closed (unwatched on the server): nothing more.
	if err := one.Close(); err != nil {
		t.Fatal(err)
	}
	if err := series.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.IncrementCounter(ctx, "users/1", "Likes", 1); err != nil {
		t.Fatal(err)
	}
	if c := recv(t, allCounters, "ForAllCounters"); c.Value != 7 {
		t.Fatalf("ForAllCounters got %+v", c)
	}
	if _, ok := <-one.C; ok {
		t.Fatal("a closed subscription delivered")
	}
	if _, err := ch.ForCounterOfDocument(ctx, "users/1", " "); err == nil {
		t.Fatal("a blank counter name was accepted")
	}
}
