package web

import (
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzWorkerConnection feeds arbitrary bytes to the subscription worker
// protocol, as a worker's side of a connection: whatever arrives, the
// connection ends (the input is finite) without a panic, and anything the
// server answers is a sequence of JSON objects and heartbeats.
func FuzzWorkerConnection(f *testing.F) {
	f.Add([]byte(`{"DatabaseName":"db","Operation":"Subscription","OperationVersion":53000}{"SubscriptionName":"s","Strategy":"OpenIfFree","MaxDocsPerBatch":10}{"Type":"Acknowledge"}{"Type":"Acknowledge"}`))
	f.Add([]byte(`{"DatabaseName":"db","Operation":"Subscription","OperationVersion":40}{"DatabaseName":"db","Operation":"Subscription","OperationVersion":53000}{"SubscriptionName":"nope"}{"Type":"Acknowledge"}`))
	f.Add([]byte(`{"DatabaseName":"db","Operation":"Replication","OperationVersion":1}`))
	f.Add([]byte(`{"DatabaseName":"db","Operation":"Drop","OperationVersion":-1,"Info":"bye"}`))
	f.Add([]byte(`{"DatabaseName":`))
	f.Add([]byte("{}\r\n{}[1,2]\"x\""))
	// Deep and huge: a header nested 100k levels, an Info of 1 MiB, options
	// and acknowledgements past the limits.
	hdr := `{"DatabaseName":"db","Operation":"Subscription","OperationVersion":53000}`
	f.Add([]byte(strings.Repeat("{\"a\":", 100_000)))
	f.Add([]byte(`{"DatabaseName":"db","Operation":"Subscription","OperationVersion":53000,"Info":` + strings.Repeat("[", 100_000)))
	f.Add([]byte(`{"DatabaseName":"db","Operation":"Subscription","OperationVersion":53000,"Info":"` + strings.Repeat("x", 1<<20) + `"}`))
	f.Add([]byte(hdr + `{"SubscriptionName":"s","Strategy":"` + strings.Repeat("y", DefaultMaxWorkerMessage) + `"}`))
	f.Add([]byte(hdr + `{"SubscriptionName":"s","MaxDocsPerBatch":10}{"Type":"Acknowledge","X":` + strings.Repeat("[", 100_000) + `}`))
	f.Add([]byte(hdr + `{"SubscriptionName":"s","MaxDocsPerBatch":10}{"Type":"Acknowledge"}` + strings.Repeat(" ", 1<<20)))
	srv, err := New(Config{DataDir: f.TempDir(), NodeTag: "A", PublicURL: "http://fuzz.test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	// A database with documents and a subscription, so inputs that get
	// through the handshake reach delivery and acknowledgements.
	for _, r := range []struct{ method, url, body string }{
		{"PUT", "/admin/databases?name=db", `{"DatabaseName":"db"}`},
		{"PUT", "/databases/db/docs?id=orders/1", `{"Total":1,"@metadata":{"@collection":"Orders"}}`},
		{"PUT", "/databases/db/docs?id=orders/2", `{"Total":2,"@metadata":{"@collection":"Orders"}}`},
		{"PUT", "/databases/db/subscriptions", `{"Name":"s","Query":"from Orders where Total > 1"}`},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(r.method, r.url, strings.NewReader(r.body))
		req.RemoteAddr = "127.0.0.1:40000" // an unsecured node serves loopback callers
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code >= 300 {
			f.Fatalf("%s %s: %d %s", r.method, r.url, rec.Code, rec.Body)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		server, worker := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			srv.serveSubscriptionConn(server)
		}()
		go func() { _, _ = io.Copy(io.Discard, worker) }() // the server's answers
		go func() {
			_, _ = worker.Write(in)
			_ = worker.Close() // EOF after the input: the session must end
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("the connection did not end for input %q", in)
		}
	})
}
