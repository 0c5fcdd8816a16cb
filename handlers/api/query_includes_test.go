package api_test

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Counters in query projections and compare-exchange includes (queries and
// GET /docs?cmpxchg=) over a real node: the shapes the npm client reads,
// 400s in RavenDB's envelope for bad syntax and too many paths, and an
// answer that is not served from the cache once an included value changed.
func TestCounterProjectionsAndCmpXchgIncludes(t *testing.T) {
	h := newServer(t)
	query := func(q string) string {
		b, _ := json.Marshal(map[string]any{"Query": q, "QueryParameters": map[string]any{}})
		return string(b)
	}
	tooMany := "/databases/qx/docs?id=users%2F1" + strings.Repeat("&cmpxchg=Manager", 1025)
	r := check(t, h, []step{
		{name: "create db", method: "PUT", url: "/admin/databases?name=qx", body: `{"DatabaseName":"qx"}`, status: 201},
		{name: "user 1", method: "PUT", url: "/databases/qx/docs?id=users%2F1", body: `{"Name":"Ann","Manager":"mgr/ann","Keys":["k/1","nope"],"@metadata":{"@collection":"Users"}}`, status: 201},
		{name: "user 2", method: "PUT", url: "/databases/qx/docs?id=users%2F2", body: `{"Name":"Bob","@metadata":{"@collection":"Users"}}`, status: 201},
		{name: "likes", method: "POST", url: "/databases/qx/counters",
			body: `{"Documents":[{"DocumentId":"users/1","Operations":[{"Type":"Increment","CounterName":"Likes","Delta":5}]}]}`, status: 200},
		{name: "value", method: "PUT", url: "/databases/qx/cmpxchg?key=mgr%2FAnn&index=0", body: `{"Object":{"Name":"Boss"}}`, status: 200, contains: []string{`"Successful":true`}},
		{name: "select counter", method: "POST", url: "/databases/qx/queries", body: query(`from Users as u select u.Name, counter(u, 'Likes') as likes, counterRaw(u, 'Likes') as raw`), status: 200,
			match: regexp.MustCompile(`"Results":\[\{"Name":"Ann","likes":5,"raw":\{"A:\d+-[^"]+":5\},"@metadata":\{"@projection":true,"@id":"users/1"[^}]*\}\},\{"Name":"Bob","likes":null,"raw":null,`)},
		{name: "select counter by name", method: "POST", url: "/databases/qx/queries", body: query(`from Users where id() = 'users/1' select counter('likes')`), status: 200,
			contains: []string{`"Results":[{"likes":5,"@metadata":{"@projection":true,"@id":"users/1"`}},
		{name: "bad counter", method: "POST", url: "/databases/qx/queries", body: query(`from Users as u select counter(x, 'Likes')`), status: 400,
			errType: "Raven.Client.Exceptions.InvalidQueryException", contains: []string{"must be the query's alias"}},
		{name: "include cmpxchg", method: "POST", url: "/databases/qx/queries", body: query(`from Users as u where id() = 'users/1' include cmpxchg('Manager'), cmpxchg(u.Keys)`), status: 200,
			contains: []string{`"CompareExchangeValueIncludes":{"mgr/Ann":{"Key":"mgr/Ann","Index":`, `"Value":{"Object":{"Name":"Boss"}}}`,
				`"k/1":{"Key":"k/1","Index":-1,"Value":null},"nope":{"Key":"nope","Index":-1,"Value":null}}`}},
		{name: "bad cmpxchg include", method: "POST", url: "/databases/qx/queries", body: query(`from Users include cmpxchg(id())`), status: 400,
			errType: "Raven.Client.Exceptions.InvalidQueryException"},
		{name: "load with cmpxchg", method: "GET", url: "/databases/qx/docs?id=users%2F1&cmpxchg=Manager&cmpxchg=Missing", status: 200,
			match: regexp.MustCompile(`^\{"Results":\[\{"Name":"Ann".*\],"Includes":\{\},"CompareExchangeValueIncludes":\{"mgr/Ann":\{"Key":"mgr/Ann","Index":(\d+),"Value":\{"Object":\{"Name":"Boss"\}\}\}\}\}$`)},
		{name: "load without", method: "GET", url: "/databases/qx/docs?id=users%2F1", status: 200},
		{name: "too many paths", method: "GET", url: tooMany, status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "empty path", method: "GET", url: "/databases/qx/docs?id=users%2F1&cmpxchg=", status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
	})
	if strings.Contains(r["load without"].Body.String(), "CompareExchange") {
		t.Fatalf("a load without cmpxchg= carries none: %s", r["load without"].Body.String())
	}
	m := regexp.MustCompile(`"Index":(\d+)`).FindStringSubmatch(r["load with cmpxchg"].Body.String())
	idx, _ := strconv.Atoi(m[1])
	loadETag := r["load with cmpxchg"].Header().Get("ETag")
	queryETag := r["include cmpxchg"].Header().Get("ETag")
	if loadETag == "" || queryETag == "" || loadETag == r["load without"].Header().Get("ETag") {
		t.Fatalf("etags %q %q %q", loadETag, queryETag, r["load without"].Header().Get("ETag"))
	}
	check(t, h, []step{
		{name: "cached load", method: "GET", url: "/databases/qx/docs?id=users%2F1&cmpxchg=Manager&cmpxchg=Missing", headers: map[string]string{"If-None-Match": loadETag}, status: 304},
		{name: "change value", method: "PUT", url: "/databases/qx/cmpxchg?key=mgr%2FAnn&index=" + strconv.Itoa(idx), body: `{"Object":{"Name":"New boss"}}`, status: 200, contains: []string{`"Successful":true`}},
		{name: "load sees it", method: "GET", url: "/databases/qx/docs?id=users%2F1&cmpxchg=Manager&cmpxchg=Missing", headers: map[string]string{"If-None-Match": loadETag}, status: 200,
			contains: []string{`"Value":{"Object":{"Name":"New boss"}}`}},
		{name: "query sees it", method: "POST", url: "/databases/qx/queries", body: query(`from Users as u where id() = 'users/1' include cmpxchg('Manager'), cmpxchg(u.Keys)`),
			headers: map[string]string{"If-None-Match": queryETag}, status: 200, contains: []string{`"Value":{"Object":{"Name":"New boss"}}`}},
		{name: "counter query via GET", method: "GET", url: "/databases/qx/queries?query=" + url.QueryEscape(`from Users select counter('Likes')`), status: 200,
			contains: []string{`"Results":[{"Likes":5,`, `{"Likes":null,`}},
	})
}
