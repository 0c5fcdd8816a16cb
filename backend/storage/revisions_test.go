package storage_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
)

// revConfig installs a fixed revisions configuration on a database.
func revConfig(db *storage.DB, js string) {
	db.SetRevisionsSource(func() []byte { return []byte(js) })
}

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func revs(t *testing.T, db *storage.DB, id string) []*storage.Revision {
	t.Helper()
	list, total, err := db.RevisionsFor(context.Background(), id, 0, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if total != len(list) {
		t.Fatalf("total %d, listed %d", total, len(list))
	}
	return list
}

func bodies(list []*storage.Revision) string {
	var out []string
	for _, r := range list {
		if r.Flags&storage.RevisionDelete != 0 {
			out = append(out, "DELETED")
			continue
		}
		var v struct{ N int }
		_ = json.Unmarshal(r.Body, &v)
		out = append(out, strings.Repeat("", 0)+itoa(v.N))
	}
	return strings.Join(out, ",")
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func putN(t *testing.T, db *storage.DB, id string, n int) storage.Info {
	t.Helper()
	info, err := put(t, db, id, `{"N":`+itoa(n)+`,"@metadata":{"@collection":"Users"}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func TestRevisionsWrittenWithPutsNewestFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	db := open(t, path)
	// No configuration: no revisions.
	putN(t, db, "users/1", 0)
	if got := revs(t, db, "users/1"); len(got) != 0 {
		t.Fatalf("revisions without a configuration: %d", len(got))
	}
	revConfig(db, `{"Default":null,"Collections":{"users":{"Disabled":false}}}`)
	var last storage.Info
	for i := 1; i <= 5; i++ {
		last = putN(t, db, "users/1", i)
	}
	got := revs(t, db, "Users/1")
	if bodies(got) != "5,4,3,2,1" {
		t.Fatalf("revisions %s", bodies(got))
	}
	if got[0].ChangeVector != last.ChangeVector {
		t.Fatalf("newest revision %s, document %s", got[0].ChangeVector, last.ChangeVector)
	}
	// Each revision took an etag of the documents' counter.
	if got[0].Etag <= last.Etag || db.LastEtag() != got[0].Etag {
		t.Fatalf("revision etag %d, document %d, last %d", got[0].Etag, last.Etag, db.LastEtag())
	}
	// Served: the document says it has revisions, the revision that it is one.
	d, err := db.Get(context.Background(), "users/1")
	if err != nil {
		t.Fatal(err)
	}
	if s := string(d.AppendJSON(nil)); !strings.Contains(s, `"@flags":"HasRevisions"`) {
		t.Fatalf("document %s", s)
	}
	if s := string(got[0].AppendJSON(nil)); !strings.Contains(s, `"@flags":"HasRevisions, Revision"`) || !strings.Contains(s, `"@change-vector":"`+last.ChangeVector) {
		t.Fatalf("revision %s", s)
	}
	if _, err := put(t, db, "orders/1", `{"@metadata":{"@collection":"Orders"}}`, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(revs(t, db, "orders/1")); n != 0 {
		t.Fatalf("orders (not configured) got %d revisions", n)
	}
	// Paging, by change vector, before a time, count.
	page, total, err := db.RevisionsFor(context.Background(), "users/1", 1, 2, 0)
	if err != nil || total != 5 || bodies(page) != "4,3" {
		t.Fatalf("page %s total %d err %v", bodies(page), total, err)
	}
	r, err := db.RevisionByChangeVector(context.Background(), got[2].ChangeVector)
	if err != nil || r == nil || bodies([]*storage.Revision{r}) != "3" {
		t.Fatalf("by change vector: %v %v", r, err)
	}
	if n, _ := db.RevisionsCount(context.Background(), "USERS/1"); n != 5 {
		t.Fatalf("count %d", n)
	}
	// Reopened: everything is still there and the etag counter went on.
	lastEtag := db.LastEtag()
	db.Close()
	db = open(t, path)
	if got := revs(t, db, "users/1"); bodies(got) != "5,4,3,2,1" {
		t.Fatalf("after reopen %s", bodies(got))
	}
	if db.LastEtag() != lastEtag {
		t.Fatalf("last etag %d after reopen, was %d", db.LastEtag(), lastEtag)
	}
	revConfig(db, `{"Collections":{"Users":{}}}`)
	if info := putN(t, db, "users/1", 6); info.Etag <= lastEtag {
		t.Fatalf("etag %d reused after reopen (last %d)", info.Etag, lastEtag)
	}
}

func TestRevisionsKeepLastNAndAge(t *testing.T) {
	db := open(t, "")
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	db.SetClock(clock.now)

	// Keep the last 3.
	revConfig(db, `{"Default":{"MinimumRevisionsToKeep":3}}`)
	for i := 1; i <= 6; i++ {
		putN(t, db, "users/1", i)
	}
	if got := bodies(revs(t, db, "users/1")); got != "6,5,4" {
		t.Fatalf("keep 3: %s", got)
	}

	// Purge after an age: a day.
	revConfig(db, `{"Default":{"MinimumRevisionAgeToKeep":"1.00:00:00"}}`)
	for i := 1; i <= 3; i++ {
		clock.add(time.Hour)
		putN(t, db, "users/2", i)
	}
	if got := bodies(revs(t, db, "users/2")); got != "3,2,1" {
		t.Fatalf("all within a day: %s", got)
	}
	clock.add(22*time.Hour + 30*time.Minute) // 1 is now older than a day, 2 and 3 are not
	putN(t, db, "users/2", 4)
	if got := bodies(revs(t, db, "users/2")); got != "4,3,2" {
		t.Fatalf("after a day: %s", got)
	}
	clock.add(48 * time.Hour)
	putN(t, db, "users/2", 5)
	if got := bodies(revs(t, db, "users/2")); got != "5" {
		t.Fatalf("two days later: %s", got)
	}

	// Both: a revision goes only when beyond the count and older than the age.
	revConfig(db, `{"Default":{"MinimumRevisionsToKeep":2,"MinimumRevisionAgeToKeep":"01:00:00"}}`)
	for i := 1; i <= 4; i++ {
		putN(t, db, "users/3", i) // same time: all young
	}
	if got := bodies(revs(t, db, "users/3")); got != "4,3,2,1" {
		t.Fatalf("young revisions beyond the count: %s", got)
	}
	clock.add(2 * time.Hour)
	putN(t, db, "users/3", 5)
	if got := bodies(revs(t, db, "users/3")); got != "5,4" {
		t.Fatalf("old revisions beyond the count: %s", got)
	}

	// A bound on how many one update removes.
	revConfig(db, `{"Default":{"MinimumRevisionsToKeep":1,"MaximumRevisionsToDeleteUponDocumentUpdate":1}}`)
	putN(t, db, "users/3", 6) // 6,5,4 -> removes only the oldest (4)
	if got := bodies(revs(t, db, "users/3")); got != "6,5" {
		t.Fatalf("bounded purge: %s", got)
	}

	// HiLo documents never get revisions, whatever the default.
	if _, err := put(t, db, "Raven/Hilo/users", `{"Max":32,"@metadata":{"@collection":"@hilo"}}`, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(revs(t, db, "Raven/Hilo/users")); n != 0 {
		t.Fatalf("a HiLo document got %d revisions", n)
	}

	// Disabled for a collection, the default elsewhere.
	revConfig(db, `{"Default":{},"Collections":{"Users":{"Disabled":true}}}`)
	putN(t, db, "users/4", 1)
	if n := len(revs(t, db, "users/4")); n != 0 {
		t.Fatalf("disabled collection got %d revisions", n)
	}

	// Bad configurations are refused.
	for _, bad := range []string{`{"Default":{"MinimumRevisionAgeToKeep":"soon"}}`, `{"Default":{"MinimumRevisionsToKeep":-1}}`, `{"Default":[`} {
		if _, err := storage.ParseRevisionsConfig([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if d, err := storage.ParseTimeSpan("2.03:04:05.5"); err != nil || d != 51*time.Hour+4*time.Minute+5500*time.Millisecond {
		t.Fatalf("timespan %v %v", d, err)
	}
}

func TestRevisionsOnDelete(t *testing.T) {
	db := open(t, "")
	ctx := context.Background()
	revConfig(db, `{"Default":{},"Collections":{"Orders":{"PurgeOnDelete":true}}}`)
	putN(t, db, "users/1", 1)
	putN(t, db, "users/1", 2)
	del(t, db, "users/1")
	if got := bodies(revs(t, db, "users/1")); got != "DELETED,2,1" {
		t.Fatalf("delete revision: %s", got)
	}
	bin, err := db.RevisionsBin(ctx, 0, 10)
	if err != nil || len(bin) != 1 || bin[0].ID != "users/1" {
		t.Fatalf("bin %v %v", bin, err)
	}
	if s := string(bin[0].AppendJSON(nil)); !strings.Contains(s, `"@flags":"DeleteRevision, HasRevisions, Revision"`) || !strings.Contains(s, `"@collection":"Users"`) {
		t.Fatalf("delete revision %s", s)
	}
	for i := 1; i <= 2; i++ {
		if _, err := put(t, db, "orders/1", `{"N":1,"@metadata":{"@collection":"Orders"}}`, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(revs(t, db, "orders/1")); n != 1 { // same content twice: one per change vector, two writes
		if n != 2 {
			t.Fatalf("orders revisions %d", n)
		}
	}
	del(t, db, "orders/1")
	if n := len(revs(t, db, "orders/1")); n != 0 {
		t.Fatalf("purge on delete left %d", n)
	}
	// Revert users/1 to its second version: a new version with that body.
	list := revs(t, db, "users/1")
	var info storage.Info
	err = db.Write(ctx, func(tx *storage.Tx) error {
		var err error
		info, err = tx.RevertTo("users/1", list[1].ChangeVector)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := db.Get(ctx, "users/1")
	if err != nil || d == nil || !strings.Contains(string(d.Body), `"N":2`) || d.ChangeVector != info.ChangeVector {
		t.Fatalf("reverted %v %v", d, err)
	}
	if got := bodies(revs(t, db, "users/1")); got != "2,DELETED,2,1" {
		t.Fatalf("after revert: %s", got)
	}
}

func TestRevisionsRevertToTime(t *testing.T) {
	db := open(t, "")
	ctx := context.Background()
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	db.SetClock(clock.now)
	revConfig(db, `{"Default":{}}`)
	putN(t, db, "users/1", 1)
	putN(t, db, "users/2", 1)
	clock.add(time.Hour)
	at := clock.now()
	clock.add(time.Hour)
	putN(t, db, "users/1", 2)
	del(t, db, "users/2")
	putN(t, db, "users/3", 1) // created after the time
	res, err := db.RevertRevisions(ctx, at, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.RevertedDocuments != 3 {
		t.Fatalf("reverted %+v", res)
	}
	for id, want := range map[string]string{"users/1": `"N":1`, "users/2": `"N":1`, "users/3": ""} {
		d, err := db.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if want == "" && d != nil || want != "" && (d == nil || !strings.Contains(string(d.Body), want)) {
			t.Fatalf("%s after revert: %v", id, d)
		}
	}
}

func TestRevisionsOfConflictsAndReplication(t *testing.T) {
	ctx := context.Background()
	a, b, c := openTag(t, "A"), openTag(t, "B"), openTag(t, "C")
	for _, db := range []*storage.DB{a, b, c} {
		revConfig(db, `{"Default":{"MinimumRevisionsToKeep":10}}`)
	}
	for i := 1; i <= 3; i++ {
		putN(t, a, "users/1", i)
	}
	replicate(t, a, b)
	replicate(t, b, c)
	replicate(t, a, c)
	want := bodies(revs(t, a, "users/1"))
	for _, db := range []*storage.DB{b, c} {
		if got := bodies(revs(t, db, "users/1")); got != want {
			t.Fatalf("replicated revisions %s, want %s", got, want)
		}
		d, _ := db.Get(ctx, "users/1")
		if !strings.Contains(string(d.AppendJSON(nil)), "HasRevisions") {
			t.Fatalf("replicated document not flagged: %s", d.AppendJSON(nil))
		}
	}
	// A conflict: both versions are kept as revisions, flagged, even
	// without a configuration.
	x, y := openTag(t, "X"), openTag(t, "Y")
	putN(t, x, "users/9", 1)
	putN(t, y, "users/9", 2)
	replicate(t, x, y)
	if len(versions(t, y, "users/9")) != 2 {
		t.Fatal("no conflict")
	}
	list := revs(t, y, "users/9")
	if len(list) != 2 || list[0].Flags&storage.RevisionConflicted == 0 || list[1].Flags&storage.RevisionConflicted == 0 {
		t.Fatalf("conflict revisions %d", len(list))
	}
	// Resolving it keeps the result as a Resolved revision.
	if _, err := put(t, y, "users/9", `{"N":3,"@metadata":{"@collection":"Users"}}`, nil); err != nil {
		t.Fatal(err)
	}
	list = revs(t, y, "users/9")
	if len(list) != 3 || list[0].Flags&storage.RevisionResolved == 0 || bodies(list[:1]) != "3" {
		t.Fatalf("resolution revision: %d %s", len(list), bodies(list))
	}
	if s := string(list[0].AppendJSON(nil)); !strings.Contains(s, `"@flags":"HasRevisions, Resolved, Revision"`) {
		t.Fatalf("resolved revision %s", s)
	}
	// The revisions travel back: X ends with the same set.
	replicate(t, y, x)
	if got, want := bodies(revs(t, x, "users/9")), bodies(list); got != want {
		t.Fatalf("x has %s, y %s", got, want)
	}
	// Both copies serve the document alike, @flags included, whichever of
	// the document and its revisions arrived first; a later local write
	// (no configuration) keeps the flag while the revisions are there.
	sameDoc := func(what string) {
		t.Helper()
		dx, _ := x.Get(ctx, "users/9")
		dy, _ := y.Get(ctx, "users/9")
		if dx == nil || dy == nil || string(dx.AppendJSON(nil)) != string(dy.AppendJSON(nil)) || !strings.Contains(string(dx.AppendJSON(nil)), "HasRevisions") {
			t.Fatalf("%s: x serves %s, y %s", what, dx.AppendJSON(nil), dy.AppendJSON(nil))
		}
	}
	sameDoc("after the resolution replicated")
	for _, db := range []*storage.DB{x, y} {
		revConfig(db, `{}`)
	}
	if _, err := put(t, y, "users/9", `{"N":4,"@metadata":{"@collection":"Users"}}`, nil); err != nil {
		t.Fatal(err)
	}
	replicate(t, y, x)
	sameDoc("after a later write")
	// A revision already present is ignored: replicating again changes nothing.
	before := x.LastEtag()
	replicate(t, y, x)
	if x.LastEtag() != before {
		t.Fatal("a known revision was stored again")
	}
}

// Queries of @all_docs and similar readers of the change stream never see
// revisions as documents.
func TestRevisionsAreNotDocumentsInTheChangeStream(t *testing.T) {
	db := open(t, "")
	revConfig(db, `{"Default":{}}`)
	putN(t, db, "users/1", 1)
	putN(t, db, "users/1", 2)
	items, err := db.ChangesAfter(context.Background(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[storage.ItemKind]int{}
	for _, it := range items {
		kinds[it.Kind]++
		if it.Kind == storage.KindRevision && !it.Unordered {
			t.Fatal("a revision must travel Unordered")
		}
	}
	if kinds[storage.KindDocument] != 1 || kinds[storage.KindRevision] != 2 {
		t.Fatalf("kinds %v", kinds)
	}
	if n, err := db.CountChangesAfter(context.Background(), 0); err != nil || n != 3 {
		t.Fatalf("count %d %v", n, err)
	}
}

// A bulk of puts (PutMany, bulk_docs and bulk insert) writes the revisions
// the configuration asks for, as single puts do.
func TestRevisionsOfPutMany(t *testing.T) {
	db := open(t, "")
	revConfig(db, `{"Collections":{"Users":{}}}`)
	var items []storage.PutItem
	for i := 0; i < 600; i++ {
		items = append(items, storage.PutItem{ID: "users/" + itoa(i), Doc: doc(t, `{"N":`+itoa(i)+`,"@metadata":{"@collection":"Users"}}`)})
	}
	if err := db.Write(context.Background(), func(tx *storage.Tx) error {
		_, err := tx.PutMany(items)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"users/0", "users/300", "users/599"} {
		if got := revs(t, db, id); len(got) != 1 {
			t.Fatalf("%s has %d revisions", id, len(got))
		}
	}
}
