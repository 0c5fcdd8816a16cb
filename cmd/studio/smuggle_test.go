package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/internal/testserver"
)

func httpDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// `studio export` writes a dump file and `studio import` reads it into
// another database, quietly when not on a terminal; a bad file fails with
// a non-zero status and the server's positioned error.
func TestExportImportCommands(t *testing.T) {
	n := testserver.Start(t)
	for _, db := range []string{"cli1", "cli2"} {
		if st, b := httpDo(t, "PUT", n.URL+"/admin/databases?name="+db, `{"DatabaseName":"`+db+`"}`); st != 201 {
			t.Fatalf("create %s: %d %s", db, st, b)
		}
	}
	var cmds []map[string]any
	for i := 0; i < 500; i++ {
		cmds = append(cmds, map[string]any{"Id": fmt.Sprintf("things/%d", i), "Type": "PUT", "Document": map[string]any{"N": i, "@metadata": map[string]any{"@collection": "Things"}}})
	}
	body, _ := json.Marshal(map[string]any{"Commands": cmds})
	if st, b := httpDo(t, "POST", n.URL+"/databases/cli1/bulk_docs", string(body)); st != 201 {
		t.Fatalf("bulk: %d %s", st, b)
	}
	file := filepath.Join(t.TempDir(), "cli1.ravendbdump")
	out, err := exec.Command(binary, "export", "--url", n.URL, "--database", "cli1", "--out", file).CombinedOutput()
	if err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	if len(out) != 0 {
		t.Errorf("export printed %q off a terminal", out)
	}
	if fi, err := os.Stat(file); err != nil || fi.Size() < 100 {
		t.Fatalf("dump file: %v", err)
	}
	out, err = exec.Command(binary, "import", "--url", n.URL, "--database", "cli2", "--in", file).CombinedOutput()
	if err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	_, stats := httpDo(t, "GET", n.URL+"/databases/cli2/stats", "")
	if !strings.Contains(stats, `"CountOfDocuments":500`) {
		t.Fatalf("after the import: %s", stats)
	}
	// A truncated dump: exit status 1 and the server's reason.
	b, _ := os.ReadFile(file)
	bad := filepath.Join(t.TempDir(), "bad.ravendbdump")
	os.WriteFile(bad, b[:len(b)/2], 0o644)
	cmd := exec.Command(binary, "import", "--url", n.URL, "--database", "cli2", "--in", bad)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "truncated") {
		t.Fatalf("a truncated dump: %v, %s", err, stderr.String())
	}
}
