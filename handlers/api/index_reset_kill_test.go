package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/testserver"
)

// Killing an IndexReset operation in the middle of the rebuild stops it:
// the operation ends Canceled, the index is paused on this node, keeping
// what it rebuilt, with the reason in its stats (Status Paused,
// PauseReason, a stale reason) and on its studio page, and makes no
// progress; POST /admin/indexes/start resumes it from where it stopped.
func TestIndexResetKillPausesTheIndex(t *testing.T) {
	const n = 400
	node := testserver.Start(t)
	base := node.URL
	httpCall(t, "PUT", base+"/admin/databases?name=db", `{"DatabaseName":"db"}`, 201, nil)
	var cmds []string
	for i := 1; i <= n; i++ {
		cmds = append(cmds, fmt.Sprintf(`{"Type":"PUT","Id":"users/%d","Document":{"name":"u%d","@metadata":{"@collection":"Users"}}}`, i, i))
	}
	httpCall(t, "POST", base+"/databases/db/bulk_docs", `{"Commands":[`+strings.Join(cmds, ",")+`]}`, 201, nil)
	// Each document costs the map some work, so the rebuild takes seconds.
	def, _ := json.Marshal(map[string]any{"Indexes": []any{map[string]any{"Name": "Users/Slow", "Type": "JavaScriptMap",
		"Maps": []string{"map('Users', u => { var x = 0; for (var i = 0; i < 30000; i++) { x += i % 7; } return { name: u.name, x: x }; })"}}}})
	httpCall(t, "PUT", base+"/databases/db/indexes", string(def), 201, nil)
	name := url.QueryEscape("Users/Slow")
	httpCall(t, "RESET", base+"/databases/db/indexes?name="+name, "", 204, nil)
	var id int64
	for oid, o := range listedOps(t, base, "db") {
		if o.Kind == "IndexReset" {
			id = oid
			if !o.Killable || o.State.Status != "InProgress" {
				t.Fatalf("reset operation %+v", o)
			}
		}
	}
	if id == 0 {
		t.Fatal("no IndexReset operation")
	}
	// Kill it once part of the index is rebuilt (committed, about a second
	// in).
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st killOpState
		httpCall(t, "GET", fmt.Sprintf("%s/databases/db/operations/state?id=%d", base, id), "", 200, &st)
		if st.Status != "InProgress" {
			t.Fatalf("the rebuild ended before the kill: %+v", st)
		}
		if num(st.Progress, "Processed") > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rebuild made no progress: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	httpCall(t, "POST", fmt.Sprintf("%s/databases/db/operations/kill?id=%d", base, id), "", 204, nil)
	st := waitEnded(t, base, "db", id)
	if st.Status != "Canceled" || num(st.Progress, "Total") < n || num(st.Progress, "Processed") == 0 || num(st.Progress, "Processed") >= num(st.Progress, "Total") {
		t.Fatalf("after the kill %+v", st)
	}
	type stats struct {
		Status       string
		State        string
		PauseReason  string
		IsStale      bool
		StaleReasons []string
		Collections  map[string]struct{ LastProcessedDocumentEtag int64 }
	}
	readStats := func() stats {
		var out struct{ Results []stats }
		httpCall(t, "GET", base+"/databases/db/indexes/stats?name="+name, "", 200, &out)
		if len(out.Results) != 1 {
			t.Fatalf("stats %+v", out)
		}
		return out.Results[0]
	}
	s := readStats()
	wantReason := fmt.Sprintf("operation %d (IndexReset) was killed", id)
	if s.Status != "Paused" || s.State != "Normal" || !strings.Contains(s.PauseReason, wantReason) || !s.IsStale ||
		!strings.Contains(strings.Join(s.StaleReasons, "|"), "Indexing is paused on this node: "+s.PauseReason) {
		t.Fatalf("stats after the kill %+v", s)
	}
	var status struct {
		Indexes []struct{ Name, Status string }
	}
	httpCall(t, "GET", base+"/databases/db/indexes/status", "", 200, &status)
	if len(status.Indexes) != 1 || status.Indexes[0].Status != "Paused" {
		t.Fatalf("indexing status %+v", status)
	}
	// No progress while paused: longer than a batch (1 s), in which a
	// running rebuild commits.
	at := s.Collections["Users"].LastProcessedDocumentEtag
	if at == 0 || at != num(st.Progress, "Processed") {
		t.Fatalf("the paused index is at etag %d, the operation says %d: the rebuilt part must be kept", at, num(st.Progress, "Processed"))
	}
	t.Logf("paused at etag %d of %d", at, num(st.Progress, "Total"))
	time.Sleep(1500 * time.Millisecond)
	if s := readStats(); s.Collections["Users"].LastProcessedDocumentEtag != at || s.Status != "Paused" {
		t.Fatalf("the paused index moved from etag %d: %+v", at, s)
	}
	page := string(httpCall(t, "GET", base+"/studio/db/db/index?name="+name, "", 200, nil))
	if !strings.Contains(page, `data-testid="index-paused"`) || !strings.Contains(page, wantReason) || !strings.Contains(page, `data-testid="index-resume"`) ||
		!strings.Contains(page, `data-testid="index-state" data-state="Paused"`) {
		t.Fatalf("the studio's index page does not show the pause:\n%.4000s", page)
	}

	// Resume: indexing continues from where it stopped.
	httpCall(t, "POST", base+"/databases/db/admin/indexes/start?name="+name, "", 204, nil)
	if s := readStats(); s.Status != "Running" || s.PauseReason != "" || s.Collections["Users"].LastProcessedDocumentEtag < at {
		t.Fatalf("stats after resume %+v", s)
	}
	deadline = time.Now().Add(30 * time.Second)
	for readStats().Collections["Users"].LastProcessedDocumentEtag <= at {
		if time.Now().After(deadline) {
			t.Fatal("the resumed index made no progress")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Once more, resumed from the studio's index page this time: a reset
	// (which starts over), killed at once.
	httpCall(t, "RESET", base+"/databases/db/indexes?name="+name, "", 204, nil)
	var id2 int64
	for oid, o := range listedOps(t, base, "db") {
		if o.Kind == "IndexReset" && oid != id {
			id2 = oid
		}
	}
	if id2 == 0 {
		t.Fatal("no second IndexReset operation")
	}
	httpCall(t, "POST", fmt.Sprintf("%s/databases/db/operations/kill?id=%d", base, id2), "", 204, nil)
	if st := waitEnded(t, base, "db", id2); st.Status != "Canceled" {
		t.Fatalf("second reset after the kill %+v", st)
	}
	if s := readStats(); s.Status != "Paused" || !strings.Contains(s.PauseReason, fmt.Sprintf("operation %d (IndexReset)", id2)) {
		t.Fatalf("stats after the second kill %+v", s)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(base+"/studio/db/db/index/resume", url.Values{"name": {"Users/Slow"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != 303 || !strings.Contains(loc, "resumed+on+node+A") {
		t.Fatalf("studio resume: %d %s", resp.StatusCode, loc)
	}
	if s := readStats(); s.Status != "Running" || s.PauseReason != "" {
		t.Fatalf("stats after the studio's resume %+v", s)
	}
}
