package client

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/testserver"
)

// Integration tests: every test here talks to real Rookery nodes started
// in-process by internal/testserver.

var dbSeq atomic.Int64

// requestLog counts the requests a store makes, by method and path.
type requestLog struct {
	mu     sync.Mutex
	events []RequestEvent
}

func (l *requestLog) record(e RequestEvent) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

// count returns how many requests matched method and contained pathPart.
func (l *requestLog) count(method, pathPart string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if (method == "" || e.Method == method) && strings.Contains(e.URL, pathPart) {
			n++
		}
	}
	return n
}

func (l *requestLog) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// newDatabase creates a fresh database on the node(s) and returns its name.
func newDatabase(t testing.TB, urls ...string) string {
	t.Helper()
	name := fmt.Sprintf("db%d_%d", time.Now().UnixNano()%1e6, dbSeq.Add(1))
	for _, u := range urls {
		admin := NewDocumentStore([]string{u}, name)
		if err := admin.CreateDatabase(context.Background(), name); err != nil {
			t.Fatalf("create database %s on %s: %v", name, u, err)
		}
		admin.Close()
	}
	return name
}

// newStore returns a store on urls for a new database created on createOn,
// logging its requests.
func newStore(t testing.TB, urls []string, createOn ...string) (*DocumentStore, *requestLog) {
	t.Helper()
	if len(createOn) == 0 {
		createOn = urls
	}
	db := newDatabase(t, createOn...)
	log := &requestLog{}
	conv := DefaultConventions()
	conv.OnRequest = log.record
	store := NewDocumentStoreWithConventions(urls, db, conv)
	t.Cleanup(func() { store.Close() })
	return store, log
}

type User struct {
	ID    string
	Name  string
	Age   int
	Email string `json:"email,omitempty"`
}

type Order struct {
	ID      string
	Company string
	Total   float64
	Lines   []OrderLine
}

type Person struct {
	ID   string
	Name string
}

type note struct { // no id field: GUID ids from the server
	Text string
}

func TestIntegrationStoreLoadDelete(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})

	s := store.OpenSession()
	u := &User{Name: "John", Age: 42}
	if err := s.Store(u); err != nil {
		t.Fatal(err)
	}
	if u.ID != "users/1-A" {
		t.Fatalf("id after Store = %q, want users/1-A", u.ID)
	}
	o := &Order{Company: "companies/1", Total: 99.5, Lines: []OrderLine{{ID: "l1"}}}
	if err := s.Store(o); err != nil {
		t.Fatal(err)
	}
	if o.ID != "orders/1-A" {
		t.Fatalf("order id = %q", o.ID)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if cv, _ := s.GetChangeVectorFor(u); cv == "" {
		t.Error("no change vector after save")
	}

	s2 := store.OpenSession()
	var got *User
	found, err := s2.Load("users/1-A", &got)
	if err != nil || !found {
		t.Fatalf("load: %v %v", found, err)
	}
	if got.ID != "users/1-A" || got.Name != "John" || got.Age != 42 {
		t.Errorf("loaded %+v", got)
	}
	md, _ := s2.GetMetadataFor(got)
	if md["@collection"] != "Users" || md[GoTypeMetadataKey] != "client.User" {
		t.Errorf("metadata %v", md)
	}
	if cv, _ := s2.GetChangeVectorFor(got); cv == "" {
		t.Error("empty change vector")
	}
	// Same session, same id: same pointer, no request.
	before := s2.NumberOfRequests()
	again, err := Load[User](s2, "USERS/1-a")
	if err != nil || again != got || s2.NumberOfRequests() != before {
		t.Errorf("second load: %p vs %p, %v, requests %d→%d", again, got, err, before, s2.NumberOfRequests())
	}
	// Load into a struct value.
	var ov Order
	if found, err := s2.Load("orders/1-A", &ov); !found || err != nil || ov.Total != 99.5 || ov.ID != "orders/1-A" || len(ov.Lines) != 1 {
		t.Errorf("load order: %v %v %+v", found, err, ov)
	}
	// Missing document.
	var missing *User
	if found, err := s2.Load("users/404", &missing); found || err != nil || missing != nil {
		t.Errorf("missing: %v %v %v", found, err, missing)
	}
	// Several ids, one missing.
	s3 := store.OpenSession()
	many, err := LoadMany[User](s3, "users/1-A", "users/999-A")
	if err != nil {
		t.Fatal(err)
	}
	if len(many) != 2 || many["users/1-A"] == nil || many["users/1-A"].Name != "John" || many["users/999-A"] != nil {
		t.Errorf("LoadMany: %v", many)
	}
	if s3.NumberOfRequests() != 1 {
		t.Errorf("LoadMany made %d requests", s3.NumberOfRequests())
	}
	// Exists.
	if ok, err := s3.Exists("orders/1-A"); !ok || err != nil {
		t.Errorf("exists: %v %v", ok, err)
	}
	if ok, err := s3.Exists("orders/2-A"); ok || err != nil {
		t.Errorf("exists missing: %v %v", ok, err)
	}
	// Load as a map.
	var m map[string]any
	if found, err := s3.Load("orders/1-A", &m); !found || err != nil || m["Company"] != "companies/1" {
		t.Errorf("map load: %v %v %v", found, err, m)
	}
	if _, has := m["@metadata"]; has {
		t.Error("@metadata left in the loaded map")
	}

	// Delete by id and by entity.
	s4 := store.OpenSession()
	if err := s4.Delete("users/1-A"); err != nil {
		t.Fatal(err)
	}
	var ord *Order
	if _, err := s4.Load("orders/1-A", &ord); err != nil {
		t.Fatal(err)
	}
	if err := s4.DeleteEntity(ord); err != nil {
		t.Fatal(err)
	}
	if err := s4.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	s5 := store.OpenSession()
	for _, id := range []string{"users/1-A", "orders/1-A"} {
		var x map[string]any
		if found, err := s5.Load(id, &x); found || err != nil {
			t.Errorf("%s after delete: %v %v", id, found, err)
		}
	}
}

