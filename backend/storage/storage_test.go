package storage_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/metrics"
	"github.com/rookerydb/rookery/backend/storage"
)

func open(t *testing.T, path string) *storage.DB {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "db.sqlite")
	}
	db, err := storage.Open(path, storage.Options{Name: "test", NodeTag: "A"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func doc(t testing.TB, js string) document.Parsed {
	t.Helper()
	p, err := document.Parse([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func put(t *testing.T, db *storage.DB, id, js string, expected *string) (storage.Info, error) {
	t.Helper()
	var info storage.Info
	err := db.Write(context.Background(), func(tx *storage.Tx) error {
		var err error
		info, err = tx.Put(id, doc(t, js), expected)
		return err
	})
	return info, err
}

func strp(s string) *string { return &s }

func TestPutGetDeleteRoundTrip(t *testing.T) {
	db := open(t, "")
	ctx := context.Background()
	info, err := put(t, db, "Users/1-A", `{"name":"John","@metadata":{"@collection":"Users"}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantCV := "A:1-" + db.DatabaseID()
	if info.Etag != 1 || info.ChangeVector != wantCV || info.Collection != "Users" {
		t.Fatalf("info %+v", info)
	}
	d, err := db.Get(ctx, "users/1-a") // case-insensitive
	if err != nil || d == nil {
		t.Fatalf("get: %v %v", d, err)
	}
	if d.ID != "Users/1-A" {
		t.Fatalf("id spelling %q", d.ID)
	}
	out := string(d.AppendJSON(nil))
	if !strings.Contains(out, `"@id":"Users/1-A"`) || !strings.Contains(out, `"@change-vector":"`+wantCV+`"`) {
		t.Fatalf("json %s", out)
	}
	// Update keeps the first spelling and moves the etag.
	info, err = put(t, db, "USERS/1-A", `{"name":"Jane","@metadata":{"@collection":"users"}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != "Users/1-A" || info.Etag != 2 || info.Collection != "Users" {
		t.Fatalf("update info %+v", info)
	}
	var deleted bool
	err = db.Write(ctx, func(tx *storage.Tx) error {
		_, deleted, err = tx.Delete("users/1-a", nil)
		return err
	})
	if err != nil || !deleted {
		t.Fatalf("delete: %v %v", deleted, err)
	}
	if d, _ := db.Get(ctx, "users/1-A"); d != nil {
		t.Fatal("document still there after delete")
	}
	s := db.Stats()
	if s.Documents != 0 || s.Tombstones != 1 || s.LastEtag != 3 {
		t.Fatalf("stats %+v", s)
	}
	// Re-creating removes the tombstone.
	if _, err := put(t, db, "users/1-A", `{"@metadata":{"@collection":"Users"}}`, nil); err != nil {
		t.Fatal(err)
	}
	if s := db.Stats(); s.Documents != 1 || s.Tombstones != 0 {
		t.Fatalf("stats after re-create %+v", s)
	}
}

func TestOptimisticConcurrency(t *testing.T) {
	db := open(t, "")
	info, err := put(t, db, "a/1", `{}`, strp(""))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		id       string
		expected *string
		wantErr  bool
	}{
		{"must be new but exists", "a/1", strp(""), true},
		{"wrong vector", "a/1", strp("A:999-xxx"), true},
		{"missing with vector", "a/2", strp(info.ChangeVector), true},
		{"right vector", "a/1", strp(info.ChangeVector), false},
		{"no check", "a/1", nil, false},
	}
	for _, c := range cases {
		_, err := put(t, db, c.id, `{}`, c.expected)
		if c.wantErr != (err != nil) {
			t.Fatalf("%s: err = %v", c.name, err)
		}
		if c.wantErr && !dberr.Is(err, dberr.Concurrency) {
			t.Fatalf("%s: kind %v", c.name, err)
		}
	}
	err = db.Write(context.Background(), func(tx *storage.Tx) error {
		_, _, err := tx.Delete("a/1", strp("A:1-nope"))
		return err
	})
	if !dberr.Is(err, dberr.Concurrency) {
		t.Fatalf("delete with wrong vector: %v", err)
	}
}

func TestIDRules(t *testing.T) {
	db := open(t, "")
	info, err := put(t, db, "companies/", `{}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != "companies/0000000000000000001-A" {
		t.Fatalf("server-side id %q", info.ID)
	}
	info, err = put(t, db, "  ", `{}`, nil)
	if err != nil || len(info.ID) != 36 {
		t.Fatalf("guid id %q %v", info.ID, err)
	}
	for _, bad := range []string{"companies|", strings.Repeat("x", storage.MaxIDBytes+1), "bad\xff"} {
		if _, err := put(t, db, bad, `{}`, nil); !dberr.Is(err, dberr.BadRequest) {
			t.Fatalf("id %q: err %v", bad, err)
		}
	}
	if _, err := put(t, db, strings.Repeat("é", storage.MaxIDBytes/2), `{}`, nil); err != nil {
		t.Fatalf("512-byte id: %v", err)
	}
}

func TestCollectionChangeRefused(t *testing.T) {
	db := open(t, "")
	if _, err := put(t, db, "x/1", `{"@metadata":{"@collection":"Users"}}`, nil); err != nil {
		t.Fatal(err)
	}
	_, err := put(t, db, "x/1", `{"@metadata":{"@collection":"Orders"}}`, nil)
	if !dberr.Is(err, dberr.InvalidOperation) {
		t.Fatalf("err %v", err)
	}
}

// A failing request rolls back its own changes only, even when it shares a
// merged transaction with others.
func TestFailedRequestIsAllOrNothing(t *testing.T) {
	db := open(t, "")
	err := db.Write(context.Background(), func(tx *storage.Tx) error {
		if _, err := tx.Put("a/1", doc(t, `{}`), nil); err != nil {
			return err
		}
		return errors.New("boom")
	})
	if err == nil {
		t.Fatal("expected error")
	}
	if d, _ := db.Get(context.Background(), "a/1"); d != nil {
		t.Fatal("partial write survived")
	}
	if s := db.Stats(); s.Documents != 0 || s.LastEtag != 0 {
		t.Fatalf("state leaked: %+v", s)
	}
	if _, err := put(t, db, "a/2", `{}`, nil); err != nil {
		t.Fatal(err)
	}
	if db.LastEtag() != 1 {
		t.Fatalf("etag after rollback %d", db.LastEtag())
	}
}

func TestPanicInWriteIsAnError(t *testing.T) {
	db := open(t, "")
	err := db.Write(context.Background(), func(tx *storage.Tx) error { panic("kaboom") })
	if err == nil || !strings.Contains(err.Error(), "kaboom") {
		t.Fatalf("err %v", err)
	}
	if _, err := put(t, db, "a/1", `{}`, nil); err != nil {
		t.Fatalf("writer dead after panic: %v", err)
	}
}

// Many concurrent writers: every write commits, etags are unique and dense,
// and failures in some requests don't disturb the others merged with them.
func TestConcurrentWritesMerge(t *testing.T) {
	db := open(t, "")
	const writers, each = 16, 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	etags := map[int64]bool{}
	errs := 0
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				var info storage.Info
				err := db.Write(context.Background(), func(tx *storage.Tx) error {
					var err error
					info, err = tx.Put(fmt.Sprintf("w%d/%d", w, i), doc(t, `{"@metadata":{"@collection":"W"}}`), nil)
					if err == nil && i%10 == 9 {
						return errors.New("planned failure")
					}
					return err
				})
				mu.Lock()
				if err != nil {
					errs++
				} else {
					if etags[info.Etag] {
						t.Errorf("duplicate etag %d", info.Etag)
					}
					etags[info.Etag] = true
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	want := writers * each * 9 / 10
	if len(etags) != want || errs != writers*each/10 {
		t.Fatalf("committed %d (want %d), failed %d", len(etags), want, errs)
	}
	s := db.Stats()
	if s.Documents != int64(want) || s.LastEtag != int64(want) {
		t.Fatalf("stats %+v", s)
	}
}

func TestReopenKeepsState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.sqlite")
	db, err := storage.Open(path, storage.Options{Name: "keep", NodeTag: "B"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := put(t, db, fmt.Sprintf("o/%d", i), `{"@metadata":{"@collection":"Orders"}}`, nil); err != nil {
			t.Fatal(err)
		}
	}
	err = db.Write(context.Background(), func(tx *storage.Tx) error {
		_, _, err := tx.Delete("o/0", nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	before := db.Stats()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2, err := storage.Open(path, storage.Options{NodeTag: "B"})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	after := db2.Stats()
	if after.DatabaseID != before.DatabaseID || after.LastEtag != 6 || after.ChangeVector != before.ChangeVector ||
		after.Documents != 4 || after.Tombstones != 1 || after.Name != "keep" {
		t.Fatalf("before %+v\nafter %+v", before, after)
	}
	v, err := changevector.Parse(after.ChangeVector)
	if err != nil || v.Get(after.DatabaseID) != 6 || v[0].Tag != "B" {
		t.Fatalf("vector %q %v", after.ChangeVector, err)
	}
	info, err := put(t, db2, "o/9", `{"@metadata":{"@collection":"Orders"}}`, nil)
	if err != nil || info.Etag != 7 {
		t.Fatalf("etag after reopen %d %v", info.Etag, err)
	}
}

func TestStartsWithPaging(t *testing.T) {
	db := open(t, "")
	for i := 0; i < 30; i++ {
		if _, err := put(t, db, fmt.Sprintf("occ/%02d", i), `{}`, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := put(t, db, "occz/1", `{}`, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := put(t, db, "oc/1", `{}`, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	page, err := db.StartsWith(ctx, "OCC/", 25, 25)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 5 || page[0].ID != "occ/25" || page[4].ID != "occ/29" {
		t.Fatalf("page %d", len(page))
	}
	many, err := db.GetMany(ctx, []string{"occ/01", "nope", "OCC/02"})
	if err != nil || many[0] == nil || many[1] != nil || many[2] == nil {
		t.Fatalf("GetMany %v %v", many, err)
	}
}

func TestCloseRejectsWrites(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "db.sqlite"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	err = db.Write(context.Background(), func(tx *storage.Tx) error { return nil })
	if !dberr.Is(err, dberr.Unavailable) {
		t.Fatalf("err %v", err)
	}
}

// SubmitAlone's request is never merged with others: the requests queued
// before and after it commit in transactions of their own, and its failure
// (with no savepoint) rolls back only what it did.
func TestSubmitAloneRunsAlone(t *testing.T) {
	m := metrics.New()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db.sqlite"), storage.Options{Name: "alone", Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	release := make(chan struct{})
	started := make(chan struct{})
	blocker := db.Submit(ctx, func(tx *storage.Tx) error {
		close(started)
		<-release
		return nil
	})
	<-started
	putFn := func(id string, fail bool) func(*storage.Tx) error {
		return func(tx *storage.Tx) error {
			if _, err := tx.Put(id, doc(t, `{"@metadata":{"@collection":"A"}}`), nil); err != nil {
				return err
			}
			if fail {
				return errors.New("planned failure")
			}
			return nil
		}
	}
	before := []<-chan error{db.Submit(ctx, putFn("a/1", false)), db.Submit(ctx, putFn("a/2", false))}
	alone := db.SubmitAlone(ctx, putFn("a/3", true))
	after := []<-chan error{db.Submit(ctx, putFn("a/4", false)), db.Submit(ctx, putFn("a/5", false))}
	close(release)
	if err := <-blocker; err != nil {
		t.Fatal(err)
	}
	for _, c := range append(before, after...) {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-alone; err == nil || !strings.Contains(err.Error(), "planned failure") {
		t.Fatalf("alone: %v", err)
	}
	if d, _ := db.Get(ctx, "a/3"); d != nil {
		t.Fatal("the failed request's put survived")
	}
	if s := db.Stats(); s.Documents != 4 || s.LastEtag != 4 {
		t.Fatalf("stats %+v", s)
	}
	// blocker, [a/1 a/2], [a/4 a/5]: three commits; the alone request one
	// rollback. Merged with its neighbours, it would have left two commits.
	if c := testutil.ToFloat64(m.Transactions.WithLabelValues("committed")); c != 3 {
		t.Fatalf("%v committed transactions, want 3", c)
	}
	if r := testutil.ToFloat64(m.Transactions.WithLabelValues("rolled_back")); r != 1 {
		t.Fatalf("%v rolled back transactions, want 1", r)
	}
}
