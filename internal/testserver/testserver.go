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

	"github.com/rookerydb/rookery/web"
)

// Node is a running test node.
type Node struct {
	URL     string
	DataDir string
	Server  *web.Server
}

// Options tune a test node.
type Options struct {
	NodeTag string
	DataDir string // a fresh t.TempDir() when empty
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
	srv, err := web.New(web.Config{
		HTTPAddr: l.Addr().String(),
		RaftAddr: "127.0.0.1:0", // port+1000 may be taken on a busy machine
		DataDir:  o.DataDir,
		NodeTag:  o.NodeTag,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		// Short Raft timeouts: a one-node cluster leads at once.
		ElectionTimeout: 100 * time.Millisecond,
		// httptest's requests name example.com; tests drive the handler
		// with them as well as over the network.
		AllowedHosts: []string{"example.com"},
	})
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
	return &Node{URL: "http://" + l.Addr().String(), DataDir: o.DataDir, Server: srv}
}
