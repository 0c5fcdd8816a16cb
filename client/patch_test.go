package client

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/internal/testserver"
)

// Session.Patch and Increment go to the server as PATCH commands of the
// SaveChanges batch (one request), update the tracked entity, and are
// undone with the batch when another of its commands fails.
func TestIntegrationSessionPatch(t *testing.T) {
	n := testserver.Start(t)
	store, log := newStore(t, []string{n.URL})
	ctx := context.Background()

	s := store.OpenSession()
	u := &User{Name: "Ann", Age: 30}
	if err := s.Store(u); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}

	s2 := store.OpenSession()
	var got *User
	if _, err := s2.Load(u.ID, &got); err != nil {
		t.Fatal(err)
	}
	before := log.count("POST", "/bulk_docs")
	if err := s2.Patch(u.ID, "Name", "Anna"); err != nil {
		t.Fatal(err)
	}
	if err := s2.Increment(u.ID, "Age", 5); err != nil {
		t.Fatal(err)
	}
	if err := s2.Patch(u.ID, "Name; del('x')", 1); err == nil {
		t.Fatal("a path with code in it was accepted")
	}
	if err := s2.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if log.count("POST", "/bulk_docs")-before != 1 {
		t.Fatal("the patches were not one batch")
	}
	if got.Name != "Anna" || got.Age != 35 || got.ID != u.ID {
		t.Fatalf("tracked entity after the patch: %+v", got)
	}
	if s2.HasChanged(got) {
		t.Fatal("the patched entity counts as changed")
	}

	// A failing command undoes the patch.
	s3 := store.OpenSession()
	if err := s3.Increment(u.ID, "Age", 100); err != nil {
		t.Fatal(err)
	}
	if err := s3.StoreWithChangeVector(&User{Name: "x"}, "users/99", "A:1-AAAAAAAAAAAAAAAAAAAAAA"); err != nil {
		t.Fatal(err)
	}
	var ce *ConcurrencyError
	if err := s3.SaveChanges(); !errors.As(err, &ce) {
		t.Fatalf("want a concurrency error, got %v", err)
	}
	check, err := Load[User](store.OpenSession(), u.ID)
	if err != nil || check.Age != 35 {
		t.Fatalf("after the failed batch: %+v %v", check, err)
	}

	// DocumentStore.Patch and its statuses.
	res, err := store.Patch(ctx, u.ID, PatchRequest{Script: "this.Age += args.n; output('age', this.Age)", Values: map[string]any{"n": 1}}, &PatchOptions{Debug: true})
	if err != nil || res.Status != PatchStatusPatched || !strings.Contains(string(res.ModifiedDocument), `"Age":36`) || res.Debug == nil || len(res.Debug.Info) != 1 || res.Debug.Info[0] != "age 36" {
		t.Fatalf("patched: %+v %v", res, err)
	}
	if res, err = store.Patch(ctx, u.ID, PatchRequest{Script: "var a = this.Age"}, nil); err != nil || res.Status != PatchStatusNotModified {
		t.Fatalf("not modified: %+v %v", res, err)
	}
	if res, err = store.Patch(ctx, "users/404", PatchRequest{Script: "this.Age = 1"}, nil); err != nil || res.Status != PatchStatusDocumentDoesNotExist {
		t.Fatalf("missing: %+v %v", res, err)
	}
	res, err = store.Patch(ctx, "users/405", PatchRequest{Script: "this.Age = 1"}, &PatchOptions{PatchIfMissing: &PatchRequest{Script: "this.Name = 'new'; this['@metadata']['@collection'] = 'Users'"}})
	if err != nil || res.Status != PatchStatusCreated || res.Collection != "Users" {
		t.Fatalf("created: %+v %v", res, err)
	}
	if res, err = store.Patch(ctx, u.ID, PatchRequest{Script: "this.Age = 0"}, &PatchOptions{ChangeVector: "A:1-AAAAAAAAAAAAAAAAAAAAAA", SkipPatchIfChangeVectorMismatch: true}); err != nil || res.Status != PatchStatusNotModified {
		t.Fatalf("skipped: %+v %v", res, err)
	}
	if _, err = store.Patch(ctx, u.ID, PatchRequest{Script: "this.Age = 0"}, &PatchOptions{ChangeVector: "A:1-AAAAAAAAAAAAAAAAAAAAAA"}); !errors.As(err, &ce) {
		t.Fatalf("mismatch: %v", err)
	}

	// The user, users/405 and the HiLo document.
	st, err := store.GetDetailedStatistics(ctx)
	if err != nil || st.CountOfDocuments != 3 || st.DatabaseChangeVector == "" || st.CountOfIdentities != 0 {
		t.Fatalf("detailed statistics: %+v %v", st, err)
	}
}

// Lazy loads wait until a value is asked for, then go in one multi_get.
func TestIntegrationLazyLoads(t *testing.T) {
	n := testserver.Start(t)
	store, log := newStore(t, []string{n.URL})
	s := store.OpenSession()
	for _, name := range []string{"a", "b"} {
		if err := s.StoreWithID(&User{Name: name}, "users/"+name); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	s2 := store.OpenSession()
	var a, b, c *User
	la, _ := s2.LazyLoad("users/a", &a)
	lb, _ := s2.LazyLoad("users/b", &b)
	lc, _ := s2.LazyLoad("users/c", &c)
	before := log.total()
	if found, err := la.Value(); err != nil || !found || a.Name != "a" || a.ID != "users/a" {
		t.Fatalf("a: %v %v %+v", found, err, a)
	}
	if found, err := lb.Value(); err != nil || !found || b.Name != "b" {
		t.Fatalf("b: %v %v %+v", found, err, b)
	}
	if found, err := lc.Value(); err != nil || found || c != nil {
		t.Fatalf("c: %v %v %+v", found, err, c)
	}
	if got := log.total() - before; got != 1 || log.count("POST", "/multi_get") != 1 {
		t.Fatalf("%d requests for three lazy loads", got)
	}
	// Now tracked: no request.
	var again *User
	l, _ := s2.LazyLoad("users/a", &again)
	if found, err := l.Value(); err != nil || !found || again != a {
		t.Fatalf("tracked: %v %v", found, err)
	}
	if log.total()-before != 1 {
		t.Fatal("a tracked document was requested")
	}
}
