package api_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The revisions endpoints over HTTP: bad input gets RavenDB's envelope,
// the configuration round-trips, and a revert to a time runs as an
// operation that stays readable and returns the documents to that time.
func TestRevisionsEndpoints(t *testing.T) {
	h := newServer(t)
	check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=rv", body: `{"DatabaseName":"rv"}`, status: 201},
		{name: "bad age", method: "POST", url: "/databases/rv/admin/revisions/config", body: `{"Default":{"MinimumRevisionAgeToKeep":"forever"}}`, status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "bad json", method: "POST", url: "/databases/rv/admin/revisions/config", body: `{"Default":`, status: 400},
		{name: "no config yet", method: "GET", url: "/databases/rv/revisions/config", status: 200, contains: []string{"null"}},
		{name: "config", method: "POST", url: "/databases/rv/admin/revisions/config", body: `{"Default":{"MinimumRevisionsToKeep":5,"MinimumRevisionAgeToKeep":"1.00:00:00"},"Collections":{"Orders":{"Disabled":true}}}`, status: 200, contains: []string{`"RaftCommandIndex":`}},
		{name: "config read", method: "GET", url: "/databases/rv/revisions/config", status: 200, contains: []string{`"MinimumRevisionsToKeep":5`, `"MinimumRevisionAgeToKeep":"1.00:00:00"`, `"Orders":{"Disabled":true`}},
		{name: "v1", method: "PUT", url: "/databases/rv/docs?id=users/1", body: `{"N":1,"@metadata":{"@collection":"Users"}}`, status: 201},
		{name: "no id", method: "GET", url: "/databases/rv/revisions", status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "bad before", method: "GET", url: "/databases/rv/revisions?id=users/1&before=yesterday", status: 400},
		{name: "bad paging", method: "GET", url: "/databases/rv/revisions?id=users/1&start=-1", status: 400},
		{name: "unknown cv", method: "GET", url: "/databases/rv/revisions?changeVector=A:77-x", status: 404},
		{name: "count", method: "GET", url: "/databases/rv/revisions/count?id=users/1", status: 200, contains: []string{`{"RevisionsCount":1}`}},
		{name: "bin, client's pageSize", method: "GET", url: "/databases/rv/revisions/bin?start=0&pageSize=undefined", status: 200, contains: []string{`{"Results":[]}`}},
		{name: "revert docs, unknown", method: "POST", url: "/databases/rv/revisions/revert/docs", body: `{"IdToChangeVector":{"users/1":"A:77-x"}}`, status: 404},
		{name: "revert docs, empty", method: "POST", url: "/databases/rv/revisions/revert/docs", body: `{}`, status: 400},
		{name: "revert, no time", method: "POST", url: "/databases/rv/revisions/revert", body: `{"WindowInSec":0}`, status: 400},
	})
	at := time.Now().UTC()
	time.Sleep(5 * time.Millisecond)
	check(t, h, []step{
		{name: "v2", method: "PUT", url: "/databases/rv/docs?id=users/1", body: `{"N":2,"@metadata":{"@collection":"Users"}}`, status: 201},
		{name: "new after", method: "PUT", url: "/databases/rv/docs?id=users/2", body: `{"N":1,"@metadata":{"@collection":"Users"}}`, status: 201},
		{name: "flagged", method: "GET", url: "/databases/rv/docs?id=users/1", status: 200, contains: []string{`"@flags":"HasRevisions"`}},
		{name: "before", method: "GET", url: "/databases/rv/revisions?id=users/1&before=" + url.QueryEscape(at.Format(time.RFC3339Nano)), status: 200, contains: []string{`"N":1`}},
	})
	rec := do(t, h, step{method: "POST", url: "/databases/rv/revisions/revert", body: `{"Time":"` + at.Format(time.RFC3339Nano) + `","WindowInSec":0}`})
	var op struct{ OperationId int64 }
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &op) != nil || op.OperationId == 0 {
		t.Fatalf("revert: %d %s", rec.Code, rec.Body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := do(t, h, step{method: "GET", url: "/databases/rv/operations/state?id=" + jsonInt(op.OperationId)})
		if strings.Contains(r.Body.String(), `"Completed"`) {
			if !strings.Contains(r.Body.String(), `"RevertedDocuments":2`) {
				t.Fatalf("revert result %s", r.Body)
			}
			break
		}
		if r.Code != 200 || strings.Contains(r.Body.String(), "Faulted") || time.Now().After(deadline) {
			t.Fatalf("operation state %d %s", r.Code, r.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	check(t, h, []step{
		{name: "reverted", method: "GET", url: "/databases/rv/docs?id=users/1", status: 200, contains: []string{`"N":1`}},
		{name: "created after: deleted", method: "GET", url: "/databases/rv/docs?id=users/2", status: 404},
		{name: "in the bin", method: "GET", url: "/databases/rv/revisions/bin", status: 200, contains: []string{`"@id":"users/2"`, `DeleteRevision`}},
		{name: "stats", method: "GET", url: "/databases/rv/stats", status: 200, contains: []string{`"CountOfRevisionDocuments":5`}},
	})
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }
