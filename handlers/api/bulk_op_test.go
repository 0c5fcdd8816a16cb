package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/internal/testserver"
)

// httpCall sends a request to a real node and checks the status; out, when
// not nil, receives the JSON reply.
func httpCall(t *testing.T, method, url, body string, status int, out any) []byte {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	return b
}

// killOpState is /operations/state as the clients read it.
type killOpState struct {
	Status   string
	Progress map[string]any
	Result   map[string]any
}

func num(m map[string]any, k string) int64 {
	f, _ := m[k].(float64)
	return int64(f)
}

// waitEnded polls /operations/state until the operation is no longer
// InProgress.
func waitEnded(t *testing.T, base, db string, id int64) killOpState {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var st killOpState
		httpCall(t, "GET", fmt.Sprintf("%s/databases/%s/operations/state?id=%d", base, db, id), "", 200, &st)
		if st.Status != "InProgress" {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("operation %d still running: %+v", id, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type listedOp struct {
	ID          int64
	Kind        string
	Description string
	Killable    bool
	State       killOpState
}

func listedOps(t *testing.T, base, db string) map[int64]listedOp {
	t.Helper()
	var out struct{ Results []listedOp }
	httpCall(t, "GET", base+"/databases/"+db+"/operations", "", 200, &out)
	m := map[int64]listedOp{}
	for _, o := range out.Results {
		m[o.ID] = o
	}
	return m
}

// A bulk conflict resolution on a real node is an operation of the
// registry: listed with the database's operations and in the studio's
// header while it runs, its progress readable in /operations/state;
// /operations/kill stops it between two ids (the resolved ones stay
// resolved, the others keep their versions) and it ends Canceled; the
// resume is a new operation whose result stays readable after it
// completed, as does the killed one.
func TestBulkResolutionIsAKillableOperation(t *testing.T) {
	const n = 400
	node := testserver.Start(t)
	base := node.URL
	httpCall(t, "PUT", base+"/admin/databases?name=c", `{"DatabaseName":"c"}`, 201, nil)
	httpCall(t, "POST", base+"/admin/replication/conflicts/solver?name=c", `{"ResolveToLatest":false}`, 200, nil)
	var cmds []string
	for i := 1; i <= n; i++ {
		cmds = append(cmds, fmt.Sprintf(`{"Type":"PUT","Id":"orders/%d","Document":{"by":"A","n":%d,"@metadata":{"@collection":"Orders"}}}`, i, i))
	}
	httpCall(t, "POST", base+"/databases/c/bulk_docs", `{"Commands":[`+strings.Join(cmds, ",")+`]}`, 201, nil)
	db, err := node.Server.Catalog().Get("c")
	if err != nil {
		t.Fatal(err)
	}
	// B's versions arrive as one replicated batch: each id conflicts.
	err = db.Write(context.Background(), func(tx *storage.Tx) error {
		for i := 1; i <= n; i++ {
			o, err := tx.ApplyReplicated(storage.Item{Type: "Put", ID: fmt.Sprintf("orders/%d", i), Collection: "Orders",
				ChangeVector: fmt.Sprintf("B:%d-Qfo6Xn1dQEeVq0mZ1W2yXg", 1000+i), LastModified: time.Now().Add(time.Hour),
				Body: []byte(fmt.Sprintf(`{"by":"B","n":%d,"@metadata":{"@collection":"Orders"}}`, i))})
			if err != nil {
				return err
			}
			if o != storage.Conflicted {
				return fmt.Errorf("orders/%d: outcome %v", i, o)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	conflictsLeft := func() int64 {
		var out struct{ TotalResults int64 }
		httpCall(t, "GET", base+"/databases/c/replication/conflicts?pageSize=1", "", 200, &out)
		return out.TotalResults
	}
	if got := conflictsLeft(); got != n {
		t.Fatalf("%d conflicts stored, want %d", got, n)
	}

	// Each id costs the script some work: the run lasts long enough to be
	// watched and killed in its middle.
	script := `var x = 0; for (var i = 0; i < 5000; i++) { x += i % 7; } var d = docs[0]; d.spin = x; return d;`
	body, _ := json.Marshal(map[string]any{"Strategy": "script", "Script": script})
	var started struct {
		ID          int64
		OperationID int64
		Total       int
	}
	httpCall(t, "POST", base+"/databases/c/conflicts/operations", string(body), 202, &started)
	id := started.OperationID
	if id == 0 || started.Total != n {
		t.Fatalf("started %+v", started)
	}
	ops := listedOps(t, base, "c")
	if o := ops[id]; o.Kind != "BulkConflictResolution" || !o.Killable || o.State.Status != "InProgress" {
		t.Fatalf("operation %d listed as %+v", id, ops)
	}
	var st killOpState
	httpCall(t, "GET", fmt.Sprintf("%s/databases/c/operations/state?id=%d", base, id), "", 200, &st)
	if st.Status != "InProgress" || num(st.Progress, "Total") != n || num(st.Progress, "Operation") != started.ID {
		t.Fatalf("state while running %+v", st)
	}
	page := string(httpCall(t, "GET", base+"/studio/databases", "", 200, nil))
	link := fmt.Sprintf(`href="/studio/db/c/conflicts#op-%d"`, started.ID)
	if !strings.Contains(page, `data-testid="running-op"`) || !strings.Contains(page, "Conflict resolution · c") || !strings.Contains(page, link) {
		t.Fatalf("the studio's header does not show the running resolution:\n%.3000s", page)
	}

	// Kill it once some conflicts are resolved.
	deadline := time.Now().Add(30 * time.Second)
	for conflictsLeft() == n {
		if time.Now().After(deadline) {
			t.Fatal("nothing was resolved")
		}
		time.Sleep(2 * time.Millisecond)
	}
	httpCall(t, "POST", fmt.Sprintf("%s/databases/c/operations/kill?id=%d", base, id), "", 204, nil)
	st = waitEnded(t, base, "c", id)
	// An id whose script ran into the server's 100 ms limit (a loaded
	// machine, -race) is counted as an error and stays conflicted: the
	// accounting must hold either way.
	processed, resolved, errs := num(st.Progress, "Processed"), num(st.Progress, "Resolved"), num(st.Progress, "Errors")
	if st.Status != "Canceled" || resolved == 0 || processed != resolved+errs || num(st.Progress, "Skipped") != 0 || processed >= n {
		t.Fatalf("after the kill %+v", st)
	}
	t.Logf("killed after %d of %d ids, %d resolved, %d errors", processed, n, resolved, errs)
	if left := conflictsLeft(); left != n-resolved {
		t.Fatalf("%d conflicts left after %d of %d were resolved", left, resolved, n)
	}
	var logged struct{ TotalResults int64 }
	httpCall(t, "GET", base+"/databases/c/conflicts/log?by=bulk", "", 200, &logged)
	if logged.TotalResults != resolved {
		t.Fatalf("%d resolutions logged, %d reported", logged.TotalResults, resolved)
	}
	var bulk struct {
		State    string
		Done     int64
		Resolved int64
	}
	httpCall(t, "GET", fmt.Sprintf("%s/databases/c/conflicts/operations/%d", base, started.ID), "", 200, &bulk)
	if bulk.State != "cancelled" || bulk.Done != processed || bulk.Resolved != resolved {
		t.Fatalf("bulk operation after the kill %+v", bulk)
	}
	// Every id still conflicted kept both versions.
	var rest struct {
		Results []struct {
			Id       string
			Versions int
		}
	}
	httpCall(t, "GET", base+"/databases/c/replication/conflicts?pageSize=1000", "", 200, &rest)
	if int64(len(rest.Results)) != n-resolved {
		t.Fatalf("%d conflicted ids listed, want %d", len(rest.Results), n-resolved)
	}
	for _, r := range rest.Results {
		if r.Versions != 2 {
			t.Fatalf("%s has %d versions after the kill", r.Id, r.Versions)
		}
	}

	// Resume: a new operation, which completes; both stay readable.
	var resumed struct{ OperationID int64 }
	httpCall(t, "POST", fmt.Sprintf("%s/databases/c/conflicts/operations/%d/resume", base, started.ID), "", 202, &resumed)
	if resumed.OperationID == 0 || resumed.OperationID == id {
		t.Fatalf("resumed as operation %d (killed: %d)", resumed.OperationID, id)
	}
	st = waitEnded(t, base, "c", resumed.OperationID)
	resolved, errs = num(st.Result, "Resolved"), num(st.Result, "Errors")
	if st.Status != "Completed" || num(st.Result, "Processed") != n || resolved+errs != n || resolved < n-10 || num(st.Result, "Skipped") != 0 ||
		!strings.Contains(fmt.Sprint(st.Result["Message"]), fmt.Sprintf("Resolved %d of %d", resolved, n)) {
		t.Fatalf("resumed run %+v", st)
	}
	if left := conflictsLeft(); left != errs {
		t.Fatalf("%d conflicts left after the resume, %d errors", left, errs)
	}
	httpCall(t, "GET", fmt.Sprintf("%s/databases/c/operations/state?id=%d", base, id), "", 200, &st)
	if st.Status != "Canceled" {
		t.Fatalf("the killed run now reads %+v", st)
	}
	if ops := listedOps(t, base, "c"); ops[id].State.Status != "Canceled" || ops[resumed.OperationID].State.Status != "Completed" {
		t.Fatalf("listing after the resume %+v", ops)
	}
}
