package web

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/backend/batch"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/replication"
	"github.com/rookerydb/rookery/backend/storage"
)

// The security suite (`go test -run '^TestSecurity' ./...`): each test
// replays one finding of issue 10 against a real node.

var plain = &http.Client{Timeout: 10 * time.Second}

func mkdb(t *testing.T, c *http.Client, base, name string) {
	t.Helper()
	must(t, 201, c, "PUT", base+"/admin/databases?name="+name, `{"DatabaseName":"`+name+`"}`)
}

// F2: the Raft port took a hand-made AppendEntries with a higher term from
// anyone, and it deleted a database. Now an unsecured node's Raft port
// wants the cluster's secret first (a secured one, mutual TLS: below).
func TestSecurityF2ForgedAppendEntries(t *testing.T) {
	n := serveNode(t, Config{})
	mkdb(t, plain, n.url, "keep")
	st := n.srv.cluster.Status()
	cmd, _ := json.Marshal(map[string]any{"Op": "delete_database", "Name": "keep"})
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer trans.Close()
	req := raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("EVIL"), Addr: []byte(trans.LocalAddr())},
		Term:      st.Term + 100, PrevLogEntry: st.LastIndex, PrevLogTerm: st.Term,
		Entries:           []*raft.Log{{Index: st.LastIndex + 1, Term: st.Term + 100, Type: raft.LogCommand, Data: cmd}},
		LeaderCommitIndex: st.LastIndex + 1,
	}
	var resp raft.AppendEntriesResponse
	err = trans.AppendEntries("A", raft.ServerAddress(n.srv.cluster.RaftAddr()), &req, &resp)
	if err == nil && resp.Success {
		t.Fatalf("the forged AppendEntries was accepted: %+v", resp)
	}
	time.Sleep(300 * time.Millisecond)
	must(t, 200, plain, "GET", n.url+"/admin/databases?name=keep", "")
	if got := n.srv.cluster.Status().Term; got > st.Term+1 {
		t.Fatalf("the forged term reached Raft: %d", got)
	}
}

// F3: POST /internal/cluster/apply took raw cluster commands from anyone,
// cross-site too, and the state machine recorded a database named
// ../../escapee.
func TestSecurityF3InternalApply(t *testing.T) {
	n := serveNode(t, Config{})
	mkdb(t, plain, n.url, "keep")
	del := `{"Op":"delete_database","Name":"keep"}`
	apply := n.url + "/internal/cluster/apply"
	must(t, 403, plain, "POST", apply, del, "Content-Type", "text/plain", "Origin", "http://evil.example")
	must(t, 403, plain, "POST", apply, del)                                           // a local process without the secret
	must(t, 403, plain, "POST", apply, del, nodeAuthHeader, strings.Repeat("ab", 32)) // a wrong secret
	must(t, 200, plain, "GET", n.url+"/admin/databases?name=keep", "")

	// A node (the right secret) still cannot record what the public
	// endpoints refuse.
	secret := n.srv.sec.tokenHex()
	for _, bad := range []string{
		`{"Op":"create_database","Database":{"Name":"../../escapee","Members":["A"]}}`,
		`{"Op":"create_database","Database":{"Name":"ok","Members":["../x"]}}`,
		`{"Op":"add_node","Node":{"Tag":"Z","URL":"javascript:alert(1)","RaftAddr":"127.0.0.1:1"}}`,
		`{"Op":"subscription_create","Name":"keep","Key":"../../x","Setting":{}}`,
		`{"Op":"no_such_op"}`,
		`not json`,
	} {
		status, body := call(t, plain, "POST", apply, bad, nodeAuthHeader, secret)
		if status != 400 {
			t.Fatalf("%s: %d %s, want 400", bad, status, body)
		}
	}
	if _, ok := n.srv.cluster.Database("../../escapee"); ok {
		t.Fatal("the escapee record was written")
	}
	if _, err := os.Stat(filepath.Join(n.dir, "..", "..", "escapee")); err == nil {
		t.Fatal("a directory escaped the data directory")
	}
	// The node's own forwarding still works (the right secret, a valid command).
	ok := `{"Op":"set_setting","Name":"keep","Key":"probe","Setting":{"x":1}}`
	must(t, 200, plain, "POST", apply, ok, nodeAuthHeader, secret)
}

