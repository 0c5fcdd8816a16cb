package studio_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/rookerydb/rookery/backend/pki"
	"github.com/rookerydb/rookery/web"
)

// A secured node (TLS, client certificates) in this process, and clients
// presenting the certificates `studio setup` writes.

type securedNode struct {
	url  string
	srv  *web.Server
	done chan struct{}
}

func (n *securedNode) stop() {
	if n.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = n.srv.Shutdown(ctx)
	<-n.done
	n.srv = nil
}

// securedSetup writes a CA, the node certificate (for 127.0.0.1) and the
// admin certificate into a temporary directory.
func securedSetup(t *testing.T) (string, *pki.SetupResult) {
	t.Helper()
	dir := t.TempDir()
	res, err := pki.Setup(dir, pki.SetupOptions{Hosts: []string{"127.0.0.1"}, PFXPassword: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	return dir, res
}

func startSecured(t *testing.T, res *pki.SetupResult, tag, join string) *securedNode {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Config{
		HTTPAddr: l.Addr().String(), RaftAddr: "127.0.0.1:0", DataDir: t.TempDir(), NodeTag: tag, Join: join,
		TLSCert: res.NodeCert, TLSKey: res.NodeKey, TLSCA: res.CA, WellKnownAdminCerts: []string{res.Admin.Thumbprint},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 150 * time.Millisecond,
	})
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	n := &securedNode{url: "https://" + l.Addr().String(), srv: srv, done: make(chan struct{})}
	go func() { srv.Serve(l); close(n.done) }()
	t.Cleanup(n.stop)
	return n
}

// certClient presents the certificate in pemPath (certificate and key in
// one file, as `studio setup` writes them; "" for none), trusts the
// cluster's CA and does not follow redirects.
func certClient(t *testing.T, res *pki.SetupResult, pemPath string) *http.Client {
	t.Helper()
	ca, err := os.ReadFile(res.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cfg := &tls.Config{RootCAs: pool}
	if pemPath != "" {
		cert, err := tls.LoadX509KeyPair(pemPath, pemPath)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{
		Transport:     &http.Transport{TLSClientConfig: cfg},
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

type page struct {
	status   int
	body     string
	location string
}

// browse sends a request as a browser on the node's own origin would.
func browse(t *testing.T, c *http.Client, method, u, contentType string, body io.Reader) page {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	if method != http.MethodGet {
		o, _ := url.Parse(u)
		req.Header.Set("Origin", o.Scheme+"://"+o.Host)
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, body: string(b), location: resp.Header.Get("Location")}
}

func browseForm(t *testing.T, c *http.Client, u string, vals url.Values) page {
	t.Helper()
	return browse(t, c, http.MethodPost, u, "application/x-www-form-urlencoded", strings.NewReader(vals.Encode()))
}

// registerForm posts the Certificates page's register form (multipart,
// the certificate pasted or as a file).
func registerForm(t *testing.T, c *http.Client, base string, fields map[string][]string, file []byte) page {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for k, vs := range fields {
		for _, v := range vs {
			w.WriteField(k, v)
		}
	}
	if file != nil {
		fw, err := w.CreateFormFile("file", "client.crt")
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(file)
	}
	w.Close()
	return browse(t, c, http.MethodPost, base+"/studio/certificates", w.FormDataContentType(), &buf)
}

func mustContain(t *testing.T, what string, p page, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(p.body, w) {
			t.Fatalf("%s (status %d) lacks %q:\n%.3000s", what, p.status, w, p.body)
		}
	}
}

func mustLack(t *testing.T, what string, p page, unwanted ...string) {
	t.Helper()
	for _, w := range unwanted {
		if strings.Contains(p.body, w) {
			t.Fatalf("%s (status %d) shows %q", what, p.status, w)
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func waitReady(t *testing.T, c *http.Client, base string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := c.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				// The dashboard answers once the cluster leads.
				if p := browse(t, c, "GET", base+"/studio/cluster", "", nil); strings.Contains(p.body, `data-role="leader"`) {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not become ready: %v", base, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hostileName is a certificate name that would run script if a page put it
// in the markup unescaped.
const hostileName = `<img src=x onerror=alert(1)>"'&`

// TestStudioSecuredCertificatesAndAccess runs a secured node: the admin
// certificate sees who it is, registers a read-only and a read-write
// certificate on the Certificates page (one with a hostile name, shown
// escaped everywhere), finds the registrations in the audit log; the
// read-only certificate sees its database's documents but no action it may
// not take, and the server refuses the actions anyway; revoking takes the
// typed name and locks the certificate out; a browser without a
// certificate gets the refusal page.
func TestStudioSecuredCertificatesAndAccess(t *testing.T) {
	dir, res := securedSetup(t)
	reader, err := pki.IssueClient(dir, pki.ClientOptions{Name: "reader", PFXPassword: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	writer, err := pki.IssueClient(dir, pki.ClientOptions{Name: "writer", PFXPassword: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	n := startSecured(t, res, "A", "")
	admin := certClient(t, res, res.Admin.PEM)
	waitReady(t, admin, n.url)

	// Who you are; every action of the admin is there.
	p := browse(t, admin, "GET", n.url+"/studio/", "", nil)
	mustContain(t, "admin dashboard", p, `data-testid="whoami-name">admin<`, `data-testid="whoami-clearance">ClusterAdmin<`,
		`data-testid="nav-certificates"`, `data-testid="nav-audit"`, `data-testid="reading-node"`, `data-testid="reading-node-tag">A<`, `data-testid="reading-node-role">leader<`)
	mustLack(t, "secured dashboard", p, `data-testid="unsecured-warning"`)
	for _, db := range []string{"shop", "other"} {
		if p := browseForm(t, admin, n.url+"/studio/databases", url.Values{"name": {db}}); p.status != 303 || !strings.Contains(p.location, "flash=") {
			t.Fatalf("create %s: %d %s", db, p.status, p.location)
		}
	}
	p = browse(t, admin, "GET", n.url+"/studio/databases", "", nil)
	mustContain(t, "admin databases", p, `data-testid="create-db-form"`, `data-db="shop"`, `data-db="other"`, `data-testid="database-delete-submit"`)

	// Register: a pasted PEM (certificate and key: the key is ignored)
	// with a hostile name, Read on shop; a file upload with ReadWrite.
	p = registerForm(t, admin, n.url, map[string][]string{
		"name": {hostileName}, "clearance": {"ValidUser"}, "pem": {string(readFile(t, reader.PEM))},
		"permDb": {"shop", "", ""}, "permAccess": {"Read", "Read", "Read"},
	}, nil)
	if p.status != 303 || !strings.Contains(p.location, "flash=") {
		t.Fatalf("register reader: %d %s %.2000s", p.status, p.location, p.body)
	}
	p = registerForm(t, admin, n.url, map[string][]string{
		"name": {"writer"}, "clearance": {"ValidUser"}, "permDb": {"shop"}, "permAccess": {"ReadWrite"},
	}, readFile(t, writer.CRT))
	if p.status != 303 {
		t.Fatalf("register writer: %d %s %.2000s", p.status, p.location, p.body)
	}
	// Refusals keep the form and say why.
	p = registerForm(t, admin, n.url, map[string][]string{"name": {"x"}, "clearance": {"ValidUser"}, "pem": {"not a certificate"}}, nil)
	if p.status != 400 {
		t.Fatalf("a bad certificate: %d", p.status)
	}
	mustContain(t, "refused register", p, `data-testid="cert-error"`, "Unable to read the certificate", `value="x"`)
	p = registerForm(t, admin, n.url, map[string][]string{"name": {"y"}, "clearance": {"Operator"}, "pem": {string(readFile(t, writer.CRT))},
		"permDb": {"shop"}, "permAccess": {"Read"}}, nil)
	mustContain(t, "operator with permissions", p, "Only ValidUser certificates carry database permissions")

	p = browse(t, admin, "GET", n.url+"/studio/certificates", "", nil)
	escaped := `&lt;img src=x onerror=alert(1)&gt;`
	mustContain(t, "certificates page", p, `data-testid="cert-row" data-key="`+reader.Thumbprint+`"`, escaped, "shop: Read", "shop: ReadWrite",
		`data-testid="cert-server-thumbprint"`, res.Admin.Thumbprint, `data-testid="cert-revoke-submit"`, `data-testid="cert-register-form"`,
		`<option value="ClusterAdmin"`)
	mustLack(t, "certificates page", p, `<img src=x`, "PRIVATE KEY")

	// The audit log has both registrations, by the admin, on node A.
	p = browse(t, admin, "GET", n.url+"/studio/audit?action=certificate", "", nil)
	mustContain(t, "audit page", p, `data-testid="audit-node" data-tag="A" data-answered="true"`, `data-action="certificate.put"`, reader.Thumbprint, escaped, "ClusterAdmin")
	mustLack(t, "audit page", p, `<img src=x`, `data-testid="audit-incomplete"`)
	if got, failed := strings.Count(p.body, `data-testid="audit-row" data-action="certificate.put"`), strings.Count(p.body, `data-outcome="failed"`); got != 4 || failed != 2 {
		t.Fatalf("audit rows of certificate.put: %d (%d failed), want 2 registrations and the 2 refused attempts", got, failed)
	}
	p = browse(t, admin, "GET", n.url+"/studio/audit?action=database.create&who=admin", "", nil)
	if got := strings.Count(p.body, `data-testid="audit-row"`); got != 2 {
		t.Fatalf("database.create rows: %d, want 2", got)
	}

	// The read-only certificate: its name (escaped) and clearance, only
	// its database, no action it may not take.
	ro := certClient(t, res, reader.PEM)
	if r, err := http.NewRequest("PUT", n.url+"/databases/shop/docs?id=users/1", strings.NewReader(`{"Name":"a","@metadata":{"@collection":"Users"}}`)); err == nil {
		resp, err := certClient(t, res, writer.PEM).Do(r)
		if err != nil || resp.StatusCode != 201 {
			t.Fatalf("writer puts a document: %v %v", err, resp)
		}
		resp.Body.Close()
	}
	p = browse(t, ro, "GET", n.url+"/studio/", "", nil)
	mustContain(t, "reader dashboard", p, `data-testid="whoami-name">`+escaped, `data-testid="whoami-clearance">ValidUser<`, `dash-databases">1<`, "/studio/db/shop/documents")
	mustLack(t, "reader dashboard", p, `<img src=x`, "/studio/db/other/", `data-testid="nav-certificates"`, `data-testid="nav-audit"`)
	// A damaged database the reader may not read is not shown to it either.
	if other, err := n.srv.Catalog().Get("other"); err != nil || !n.srv.Catalog().MarkDamaged(other, "integrity", "marked by the test") {
		t.Fatalf("marking other damaged: %v", err)
	}
	p = browse(t, ro, "GET", n.url+"/studio/databases", "", nil)
	mustContain(t, "reader databases", p, `data-db="shop"`)
	mustLack(t, "reader databases", p, `data-db="other"`, `data-testid="create-db-form"`, `data-testid="database-delete-submit"`)
	p = browse(t, ro, "GET", n.url+"/studio/db/shop/documents", "", nil)
	mustContain(t, "reader documents", p, `data-testid="doc-link"`, "users/1", `data-testid="read-only"`)
	mustLack(t, "reader documents", p, `data-testid="new-doc"`)
	p = browse(t, ro, "GET", n.url+"/studio/db/shop/doc?id=users/1", "", nil)
	mustContain(t, "reader document", p, `data-testid="doc-json"`, `data-testid="read-only-note"`)
	mustLack(t, "reader document", p, `data-testid="doc-save"`, `data-testid="doc-delete"`, `data-testid="doc-form"`)
	p = browse(t, ro, "GET", n.url+"/studio/db/shop/identities", "", nil)
	mustLack(t, "reader identities", p, `data-testid="seed-form"`, `data-testid="identity-edit"`)
	p = browse(t, ro, "GET", n.url+"/studio/db/shop/conflicts/settings", "", nil)
	mustContain(t, "reader conflict settings", p, `<fieldset class="bare" disabled>`, `data-testid="read-only-note"`)
	mustLack(t, "reader conflict settings", p, `data-testid="settings-save"`, `data-testid="test-run"`)
	p = browse(t, ro, "GET", n.url+"/studio/db/shop/subscriptions", "", nil)
	mustLack(t, "reader subscriptions", p, `data-testid="thresholds-save"`)
	p = browse(t, ro, "GET", n.url+"/studio/cluster", "", nil)
	mustLack(t, "reader cluster", p, `data-testid="stepdown-submit"`, `data-testid="remove-node-submit"`, `data-testid="add-node-submit"`)

	// The server refuses anyway: forged posts and pages beyond the
	// clearance.
	for _, f := range []struct {
		path string
		vals url.Values
	}{
		{"/studio/db/shop/doc", url.Values{"id": {"users/1"}, "json": {`{"Name":"forged","@metadata":{"@collection":"Users"}}`}}},
		{"/studio/db/shop/doc/delete", url.Values{"id": {"users/1"}, "confirm": {"yes"}}},
		{"/studio/databases", url.Values{"name": {"evil"}}},
		{"/studio/databases/delete", url.Values{"name": {"other"}, "confirm": {"other"}}},
		{"/studio/certificates/revoke", url.Values{"thumbprint": {writer.Thumbprint}, "confirm": {"writer"}}},
		{"/studio/db/shop/identities/seed", url.Values{"prefix": {"users|"}, "value": {"5"}}},
	} {
		if p := browseForm(t, ro, n.url+f.path, f.vals); p.status != 403 {
			t.Fatalf("forged POST %s by the reader: %d, want 403", f.path, p.status)
		}
	}
	for _, path := range []string{"/studio/certificates", "/studio/audit", "/studio/db/other/documents"} {
		p := browse(t, ro, "GET", n.url+path, "", nil)
		if p.status != 403 {
			t.Fatalf("reader GET %s: %d", path, p.status)
		}
		mustContain(t, "reader refused "+path, p, `data-testid="auth-refused"`)
	}
	p = browse(t, ro, "GET", n.url+"/studio/db/shop/doc?id=users/1", "", nil)
	mustContain(t, "document after the forged save", p, `&#34;Name&#34;: &#34;a&#34;`)

	// ReadWrite: the editor is there, the database's admin actions not.
	rw := certClient(t, res, writer.PEM)
	p = browse(t, rw, "GET", n.url+"/studio/db/shop/doc?id=users/1", "", nil)
	mustContain(t, "writer document", p, `data-testid="doc-save"`, `data-testid="doc-delete"`)
	p = browse(t, rw, "GET", n.url+"/studio/db/shop/identities", "", nil)
	mustLack(t, "writer identities", p, `data-testid="seed-form"`)

	// No certificate: the refusal page.
	p = browse(t, certClient(t, res, ""), "GET", n.url+"/studio/", "", nil)
	if p.status != 403 {
		t.Fatalf("no certificate: %d", p.status)
	}
	mustContain(t, "no certificate", p, `data-testid="auth-refused"`, `href="/static/favicon.svg"`)
	// What the refusal page loads is public: no 4xx in the browser.
	for _, path := range []string{"/favicon.ico", "/static/favicon.svg", "/static/studio.css"} {
		if p := browse(t, certClient(t, res, ""), "GET", n.url+path, "", nil); p.status != 200 {
			t.Fatalf("no certificate, %s: %d", path, p.status)
		}
	}

	// A live page of the reader's, open while it is revoked.
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	ws, _, err := websocket.Dial(wctx, strings.Replace(n.url, "https://", "wss://", 1)+"/studio/live?page=documents&db=shop", &websocket.DialOptions{HTTPClient: ro})
	if err != nil {
		t.Fatalf("the reader's live page: %v", err)
	}
	defer ws.CloseNow()
	if _, msg, err := ws.Read(wctx); err != nil || !strings.Contains(string(msg), "documents-grid") {
		t.Fatalf("the reader's first live update: %v %.300s", err, msg)
	}

	// Revoke: the typed name is required; then the reader is refused.
	p = browseForm(t, admin, n.url+"/studio/certificates/revoke", url.Values{"thumbprint": {reader.Thumbprint}, "confirm": {"reader"}})
	if p.status != 303 || !strings.Contains(p.location, "error=") {
		t.Fatalf("revoke with a wrong name: %d %s", p.status, p.location)
	}
	if p := browse(t, ro, "GET", n.url+"/studio/db/shop/documents", "", nil); p.status != 200 {
		t.Fatalf("the reader after a refused revoke: %d", p.status)
	}
	p = browseForm(t, admin, n.url+"/studio/certificates/revoke", url.Values{"thumbprint": {reader.Thumbprint}, "confirm": {hostileName}})
	if p.status != 303 || !strings.Contains(p.location, "flash=") {
		t.Fatalf("revoke: %d %s", p.status, p.location)
	}
	p = browse(t, ro, "GET", n.url+"/studio/", "", nil)
	if p.status != 403 {
		t.Fatalf("a revoked certificate: %d", p.status)
	}
	// Its open live page gets no more updates: the next is refused.
	for {
		if _, _, err := ws.Read(wctx); err != nil {
			if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
				t.Fatalf("the revoked reader's live page ended with %v, want a policy-violation close", err)
			}
			break
		}
	}
	p = browse(t, admin, "GET", n.url+"/studio/audit?action=certificate.delete", "", nil)
	mustContain(t, "audit of the revocation", p, `data-action="certificate.delete"`, reader.Thumbprint)
	p = browse(t, admin, "GET", n.url+"/studio/certificates", "", nil)
	mustLack(t, "certificates after revoking", p, reader.Thumbprint+`"`)
}

// TestStudioSecuredAuditAcrossNodes merges the audit logs of a two-node
// secured cluster on either node, and says which node did not answer once
// one is down.
func TestStudioSecuredAuditAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	_, res := securedSetup(t)
	a := startSecured(t, res, "A", "")
	admin := certClient(t, res, res.Admin.PEM)
	waitReady(t, admin, a.url)
	b := startSecured(t, res, "B", a.url)
	waitFor(t, "B to join", func() bool {
		p := browse(t, admin, "GET", a.url+"/studio/cluster", "", nil)
		return strings.Contains(p.body, `data-tag="B" data-role="follower" data-state="voter"`)
	})
	// One action taken on each node.
	if p := browseForm(t, admin, a.url+"/studio/databases", url.Values{"name": {"on-a"}}); p.status != 303 || strings.Contains(p.location, "error=") {
		t.Fatalf("create on A: %d %s", p.status, p.location)
	}
	req, _ := http.NewRequest("PUT", b.url+"/admin/databases?name=on-b", strings.NewReader(`{"DatabaseName":"on-b"}`))
	resp, err := admin.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create on B: %v %v", err, resp)
	}
	resp.Body.Close()

	rowRE := regexp.MustCompile(`data-testid="audit-row" data-action="database.create" data-node="([A-Z]+)"`)
	for _, base := range []string{a.url, b.url} {
		p := browse(t, admin, "GET", base+"/studio/audit?action=database", "", nil)
		mustContain(t, "audit on "+base, p, `data-tag="A" data-answered="true"`, `data-tag="B" data-answered="true"`, "on-a", "on-b")
		mustLack(t, "audit on "+base, p, `data-testid="audit-incomplete"`)
		var nodes []string
		for _, m := range rowRE.FindAllStringSubmatch(p.body, -1) {
			nodes = append(nodes, m[1])
		}
		if strings.Join(nodes, ",") != "B,A" {
			t.Fatalf("audit rows on %s, newest first: %v", base, nodes)
		}
	}
	// The endpoint says the same, per node.
	req, _ = http.NewRequest("GET", b.url+"/admin/audit?action=database.create", nil)
	resp, err = admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		NodeTag string
		Results []struct{ Who, Action, Database, Target string }
	}
	json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if got.NodeTag != "B" || len(got.Results) != 1 || got.Results[0].Who != "admin" || got.Results[0].Target != "on-b" {
		t.Fatalf("B's audit endpoint: %+v", got)
	}

	b.stop()
	p := browse(t, admin, "GET", a.url+"/studio/audit", "", nil)
	mustContain(t, "audit with B down", p, `data-tag="A" data-answered="true"`, `data-tag="B" data-answered="false"`, `data-testid="audit-incomplete"`, "on-a")
	mustLack(t, "audit with B down", p, `data-node="B"`)
}

// TestStudioUnsecuredWhoAndPages: an unsecured node says so on every page,
// with who is an administrator, and still offers every action; its
// Certificates and Audit pages work (registrations take effect once the
// node is secured).
func TestStudioUnsecuredWhoAndPages(t *testing.T) {
	h := newServer(t)
	if rec := postForm(t, h, "/studio/databases", map[string]string{"name": "shop"}, nil); rec.Code != 303 || strings.Contains(rec.Header().Get("Location"), "error=") {
		t.Fatalf("create: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	rec := get(t, h, "/studio/databases")
	p := page{status: rec.Code, body: rec.Body.String()}
	mustContain(t, "unsecured databases", p, `data-testid="whoami-name">unsecured<`, `data-testid="whoami-clearance">ClusterAdmin<`,
		`data-testid="unsecured-warning"`, "from this machine (loopback) is a cluster administrator", `data-testid="create-db-form"`,
		`data-testid="database-delete-submit"`, `data-testid="nav-certificates"`, `data-testid="nav-audit"`)
	rec = get(t, h, "/studio/certificates")
	p = page{status: rec.Code, body: rec.Body.String()}
	mustContain(t, "unsecured certificates", p, `data-testid="certs-unsecured"`, `data-testid="cert-server-none"`, `data-testid="certs-none"`,
		`data-testid="well-known-none"`, `data-testid="cert-register-form"`)
	rec = get(t, h, "/studio/audit")
	p = page{status: rec.Code, body: rec.Body.String()}
	mustContain(t, "unsecured audit", p, `data-tag="A" data-answered="true"`, `data-action="database.create"`, ">unsecured")
}

// TestStudioCertificateFormBounds: the register form is read up to its
// bound; a larger one, pasted or uploaded, is refused with a readable
// page, and nothing is registered.
func TestStudioCertificateFormBounds(t *testing.T) {
	h := newServer(t)
	huge := strings.Repeat("A", 1<<20)
	for _, c := range []struct {
		name string
		file bool
	}{{"pasted", false}, {"uploaded", true}} {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		w.WriteField("name", "big")
		w.WriteField("clearance", "ValidUser")
		if c.file {
			fw, _ := w.CreateFormFile("file", "big.crt")
			fw.Write([]byte(huge))
		} else {
			w.WriteField("pem", huge)
		}
		w.Close()
		req := localRequest("POST", "/studio/certificates", &buf)
		req.Header.Set("Content-Type", w.FormDataContentType())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 400 || !strings.Contains(rec.Body.String(), `data-testid="cert-error"`) || !strings.Contains(rec.Body.String(), "KiB") {
			t.Fatalf("%s: %d %.500s", c.name, rec.Code, rec.Body.String())
		}
	}
	rec := get(t, h, "/studio/certificates")
	if !strings.Contains(rec.Body.String(), `data-testid="certs-none"`) {
		t.Fatal("an oversized form registered something")
	}
}
