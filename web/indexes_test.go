package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/testserver"
)

func ixCall(t *testing.T, method, url string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, r)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

type indexRow struct {
	Name  string
	State string
}

func indexStates(t *testing.T, base string) map[string]string {
	t.Helper()
	st, b := ixCall(t, "GET", base+"/databases/shop/indexes", nil)
	if st != 200 {
		t.Fatalf("indexes: %d %s", st, b)
	}
	var out struct{ Results []indexRow }
	_ = json.Unmarshal(b, &out)
	m := map[string]string{}
	for _, r := range out.Results {
		m[r.Name] = r.State
	}
	return m
}

func query(t *testing.T, base, rql string) string {
	t.Helper()
	st, b := ixCall(t, "POST", base+"/databases/shop/queries", map[string]any{"Query": rql})
	if st != 200 {
		t.Fatalf("query %q: %d %s", rql, st, b)
	}
	var r struct {
		IndexName    string
		TotalResults int
	}
	_ = json.Unmarshal(b, &r)
	return r.IndexName
}

// The auto-index cleanup on a real node, with the database's own keys set
// to seconds: an unused auto index is kept while nothing queries its
// collection (an application that is not running loses nothing), goes Idle
// once its collection is queried through another index, is Normal again
// when queried, and is deleted after the idle period while the collection
// keeps being queried elsewhere; each decision is in the index log.
func TestAutoIndexCleanupOnANode(t *testing.T) {
	n := testserver.Start(t, testserver.Options{IndexCleanupInterval: 200 * time.Millisecond})
	st, b := ixCall(t, "PUT", n.URL+"/admin/databases", map[string]any{"DatabaseName": "shop", "Settings": map[string]string{
		"Indexing.TimeToWaitBeforeMarkingAutoIndexAsIdleInMin":        "0.03",   // 1.8 s
		"Indexing.TimeToWaitBeforeDeletingAutoIndexMarkedAsIdleInHrs": "0.0012", // 4.3 s
	}})
	if st != 201 {
		t.Fatalf("create: %d %s", st, b)
	}
	var cmds []map[string]any
	for i := 0; i < 20; i++ {
		cmds = append(cmds, map[string]any{"Type": "PUT", "Id": fmt.Sprintf("orders/%d", i),
			"Document": map[string]any{"Name": fmt.Sprintf("n%d", i%3), "Total": i, "@metadata": map[string]any{"@collection": "Orders"}}})
	}
	if st, b := ixCall(t, "POST", n.URL+"/databases/shop/bulk_docs", map[string]any{"Commands": cmds}); st != 201 {
		t.Fatalf("bulk: %d %s", st, b)
	}
	if got := query(t, n.URL, "from Orders where Name = 'n1'"); got != "Auto/Orders/ByName" {
		t.Fatalf("index %q", got)
	}
	// Nothing queries Orders for longer than the idle time: kept.
	time.Sleep(3 * time.Second)
	if s := indexStates(t, n.URL)["Auto/Orders/ByName"]; s != "Normal" {
		t.Fatalf("an unqueried collection's index became %s", s)
	}
	log := indexLog(t, n)
	if !strings.Contains(log, "keep Auto/Orders/ByName") || !strings.Contains(log, "may not be running") {
		t.Fatalf("no kept decision in the log:\n%s", log)
	}
	// Orders is queried through another index: ByName goes Idle.
	waitFor(t, 10*time.Second, "ByName idle", func() bool {
		query(t, n.URL, "from Orders where Total > 5")
		return indexStates(t, n.URL)["Auto/Orders/ByName"] == "Idle"
	})
	// Queried again: Normal.
	query(t, n.URL, "from Orders where Name = 'n2'")
	waitFor(t, 10*time.Second, "ByName normal again", func() bool { return indexStates(t, n.URL)["Auto/Orders/ByName"] == "Normal" })
	// Unused again while ByTotal keeps serving Orders: Idle, then deleted.
	waitFor(t, 30*time.Second, "ByName deleted", func() bool {
		query(t, n.URL, "from Orders where Total > 5")
		_, ok := indexStates(t, n.URL)["Auto/Orders/ByName"]
		return !ok
	})
	if _, ok := indexStates(t, n.URL)["Auto/Orders/ByTotal"]; !ok {
		t.Fatal("the index in use was deleted")
	}
	log = indexLog(t, n)
	for _, want := range []string{"idle Auto/Orders/ByName", "normal Auto/Orders/ByName", "delete Auto/Orders/ByName"} {
		if !strings.Contains(log, want) {
			t.Fatalf("the log lacks %q:\n%s", want, log)
		}
	}
}

func indexLog(t *testing.T, n *testserver.Node) string {
	var sb strings.Builder
	for _, d := range n.Server.Cluster().IndexLog("shop") {
		fmt.Fprintf(&sb, "%s %s: %s\n", d.Action, d.Index, d.Reason)
	}
	return sb.String()
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A JavaScript index definition (or patch script) of deeply nested
// brackets would overflow goja's recursive parser and kill the process: it
// is refused with a 400 before goja sees it, and the node keeps serving.
func TestSecurityDeepIndexScript(t *testing.T) {
	n := testserver.Start(t)
	if st, b := ixCall(t, "PUT", n.URL+"/admin/databases", map[string]any{"DatabaseName": "shop"}); st != 201 {
		t.Fatalf("create: %d %s", st, b)
	}
	deep := "map('Pets', p => " + strings.Repeat("(", 1_500_000) + "p" + strings.Repeat(")", 1_500_000) + ")"
	st, b := ixCall(t, "PUT", n.URL+"/databases/shop/indexes", map[string]any{"Indexes": []map[string]any{{"Name": "Deep", "Maps": []string{deep}}}})
	if st != 400 || !strings.Contains(string(b), "bytes of JavaScript") && !strings.Contains(string(b), "deeper than") {
		t.Fatalf("deep map: %d %.300s", st, b)
	}
	nested := "map('Pets', p => " + strings.Repeat("(", 50_000) + "p" + strings.Repeat(")", 50_000) + ")"
	st, b = ixCall(t, "PUT", n.URL+"/databases/shop/indexes", map[string]any{"Indexes": []map[string]any{{"Name": "Deep", "Maps": []string{nested}}}})
	if st != 400 || !strings.Contains(string(b), "deeper than 200") {
		t.Fatalf("nested map: %d %.300s", st, b)
	}
	st, b = ixCall(t, "PATCH", n.URL+"/databases/shop/queries", map[string]any{"Query": map[string]any{"Query": "from Pets update { " + strings.Repeat("[", 20_000) + " }"}})
	if st != 400 {
		t.Fatalf("deep patch: %d %.300s", st, b)
	}
	if st, _ := ixCall(t, "GET", n.URL+"/databases/shop/indexes", nil); st != 200 {
		t.Fatalf("the node stopped serving: %d", st)
	}
}
