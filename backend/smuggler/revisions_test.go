package smuggler_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/rookerydb/rookery/internal/testserver"
)

// revisionLines is a database's revisions of id: change vector, flags,
// last modification and body, newest first.
func revisionLines(t *testing.T, url, db, id string) []string {
	t.Helper()
	b := mustCall(t, 200, "GET", url+"/databases/"+db+"/revisions?id="+id+"&pageSize=100", "", nil)
	var res struct {
		Results      []map[string]any
		TotalResults int
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range res.Results {
		raw, _ := json.Marshal(r)
		out = append(out, string(raw))
	}
	if len(out) != res.TotalResults {
		t.Fatalf("%d results, TotalResults %d", len(out), res.TotalResults)
	}
	return out
}

// RevisionDocuments are exported and imported: the target holds the same
// revisions (change vectors, flags, times, bodies), delete revisions too,
// and its documents are flagged as having revisions.
func TestRevisionsExportImport(t *testing.T) {
	n := testserver.Start(t)
	createDB(t, n.URL, "revsrc")
	mustCall(t, 200, "POST", n.URL+"/databases/revsrc/admin/revisions/config", "application/json", []byte(`{"Default":{"MinimumRevisionsToKeep":10}}`))
	for v := 1; v <= 3; v++ {
		for _, id := range []string{"users/1", "users/2"} {
			mustCall(t, 201, "PUT", n.URL+"/databases/revsrc/docs?id="+id, "application/json", []byte(fmt.Sprintf(`{"V":%d,"@metadata":{"@collection":"Users"}}`, v)))
		}
	}
	mustCall(t, 204, "DELETE", n.URL+"/databases/revsrc/docs?id=users/2", "", nil)
	want1, want2 := revisionLines(t, n.URL, "revsrc", "users/1"), revisionLines(t, n.URL, "revsrc", "users/2")
	if len(want1) != 3 || len(want2) != 4 {
		t.Fatalf("source revisions: %d and %d", len(want1), len(want2))
	}
	dump := mustCall(t, 200, "POST", n.URL+"/databases/revsrc/smuggler/export", "application/json", []byte(`{}`))
	createDB(t, n.URL, "revdst")
	st, b := importDump(t, n.URL, "revdst", dump, "{}")
	if st != 200 {
		t.Fatalf("import: %d %s", st, b)
	}
	got1, got2 := revisionLines(t, n.URL, "revdst", "users/1"), revisionLines(t, n.URL, "revdst", "users/2")
	if fmt.Sprint(got1) != fmt.Sprint(want1) || fmt.Sprint(got2) != fmt.Sprint(want2) {
		t.Fatalf("imported revisions\n%v\n%v\nwant\n%v\n%v", got1, got2, want1, want2)
	}
	doc := mustCall(t, 200, "GET", n.URL+"/databases/revdst/docs?id=users/1", "", nil)
	if !bytes.Contains(doc, []byte(`"@flags":"HasRevisions"`)) {
		t.Fatalf("imported document %s", doc)
	}
	// Without RevisionDocuments in OperateOnTypes, none.
	createDB(t, n.URL, "revnone")
	if st, b := importDump(t, n.URL, "revnone", dump, `{"OperateOnTypes":"Documents"}`); st != 200 {
		t.Fatalf("import: %d %s", st, b)
	}
	if got := revisionLines(t, n.URL, "revnone", "users/1"); len(got) != 0 {
		t.Fatalf("revisions imported although not asked for: %d", len(got))
	}
}

// SkipRevisionCreation: documents imported without change vectors into a
// database with revisions on create none.
func TestImportSkipRevisionCreation(t *testing.T) {
	n := testserver.Start(t)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"BuildVersion":60000,"Docs":[{"Name":"x","@metadata":{"@collection":"Users","@id":"users/9"}}]}`))
	zw.Close()
	for _, c := range []struct {
		options string
		want    int
	}{{`{}`, 1}, {`{"SkipRevisionCreation":true}`, 0}} {
		db := fmt.Sprintf("skip%d", c.want)
		createDB(t, n.URL, db)
		mustCall(t, http.StatusOK, "POST", n.URL+"/databases/"+db+"/admin/revisions/config", "application/json", []byte(`{"Default":{}}`))
		if st, b := importDump(t, n.URL, db, gz.Bytes(), c.options); st != 200 {
			t.Fatalf("import: %d %s", st, b)
		}
		if got := revisionLines(t, n.URL, db, "users/9"); len(got) != c.want {
			t.Fatalf("%s: %d revisions, want %d", c.options, len(got), c.want)
		}
	}
}
