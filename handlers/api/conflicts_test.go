package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/web"
)

// replicated applies a version of id as replication from copy B would
// deliver it: concurrent with the local one.
func replicated(t *testing.T, db *storage.DB, id, body string, etag int) storage.Outcome {
	t.Helper()
	var o storage.Outcome
	err := db.Write(context.Background(), func(tx *storage.Tx) error {
		var err error
		o, err = tx.ApplyReplicated(storage.Item{Type: "Put", ID: id, Collection: "Orders", ChangeVector: fmt.Sprintf("B:%d-Qfo6Xn1dQEeVq0mZ1W2yXg", etag),
			LastModified: time.Now().Add(time.Hour), Body: []byte(body)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// The conflict API on a real node: manual configuration keeps conflicts;
// a load answers 409 DocumentConflictException (as the npm client expects);
// listing, versions and a suggestion; a write resolves and is logged; a
// losing version is restored; the default (latest) resolves on arrival; bulk
// preview and operations; bad input gets the error envelope.
func TestConflictAPI(t *testing.T) {
	srv, err := web.New(web.Config{DataDir: t.TempDir(), NodeTag: "A", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	h := srv.Handler()
	check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=c", body: `{"DatabaseName":"c"}`, status: 201},
		{name: "solver default", method: "GET", url: "/databases/c/replication/conflicts/solver", status: 200, contains: []string{`"ResolveToLatest":true`, `"Default":"latest"`}},
		{name: "manual", method: "POST", url: "/admin/replication/conflicts/solver?name=c", body: `{"ResolveToLatest":false}`, status: 200, contains: []string{`"Default":"manual"`}},
		{name: "solver manual", method: "GET", url: "/databases/c/replication/conflicts/solver", status: 200, contains: []string{`"ResolveToLatest":false`}},
		{name: "put", method: "PUT", url: "/databases/c/docs?id=orders%2F1", body: `{"by":"A","n":1,"@metadata":{"@collection":"Orders"}}`, status: 201},
	})
	db, err := srv.Catalog().Get("c")
	if err != nil {
		t.Fatal(err)
	}
	if o := replicated(t, db, "orders/1", `{"by":"B","n":1,"@metadata":{"@collection":"Orders"}}`, 5); o != storage.Conflicted {
		t.Fatalf("outcome %v", o)
	}
	check(t, h, []step{
		{name: "conflicted load", method: "GET", url: "/databases/c/docs?&id=orders%2F1", status: 409, errType: "Raven.Client.Exceptions.Documents.DocumentConflictException"},
		{name: "conflicted in a multi-load", method: "GET", url: "/databases/c/docs?&id=nope&id=orders%2F1", status: 409, errType: "Raven.Client.Exceptions.Documents.DocumentConflictException"},
		{name: "missing is still 404", method: "GET", url: "/databases/c/docs?&id=orders%2F2", status: 404},
		{name: "the error names the id", method: "GET", url: "/databases/c/docs?id=orders%2F1", status: 409, contains: []string{`"DocId":"orders/1"`}},
		{name: "stats count conflicts", method: "GET", url: "/databases/c/stats", status: 200, contains: []string{`"CountOfDocumentsConflicts":1`, `"CountOfConflicts":2`}},
		{name: "list", method: "GET", url: "/databases/c/replication/conflicts", status: 200, contains: []string{`"TotalResults":1`, `"Id":"orders/1"`, `"Versions":2`}},
		{name: "versions", method: "GET", url: "/databases/c/replication/conflicts?docId=ORDERS/1", status: 200, contains: []string{`"Id":"orders/1"`, `"by":"A"`, `"by":"B"`, `B:5-Qfo6Xn1dQEeVq0mZ1W2yXg`}},
		{name: "suggest", method: "GET", url: "/databases/c/studio-tasks/suggest-conflict-resolution?docId=orders/1", status: 200, contains: []string{`"ConflictingFields":["by"]`, `"n":1`, `"by":"B"`}},
		{name: "preview", method: "POST", url: "/databases/c/conflicts/preview", body: `{"Strategy":"node:B"}`, status: 200, contains: []string{`"Total":1`, `"Winner":1`, `"Fingerprint":"`}},
		{name: "resolve by writing", method: "PUT", url: "/databases/c/docs?id=orders%2F1", body: `{"by":"operator","@metadata":{"@collection":"Orders"}}`, status: 201},
		{name: "resolved", method: "GET", url: "/databases/c/docs?&id=orders%2F1", status: 200, contains: []string{`"by":"operator"`, `B:5-Qfo6Xn1dQEeVq0mZ1W2yXg`}},
		{name: "log", method: "GET", url: "/databases/c/conflicts/log?id=orders/1", status: 200, contains: []string{`"TotalResults":1`, `"Strategy":"manual"`, `"By":"client write"`, `"Node":"A"`, `"by":"B"`, `"by":"operator"`}},
	})
	var log struct{ Results []struct{ Seq int64 } }
	rec := do(t, h, step{method: "GET", url: "/databases/c/conflicts/log"})
	if err := json.Unmarshal(rec.Body.Bytes(), &log); err != nil || len(log.Results) != 1 {
		t.Fatalf("log %s", rec.Body)
	}
	// Restore B's losing version (the log keeps versions in stored order:
	// find it by content).
	seq := log.Results[0].Seq
	check(t, h, []step{
		{name: "restore out of range", method: "POST", url: fmt.Sprintf("/databases/c/conflicts/log/%d/restore?version=7", seq), status: 400},
		{name: "restore missing entry", method: "POST", url: "/databases/c/conflicts/log/999/restore?version=0", status: 404},
	})
	restored := false
	for i := 0; i < 2 && !restored; i++ {
		do(t, h, step{method: "POST", url: fmt.Sprintf("/databases/c/conflicts/log/%d/restore?version=%d", seq, i)})
		rec := do(t, h, step{method: "GET", url: "/databases/c/docs?id=orders%2F1"})
		restored = regexp.MustCompile(`"by":"B"`).Match(rec.Body.Bytes())
	}
	if !restored {
		t.Fatal("B's version could not be restored from the log")
	}

	// Bulk: three conflicts, a preview pinned operation, progress.
	for i := 2; i <= 4; i++ {
		id := fmt.Sprintf("orders/%d", i)
		check(t, h, []step{{name: "put " + id, method: "PUT", url: "/databases/c/docs?id=" + id, body: `{"by":"A","@metadata":{"@collection":"Orders"}}`, status: 201}})
		replicated(t, db, id, `{"by":"B","@metadata":{"@collection":"Orders"}}`, 10+i)
	}
	check(t, h, []step{
		{name: "bad strategy", method: "POST", url: "/databases/c/conflicts/operations", body: `{"Strategy":"whatever"}`, status: 400, errType: "Raven.Client.Exceptions.BadRequestException"},
		{name: "bad body", method: "POST", url: "/databases/c/conflicts/preview", body: `{"Strategy":`, status: 400},
		{name: "bad script", method: "POST", url: "/databases/c/conflicts/preview", body: `{"Strategy":"script","Script":"return {"}`, status: 400, contains: []string{"does not compile"}},
		{name: "local refused as automatic", method: "POST", url: "/admin/replication/conflicts/solver?name=c", body: `{"Default":"local"}`, status: 400, contains: []string{"diverge"}},
		{name: "missing operation", method: "GET", url: "/databases/c/conflicts/operations/77", status: 404},
		{name: "start", method: "POST", url: "/databases/c/conflicts/operations", body: `{"Strategy":"local","Scope":{"Prefix":"orders/"}}`, status: 202, contains: []string{`"Total":3`}},
	})
	var p struct {
		ID       int64
		State    string
		Resolved int
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.State != "done" {
		if time.Now().After(deadline) {
			t.Fatalf("operation never finished: %+v", p)
		}
		rec := do(t, h, step{method: "GET", url: "/databases/c/conflicts/operations/1"})
		_ = json.Unmarshal(rec.Body.Bytes(), &p)
		time.Sleep(10 * time.Millisecond)
	}
	if p.Resolved != 3 {
		t.Fatalf("operation %+v", p)
	}
	check(t, h, []step{
		{name: "local kept A's", method: "GET", url: "/databases/c/docs?id=orders%2F3", status: 200, contains: []string{`"by":"A"`}},
		{name: "bulk logged", method: "GET", url: "/databases/c/conflicts/log?by=bulk", status: 200, contains: []string{`"TotalResults":3`, `"Strategy":"local"`, `bulk operation 1 (api)`}},
		{name: "operations listed", method: "GET", url: "/databases/c/conflicts/operations", status: 200, contains: []string{`"State":"done"`}},
		{name: "no conflicts left", method: "GET", url: "/databases/c/replication/conflicts", status: 200, contains: []string{`"TotalResults":0`}},
		// Back to the default: a new conflict resolves on arrival to the
		// latest version, and the log says so.
		{name: "latest", method: "POST", url: "/admin/replication/conflicts/solver?name=c", body: `{"ResolveToLatest":true}`, status: 200},
		{name: "put 9", method: "PUT", url: "/databases/c/docs?id=orders%2F9", body: `{"by":"A","@metadata":{"@collection":"Orders"}}`, status: 201},
	})
	if o := replicated(t, db, "orders/9", `{"by":"B","@metadata":{"@collection":"Orders"}}`, 50); o != storage.Resolved {
		t.Fatalf("outcome %v", o)
	}
	check(t, h, []step{
		{name: "resolved on arrival", method: "GET", url: "/databases/c/docs?id=orders%2F9", status: 200, contains: []string{`"by":"B"`}}, // B's is an hour newer
		{name: "auto logged", method: "GET", url: "/databases/c/conflicts/log?id=orders/9", status: 200, contains: []string{`"Strategy":"latest"`, `"By":"auto"`}},
	})
}
