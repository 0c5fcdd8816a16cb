package studio_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/pki"
	"github.com/rookerydb/rookery/backend/smuggler"
	"github.com/rookerydb/rookery/web"
)

// smugglerServer is a node in this process with a known dump directory.
func smugglerServer(t *testing.T) (http.Handler, string) {
	t.Helper()
	dir := t.TempDir()
	dumps := filepath.Join(dir, "dumps")
	srv, err := web.New(web.Config{DataDir: filepath.Join(dir, "data"), DumpDir: dumps, NodeTag: "A", PublicURL: "http://node-a.test",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Handler(), dumps
}

// sameOriginHeaders are what a browser sends with a form of the page's own
// origin (httptest's host is example.com).
var sameOriginHeaders = map[string]string{"Origin": "http://example.com", "Sec-Fetch-Site": "same-origin"}

func smugCreate(t *testing.T, h http.Handler, name string, docs map[string]string) {
	t.Helper()
	check(t, h, []step{{name: "create " + name, method: "PUT", url: "/admin/databases?name=" + name, body: `{"DatabaseName":"` + name + `"}`, status: 201}})
	if len(docs) == 0 {
		return
	}
	var cmds []string
	for id, coll := range docs {
		cmds = append(cmds, fmt.Sprintf(`{"Id":%q,"Type":"PUT","Document":{"Name":%q,"@metadata":{"@collection":%q}}}`, id, id, coll))
	}
	check(t, h, []step{{name: "fill " + name, method: "POST", url: "/databases/" + name + "/bulk_docs", body: `{"Commands":[` + strings.Join(cmds, ",") + `]}`, status: 201}})
}

var (
	codeRe     = regexp.MustCompile(`<code id="cmd-(bash|powershell|cron)" data-testid="cmd-[a-z]+">([^<]*)</code>`)
	downloadRe = regexp.MustCompile(`name="DownloadOptions" value="([^"]*)"`)
	fileNameRe = regexp.MustCompile(`name="file" value="([^"]*)"`)
)

// commandsOf reads the three command lines a page shows, unescaped.
func commandsOf(t *testing.T, body string) smuggler.Commands {
	t.Helper()
	got := map[string]string{}
	for _, m := range codeRe.FindAllStringSubmatch(body, -1) {
		got[m[1]] = html.UnescapeString(m[2])
	}
	if len(got) != 3 {
		t.Fatalf("the page shows %d command lines, want 3:\n%.4000s", len(got), body)
	}
	return smuggler.Commands{Bash: got["bash"], PowerShell: got["powershell"], Cron: got["cron"]}
}

func downloadOptions(t *testing.T, body string) (string, map[string]any) {
	t.Helper()
	m := downloadRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no DownloadOptions in:\n%.3000s", body)
	}
	raw := html.UnescapeString(m[1])
	var v map[string]any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatalf("DownloadOptions %s: %v", raw, err)
	}
	return raw, v
}

