package api_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

const userDoc = `{"Commands":[{"Id":"users/1-A","Document":{"name":"John","companyId":"companies/acme","@metadata":{"@collection":"Users","Raven-Node-Type":"User"}},"Type":"PUT"},{"Id":"companies/acme","Document":{"name":"Acme","@metadata":{"@collection":"Companies"}},"Type":"PUT"}]}`

func TestDatabaseLifecycleAndErrors(t *testing.T) {
	h := newServer(t)
	check(t, h, []step{
		{name: "topology missing", method: "GET", url: "/topology?name=db1&first-topology-update", status: 503, header: map[string]string{"Database-Missing": "db1"}, contains: []string{`"Type":"Error"`}},
		{name: "docs missing db", method: "GET", url: "/databases/db1/docs?&id=x", status: 503, header: map[string]string{"Database-Missing": "db1"}, errType: "Raven.Client.Exceptions.Database.DatabaseDoesNotExistException"},
		{name: "create", method: "PUT", url: "/admin/databases?name=db1&replicationFactor=1", body: `{"DatabaseName":"db1"}`, headers: map[string]string{"ETag": `"undefined"`}, status: 201, contains: []string{`"Name":"db1"`}},
		{name: "create again", method: "PUT", url: "/admin/databases?name=db1", body: `{"DatabaseName":"db1"}`, status: 409, errType: "Raven.Client.Exceptions.ConcurrencyException"},
		{name: "bad name", method: "PUT", url: "/admin/databases?name=a%20b", body: `{"DatabaseName":"a b"}`, status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "topology", method: "GET", url: "/topology?name=db1", status: 200, contains: []string{`"Url":"http://node-a.test"`, `"ClusterTag":"A"`, `"ServerRole":"Member"`, `"Database":"db1"`}},
		{name: "cluster topology", method: "GET", url: "/cluster/topology", status: 200, contains: []string{`"Members":{"A":"http://node-a.test"}`, `"Status":{}`}},
		{name: "names", method: "GET", url: "/databases?start=0&pageSize=10&namesOnly=true", status: 200, contains: []string{`{"Databases":["db1"]}`}},
		{name: "unknown route", method: "GET", url: "/databases/db1/nope", status: 400, errType: "Raven.Client.Exceptions.Routing.RouteNotFoundException"},
		{name: "delete", method: "DELETE", url: "/admin/databases?raft-request-id=x", body: `{"DatabaseNames":["db1"],"HardDelete":true}`, status: 200},
		{name: "topology after delete", method: "GET", url: "/topology?name=db1", status: 503},
	})
}

