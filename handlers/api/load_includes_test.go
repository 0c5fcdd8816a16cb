package api_test

import (
	"regexp"
	"strings"
	"testing"
)

// GET /docs with include= and cmpxchg= at once: both answers come from the
// same loaded documents, in the documents' and the paths' order, an id
// already loaded or already included is not included again, a key is
// included once whatever its case, a missing document adds nothing, a bad
// cmpxchg path is still a 400 with includes asked for, and metadataOnly
// answers neither.
func TestLoadIncludesWithCmpXchg(t *testing.T) {
	h := newServer(t)
	both := "/databases/li/docs?id=users%2F1&id=users%2F2&id=users%2Fmissing&include=Company&include=Friends&cmpxchg=Manager&cmpxchg=Keys"
	r := check(t, h, []step{
		{name: "create db", method: "PUT", url: "/admin/databases?name=li", body: `{"DatabaseName":"li"}`, status: 201},
		{name: "user 1", method: "PUT", url: "/databases/li/docs?id=users%2F1",
			body: `{"Name":"Ann","Company":"companies/1","Friends":["users/2","users/3","companies/1"],"Manager":"mgr/Ann","Keys":["k/1","MGR/ann"],"@metadata":{"@collection":"Users"}}`, status: 201},
		{name: "user 2", method: "PUT", url: "/databases/li/docs?id=users%2F2",
			body: `{"Name":"Bob","Company":"companies/2","Manager":"mgr/Bob","@metadata":{"@collection":"Users"}}`, status: 201},
		{name: "user 3", method: "PUT", url: "/databases/li/docs?id=users%2F3", body: `{"Name":"Cy","@metadata":{"@collection":"Users"}}`, status: 201},
		{name: "company 1", method: "PUT", url: "/databases/li/docs?id=companies%2F1", body: `{"Name":"Acme","@metadata":{"@collection":"Companies"}}`, status: 201},
		{name: "company 2", method: "PUT", url: "/databases/li/docs?id=companies%2F2", body: `{"Name":"Initech","@metadata":{"@collection":"Companies"}}`, status: 201},
		{name: "value", method: "PUT", url: "/databases/li/cmpxchg?key=mgr%2FAnn&index=0", body: `{"Object":{"Name":"Boss"}}`, status: 200, contains: []string{`"Successful":true`}},
		{name: "both", method: "GET", url: both, status: 200,
			match: regexp.MustCompile(`^\{"Results":\[\{"Name":"Ann".*\},\{"Name":"Bob".*\},null\],` +
				`"Includes":\{"companies/1":\{"Name":"Acme".*\},"users/3":\{"Name":"Cy".*\},"companies/2":\{"Name":"Initech".*\}\},` +
				`"CompareExchangeValueIncludes":\{"mgr/Ann":\{"Key":"mgr/Ann","Index":\d+,"Value":\{"Object":\{"Name":"Boss"\}\}\},` +
				`"k/1":\{"Key":"k/1","Index":-1,"Value":null\},"mgr/Bob":\{"Key":"mgr/Bob","Index":-1,"Value":null\}\}\}$`)},
		{name: "bad cmpxchg path", method: "GET", url: "/databases/li/docs?id=users%2F1&include=Company&cmpxchg=", status: 400,
			errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "metadata only", method: "GET", url: both + "&metadataOnly=true", status: 200,
			match: regexp.MustCompile(`"Includes":\{\}\}$`)},
	})
	body := r["both"].Body.String()
	if n := strings.Count(body, `"Name":"Acme"`); n != 1 {
		t.Fatalf("companies/1 appears %d times: %s", n, body)
	}
	if strings.Contains(r["metadata only"].Body.String(), "CompareExchange") {
		t.Fatalf("metadataOnly carries compare exchange values: %s", r["metadata only"].Body.String())
	}
	check(t, h, []step{
		{name: "cached", method: "GET", url: both, headers: map[string]string{"If-None-Match": r["both"].Header().Get("ETag")}, status: 304},
	})
}
