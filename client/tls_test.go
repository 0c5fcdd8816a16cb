package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/pki"
	"github.com/rookerydb/rookery/internal/testserver"
)

// TLS tests: a real secured node (internal/testserver with Secured: TLS on
// its port, client certificates as identities, admin.pem a well-known
// ClusterAdmin), and certificates made as `studio setup` makes them.

// securedConventions are conventions presenting certPEM (a cert+key PEM
// file) and trusting the node's CA.
func securedConventions(t testing.TB, n *testserver.Node, certPEM string) *Conventions {
	t.Helper()
	conv := DefaultConventions()
	if certPEM != "" {
		cert, err := LoadCertificate(certPEM)
		if err != nil {
			t.Fatal(err)
		}
		conv.Certificate = cert
	}
	cas, err := LoadTrustedCAs(n.Certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	conv.TrustedCAs = cas
	return conv
}

// issueClient makes another client certificate from the node's CA (not
// registered) and returns its cert+key PEM file.
func issueClient(t testing.TB, n *testserver.Node, name string) *pki.ClientResult {
	t.Helper()
	res, err := pki.IssueClient(n.Certs.Dir, pki.ClientOptions{Name: name, PFXPassword: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// registerCertificate registers cert with the admin store's server
// executor (PUT /admin/certificates).
func registerCertificate(t testing.TB, admin *DocumentStore, c *pki.ClientResult, clearance string, perms map[string]string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"Name": c.Name, "Certificate": c.CertificateBase64, "SecurityClearance": clearance, "Permissions": perms})
	st, b, err := admin.ServerRequestExecutor().Do(context.Background(), http.MethodPut, "/admin/certificates", body)
	if err != nil || st != http.StatusNoContent {
		t.Fatalf("register %s: %d %v %s", c.Name, st, err, b)
	}
}

func TestLoadCertificateAndTrustedCAs(t *testing.T) {
	dir := t.TempDir()
	res, err := pki.Setup(dir, pki.SetupOptions{Hosts: []string{"localhost"}, PFXPassword: "test"})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := LoadCertificate(res.Admin.PEM)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Leaf == nil || cert.Leaf.Subject.CommonName != "admin" || cert.PrivateKey == nil {
		t.Fatalf("admin.pem loaded as %+v", cert.Leaf)
	}
	if got := pki.Thumbprint(cert.Certificate[0]); got != res.Admin.Thumbprint {
		t.Fatalf("thumbprint %s, setup printed %s", got, res.Admin.Thumbprint)
	}
	pool, err := LoadTrustedCAs(res.CA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("admin certificate does not chain to the loaded CA: %v", err)
	}

	// A certificate without its key, a file that is no PEM, a missing file
	// and a huge file are refused with errors naming the file.
	noPEM := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(noPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.pem")
	if err := os.WriteFile(huge, make([]byte, maxPEMFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{res.Admin.CRT, noPEM, filepath.Join(dir, "missing.pem"), huge} {
		if _, err := LoadCertificate(bad); err == nil || !strings.Contains(err.Error(), filepath.Base(bad)) {
			t.Errorf("LoadCertificate(%s): %v", filepath.Base(bad), err)
		}
	}
	for _, bad := range []string{noPEM, huge} {
		if _, err := LoadTrustedCAs(bad); err == nil || !strings.Contains(err.Error(), filepath.Base(bad)) {
			t.Errorf("LoadTrustedCAs(%s): %v", filepath.Base(bad), err)
		}
	}
}

// The announced certificate is pinned: the node's own passes, any other
// fails, and with TrustedCAs the chain is checked too.
func TestWorkerPinsTheAnnouncedCertificate(t *testing.T) {
	dir := t.TempDir()
	res, err := pki.Setup(dir, pki.SetupOptions{Hosts: []string{"localhost"}, PFXPassword: "test"})
	if err != nil {
		t.Fatal(err)
	}
	node, err := tls.LoadX509KeyPair(res.NodeCert, res.NodeKey)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.Setup(t.TempDir(), pki.SetupOptions{Hosts: []string{"localhost"}, PFXPassword: "test"})
	if err != nil {
		t.Fatal(err)
	}
	otherNode, _ := tls.LoadX509KeyPair(other.NodeCert, other.NodeKey)
	roots, _ := LoadTrustedCAs(res.CA)
	otherRoots, _ := LoadTrustedCAs(other.CA)
	der := node.Certificate[0]

	if err := pinVerifier(der, nil)([][]byte{der}, nil); err != nil {
		t.Errorf("own certificate, no CAs: %v", err)
	}
	if err := pinVerifier(der, roots)([][]byte{der}, nil); err != nil {
		t.Errorf("own certificate, its CA: %v", err)
	}
	if err := pinVerifier(der, nil)([][]byte{otherNode.Certificate[0]}, nil); !errors.Is(err, errServerCertificate) {
		t.Errorf("another certificate: %v", err)
	}
	if err := pinVerifier(der, nil)(nil, nil); !errors.Is(err, errServerCertificate) {
		t.Errorf("no certificate: %v", err)
	}
	if err := pinVerifier(der, otherRoots)([][]byte{der}, nil); err == nil || !strings.Contains(err.Error(), "TrustedCAs") {
		t.Errorf("own certificate, a foreign CA: %v", err)
	}
	if _, err := workerTLSConfig(DefaultConventions(), "!!not base64"); err == nil {
		t.Error("an unreadable announced certificate was accepted")
	}
}

func TestSecuredStoreWithAdminCertificate(t *testing.T) {
	n := testserver.Start(t, testserver.Options{Secured: true})
	ctx := context.Background()
	const db = "secured"
	log := &requestLog{}
	conv := securedConventions(t, n, n.Certs.Admin.PEM)
	conv.OnRequest = log.record
	store := NewDocumentStoreWithConventions([]string{n.URL}, db, conv)
	defer store.Close()
	if err := store.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}

	s := store.OpenSession()
	r := &Reading{Seq: 1, Kind: "hit"}
	if err := s.Store(r); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreWithID(&Reading{Seq: 2, Kind: "hit"}, "readings|"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	got, err := Load[Reading](store.OpenSession(), r.ID)
	if err != nil || got == nil || got.Seq != 1 {
		t.Fatalf("load %s: %+v %v", r.ID, got, err)
	}
	for _, e := range log.events {
		if !strings.HasPrefix(e.URL, "https://") || e.Err != nil {
			t.Fatalf("request %s %s: %v", e.Method, e.URL, e.Err)
		}
	}

	// A subscription worker over TCP+TLS: it connects to the node, which
	// presents the certificate it announced, and gets both documents.
	name, err := store.Subscriptions().Create(ctx, SubscriptionOptions{Name: "tls", Query: "from Readings"})
	if err != nil {
		t.Fatal(err)
	}
	w := store.Subscriptions().GetWorker(WorkerOptions{Name: name, CloseWhenNoDocsLeft: true})
	var announced string
	var tlsConn bool
	w.afterLocate = func(info *tcpInfo) { announced = info.Certificate }
	w.afterOptions = func(c net.Conn) { _, tlsConn = c.(*tls.Conn) }
	seen := map[string]bool{}
	wctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	if err := w.Run(wctx, func(_ context.Context, b *Batch) error {
		for _, it := range b.Items {
			seen[it.ID] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !tlsConn {
		t.Fatal("the worker's connection is not TLS")
	}
	if !seen[r.ID] || !seen["readings/1"] || len(seen) != 2 {
		t.Fatalf("worker got %v", seen)
	}
	leaf, _ := base64.StdEncoding.DecodeString(announced)
	nodeCert, _ := tls.LoadX509KeyPair(n.Certs.NodeCert, n.Certs.NodeKey)
	if string(leaf) != string(nodeCert.Certificate[0]) {
		t.Fatal("GET /info/remote-task/tcp did not announce the node's certificate")
	}

	// Told to expect another certificate (here the admin's), the worker
	// refuses the real node's handshake.
	u, _ := url.Parse(n.URL)
	wrong := base64.StdEncoding.EncodeToString(conv.Certificate.Certificate[0])
	if c, err := w.dial(ctx, &tcpInfo{URL: "tcp://" + u.Host, Certificate: wrong}); !errors.Is(err, errServerCertificate) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial with a wrong announced certificate: %v", err)
	}
}

func TestSecuredStoreRefusals(t *testing.T) {
	n := testserver.Start(t, testserver.Options{Secured: true})
	ctx := context.Background()
	const db = "refusals"
	admin := NewDocumentStoreWithConventions([]string{n.URL}, db, securedConventions(t, n, n.Certs.Admin.PEM))
	defer admin.Close()
	if err := admin.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	s := admin.OpenSession()
	if err := s.StoreWithID(&Reading{Seq: 1, Kind: "hit"}, "readings/1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveChanges(); err != nil {
		t.Fatal(err)
	}
	// The same node under two names: a store sees two nodes, and must not
	// take a refusal of its certificate for a node failure.
	u, _ := url.Parse(n.URL)
	urls := []string{n.URL, "https://localhost:" + u.Port()}

	refused := func(what string, conv *Conventions, noCert bool) {
		t.Helper()
		log := &requestLog{}
		conv.OnRequest = log.record
		st := NewDocumentStoreWithConventions(urls, db, conv)
		defer st.Close()
		_, err := Load[Reading](st.OpenSession(), "readings/1")
		var ae *AuthorizationError
		if !errors.Is(err, ErrAuthorization) || !errors.As(err, &ae) {
			t.Fatalf("%s: load gave %v, want an *AuthorizationError", what, err)
		}
		if ae.StatusCode != http.StatusForbidden || ae.Type != "InvalidAuth" || ae.NoCertificate != noCert {
			t.Errorf("%s: %+v", what, ae)
		}
		if noCert && !strings.Contains(err.Error(), "Conventions.Certificate") {
			t.Errorf("%s: the error does not say how to fix it: %v", what, err)
		}
		if got := log.total(); got != 1 {
			t.Errorf("%s: %d requests, want 1 (a refusal is not retried on the other node)", what, got)
		}
		if err := st.CreateDatabase(ctx, "other"); !errors.Is(err, ErrAuthorization) {
			t.Errorf("%s: create database: %v", what, err)
		}
		w := st.Subscriptions().GetWorker(WorkerOptions{Name: "any", RetryDelay: 10 * time.Millisecond})
		if err := w.Run(ctx, func(context.Context, *Batch) error { return nil }); !errors.Is(err, ErrAuthorization) {
			t.Errorf("%s: worker: %v", what, err)
		}
	}
	refused("no certificate", securedConventions(t, n, ""), true)
	stranger := issueClient(t, n, "stranger") // the cluster's CA issued it, nobody registered it
	refused("unregistered certificate", securedConventions(t, n, stranger.PEM), false)

	// A read-only certificate: loads, but saves, identities and admin
	// operations are refused.
	reader := issueClient(t, n, "reader")
	registerCertificate(t, admin, reader, "ValidUser", map[string]string{db: "Read"})
	rs := NewDocumentStoreWithConventions(urls, db, securedConventions(t, n, reader.PEM))
	defer rs.Close()
	got, err := Load[Reading](rs.OpenSession(), "readings/1")
	if err != nil || got == nil || got.Seq != 1 {
		t.Fatalf("reader load: %+v %v", got, err)
	}
	ws := rs.OpenSession()
	if err := ws.StoreWithID(&Reading{Seq: 9}, "readings/9"); err != nil {
		t.Fatal(err)
	}
	if err := ws.SaveChanges(); !errors.Is(err, ErrAuthorization) {
		t.Fatalf("reader save: %v", err)
	}
	if _, err := rs.NextIdentity(ctx, "readings"); !errors.Is(err, ErrAuthorization) {
		t.Fatalf("reader identity: %v", err)
	}

	// A certificate with http URLs is refused before any request.
	cert, _ := LoadCertificate(n.Certs.Admin.PEM)
	conv := DefaultConventions()
	conv.Certificate = cert
	plain := NewDocumentStoreWithConventions([]string{"http://" + u.Host}, db, conv)
	defer plain.Close()
	if _, err := Load[Reading](plain.OpenSession(), "readings/1"); err == nil || !strings.Contains(err.Error(), "https") {
		t.Fatalf("certificate with an http URL: %v", err)
	}
}

// A worker whose certificate is revoked between locating the node and the
// TCP handshake is refused by the handshake (AuthorizationFailed), which
// is ErrAuthorization and is not retried.
func TestWorkerRefusedByTheHandshake(t *testing.T) {
	n := testserver.Start(t, testserver.Options{Secured: true})
	ctx := context.Background()
	const db = "handshake"
	admin := NewDocumentStoreWithConventions([]string{n.URL}, db, securedConventions(t, n, n.Certs.Admin.PEM))
	defer admin.Close()
	if err := admin.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	name, err := admin.Subscriptions().Create(ctx, SubscriptionOptions{Query: "from Readings"})
	if err != nil {
		t.Fatal(err)
	}
	reader := issueClient(t, n, "worker")
	registerCertificate(t, admin, reader, "ValidUser", map[string]string{db: "Read"})
	rs := NewDocumentStoreWithConventions([]string{n.URL}, db, securedConventions(t, n, reader.PEM))
	defer rs.Close()
	w := rs.Subscriptions().GetWorker(WorkerOptions{Name: name, RetryDelay: 10 * time.Millisecond})
	located := 0
	w.afterLocate = func(*tcpInfo) {
		located++
		st, b, err := admin.ServerRequestExecutor().Do(ctx, http.MethodDelete, "/admin/certificates?thumbprint="+reader.Thumbprint, nil)
		if err != nil || st != http.StatusNoContent {
			t.Errorf("revoke: %d %v %s", st, err, b)
		}
	}
	err = w.Run(ctx, func(context.Context, *Batch) error { return nil })
	var se *SubscriptionError
	if !errors.Is(err, ErrAuthorization) || !errors.As(err, &se) || se.Status != SubscriptionStatusAuthorizationFailed {
		t.Fatalf("worker: %v", err)
	}
	if located != 1 {
		t.Fatalf("located %d times: the refusal was retried", located)
	}
}
