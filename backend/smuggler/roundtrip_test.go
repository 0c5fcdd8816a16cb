package smuggler_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/smuggler"
	"github.com/rookerydb/rookery/internal/testserver"
)

// call makes a request to the node and returns the status and body.
func call(t *testing.T, method, url, contentType string, body io.Reader) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func mustCall(t *testing.T, want int, method, url, contentType string, body []byte) []byte {
	t.Helper()
	st, b := call(t, method, url, contentType, bytes.NewReader(body))
	if st != want {
		t.Fatalf("%s %s: %d %s, want %d", method, url, st, b, want)
	}
	return b
}

func createDB(t *testing.T, url, name string) {
	mustCall(t, http.StatusCreated, "PUT", url+"/admin/databases?name="+name, "application/json", []byte(`{"DatabaseName":"`+name+`"}`))
}

// randomValue is a random JSON value of bounded depth.
func randomValue(r *rand.Rand, depth int) any {
	switch k := r.IntN(7); {
	case k == 0:
		return nil
	case k == 1:
		return r.IntN(2) == 0
	case k == 2:
		return r.IntN(1_000_000) - 500_000
	case k == 3:
		return r.Float64() * 1000
	case k == 4 && depth < 3:
		m := map[string]any{}
		for i := 0; i < r.IntN(4); i++ {
			m[fmt.Sprintf("k%d", r.IntN(20))] = randomValue(r, depth+1)
		}
		return m
	case k == 5 && depth < 3:
		a := make([]any, r.IntN(4))
		for i := range a {
			a[i] = randomValue(r, depth+1)
		}
		return a
	default:
		const alphabet = "abcé \"\\/\n\t{}[],:ü😀"
		rs := []rune(alphabet)
		var b strings.Builder
		for i := 0; i < r.IntN(12); i++ {
			b.WriteRune(rs[r.IntN(len(rs))])
		}
		return b.String()
	}
}

// snapshot is what must survive an export and an import: every document
// with its metadata (change vector and last modification included),
// identities, index definitions, subscriptions.
type snapshot struct {
	Docs          map[string]string
	Identities    string
	Indexes       []string
	Subscriptions []string
}

func take(t *testing.T, url, db string) snapshot {
	t.Helper()
	s := snapshot{Docs: map[string]string{}}
	b := mustCall(t, 200, "GET", url+"/databases/"+db+"/docs?start=0&pageSize=100000", "", nil)
	var docs struct{ Results []map[string]any }
	if err := json.Unmarshal(b, &docs); err != nil {
		t.Fatal(err)
	}
	for _, d := range docs.Results {
		md := d["@metadata"].(map[string]any)
		raw, _ := json.Marshal(d) // map keys sorted: key order is not what is compared
		s.Docs[md["@id"].(string)] = string(raw)
	}
	s.Identities = string(mustCall(t, 200, "GET", url+"/databases/"+db+"/debug/identities", "", nil))
	b = mustCall(t, 200, "GET", url+"/databases/"+db+"/indexes?start=0&pageSize=100", "", nil)
	var ix struct{ Results []map[string]any }
	if err := json.Unmarshal(b, &ix); err != nil {
		t.Fatal(err)
	}
	for _, d := range ix.Results {
		s.Indexes = append(s.Indexes, fmt.Sprint(d["Name"], d["Type"], d["Maps"], d["Reduce"], d["Fields"], d["LockMode"], d["Priority"]))
	}
	sort.Strings(s.Indexes)
	b = mustCall(t, 200, "GET", url+"/databases/"+db+"/subscriptions?start=0&pageSize=100", "", nil)
	var subs struct{ Results []map[string]any }
	if err := json.Unmarshal(b, &subs); err != nil {
		t.Fatal(err)
	}
	for _, d := range subs.Results {
		s.Subscriptions = append(s.Subscriptions, fmt.Sprint(d["SubscriptionName"], d["Query"], d["Disabled"]))
	}
	sort.Strings(s.Subscriptions)
	return s
}

