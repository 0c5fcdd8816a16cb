package web

import (
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestEveryRouteHasAnAccessRule walks the router: every route states who
// may call it (web/access.go), and every rule belongs to a route.
func TestEveryRouteHasAnAccessRule(t *testing.T) {
	srv, err := New(Config{DataDir: t.TempDir(), NodeTag: "A", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	used := map[string]bool{}
	var missing []string
	for _, r := range srv.echo.Routes() {
		key := r.Method + " " + r.Path
		if r.Method == "echo_route_not_found" {
			key = "ANY " + r.Path // a group's 404 for every method
		}
		if _, ok := routeRules[key]; ok {
			used[key] = true
			continue
		}
		if _, ok := routeRules["ANY "+r.Path]; ok {
			used["ANY "+r.Path] = true
			continue
		}
		missing = append(missing, key)
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("routes without an access rule in web/access.go:\n  %s", strings.Join(missing, "\n  "))
	}
	var stale []string
	for key := range routeRules {
		if !used[key] {
			stale = append(stale, key)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("access rules for routes that do not exist:\n  %s", strings.Join(stale, "\n  "))
	}
	if len(used) < 100 {
		t.Errorf("only %d rules matched routes; the walk is not seeing the router", len(used))
	}
}
