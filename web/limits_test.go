package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func (s *Server) limitsSlow() *prometheus.CounterVec { return s.limits.slow }

// startNodeWith starts a node with the given limits on a loopback port.
func startNodeWith(t testing.TB, cfg Config) (*Server, string) {
	t.Helper()
	cfg.DataDir, cfg.NodeTag = t.TempDir(), "A"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.ElectionTimeout = 100 * time.Millisecond
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(l); close(done) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	})
	return srv, "http://" + l.Addr().String()
}

// docReader streams a document of about size bytes, {"x":"aaa…"}, without
// holding it in memory.
func docReader(size int64) io.Reader {
	head, tail := `{"x":"`, `","@metadata":{"@collection":"Big"}}`
	fill := size - int64(len(head)+len(tail))
	return io.MultiReader(strings.NewReader(head), io.LimitReader(repeatReader('a'), fill), strings.NewReader(tail))
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// bulkReader streams {"Commands":[{PUT big}]} around a document of about
// size bytes.
func bulkReader(id string, size int64) io.Reader {
	return io.MultiReader(strings.NewReader(`{"Commands":[{"Id":"`+id+`","Type":"PUT","Document":`), docReader(size), strings.NewReader(`}]}`))
}

// manyReader streams a batch of n documents of about size bytes each.
func manyReader(prefix string, n int, size int64) io.Reader {
	parts := []io.Reader{strings.NewReader(`{"Commands":[`)}
	for i := 0; i < n; i++ {
		if i > 0 {
			parts = append(parts, strings.NewReader(","))
		}
		parts = append(parts, strings.NewReader(fmt.Sprintf(`{"Id":"%s-%d","Type":"PUT","Document":`, prefix, i)), docReader(size), strings.NewReader("}"))
	}
	return io.MultiReader(append(parts, strings.NewReader("]}"))...)
}

// scaledLimits are the default limits, divided by scale under the race
// detector.
func scaledLimits() Config {
	return Config{MaxRequestBody: DefaultMaxRequestBody / scale, MaxDocumentSize: DefaultMaxDocumentSize / scale}
}

type ravenEnvelope struct{ Url, Type, Message, Error string }

func send(t *testing.T, method, url string, body io.Reader, size int64) (int, ravenEnvelope) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size // -1: chunked, no length announced
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var env ravenEnvelope
	_ = json.Unmarshal(b, &env)
	return resp.StatusCode, env
}

func docStatus(t *testing.T, base, db, id string) int {
	t.Helper()
	resp, err := http.Get(base + "/databases/" + db + "/docs?id=" + id)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Finding 9: a 200 MB document was accepted (the limit was 512 MiB). Now
// the request body is refused over --max-request-body (whether its length
// is announced or not), a document over --max-document-size is refused
// even in a body under the limit, each with a 413 in RavenDB's envelope
// that names the limit and its flag, and nothing is stored.
func TestSecurityF9DocumentOverLimitRefused(t *testing.T) {
	srv, base := startNodeWith(t, scaledLimits())
	createDB(t, base, "big")
	const big = 200 << 20 / scale
	cases := []struct {
		name, method, path string
		body               io.Reader
		size               int64
		flag               string
	}{
		{"put 200 MB with length", "PUT", "/databases/big/docs?id=big/1", docReader(big), big, "--max-request-body"},
		{"put 200 MB chunked", "PUT", "/databases/big/docs?id=big/2", docReader(big), -1, "--max-document-size"},
		{"bulk 200 MB of 20 MB documents chunked", "POST", "/databases/big/bulk_docs", manyReader("big/3", 10, 20<<20/scale), -1, "--max-request-body"},
		{"put 40 MB document", "PUT", "/databases/big/docs?id=big/4", docReader(40 << 20 / scale), 40 << 20 / scale, "--max-document-size"},
		{"bulk 40 MB document", "POST", "/databases/big/bulk_docs", bulkReader("big/5", 40<<20/scale), -1, "--max-document-size"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, env := send(t, c.method, base+c.path, c.body, c.size)
			if status != http.StatusRequestEntityTooLarge {
				t.Fatalf("status %d, want 413; %+v", status, env)
			}
			if env.Type != "Raven.Client.Exceptions.BadRequestException" || !strings.Contains(env.Message, c.flag) || env.Error != env.Message {
				t.Fatalf("envelope %+v does not name %s", env, c.flag)
			}
		})
	}
	for i := 1; i <= 5; i++ {
		if s := docStatus(t, base, "big", fmt.Sprintf("big/%d", i)); s != http.StatusNotFound {
			t.Fatalf("big/%d: status %d, want 404 (nothing stored)", i, s)
		}
	}
	db, _ := srv.Catalog().Get("big")
	if n := db.Stats().Documents; n != 0 {
		t.Fatalf("%d documents stored", n)
	}
	if got := testutil.ToFloat64(srv.limits.large); got != 2 {
		t.Fatalf("rookery_http_request_too_large_total = %v, want 2", got)
	}
	// The server still takes ordinary writes on the same port.
	if status, env := send(t, "PUT", base+"/databases/big/docs?id=small", strings.NewReader(`{"a":1}`), 7); status != http.StatusCreated {
		t.Fatalf("small put: %d %+v", status, env)
	}
}