func TestIntegrationSaveChangesIsOneRequest(t *testing.T) {
	n := testserver.Start(t)
	store, log := newStore(t, []string{n.URL})

	s := store.OpenSession()
	first := &User{Name: "u0"}
	if err := s.Store(first); err != nil {
		t.Fatal(err)
	}
	// The first Store fetched the topology and a range; the next 20 need
	// no request at all, and their ids are known at once.
	afterFirst := log.total()
	var users []*User
	for i := 1; i <= 20; i++ {
		u := &User{Name: fmt.Sprint("u", i)}
		if err := s.Store(u); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("users/%d-A", i+1); u.ID != want {
			t.Fatalf("id %q, want %q", u.ID, want)
		}
		users = append(users, u)
	}
	if log.total() != afterFirst {
		t.Fatalf("Store made %d requests", log.total()-afterFirst)
	}
	if log.count("GET", "/hilo/next") != 1 {
		t.Errorf("hilo/next requests: %d", log.count("GET", "/hilo/next"))
	}
	before := log.total()
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if got := log.total() - before; got != 1 || log.count("POST", "/bulk_docs") != 1 {
		t.Fatalf("SaveChanges of 21 new documents made %d requests (%d bulk_docs)", got, log.count("POST", "/bulk_docs"))
	}
	// Nothing changed: no request.
	before = log.total()
	if err := s.SaveChanges(); err != nil || log.total() != before {
		t.Fatalf("empty SaveChanges: %v, %d requests", err, log.total()-before)
	}
	// A unit of work mixing an update, a delete, a new document and an
	// unchanged tracked one: one request, one transaction.
	s2 := store.OpenSession()
	var a, b, c *User
	if _, err := s2.Load(users[0].ID, &a); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Load(users[1].ID, &b); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Load(users[2].ID, &c); err != nil {
		t.Fatal(err)
	}
	if s2.HasChanges() {
		t.Error("fresh loads reported as changes")
	}
	a.Age = 7
	if !s2.HasChanged(a) || s2.HasChanged(c) {
		t.Error("HasChanged wrong")
	}
	if err := s2.DeleteEntity(b); err != nil {
		t.Fatal(err)
	}
	if err := s2.StoreWithID(&User{Name: "explicit"}, "users/explicit"); err != nil {
		t.Fatal(err)
	}
	bulkBefore := log.count("POST", "/bulk_docs")
	before = log.total()
	if err := s2.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if log.total()-before != 1 || log.count("POST", "/bulk_docs")-bulkBefore != 1 {
		t.Fatalf("mixed SaveChanges made %d requests", log.total()-before)
	}
	s3 := store.OpenSession()
	got, _ := LoadMany[User](s3, a.ID, b.ID, c.ID, "users/explicit")
	if got[a.ID] == nil || got[a.ID].Age != 7 || got[b.ID] != nil || got[c.ID] == nil || got["users/explicit"] == nil || got["users/explicit"].Name != "explicit" {
		t.Errorf("after mixed save: a=%v b=%v c=%v explicit=%v", got[a.ID], got[b.ID], got[c.ID], got["users/explicit"])
	}
}