// F4: POST /admin/cluster/join with a made-up node, sent cross-site, made a
// one-node cluster two voters with no quorum. Now a cross-site join is
// refused, and a made-up node stays a non-voter: the cluster keeps
// committing, and the node can be removed.
func TestSecurityF4MadeUpJoin(t *testing.T) {
	n := serveNode(t, Config{})
	join := `{"Tag":"Z","Url":"http://127.0.0.1:1","RaftAddr":"127.0.0.1:1"}`
	must(t, 403, plain, "POST", n.url+"/admin/cluster/join", join, "Content-Type", "text/plain", "Origin", "http://evil.example")
	must(t, 403, plain, "POST", n.url+"/admin/cluster/join", join, "Sec-Fetch-Site", "cross-site")
	must(t, 200, plain, "POST", n.url+"/admin/cluster/join", join)
	// Without the nonce only a node that Raft reached can read, no
	// promotion.
	must(t, 400, plain, "POST", n.url+"/admin/cluster/promote?tag=Z", `{"Nonce":"00000000000000000000000000000000"}`)
	must(t, 400, plain, "POST", n.url+"/admin/cluster/promote?tag=Z", ``)
	for _, sv := range n.srv.cluster.Status().Servers {
		if sv.Tag == "Z" && sv.Suffrage != "nonvoter" {
			t.Fatalf("Z is a %s", sv.Suffrage)
		}
	}
	mkdb(t, plain, n.url, "stillcommits") // a quorum-backed write
	must(t, 200, plain, "POST", n.url+"/admin/cluster/remove?tag=Z", "")
	for _, sv := range n.srv.cluster.Status().Servers {
		if sv.Tag == "Z" {
			t.Fatal("Z was not removed")
		}
	}
}

// F5: cross-site text/plain POSTs succeeded on bulk_docs, identity/seed and
// subscriptions/try; a foreign Host with a matching Origin (DNS
// rebinding) and an https Origin on an http node were accepted.
func TestSecurityF5CrossSiteAndRebinding(t *testing.T) {
	n := serveNode(t, Config{})
	mkdb(t, plain, n.url, "shop")
	must(t, 200, plain, "POST", n.url+"/databases/shop/identity/seed?name=orders&value=5", "")
	bulk := `{"Commands":[{"Type":"PUT","Id":"users/evil","Document":{"Name":"x","@metadata":{"@collection":"Users"}}}]}`
	seed := n.url + "/databases/shop/identity/seed?name=orders&value=900&force=true"
	try := n.url + "/databases/shop/subscriptions/try"
	_, port, _ := net.SplitHostPort(n.addr)
	evilHost := "evil.example:" + port
	for _, c := range []struct {
		name, method, url, body string
		headers                 []string
		want                    int
	}{
		{"text/plain bulk_docs from another origin", "POST", n.url + "/databases/shop/bulk_docs", bulk, []string{"Content-Type", "text/plain", "Origin", "http://evil.example"}, 403},
		{"identity seed from another origin", "POST", seed, "", []string{"Content-Type", "text/plain", "Origin", "http://evil.example"}, 403},
		{"subscription try from another origin", "POST", try, `{"Query":"from Users"}`, []string{"Content-Type", "text/plain", "Origin", "http://evil.example"}, 403},
		{"cross-site by Sec-Fetch-Site", "POST", n.url + "/databases/shop/bulk_docs", bulk, []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"an https Origin on an http node", "POST", n.url + "/databases/shop/bulk_docs", bulk, []string{"Origin", "https://" + n.addr}, 403},
		{"another port", "POST", n.url + "/databases/shop/bulk_docs", bulk, []string{"Origin", "http://127.0.0.1:1"}, 403},
		{"rebinding: foreign Host and matching Origin", "POST", n.url + "/databases/shop/bulk_docs", bulk, []string{"Host", evilHost, "Origin", "http://" + evilHost}, 400},
		{"rebinding: a read", "GET", n.url + "/databases/shop/docs?id=users/1", "", []string{"Host", evilHost}, 400},
		{"rebinding: the studio", "GET", n.url + "/studio/", "", []string{"Host", evilHost}, 400},
		{"rebinding: the studio's live socket", "GET", n.url + "/studio/live?page=dashboard", "", []string{"Host", evilHost, "Origin", "http://" + evilHost}, 400},
	} {
		status, body := call(t, plain, c.method, c.url, c.body, c.headers...)
		if status != c.want {
			t.Errorf("%s: %d, want %d: %.300s", c.name, status, c.want, body)
		}
	}
	must(t, 404, plain, "GET", n.url+"/databases/shop/docs?id=users/evil", "")
	if v := n.srv.cluster.Identities("shop")["orders|"]; v != 5 {
		t.Fatalf("the identity moved to %d", v)
	}
	// Same-origin browsers, clients without Origin, and the node's other
	// loopback names still work.
	must(t, 201, plain, "POST", n.url+"/databases/shop/bulk_docs", bulk, "Origin", "http://"+n.addr, "Sec-Fetch-Site", "same-origin")
	must(t, 200, plain, "POST", try, `{"Query":"from Users"}`)
	must(t, 200, plain, "GET", n.url+"/databases/shop/docs?id=users/evil", "", "Host", "localhost:"+port)
}