func importDump(t *testing.T, url, db string, dump []byte, options string) (int, []byte) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if err := mw.WriteField("importOptions", options); err != nil {
		t.Fatal(err)
	}
	fw, err := mw.CreateFormFile("name", "blob")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(dump)
	mw.Close()
	return call(t, "POST", url+"/databases/"+db+"/smuggler/import?operationId=0", mw.FormDataContentType(), &body)
}

// TestPropertyExportImportRoundTrip exports random databases and imports
// each into a fresh one: documents (with their metadata and change
// vectors), HiLo documents, identities, index definitions (JavaScript and
// auto) and subscriptions come back identical, whichever compression.
func TestPropertyExportImportRoundTrip(t *testing.T) {
	n := testserver.Start(t)
	for seed := 1; seed <= 6; seed++ {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		src, dst := fmt.Sprintf("src%d", seed), fmt.Sprintf("dst%d", seed)
		createDB(t, n.URL, src)
		colls := []string{"Orders", "People", "Über Things"}
		var cmds []map[string]any
		for i := 0; i < 20+r.IntN(300); i++ {
			c := colls[r.IntN(len(colls))]
			doc := map[string]any{"Name": fmt.Sprintf("n%d", r.IntN(50)), "V": randomValue(r, 0)}
			md := map[string]any{"@collection": c}
			if r.IntN(4) == 0 {
				md["Custom-Key"] = randomValue(r, 2)
			}
			doc["@metadata"] = md
			cmds = append(cmds, map[string]any{"Id": fmt.Sprintf("%s/%d", strings.ToLower(c), i), "Type": "PUT", "Document": doc})
		}
		body, _ := json.Marshal(map[string]any{"Commands": cmds})
		mustCall(t, 201, "POST", n.URL+"/databases/"+src+"/bulk_docs", "application/json", body)
		// A second write to some documents: their vectors move on.
		mustCall(t, 201, "POST", n.URL+"/databases/"+src+"/bulk_docs", "application/json", body[:len(body)])
		mustCall(t, 201, "GET", n.URL+"/databases/"+src+"/hilo/next?tag=users&lastBatchSize=0&lastRangeAt=&identityPartsSeparator=/&lastMax=0", "", nil)
		for i := 0; i < 1+r.IntN(5); i++ {
			mustCall(t, 200, "POST", n.URL+"/databases/"+src+"/identity/next?name=orders", "", nil)
		}
		mustCall(t, 201, "PUT", n.URL+"/databases/"+src+"/indexes", "application/json",
			[]byte(`{"Indexes":[{"Name":"People/ByName","Maps":["map('People', p => ({ Name: p.Name }))"],"Fields":{"Name":{"Indexing":"Search"}}},`+
				`{"Name":"Orders/Count","Maps":["map('Orders', o => ({ Name: o.Name, Count: 1 }))"],"Reduce":"groupBy(x => x.Name).aggregate(g => ({ Name: g.key, Count: g.values.reduce((a, v) => a + v.Count, 0) }))"}]}`))
		mustCall(t, 200, "POST", n.URL+"/databases/"+src+"/queries", "application/json", []byte(`{"Query":"from Orders where Name = 'n1'"}`))
		mustCall(t, 201, "PUT", n.URL+"/databases/"+src+"/subscriptions", "application/json", []byte(`{"Name":"sub-a","Query":"from People"}`))
		mustCall(t, 201, "PUT", n.URL+"/databases/"+src+"/subscriptions", "application/json", []byte(`{"Name":"sub-b","Query":"from Orders","Disabled":true}`))

		opts := `{}`
		if seed%2 == 0 {
			opts = `{"CompressionAlgorithm":"Zstd"}`
		}
		dump := mustCall(t, 200, "POST", n.URL+"/databases/"+src+"/smuggler/export", "application/json", []byte(opts))
		createDB(t, n.URL, dst)
		if st, b := importDump(t, n.URL, dst, dump, "{}"); st != 200 {
			t.Fatalf("seed %d: import: %d %s", seed, st, b)
		}
		want, got := take(t, n.URL, src), take(t, n.URL, dst)
		if len(want.Docs) < 20 {
			t.Fatalf("seed %d: only %d documents in the source", seed, len(want.Docs))
		}
		if _, ok := want.Docs["Raven/Hilo/users"]; !ok {
			t.Fatalf("seed %d: no HiLo document in the source", seed)
		}
		for id, w := range want.Docs {
			if g := got.Docs[id]; g != w {
				t.Fatalf("seed %d: document %s\nexported %s\nimported %s", seed, id, w, g)
			}
		}
		if len(got.Docs) != len(want.Docs) {
			t.Fatalf("seed %d: %d documents imported, %d exported", seed, len(got.Docs), len(want.Docs))
		}
		if got.Identities != want.Identities {
			t.Fatalf("seed %d: identities %s, want %s", seed, got.Identities, want.Identities)
		}
		if fmt.Sprint(got.Indexes) != fmt.Sprint(want.Indexes) || len(want.Indexes) != 3 {
			t.Fatalf("seed %d: indexes\n%q\nwant\n%q", seed, got.Indexes, want.Indexes)
		}
		if fmt.Sprint(got.Subscriptions) != fmt.Sprint(want.Subscriptions) || len(want.Subscriptions) != 2 {
			t.Fatalf("seed %d: subscriptions\n%q\nwant\n%q", seed, got.Subscriptions, want.Subscriptions)
		}
	}
}