func TestIntegrationCloseReturnsHiLoRange(t *testing.T) {
	n := testserver.Start(t)
	db := newDatabase(t, n.URL)

	st1 := NewDocumentStore([]string{n.URL}, db)
	s := st1.OpenSession()
	u := &User{Name: "first"}
	if err := s.Store(u); err != nil {
		t.Fatal(err)
	}
	if u.ID != "users/1-A" {
		t.Fatalf("first id %q", u.ID)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if err := st1.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := st1.OpenSession().Store(&User{}); !errors.Is(err, ErrStoreClosed) {
		t.Errorf("store after close: %v", err)
	}

	st2 := NewDocumentStore([]string{n.URL}, db)
	defer st2.Close()
	s2 := st2.OpenSession()
	var hilo map[string]any
	if found, err := s2.Load("Raven/Hilo/users", &hilo); !found || err != nil {
		t.Fatalf("hilo doc: %v %v", found, err)
	}
	if hilo["Max"] != float64(1) {
		t.Errorf("Raven/Hilo/users Max = %v after return, want 1", hilo["Max"])
	}
	v := &User{Name: "second"}
	if err := s2.Store(v); err != nil {
		t.Fatal(err)
	}
	if v.ID != "users/2-A" {
		t.Errorf("next store's first id = %q, want users/2-A", v.ID)
	}
}

func TestIntegrationOptimisticConcurrency(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	s := store.OpenSession()
	if err := s.StoreWithID(&Person{Name: "Ann"}, "people/ann"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}

	s1 := store.OpenSessionWithOptions(SessionOptions{UseOptimisticConcurrency: true})
	s2 := store.OpenSessionWithOptions(SessionOptions{UseOptimisticConcurrency: true})
	p1, _ := Load[Person](s1, "people/ann")
	p2, _ := Load[Person](s2, "people/ann")
	if p1 == nil || p2 == nil {
		t.Fatal("load failed")
	}
	p1.Name = "Ann 1"
	p2.Name = "Ann 2"
	if err := s1.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	err := s2.SaveChanges()
	var ce *ConcurrencyError
	if !errors.As(err, &ce) {
		t.Fatalf("second save: %v (%T), want *ConcurrencyError", err, err)
	}
	if ce.StatusCode != 409 || !strings.Contains(ce.Type, "ConcurrencyException") || ce.Message == "" {
		t.Errorf("concurrency error fields: %+v", ce.ServerError)
	}
	// The first write won.
	p, _ := Load[Person](store.OpenSession(), "people/ann")
	if p.Name != "Ann 1" {
		t.Errorf("name %q", p.Name)
	}
	// After reloading, the retry succeeds.
	s3 := store.OpenSessionWithOptions(SessionOptions{UseOptimisticConcurrency: true})
	p3, _ := Load[Person](s3, "people/ann")
	p3.Name = "Ann 3"
	if err := s3.SaveChanges(); err != nil {
		t.Fatalf("retry: %v", err)
	}
	// A new entity under an existing id must not overwrite it.
	s4 := store.OpenSessionWithOptions(SessionOptions{UseOptimisticConcurrency: true})
	if err := s4.StoreWithID(&Person{Name: "impostor"}, "people/ann"); err != nil {
		t.Fatal(err)
	}
	if err := s4.SaveChanges(); !errors.As(err, &ce) {
		t.Errorf("new doc over existing id: %v", err)
	}
	// An explicit wrong change vector.
	s5 := store.OpenSession()
	if err := s5.StoreWithChangeVector(&Person{Name: "x"}, "people/ann", "A:999-bogusbogusbogusbogus"); err != nil {
		t.Fatal(err)
	}
	if err := s5.SaveChanges(); !errors.As(err, &ce) {
		t.Errorf("bogus change vector: %v", err)
	}
	// Without optimistic concurrency the last write wins.
	s6 := store.OpenSession()
	s7 := store.OpenSession()
	q6, _ := Load[Person](s6, "people/ann")
	q7, _ := Load[Person](s7, "people/ann")
	q6.Name, q7.Name = "six", "seven"
	if err := s6.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if err := s7.SaveChanges(); err != nil {
		t.Fatalf("last write wins: %v", err)
	}
	// Optimistic delete with a stale change vector fails.
	s8 := store.OpenSessionWithOptions(SessionOptions{UseOptimisticConcurrency: true})
	q8, _ := Load[Person](s8, "people/ann")
	s9 := store.OpenSession()
	q9, _ := Load[Person](s9, "people/ann")
	q9.Name = "nine"
	if err := s9.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if err := s8.DeleteEntity(q8); err != nil {
		t.Fatal(err)
	}
	if err := s8.SaveChanges(); !errors.As(err, &ce) {
		t.Errorf("stale delete: %v", err)
	}
}

var serverEtagID = regexp.MustCompile(`^companies/\d{19}-A$`)
var guidID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func TestIntegrationServerSideIDs(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()

	s := store.OpenSession()
	c1 := &Company{Name: "Acme"}
	c2 := &Company{Name: "Globex"}
	if err := s.StoreWithID(c1, "companies|"); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreWithID(c2, "companies|"); err != nil {
		t.Fatal(err)
	}
	c3 := &Company{Name: "Initech"}
	if err := s.StoreWithID(c3, "companies/"); err != nil {
		t.Fatal(err)
	}
	nt := &note{Text: "no id field"}
	if err := s.Store(nt); err != nil {
		t.Fatal(err)
	}
	lit := map[string]any{"name": "x", "@metadata": map[string]any{"@collection": "Things"}}
	if err := s.Store(lit); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if c1.ID != "companies/1" || c2.ID != "companies/2" {
		t.Errorf("identity ids %q %q, want companies/1 and companies/2", c1.ID, c2.ID)
	}
	if !serverEtagID.MatchString(c3.ID) {
		t.Errorf("server etag id %q", c3.ID)
	}
	if id := s.GetDocumentID(nt); !guidID.MatchString(id) {
		t.Errorf("entity without id field got %q, want a GUID", id)
	}
	litID := s.GetDocumentID(lit)
	if !guidID.MatchString(litID) {
		t.Errorf("map entity got %q, want a GUID", litID)
	}
	// The saved entities are tracked under their final ids.
	if !s.IsLoaded("companies/1") || !s.IsLoaded(c3.ID) {
		t.Error("server-assigned ids not tracked")
	}
	c1.Name = "Acme Corp"
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}

	s2 := store.OpenSession()
	got, _ := Load[Company](s2, "companies/1")
	if got == nil || got.Name != "Acme Corp" {
		t.Errorf("companies/1 = %+v", got)
	}
	var thing map[string]any
	if found, _ := s2.Load(litID, &thing); !found || thing["name"] != "x" {
		t.Errorf("map doc %v", thing)
	}
	md, _ := s2.GetMetadataFor(thing)
	if md["@collection"] != "Things" {
		t.Errorf("map doc metadata %v", md)
	}

	if v, err := store.NextIdentity(ctx, "companies"); err != nil || v != 3 {
		t.Errorf("NextIdentity = %d, %v; want 3", v, err)
	}
	if v, err := store.SeedIdentity(ctx, "companies", 100, false); err != nil || v != 100 {
		t.Errorf("SeedIdentity(100) = %d, %v", v, err)
	}
	if v, err := store.SeedIdentity(ctx, "companies", 50, false); err != nil || v != 100 {
		t.Errorf("SeedIdentity(50) without force = %d, %v; want 100", v, err)
	}
	if v, err := store.SeedIdentity(ctx, "companies", 50, true); err != nil || v != 50 {
		t.Errorf("SeedIdentity(50, force) = %d, %v", v, err)
	}
	ids, err := store.GetIdentities(ctx)
	if err != nil || ids["companies|"] != 50 {
		t.Errorf("GetIdentities = %v, %v", ids, err)
	}
	s3 := store.OpenSession()
	c4 := &Company{Name: "after seed"}
	_ = s3.StoreWithID(c4, "companies|")
	if err := s3.SaveChanges(); err != nil || c4.ID != "companies/51" {
		t.Errorf("identity after seed: %q %v", c4.ID, err)
	}

	stats, err := store.GetStatistics(ctx)
	if err != nil || stats.CountOfDocuments != 6 { // 4 companies, 1 note, 1 thing
		t.Errorf("stats: %+v %v", stats, err)
	}
	cs, err := store.GetCollectionStatistics(ctx)
	if err != nil || cs.Collections["Companies"] != 4 || cs.Collections["Things"] != 1 || cs.CountOfDocuments != stats.CountOfDocuments {
		t.Errorf("collection stats: %+v %v", cs, err)
	}
}

