package studio_test

import (
	"strings"
	"testing"
	"time"
)

// TestStudioLayoutFrame: every page's frame says which node it reads and
// its role, links the favicon and the layout script, and has the Menu
// button that controls the sidebar; /favicon.ico answers the icon (browsers
// ask for it on their own: it was a 4xx on every page).
func TestStudioLayoutFrame(t *testing.T) {
	h := newServer(t)
	check(t, h, []step{{name: "create", method: "PUT", url: "/admin/databases?name=shop", body: `{"DatabaseName":"shop"}`, status: 201}})

	// The single node bootstraps its cluster and becomes the leader.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(get(t, h, "/studio/").Body.String(), `data-testid="reading-node-role">leader<`) {
		if time.Now().After(deadline) {
			t.Fatalf("the header never says leader: %s", get(t, h, "/studio/").Body.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	frame := []string{
		`<span id="reading-node" class="node node-leader" title="This page reads node A at http://node-a.test, the cluster&#39;s leader.`,
		`data-testid="reading-node">Node <span class="node-tag" data-testid="reading-node-tag">A</span> · <span class="node-role" data-testid="reading-node-role">leader</span>`,
		`<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">`,
		`<script src="/static/layout.js"></script>`,
		`<button type="button" class="menu-toggle" aria-controls="sidenav" aria-expanded="false" data-testid="menu-toggle">`,
		`<nav class="sidenav" id="sidenav" aria-label="Studio" data-testid="nav">`,
	}
	for _, page := range []string{"/studio/", "/studio/databases", "/studio/cluster", "/studio/certificates", "/studio/audit",
		"/studio/db/shop/documents", "/studio/db/shop/doc/new", "/studio/db/shop/stats", "/studio/db/shop/subscriptions", "/studio/db/shop/indexes"} {
		rec := get(t, h, page)
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", page, rec.Code, rec.Body.String())
		}
		body := rec.Body.String()
		for _, want := range frame {
			if !strings.Contains(body, want) {
				t.Fatalf("%s lacks %q:\n%s", page, want, body)
			}
		}
	}

	for _, c := range []struct{ path, ctype, starts string }{
		{"/favicon.ico", "image/svg+xml", "<svg"},
		{"/static/favicon.svg", "image/svg+xml", "<svg"},
		{"/static/layout.js", "text/javascript; charset=utf-8", "// The studio's frame"},
	} {
		rec := get(t, h, c.path)
		if rec.Code != 200 || rec.Header().Get("Content-Type") != c.ctype || !strings.HasPrefix(rec.Body.String(), c.starts) {
			t.Fatalf("%s: %d %q %.40q", c.path, rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
		}
	}
}