// A body just under both limits, sent at full speed, is stored: a
// 30 MiB document and a 100 MiB batch.
func TestLargeBodyUnderLimitPasses(t *testing.T) {
	_, base := startNodeWith(t, scaledLimits())
	createDB(t, base, "big")
	if status, env := send(t, "PUT", base+"/databases/big/docs?id=doc30", docReader(30<<20/scale), 30<<20/scale); status != http.StatusCreated {
		t.Fatalf("30 MiB document: %d %+v", status, env)
	}
	// 100 MiB of 1 KiB documents in one SaveChanges.
	pr, pw := io.Pipe()
	go func() {
		w := bufio.NewWriterSize(pw, 1<<16)
		w.WriteString(`{"Commands":[`)
		filler := strings.Repeat("z", 1000)
		for i := 0; i < 100_000/scale; i++ {
			if i > 0 {
				w.WriteByte(',')
			}
			fmt.Fprintf(w, `{"Id":"many/%d","Type":"PUT","Document":{"f":"%s","@metadata":{"@collection":"Many"}}}`, i, filler)
		}
		w.WriteString(`]}`)
		w.Flush()
		pw.Close()
	}()
	if status, env := send(t, "POST", base+"/databases/big/bulk_docs", pr, -1); status != http.StatusCreated {
		t.Fatalf("100 MiB batch: %d %+v", status, env)
	}
	if s := docStatus(t, base, "big", fmt.Sprintf("many/%d", 100_000/scale-1)); s != http.StatusOK {
		t.Fatalf("last document of the batch: %d", s)
	}
}

// rawRequest opens a connection and sends a request's head.
func rawRequest(t *testing.T, base, head string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	return c
}