func TestIntegrationHTTPCache(t *testing.T) {
	n := testserver.Start(t)
	store, log := newStore(t, []string{n.URL})
	s := store.OpenSession()
	_ = s.StoreWithID(&User{Name: "cached"}, "users/c")
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	ex := store.RequestExecutor()
	u1, _ := Load[User](store.OpenSession(), "users/c")
	hits := ex.NotModifiedCount()
	u2, _ := Load[User](store.OpenSession(), "users/c")
	if ex.NotModifiedCount() != hits+1 {
		t.Fatalf("repeated load: %d 304s, want 1", ex.NotModifiedCount()-hits)
	}
	if u2 == nil || *u2 != *u1 {
		t.Errorf("cached load = %+v, want %+v", u2, u1)
	}
	// A changed document is not served stale.
	s2 := store.OpenSession()
	u3, _ := Load[User](s2, "users/c")
	u3.Age = 5
	if err := s2.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	hits = ex.NotModifiedCount()
	u4, _ := Load[User](store.OpenSession(), "users/c")
	if u4.Age != 5 || ex.NotModifiedCount() != hits {
		t.Errorf("after update: age %d, 304s %d", u4.Age, ex.NotModifiedCount()-hits)
	}
	// A missing document is remembered as 404 and revalidated.
	for range 2 {
		if u, err := Load[User](store.OpenSession(), "users/none"); u != nil || err != nil {
			t.Fatal(u, err)
		}
	}
	// NoCaching bypasses the cache.
	hits = ex.NotModifiedCount()
	nc := store.OpenSessionWithOptions(SessionOptions{NoCaching: true})
	if u, _ := Load[User](nc, "users/c"); u == nil || ex.NotModifiedCount() != hits {
		t.Error("NoCaching session used the cache")
	}
	if entries, _ := ex.CacheStats(); entries < 2 {
		t.Errorf("cache entries %d", entries)
	}
	if log.count("GET", "/docs?") < 5 {
		t.Errorf("loads not logged: %d", log.count("GET", "/docs?"))
	}
}