// F6: the replication websocket took any peer: a fake peer stored a
// document with a forged change vector. Now only cluster nodes may open it.
func TestSecurityF6FakeReplicationPeer(t *testing.T) {
	n := serveNode(t, Config{Replication: true})
	mkdb(t, plain, n.url, "shop")
	// The fake peer: a database of its own, with a document, sent by the
	// real sender code over a websocket without the cluster's credentials.
	src, err := storage.Open(filepath.Join(t.TempDir(), "fake.db"), storage.Options{Name: "shop", NodeTag: "Z"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	doc, _ := document.Parse([]byte(`{"Name":"forged","@metadata":{"@collection":"Users"}}`))
	if _, err := batch.Execute(context.Background(), src, nil, []batch.Command{{Type: batch.Put, ID: "users/forged", Document: doc}}); err != nil {
		t.Fatal(err)
	}
	dial := func(ctx context.Context, dest, db string) (replication.Conn, error) {
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(dest, "http")+"/databases/"+db+"/replication", nil)
		if err != nil {
			return nil, err
		}
		return wsConn{c}, nil
	}
	snd := replication.NewSender(src, n.url, dial, replication.Options{Name: "A"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go snd.Run(ctx)
	eventually(t, "the fake peer is refused", func() error {
		if st := snd.Stats(); !strings.Contains(st.LastError, "403") {
			return fmt.Errorf("sender: %+v", st)
		}
		return nil
	})
	must(t, 404, plain, "GET", n.url+"/databases/shop/docs?id=users/forged", "")
	// Also with a wrong secret.
	h := http.Header{}
	h.Set(nodeAuthHeader, strings.Repeat("00", 32))
	if _, resp, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(n.url, "http")+"/databases/shop/replication", &websocket.DialOptions{HTTPHeader: h}); err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("a wrong secret opened the replication socket: %v", err)
	}
}

// F12: the small things.
func TestSecurityF12SmallThings(t *testing.T) {
	n := serveNode(t, Config{})
	mkdb(t, plain, n.url, "shop")
	must(t, 201, plain, "PUT", n.url+"/databases/shop/docs?id=users/1", `{"Name":"a"}`)

	// A truncated PUT body is the client's fault: 400, nothing stored.
	conn, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PUT /databases/shop/docs?id=users/cut HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\n{\"Name\":", n.addr)
	conn.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	conn.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("truncated body: %d, want 400", resp.StatusCode)
	}
	must(t, 404, plain, "GET", n.url+"/databases/shop/docs?id=users/cut", "")

	// Deleting an unknown database is a 404 and deletes nothing.
	body := must(t, 404, plain, "DELETE", n.url+"/admin/databases", `{"DatabaseNames":["shop","nope"],"HardDelete":true}`)
	if !strings.Contains(body, "DatabaseDoesNotExistException") {
		t.Fatalf("unknown database: %s", body)
	}
	must(t, 200, plain, "GET", n.url+"/databases/shop/docs?id=users/1", "")

	// A blank If-Match is refused instead of turning the check off.
	must(t, 400, plain, "PUT", n.url+"/databases/shop/docs?id=users/1", `{"Name":"b"}`, "If-Match", "   ")
	must(t, 400, plain, "DELETE", n.url+"/databases/shop/docs?id=users/1", "", "If-Match", `"  "`)
	if b := must(t, 200, plain, "GET", n.url+"/databases/shop/docs?id=users/1", ""); !strings.Contains(b, `"Name":"a"`) {
		t.Fatalf("the document changed: %s", b)
	}
	must(t, 409, plain, "PUT", n.url+"/databases/shop/docs?id=users/1", `{"Name":"b"}`, "If-Match", `""`) // must be new

	// Subscription names are validated.
	for _, name := range []string{"a\u0000b", strings.Repeat("s", 100<<10), "../../x"} {
		b, _ := json.Marshal(map[string]string{"Name": name, "Query": "from Users"})
		must(t, 400, plain, "PUT", n.url+"/databases/shop/subscriptions", string(b))
	}

	// The studio's browser protections.
	req, _ := http.NewRequest("GET", n.url+"/studio/", nil)
	r, err := plain.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	for h, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Content-Security-Policy": "frame-ancestors 'none'"} {
		if !strings.Contains(r.Header.Get(h), want) {
			t.Errorf("%s: %q, want %q", h, r.Header.Get(h), want)
		}
	}
	if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP: %s", csp)
	}
}