func TestDocumentsHiLoIdentitiesStats(t *testing.T) {
	h := newServer(t)
	r := check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=db", body: `{"DatabaseName":"db"}`, status: 201},
		{name: "hilo", method: "GET", url: "/databases/db/hilo/next?lastBatchSize=0&tag=users&lastRangeAt=1970-01-01T00%3A00%3A00.0000000Z&identityPartsSeparator=/&lastMax=0", status: 201,
			match: regexp.MustCompile(`^\{"High":32,"LastRangeAt":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z","LastSize":32,"Low":1,"Prefix":"users/","ServerTag":"A"\}$`)},
		{name: "save", method: "POST", url: "/databases/db/bulk_docs", body: userDoc, status: 201,
			match: regexp.MustCompile(`^\{"Results":\[\{"Type":"PUT","@id":"users/1-A","@collection":"Users","@change-vector":"A:\d+-[A-Za-z0-9+/]{22}","@last-modified":"[^"]+"\},`)},
		{name: "load", method: "GET", url: "/databases/db/docs?&id=users%2F1-A", status: 200, contains: []string{`"name":"John"`, `"@id":"users/1-A"`, `"@collection":"Users"`, `"Raven-Node-Type":"User"`}},
		{name: "load missing", method: "GET", url: "/databases/db/docs?&id=users%2F999-A", status: 404},
		{name: "load many", method: "GET", url: "/databases/db/docs?&id=users%2F1-A&id=nope", status: 200, contains: []string{`},null],"Includes":{}}`}},
		{name: "include", method: "GET", url: "/databases/db/docs?&include=companyId&id=users%2F1-A", status: 200, contains: []string{`"Includes":{"companies/acme":{"name":"Acme"`}},
		{name: "exists", method: "HEAD", url: "/databases/db/docs?id=users%2F1-A", status: 200},
		{name: "exists missing", method: "HEAD", url: "/databases/db/docs?id=nope", status: 404},
		{name: "identity put", method: "PUT", url: "/databases/db/docs?id=companies%7C", body: `{"@metadata":{"@collection":"Companies"}}`, status: 201, contains: []string{`"Id":"companies/1"`}},
		{name: "identity next", method: "POST", url: "/databases/db/identity/next?name=companies&raft-request-id=1", status: 200, contains: []string{`{"NewIdentityValue":2}`}},
		{name: "seed", method: "POST", url: "/databases/db/identity/seed?name=companies&value=100", status: 200, contains: []string{`{"NewSeedValue":100}`}},
		{name: "seed lower", method: "POST", url: "/databases/db/identity/seed?name=companies&value=5", status: 200, contains: []string{`{"NewSeedValue":100}`}},
		{name: "seed force", method: "POST", url: "/databases/db/identity/seed?name=companies&value=5&force=true", status: 200, contains: []string{`{"NewSeedValue":5}`}},
		{name: "seed bad value", method: "POST", url: "/databases/db/identity/seed?name=companies&value=x", status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "identities", method: "GET", url: "/databases/db/debug/identities", status: 200, contains: []string{`{"companies|":5}`}},
		{name: "server id", method: "PUT", url: "/databases/db/docs?id=companies%2F", body: `{}`, status: 201, match: regexp.MustCompile(`"Id":"companies/\d{19}-A"`)},
		{name: "stats", method: "GET", url: "/databases/db/stats", status: 200, contains: []string{`"CountOfDocuments":5`, `"CountOfIndexes":0`}},
		{name: "collection stats", method: "GET", url: "/databases/db/collections/stats", status: 200, contains: []string{`"Collections":{"@empty":1,"@hilo":1,"Companies":2,"Users":1}`}},
		{name: "bad json", method: "POST", url: "/databases/db/bulk_docs", body: `{"Commands":[{"Id":"x","Type":"PUT","Document":{"a":}}]}`, status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "wrong type", method: "POST", url: "/databases/db/bulk_docs", body: `{"Commands":[{"Id":7,"Type":"PUT","Document":{}}]}`, status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "oversize id", method: "PUT", url: "/databases/db/docs?id=" + strings.Repeat("x", 600), body: `{}`, status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "cv mismatch", method: "DELETE", url: "/databases/db/docs?id=users%2F1-A", headers: map[string]string{"If-Match": `"A:99-bogus"`}, status: 409, errType: "Raven.Client.Exceptions.ConcurrencyException"},
		{name: "half batch", method: "POST", url: "/databases/db/bulk_docs", body: `{"Commands":[{"Id":"new/1","Type":"PUT","Document":{}},{"Id":"users/1-A","ChangeVector":"A:1-bogus","Type":"PUT","Document":{}}]}`, status: 409, errType: "Raven.Client.Exceptions.ConcurrencyException"},
		{name: "half batch left nothing", method: "GET", url: "/databases/db/docs?&id=new%2F1", status: 404},
		{name: "collection change", method: "PUT", url: "/databases/db/docs?id=users%2F1-A", body: `{"@metadata":{"@collection":"Orders"}}`, status: 400, errType: "System.InvalidOperationException"},
	})
	// ETag / If-None-Match / 304, and a change invalidates it.
	etag := r["load"].Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag on load")
	}
	check(t, h, []step{
		{name: "cached", method: "GET", url: "/databases/db/docs?&id=users%2F1-A", headers: map[string]string{"If-None-Match": etag}, status: 304},
		{name: "exists cached", method: "HEAD", url: "/databases/db/docs?id=users%2F1-A", headers: map[string]string{"If-None-Match": r["exists"].Header().Get("ETag")[1 : len(r["exists"].Header().Get("ETag"))-1]}, status: 304},
		{name: "modify", method: "PUT", url: "/databases/db/docs?id=users%2F1-A", body: `{"name":"Jane","@metadata":{"@collection":"Users"}}`, status: 201},
		{name: "not cached after change", method: "GET", url: "/databases/db/docs?&id=users%2F1-A", headers: map[string]string{"If-None-Match": etag}, status: 200, contains: []string{`"name":"Jane"`}},
		{name: "delete", method: "DELETE", url: "/databases/db/docs?id=users%2F1-A", status: 204},
		{name: "gone", method: "GET", url: "/databases/db/docs?&id=users%2F1-A", status: 404},
	})
}

