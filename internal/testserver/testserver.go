// Package testserver starts a real Rookery node on a random loopback port
// with its data in a temporary directory, for tests.
package testserver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/pki"
	"github.com/rookerydb/rookery/web"
)

// Node is a running test node.
type Node struct {
	URL     string
	DataDir string
	Server  *web.Server
	// Certs are the cluster's certificates of a Secured node (nil
	// otherwise).
	Certs *pki.SetupResult
}

// Options tune a test node.
type Options struct {
	NodeTag string
	DataDir string // a fresh t.TempDir() when empty
	// Secured runs the node with TLS and client certificates: the
	// certificates of a one-node cluster are made in a temporary directory
	// (as `studio setup` does) and the node's URL is https. Node.Certs
	// tells where they are; admin.pem is a well-known ClusterAdmin.
	Secured bool
	// IndexCleanupInterval is how often the auto-index cleanup runs
	// (web's default when zero).
	IndexCleanupInterval time.Duration
}

// Start starts a node and stops it when the test ends.
func Start(t testing.TB, opts ...Options) *Node {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	if o.NodeTag == "" {
		o.NodeTag = "A"
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := web.Config{
		HTTPAddr: l.Addr().String(),
		RaftAddr: "127.0.0.1:0", // port+1000 may be taken on a busy machine
		DataDir:  o.DataDir,
		NodeTag:  o.NodeTag,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		// Short Raft timeouts: a one-node cluster leads at once.
		ElectionTimeout: 100 * time.Millisecond,
		// httptest's requests name example.com; tests drive the handler
		// with them as well as over the network.
		AllowedHosts:         []string{"example.com"},
		IndexCleanupInterval: o.IndexCleanupInterval,
	}
	var certs *pki.SetupResult
	if o.Secured {
		certs, err = pki.Setup(t.TempDir(), pki.SetupOptions{Hosts: []string{"127.0.0.1", "localhost"}, PFXPassword: "test"})
		if err != nil {
			t.Fatal(err)
		}
		cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = certs.NodeCert, certs.NodeKey, certs.CA
		cfg.WellKnownAdminCerts = []string{certs.Admin.Thumbprint}
	}
	srv, err := web.New(cfg)
	if err != nil {
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
	scheme := "http://"
	if o.Secured {
		scheme = "https://"
	}
	return &Node{URL: scheme + l.Addr().String(), DataDir: o.DataDir, Server: srv, Certs: certs}
}
