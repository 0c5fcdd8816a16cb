package web_test

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/testserver"
)

// Security findings 1 (crash by nesting) and 9 (the worker header's size),
// replayed end to end against a real node.

// call sends a request and returns the status and the body.
func call(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// want400 asserts a 400 in RavenDB's envelope whose message has every one
// of parts.
func want400(t *testing.T, what string, status int, body []byte, parts ...string) {
	t.Helper()
	var env struct{ Type, Error string }
	if err := json.Unmarshal(body, &env); err != nil || status != http.StatusBadRequest || env.Type != "Raven.Client.Exceptions.BadRequestException" {
		t.Fatalf("%s: %d %.300s, want a 400 BadRequestException envelope", what, status, body)
	}
	for _, p := range parts {
		if !strings.Contains(env.Error, p) {
			t.Fatalf("%s: message %.300q lacks %q", what, env.Error, p)
		}
	}
}

// node starts a node with database db holding one order.
func node(t *testing.T) string {
	n := testserver.Start(t)
	if st, b := call(t, "PUT", n.URL+"/admin/databases?name=db", `{"DatabaseName":"db"}`); st >= 300 {
		t.Fatalf("create database: %d %s", st, b)
	}
	if st, b := call(t, "PUT", n.URL+"/databases/db/docs?id=orders/1", `{"Total":5,"@metadata":{"@collection":"Orders"}}`); st != http.StatusCreated {
		t.Fatalf("put: %d %s", st, b)
	}
	return n.URL
}

// stillServes asserts the node answers a real query after an attack.
func stillServes(t *testing.T, url string) {
	t.Helper()
	st, b := call(t, "POST", url+"/databases/db/subscriptions/try", `{"Query":"from Orders where Total > 1"}`)
	if st != http.StatusOK || !strings.Contains(string(b), "orders/1") {
		t.Fatalf("the node no longer serves: %d %.300s", st, b)
	}
}

// peakMemory runs f while sampling the heap and stacks in use, and returns
// how far they rose above where they started.
func peakMemory(f func()) (rise uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse + ms.StackInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if v := m.HeapInuse + m.StackInuse; v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	f()
	close(stop)
	<-done
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

func queryBody(q string) string {
	b, _ := json.Marshal(map[string]any{"Name": "s", "Query": q, "PageSize": 10})
	return string(b)
}

// A million '(' sent to the test query and to subscription creation is a
// 400 with the position and the limit's flag, and the node goes on serving
// (it used to overflow the parser's stack and kill the process).
func TestSecurityF1QueryMillionParens(t *testing.T) {
	url := node(t)
	body := queryBody("from Orders where " + strings.Repeat("(", 1_000_000))
	st, b := call(t, "POST", url+"/databases/db/subscriptions/try", body)
	want400(t, "try", st, b, "position 65536", "--max-query-length")
	st, b = call(t, "PUT", url+"/databases/db/subscriptions", body)
	want400(t, "create", st, b, "position 65536", "--max-query-length")
	stillServes(t, url)
}

// 400k balanced parentheses are refused at once and cost next to no memory
// (they used to take the process to 1.2–1.9 GB); nesting under the length
// limit is refused by the depth limit at the first level too deep.
func TestSecurityF1QueryBalancedParens(t *testing.T) {
	url := node(t)
	body := queryBody("from Orders where " + strings.Repeat("(", 400_000) + "Total = 1" + strings.Repeat(")", 400_000))
	var st int
	var b []byte
	start := time.Now()
	rise := peakMemory(func() { st, b = call(t, "POST", url+"/databases/db/subscriptions/try", body) })
	want400(t, "400k balanced", st, b, "position 65536", "--max-query-length")
	if rise > 100<<20 {
		t.Fatalf("the request raised heap and stacks by %d MB", rise>>20)
	}
	t.Logf("400k balanced parentheses: 400 in %v, memory rise %d KB", time.Since(start), rise>>10)

	prefix := len("from Orders where ")
	st, b = call(t, "PUT", url+"/databases/db/subscriptions", queryBody("from Orders where "+strings.Repeat("(", 5000)+"Total = 1"+strings.Repeat(")", 5000)))
	want400(t, "5000 nested", st, b, "position "+itoa(prefix+128), "--max-query-depth")
	st, b = call(t, "POST", url+"/databases/db/subscriptions/try", queryBody("from Orders where "+strings.Repeat("not ", 10_000)+"Total = 1"))
	want400(t, "10000 not", st, b, "position "+itoa(prefix+4*128), "--max-query-depth")
	stillServes(t, url)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// A document nested 100k arrays deep (or just past the limit), by PUT
// /docs and in a bulk_docs batch, is a 400 with the byte offset and the
// flag, and nothing is stored.
func TestSecurityF1DocumentNesting(t *testing.T) {
	url := node(t)
	doc := func(n int) string {
		return `{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `,"@metadata":{"@collection":"Deep"}}`
	}
	for _, n := range []int{100_000, 513} {
		st, b := call(t, "PUT", url+"/databases/db/docs?id=deep/1", doc(n))
		parts := []string{"nested deeper than 512 levels at byte", "--max-json-depth"}
		if n == 513 {
			parts[0] += " " + itoa(len(`{"a":`)+511)
		}
		want400(t, "PUT /docs "+itoa(n), st, b, parts...)
		batch := `{"Commands":[{"Id":"deep/2","Type":"PUT","Document":` + doc(n) + `}]}`
		st, b = call(t, "POST", url+"/databases/db/bulk_docs", batch)
		if n == 513 {
			parts[0] = "nested deeper than 512 levels at byte " + itoa(len(`{"Commands":[{"Id":"deep/2","Type":"PUT","Document":{"a":`)+511)
		}
		want400(t, "bulk_docs "+itoa(n), st, b, parts...)
	}
	for _, id := range []string{"deep/1", "deep/2"} {
		if st, b := call(t, "GET", url+"/databases/db/docs?id="+id, ""); st != http.StatusNotFound {
			t.Fatalf("%s was stored: %d %.200s", id, st, b)
		}
	}
	// At the limit it is stored.
	if st, b := call(t, "PUT", url+"/databases/db/docs?id=deep/3", doc(511)); st != http.StatusCreated {
		t.Fatalf("a document at the limit: %d %.300s", st, b)
	}
	stillServes(t, url)
}

// A worker header whose Info field streams on for 400 MB: the node closes
// the connection after --max-worker-message bytes, holding no more than
// that, and goes on serving (it used to buffer all of it: 1.35 GB).
func TestSecurityF9WorkerHeaderSize(t *testing.T) {
	url := node(t)
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sent int64
	var werr error
	rise := peakMemory(func() {
		_ = c.SetWriteDeadline(time.Now().Add(2 * time.Minute))
		head := `{"DatabaseName":"db","Operation":"Subscription","OperationVersion":53000,"Info":"`
		if _, werr = io.WriteString(c, head); werr != nil {
			return
		}
		chunk := []byte(strings.Repeat("x", 64<<10))
		for sent = 0; sent < 400<<20; sent += int64(len(chunk)) {
			if _, werr = c.Write(chunk); werr != nil {
				return
			}
		}
	})
	var ne net.Error
	if werr == nil || errors.As(werr, &ne) && ne.Timeout() {
		t.Fatalf("the node took the whole 400 MB header (%d bytes sent, %v)", sent, werr)
	}
	if sent > 32<<20 {
		t.Fatalf("the connection was closed only after %d MB", sent>>20)
	}
	if rise > 100<<20 {
		t.Fatalf("the header raised heap and stacks by %d MB", rise>>20)
	}
	t.Logf("closed after %d KB sent (%v), memory rise %d KB", sent>>10, werr, rise>>10)
	stillServes(t, url)
}