// exportVia posts DownloadOptions as the page's form does.
func exportVia(t *testing.T, h http.Handler, db, opts string, headers map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := localRequest("POST", "/databases/"+db+"/smuggler/export", strings.NewReader(url.Values{"DownloadOptions": {opts}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// importVia posts a dump as the page's script does: importOptions first,
// then the file.
func importVia(t *testing.T, h http.Handler, db string, op int, opts string, dump []byte) *httptest.ResponseRecorder {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	w.WriteField("importOptions", opts)
	fw, _ := w.CreateFormFile("file", "shop.ravendbdump")
	fw.Write(dump)
	w.Close()
	u := "/databases/" + db + "/smuggler/import"
	if op > 0 {
		u += fmt.Sprintf("?operationId=%d", op)
	}
	req := localRequest("POST", u, &buf)
	req.Header.Set("Content-Type", w.FormDataContentType())
	for k, v := range sameOriginHeaders {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func docCount(t *testing.T, h http.Handler, db string) int {
	t.Helper()
	rec := get(t, h, "/databases/"+db+"/stats")
	var st struct{ CountOfDocuments int }
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Code != 200 {
		t.Fatalf("stats of %s: %d %s", db, rec.Code, rec.Body)
	}
	return st.CountOfDocuments
}

// The page renders RavenDB's export options (defaults: every type, every
// collection, expired included, gzip, "Dump of <db> <date>"), the
// download's DownloadOptions and the three command lines exactly as
// smuggler.ExportCommands makes them for those options, each with a copy
// button; chosen options (in the query, or through the command fragment the
// script fetches) change all of them; the form's DownloadOptions downloads
// the dump through the same-origin guard, and the dump imports back.
func TestStudioSmugglerPageOptionsAndCommands(t *testing.T) {
	h, _ := smugglerServer(t)
	smugCreate(t, h, "shop", map[string]string{"orders/1": "Orders", "orders/2": "Orders", "users/1": "Users"})

	rec := get(t, h, "/studio/db/shop/smuggler")
	body := rec.Body.String()
	if rec.Code != 200 {
		t.Fatalf("page: %d %s", rec.Code, body)
	}
	for _, typ := range []string{"Documents", "RevisionDocuments", "Conflicts", "Indexes", "Identities", "CompareExchange", "CounterGroups", "Subscriptions", "Attachments", "TimeSeries", "DatabaseRecord"} {
		if !regexp.MustCompile(`value="` + typ + `" checked data-testid="export-type-` + typ + `"`).MatchString(body) {
			t.Errorf("export type %s is not offered ticked", typ)
		}
		if !strings.Contains(body, `data-testid="import-type-`+typ+`"`) {
			t.Errorf("import type %s is not offered", typ)
		}
	}
	for _, want := range []string{`value="Orders" data-testid="export-collection"`, `value="Users" data-testid="export-collection"`,
		`value="Gzip" checked`, `name="expired" value="true" checked`, `this[&#39;@metadata&#39;][&#39;@collection&#39;]`,
		`data-testid="copy-bash"`, `data-testid="copy-powershell"`, `data-testid="copy-cron"`, `action="/databases/shop/smuggler/export"`,
		`enctype="multipart/form-data" action="/databases/shop/smuggler/import"`, `data-testid="nav-smuggler"`, `data-testid="no-smuggler-ops"`,
		`data-live="/studio/live?db=shop&amp;page=smuggler"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	m := fileNameRe.FindStringSubmatch(body)
	if m == nil || !regexp.MustCompile(`^Dump of shop \d{4}-\d{2}-\d{2} \d{2}-\d{2}$`).MatchString(m[1]) {
		t.Fatalf("default file name: %v", m)
	}
	name := m[1]
	all := "Documents,RevisionDocuments,Conflicts,Indexes,Identities,CompareExchange,CounterGroups,Subscriptions,Attachments,TimeSeries,DatabaseRecord"
	yes := true
	want := smuggler.ExportCommands(smuggler.CommandOptions{ServerURL: "http://node-a.test", Database: "shop", FileName: name},
		smuggler.Options{OperateOnTypes: all, IncludeExpired: &yes})
	if got := commandsOf(t, body); got != want {
		t.Fatalf("commands:\n%+v\nwant\n%+v", got, want)
	}
	if strings.Contains(body, "--cert") {
		t.Fatal("an unsecured node's commands carry certificate flags")
	}
	if !strings.Contains(want.Bash, "/databases/shop/smuggler/export") || !strings.Contains(want.Cron, `Dump of shop $(date +\%F).ravendbdump`) {
		t.Fatalf("commands: %+v", want)
	}
	rawDefault, dto := downloadOptions(t, body)
	if dto["OperateOnTypes"] != all || dto["IncludeExpired"] != true || dto["FileName"] != name || dto["Collections"] != nil {
		t.Fatalf("default DownloadOptions: %s", rawDefault)
	}

	// Chosen options: two types, one collection (named in another case),
	// zstd, no expired documents, a file name with a slash, a script.
	script := "if (this.Name === 'orders/2') throw 'skip';"
	q := url.Values{"o": {"1"}, "type": {"Documents", "Indexes"}, "collection": {"orders"}, "compression": {"Zstd"},
		"file": {"nightly/shop"}, "transform": {"on"}, "script": {script}}
	page := get(t, h, "/studio/db/shop/smuggler?"+q.Encode()).Body.String()
	frag := get(t, h, "/studio/db/shop/smuggler?part=command&"+q.Encode()).Body.String()
	if strings.Contains(frag, "<html") || !strings.Contains(frag, `id="export-command"`) {
		t.Fatalf("the command fragment is not just the box: %.500s", frag)
	}
	no := false
	o := smuggler.Options{OperateOnTypes: "Documents,Indexes", IncludeExpired: &no, Collections: []string{"Orders"}, CompressionAlgorithm: "Zstd", TransformScript: script}
	want = smuggler.ExportCommands(smuggler.CommandOptions{ServerURL: "http://node-a.test", Database: "shop", FileName: "nightly-shop"}, o)
	for what, b := range map[string]string{"page": page, "fragment": frag} {
		if got := commandsOf(t, b); got != want {
			t.Fatalf("%s commands with options:\n%+v\nwant\n%+v", what, got, want)
		}
	}
	rawZstd, dto := downloadOptions(t, frag)
	if dto["OperateOnTypes"] != "Documents,Indexes" || dto["IncludeExpired"] != false || dto["CompressionAlgorithm"] != "Zstd" ||
		dto["FileName"] != "nightly-shop" || dto["TransformScript"] != script || fmt.Sprint(dto["Collections"]) != "[Orders]" {
		t.Fatalf("DownloadOptions with options: %s", rawZstd)
	}
	if !strings.Contains(page, `value="Zstd" checked`) || strings.Contains(page, `name="expired" value="true" checked`) || !strings.Contains(page, `value="Orders" checked`) {
		t.Fatal("the page does not show the chosen options")
	}

	// Options an export would refuse say why.
	bad := get(t, h, "/studio/db/shop/smuggler?part=command&"+url.Values{"o": {"1"}, "type": {"Documents"}, "transform": {"on"}, "script": {"this.x = ("}}.Encode()).Body.String()
	if !strings.Contains(bad, `data-valid="false"`) || !strings.Contains(bad, "The transform script does not compile") {
		t.Fatalf("a broken script: %.1500s", bad)
	}
	none := get(t, h, "/studio/db/shop/smuggler?part=command&o=1").Body.String()
	if !strings.Contains(none, `data-valid="false"`) || !strings.Contains(none, "tick at least one item type") {
		t.Fatalf("no type: %.1500s", none)
	}

	// The form's download: zstd with the chosen options, gzip with the
	// defaults, both through the same-origin guard; a cross-site post is
	// refused.
	z := exportVia(t, h, "shop", rawZstd, sameOriginHeaders)
	if z.Code != 200 || !bytes.HasPrefix(z.Body.Bytes(), []byte{0x28, 0xb5, 0x2f, 0xfd}) || !strings.Contains(z.Header().Get("Content-Disposition"), "nightly-shop.ravendbdump") {
		t.Fatalf("zstd export: %d %q %x", z.Code, z.Header().Get("Content-Disposition"), z.Body.Bytes()[:min(8, z.Body.Len())])
	}
	g := exportVia(t, h, "shop", rawDefault, sameOriginHeaders)
	if g.Code != 200 || !bytes.HasPrefix(g.Body.Bytes(), []byte{0x1f, 0x8b}) || !strings.Contains(g.Header().Get("Content-Disposition"), "Dump of shop") {
		t.Fatalf("gzip export: %d %q", g.Code, g.Header().Get("Content-Disposition"))
	}
	if x := exportVia(t, h, "shop", rawDefault, map[string]string{"Origin": "http://evil.test", "Sec-Fetch-Site": "cross-site"}); x.Code != 403 {
		t.Fatalf("a cross-site export: %d", x.Code)
	}
	smugCreate(t, h, "copy", nil)
	smugCreate(t, h, "orders", nil)
	if r := importVia(t, h, "copy", 0, "{}", g.Body.Bytes()); r.Code != 200 {
		t.Fatalf("import of the gzip dump: %d %s", r.Code, r.Body)
	}
	if r := importVia(t, h, "orders", 0, "{}", z.Body.Bytes()); r.Code != 200 {
		t.Fatalf("import of the zstd dump: %d %s", r.Code, r.Body)
	}
	if n := docCount(t, h, "copy"); n != 3 {
		t.Fatalf("the gzip dump brought %d documents back, want 3", n)
	}
	if n := docCount(t, h, "orders"); n != 1 {
		t.Fatalf("the zstd dump (Orders only, orders/2 dropped by the script) brought %d documents, want 1", n)
	}

	// Both exports are on the page, done, with their counters.
	body = get(t, h, "/studio/db/shop/smuggler").Body.String()
	if n := strings.Count(body, `data-kind="Export"`); n != 2 || strings.Count(body, `data-state="completed" data-kind="Export"`) != 2 {
		t.Fatalf("the page lists %d exports (want 2, completed):\n%.3000s", n, body)
	}
}

// rookeryDump writes a dump as RavenDB 5.4 lays one out: n documents, a
// JavaScript index, a C# index (skipped by name), an identity, counters
// and time series (counted, not stored); truncated cuts it after about
// half the documents.
func rookeryDump(t *testing.T, n int, truncated bool) []byte {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"BuildVersion":54107,"Docs":[`)
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"Name":"patient %d","Pad":%q,"@metadata":{"@collection":"Patients","@id":"patients/%d-A","@change-vector":"A:%d-un3WmsZxZEKsRe/VW4qLMw","@last-modified":"2019-07-24T10:01:25.0000000Z"}}`, i, strings.Repeat("x", 200), i, i)
	}
	b.WriteString(`],"Indexes":[`)
	b.WriteString(`{"Type":"JavaScriptMap","IndexDefinition":{"Name":"Patients/ByName","Maps":["map('Patients', p => ({ Name: p.Name }))"],"Reduce":null,"Fields":{},"Configuration":{},"LockMode":"Unlock","Priority":"Normal","Type":"JavaScriptMap","SourceType":"Documents"}},`)
	b.WriteString(`{"Type":"Map","IndexDefinition":{"Name":"Patients/ByVisits","Maps":["from p in docs.Patients select new { p.Name }"],"Reduce":null,"Fields":{},"Configuration":{}}}],`)
	b.WriteString(`"Identities":[{"Key":"patients|","Value":"42"}],`)
	b.WriteString(`"CounterGroups":[{"DocId":"patients/1-A","ChangeVector":"A:9-x","Values":{"Counters":{"likes":{"A":3}}}}],`)
	b.WriteString(`"Tombstones":[{"Key":"patients/999-A","Collection":"Patients","Etag":7,"ChangeVector":"A:7-x"}],`)
	b.WriteString(`"Subscriptions":[]}`)
	raw := b.String()
	if truncated {
		raw = raw[:len(raw)/2]
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write([]byte(raw))
	zw.Close()
	return out.Bytes()
}

// An import shows on the page with its result summary: counts per item
// type (documents, indexes, identities, counters; tombstones marked not
// stored yet), the messages (the skipped C# index by name, the tombstones
// not stored),
// the progress at its end; a truncated dump shows as failed with the
// position of the error and what it imported before.
func TestStudioSmugglerImportResult(t *testing.T) {
	h, _ := smugglerServer(t)
	smugCreate(t, h, "shop", nil)
	smugCreate(t, h, "cut", nil)
	if r := importVia(t, h, "shop", 0, `{"OperateOnTypes":"Documents,Indexes,Identities,Subscriptions,CounterGroups,Tombstones"}`, rookeryDump(t, 300, false)); r.Code != 200 {
		t.Fatalf("import: %d %s", r.Code, r.Body)
	}
	body := get(t, h, "/studio/db/shop/smuggler").Body.String()
	op := regexp.MustCompile(`(?s)<div class="op smug-op" id="op-(\d+)".*?data-state="completed" data-kind="Import">(.*?)</section>`).FindStringSubmatch(body)
	if op == nil {
		t.Fatalf("no completed import on the page:\n%.4000s", body)
	}
	view := op[2]
	// read, skipped, errors per type: the C# index is an error, by name.
	for typ, want := range map[string][3]string{"Documents": {"300", "0", "0"}, "Indexes": {"1", "0", "1"}, "Identities": {"1", "0", "0"}, "Counters": {"1", "0", "0"}, "Tombstones": {"1", "0", "0"}} {
		re := regexp.MustCompile(`data-type="` + typ + `"><th scope="row">` + typ + `\s*(<span class="tag"[^>]*>not stored yet</span>)?\s*</th><td class="num" data-testid="count-read">(\d+)</td><td class="num" data-testid="count-skipped">(\d+)</td><td class="num[^"]*" data-testid="count-errors">(\d+)<`)
		m := re.FindStringSubmatch(view)
		if m == nil || [3]string{m[2], m[3], m[4]} != want || (m[1] != "") != (typ == "Tombstones") {
			t.Errorf("%s counts: %v, want %v (not stored yet only for tombstones)", typ, m, want)
		}
	}
	for _, want := range []string{
		`<progress max="100" value="100"`, `data-testid="op-percent">100%`,
		`data-level="WARN"`, "Patients/ByVisits", "Rookery does not store them yet", `data-testid="op-docs">300<`,
	} {
		if !strings.Contains(view, want) {
			t.Errorf("import view lacks %s", want)
		}
	}
	if t.Failed() {
		t.Fatalf("import view:\n%s", view)
	}
	if !regexp.MustCompile(`· [\d.]+ KiB of [\d.]+ KiB`).MatchString(view) {
		t.Errorf("no bytes position in %s", view)
	}

	// A truncated dump: failed, where, and the documents before it kept.
	r := importVia(t, h, "cut", 0, "{}", rookeryDump(t, 300, true))
	if r.Code != 400 {
		t.Fatalf("truncated import: %d %s", r.Code, r.Body)
	}
	kept := docCount(t, h, "cut")
	body = get(t, h, "/studio/db/cut/smuggler").Body.String()
	failed := regexp.MustCompile(`(?s)data-state="failed" data-kind="Import">(.*?)</section>`).FindStringSubmatch(body)
	if failed == nil {
		t.Fatalf("no failed import on the page:\n%.4000s", body)
	}
	if !strings.Contains(failed[1], `data-testid="op-error"`) || !regexp.MustCompile(`section Docs, item \d+, byte \d+`).MatchString(failed[1]) || !strings.Contains(failed[1], `data-level="ERROR"`) {
		t.Fatalf("the failed import does not say where:\n%s", failed[1])
	}
	if kept == 0 || !strings.Contains(failed[1], fmt.Sprintf(`data-testid="op-docs">%d<`, kept)) {
		t.Fatalf("the failed import kept %d documents; the page says:\n%s", kept, failed[1])
	}
}

// A running import shows in the header of every page (its label, progress
// and a link to its page), and leaves it when done.
func TestStudioSmugglerRunningInHeader(t *testing.T) {
	h, _ := smugglerServer(t)
	smugCreate(t, h, "shop", nil)
	var idAnswer struct{ Id int }
	if err := json.Unmarshal(get(t, h, "/databases/shop/operations/next-operation-id").Body.Bytes(), &idAnswer); err != nil || idAnswer.Id == 0 {
		t.Fatalf("next operation id: %v", err)
	}
	dumpBytes := rookeryDump(t, 2000, false)
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.WriteField("importOptions", "{}")
	fw, _ := mw.CreateFormFile("file", "big.ravendbdump")
	fw.Write(dumpBytes)
	mw.Close()
	all := buf.Bytes()
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.CloseWithError(io.ErrUnexpectedEOF) }) // a failed test ends the import
	req := localRequest("POST", fmt.Sprintf("/databases/shop/smuggler/import?operationId=%d", idAnswer.Id), pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.ContentLength = int64(len(all))
	done := make(chan *httptest.ResponseRecorder)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		done <- rec
	}()
	half := len(all) / 2
	if _, err := pw.Write(all[:half]); err != nil {
		t.Fatal(err)
	}
	// The header shows the import as soon as it runs, and its progress
	// once the first counters are published (every 200 ms).
	link := fmt.Sprintf(`href="/studio/db/shop/smuggler#op-%d"`, idAnswer.Id)
	percent := regexp.MustCompile(`aria-label="Import into shop: (\d+)% done"`)
	deadline := time.Now().Add(10 * time.Second)
	var body string
	for {
		body = get(t, h, "/studio/databases").Body.String()
		if strings.Contains(body, link) && percent.MatchString(body) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []string{`data-running="1"`, `data-testid="running-op"`, "Import into shop", link, `data-testid="ops-count">1<`} {
		if !strings.Contains(body, want) {
			t.Fatalf("the header lacks %s while the import runs:\n%.3000s", want, body)
		}
	}
	if m := percent.FindStringSubmatch(body); m == nil || m[1] == "0" || m[1] == "100" {
		t.Fatalf("the header's progress of a half-sent import: %v", m)
	}
	if _, err := pw.Write(all[half:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if rec := <-done; rec.Code != 200 {
		t.Fatalf("import: %d %s", rec.Code, rec.Body)
	}
	body = get(t, h, "/studio/databases").Body.String()
	if !strings.Contains(body, `data-running="0"`) || strings.Contains(body, `data-testid="running-op"`) {
		t.Fatalf("the header still shows the finished import:\n%.2000s", body)
	}
}

// The server page exports the ticked databases to a directory below the
// dump directory (two dumps written whole, each database's part done), lists
// the directory's dumps, and imports one back into a database that was
// deleted (created again, with its documents); a directory outside the dump
// directory is refused.
func TestStudioSmugglerServerPage(t *testing.T) {
	h, dumps := smugglerServer(t)
	smugCreate(t, h, "alpha", map[string]string{"a/1": "As", "a/2": "As"})
	smugCreate(t, h, "beta", map[string]string{"b/1": "Bs", "b/2": "Bs", "b/3": "Bs"})
	smugCreate(t, h, "gamma", map[string]string{"c/1": "Cs"})
	page := get(t, h, "/studio/smuggler").Body.String()
	for _, want := range []string{`value="alpha" checked data-testid="server-export-db"`, `value="beta" checked`, `value="gamma" checked`,
		`data-testid="no-dumps"`, html.EscapeString(dumps), `data-testid="nav-server-smuggler"`, `data-testid="no-smuggler-ops"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("server page lacks %s:\n%.3000s", want, page)
		}
	}

	form := map[string]string{}
	post := func(path string, v url.Values) *httptest.ResponseRecorder {
		req := localRequest("POST", path, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, val := range sameOriginHeaders {
			req.Header.Set(k, val)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	_ = form
	rec := post("/studio/smuggler/export", url.Values{"db": {"alpha", "beta"}, "dir": {"nightly/one"}, "type": {"Documents", "Indexes", "Identities"}})
	loc := rec.Header().Get("Location")
	m := regexp.MustCompile(`^/studio/smuggler\?dir=nightly%2Fone&flash=[^#]+#op-(\d+)$`).FindStringSubmatch(loc)
	if rec.Code != 303 || m == nil {
		t.Fatalf("export: %d %s", rec.Code, loc)
	}
	waitServerOp(t, h, m[1])
	for _, db := range []string{"alpha", "beta"} {
		b, err := os.ReadFile(filepath.Join(dumps, "nightly", "one", db+".ravendbdump"))
		if err != nil || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			t.Fatalf("dump of %s: %v", db, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dumps, "nightly", "one", "gamma.ravendbdump")); err == nil {
		t.Fatal("gamma was not ticked but was exported")
	}
	page = get(t, h, "/studio/smuggler?dir=nightly/one").Body.String()
	names := regexp.MustCompile(`data-testid="dump-name">([^<]+)<`).FindAllStringSubmatch(page, -1)
	if len(names) != 2 || names[0][1] != "alpha" || names[1][1] != "beta" {
		t.Fatalf("dumps listed: %v", names)
	}
	for _, want := range []string{`data-testid="op-part" data-db="alpha" data-state="completed"`, `data-testid="op-part" data-db="beta" data-state="completed"`,
		`data-state="completed" data-kind="Server export"`, `data-testid="dump-dir-link">nightly/one<`} {
		if !strings.Contains(page, want) {
			t.Fatalf("server page after the export lacks %s:\n%.4000s", want, page)
		}
	}
	if !regexp.MustCompile(`data-db="beta" data-state="completed">.*?data-testid="part-docs">3<`).MatchString(page) {
		t.Fatal("beta's part does not count its 3 documents")
	}

	// beta goes away and comes back from its dump.
	check(t, h, []step{{name: "delete beta", method: "DELETE", url: "/admin/databases", body: `{"DatabaseNames":["beta"],"HardDelete":true}`, status: 200}})
	rec = post("/studio/smuggler/import", url.Values{"dir": {"nightly/one"}, "db": {"beta"}})
	m = regexp.MustCompile(`#op-(\d+)$`).FindStringSubmatch(rec.Header().Get("Location"))
	if rec.Code != 303 || m == nil {
		t.Fatalf("import: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	waitServerOp(t, h, m[1])
	if n := docCount(t, h, "beta"); n != 3 {
		t.Fatalf("beta came back with %d documents, want 3", n)
	}

	// Refusals: outside the dump directory, a dump that is not there,
	// nothing ticked.
	for _, c := range []struct {
		path string
		v    url.Values
		want string
	}{
		{"/studio/smuggler/export", url.Values{"db": {"alpha"}, "dir": {"../outside"}, "type": {"Documents"}}, "without"},
		{"/studio/smuggler/export", url.Values{"dir": {"x"}, "type": {"Documents"}}, "tick at least one database"},
		{"/studio/smuggler/export", url.Values{"db": {"alpha"}, "dir": {"x"}}, "tick at least one item type"},
		{"/studio/smuggler/import", url.Values{"dir": {"nightly/one"}, "db": {"zeta"}}, "There is no zeta.ravendbdump"},
		{"/studio/smuggler/import", url.Values{"dir": {"/etc"}, "db": {"passwd"}}, "must be relative"},
	} {
		rec := post(c.path, c.v)
		loc, _ := url.Parse(rec.Header().Get("Location"))
		if rec.Code != 303 || loc == nil || !strings.Contains(loc.Query().Get("error"), c.want) {
			t.Errorf("%s %v: %d %s, want an error saying %q", c.path, c.v, rec.Code, rec.Header().Get("Location"), c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dumps), "outside")); err == nil {
		t.Fatal("a directory outside the dump directory was created")
	}
}

func waitServerOp(t *testing.T, h http.Handler, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec := get(t, h, "/operations/state?id="+id)
		var st struct {
			Status string
			Result json.RawMessage
		}
		json.Unmarshal(rec.Body.Bytes(), &st)
		switch st.Status {
		case "Completed":
			return
		case "Faulted", "Canceled":
			t.Fatalf("operation %s: %s %s", id, st.Status, st.Result)
		}
		if time.Now().After(deadline) {
			t.Fatalf("operation %s still %q: %s", id, st.Status, rec.Body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// On a secured node the commands present a client certificate and trust
// the CA (admin.pem and ca.pem as `studio setup` names them, or the paths
// given); a ValidUser reads the page of the database it may read and not
// another's, nor the server page (Operators), which its menu does not offer.
func TestStudioSmugglerSecured(t *testing.T) {
	dir, res := securedSetup(t)
	reader, err := pki.IssueClient(dir, pki.ClientOptions{Name: "reader", PFXPassword: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	n := startSecured(t, res, "A", "")
	admin := certClient(t, res, res.Admin.PEM)
	waitReady(t, admin, n.url)
	for _, db := range []string{"shop", "other"} {
		if p := browseForm(t, admin, n.url+"/studio/databases", url.Values{"name": {db}}); p.status != 303 {
			t.Fatalf("create %s: %d", db, p.status)
		}
	}
	p := registerForm(t, admin, n.url, map[string][]string{
		"name": {"reader"}, "clearance": {"ValidUser"}, "pem": {string(readFile(t, reader.PEM))}, "permDb": {"shop"}, "permAccess": {"Read"},
	}, nil)
	if p.status != 303 {
		t.Fatalf("register reader: %d %.1000s", p.status, p.body)
	}

	p = browse(t, admin, "GET", n.url+"/studio/db/shop/smuggler", "", nil)
	if p.status != 200 {
		t.Fatalf("admin page: %d", p.status)
	}
	c := commandsOf(t, p.body)
	for _, line := range []string{c.Bash, c.Cron} {
		if !strings.Contains(line, "--cert 'admin.pem' --cacert 'ca.pem'") || !strings.Contains(line, "'"+n.url+"/databases/shop/smuggler/export'") {
			t.Fatalf("secured command: %s", line)
		}
	}
	if !strings.Contains(c.PowerShell, "--cert 'admin.pem' --cacert 'ca.pem'") {
		t.Fatalf("secured PowerShell command: %s", c.PowerShell)
	}
	mustContain(t, "secured page", p, `data-testid="export-cert"`, `data-testid="export-cacert"`, `data-testid="nav-server-smuggler"`)
	p = browse(t, admin, "GET", n.url+"/studio/db/shop/smuggler?part=command&"+url.Values{"o": {"1"}, "type": {"Documents"}, "cert": {"/etc/rookery/ops.pem"}, "cacert": {"/etc/rookery/ca.pem"}}.Encode(), "", nil)
	if c := commandsOf(t, p.body); !strings.Contains(c.Bash, "--cert '/etc/rookery/ops.pem' --cacert '/etc/rookery/ca.pem'") {
		t.Fatalf("chosen certificate paths: %s", c.Bash)
	}

	ro := certClient(t, res, reader.PEM)
	p = browse(t, ro, "GET", n.url+"/studio/db/shop/smuggler", "", nil)
	if p.status != 200 {
		t.Fatalf("reader on shop: %d", p.status)
	}
	mustContain(t, "reader page", p, "--cert", `data-testid="nav-smuggler"`)
	mustLack(t, "reader page", p, `data-testid="nav-server-smuggler"`)
	if p := browse(t, ro, "GET", n.url+"/studio/db/other/smuggler", "", nil); p.status != 403 {
		t.Fatalf("reader on other: %d", p.status)
	}
	if p := browse(t, ro, "GET", n.url+"/studio/smuggler", "", nil); p.status != 403 {
		t.Fatalf("reader on the server page: %d", p.status)
	}
	if p := browseForm(t, ro, n.url+"/studio/smuggler/export", url.Values{"db": {"shop"}, "type": {"Documents"}}); p.status != 403 {
		t.Fatalf("reader exports to the server's disk: %d", p.status)
	}
}

// Cancel on the page stops a running import: the operation ends Canceled,
// the import's request ends, and the page shows it cancelled; cancelling
// through another database's page finds no such operation.
func TestStudioSmugglerCancel(t *testing.T) {
	h, _ := smugglerServer(t)
	smugCreate(t, h, "shop", nil)
	smugCreate(t, h, "other", nil)
	var idAnswer struct{ Id int }
	json.Unmarshal(get(t, h, "/databases/shop/operations/next-operation-id").Body.Bytes(), &idAnswer)
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.WriteField("importOptions", "{}")
	fw, _ := mw.CreateFormFile("file", "big.ravendbdump")
	fw.Write(rookeryDump(t, 2000, false))
	mw.Close()
	all := buf.Bytes()
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.CloseWithError(io.ErrUnexpectedEOF) })
	req := localRequest("POST", fmt.Sprintf("/databases/shop/smuggler/import?operationId=%d", idAnswer.Id), pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	done := make(chan *httptest.ResponseRecorder)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		done <- rec
	}()
	go pw.Write(all[:len(all)/2]) // and then nothing: the import waits for the rest
	op := fmt.Sprint(idAnswer.Id)
	waitFor(t, "the import to run", func() bool {
		return strings.Contains(get(t, h, "/studio/db/shop/smuggler").Body.String(), `data-op="`+op+`" data-state="running"`)
	})
	if !strings.Contains(get(t, h, "/studio/db/shop/smuggler").Body.String(), `data-testid="op-cancel"`) {
		t.Fatal("a running import offers no Cancel")
	}
	if rec := postForm(t, h, "/studio/db/other/smuggler/cancel", map[string]string{"op": op}, sameOriginHeaders); rec.Code != 303 || !strings.Contains(rec.Header().Get("Location"), "error=") {
		t.Fatalf("cancel through another database: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	rec := postForm(t, h, "/studio/db/shop/smuggler/cancel", map[string]string{"op": op}, sameOriginHeaders)
	if rec.Code != 303 || !strings.Contains(rec.Header().Get("Location"), "flash=") {
		t.Fatalf("cancel: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled import's request did not end")
	}
	waitFor(t, "the page to show it cancelled", func() bool {
		return strings.Contains(get(t, h, "/studio/db/shop/smuggler").Body.String(), `data-op="`+op+`" data-state="cancelled"`)
	})
}
