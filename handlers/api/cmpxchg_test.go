package api_test

import (
	"strings"
	"testing"
)

// The compare-exchange endpoints and cluster-wide batches on one node:
// bad input is a 400 (or 413) in RavenDB's envelope and changes nothing;
// a cluster-wide batch answers with its TransactionIndex and results in
// command order; a stale one is a 409 ConcurrencyException.
func TestCmpXchgEndpoints(t *testing.T) {
	h := newServer(t)
	big := `{"Object":"` + strings.Repeat("x", 1<<20) + `"}`
	deep := `{"Object":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`
	check(t, h, []step{
		{name: "create db", method: "PUT", url: "/admin/databases?name=cx", body: `{"DatabaseName":"cx"}`, status: 201},
		{name: "put", method: "PUT", url: "/databases/cx/cmpxchg?key=Users%2F1&index=0", body: `{"Object":{"Name":"<a>"}}`, status: 200,
			contains: []string{`"Successful":true`, `"Value":{"Object":{"Name":"<a>"}}`}},
		{name: "put again", method: "PUT", url: "/databases/cx/cmpxchg?key=users%2F1&index=0", body: `{"Object":2}`, status: 200,
			contains: []string{`"Successful":false`, `"Value":{"Object":{"Name":"<a>"}}`}},
		{name: "get", method: "GET", url: "/databases/cx/cmpxchg?key=USERS%2F1", status: 200, contains: []string{`"Key":"Users/1"`, `"Value":{"Object":{"Name":"<a>"}}`}},
		{name: "get missing", method: "GET", url: "/databases/cx/cmpxchg?key=nope", status: 200, contains: []string{`{"Results":[]}`}},
		{name: "no index", method: "PUT", url: "/databases/cx/cmpxchg?key=k", body: `{"Object":1}`, status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "bad index", method: "PUT", url: "/databases/cx/cmpxchg?key=k&index=-1", body: `{"Object":1}`, status: 400},
		{name: "no key", method: "PUT", url: "/databases/cx/cmpxchg?index=0", body: `{"Object":1}`, status: 400},
		{name: "control char key", method: "PUT", url: "/databases/cx/cmpxchg?key=a%01b&index=0", body: `{"Object":1}`, status: 400},
		{name: "not an object", method: "PUT", url: "/databases/cx/cmpxchg?key=k&index=0", body: `[1]`, status: 400},
		{name: "not JSON", method: "PUT", url: "/databases/cx/cmpxchg?key=k&index=0", body: `{"Object":`, status: 400},
		{name: "too large", method: "PUT", url: "/databases/cx/cmpxchg?key=k&index=0", body: big, status: 413},
		{name: "too deep", method: "PUT", url: "/databases/cx/cmpxchg?key=k&index=0", body: deep, status: 400},
		{name: "nothing stored", method: "GET", url: "/databases/cx/cmpxchg?key=k", status: 200, contains: []string{`{"Results":[]}`}},
		{name: "bad page size", method: "GET", url: "/databases/cx/cmpxchg?startsWith=u&pageSize=0", status: 400},
		{name: "cmpxchg outside a cluster-wide batch", method: "POST", url: "/databases/cx/bulk_docs",
			body: `{"Commands":[{"Type":"CompareExchangePUT","Id":"k","Index":0,"Document":{"Object":1}}]}`, status: 400, contains: []string{"only allowed in a cluster-wide transaction"}},
		{name: "identity id in a cluster-wide batch", method: "POST", url: "/databases/cx/bulk_docs",
			body: `{"Commands":[{"Type":"PUT","Id":"users|","Document":{}}],"TransactionMode":"ClusterWide"}`, status: 400},
		{name: "cluster-wide batch", method: "POST", url: "/databases/cx/bulk_docs?raft-request-id=r1",
			body:   `{"Commands":[{"Type":"PUT","Id":"orders/1","Document":{"N":1,"@metadata":{"@collection":"Orders"}}},{"Type":"CompareExchangePUT","Id":"seats/1","Index":0,"Document":{"Object":"a"}}],"TransactionMode":"ClusterWide"}`,
			status: 201, contains: []string{`"@id":"orders/1"`, `"@collection":"Orders"`, `"@change-vector":"RAFT:`, `{"Type":"CompareExchangePUT","Key":"seats/1","Index":`, `"TransactionIndex":`}},
		{name: "retried with the same request id", method: "POST", url: "/databases/cx/bulk_docs?raft-request-id=r1",
			body:   `{"Commands":[{"Type":"PUT","Id":"orders/1","Document":{"N":1,"@metadata":{"@collection":"Orders"}}},{"Type":"CompareExchangePUT","Id":"seats/1","Index":0,"Document":{"Object":"a"}}],"TransactionMode":"ClusterWide"}`,
			status: 201},
		{name: "stale cluster-wide batch", method: "POST", url: "/databases/cx/bulk_docs",
			body:   `{"Commands":[{"Type":"PUT","Id":"orders/2","Document":{"N":2,"@metadata":{"@collection":"Orders"}}},{"Type":"CompareExchangePUT","Id":"seats/1","Index":0,"Document":{"Object":"b"}}],"TransactionMode":"ClusterWide"}`,
			status: 409, errType: "Raven.Client.Exceptions.ConcurrencyException"},
		{name: "its document was not written", method: "GET", url: "/databases/cx/docs?id=orders/2", status: 404},
		{name: "document written", method: "GET", url: "/databases/cx/docs?id=orders/1", status: 200, contains: []string{`"N":1`, `RAFT:`}},
		{name: "delete stale", method: "DELETE", url: "/databases/cx/cmpxchg?key=seats%2F1&index=1", status: 200, contains: []string{`"Successful":false`}},
	})
}