// Finding 9: a body trickled at 1 byte/s held its connection past 80 s.
// With the defaults (240 bytes/s after 5 s) it is cut off within the grace
// period and a few seconds, with a 408 envelope, and nothing is stored.
func TestSecurityF9SlowBodyCutOff(t *testing.T) {
	srv, base := startNodeWith(t, Config{})
	createDB(t, base, "slow")
	c := rawRequest(t, base, "PUT /databases/slow/docs?id=slow/1 HTTP/1.1\r\nHost: "+strings.TrimPrefix(base, "http://")+"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
	start := time.Now()
	answered := make(chan string, 1)
	go func() {
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			answered <- "error: " + err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		answered <- fmt.Sprintf("%d %s", resp.StatusCode, b)
	}()
	body := `{"x":"` + strings.Repeat("s", 990) + `"}`
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	limit := DefaultMinDataRateGrace + 5*time.Second
	for i := 0; ; i++ {
		select {
		case got := <-answered:
			took := time.Since(start)
			if !strings.HasPrefix(got, "408 ") || !strings.Contains(got, "--min-data-rate") {
				t.Fatalf("answer after %v: %s", took, got)
			}
			t.Logf("cut off after %v and %d bytes", took.Round(100*time.Millisecond), i)
			if s := docStatus(t, base, "slow", "slow/1"); s != http.StatusNotFound {
				t.Fatalf("status %d: something was stored", s)
			}
			if got := testutil.ToFloat64(srv.limitsSlow().WithLabelValues("read")); got != 1 {
				t.Fatalf("rookery_http_slow_clients_total{direction=read} = %v", got)
			}
			return
		case <-tick.C:
			if time.Since(start) > limit {
				t.Fatalf("still connected after %v at 1 byte/s (grace %v)", time.Since(start), DefaultMinDataRateGrace)
			}
			_, _ = io.WriteString(c, body[i:i+1]) // the server may have closed its side: ignored
		}
	}
}

// A body at a rate above the minimum is never cut, however long it takes;
// one below it is, after the grace period. (A raised minimum keeps this
// test short: 64 KiB/s after 1 s.)
func TestMinDataRateKeepsSteadyUploads(t *testing.T) {
	_, base := startNodeWith(t, Config{MinDataRate: 64 << 10, MinDataRateGrace: time.Second})
	createDB(t, base, "rate")
	upload := func(id string, perTick int, ticks int) (int, ravenEnvelope) {
		size := int64(perTick * ticks)
		pr, pw := io.Pipe()
		go func() {
			r := docReader(size)
			buf := make([]byte, perTick)
			for {
				n, err := io.ReadFull(r, buf)
				if n > 0 {
					if _, werr := pw.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					pw.Close()
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		return send(t, "PUT", base+"/databases/rate/docs?id="+id, pr, size)
	}
	// 1 MiB/s for about 3 s: well above the minimum.
	if status, env := upload("steady", 100<<10, 30); status != http.StatusCreated {
		t.Fatalf("steady upload: %d %+v", status, env)
	}
	// 10 KiB/s: below it.
	if status, env := upload("trickle", 1<<10, 60); status != http.StatusRequestTimeout || !strings.Contains(env.Message, "--min-data-rate") {
		t.Fatalf("trickle: %d %+v", status, env)
	}
	if s := docStatus(t, base, "rate", "trickle"); s != http.StatusNotFound {
		t.Fatalf("trickle stored: %d", s)
	}
}

// A client that asks for a large response and stops reading is cut off
// once the socket buffers are full, instead of holding its goroutine and
// descriptor forever.
func TestMinDataRateCutsStalledReader(t *testing.T) {
	srv, base := startNodeWith(t, Config{MinDataRate: 64 << 10, MinDataRateGrace: time.Second})
	createDB(t, base, "read")
	// Stored directly (no parsing: quick under the race detector too), and
	// larger than what the socket buffers absorb.
	putHuge(t, srv, "read", "big", 30<<20)
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := io.WriteString(c, "GET /databases/read/docs?id=big HTTP/1.1\r\nHost: "+strings.TrimPrefix(base, "http://")+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// Never read.
	deadline := time.Now().Add(30 * time.Second)
	for testutil.ToFloat64(srv.limitsSlow().WithLabelValues("write")) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("a reader that never reads was not cut off")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// BenchmarkBulkDocsLimits is a SaveChanges of 1,000 documents (~1 MB) over
// HTTP with the request limits on (defaults) and off: the body deadline
// and connection cap must cost nothing measurable.
func BenchmarkBulkDocsLimits(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  Config
	}{{"limits=on", Config{}}, {"limits=off", Config{MaxConnections: -1, MaxRequestBody: -1, MaxDocumentSize: -1, MinDataRate: -1}}} {
		b.Run(bc.name, func(b *testing.B) {
			_, base := startNodeWith(b, bc.cfg)
			req, _ := http.NewRequest("PUT", base+"/admin/databases?name=bench", strings.NewReader(`{"DatabaseName":"bench"}`))
			if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 201 {
				b.Fatalf("create: %v", err)
			}
			var sb strings.Builder
			filler := strings.Repeat("z", 900)
			b.SetBytes(0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sb.Reset()
				sb.WriteString(`{"Commands":[`)
				for j := 0; j < 1000; j++ {
					if j > 0 {
						sb.WriteByte(',')
					}
					fmt.Fprintf(&sb, `{"Id":"d/%d-%d","Type":"PUT","Document":{"f":"%s","@metadata":{"@collection":"D"}}}`, i, j, filler)
				}
				sb.WriteString(`]}`)
				resp, err := http.Post(base+"/databases/bench/bulk_docs", "application/json", strings.NewReader(sb.String()))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}
