package web

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/auth"
)

// TestStudioIndexRoutesAccess: the Query page runs for a reader (a query
// may create an auto index, as POST /queries does), the index actions need
// Admin access to the database, and the server refuses the actions
// cross-site before routing.
func TestStudioIndexRoutesAccess(t *testing.T) {
	reader := &auth.Identity{Name: "r", Clearance: auth.ValidUser, Permissions: map[string]auth.Access{"shop": auth.Read}}
	writer := &auth.Identity{Name: "w", Clearance: auth.ValidUser, Permissions: map[string]auth.Access{"shop": auth.ReadWrite}}
	admin := &auth.Identity{Name: "a", Clearance: auth.ValidUser, Permissions: map[string]auth.Access{"shop": auth.Admin}}
	actions := []string{"/studio/db/:db/index/reset", "/studio/db/:db/index/delete", "/studio/db/:db/index/disable", "/studio/db/:db/index/enable"}
	for _, route := range []string{"/studio/db/:db/query", "/studio/db/:db/indexes", "/studio/db/:db/index"} {
		if !permitFor(reader)("GET", route, "shop") || permitFor(reader)("GET", route, "other") {
			t.Errorf("reader on GET %s", route)
		}
	}
	if !permitFor(reader)("POST", "/studio/db/:db/query", "shop") {
		t.Error("a reader may not run a query")
	}
	for _, route := range actions {
		if permitFor(reader)("POST", route, "shop") || permitFor(writer)("POST", route, "shop") || !permitFor(admin)("POST", route, "shop") {
			t.Errorf("POST %s is not DatabaseAdmin", route)
		}
		if r := routeRules["POST "+route]; r.audit == "" || r.target != "form:name" {
			t.Errorf("POST %s is not audited with its index: %+v", route, r)
		}
	}

	srv, err := New(Config{DataDir: t.TempDir(), NodeTag: "A", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, path := range []string{"/studio/db/shop/query", "/studio/db/shop/index/delete", "/studio/db/shop/index/disable", "/studio/db/shop/index/reset"} {
		req := httptest.NewRequest("POST", path, strings.NewReader(url.Values{"name": {"Auto/Pets/ByName"}, "confirm": {"Auto/Pets/ByName"}, "query": {"from Pets where Age > 1"}}.Encode()))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://evil.example")
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != 403 {
			t.Errorf("cross-site POST %s: %d %s", path, rec.Code, rec.Body)
		}
	}
}
