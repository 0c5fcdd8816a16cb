package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/storage"
)

func orders(t *testing.T, n *testNode) {
	putDoc(t, n.db, "companies/1", `{"Name":"Acme","@metadata":{"@collection":"Companies"}}`)
	for _, o := range [][2]string{
		{"orders/1", `{"Name":"Red pipe","Total":5,"Company":"companies/1","Tags":["a","b"],"@metadata":{"@collection":"Orders"}}`},
		{"orders/2", `{"Name":"blue PIPE","Total":7,"Company":"companies/2","Tags":["b"],"@metadata":{"@collection":"Orders"}}`},
		{"orders/3", `{"Name":"Green tube","Total":9,"Company":"companies/1","Tags":[],"@metadata":{"@collection":"Orders"}}`},
	} {
		putDoc(t, n.db, o[0], o[1])
	}
}

// A dynamic query on a field creates the RavenDB-named auto index, waits
// for it, and answers from it; the next query on the same field uses it; a
// query needing more fields extends it and supersedes the old one.
func TestAutoIndexLifecycle(t *testing.T) {
	n := newNode(t, Options{})
	orders(t, n)
	res, err := n.runner.Run(context.Background(), n.db, Request{Query: `from 'Orders' where Total > $p0`, QueryParameters: map[string]any{"p0": 6.0}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IndexName != "Auto/Orders/ByTotal" || res.Plan.Why != "created Auto/Orders/ByTotal" || res.IsStale || strings.Join(ids(t, res), " ") != "orders/2 orders/3" || res.TotalResults != 2 {
		t.Fatalf("first query (no wait asked, the new index is waited for): %+v %s", res, res.Results)
	}
	res = n.query(`from Orders where Total > 6 order by Total desc`, nil)
	if res.Plan.Why != "used Auto/Orders/ByTotal" || strings.Join(ids(t, res), " ") != "orders/3 orders/2" {
		t.Fatalf("%+v", res.Plan)
	}
	res = n.query(`from Orders where Total > 6 and search(Name, 'pipe')`, nil)
	if res.IndexName != "Auto/Orders/BySearch(Name)AndTotal" || res.Plan.Why != "extended Auto/Orders/ByTotal into Auto/Orders/BySearch(Name)AndTotal" ||
		strings.Join(res.Plan.Superseded, ",") != "Auto/Orders/ByTotal" || strings.Join(ids(t, res), " ") != "orders/2" {
		t.Fatalf("%+v %s", res.Plan, res.Results)
	}
	var old index.Definition
	for _, d := range n.defs.List("shop") {
		if d.Name == "Auto/Orders/ByTotal" {
			old = d
		}
	}
	if old.Superseded != "Auto/Orders/BySearch(Name)AndTotal" {
		t.Fatalf("the narrow index is not marked superseded: %+v", old)
	}
	// The wider index serves the narrower query now.
	if res := n.query(`from Orders where Total = 5`, nil); res.Plan.Why != "used Auto/Orders/BySearch(Name)AndTotal" || strings.Join(ids(t, res), " ") != "orders/1" {
		t.Fatalf("%+v", res.Plan)
	}
	// Creation can be refused.
	_, err = n.runner.Run(context.Background(), n.db, Request{Query: `from Orders where Company = 'x'`, DisableAutoIndexCreation: true})
	var iq *InvalidQueryError
	if !errors.As(err, &iq) || !strings.Contains(err.Error(), "Auto/Orders/ByCompany") {
		t.Fatalf("%v", err)
	}
}

// from index 'Name' queries a (static) index by name, case-insensitively.
func TestStaticIndexQuery(t *testing.T) {
	n := newNode(t, Options{})
	orders(t, n)
	def := index.Definition{Name: "Orders/ByCompany", Type: index.TypeJavaScriptMap, Maps: []string{`map('Orders', o => ({Company: o.Company, Total: o.Total}))`}}
	if err := n.defs.Put("shop", def); err != nil {
		t.Fatal(err)
	}
	res := n.query(`from index 'orders/bycompany' where Company = $c order by Total as long desc`, map[string]any{"c": "companies/1"})
	if res.IndexName != "Orders/ByCompany" || strings.Join(ids(t, res), " ") != "orders/3 orders/1" {
		t.Fatalf("%+v %s", res, res.Results)
	}
}

// Paging, projections, distinct, includes and metadataOnly over an index.
func TestIndexQueryShapes(t *testing.T) {
	n := newNode(t, Options{})
	orders(t, n)
	res := n.query(`from Orders where Total >= 5 order by Total limit $p0, $p1`, map[string]any{"p0": 1.0, "p1": 1.0})
	if strings.Join(ids(t, res), " ") != "orders/2" || res.TotalResults != 3 || res.SkippedResults != 0 {
		t.Fatalf("%+v", res)
	}
	res = n.query(`from Orders where Total >= 5 order by Total limit $p0, $p1`, map[string]any{"p0": nil, "p1": 0.0})
	if len(res.Results) != 0 || res.TotalResults != 3 {
		t.Fatalf("count(): %+v", res)
	}
	res = n.query(`from Orders where Total >= 5 order by Total select Name, Total as T include Company`, nil)
	var first map[string]any
	json.Unmarshal(res.Results[0], &first)
	if len(res.Results) != 3 || first["Name"] != "Red pipe" || first["T"] != 5.0 || first["@metadata"].(map[string]any)["@id"] != "orders/1" {
		t.Fatalf("%s", res.Results)
	}
	if len(res.Includes) != 1 || res.Includes[0].ID != "companies/1" {
		t.Fatalf("includes: %+v", res.Includes)
	}
	res = n.query(`from Orders where Total >= 5 select distinct Company limit 1`, nil)
	if len(res.Results) != 1 || res.TotalResults != 2 {
		t.Fatalf("distinct: %+v %s", res, res.Results)
	}
	r, err := n.runner.Run(context.Background(), n.db, Request{Query: `from Orders where Total = 7`, MetadataOnly: true})
	if err != nil || len(r.Results) != 1 || !strings.HasPrefix(string(r.Results[0]), `{"@metadata":{"@collection":"Orders"`) {
		t.Fatalf("%v %s", err, r.Results)
	}
	res = n.query(`from Orders where Total > 1 include timings()`, nil)
	if res.Timings == nil || res.Timings.Timings["Search"] == nil || res.Timings.Timings["Planning"] == nil {
		t.Fatalf("timings %+v", res.Timings)
	}
}

// group by with count() and sum() runs on an auto map-reduce index.
func TestGroupBy(t *testing.T) {
	n := newNode(t, Options{})
	orders(t, n)
	res := n.query(`from 'Orders' group by Company order by count as long desc select key(), count() as count, sum(Total) as Sum`, nil)
	if res.IndexName != "Auto/Orders/ByCountAndTotalReducedByCompany" || len(res.Results) != 2 {
		t.Fatalf("%+v %s", res, res.Results)
	}
	var rows []map[string]any
	for _, raw := range res.Results {
		var m map[string]any
		json.Unmarshal(raw, &m)
		rows = append(rows, m)
	}
	if rows[0]["Company"] != "companies/1" || rows[0]["count"] != 2.0 || rows[0]["Sum"] != 14.0 || rows[1]["count"] != 1.0 || rows[1]["Sum"] != 7.0 {
		t.Fatalf("%s", res.Results)
	}
	res = n.query(`from 'Orders' group by Company where count > 1 select key(), count() as count`, nil)
	if len(res.Results) != 1 || res.Plan.Why != "used Auto/Orders/ByCountAndTotalReducedByCompany" {
		t.Fatalf("%+v %s", res.Plan, res.Results)
	}
	putDoc(t, n.db, "orders/4", `{"Name":"x","Total":1,"Company":"companies/2","@metadata":{"@collection":"Orders"}}`)
	res = n.query(`from 'Orders' group by Company where Company = 'companies/2' select key(), count() as count`, nil)
	if len(res.Results) != 1 || !strings.Contains(string(res.Results[0]), `"count":2`) {
		t.Fatalf("%s", res.Results)
	}
}

// An index query's ResultEtag changes on a write the index sees, and stays
// put otherwise.
func TestIndexResultEtag(t *testing.T) {
	n := newNode(t, Options{})
	orders(t, n)
	q := `from Orders where Total > 1`
	e0 := n.query(q, nil).ResultEtag
	if n.query(q, nil).ResultEtag != e0 {
		t.Fatal("moved without a write")
	}
	putDoc(t, n.db, "orders/2", `{"Name":"blue PIPE","Total":70,"Company":"companies/2","@metadata":{"@collection":"Orders"}}`)
	e1 := n.query(q, nil).ResultEtag
	deleteDoc(t, n.db, "orders/1")
	e2 := n.query(q, nil).ResultEtag
	if e1 == e0 || e2 == e1 || e2 == e0 {
		t.Fatalf("%d %d %d", e0, e1, e2)
	}
}

// WaitForNonStaleResults with a timeout the index cannot meet is a
// TimeoutError.
func TestWaitForNonStaleTimeout(t *testing.T) {
	n := newNode(t, Options{NewIndexWait: time.Millisecond})
	p, err := document.Parse([]byte(`{"Total":1,"@metadata":{"@collection":"Orders"}}`))
	if err != nil {
		t.Fatal(err)
	}
	// Enough documents that a new index cannot catch up in a nanosecond.
	if err := n.db.Write(context.Background(), func(tx *storage.Tx) error {
		for i := 0; i < 5000; i++ {
			if _, err := tx.Put(fmt.Sprintf("orders/%d", i), p, nil); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_, err = n.runner.Run(context.Background(), n.db, Request{Query: `from Orders where Total = 1`, WaitForNonStaleResults: true, WaitForNonStaleResultsTimeout: Duration(time.Nanosecond)})
	var te *TimeoutError
	if !errors.As(err, &te) || te.RavenType() != "System.TimeoutException" || te.Index != "Auto/Orders/ByTotal" {
		t.Fatalf("%v", err)
	}
}

// IDs yields the matching ids in batches (patch and delete by query);
// Stream visits every result.
func TestIDsAndStream(t *testing.T) {
	n := newNode(t, Options{})
	orders(t, n)
	for _, q := range []string{`from Orders where Total > 5 update { this.x = 1 }`, `from Orders where startsWith(id(), 'orders/') and not id() = 'orders/1'`} {
		var got []string
		batches := 0
		_, err := n.runner.IDs(context.Background(), n.db, Request{Query: q, WaitForNonStaleResults: true}, 1, func(ids []string) error {
			batches++
			got = append(got, ids...)
			return nil
		})
		if err != nil || strings.Join(sorted(got), " ") != "orders/2 orders/3" || batches != 2 {
			t.Fatalf("%s: %v %v %d", q, err, got, batches)
		}
	}
	var seen []string
	res, err := n.runner.Stream(context.Background(), n.db, Request{Query: `from Orders where Total > 1`}, func(raw json.RawMessage) error {
		var m map[string]any
		json.Unmarshal(raw, &m)
		seen = append(seen, m["@metadata"].(map[string]any)["@id"].(string))
		return nil
	})
	if err != nil || len(seen) != 3 || res.TotalResults != 3 || len(res.Results) != 0 {
		t.Fatalf("%v %v %+v", err, seen, res)
	}
	if _, err := n.runner.IDs(context.Background(), n.db, Request{Query: `from Orders group by Company select count()`}, 10, func([]string) error { return nil }); err == nil {
		t.Fatal("ids of a map-reduce query")
	}
}

// from @all_docs with a field filter runs on an Auto/AllDocs index over
// every collection.
func TestAllDocsAutoIndex(t *testing.T) {
	n := newNode(t, Options{})
	orders(t, n)
	res := n.query(`from @all_docs where Name = $n`, map[string]any{"n": "acme"})
	if res.IndexName != "Auto/AllDocs/ByName" || strings.Join(ids(t, res), " ") != "companies/1" {
		t.Fatalf("%+v %s", res, res.Results)
	}
	// order by score() keeps the index order (there are no scores).
	res = n.query(`from Orders where search(Name, 'pipe') order by score()`, nil)
	if res.IndexName != "Auto/Orders/BySearch(Name)" || strings.Join(sorted(ids(t, res)), " ") != "orders/1 orders/2" {
		t.Fatalf("%+v %s", res, res.Results)
	}
}

// Stream pages through an index query's hits: every match once, in order,
// with paging applied.
func TestStreamPages(t *testing.T) {
	defer func(n int) { streamPage = n }(streamPage)
	streamPage = 2
	n := newNode(t, Options{})
	for i := 0; i < 9; i++ {
		putDoc(t, n.db, fmt.Sprintf("orders/%d", i), fmt.Sprintf(`{"Total":%d,"@metadata":{"@collection":"Orders"}}`, i))
	}
	for _, c := range []struct {
		q    string
		want string
	}{
		{`from Orders where Total >= 1 order by Total desc`, "orders/8 orders/7 orders/6 orders/5 orders/4 orders/3 orders/2 orders/1"},
		{`from Orders where Total >= 1 order by Total limit 2, 5`, "orders/3 orders/4 orders/5 orders/6 orders/7"},
		{`from Orders where Total >= 1 order by Total limit 1, 0`, ""},
	} {
		var got []string
		res, err := n.runner.Stream(context.Background(), n.db, Request{Query: c.q, WaitForNonStaleResults: true}, func(raw json.RawMessage) error {
			var m map[string]any
			json.Unmarshal(raw, &m)
			got = append(got, m["@metadata"].(map[string]any)["@id"].(string))
			return nil
		})
		if err != nil || strings.Join(got, " ") != c.want || res.TotalResults != 8 {
			t.Errorf("%s: %v %v total %d", c.q, err, got, res.TotalResults)
		}
	}
}