// A truncated dump stops with a 400 that says where (section, item, byte
// offset); what came before that point is imported whole, no document half
// written. A damaged one (its compression's check fails) imports nothing.
// Either way the target's own documents are untouched.
func TestTruncatedAndCorruptDumps(t *testing.T) {
	n := testserver.Start(t)
	createDB(t, n.URL, "src")
	var cmds []map[string]any
	for i := 0; i < 3000; i++ {
		cmds = append(cmds, map[string]any{"Id": fmt.Sprintf("items/%d", i), "Type": "PUT",
			"Document": map[string]any{"N": i, "Pad": strings.Repeat("x", i%200), "@metadata": map[string]any{"@collection": "Items"}}})
	}
	body, _ := json.Marshal(map[string]any{"Commands": cmds})
	mustCall(t, 201, "POST", n.URL+"/databases/src/bulk_docs", "application/json", body)
	want := take(t, n.URL, "src")
	for _, comp := range []string{"Gzip", "Zstd"} {
		dump := mustCall(t, 200, "POST", n.URL+"/databases/src/smuggler/export", "application/json", []byte(`{"CompressionAlgorithm":"`+comp+`"}`))
		for _, c := range []struct {
			name string
			data []byte
		}{
			{"truncated", dump[:len(dump)*6/10]},
			{"damaged", func() []byte {
				d := append([]byte{}, dump...)
				for i := len(d) * 6 / 10; i < len(d)*6/10+64; i++ {
					d[i] ^= 0xA5
				}
				return d
			}()},
		} {
			db := strings.ToLower(comp + c.name)
			createDB(t, n.URL, db)
			mustCall(t, 201, "PUT", n.URL+"/databases/"+db+"/docs?id=mine/1", "application/json", []byte(`{"Mine":true,"@metadata":{"@collection":"Mine"}}`))
			st, b := importDump(t, n.URL, db, c.data, "{}")
			got := take(t, n.URL, db)
			if _, ok := got.Docs["mine/1"]; !ok {
				t.Fatalf("%s %s: the target's own document is gone", comp, c.name)
			}
			if c.name == "damaged" && strings.Contains(string(b), "stream is damaged") {
				// The damage showed when the stream's check failed: the
				// bytes decoded before it may be wrong and still parse (a
				// document under an id it never had), so nothing is imported.
				// (Damage that makes the coding end early looks like a
				// truncated file, below: what was decoded before is whole.)
				if st != http.StatusBadRequest || !strings.Contains(string(b), "nothing was imported") {
					t.Fatalf("%s %s: %d %s, want a 400 saying nothing was imported", comp, c.name, st, b)
				}
				if len(got.Docs) != 1 {
					t.Fatalf("%s %s: %d documents after a damaged dump, want only the target's own", comp, c.name, len(got.Docs))
				}
				t.Logf("%s %s: %s", comp, c.name, b)
				continue
			}
			if st != http.StatusBadRequest || !strings.Contains(string(b), "byte ") || !strings.Contains(string(b), "section Docs") {
				t.Fatalf("%s %s: %d %s, want a 400 naming the section and the byte offset", comp, c.name, st, b)
			}
			if len(got.Docs) > 3001 || (c.name == "truncated" && len(got.Docs) < 2) {
				t.Fatalf("%s %s: %d documents after the failed import", comp, c.name, len(got.Docs))
			}
			for id, g := range got.Docs {
				if id == "mine/1" {
					continue
				}
				if want.Docs[id] != g {
					t.Fatalf("%s %s: %s imported as %s, exported as %s", comp, c.name, id, g, want.Docs[id])
				}
			}
			t.Logf("%s %s: %d of 3000 documents imported before: %s", comp, c.name, len(got.Docs)-1, b)
		}
	}
}

