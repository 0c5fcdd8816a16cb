package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/testserver"
	"github.com/rookerydb/rookery/web"
)

// genReader yields n pseudo-random bytes computed on the fly (xorshift), so
// the test holds no copy of the content.
type genReader struct {
	x    uint64
	left int64
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.left <= 0 {
		return 0, io.EOF
	}
	n := int64(len(p)) &^ 7
	if n == 0 {
		n = 8
	}
	if n > g.left {
		n = g.left
	}
	var b [8]byte
	for i := int64(0); i < n; i += 8 {
		g.x ^= g.x << 13
		g.x ^= g.x >> 7
		g.x ^= g.x << 17
		binary.LittleEndian.PutUint64(b[:], g.x)
		copy(p[i:n], b[:])
	}
	g.left -= n
	return int(n), nil
}

// heapPeak samples the Go heap until stop and returns the highest
// HeapInuse seen.
func heapPeak(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		var peak uint64
		var ms runtime.MemStats
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// A 100 MB attachment goes up and comes back down through a real server
// while the process's Go heap stays far below its size: the upload is
// staged to a file and copied in chunks, the download read chunk by chunk.
func TestAttachment100MBStreamsInBoundedMemory(t *testing.T) {
	const size = 100 << 20
	const limit = 32 << 20
	n := testserver.Start(t)
	call := func(method, url string, body io.Reader) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, url, body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	expectStatus := func(resp *http.Response, want int) {
		t.Helper()
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s", resp.Request.Method, resp.Request.URL, resp.StatusCode, b)
		}
	}
	expectStatus(call("PUT", n.URL+"/admin/databases?name=big", strings.NewReader(`{"DatabaseName":"big"}`)), 201)
	expectStatus(call("PUT", n.URL+"/databases/big/docs?id=files/1", strings.NewReader(`{"@metadata":{"@collection":"Files"}}`)), 201)

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	stop := make(chan struct{})
	peakc := heapPeak(stop)
	var stopOnce sync.Once
	defer stopOnce.Do(func() { close(stop) })

	// Upload, hashing what is sent.
	sent := sha256.New()
	body := io.TeeReader(&genReader{x: 88172645463325252, left: size}, sent)
	req, _ := http.NewRequest("PUT", n.URL+"/databases/big/attachments?id=files/1&name=big.bin&contentType=application/x-big", io.NopCloser(body))
	req.ContentLength = size
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	expectStatus(resp, 201)
	up := time.Since(start)
	want := base64.StdEncoding.EncodeToString(sent.Sum(nil))

	// Download, hashing what arrives.
	start = time.Now()
	resp = call("GET", n.URL+"/databases/big/attachments?id=files/1&name=big.bin", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	got := sha256.New()
	nread, err := io.CopyBuffer(got, resp.Body, make([]byte, 64<<10))
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	down := time.Since(start)
	stopOnce.Do(func() { close(stop) })
	peak := <-peakc

	if nread != size {
		t.Fatalf("downloaded %d bytes, want %d", nread, size)
	}
	if h := base64.StdEncoding.EncodeToString(got.Sum(nil)); h != want {
		t.Fatalf("downloaded content hash %s, uploaded %s", h, want)
	}
	if resp.Header.Get("Attachment-Hash") != want || resp.Header.Get("Attachment-Size") != strconv.Itoa(size) || resp.Header.Get("Content-Type") != "application/x-big" {
		t.Fatalf("headers %v", resp.Header)
	}
	t.Logf("100 MiB up in %s, down in %s; Go heap in use: %.1f MiB before, peak %.1f MiB", up.Round(time.Millisecond), down.Round(time.Millisecond),
		float64(base.HeapInuse)/(1<<20), float64(peak)/(1<<20))
	if peak > limit {
		t.Fatalf("peak Go heap in use %.1f MiB during the transfer, over %d MiB", float64(peak)/(1<<20), limit>>20)
	}
}

// Attachment requests with bad input get RavenDB's envelope and store
// nothing: a missing document, an empty name, an AttachmentPUT without its
// part, content over --max-attachment-size; a multipart bulk_docs stores
// its parts in command order.
func TestAttachmentBadInputAndMultipartBatch(t *testing.T) {
	srv, err := web.New(web.Config{DataDir: t.TempDir(), NodeTag: "A", PublicURL: "http://node-a.test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ElectionTimeout: 100 * time.Millisecond, MaxAttachmentSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	h := srv.Handler()
	big := strings.Repeat("x", 1001)
	check(t, h, []step{
		{name: "db", method: "PUT", url: "/admin/databases?name=att", body: `{"DatabaseName":"att"}`, status: 201},
		{name: "doc", method: "PUT", url: "/databases/att/docs?id=d/1", body: `{"@metadata":{"@collection":"D"}}`, status: 201},
		{name: "no doc", method: "PUT", url: "/databases/att/attachments?id=d/2&name=a", body: "x", status: 404, errType: "Raven.Client.Exceptions.Documents.DocumentDoesNotExistException"},
		{name: "no name", method: "PUT", url: "/databases/att/attachments?id=d/1&name=", body: "x", status: 400},
		{name: "control char", method: "PUT", url: "/databases/att/attachments?id=d/1&name=a%01b", body: "x", status: 400},
		{name: "too large", method: "PUT", url: "/databases/att/attachments?id=d/1&name=big", body: big, status: 413},
		{name: "fits", method: "PUT", url: "/databases/att/attachments?id=d/1&name=ok&contentType=text/plain", body: "hello", status: 201, contains: []string{`"Name":"ok"`, `"Size":5`, `"ContentType":"text/plain"`}},
		{name: "head", method: "HEAD", url: "/databases/att/attachments?id=d/1&name=ok", status: 200},
		{name: "head missing", method: "HEAD", url: "/databases/att/attachments?id=d/1&name=nope", status: 404},
		{name: "get missing", method: "GET", url: "/databases/att/attachments?id=d/1&name=nope", status: 404},
		{name: "put without part", method: "POST", url: "/databases/att/bulk_docs", body: `{"Commands":[{"Type":"AttachmentPUT","Id":"d/1","Name":"n"}]}`, status: 400},
		{name: "stats", method: "GET", url: "/databases/att/stats", status: 200, contains: []string{`"CountOfAttachments":1`, `"CountOfUniqueAttachments":1`}},
		{name: "delete", method: "DELETE", url: "/databases/att/attachments?id=d/1&name=ok", status: 204},
		{name: "gone", method: "GET", url: "/databases/att/attachments?id=d/1&name=ok", status: 404},
	})
	// A multipart SaveChanges: the commands, then one part per AttachmentPUT.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	w, _ := mw.CreateFormField("main")
	w.Write([]byte(`{"Commands":[{"Type":"PUT","Id":"d/3","Document":{"@metadata":{"@collection":"D"}}},` +
		`{"Type":"AttachmentPUT","Id":"d/3","Name":"one","ContentType":"a/b"},{"Type":"AttachmentPUT","Id":"d/3","Name":"two"}]}`))
	for _, s := range []string{"first part", "second"} {
		w, _ := mw.CreateFormFile("attachment", "blob")
		w.Write([]byte(s))
	}
	mw.Close()
	req := localRequest("POST", "/databases/att/bulk_docs", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 201 || !strings.Contains(rec.Body.String(), `"Type":"AttachmentPUT","Id":"d/3","Name":"two"`) {
		t.Fatalf("multipart batch: %d %s", rec.Code, rec.Body.String())
	}
	for name, want := range map[string]string{"one": "first part", "two": "second"} {
		rec := do(t, h, step{method: "GET", url: "/databases/att/attachments?id=d/3&name=" + name})
		if rec.Code != 200 || rec.Body.String() != want {
			t.Fatalf("%s: %d %q, want %q", name, rec.Code, rec.Body.String(), want)
		}
	}
}