func TestStartsWithPaging(t *testing.T) {
	h := newServer(t)
	var b strings.Builder
	b.WriteString(`{"Commands":[`)
	for i := 0; i < 30; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"Id":"occ/` + string(rune('a'+i/10)) + string(rune('0'+i%10)) + `","Type":"PUT","Document":{}}`)
	}
	b.WriteString(`,{"Id":"other/1","Type":"PUT","Document":{}}]}`)
	r := check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=db", body: `{"DatabaseName":"db"}`, status: 201},
		{name: "fill", method: "POST", url: "/databases/db/bulk_docs", body: b.String(), status: 201},
		{name: "page1", method: "GET", url: "/databases/db/docs?&start=0&pageSize=25&startsWith=occ%2F", status: 200},
		{name: "page2", method: "GET", url: "/databases/db/docs?&start=25&pageSize=25&startsWith=occ%2F", status: 200},
		{name: "matches", method: "GET", url: "/databases/db/docs?&startsWith=occ%2F&matches=b*&exclude=b1", status: 200},
	})
	count := func(name string) int {
		var v struct{ Results []json.RawMessage }
		if err := json.Unmarshal(r[name].Body.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		return len(v.Results)
	}
	if count("page1") != 25 || count("page2") != 5 || count("matches") != 9 {
		t.Fatalf("pages %d %d matches %d", count("page1"), count("page2"), count("matches"))
	}
	if strings.Contains(r["page2"].Body.String(), "other/1") {
		t.Fatal("prefix leak")
	}
}

func TestDatabaseSeparator(t *testing.T) {
	h := newServer(t)
	check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=dash", body: `{"DatabaseName":"dash","IdentityPartsSeparator":"-"}`, status: 201},
		{name: "bad separator", method: "PUT", url: "/admin/databases?name=pipe", body: `{"DatabaseName":"pipe","IdentityPartsSeparator":"|"}`, status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "identity", method: "PUT", url: "/databases/dash/docs?id=orders%7C", body: `{}`, status: 201, contains: []string{`"Id":"orders-1"`}},
		{name: "server id", method: "PUT", url: "/databases/dash/docs?id=orders-", body: `{}`, status: 201, match: regexp.MustCompile(`"Id":"orders-\d{19}-A"`)},
		{name: "hilo default", method: "GET", url: "/databases/dash/hilo/next?tag=users", status: 201, contains: []string{`"Prefix":"users-"`}},
		{name: "client configuration", method: "GET", url: "/databases/dash/configuration/client", status: 200, contains: []string{`"IdentityPartsSeparator":"-"`}},
		{name: "record", method: "GET", url: "/admin/databases?name=dash", status: 200, contains: []string{`"IdentityPartsSeparator":"-"`}},
	})
}

func TestMetricsAndHealth(t *testing.T) {
	h := newServer(t)
	check(t, h, []step{
		{name: "livez", method: "GET", url: "/livez", status: 200},
		{name: "create", method: "PUT", url: "/admin/databases?name=m", body: `{"DatabaseName":"m"}`, status: 201},
		{name: "hilo", method: "GET", url: "/databases/m/hilo/next?tag=users", status: 201},
		{name: "save", method: "POST", url: "/databases/m/bulk_docs", body: userDoc, status: 201},
		{name: "identity", method: "POST", url: "/databases/m/identity/next?name=orders", status: 200},
		{name: "metrics", method: "GET", url: "/metrics", status: 200, contains: []string{
			`rookery_documents_written_total{database="m",op="put"} 3`,
			`rookery_tx_merged_requests_count`,
			`rookery_hilo_calls_total{op="next"} 1`,
			`rookery_identity_calls_total{op="next"} 1`,
			`rookery_http_requests_total{code="201",method="POST",route="/databases/:db/bulk_docs"} 1`,
		}},
	})
}