func waitOperation(t *testing.T, url string, id float64) map[string]any {
	t.Helper()
	for i := 0; i < 600; i++ {
		b := mustCall(t, 200, "GET", fmt.Sprintf("%s/operations/state?id=%d", url, int64(id)), "", nil)
		var st map[string]any
		json.Unmarshal(b, &st)
		if st["Status"] != "InProgress" {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the operation did not end")
	return nil
}

// Several databases at once: export-dir writes one dump per database into
// a directory below the dump directory, import-dir reads them back into
// databases of the same names (created when missing); server-side paths
// never leave the dump directory.
func TestExportAndImportDirectories(t *testing.T) {
	n := testserver.Start(t)
	for i, db := range []string{"alpha", "beta"} {
		createDB(t, n.URL, db)
		var cmds []map[string]any
		for j := 0; j < 50*(i+1); j++ {
			cmds = append(cmds, map[string]any{"Id": fmt.Sprintf("x/%d", j), "Type": "PUT", "Document": map[string]any{"J": j, "@metadata": map[string]any{"@collection": "X"}}})
		}
		body, _ := json.Marshal(map[string]any{"Commands": cmds})
		mustCall(t, 201, "POST", n.URL+"/databases/"+db+"/bulk_docs", "application/json", body)
	}
	b := mustCall(t, 200, "POST", n.URL+"/admin/smuggler/export-dir", "application/json", []byte(`{"Directory":"nightly/2026-11-25"}`))
	var op struct{ OperationId float64 }
	json.Unmarshal(b, &op)
	if st := waitOperation(t, n.URL, op.OperationId); st["Status"] != "Completed" {
		t.Fatalf("export-dir: %v", st)
	}
	dir := filepath.Join(n.DataDir, "dumps", "nightly", "2026-11-25")
	for _, db := range []string{"alpha", "beta"} {
		if fi, err := os.Stat(filepath.Join(dir, db+".ravendbdump")); err != nil || fi.Size() < 100 {
			t.Fatalf("%s's dump: %v", db, err)
		}
	}
	// Back into new databases: rename the files, as an operator moving a
	// server would name them.
	os.MkdirAll(filepath.Join(n.DataDir, "dumps", "restore"), 0o755)
	os.Rename(filepath.Join(dir, "alpha.ravendbdump"), filepath.Join(n.DataDir, "dumps", "restore", "alpha2.ravendbdump"))
	os.Rename(filepath.Join(dir, "beta.ravendbdump"), filepath.Join(n.DataDir, "dumps", "restore", "beta2.ravendbdump"))
	b = mustCall(t, 200, "POST", n.URL+"/admin/smuggler/import-dir", "application/json", []byte(`{"Directory":"restore"}`))
	json.Unmarshal(b, &op)
	if st := waitOperation(t, n.URL, op.OperationId); st["Status"] != "Completed" {
		t.Fatalf("import-dir: %v", st)
	}
	for db, want := range map[string]int{"alpha2": 50, "beta2": 100} {
		stats := string(mustCall(t, 200, "GET", n.URL+"/databases/"+db+"/stats", "", nil))
		if !strings.Contains(stats, fmt.Sprintf(`"CountOfDocuments":%d`, want)) {
			t.Errorf("%s: %s", db, stats)
		}
	}
	// One file into one database.
	createDB(t, n.URL, "gamma")
	mustCall(t, 200, "GET", n.URL+"/databases/gamma/admin/smuggler/import?file=restore/alpha2.ravendbdump", "", nil)
	// Paths that leave the dump directory are refused.
	for _, bad := range []string{"../../etc", "/etc", "restore/../../x"} {
		st, body := call(t, "POST", n.URL+"/admin/smuggler/export-dir", "application/json", strings.NewReader(`{"Directory":"`+bad+`"}`))
		if st != 400 || !strings.Contains(string(body), "dump directory") {
			t.Errorf("export-dir %q: %d %s", bad, st, body)
		}
		st, body = call(t, "GET", n.URL+"/databases/gamma/admin/smuggler/import?file="+url.QueryEscape(bad+"/passwd"), "", nil)
		if st != 400 {
			t.Errorf("import file %q: %d %s", bad, st, body)
		}
	}
}

// The curl command the studio offers is run for real against a running
// node (bash, as printed), and the file it wrote is imported back; the
// crontab line is the same command with its % escaped and a dated file.
func TestGeneratedCurlCommandRuns(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (.ci/run installs it)")
	}
	n := testserver.Start(t)
	createDB(t, n.URL, "shop")
	var cmds []map[string]any
	for j := 0; j < 120; j++ {
		cmds = append(cmds, map[string]any{"Id": fmt.Sprintf("orders/%d", j), "Type": "PUT", "Document": map[string]any{"Total": j, "Note": "it's 100% \"fine\" & good", "@metadata": map[string]any{"@collection": "Orders"}}})
	}
	cmds = append(cmds, map[string]any{"Id": "people/1", "Type": "PUT", "Document": map[string]any{"Name": "x", "@metadata": map[string]any{"@collection": "People"}}})
	body, _ := json.Marshal(map[string]any{"Commands": cmds})
	mustCall(t, 201, "POST", n.URL+"/databases/shop/bulk_docs", "application/json", body)
	f := false
	o, err := smuggler.ParseOptions([]byte(`{"OperateOnTypes":"Documents,Indexes","Collections":["Orders"]}`))
	if err != nil {
		t.Fatal(err)
	}
	o.IncludeExpired = &f
	o.TransformScript = "if (this.Total % 2 === 1) throw 'skip'; this.Note = this.Note + \" (it's exported)\";"
	c := smuggler.ExportCommands(smuggler.CommandOptions{ServerURL: n.URL, Database: "shop", FileName: "shop's orders"}, o)
	if !strings.HasPrefix(c.Cron, "0 2 * * * curl ") || !strings.Contains(c.Cron, `\%F`) || strings.Contains(strings.ReplaceAll(c.Cron, `\%`, ""), "%") {
		t.Errorf("crontab line: %s", c.Cron)
	}
	if !strings.Contains(c.PowerShell, `\"OperateOnTypes\"`) || !strings.HasPrefix(c.PowerShell, "curl.exe ") {
		t.Errorf("PowerShell line: %s", c.PowerShell)
	}
	dir := t.TempDir()
	cmd := exec.Command("bash", "-c", c.Bash)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s\n%v\n%s", c.Bash, err, out)
	}
	dump, err := os.ReadFile(filepath.Join(dir, "shop's orders.ravendbdump"))
	if err != nil {
		t.Fatalf("the command wrote no file: %v", err)
	}
	createDB(t, n.URL, "restored")
	if st, b := importDump(t, n.URL, "restored", dump, "{}"); st != 200 {
		t.Fatalf("import: %d %s", st, b)
	}
	got := take(t, n.URL, "restored")
	if len(got.Docs) != 60 {
		t.Fatalf("%d documents back, want the 60 even orders", len(got.Docs))
	}
	if d := got.Docs["orders/4"]; !strings.Contains(d, `it's 100% \"fine\" \u0026 good (it's exported)`) {
		t.Fatalf("orders/4 came back as %s", d)
	}
}
