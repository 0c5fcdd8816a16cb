package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/backend/dberr"
)

// Put, get and delete by index: 0 creates, a stale index fails without
// changing anything (the answer carries the current index and value), a
// request id answers a retry with the first answer; deleting the database
// drops its values.
func TestCmpXchgPutGetDelete(t *testing.T) {
	cl := oneNode(t)
	ctx := context.Background()
	v := func(s string) json.RawMessage { return json.RawMessage(`{"Object":` + s + `}`) }
	r, err := cl.PutCmpXchg(ctx, "shop", "Users/Ayende", 0, v(`"a"`), "")
	if err != nil || !r.Successful || r.Index == 0 {
		t.Fatalf("create: %+v %v", r, err)
	}
	first := r.Index
	if r2, _ := cl.PutCmpXchg(ctx, "shop", "users/ayende", 0, v(`"b"`), ""); r2.Successful || r2.Index != first || string(r2.Value) != string(v(`"a"`)) {
		t.Fatalf("a second create must fail with the current value: %+v", r2)
	}
	r3, err := cl.PutCmpXchg(ctx, "shop", "users/ayende", first, v(`"c"`), "req-1")
	if err != nil || !r3.Successful || r3.Index <= first {
		t.Fatalf("update: %+v %v", r3, err)
	}
	// The retry of req-1 gets the first answer, and does not write again.
	r4, err := cl.PutCmpXchg(ctx, "shop", "users/ayende", first, v(`"d"`), "req-1")
	if err != nil || !r4.Successful || r4.Index != r3.Index {
		t.Fatalf("retry: %+v %v", r4, err)
	}
	got, ok := cl.CmpXchg("shop", "USERS/AYENDE")
	if !ok || got.Key != "Users/Ayende" || got.Index != r3.Index || string(got.Value) != string(v(`"c"`)) {
		t.Fatalf("get: %+v %v", got, ok)
	}
	if d, _ := cl.DeleteCmpXchg(ctx, "shop", "users/ayende", first, ""); d.Successful || d.Index != r3.Index {
		t.Fatalf("a stale delete must fail: %+v", d)
	}
	if d, _ := cl.DeleteCmpXchg(ctx, "shop", "users/ayende", r3.Index, ""); !d.Successful || string(d.Value) != string(v(`"c"`)) {
		t.Fatalf("delete: %+v", d)
	}
	if _, ok := cl.CmpXchg("shop", "users/ayende"); ok {
		t.Fatal("deleted value still there")
	}
	if _, err := cl.PutCmpXchg(ctx, "shop", "", 0, v(`1`), ""); dberr.KindOf(err) != dberr.BadRequest {
		t.Fatalf("empty key: %v", err)
	}
	if _, err := cl.PutCmpXchg(ctx, "shop", "k", 0, json.RawMessage(`[1]`), ""); dberr.KindOf(err) != dberr.BadRequest {
		t.Fatalf("a value that is not an object: %v", err)
	}
	if _, err := cl.PutCmpXchg(ctx, "nope", "k", 0, v(`1`), ""); err == nil {
		t.Fatal("a value of a missing database")
	}
	for _, k := range []string{"p/1", "p/2", "q/1"} {
		if _, err := cl.PutCmpXchg(ctx, "shop", k, 0, v(`1`), ""); err != nil {
			t.Fatal(err)
		}
	}
	if l := cl.CmpXchgList("shop", "P/"); len(l) != 2 || l[0].Key != "p/1" || l[1].Key != "p/2" {
		t.Fatalf("list by prefix: %+v", l)
	}
	if _, err := cl.DeleteDatabase(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateDatabase(ctx, Database{Name: "shop", Members: []string{"A"}}); err != nil {
		t.Fatal(err)
	}
	if l := cl.CmpXchgList("shop", ""); len(l) != 0 {
		t.Fatalf("values outlived their database: %+v", l)
	}
}

// A cluster transaction is all or nothing: one stale value or guard fails
// it whole; a successful one records its documents for the copies and
// guards them; a deleted document's guard lets a new document through but
// not a writer that saw it before the deletion.
func TestClusterTransaction(t *testing.T) {
	cl := oneNode(t)
	ctx := context.Background()
	val := json.RawMessage(`{"Object":{"n":1}}`)
	doc := func(id string, guard uint64) TxDoc {
		return TxDoc{ID: id, Collection: "Users", Body: []byte(`{"n":1}`), Guard: guard}
	}
	r, err := cl.ClusterTransaction(ctx, "shop", CmpXchgCommand{Time: time.Now(), Ops: []CmpXchgOp{{Key: "emails/a", Value: val}}, Docs: []TxDoc{doc("users/1", 0)}})
	if err != nil || r.Value == 0 {
		t.Fatalf("first: %+v %v", r, err)
	}
	ix := uint64(r.Value)
	g, ok := cl.CmpXchg("shop", "rvn-atomic/users/1")
	if !ok || g.Index != ix {
		t.Fatalf("guard %+v %v", g, ok)
	}
	if l := cl.CmpXchgList("shop", ""); len(l) != 1 {
		t.Fatalf("guards must not be listed with other values: %+v", l)
	}
	// A new value, but a stale guard: nothing happens.
	_, err = cl.ClusterTransaction(ctx, "shop", CmpXchgCommand{Ops: []CmpXchgOp{{Key: "emails/b", Value: val}}, Docs: []TxDoc{doc("users/1", 0)}})
	if dberr.KindOf(err) != dberr.Concurrency {
		t.Fatalf("stale guard: %v", err)
	}
	if _, ok := cl.CmpXchg("shop", "emails/b"); ok {
		t.Fatal("a failed transaction wrote a value")
	}
	if n := len(cl.ClusterTxsAfter("shop", 0)); n != 1 {
		t.Fatalf("%d transactions kept, want 1", n)
	}
	// The current guard passes; a stale value fails.
	if _, err := cl.ClusterTransaction(ctx, "shop", CmpXchgCommand{Ops: []CmpXchgOp{{Key: "emails/a", Value: val, Index: ix - 1}}, Docs: []TxDoc{doc("users/1", ix)}}); dberr.KindOf(err) != dberr.Concurrency {
		t.Fatalf("stale value: %v", err)
	}
	r2, err := cl.ClusterTransaction(ctx, "shop", CmpXchgCommand{Ops: []CmpXchgOp{{Key: "emails/a", Delete: true, Index: ix}}, Docs: []TxDoc{{ID: "users/1", Delete: true, Guard: ix}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cl.CmpXchg("shop", "emails/a"); ok {
		t.Fatal("value not deleted")
	}
	// A writer that loaded users/1 before the deletion fails; a new
	// document passes.
	if _, err := cl.ClusterTransaction(ctx, "shop", CmpXchgCommand{Docs: []TxDoc{doc("users/1", ix)}}); dberr.KindOf(err) != dberr.Concurrency {
		t.Fatalf("resurrection by a stale writer: %v", err)
	}
	if _, err := cl.ClusterTransaction(ctx, "shop", CmpXchgCommand{Docs: []TxDoc{doc("users/1", 0)}}); err != nil {
		t.Fatalf("new document after a deletion: %v", err)
	}
	txs := cl.ClusterTxsAfter("shop", ix)
	if len(txs) != 2 || txs[0].Index != uint64(r2.Value) || !txs[0].Docs[0].Delete {
		t.Fatalf("kept transactions after %d: %+v", ix, txs)
	}
}

// Values, guards and kept transactions survive a snapshot and restore.
func TestCmpXchgSnapshotRestore(t *testing.T) {
	cl := oneNode(t)
	ctx := context.Background()
	if _, err := cl.PutCmpXchg(ctx, "shop", "a", 0, json.RawMessage(`{"Object":"x"}`), "req-9"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ClusterTransaction(ctx, "shop", CmpXchgCommand{Docs: []TxDoc{{ID: "users/1", Body: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	snap, err := cl.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	f := &fsm{st: newState()}
	if err := f.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if v, ok := f.cmpXchgGet("shop", "A"); !ok || string(v.Value) != `{"Object":"x"}` {
		t.Fatalf("restored value %+v %v", v, ok)
	}
	if _, ok := f.cmpXchgGet("shop", "rvn-atomic/users/1"); !ok {
		t.Fatal("guard lost in the snapshot")
	}
	if txs := f.clusterTxsAfter("shop", 0); len(txs) != 1 || string(txs[0].Docs[0].Body) != `{}` {
		t.Fatalf("transactions lost: %+v", txs)
	}
	if _, ok := f.st.CmpXchg.Requests["req-9"]; !ok {
		t.Fatal("request ids lost")
	}
}

type memSink struct{ bytes.Buffer }

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { return nil }
func (m *memSink) Close() error  { return nil }

var _ raft.SnapshotSink = (*memSink)(nil)