// Unsecured mode is loopback-only unless the operator says otherwise.
func TestSecurityUnsecuredScope(t *testing.T) {
	discard := serveNode(t, Config{}).srv.log
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{HTTPAddr: "0.0.0.0:0", RaftAddr: "127.0.0.1:0"}, "without TLS on --http 0.0.0.0:0"},
		{Config{HTTPAddr: "127.0.0.1:0", RaftAddr: "0.0.0.0:0"}, "without TLS on --raft-addr 0.0.0.0:0"},
		{Config{HTTPAddr: "10.1.2.3:0", UnsecuredAccessAllowed: "Local"}, "outside"},
		{Config{HTTPAddr: "127.0.0.1:0", UnsecuredAccessAllowed: "None"}, "outside"},
		{Config{HTTPAddr: "127.0.0.1:0", UnsecuredAccessAllowed: "Everyone"}, "not None"},
		{Config{HTTPAddr: "127.0.0.1:0", PublicURL: "https://x.example"}, "https"},
	} {
		c.cfg.DataDir, c.cfg.Logger = t.TempDir(), discard
		srv, err := New(c.cfg)
		if err == nil {
			srv.Close()
			t.Fatalf("%+v started", c.cfg)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%+v: %v, want it to mention %q", c.cfg, err, c.want)
		}
	}
	srv, err := New(Config{HTTPAddr: "0.0.0.0:0", RaftAddr: "127.0.0.1:0", UnsecuredAccessAllowed: "PublicNetwork", DataDir: t.TempDir(), Logger: discard, ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("PublicNetwork: %v", err)
	}
	defer srv.Close()
	// A caller outside the allowed ranges is refused (Local by default).
	n := serveNode(t, Config{})
	req := httptest.NewRequest("GET", "/databases", nil)
	req.Host = n.addr
	req.RemoteAddr = "10.9.8.7:5000"
	rec := httptest.NewRecorder()
	n.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != 403 || !strings.Contains(rec.Body.String(), "accepts only Local callers") {
		t.Fatalf("a 10.x caller: %d %s", rec.Code, rec.Body)
	}
}