func TestIntegrationFailoverDeadFirstURL(t *testing.T) {
	n := testserver.Start(t)
	dead := deadURL(t)
	store, _ := newStore(t, []string{dead, n.URL}, n.URL)
	s := store.OpenSession()
	u := &User{Name: "survivor"}
	if err := s.Store(u); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	got, err := Load[User](store.OpenSession(), u.ID)
	if err != nil || got == nil || got.Name != "survivor" {
		t.Fatalf("load via failover: %v %v", got, err)
	}
	top := store.RequestExecutor().Topology()
	if len(top.Nodes) != 2 || top.Nodes[0].URL != n.URL || top.Nodes[0].ClusterTag != "A" || top.Etag <= 0 {
		t.Errorf("topology %+v", top)
	}
}

func TestIntegrationFailoverNodeStopped(t *testing.T) {
	a := testserver.Start(t, testserver.Options{NodeTag: "A"})
	b := testserver.Start(t, testserver.Options{NodeTag: "B"})
	store, _ := newStore(t, []string{a.URL, b.URL})
	s := store.OpenSession()
	_ = s.StoreWithID(&User{Name: "on A"}, "users/a")
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Server.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	ex := store.RequestExecutor()
	s2 := store.OpenSession()
	_ = s2.StoreWithID(&User{Name: "on B"}, "users/b")
	if err := s2.SaveChanges(); err != nil {
		t.Fatalf("save after node A stopped: %v", err)
	}
	if ex.FailoverCount() == 0 {
		t.Error("no failover counted")
	}
	direct := NewDocumentStore([]string{b.URL}, store.Database())
	defer direct.Close()
	if u, err := Load[User](direct.OpenSession(), "users/b"); err != nil || u == nil || u.Name != "on B" {
		t.Errorf("document not on node B: %v %v", u, err)
	}
	// Later requests go straight to B.
	before := ex.RequestCount()
	if u, err := Load[User](store.OpenSession(), "users/b"); err != nil || u == nil {
		t.Fatal(u, err)
	}
	if ex.RequestCount()-before != 1 {
		t.Errorf("load after failover took %d requests, want 1", ex.RequestCount()-before)
	}
}

