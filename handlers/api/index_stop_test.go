package api_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/testserver"
)

// POST /admin/indexes/stop pauses indexing on this node: one index with
// ?name=, every index of the database without. A stopped index keeps what
// it has, makes no progress and says why (stats, status, stale reasons);
// POST /admin/indexes/start resumes it and it catches up.
func TestStopIndexingPausesUntilStart(t *testing.T) {
	node := testserver.Start(t)
	base := node.URL
	httpCall(t, "PUT", base+"/admin/databases?name=db", `{"DatabaseName":"db"}`, 201, nil)
	put := func(from, to int) {
		var cmds []string
		for i := from; i <= to; i++ {
			cmds = append(cmds, fmt.Sprintf(`{"Type":"PUT","Id":"users/%d","Document":{"name":"u%d","@metadata":{"@collection":"Users"}}}`, i, i))
		}
		httpCall(t, "POST", base+"/databases/db/bulk_docs", `{"Commands":[`+strings.Join(cmds, ",")+`]}`, 201, nil)
	}
	put(1, 10)
	def, _ := json.Marshal(map[string]any{"Indexes": []any{
		map[string]any{"Name": "Users/A", "Type": "JavaScriptMap", "Maps": []string{"map('Users', u => ({ name: u.name }))"}},
		map[string]any{"Name": "Users/B", "Type": "JavaScriptMap", "Maps": []string{"map('Users', u => ({ n: u.name }))"}},
	}})
	httpCall(t, "PUT", base+"/databases/db/indexes", string(def), 201, nil)
	type stats struct {
		Status       string
		PauseReason  string
		IsStale      bool
		StaleReasons []string
		Collections  map[string]struct{ LastProcessedDocumentEtag int64 }
	}
	read := func(name string) stats {
		var out struct{ Results []stats }
		httpCall(t, "GET", base+"/databases/db/indexes/stats?name="+url.QueryEscape(name), "", 200, &out)
		if len(out.Results) != 1 {
			t.Fatalf("stats %+v", out)
		}
		return out.Results[0]
	}
	etag := func(name string) int64 { return read(name).Collections["Users"].LastProcessedDocumentEtag }
	waitEtag := func(name string, want int64) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for etag(name) < want {
			if time.Now().After(deadline) {
				t.Fatalf("%s stuck at etag %d, want %d", name, etag(name), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	overall := func() (string, map[string]string) {
		var st struct {
			Status  string
			Indexes []struct{ Name, Status string }
		}
		httpCall(t, "GET", base+"/databases/db/indexes/status", "", 200, &st)
		m := map[string]string{}
		for _, ix := range st.Indexes {
			m[ix.Name] = ix.Status
		}
		return st.Status, m
	}
	waitEtag("Users/A", 10)
	waitEtag("Users/B", 10)

	// One index.
	httpCall(t, "POST", base+"/databases/db/admin/indexes/stop?name="+url.QueryEscape("Users/A"), "", 204, nil)
	if all, each := overall(); all != "Running" || each["Users/A"] != "Paused" || each["Users/B"] != "Running" {
		t.Fatalf("status after stopping Users/A: %s %v", all, each)
	}
	put(11, 20)
	waitEtag("Users/B", 20)
	time.Sleep(1500 * time.Millisecond) // longer than an index batch
	if s := read("Users/A"); s.Status != "Paused" || etag("Users/A") != 10 || !s.IsStale ||
		!strings.Contains(s.PauseReason, "POST /admin/indexes/stop") || !strings.Contains(strings.Join(s.StaleReasons, "|"), "paused") {
		t.Fatalf("the stopped index: %+v", s)
	}

	// Every index of the database.
	httpCall(t, "POST", base+"/databases/db/admin/indexes/stop", "", 204, nil)
	if all, each := overall(); all != "Paused" || each["Users/A"] != "Paused" || each["Users/B"] != "Paused" {
		t.Fatalf("status after stopping all: %s %v", all, each)
	}
	put(21, 25)
	time.Sleep(1500 * time.Millisecond)
	if etag("Users/B") != 20 {
		t.Fatalf("a stopped index moved to etag %d", etag("Users/B"))
	}

	// Start without a name resumes both; they catch up.
	httpCall(t, "POST", base+"/databases/db/admin/indexes/start", "", 204, nil)
	if all, each := overall(); all != "Running" || each["Users/A"] != "Running" || each["Users/B"] != "Running" {
		t.Fatalf("status after start: %s %v", all, each)
	}
	waitEtag("Users/A", 25)
	waitEtag("Users/B", 25)

	// An unknown index is refused.
	httpCall(t, "POST", base+"/databases/db/admin/indexes/stop?name=Nope", "", 404, nil)
}
