package api_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// PATCH /docs answers each of RavenDB's statuses the way the npm client's
// PatchOperation reads them.
func TestPatchDocumentStatuses(t *testing.T) {
	h := newServer(t)
	r := check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=db", body: `{"DatabaseName":"db"}`, status: 201},
		{name: "put", method: "PUT", url: "/databases/db/docs?id=orders%2F1", body: `{"Total":10,"@metadata":{"@collection":"Orders"}}`, status: 201},
		{name: "patched", method: "PATCH", url: "/databases/db/docs?id=orders%2F1", body: `{"Patch":{"Script":"this.Total += args.add; put('logs/1', {Of: id(this), '@metadata': {'@collection': 'Logs'}})","Values":{"add":5}},"PatchIfMissing":null}`, status: 200,
			contains: []string{`"Status":"Patched"`, `"Total":15`, `"Collection":"Orders"`, `"@id":"orders/1"`}},
		{name: "put() wrote", method: "GET", url: "/databases/db/docs?id=logs%2F1", status: 200, contains: []string{`"Of":"orders/1"`, `"@collection":"Logs"`}},
		{name: "not modified", method: "PATCH", url: "/databases/db/docs?id=orders%2F1", body: `{"Patch":{"Script":"var x = this.Total"}}`, status: 200, contains: []string{`"Status":"NotModified"`}},
		{name: "missing", method: "PATCH", url: "/databases/db/docs?id=orders%2F2", body: `{"Patch":{"Script":"this.Total = 1"}}`, status: 404},
		{name: "created", method: "PATCH", url: "/databases/db/docs?id=orders%2F2", body: `{"Patch":{"Script":"this.Total = 1"},"PatchIfMissing":{"Script":"this.Total = args.t; this['@metadata']['@collection'] = 'Orders'","Values":{"t":7}}}`, status: 201,
			contains: []string{`"Status":"Created"`, `"Total":7`, `"Collection":"Orders"`}},
		{name: "skipped", method: "PATCH", url: "/databases/db/docs?id=orders%2F1&skipPatchIfChangeVectorMismatch=true", headers: map[string]string{"If-Match": `"A:1-bogus"`}, body: `{"Patch":{"Script":"this.Total = 0"}}`, status: 304},
		{name: "mismatch", method: "PATCH", url: "/databases/db/docs?id=orders%2F1", headers: map[string]string{"If-Match": `"A:1-bogus"`}, body: `{"Patch":{"Script":"this.Total = 0"}}`, status: 409, errType: "Raven.Client.Exceptions.ConcurrencyException"},
		{name: "debug", method: "PATCH", url: "/databases/db/docs?id=orders%2F1&debug=true", body: `{"Patch":{"Script":"output('was', this.Total); this.Total = 1; load('orders/2'); del('logs/1')"}}`, status: 200,
			contains: []string{`"Info":["was 15"]`, `"LoadDocument":["orders/2"]`, `"DeleteDocument":["logs/1"]`, `"OriginalDocument":{"Total":15`}},
		{name: "del() deleted", method: "GET", url: "/databases/db/docs?id=logs%2F1", status: 404},
		{name: "test run", method: "PATCH", url: "/databases/db/docs?id=orders%2F1&test=true", body: `{"Patch":{"Script":"this.Total = 99"}}`, status: 200, contains: []string{`"Total":99`}},
		{name: "test wrote nothing", method: "GET", url: "/databases/db/docs?id=orders%2F1", status: 200, contains: []string{`"Total":1,`}},
		{name: "throws", method: "PATCH", url: "/databases/db/docs?id=orders%2F1", body: `{"Patch":{"Script":"this.Total = 5; throw new Error('boom')"}}`, status: 400, errType: "Raven.Client.Exceptions.Documents.Patching.JavaScriptException"},
		{name: "runaway", method: "PATCH", url: "/databases/db/docs?id=orders%2F1", body: `{"Patch":{"Script":"while(true){}"}}`, status: 400, errType: "Raven.Client.Exceptions.Documents.Patching.JavaScriptException"},
		{name: "no script", method: "PATCH", url: "/databases/db/docs?id=orders%2F1", body: `{"Patch":null}`, status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "unchanged after failures", method: "GET", url: "/databases/db/docs?id=orders%2F1", status: 200, contains: []string{`"Total":1,`}},
	})
	_ = r
}

