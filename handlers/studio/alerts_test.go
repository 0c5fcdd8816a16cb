package studio_test

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The Alerts page on a real node: an alert (an identity counter that
// would collide) is listed with its severity, node, times and a link to
// the page that shows it; the header's badge is a link to the page with
// the count in its accessible name; postpone (a bad duration refused with
// a message), show again, dismiss; an alert that is gone says so; a
// cross-origin action is refused.
func TestStudioAlertsPage(t *testing.T) {
	h := newServer(t)
	check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=al", body: `{"DatabaseName":"al"}`, status: 201},
		{name: "fill", method: "POST", url: "/databases/al/bulk_docs", body: bulkIDs("orders/1", "orders/2", "orders/3"), status: 201},
	})
	empty := get(t, h, "/studio/alerts").Body.String()
	for _, want := range []string{`data-testid="alerts-empty"`, `data-live="/studio/live?page=alerts"`, `aria-label="Alerts: none open"`, "read from A (this node)"} {
		if !strings.Contains(empty, want) {
			t.Fatalf("empty page lacks %q: %s", want, empty)
		}
	}
	postForm(t, h, "/studio/db/al/identities/seed", seedForm("orders", "1", true), nil)
	key := "identity:al:orders|"
	b := pollPage(t, h, "/studio/alerts", 5*time.Second, func(b string) bool { return strings.Contains(b, `data-key="`+key+`"`) })
	for _, want := range []string{
		`data-testid="alert-level">Warning<`, `data-testid="alert-title">Identity orders| would collide<`, `data-testid="alert-db">al<`,
		`href="/studio/db/al/identities" data-testid="alert-link"`, `data-testid="alert-nodes">A<`, `data-testid="alert-first-seen">just now<`,
		`<tbody data-live-rows>`, `data-testid="alerts-shown">1<`,
	} {
		if !strings.Contains(b, want) {
			t.Fatalf("page lacks %q: %s", want, b)
		}
	}
	header := get(t, h, "/studio/databases").Body.String()
	if !strings.Contains(header, `<a href="/studio/alerts" class="alerts-link alerts-open" data-testid="alerts-link" aria-label="Alerts: 1 open">`) {
		t.Fatalf("header: %s", header)
	}

	back := map[string]string{"Referer": "http://node-a.test/studio/alerts"}
	flash := func(rec *httptest.ResponseRecorder) string {
		u, _ := url.Parse(rec.Header().Get("Location"))
		return u.Query().Get("flash") + u.Query().Get("error")
	}
	rec := postForm(t, h, "/studio/alerts/postpone", map[string]string{"key": key, "for": "forever"}, back)
	if rec.Code != 303 || !strings.Contains(flash(rec), "Not postponed") {
		t.Fatalf("bad duration: %d %v", rec.Code, rec.Header())
	}
	rec = postForm(t, h, "/studio/alerts/postpone", map[string]string{"key": key, "for": "1h"}, back)
	if rec.Code != 303 || !strings.Contains(flash(rec), "Postponed") {
		t.Fatalf("postpone: %d %v", rec.Code, rec.Header())
	}
	if b := get(t, h, "/studio/alerts").Body.String(); !strings.Contains(b, `data-testid="alerts-empty"`) || !strings.Contains(b, "Show 1 dismissed or postponed") || !strings.Contains(b, `aria-label="Alerts: none open"`) {
		t.Fatalf("postponed still shown: %s", b)
	}
	if b := get(t, h, "/studio/alerts?hidden=1").Body.String(); !strings.Contains(b, "Postponed until") || !strings.Contains(b, `data-testid="alert-restore"`) {
		t.Fatalf("hidden list: %s", b)
	}
	if rec := postForm(t, h, "/studio/alerts/restore", map[string]string{"key": key}, back); rec.Code != 303 || !strings.Contains(flash(rec), "shows again") {
		t.Fatalf("restore: %d %v", rec.Code, rec.Header())
	}
	if rec := postForm(t, h, "/studio/alerts/dismiss", map[string]string{"key": key}, back); rec.Code != 303 || !strings.Contains(flash(rec), "Dismissed") {
		t.Fatalf("dismiss: %d %v", rec.Code, rec.Header())
	}
	if b := get(t, h, "/studio/alerts?hidden=1").Body.String(); !strings.Contains(b, "Dismissed until its condition clears") {
		t.Fatalf("dismissed: %s", b)
	}
	if rec := postForm(t, h, "/studio/alerts/dismiss", map[string]string{"key": "nope"}, back); rec.Code != 303 || !strings.Contains(flash(rec), "gone") {
		t.Fatalf("unknown key: %d %v", rec.Code, rec.Header())
	}
	if rec := postForm(t, h, "/studio/alerts/restore", map[string]string{"key": key}, map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}); rec.Code != 403 {
		t.Fatalf("cross-origin: %d", rec.Code)
	}
}
