package api_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/testserver"
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
