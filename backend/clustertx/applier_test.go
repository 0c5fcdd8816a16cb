package clustertx_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/catalog"
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/clustertx"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/internal/testserver"
)

// A committed cluster transaction is written into the database file with
// the RAFT entry in its change vector, the last applied index is kept in
// the file (a reopened catalog does not write it again), and a version the
// copy already has (it came by replication) is skipped.
func TestApplierWritesInLogOrder(t *testing.T) {
	cl := testserver.Cluster(t, "shop")
	dir := t.TempDir()
	cat, err := catalog.Open(dir, "A", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	db, err := cat.Create("shop", catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// users/2 arrives by replication before its transaction is applied.
	lm := time.Date(2026, 12, 7, 1, 2, 3, 0, time.UTC)
	r1, err := cl.ClusterTransaction(ctx, "shop", cluster.CmpXchgCommand{Time: lm, Docs: []cluster.TxDoc{
		{ID: "users/1", Collection: "Users", Body: []byte(`{"N":1,"@metadata":{"@collection":"Users"}}`)},
		{ID: "users/2", Collection: "Users", Body: []byte(`{"N":2,"@metadata":{"@collection":"Users"}}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	entry := "RAFT:" + itoa(r1.Value) + "-" + cluster.ClusterTxDBID("shop")
	if err := db.Write(ctx, func(tx *storage.Tx) error {
		_, err := tx.ApplyReplicated(storage.Item{Type: "Put", ID: "users/2", Collection: "Users", ChangeVector: entry, LastModified: lm,
			Body: []byte(`{"N":2,"@metadata":{"@collection":"Users"}}`)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	before, _ := db.Get(ctx, "users/2")

	stop := make(chan struct{})
	ap := clustertx.New(cl, cat, nil)
	go ap.Run(stop)
	if err := ap.Wait(ctx, "shop", uint64(r1.Value)); err != nil {
		t.Fatal(err)
	}
	r2, err := cl.ClusterTransaction(ctx, "shop", cluster.CmpXchgCommand{Time: lm, Docs: []cluster.TxDoc{{ID: "users/1", Delete: true, Guard: uint64(r1.Value)}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ap.Wait(ctx, "shop", uint64(r2.Value)); err != nil {
		t.Fatal(err)
	}
	close(stop)

	if d, _ := db.Get(ctx, "users/1"); d != nil {
		t.Fatalf("users/1 not deleted by the second transaction: %+v", d)
	}
	d2, _ := db.Get(ctx, "users/2")
	if d2 == nil || d2.ChangeVector != entry || d2.Etag != before.Etag || !d2.LastModified.Equal(lm) {
		t.Fatalf("users/2: %+v (before %+v), want vector %s untouched", d2, before, entry)
	}
	var body map[string]any
	_ = json.Unmarshal(d2.Body, &body)
	if body["N"] != float64(2) {
		t.Fatalf("body %s", d2.Body)
	}
	last := db.LastEtag()
	var applied uint64
	_ = db.Write(ctx, func(tx *storage.Tx) error { applied, err = tx.ClusterTxApplied(); return err })
	if applied != uint64(r2.Value) {
		t.Fatalf("applied index in the file %d, want %d", applied, r2.Value)
	}
	if err := cat.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened, a fresh applier finds nothing to do.
	cat2, err := catalog.Open(dir, "A", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cat2.Close()
	stop2 := make(chan struct{})
	defer close(stop2)
	ap2 := clustertx.New(cl, cat2, nil)
	go ap2.Run(stop2)
	if err := ap2.Wait(ctx, "shop", uint64(r2.Value)); err != nil {
		t.Fatal(err)
	}
	db2, _ := cat2.Get("shop")
	if db2.LastEtag() != last {
		t.Fatalf("a restart wrote again: last etag %d, was %d", db2.LastEtag(), last)
	}
	if tomb := db2.ChangeVector(); !strings.Contains(tomb, "RAFT:"+itoa(r2.Value)) {
		t.Fatalf("database vector %s lacks the second entry", tomb)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
