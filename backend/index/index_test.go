package index

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/rql"
	"github.com/rookerydb/rookery/backend/storage"
)

func openDB(t testing.TB, dir string) *storage.DB {
	t.Helper()
	db, err := storage.Open(filepath.Join(dir, "db.sqlite"), storage.Options{Name: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func newDB(t testing.TB) (*storage.DB, string) {
	dir := t.TempDir()
	db := openDB(t, dir)
	t.Cleanup(func() { db.Close() })
	return db, dir
}

// put stores documents: id, collection, JSON body (without metadata).
func put(t testing.TB, db *storage.DB, docs ...[3]string) {
	t.Helper()
	err := db.Write(context.Background(), func(tx *storage.Tx) error {
		for _, d := range docs {
			body := d[2]
			body = strings.TrimSuffix(strings.TrimSpace(body), "}")
			if strings.TrimSpace(body) != "{" {
				body += ","
			}
			body += fmt.Sprintf(`"@metadata":{"@collection":%q}}`, d[1])
			p, err := document.Parse([]byte(body))
			if err != nil {
				return err
			}
			if _, err := tx.Put(d[0], p, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func del(t testing.TB, db *storage.DB, ids ...string) {
	t.Helper()
	err := db.Write(context.Background(), func(tx *storage.Tx) error {
		for _, id := range ids {
			if _, _, err := tx.Delete(id, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func openIndex(t testing.TB, db *storage.DB, dir string, def Definition, opts Options) *Index {
	t.Helper()
	ix, err := Open(FilePath(filepath.Join(dir, "db.sqlite"), def.Name), def, db, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix
}

func wait(t testing.TB, ix *Index) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := ix.WaitNonStale(ctx, 0); err != nil {
		_, r := ix.Stale(context.Background())
		t.Fatalf("index %s did not catch up: %v %v", ix.Name(), err, r)
	}
}

// ids runs a where clause (RQL text after "where") and returns the sorted ids.
func ids(t testing.TB, ix *Index, where string, params map[string]any) []string {
	t.Helper()
	res := search(t, ix, "from index 'x' where "+where, params)
	var out []string
	for _, h := range res.Hits {
		out = append(out, h.DocID)
	}
	sort.Strings(out)
	if int64(len(out)) != res.TotalResults {
		t.Fatalf("%s: %d hits but TotalResults %d", where, len(out), res.TotalResults)
	}
	return out
}

func search(t testing.TB, ix *Index, q string, params map[string]any) *SearchResult {
	t.Helper()
	pq, err := rql.Parse(q)
	if err != nil {
		t.Fatal(err)
	}
	sq := SearchQuery{Where: pq.Where, Params: params, OrderBy: pq.OrderBy, Take: -1}
	res, err := ix.Search(context.Background(), sq)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return res
}

func eq(t testing.TB, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func TestAutoMapOperators(t *testing.T) {
	db, dir := newDB(t)
	put(t, db,
		[3]string{"orders/1", "Orders", `{"Name":"Alice Smith","Total":10,"Tags":["a","B"],"Address":{"City":"Paris"},"Lines":[{"Price":5},{"Price":50}],"Paid":true}`},
		[3]string{"orders/2", "Orders", `{"Name":"bob","Total":20.5,"Tags":["b"],"Address":{"City":"London"},"Lines":[{"Price":7}],"Paid":false}`},
		[3]string{"orders/3", "Orders", `{"Name":"ALICE","Total":30,"Tags":[],"Lines":[],"Paid":null}`},
		[3]string{"orders/4", "Orders", `{"Total":"40","Name":"Zed quick brown fox"}`},
		[3]string{"people/1", "People", `{"Name":"alice"}`},
	)
	def := Definition{Name: "Auto/Orders/ByNameAndTotal", Type: TypeAutoMap, Collection: "Orders", Fields: []AutoField{
		{Name: "Address.City"}, {Name: "Lines[].Price"}, {Name: "Name", Search: true}, {Name: "Paid"}, {Name: "Tags"}, {Name: "Total"}}}
	ix := openIndex(t, db, dir, def, Options{})
	wait(t, ix)
	cases := []struct {
		where  string
		params map[string]any
		want   string
	}{
		{"Name = 'alice'", nil, "orders/3"},
		{"exact(Name = 'ALICE')", nil, "orders/3"},
		{"exact(Name = 'Alice')", nil, ""},
		{"Name = $n", map[string]any{"n": "BOB"}, "orders/2"},
		{"Total = 10", nil, "orders/1"},
		{"Total > 10", nil, "orders/2,orders/3"},
		{"Total >= 10 and Total < 30", nil, "orders/1,orders/2"},
		{"Total between 10 and 20.5", nil, "orders/1,orders/2"},
		{"Total = '40'", nil, "orders/4"},
		{"Total > '0'", nil, "orders/4"},
		{"Name in ($list)", map[string]any{"list": []any{"bob", "alice"}}, "orders/2,orders/3"},
		{"Tags in ('b')", nil, "orders/1,orders/2"},
		{"Tags all in ('a', 'b')", nil, "orders/1"},
		{"Tags = 'B'", nil, "orders/1,orders/2"},
		{"Lines[].Price > 40", nil, "orders/1"},
		{"Lines[].Price = 7", nil, "orders/2"},
		{"Address.City = 'paris'", nil, "orders/1"},
		{"startsWith(Name, 'ali')", nil, "orders/1,orders/3"},
		{"endsWith(Name, 'FOX')", nil, "orders/4"},
		{"regex(Name, '^A')", nil, "orders/1,orders/3"},
		{"search(Name, 'smith')", nil, "orders/1"},
		{"search(Name, 'quick zzz')", nil, "orders/4"},
		{"search(Name, 'qui*')", nil, "orders/4"},
		{"exists(Address.City)", nil, "orders/1,orders/2"},
		{"exists(Tags)", nil, "orders/1,orders/2"},
		{"exists(Paid)", nil, "orders/1,orders/2,orders/3"},
		{"Paid = true", nil, "orders/1"},
		{"Paid = null", nil, "orders/3,orders/4"},
		{"not Name = 'alice'", nil, "orders/1,orders/2,orders/4"},
		{"Address.City != 'paris'", nil, "orders/2,orders/3,orders/4"},
		{"Tags != 'b'", nil, "orders/3,orders/4"},
		{"id() = 'ORDERS/2'", nil, "orders/2"},
		{"(Total = 10 or Total = 30) and not exists(Address.City)", nil, "orders/3"},
		{"Unknown = 1", nil, ""},
		{"Unknown != 1", nil, "orders/1,orders/2,orders/3,orders/4"},
	}
	for _, c := range cases {
		var want []string
		if c.want != "" {
			want = strings.Split(c.want, ",")
		}
		eq(t, c.where, ids(t, ix, c.where, c.params), want)
	}
	// The same answers as rql's evaluator over the documents.
	res := search(t, ix, "from index 'x' order by Total as long desc", nil)
	var order []string
	for _, h := range res.Hits {
		order = append(order, h.DocID)
	}
	eq(t, "order by Total desc", order, []string{"orders/3", "orders/2", "orders/1", "orders/4"})
	// Paging.
	pq, _ := rql.Parse("from index 'x' order by Total as long")
	page, err := ix.Search(context.Background(), SearchQuery{OrderBy: pq.OrderBy, Skip: 1, Take: 2})
	if err != nil || page.TotalResults != 4 || len(page.Hits) != 2 || page.Hits[0].DocID != "orders/2" {
		t.Fatalf("paging: %+v %v", page, err)
	}
	// Bad input is a BadRequest.
	pq, _ = rql.Parse("from index 'x' where regex(Name, '(')")
	if _, err := ix.Search(context.Background(), SearchQuery{Where: pq.Where, Take: -1}); !dberr.Is(err, dberr.BadRequest) {
		t.Fatalf("bad regex: %v", err)
	}
	pq, _ = rql.Parse("from index 'x' where Name = $missing")
	if _, err := ix.Search(context.Background(), SearchQuery{Where: pq.Where, Take: -1}); !dberr.Is(err, dberr.BadRequest) {
		t.Fatalf("missing parameter: %v", err)
	}
}

func TestUpdatesAndDeletesFollowTombstones(t *testing.T) {
	db, dir := newDB(t)
	put(t, db, [3]string{"orders/1", "Orders", `{"Name":"a"}`}, [3]string{"orders/2", "Orders", `{"Name":"b"}`})
	ix := openIndex(t, db, dir, Definition{Name: "Auto/Orders/ByName", Type: TypeAutoMap, Collection: "Orders", Fields: []AutoField{{Name: "Name"}}}, Options{})
	wait(t, ix)
	put(t, db, [3]string{"orders/1", "Orders", `{"Name":"c"}`})
	del(t, db, "orders/2")
	wait(t, ix)
	eq(t, "a gone", ids(t, ix, "Name = 'a'", nil), nil)
	eq(t, "b deleted", ids(t, ix, "Name = 'b'", nil), nil)
	eq(t, "c", ids(t, ix, "Name = 'c'", nil), []string{"orders/1"})
	if s := ix.Stats(); s.EntriesCount != 1 || s.Collections["Orders"].LastProcessedTombstoneEtag == 0 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestRestartResumesFromEtags(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	defer func() { db.Close() }()
	for i := 0; i < 50; i++ {
		put(t, db, [3]string{fmt.Sprintf("orders/%d", i), "Orders", fmt.Sprintf(`{"N":%d}`, i)})
	}
	def := Definition{Name: "Auto/Orders/ByN", Type: TypeAutoMap, Collection: "Orders", Fields: []AutoField{{Name: "N"}}}
	path := FilePath(filepath.Join(dir, "db.sqlite"), def.Name)
	ix, err := Open(path, def, db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, ix)
	if a := ix.Stats().MapAttempts; a != 50 {
		t.Fatalf("first build mapped %d documents, want 50", a)
	}
	ix.Close()
	put(t, db, [3]string{"orders/100", "Orders", `{"N":100}`})
	ix, err = Open(path, def, db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	wait(t, ix)
	if a := ix.Stats().MapAttempts; a != 1 {
		t.Fatalf("after a restart the index mapped %d documents, want only the new one", a)
	}
	eq(t, "N >= 49", ids(t, ix, "N >= 49", nil), []string{"orders/100", "orders/49"})
	// Another definition under the same name rebuilds the file.
	ix.Close()
	def2 := def
	def2.Fields = []AutoField{{Name: "N"}, {Name: "M"}}
	ix, err = Open(path, def2, db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, ix)
	if a := ix.Stats().MapAttempts; a != 51 {
		t.Fatalf("a changed definition mapped %d documents, want all 51", a)
	}
}

func TestFileNames(t *testing.T) {
	a, b := FileName("Auto/Orders/ByName"), FileName("Auto_Orders_ByName")
	if a == b || !strings.HasSuffix(a, ".db") || strings.ContainsAny(a, "/()[] ") {
		t.Fatalf("file names %q %q", a, b)
	}
	if FileName("Orders/X") != FileName("orders/x") {
		t.Fatal("index names are case-insensitive; their files must be too")
	}
	if long := FileName(strings.Repeat("x", 256)); len(long) > 80 {
		t.Fatalf("file name too long: %d", len(long))
	}
	if err := Validate(&Definition{Name: "a\x01b", Type: TypeAutoMap, Collection: "C", Fields: []AutoField{{Name: "X"}}}); !dberr.Is(err, dberr.BadRequest) {
		t.Fatalf("control character in a name: %v", err)
	}
}

func mustJSON(t testing.TB, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return m
}