// A PATCH inside bulk_docs runs in the batch's transaction: when another
// command fails, the patch is undone with the rest.
func TestPatchInBatchRollsBack(t *testing.T) {
	h := newServer(t)
	check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=db", body: `{"DatabaseName":"db"}`, status: 201},
		{name: "put", method: "PUT", url: "/databases/db/docs?id=c%2F1", body: `{"N":1,"@metadata":{"@collection":"C"}}`, status: 201},
		{name: "patch ok", method: "POST", url: "/databases/db/bulk_docs", body: `{"Commands":[{"Type":"PATCH","Id":"c/1","ChangeVector":null,"Patch":{"Script":"this.N = this.N ? this.N + args.val_0 : args.val_0;","Values":{"val_0":2}},"ReturnDocument":true},{"Type":"PATCH","Id":"c/9","Patch":{"Script":"this.N = 1"}},{"Type":"PATCH","Id":"c/8","Patch":{"Script":"this.N = 1"},"CreateIfMissing":{"N":0,"@metadata":{"@collection":"C"}}}]}`, status: 201,
			match: regexp.MustCompile(`^\{"Results":\[\{"Type":"PATCH","Id":"c/1","PatchStatus":"Patched","ChangeVector":"A:\d+-[^"]+","LastModified":"[^"]+","@collection":"C","ModifiedDocument":\{"N":3,.*\{"Type":"PATCH","Id":"c/9","PatchStatus":"DocumentDoesNotExist","ChangeVector":null\},\{"Type":"PATCH","Id":"c/8","PatchStatus":"Created"`)},
		{name: "rolled back", method: "POST", url: "/databases/db/bulk_docs", body: `{"Commands":[{"Type":"PATCH","Id":"c/1","Patch":{"Script":"this.N = 100; put('c/2', {'@metadata': {'@collection': 'C'}})"}},{"Id":"c/8","ChangeVector":"A:1-bogus","Type":"PUT","Document":{}}]}`, status: 409, errType: "Raven.Client.Exceptions.ConcurrencyException"},
		{name: "still 3", method: "GET", url: "/databases/db/docs?id=c%2F1", status: 200, contains: []string{`"N":3,`}},
		{name: "no put", method: "GET", url: "/databases/db/docs?id=c%2F2", status: 404},
		{name: "script throws", method: "POST", url: "/databases/db/bulk_docs", body: `{"Commands":[{"Id":"c/3","Type":"PUT","Document":{}},{"Type":"PATCH","Id":"c/1","Patch":{"Script":"throw 'no'"}}]}`, status: 400, errType: "Raven.Client.Exceptions.Documents.Patching.JavaScriptException"},
		{name: "nothing of it", method: "GET", url: "/databases/db/docs?id=c%2F3", status: 404},
		{name: "bad patch", method: "POST", url: "/databases/db/bulk_docs", body: `{"Commands":[{"Type":"PATCH","Id":"c/1"}]}`, status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "does not compile", method: "POST", url: "/databases/db/bulk_docs", body: `{"Commands":[{"Type":"PATCH","Id":"c/1","Patch":{"Script":"this.N = ("}}]}`, status: 400, errType: "Raven.Client.Exceptions.Documents.Patching.JavaScriptException"},
	})
}

// countingHandler counts the HTTP requests that reach the server.
type countingHandler struct {
	h http.Handler
	n atomic.Int64
}

func (c *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	c.h.ServeHTTP(w, r)
}