func TestIntegrationDatabaseDoesNotExist(t *testing.T) {
	n := testserver.Start(t)
	for _, urls := range [][]string{{n.URL}, {deadURL(t), n.URL}} {
		store := NewDocumentStore(urls, "nosuchdb")
		_, err := Load[User](store.OpenSession(), "users/1")
		var dne *DatabaseDoesNotExistError
		if !errors.As(err, &dne) || dne.Database != "nosuchdb" {
			t.Errorf("%v: error %v (%T), want *DatabaseDoesNotExistError", urls, err, err)
		}
		if err := store.OpenSession().Store(&User{}); !errors.As(err, &dne) {
			t.Errorf("HiLo on a missing database: %v", err)
		}
		store.Close()
	}
	// Creating the database afterwards makes the same store work.
	store := NewDocumentStore([]string{n.URL}, "latecomer")
	defer store.Close()
	if _, err := Load[User](store.OpenSession(), "x"); err == nil {
		t.Fatal("expected an error before the database exists")
	}
	if err := store.CreateDatabase(context.Background(), "latecomer"); err != nil {
		t.Fatal(err)
	}
	if u, err := Load[User](store.OpenSession(), "x"); err != nil || u != nil {
		t.Errorf("after create: %v %v", u, err)
	}
	if names, err := store.GetDatabaseNames(context.Background(), 0, 100); err != nil || !slices.Contains(names, "latecomer") {
		t.Errorf("database names %v %v", names, err)
	}
	if status, body, err := store.RequestExecutor().Do(context.Background(), "GET", "/stats", nil); err != nil || status != 200 || !strings.Contains(string(body), `"CountOfDocuments":0`) {
		t.Errorf("raw Do: %d %s %v", status, body, err)
	}
	if _, _, err := store.RequestExecutor().Do(context.Background(), "GET", "/no-such-route", nil); err == nil {
		t.Error("raw Do of an unknown route succeeded")
	}
	// Creating it twice is a concurrency error.
	var ce *ConcurrencyError
	if err := store.CreateDatabase(context.Background(), "latecomer"); !errors.As(err, &ce) {
		t.Errorf("second create: %v", err)
	}
	if err := store.DeleteDatabase(context.Background(), "latecomer"); err != nil {
		t.Fatal(err)
	}
	fresh := NewDocumentStore([]string{n.URL}, "latecomer")
	defer fresh.Close()
	var dne *DatabaseDoesNotExistError
	if _, err := Load[User](fresh.OpenSession(), "x"); !errors.As(err, &dne) {
		t.Errorf("after delete: %v", err)
	}
}

func TestIntegrationServerErrorEnvelope(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	s := store.OpenSession()
	_ = s.StoreWithID(&User{Name: "u"}, "things/1")
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	// Changing the collection of an existing document is refused.
	s2 := store.OpenSession()
	_ = s2.StoreWithID(&Person{Name: "p"}, "things/1")
	err := s2.SaveChanges()
	var se *ServerError
	if !errors.As(err, &se) || se.Type == "" || se.Message == "" || se.StatusCode < 400 {
		t.Fatalf("collection change: %v (%T)", err, err)
	}
	var ce *ConcurrencyError
	if errors.As(err, &ce) {
		t.Errorf("collection change reported as a concurrency error: %v", err)
	}
}

