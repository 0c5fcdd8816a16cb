package web

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/auth"
)

// TestStudioPermitsNameRoutes: every action a studio component guards with
// views.Can names a route the server registers and routeRules covers, so a
// misspelt route cannot hide a button from everyone (Can refuses what the
// table does not know).
func TestStudioPermitsNameRoutes(t *testing.T) {
	srv, err := New(Config{DataDir: t.TempDir(), NodeTag: "A", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	registered := map[string]bool{}
	for _, r := range srv.echo.Routes() {
		registered[r.Method+" "+r.Path] = true
	}
	files, err := filepath.Glob("../views/*.templ")
	if err != nil || len(files) == 0 {
		t.Fatalf("no templ files: %v", err)
	}
	can := regexp.MustCompile(`Can\(ctx, "([A-Z]+)", "([^"]+)"`)
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range can.FindAllStringSubmatch(string(b), -1) {
			key := m[1] + " " + m[2]
			seen++
			if _, ok := routeRules[key]; !ok {
				t.Errorf("%s: Can(%q, %q) names no access rule", filepath.Base(f), m[1], m[2])
			}
			if !registered[key] {
				t.Errorf("%s: Can(%q, %q) names no registered route", filepath.Base(f), m[1], m[2])
			}
		}
	}
	if seen < 20 {
		t.Fatalf("found only %d guarded actions in the views", seen)
	}
}

// TestPermitFollowsTheRules: what a page may offer each identity is what
// authorize lets it do.
func TestPermitFollowsTheRules(t *testing.T) {
	reader := &auth.Identity{Name: "r", Clearance: auth.ValidUser, Permissions: map[string]auth.Access{"shop": auth.Read}}
	writer := &auth.Identity{Name: "w", Clearance: auth.ValidUser, Permissions: map[string]auth.Access{"shop": auth.ReadWrite}}
	op := &auth.Identity{Name: "o", Clearance: auth.Operator}
	cases := []struct {
		id            *auth.Identity
		method, route string
		db            string
		want          bool
	}{
		{reader, "GET", "/studio/db/:db/documents", "shop", true},
		{reader, "GET", "/studio/db/:db/documents", "other", false},
		{reader, "POST", "/studio/db/:db/doc", "shop", false},
		{writer, "POST", "/studio/db/:db/doc", "shop", true},
		{writer, "POST", "/studio/db/:db/identities/seed", "shop", false},
		{writer, "POST", "/studio/databases", "", false},
		{reader, "GET", "/studio/live", "", true}, // the optional database
		{reader, "GET", "/studio/certificates", "", false},
		{op, "GET", "/studio/certificates", "", true},
		{op, "POST", "/studio/certificates/revoke", "", true},
		{op, "POST", "/studio/cluster/add", "", false},
		{op, "POST", "/studio/db/:db/identities/seed", "any", true},
		{auth.UnsecuredAdmin, "POST", "/studio/cluster/add", "", true},
		{op, "POST", "/studio/no-such-route", "", false},
		{nil, "GET", "/studio/", "", false},
	}
	for _, c := range cases {
		if got := permitFor(c.id)(c.method, c.route, c.db); got != c.want {
			name := "nil"
			if c.id != nil {
				name = c.id.Name
			}
			t.Errorf("%s: %s %s on %q = %v, want %v", name, c.method, c.route, c.db, got, c.want)
		}
	}
}
