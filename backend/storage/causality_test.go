package storage_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/storage"
)

// deliver sends from's next items (at most max, in etag order) to to, as
// one replication batch would: items already merged into to's database
// vector are left out, the position moves past everything read. It
// reports how many items it read.
func deliver(t *testing.T, from, to *storage.DB, max int) int {
	t.Helper()
	ctx := context.Background()
	var after int64
	if err := to.Write(ctx, func(tx *storage.Tx) error {
		var err error
		after, err = tx.SourceEtag(from.DatabaseID())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	items, err := from.ChangesAfter(ctx, after, max)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) == 0 {
		return 0
	}
	dest, _ := changevector.ParseStored(to.ChangeVector())
	if err := to.Write(ctx, func(tx *storage.Tx) error {
		for _, it := range items {
			if it.Skippable(dest) {
				continue
			}
			if _, err := tx.ApplyReplicated(it); err != nil {
				return err
			}
		}
		return tx.SetSourceEtag(from.DatabaseID(), items[len(items)-1].Etag)
	}); err != nil {
		t.Fatal(err)
	}
	return len(items)
}

// applyOnly applies one item to to, out of its source's order, as a copy
// that relays it ahead of an older item does (it rewrote that older item's
// document after it received this one).
func applyOnly(t *testing.T, to *storage.DB, it storage.Item) storage.Outcome {
	t.Helper()
	var out storage.Outcome
	if err := to.Write(context.Background(), func(tx *storage.Tx) error {
		var err error
		out, err = tx.ApplyReplicated(it)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func itemOf(t *testing.T, db *storage.DB, id string) storage.Item {
	t.Helper()
	items, err := db.ChangesAfter(context.Background(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it.ID == id {
			return it
		}
	}
	t.Fatalf("%s has no %s", db.NodeTag(), id)
	return storage.Item{}
}

// A copy's database vector can pass another copy's write to a document
// before that write arrives: a third copy relays a later item first. A
// local write of that document must still not claim to supersede the write
// it never held: when the write arrives, the two conflict. (The write's
// vector used to be the database vector, which made it win silently and
// lost the other copy's acknowledged write on every copy.)
func TestLocalWriteDoesNotSupersedeWhatItNeverHeld(t *testing.T) {
	a, b := openTag(t, "A"), openTag(t, "B")
	mustPut(t, a, "docs/1", `{"v":0,"@metadata":{"@collection":"Docs"}}`)
	replicate(t, a, b)
	mustPut(t, a, "docs/1", `{"v":"from A","@metadata":{"@collection":"Docs"}}`) // acknowledged on A
	mustPut(t, a, "docs/2", `{"later":true,"@metadata":{"@collection":"Docs"}}`)
	if o := applyOnly(t, b, itemOf(t, a, "docs/2")); o != storage.Applied {
		t.Fatalf("relayed item: %v", o)
	}
	mustPut(t, b, "docs/1", `{"v":"from B","@metadata":{"@collection":"Docs"}}`)
	got, err := b.Get(context.Background(), "docs/1")
	if err != nil || got == nil {
		t.Fatal(got, err)
	}
	aCV := itemOf(t, a, "docs/1").ChangeVector
	if st, _ := changevector.CompareStrings(aCV, got.ChangeVector); st != changevector.Conflict {
		t.Fatalf("B's write %s against A's %s: %v, want Conflict", got.ChangeVector, aCV, st)
	}
	// A's write arrives (by the copy that relayed docs/2: it holds the write
	// or a version made from it).
	if o := applyOnly(t, b, itemOf(t, a, "docs/1")); o != storage.Conflicted {
		t.Fatalf("A's write reached B: %v, want Conflicted", o)
	}
	if vs := versions(t, b, "docs/1"); len(vs) != 2 {
		t.Fatalf("B holds %d versions of docs/1, want both in conflict: %+v", len(vs), vs)
	}
	replicate(t, b, a)
	if state(t, a) != state(t, b) {
		t.Fatalf("copies differ:\nA:\n%s\nB:\n%s", state(t, a), state(t, b))
	}
}

// Three copies add attachments to a few documents while random partial
// batches flow between random pairs; versions that differ only in their
// attachments merge into the union (no resolver, no conflict). At the end
// every acknowledged attachment is on every copy. Partial batches and those
// merges reorder what a copy relays against what it received, which is how
// a database vector passes a write that has not arrived.
func TestNoAcknowledgedAttachmentIsLost(t *testing.T) {
	for round := 0; round < *lostRounds; round++ {
		seed := time.Now().UnixNano() + int64(round)
		t.Run(fmt.Sprint(seed), func(t *testing.T) { noLostAttachment(t, seed) })
	}
}

var (
	lostRounds = flag.Int("lost-rounds", 4, "rounds of TestNoAcknowledgedAttachmentIsLost")
	lostSteps  = flag.Int("lost-steps", 150, "steps per round of TestNoAcknowledgedAttachmentIsLost")
)

func noLostAttachment(t *testing.T, seed int64) {
	ctx := context.Background()
	r := rand.New(rand.NewSource(seed))
	dbs := []*storage.DB{openTag(t, "A"), openTag(t, "B"), openTag(t, "C")}
	const docs = 2
	for d := 0; d < docs; d++ {
		mustPut(t, dbs[0], fmt.Sprintf("docs/%d", d), `{"Name":"x","@metadata":{"@collection":"Docs"}}`)
	}
	replicate(t, dbs[0], dbs[1])
	replicate(t, dbs[0], dbs[2])
	written := map[string]string{} // attachment name -> document
	for step := 0; step < *lostSteps; step++ {
		i := r.Intn(3)
		if r.Intn(2) == 0 {
			j := (i + 1 + r.Intn(2)) % 3
			deliver(t, dbs[i], dbs[j], 1+r.Intn(3))
			continue
		}
		id := fmt.Sprintf("docs/%d", r.Intn(docs))
		name := fmt.Sprintf("%s%d", dbs[i].NodeTag(), step)
		putAttachment(t, dbs[i], id, name, "text/plain", []byte(name))
		written[name] = id
	}
	for round := 0; round < 3; round++ {
		for i := range dbs {
			for j := range dbs {
				if i != j {
					replicate(t, dbs[i], dbs[j])
				}
			}
		}
	}
	s0 := state(t, dbs[0])
	for i := 1; i < 3; i++ {
		if s := state(t, dbs[i]); s != s0 {
			t.Fatalf("seed %d: copy %d differs:\n%s\nvs\n%s", seed, i, s, s0)
		}
	}
	for _, db := range dbs {
		have := map[string]bool{}
		for d := 0; d < docs; d++ {
			refs, err := db.Attachments(ctx, fmt.Sprintf("docs/%d", d))
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range refs {
				have[a.Name] = true
				if ok, err := db.HasContent(ctx, a.Hash); err != nil || !ok {
					t.Fatalf("seed %d: %s lists %s of docs/%d but lacks its content (%v)", seed, db.NodeTag(), a.Name, d, err)
				}
			}
		}
		for name, id := range written {
			if !have[name] {
				t.Fatalf("seed %d: the acknowledged attachment %s of %s is missing on %s", seed, name, id, db.NodeTag())
			}
		}
	}
}