// multi_get answers several requests (a load, a missing load, a query) in
// one HTTP request, each as its own route would.
func TestMultiGet(t *testing.T) {
	ch := &countingHandler{h: newServer(t)}
	check(t, ch, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=db", body: `{"DatabaseName":"db"}`, status: 201},
		{name: "put", method: "POST", url: "/databases/db/bulk_docs", body: userDoc, status: 201},
	})
	before := ch.n.Load()
	body := `{"Requests":[{"Url":"/databases/db/docs","Query":"?&id=users%2F1-A","Method":"GET","Headers":{},"Content":null},` +
		`{"Url":"/databases/db/docs","Query":"?&id=nope","Headers":{}},` +
		`{"Url":"/databases/db/queries","Query":"?queryHash=1","Method":"POST","Headers":{},"Content":"{\"Query\":\"from Users where name = $p0\",\"QueryParameters\":{\"p0\":\"John\"}}"}]}`
	rec := do(t, ch, step{method: "POST", url: "/databases/db/multi_get", body: body})
	if rec.Code != 200 {
		t.Fatalf("multi_get: %d %s", rec.Code, rec.Body)
	}
	if n := ch.n.Load() - before; n != 1 {
		t.Fatalf("multi_get took %d requests", n)
	}
	var out struct {
		Results []struct {
			Result     json.RawMessage
			StatusCode int
			Headers    map[string]string
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 3 || out.Results[0].StatusCode != 200 || out.Results[1].StatusCode != 404 || out.Results[2].StatusCode != 200 {
		t.Fatalf("results %s", rec.Body)
	}
	if !strings.Contains(string(out.Results[0].Result), `"name":"John"`) || out.Results[0].Headers["ETag"] == "" || string(out.Results[1].Result) != "null" {
		t.Fatalf("load results %s", rec.Body)
	}
	if !strings.Contains(string(out.Results[2].Result), `"TotalResults":1`) {
		t.Fatalf("query result %s", out.Results[2].Result)
	}
	check(t, ch, []step{
		{name: "nested", method: "POST", url: "/databases/db/multi_get", body: `{"Requests":[{"Url":"/databases/db/multi_get","Method":"POST","Content":{"Requests":[]}}]}`, status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "other db", method: "POST", url: "/databases/db/multi_get", body: `{"Requests":[{"Url":"/databases/other/docs","Query":"?id=x"}]}`, status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "dot dot", method: "POST", url: "/databases/db/multi_get", body: `{"Requests":[{"Url":"/databases/db/../../admin/databases"}]}`, status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "write method", method: "POST", url: "/databases/db/multi_get", body: `{"Requests":[{"Url":"/databases/db/docs","Query":"?id=x","Method":"DELETE"}]}`, status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "too many", method: "POST", url: "/databases/db/multi_get", body: `{"Requests":[` + strings.Repeat(`{"Url":"/databases/db/stats"},`, 1024) + `{"Url":"/databases/db/stats"}]}`, status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "detailed", method: "GET", url: "/databases/db/stats/detailed", status: 200,
			contains: []string{`"CountOfDocuments":2`, `"CountOfIdentities":0`, `"CountOfCompareExchange":0`, `"CountOfCompareExchangeTombstones":0`, `"CountOfTimeSeriesDeletedRanges":0`, `"CountOfConflicts":0`, `"DatabaseChangeVector":"A:`}},
	})
}

// A patch by query's script may put() and del() other documents too.
func TestPatchByQueryPutAndDel(t *testing.T) {
	h := newServer(t)
	check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=db", body: `{"DatabaseName":"db"}`, status: 201},
		{name: "put", method: "POST", url: "/databases/db/bulk_docs", body: `{"Commands":[{"Id":"o/1","Type":"PUT","Document":{"N":1,"@metadata":{"@collection":"Os"}}},{"Id":"o/2","Type":"PUT","Document":{"N":2,"@metadata":{"@collection":"Os"}}},{"Id":"gone/1","Type":"PUT","Document":{}}]}`, status: 201},
	})
	rec := do(t, h, step{method: "PATCH", url: "/databases/db/queries?allowStale=false", body: `{"Query":{"Query":"from Os update { put('copies/' + id(this), {N: this.N * 10, '@metadata': {'@collection': 'Copies'}}); del('gone/1'); }"}}`})
	var op struct{ OperationId int64 }
	if err := json.Unmarshal(rec.Body.Bytes(), &op); err != nil || op.OperationId == 0 {
		t.Fatalf("patch by query: %d %s", rec.Code, rec.Body)
	}
	for i := 0; ; i++ {
		st := do(t, h, step{method: "GET", url: "/databases/db/operations/state?id=" + strconv.FormatInt(op.OperationId, 10)})
		if strings.Contains(st.Body.String(), `"Status":"Completed"`) {
			break
		}
		if i > 200 || strings.Contains(st.Body.String(), `"Status":"Faulted"`) {
			t.Fatalf("state: %s", st.Body)
		}
		time.Sleep(25 * time.Millisecond)
	}
	check(t, h, []step{
		{name: "copy", method: "GET", url: "/databases/db/docs?id=copies%2Fo%2F2", status: 200, contains: []string{`"N":20`, `"@collection":"Copies"`}},
		{name: "deleted", method: "GET", url: "/databases/db/docs?id=gone%2F1", status: 404},
	})
}
