package api_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/testserver"
)

func bulkReq(t *testing.T, method, url string, body io.Reader, hdr map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// bulkBody is n commands, PUTs of users/<from+i>, as the npm client sends
// them (a heartbeat in the middle).
func bulkBody(from, n int, bad int) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		if i == n/2 {
			b.WriteString(`{"Type":"HeartBeat"},`)
		}
		id := fmt.Sprintf("users/%d", from+i)
		if i == bad {
			id = strings.Repeat("x", 600)
		}
		fmt.Fprintf(&b, `{"Id":%q,"Type":"PUT","Document":{"Name":"user %d","Age":%d,"@metadata":{"@collection":"Users","Raven-Node-Type":"User"}}}`, id, from+i, i%90)
	}
	b.WriteByte(']')
	return b.Bytes()
}

type opState struct {
	Status   string
	Progress map[string]any
	Result   map[string]any
}

func readState(t *testing.T, base string, id int64) opState {
	t.Helper()
	code, b := bulkReq(t, "GET", fmt.Sprintf("%s/databases/bulk/operations/state?id=%d", base, id), nil, nil)
	if code != 200 {
		t.Fatalf("state: %d %s", code, b)
	}
	var st opState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func nextOpID(t *testing.T, base string) int64 {
	t.Helper()
	code, b := bulkReq(t, "GET", base+"/databases/bulk/operations/next-operation-id", nil, nil)
	if code != 200 {
		t.Fatalf("next-operation-id: %d %s", code, b)
	}
	var v struct{ Id int64 }
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v.Id
}

func docCount(t *testing.T, base string) int64 {
	t.Helper()
	code, b := bulkReq(t, "GET", base+"/databases/bulk/stats", nil, nil)
	if code != 200 {
		t.Fatalf("stats: %d %s", code, b)
	}
	var v struct{ CountOfDocuments int64 }
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v.CountOfDocuments
}

func TestBulkInsertOverHTTP(t *testing.T) {
	n := testserver.Start(t)
	if code, b := bulkReq(t, "PUT", n.URL+"/admin/databases?name=bulk", strings.NewReader(`{"DatabaseName":"bulk"}`), nil); code != 201 {
		t.Fatalf("create: %d %s", code, b)
	}

	// Plain, 20,000 documents (several batches).
	id := nextOpID(t, n.URL)
	code, b := bulkReq(t, "POST", fmt.Sprintf("%s/databases/bulk/bulk_insert?id=%d&skipOverwriteIfUnchanged=false", n.URL, id), bytes.NewReader(bulkBody(0, 20000, -1)), map[string]string{"Content-Type": "application/json"})
	if code != 201 || len(b) != 0 {
		t.Fatalf("plain bulk insert: %d %s", code, b)
	}
	if c := docCount(t, n.URL); c != 20000 {
		t.Fatalf("after the plain bulk insert: %d documents, want 20000", c)
	}
	st := readState(t, n.URL, id)
	if st.Status != "Completed" || st.Result["Total"] != float64(20000) || st.Result["DocumentsProcessed"] != float64(20000) || st.Result["LastProcessedId"] != "users/19999" {
		t.Fatalf("state after finish: %+v", st)
	}
	code, b = bulkReq(t, "GET", n.URL+"/databases/bulk/docs?id=users/123", nil, nil)
	if code != 200 || !strings.Contains(string(b), `"Name":"user 123"`) || !strings.Contains(string(b), `"@collection":"Users"`) || !strings.Contains(string(b), `"Raven-Node-Type":"User"`) {
		t.Fatalf("users/123: %d %s", code, b)
	}

	// Gzip, overwriting 1,000 of them and adding 4,000.
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(bulkBody(19000, 5000, -1))
	zw.Close()
	id = nextOpID(t, n.URL)
	code, b = bulkReq(t, "POST", fmt.Sprintf("%s/databases/bulk/bulk_insert?id=%d", n.URL, id), &zb, map[string]string{"Content-Encoding": "gzip"})
	if code != 201 {
		t.Fatalf("gzip bulk insert: %d %s", code, b)
	}
	if c := docCount(t, n.URL); c != 24000 {
		t.Fatalf("after the gzip bulk insert: %d documents, want 24000", c)
	}
	code, b = bulkReq(t, "GET", n.URL+"/databases/bulk/docs?id=users/19500", nil, nil)
	if code != 200 || !strings.Contains(string(b), `"Age":`+fmt.Sprint(500%90)) {
		t.Fatalf("users/19500 after the overwrite: %d %s", code, b)
	}

	// skipOverwriteIfUnchanged: the same documents again change nothing
	// (no new etags); a changed one is written.
	_, sb := bulkReq(t, "GET", n.URL+"/databases/bulk/stats", nil, nil)
	var before struct{ LastDocEtag int64 }
	_ = json.Unmarshal(sb, &before)
	same := bulkBody(0, 100, -1)
	id = nextOpID(t, n.URL)
	if code, b := bulkReq(t, "POST", fmt.Sprintf("%s/databases/bulk/bulk_insert?id=%d&skipOverwriteIfUnchanged=true", n.URL, id), bytes.NewReader(same), nil); code != 201 {
		t.Fatalf("skip bulk insert: %d %s", code, b)
	}
	_, sb = bulkReq(t, "GET", n.URL+"/databases/bulk/stats", nil, nil)
	var after struct{ LastDocEtag int64 }
	_ = json.Unmarshal(sb, &after)
	if before.LastDocEtag == 0 || after.LastDocEtag != before.LastDocEtag {
		t.Fatalf("unchanged documents were rewritten: last etag %d -> %d", before.LastDocEtag, after.LastDocEtag)
	}
	if st := readState(t, n.URL, id); st.Result["Skipped"] != float64(100) {
		t.Fatalf("skip state: %+v", st)
	}

	// A bad id in the middle (array element 12346: a heartbeat came first): the error comes back in the envelope, the
	// operation is Faulted with it, and everything before it is stored.
	id = nextOpID(t, n.URL)
	code, b = bulkReq(t, "POST", fmt.Sprintf("%s/databases/bulk/bulk_insert?id=%d", n.URL, id), bytes.NewReader(bulkBody(100000, 20000, 12345)), nil)
	if code != 400 || !strings.Contains(string(b), "command 12346") || !strings.Contains(string(b), "BadRequestException") {
		t.Fatalf("bad id mid-stream: %d %s", code, b)
	}
	if c := docCount(t, n.URL); c != 24000+12345 {
		t.Fatalf("after the failed bulk insert: %d documents, want %d (everything before the bad command)", c, 24000+12345)
	}
	st = readState(t, n.URL, id)
	if st.Status != "Faulted" || !strings.Contains(fmt.Sprint(st.Result["Error"]), "command 12346") {
		t.Fatalf("state of the failed bulk insert: %+v", st)
	}

	// An unsupported command type and a truncated stream.
	for name, c := range map[string]struct {
		body string
		want string
	}{
		"counters":  {`[{"Id":"a","Type":"PUT","Document":{}},{"Id":"a","Type":"Counters","Counters":{"DocumentId":"a","Operations":[]}}]`, "'Counters' is not supported"},
		"truncated": {`[{"Id":"b","Type":"PUT","Document":{"x":1}},{"Id":"c","Type":"PUT","Docu`, "the stream ended"},
		"notarray":  {`{"Id":"b"}`, "JSON array"},
		"deep":      {`[{"Id":"d","Type":"PUT","Document":` + strings.Repeat(`{"a":`, 600) + `1` + strings.Repeat(`}`, 600) + `}]`, "deep"},
	} {
		code, b := bulkReq(t, "POST", n.URL+"/databases/bulk/bulk_insert?id="+fmt.Sprint(nextOpID(t, n.URL)), strings.NewReader(c.body), nil)
		if code != 400 || !strings.Contains(string(b), c.want) {
			t.Fatalf("%s: %d %s", name, code, b)
		}
	}

	// Killing a running bulk insert: the stream is held open, the kill
	// cancels it and the answer says so.
	pr, pw := io.Pipe()
	id = nextOpID(t, n.URL)
	type answer struct {
		code int
		body []byte
	}
	got := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", fmt.Sprintf("%s/databases/bulk/bulk_insert?id=%d", n.URL, id), pr)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- answer{code: -1, body: []byte(err.Error())}
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		got <- answer{res.StatusCode, b}
	}()
	pw.Write([]byte(`[{"Id":"k/1","Type":"PUT","Document":{}}`))
	deadline := time.Now().Add(5 * time.Second)
	for readState2(n.URL, id) != "InProgress" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if code, b := bulkReq(t, "POST", fmt.Sprintf("%s/databases/bulk/operations/kill?id=%d", n.URL, id), nil, nil); code != 204 {
		t.Fatalf("kill: %d %s", code, b)
	}
	pw.Write([]byte(`,{"Id":"k/2","Type":"PUT","Document":{}}`))
	a := <-got
	pw.Close()
	if a.code != 400 || !strings.Contains(string(a.body), "killed") {
		t.Fatalf("killed bulk insert answered %d %s", a.code, a.body)
	}
	if st := readState(t, n.URL, id); st.Status != "Canceled" {
		t.Fatalf("killed bulk insert state: %+v", st)
	}
}

func readState2(base string, id int64) string {
	res, err := http.Get(fmt.Sprintf("%s/databases/bulk/operations/state?id=%d", base, id))
	if err != nil {
		return ""
	}
	defer res.Body.Close()
	var st opState
	_ = json.NewDecoder(res.Body).Decode(&st)
	return st.Status
}
