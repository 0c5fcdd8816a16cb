package smuggler_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/rookerydb/rookery/internal/testserver"
)

// An exported database's attachment streams are embedded with their
// documents in the dump (just before each, as RavenDB lays them out) and
// stored again on import: the same names, types
// and bytes, served by the new database.
func TestExportImportAttachments(t *testing.T) {
	n := testserver.Start(t)
	createDB(t, n.URL, "asrc")
	r := rand.New(rand.NewPCG(3, 4))
	contents := map[string][]byte{}
	for i, size := range []int{0, 10, 300 << 10} {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		contents[[]string{"empty.bin", "small.txt", "big.bin"}[i]] = b
	}
	mustCall(t, 201, "PUT", n.URL+"/databases/asrc/docs?id=files/1", "application/json", []byte(`{"T":1,"@metadata":{"@collection":"Files"}}`))
	mustCall(t, 201, "PUT", n.URL+"/databases/asrc/docs?id=files/2", "application/json", []byte(`{"T":2,"@metadata":{"@collection":"Files"}}`))
	for name, b := range contents {
		mustCall(t, 201, "PUT", n.URL+"/databases/asrc/attachments?id=files/1&name="+name+"&contentType=application/x-"+name, "", b)
	}
	mustCall(t, 201, "PUT", n.URL+"/databases/asrc/attachments?id=files/2&name=same.bin", "", contents["big.bin"])

	dump := mustCall(t, 200, "POST", n.URL+"/databases/asrc/smuggler/export", "application/json", []byte(`{}`))
	if !bytes.Contains(dump, []byte(`"@export-type":"Attachment"`)) && !bytes.Contains(dump[:2], []byte{0x1f, 0x8b}) {
		t.Fatalf("the dump has no attachment stream")
	}
	createDB(t, n.URL, "adst")
	st, b := importDump(t, n.URL, "adst", dump, "{}")
	if st != 200 {
		t.Fatalf("import: %d %s", st, b)
	}
	check := func(id, name string, want []byte, ct string) {
		t.Helper()
		st, got := call(t, "GET", n.URL+"/databases/adst/attachments?id="+id+"&name="+name, "", nil)
		if st != http.StatusOK || !bytes.Equal(got, want) {
			t.Fatalf("%s/%s after import: %d, %d bytes, want %d", id, name, st, len(got), len(want))
		}
	}
	for name, c := range contents {
		check("files/1", name, c, "application/x-"+name)
	}
	check("files/2", "same.bin", contents["big.bin"], "")
	var doc struct {
		Results []struct {
			Metadata struct {
				Flags       string                                     `json:"@flags"`
				Attachments []struct{ Name, Hash, ContentType string } `json:"@attachments"`
			} `json:"@metadata"`
		}
	}
	json.Unmarshal(mustCall(t, 200, "GET", n.URL+"/databases/adst/docs?id=files/1", "", nil), &doc)
	md := doc.Results[0].Metadata
	if len(md.Attachments) != 3 || md.Flags != "HasAttachments" {
		t.Fatalf("imported metadata %+v", md)
	}
	for _, a := range md.Attachments {
		s := sha256.Sum256(contents[a.Name])
		if a.Hash != base64.StdEncoding.EncodeToString(s[:]) || a.ContentType != "application/x-"+a.Name {
			t.Fatalf("imported entry %+v", a)
		}
	}
	// Without Attachments in OperateOnTypes the documents come without them.
	createDB(t, n.URL, "anone")
	if st, b := importDump(t, n.URL, "anone", dump, `{"OperateOnTypes":"Documents"}`); st != 200 {
		t.Fatalf("import: %d %s", st, b)
	}
	if st, _ := call(t, "GET", n.URL+"/databases/anone/attachments?id=files/1&name=big.bin", "", nil); st != http.StatusNotFound {
		t.Fatalf("attachments imported although not asked for: %d", st)
	}
}