// A secured node: certificates are identities, clearances are enforced,
// refusals are RavenDB's, and the worker protocol and Raft are behind the
// same certificates.
func TestSecuredNode(t *testing.T) {
	c := makeCerts(t)
	cfg := c.secured()
	cfg.WellKnownAdminCerts = []string{c.setup.Admin.CRT} // a file works as well as a thumbprint
	n := serveNode(t, cfg)
	if !strings.HasPrefix(n.url, "https://") {
		t.Fatalf("url %s", n.url)
	}
	admin := c.client(t, c.setup.Admin.PEM)
	anon := c.client(t, "")

	// Without a certificate: health only; RavenDB's 403 for clients, a
	// page for browsers.
	must(t, 200, anon, "GET", n.url+"/livez", "")
	if b := must(t, 200, anon, "GET", n.url+"/certificates/whoami", ""); b != "null" {
		t.Fatalf("anonymous whoami: %s", b)
	}
	if b := must(t, 403, anon, "GET", n.url+"/databases", ""); !strings.Contains(b, `"Type":"InvalidAuth"`) || !strings.Contains(b, "requires client certificate") {
		t.Fatalf("anonymous: %s", b)
	}
	if b := must(t, 403, anon, "GET", n.url+"/studio/", "", "Accept", "text/html"); !strings.Contains(b, `data-testid="auth-refused"`) {
		t.Fatalf("anonymous browser: %s", b)
	}
	// Plain HTTP on the TLS port is told to use HTTPS, and served nothing.
	if status, body := call(t, plain, "GET", "http://"+n.addr+"/databases", ""); status != 400 || !strings.Contains(body, "serves HTTPS") {
		t.Fatalf("plain HTTP on the TLS port: %d %s", status, body)
	}

	var who map[string]any
	json.Unmarshal([]byte(must(t, 200, admin, "GET", n.url+"/certificates/whoami", "")), &who)
	if who["SecurityClearance"] != "ClusterAdmin" || who["Thumbprint"] != c.setup.Admin.Thumbprint {
		t.Fatalf("admin whoami: %v", who)
	}
	mkdb(t, admin, n.url, "shop")
	mkdb(t, admin, n.url, "other")
	must(t, 201, admin, "PUT", n.url+"/databases/shop/docs?id=users/1", `{"Name":"a","@metadata":{"@collection":"Users"}}`)

	// An unknown certificate, then registered read-only on shop (the npm
	// client PascalCases database names: they are case-insensitive).
	reader := c.issue(t, "reader")
	rc := c.client(t, reader.PEM)
	if b := must(t, 403, rc, "GET", n.url+"/databases/shop/docs?id=users/1", ""); !strings.Contains(b, "unknown to the server") {
		t.Fatalf("unknown certificate: %s", b)
	}
	put := func(cl *http.Client, name, b64, clearance, perms string, want int) string {
		return must(t, want, cl, "PUT", n.url+"/admin/certificates", fmt.Sprintf(`{"Name":%q,"Certificate":%q,"SecurityClearance":%q,"Permissions":%s}`, name, b64, clearance, perms))
	}
	put(admin, "reader", reader.CertificateBase64, "ValidUser", `{"Shop":"Read"}`, 204)
	must(t, 200, rc, "GET", n.url+"/databases/shop/docs?id=users/1", "")
	must(t, 403, rc, "PUT", n.url+"/databases/shop/docs?id=users/2", `{}`)
	must(t, 403, rc, "GET", n.url+"/databases/other/docs?id=users/1", "")
	must(t, 403, rc, "PUT", n.url+"/admin/databases?name=x", `{"DatabaseName":"x"}`)
	var dbs struct{ Databases []struct{ Name string } }
	json.Unmarshal([]byte(must(t, 200, rc, "GET", n.url+"/databases", "")), &dbs)
	if len(dbs.Databases) != 1 || dbs.Databases[0].Name != "shop" {
		t.Fatalf("the reader lists %+v", dbs.Databases)
	}

	// An Operator manages Operator and ValidUser certificates, not
	// ClusterAdmin ones, and cannot revoke the certificate it uses.
	op := c.issue(t, "op")
	oc := c.client(t, op.PEM)
	put(admin, "op", op.CertificateBase64, "Operator", `{}`, 204)
	extra := c.issue(t, "extra")
	if b := put(oc, "extra", extra.CertificateBase64, "ClusterAdmin", `{}`, 403); !strings.Contains(b, "ClusterAdmin") {
		t.Fatalf("operator granting ClusterAdmin: %s", b)
	}
	put(oc, "extra", extra.CertificateBase64, "ValidUser", `{"other":"ReadWrite"}`, 204)
	must(t, 400, oc, "DELETE", n.url+"/admin/certificates?thumbprint="+op.Thumbprint, "")
	must(t, 403, oc, "POST", n.url+"/admin/cluster/stepdown", "")
	must(t, 204, oc, "DELETE", n.url+"/admin/certificates?thumbprint="+extra.Thumbprint, "")

	var list struct {
		Results                    []map[string]any
		LoadedServerCert           string
		WellKnownAdminCertificates []string
	}
	json.Unmarshal([]byte(must(t, 200, admin, "GET", n.url+"/admin/certificates?metadataOnly=true", "")), &list)
	if len(list.Results) != 2 || list.LoadedServerCert == "" {
		t.Fatalf("certificates: %+v", list)
	}
	// --well-known-admin-certs was given as a file: its thumbprint is shown.
	if len(list.WellKnownAdminCertificates) != 1 || list.WellKnownAdminCertificates[0] != c.setup.Admin.Thumbprint {
		t.Fatalf("well-known admins: %v, want [%s]", list.WellKnownAdminCertificates, c.setup.Admin.Thumbprint)
	}
	for _, r := range list.Results {
		if _, ok := r["Certificate"]; ok {
			t.Fatal("metadataOnly returned the certificate")
		}
	}

	// Who did what is in the audit log.
	var audit struct {
		Results []struct{ Who, Action, Target string }
	}
	json.Unmarshal([]byte(must(t, 200, admin, "GET", n.url+"/admin/audit?action=certificate", "")), &audit)
	if len(audit.Results) < 3 || audit.Results[len(audit.Results)-1].Who != "admin" || !strings.Contains(audit.Results[len(audit.Results)-1].Target, reader.Thumbprint) {
		t.Fatalf("audit: %+v", audit.Results)
	}
	must(t, 403, rc, "GET", n.url+"/admin/audit", "")

	// Subscription workers: TLS, then the certificate must read the
	// database; the node tells workers which certificate to expect.
	var tcp struct{ Url, Certificate string }
	json.Unmarshal([]byte(must(t, 200, admin, "GET", n.url+"/info/remote-task/tcp?database=shop", "")), &tcp)
	if tcp.Certificate != base64.StdEncoding.EncodeToString(c.nodeDER(t)) {
		t.Fatalf("tcp info certificate: %.80s", tcp.Certificate)
	}
	worker := func(pemFile, db string) string {
		kp, _ := tls.LoadX509KeyPair(pemFile, pemFile)
		conn, err := tls.Dial("tcp", n.addr, &tls.Config{RootCAs: c.ca, Certificates: []tls.Certificate{kp}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, `{"DatabaseName":%q,"Operation":"Subscription","OperationVersion":53000}`, db)
		var answer struct{ Status, Message string }
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if err := json.NewDecoder(conn).Decode(&answer); err != nil {
			t.Fatal(err)
		}
		return answer.Status
	}
	if s := worker(reader.PEM, "shop"); s != "Ok" {
		t.Fatalf("reader worker on shop: %s", s)
	}
	if s := worker(reader.PEM, "other"); s != "AuthorizationFailed" {
		t.Fatalf("reader worker on other: %s", s)
	}

	// Raft: mutual TLS with a node certificate, nothing else.
	raftAddr := n.srv.cluster.RaftAddr()
	kp, _ := tls.LoadX509KeyPair(c.setup.Admin.PEM, c.setup.Admin.PEM)
	// A refused connection is closed at once; one that got through waits
	// for its first RPC (a read timeout).
	refused := func(err error) bool {
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}
	for name, cfg := range map[string]*tls.Config{"admin": {InsecureSkipVerify: true, Certificates: []tls.Certificate{kp}}, "none": {InsecureSkipVerify: true}} {
		conn, err := tls.Dial("tcp", raftAddr, cfg)
		if err == nil {
			conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		if !refused(err) {
			t.Fatalf("raft port accepted a %s certificate: %v", name, err)
		}
	}
	if conn, err := net.Dial("tcp", raftAddr); err == nil {
		conn.Write([]byte("RKRY-RAFT1" + strings.Repeat("x", 32)))
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
		if !refused(err) {
			t.Fatalf("raft port kept a plain connection open: %v", err)
		}
	}
}

func (c *certs) nodeDER(t *testing.T) []byte {
	kp, err := tls.LoadX509KeyPair(c.setup.NodeCert, c.setup.NodeKey)
	if err != nil {
		t.Fatal(err)
	}
	return kp.Certificate[0]
}

// A refused request is answered at once, even when its body never comes:
// the node does not read the rest of a body it refused (a trickled body
// would otherwise hold the refusal and the connection).
func TestSecurityRefusalDoesNotWaitForTheBody(t *testing.T) {
	n := serveNode(t, Config{})
	for _, head := range []string{
		"PUT /databases/shop/docs?id=a HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 1000\r\n\r\n",                     // the guard
		"POST /internal/cluster/apply HTTP/1.1\r\nHost: " + n.addr + "\r\nContent-Length: 1000\r\n\r\n{",                   // the access rule
		"PUT /databases/nope/docs?id=a HTTP/1.1\r\nHost: " + n.addr + "\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":", // the handler
	} {
		conn, err := net.Dial("tcp", n.addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, head)
		conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		if err != nil {
			t.Fatalf("%q: no answer while the body is pending: %v", head, err)
		}
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("%q: %d", head, resp.StatusCode)
		}
	}
}
