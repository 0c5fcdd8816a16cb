package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rookerydb/rookery/internal/testserver"
)

// recordingProxy sits in front of a real node: it forwards every request,
// records what the client sent, rewrites the node URL in topology answers to
// its own (so the client keeps talking through it), and can inject faults.
// It is not a fake server: every answer comes from the real node unless a
// fault is injected.
type recordingProxy struct {
	*httptest.Server
	target *url.URL

	mu   sync.Mutex
	seen []seenRequest

	// fail503 answers the next N requests (topology excluded) with 503.
	fail503 atomic.Int64
	// refreshOnce adds Refresh-Topology to the next answer.
	refreshOnce atomic.Bool
}

type seenRequest struct {
	Method string
	URL    string // path and query as sent
	Header http.Header
	Body   []byte
}

func newRecordingProxy(t *testing.T, targetURL string) *recordingProxy {
	t.Helper()
	u, _ := url.Parse(targetURL)
	p := &recordingProxy{target: u}
	rp := httputil.NewSingleHostReverseProxy(u)
	director := rp.Director
	rp.Director = func(r *http.Request) {
		director(r)
		r.Host = u.Host // the node answers to its own name (DNS-rebinding protection)
	}
	rp.ModifyResponse = func(resp *http.Response) error {
		if p.refreshOnce.CompareAndSwap(true, false) {
			resp.Header.Set("Refresh-Topology", "true")
		}
		if resp.Request.URL.Path == "/topology" && resp.StatusCode == 200 {
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			b = bytes.ReplaceAll(b, []byte(targetURL), []byte(p.URL))
			resp.Body = io.NopCloser(bytes.NewReader(b))
			resp.ContentLength = int64(len(b))
			resp.Header.Del("Content-Length")
		}
		return nil
	}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.mu.Lock()
		p.seen = append(p.seen, seenRequest{Method: r.Method, URL: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body})
		p.mu.Unlock()
		if r.URL.Path != "/topology" && p.fail503.Add(-1) >= 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"Type":"Raven.Client.Exceptions.Database.DatabaseLoadTimeoutException","Message":"injected by the test proxy"}`))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *recordingProxy) requests(method, pathPart string) []seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []seenRequest
	for _, s := range p.seen {
		if (method == "" || s.Method == method) && strings.Contains(s.URL, pathPart) {
			out = append(out, s)
		}
	}
	return out
}

// TestWireFormat checks what the client puts on the wire against the
// protocol reference: topology bootstrap, hilo/next parameters, the
// bulk_docs body, load URLs and cache headers, hilo/return on Close.
func TestWireFormat(t *testing.T) {
	n := testserver.Start(t)
	db := newDatabase(t, n.URL)
	p := newRecordingProxy(t, n.URL)
	store := NewDocumentStore([]string{p.URL}, db)

	s := store.OpenSession()
	u := &User{Name: "John", Email: "j@x"}
	if err := s.Store(u); err != nil {
		t.Fatal(err)
	}
	c := &Company{Name: "Acme"}
	if err := s.StoreWithID(c, "companies|"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	s2 := store.OpenSessionWithOptions(SessionOptions{UseOptimisticConcurrency: true})
	var got *User
	if _, err := s2.Load(u.ID, &got); err != nil {
		t.Fatal(err)
	}
	got.Age = 3
	_ = s2.Delete("companies/1")
	if err := s2.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	if _, err := Load[User](store.OpenSession(), u.ID); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	// Bootstrap.
	topo := p.requests("GET", "/topology")
	if len(topo) != 1 || !strings.HasPrefix(topo[0].URL, "/topology?name="+db+"&first-topology-update&applicationIdentifier=") {
		t.Errorf("topology requests: %+v", topo)
	} else if topo[0].Header.Get("Topology-Etag") != `"0"` || topo[0].Header.Get("Raven-Client-Version") == "" {
		t.Errorf("topology headers: %v", topo[0].Header)
	}
	// HiLo.
	hilo := p.requests("GET", "/hilo/next")
	want := "/databases/" + db + "/hilo/next?lastBatchSize=0&tag=users&lastRangeAt=1970-01-01T00%3A00%3A00.0000000Z&identityPartsSeparator=/&lastMax=0"
	if len(hilo) != 1 || hilo[0].URL != want {
		t.Errorf("hilo/next requests %+v, want one %s", hilo, want)
	}
	// Every database request carries the topology etag.
	for _, r := range p.requests("", "/databases/") {
		if r.Header.Get("Topology-Etag") == `"0"` || r.Header.Get("Topology-Etag") == "" {
			t.Errorf("%s %s: Topology-Etag %q", r.Method, r.URL, r.Header.Get("Topology-Etag"))
		}
	}
	// bulk_docs bodies.
	bulk := p.requests("POST", "/bulk_docs")
	if len(bulk) != 2 {
		t.Fatalf("%d bulk_docs requests", len(bulk))
	}
	if !bytes.HasPrefix(bulk[0].Body, []byte(`{"Commands":[`)) || bulk[0].Header.Get("Content-Type") != "application/json" {
		t.Errorf("bulk body must start with Commands: %s", bulk[0].Body)
	}
	var b1 struct{ Commands []map[string]json.RawMessage }
	if err := json.Unmarshal(bulk[0].Body, &b1); err != nil || len(b1.Commands) != 2 {
		t.Fatalf("bulk 1: %s", bulk[0].Body)
	}
	put := b1.Commands[0]
	if string(put["Id"]) != `"users/1-A"` || string(put["Type"]) != `"PUT"` || string(put["ChangeVector"]) != "null" {
		t.Errorf("PUT command %s", bulk[0].Body)
	}
	var doc map[string]any
	_ = json.Unmarshal(put["Document"], &doc)
	md, _ := doc["@metadata"].(map[string]any)
	if doc["Name"] != "John" || doc["email"] != "j@x" || md["@collection"] != "Users" || md["Raven-Go-Type"] != "client.User" {
		t.Errorf("document %s", put["Document"])
	}
	if _, has := doc["ID"]; has {
		t.Errorf("id field sent in the document body: %s", put["Document"])
	}
	if string(b1.Commands[1]["Id"]) != `"companies|"` {
		t.Errorf("identity command %s", b1.Commands[1]["Id"])
	}
	var b2 struct{ Commands []map[string]json.RawMessage }
	_ = json.Unmarshal(bulk[1].Body, &b2)
	if len(b2.Commands) != 2 || string(b2.Commands[0]["Type"]) != `"DELETE"` || string(b2.Commands[1]["Type"]) != `"PUT"` {
		t.Fatalf("bulk 2: %s", bulk[1].Body)
	}
	var cv string
	_ = json.Unmarshal(b2.Commands[1]["ChangeVector"], &cv)
	if cv == "" || string(b2.Commands[1]["OriginalChangeVector"]) != string(b2.Commands[1]["ChangeVector"]) {
		t.Errorf("optimistic PUT must carry the loaded change vector: %s", bulk[1].Body)
	}
	var upd map[string]any
	_ = json.Unmarshal(b2.Commands[1]["Document"], &upd)
	for _, k := range []string{"@id", "@change-vector", "@last-modified"} {
		if _, has := upd["@metadata"].(map[string]any)[k]; has {
			t.Errorf("server metadata %s sent back: %s", k, b2.Commands[1]["Document"])
		}
	}
	// Loads: id URL-encoded; the repeated load revalidates with the etag.
	loads := p.requests("GET", "/docs?")
	if len(loads) != 2 || !strings.Contains(loads[0].URL, "id=users%2F1-A") {
		t.Fatalf("loads %+v", loads)
	}
	if inm := loads[1].Header.Get("If-None-Match"); len(inm) < 3 || inm[0] != '"' || inm[len(inm)-1] != '"' {
		t.Errorf("If-None-Match %q", inm)
	}
	// Close returns the range.
	ret := p.requests("PUT", "/hilo/return")
	if len(ret) != 1 || ret[0].URL != "/databases/"+db+"/hilo/return?tag=users&end=32&last=1" {
		t.Errorf("hilo/return %+v", ret)
	}
}

// A Refresh-Topology header on any answer makes the next request fetch the
// topology again, with the refresh debug tag.
func TestRefreshTopologyHeader(t *testing.T) {
	n := testserver.Start(t)
	db := newDatabase(t, n.URL)
	p := newRecordingProxy(t, n.URL)
	store := NewDocumentStore([]string{p.URL}, db)
	defer store.Close()
	ex := store.RequestExecutor()
	if _, err := Load[User](store.OpenSession(), "users/1"); err != nil {
		t.Fatal(err)
	}
	if ex.TopologyFetchCount() != 1 {
		t.Fatalf("%d topology fetches", ex.TopologyFetchCount())
	}
	p.refreshOnce.Store(true)
	if _, err := Load[User](store.OpenSession(), "users/2"); err != nil {
		t.Fatal(err)
	}
	if _, err := Load[User](store.OpenSession(), "users/3"); err != nil {
		t.Fatal(err)
	}
	if ex.TopologyFetchCount() != 2 {
		t.Fatalf("%d topology fetches after Refresh-Topology, want 2", ex.TopologyFetchCount())
	}
	topo := p.requests("GET", "/topology")
	if len(topo) != 2 || !strings.Contains(topo[1].URL, "&refresh-topology-header") {
		t.Errorf("refresh fetch %+v", topo)
	}
	if top := ex.Topology(); len(top.Nodes) != 1 || top.Nodes[0].URL != p.URL {
		t.Errorf("topology after refresh %+v", top)
	}
}

// A node answering 503 is skipped for the next one; with no other node the
// server's error surfaces.
func TestFailoverOn503(t *testing.T) {
	n := testserver.Start(t)
	db := newDatabase(t, n.URL)
	p := newRecordingProxy(t, n.URL)
	conv := DefaultConventions()
	conv.DisableTopologyUpdates = true // use exactly [proxy, node]
	store := NewDocumentStoreWithConventions([]string{p.URL, n.URL}, db, conv)
	defer store.Close()
	p.fail503.Store(1)
	s := store.OpenSession()
	if err := s.StoreWithID(&User{Name: "x"}, "users/x"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatalf("save with a 503 first node: %v", err)
	}
	ex := store.RequestExecutor()
	if ex.FailoverCount() != 1 || ex.Topology().Nodes[0].URL != n.URL {
		t.Errorf("failovers %d, preferred %v", ex.FailoverCount(), ex.Topology().Nodes)
	}

	only := NewDocumentStoreWithConventions([]string{p.URL}, db, conv)
	defer only.Close()
	p.fail503.Store(1)
	_, err := Load[User](only.OpenSession(), "users/x")
	var se *ServerError
	if !errors.As(err, &se) || se.StatusCode != 503 || !strings.Contains(se.Type, "DatabaseLoadTimeout") {
		t.Errorf("single node 503: %v", err)
	}
	// The next request goes through.
	if u, err := Load[User](only.OpenSession(), "users/x"); err != nil || u == nil {
		t.Errorf("after 503: %v %v", u, err)
	}
}