func TestIntegrationHiLoRequestsPerMillionIDs(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	ctx := context.Background()
	var last string
	var err error
	for range 1_000_000 {
		if last, err = store.GenerateID(ctx, "users"); err != nil {
			t.Fatal(err)
		}
	}
	if last != "users/1000000-A" {
		t.Errorf("last id %q", last)
	}
	if r := store.HiLoRequests(); r > 16 {
		t.Errorf("%d hilo/next requests for 1M ids, want ≤ 16", r)
	} else {
		t.Logf("%d hilo/next requests for 1M ids", r)
	}
}

func TestIntegrationConcurrentSessions(t *testing.T) {
	n := testserver.Start(t)
	store, log := newStore(t, []string{n.URL})
	const workers, perWorker = 16, 50
	var wg sync.WaitGroup
	ids := make(chan string, workers*perWorker)
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := store.OpenSession()
			for i := range perWorker {
				o := &Order{Company: fmt.Sprint("w", w), Total: float64(i)}
				if err := s.Store(o); err != nil {
					errs <- err
					return
				}
				ids <- o.ID
			}
			if err := s.SaveChanges(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(ids)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
	}
	cs, err := store.GetCollectionStatistics(context.Background())
	if err != nil || cs.Collections["Orders"] != workers*perWorker {
		t.Errorf("orders stored: %+v %v", cs, err)
	}
	if log.count("POST", "/bulk_docs") != workers {
		t.Errorf("%d bulk_docs for %d sessions", log.count("POST", "/bulk_docs"), workers)
	}
	if got := log.count("GET", "/topology"); got != 1 {
		t.Errorf("%d topology fetches, want 1", got)
	}
}

func TestIntegrationMetadataChangesAreSaved(t *testing.T) {
	n := testserver.Start(t)
	store, log := newStore(t, []string{n.URL})
	s := store.OpenSession()
	u := &User{Name: "meta"}
	_ = s.Store(u)
	md, _ := s.GetMetadataFor(u)
	md["Owner"] = "ops"
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	s2 := store.OpenSession()
	got, _ := Load[User](s2, u.ID)
	md2, _ := s2.GetMetadataFor(got)
	if md2["Owner"] != "ops" || md2["@collection"] != "Users" {
		t.Fatalf("metadata after load: %v", md2)
	}
	md2["Owner"] = "dev"
	if !s2.HasChanged(got) {
		t.Error("metadata change not detected")
	}
	before := log.count("POST", "/bulk_docs")
	if err := s2.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if log.count("POST", "/bulk_docs") != before+1 {
		t.Error("metadata change not saved")
	}
	// Saving again sends nothing: the saved state is the new snapshot.
	if s2.HasChanges() {
		t.Error("changes reported right after SaveChanges")
	}
	got3, _ := Load[User](store.OpenSession(), u.ID)
	s3 := store.OpenSession()
	got3, _ = Load[User](s3, u.ID)
	md3, _ := s3.GetMetadataFor(got3)
	if md3["Owner"] != "dev" {
		t.Errorf("metadata %v", md3)
	}
}

