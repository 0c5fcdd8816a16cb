package api_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A reset index's rebuild is an operation of the registry: listed with the
// database's operations and Completed once the index caught up.
func TestIndexResetIsAnOperation(t *testing.T) {
	h := newServer(t)
	check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=db", body: `{"DatabaseName":"db"}`, status: 201},
		{name: "put", method: "POST", url: "/databases/db/bulk_docs", body: userDoc, status: 201},
		{name: "index", method: "PUT", url: "/databases/db/indexes", body: `{"Indexes":[{"Name":"Users/ByName","Type":"JavaScriptMap","Maps":["map('Users', u => ({ name: u.name }))"]}]}`, status: 201},
		{name: "reset", method: "RESET", url: "/databases/db/indexes?name=Users%2FByName", status: 204},
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec := do(t, h, step{method: "GET", url: "/databases/db/operations"})
		var out struct {
			Results []struct {
				ID    int64
				Kind  string
				State struct{ Status string }
			}
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%v: %s", err, rec.Body)
		}
		if len(out.Results) != 1 || out.Results[0].Kind != "IndexReset" {
			t.Fatalf("operations: %s", rec.Body)
		}
		if out.Results[0].State.Status == "Completed" {
			st := do(t, h, step{method: "GET", url: "/databases/db/operations/state?id=" + strconv.FormatInt(out.Results[0].ID, 10)})
			if st.Code != 200 || !strings.Contains(st.Body.String(), `"Status":"Completed"`) || !strings.Contains(st.Body.String(), "rebuilt") {
				t.Fatalf("state: %d %s", st.Code, st.Body)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reset never completed: %s", rec.Body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
