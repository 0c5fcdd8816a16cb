package web

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/pki"
)

// testNode is a node served on a loopback port, in this process.
type testNode struct {
	srv  *Server
	url  string
	addr string
	dir  string
}

// serveNode serves a node with cfg (HTTPAddr, DataDir, Logger and timings
// filled in) until the test ends.
func serveNode(t *testing.T, cfg Config) *testNode {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = l.Addr().String()
	if cfg.RaftAddr == "" {
		cfg.RaftAddr = "127.0.0.1:0"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.NodeTag == "" {
		cfg.NodeTag = "A"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.ElectionTimeout == 0 {
		cfg.ElectionTimeout = 100 * time.Millisecond
	}
	srv, err := New(cfg)
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	return &testNode{srv: srv, url: srv.URL(), addr: l.Addr().String(), dir: cfg.DataDir}
}

// certs is a secured cluster's certificates (studio setup's files).
type certs struct {
	dir   string
	setup *pki.SetupResult
	ca    *x509.CertPool
}

func makeCerts(t *testing.T) *certs {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	res, err := pki.Setup(dir, pki.SetupOptions{Hosts: []string{"127.0.0.1", "localhost"}, PFXPassword: "test"})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	b, err := os.ReadFile(res.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(b)
	return &certs{dir: dir, setup: res, ca: pool}
}

// secured is the configuration of a secured node with these certificates.
func (c *certs) secured() Config {
	return Config{TLSCert: c.setup.NodeCert, TLSKey: c.setup.NodeKey, TLSCA: c.setup.CA, WellKnownAdminCerts: []string{c.setup.Admin.Thumbprint}}
}

// client is an HTTPS client presenting the certificate in pemFile (none
// when empty) and trusting the cluster's CA.
func (c *certs) client(t *testing.T, pemFile string) *http.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: c.ca}
	if pemFile != "" {
		kp, err := tls.LoadX509KeyPair(pemFile, pemFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// issue makes another client certificate from the cluster's CA.
func (c *certs) issue(t *testing.T, name string) *pki.ClientResult {
	t.Helper()
	r, err := pki.IssueClient(c.dir, pki.ClientOptions{Name: name, PFXPassword: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// call sends a request and returns the status and body.
func call(t *testing.T, c *http.Client, method, url, body string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// must is call that fails the test unless the status is want.
func must(t *testing.T, want int, c *http.Client, method, url, body string, headers ...string) string {
	t.Helper()
	status, b := call(t, c, method, url, body, headers...)
	if status != want {
		t.Fatalf("%s %s: %d, want %d: %.500s", method, url, status, want, b)
	}
	return b
}

// eventually retries fn until it returns nil or 10 s pass.
func eventually(t *testing.T, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