func TestIntegrationIncludes(t *testing.T) {
	n := testserver.Start(t)
	store, _ := newStore(t, []string{n.URL})
	s := store.OpenSession()
	c := &Company{Name: "Acme"}
	_ = s.StoreWithID(c, "companies/acme")
	o := &Order{Company: "companies/acme", Total: 3}
	_ = s.Store(o)
	o2 := &Order{Company: "companies/none", Total: 4}
	_ = s.Store(o2)
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	s2 := store.OpenSession()
	var order *Order
	if found, err := s2.Include("Company").Load(o.ID, &order); !found || err != nil {
		t.Fatal(found, err)
	}
	if s2.NumberOfRequests() != 1 {
		t.Fatalf("%d requests", s2.NumberOfRequests())
	}
	comp, err := Load[Company](s2, order.Company)
	if err != nil || comp == nil || comp.Name != "Acme" || comp.ID != "companies/acme" {
		t.Errorf("included company: %+v %v", comp, err)
	}
	if s2.NumberOfRequests() != 1 {
		t.Errorf("loading an included document made a request (%d)", s2.NumberOfRequests())
	}
	// The included document is tracked once loaded.
	comp.Name = "Acme 2"
	if err := s2.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if c2, _ := Load[Company](store.OpenSession(), "companies/acme"); c2.Name != "Acme 2" {
		t.Errorf("included entity not tracked: %q", c2.Name)
	}
	// LoadMulti with includes.
	s3 := store.OpenSession()
	orders := map[string]*Order{}
	if err := s3.Include("Company").LoadMulti([]string{o.ID, o2.ID}, &orders); err != nil {
		t.Fatal(err)
	}
	if len(orders) != 2 || orders[o2.ID].Total != 4 {
		t.Errorf("orders %v", orders)
	}
	if c, _ := Load[Company](s3, "companies/acme"); c == nil || s3.NumberOfRequests() != 1 {
		t.Errorf("include via LoadMulti: %v, %d requests", c, s3.NumberOfRequests())
	}
}

func TestIntegrationCustomSeparator(t *testing.T) {
	n := testserver.Start(t)
	db := newDatabase(t, n.URL)
	conv := DefaultConventions()
	conv.IdentityPartsSeparator = "-"
	store := NewDocumentStoreWithConventions([]string{n.URL}, db, conv)
	defer store.Close()
	s := store.OpenSession()
	u := &User{Name: "sep"}
	if err := s.Store(u); err != nil {
		t.Fatal(err)
	}
	if u.ID != "users-1-A" {
		t.Errorf("id with separator '-': %q", u.ID)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if got, _ := Load[User](store.OpenSession(), "users-1-A"); got == nil {
		t.Error("not saved under users-1-A")
	}
}

func TestIntegrationNoReachableNode(t *testing.T) {
	store := NewDocumentStore([]string{deadURL(t), deadURL(t)}, "db")
	defer store.Close()
	start := time.Now()
	_, err := Load[User](store.OpenSession(), "users/1")
	var anf *AllNodesFailedError
	if !errors.As(err, &anf) || len(anf.Errors) != 2 {
		t.Errorf("error %v (%T), want *AllNodesFailedError with 2 node errors", err, err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
	if err := store.OpenSession().Store(&User{}); err == nil {
		t.Error("HiLo with no server succeeded")
	}
	bad := NewDocumentStore([]string{"ftp://x"}, "db")
	if err := bad.OpenSession().Store(&User{}); err == nil || !strings.Contains(err.Error(), "invalid server URL") {
		t.Errorf("bad URL: %v", err)
	}
}

// A Store that could not take an id (the database does not exist) makes
// SaveChanges fail with that error instead of returning nil having saved
// nothing: the README's first Go example used to do exactly that.
func TestIntegrationSaveChangesReportsFailedStore(t *testing.T) {
	n := testserver.Start(t)
	store := NewDocumentStore([]string{n.URL}, "nosuchdb")
	defer store.Close()
	session := store.OpenSession()
	order := &Order{Total: 10}
	storeErr := session.Store(order)
	var missing *DatabaseDoesNotExistError
	if !errors.As(storeErr, &missing) {
		t.Fatalf("Store into a missing database: %v, want a *DatabaseDoesNotExistError", storeErr)
	}
	err := session.SaveChanges()
	if !errors.As(err, &missing) {
		t.Fatalf("SaveChanges after the failed Store: %v, want the *DatabaseDoesNotExistError", err)
	}
	// Reported once; the session is usable again and has nothing to save.
	if err := session.SaveChanges(); err != nil {
		t.Fatalf("second SaveChanges: %v", err)
	}
	// Once the database exists, the same session saves.
	if err := store.CreateDatabase(context.Background(), "nosuchdb"); err != nil {
		t.Fatal(err)
	}
	if err := session.Store(order); err != nil {
		t.Fatal(err)
	}
	if err := session.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if order.ID == "" {
		t.Fatal("no id after SaveChanges")
	}
}
