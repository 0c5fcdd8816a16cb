package web

import (
	"encoding/json"
	"fmt"
	"testing"
)

// Each inner request of a multi_get is held to its own route's rule, with
// the caller's certificate: a read-only user's lazy loads work, a write
// hidden in a multi_get is refused (and writes nothing), and the patch
// endpoint is refused to them as any write is.
func TestMultiGetInnerAccess(t *testing.T) {
	c := makeCerts(t)
	n := serveNode(t, c.secured())
	admin := c.client(t, c.setup.Admin.PEM)
	mkdb(t, admin, n.url, "shop")
	must(t, 201, admin, "PUT", n.url+"/databases/shop/docs?id=users/1", `{"Name":"a","@metadata":{"@collection":"Users"}}`)
	reader := c.issue(t, "reader")
	must(t, 204, admin, "PUT", n.url+"/admin/certificates", fmt.Sprintf(`{"Name":"reader","Certificate":%q,"SecurityClearance":"ValidUser","Permissions":{"shop":"Read"}}`, reader.CertificateBase64))
	rc := c.client(t, reader.PEM)

	body := `{"Requests":[{"Url":"/databases/shop/docs","Query":"?&id=users%2F1"},` +
		`{"Url":"/databases/shop/bulk_docs","Method":"POST","Content":{"Commands":[{"Id":"users/2","Type":"PUT","Document":{}}]}},` +
		`{"Url":"/databases/shop/stats/detailed"}]}`
	var out struct {
		Results []struct {
			StatusCode int
			Result     json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(must(t, 200, rc, "POST", n.url+"/databases/shop/multi_get", body)), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 3 || out.Results[0].StatusCode != 200 || out.Results[1].StatusCode != 403 || out.Results[2].StatusCode != 200 {
		t.Fatalf("inner statuses: %+v", out.Results)
	}
	must(t, 404, admin, "GET", n.url+"/databases/shop/docs?id=users/2", "")
	// The admin's identical multi_get writes.
	must(t, 200, admin, "POST", n.url+"/databases/shop/multi_get", body)
	must(t, 200, admin, "GET", n.url+"/databases/shop/docs?id=users/2", "")
	must(t, 403, rc, "PATCH", n.url+"/databases/shop/docs?id=users/1", `{"Patch":{"Script":"this.Name = 'b'"}}`)
	must(t, 200, admin, "PATCH", n.url+"/databases/shop/docs?id=users/1", `{"Patch":{"Script":"this.Name = 'b'"}}`)
}
