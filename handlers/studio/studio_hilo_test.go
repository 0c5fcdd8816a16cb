package studio_test

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestStudioHiLoPage(t *testing.T) {
	h := newServer(t)
	client := map[string]string{"Raven-Client-Version": "7.2.2"}
	recent := url.QueryEscape(time.Now().UTC().Format("2006-01-02T15:04:05.0000000Z"))
	check(t, h, []step{
		{name: "create", method: "PUT", url: "/admin/databases?name=hl", body: `{"DatabaseName":"hl"}`, status: 201},
		{name: "empty", method: "GET", url: "/studio/db/hl/hilo", status: 200, contains: []string{`data-testid="hilo-empty"`, `data-live="/studio/live?db=hl&amp;page=hilo"`}},
		{name: "first range", method: "GET", url: "/databases/hl/hilo/next?tag=users&lastBatchSize=0&lastMax=0", headers: client, status: 201, contains: []string{`"Low":1`, `"High":32`}},
		{name: "second range, soon after", method: "GET", url: "/databases/hl/hilo/next?tag=users&lastBatchSize=32&lastMax=32&lastRangeAt=" + recent, headers: client, status: 201, contains: []string{`"Low":33`, `"High":96`, `"LastSize":64`}},
		{name: "store", method: "POST", url: "/databases/hl/bulk_docs", body: bulkIDs("users/1-A", "users/2-A", "users/40-A"), status: 201},
		{name: "a hostile tag", method: "GET", url: "/databases/hl/hilo/next?tag=" + url.QueryEscape(`<img src=x onerror=alert(1)>`), status: 201},
		{name: "unknown database", method: "GET", url: "/studio/db/nope/hilo", status: 404, contains: []string{"No such database"}},
	})
	row := func(body, tag string) string {
		t.Helper()
		i := strings.Index(body, `data-testid="hilo-row" data-tag="`+tag+`"`)
		if i < 0 {
			t.Fatalf("no hilo row for %s: %s", tag, body)
		}
		rest := body[i:]
		if j := strings.Index(rest, "</tr>"); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	cases := []struct {
		name     string
		before   []step
		contains []string
		absent   []string
	}{
		{
			name: "range, client, growth and ids",
			contains: []string{
				`data-testid="hilo-max">96<`,
				`data-testid="hilo-range">33–96<`, `(64 ids)`,
				`data-testid="hilo-client">127.0.0.1 (ravendb 7.2.2) · node A<`,
				`data-testid="hilo-sizes">32 → 64<`, `data-testid="hilo-trend">doubling<`,
				`next range if asked now: 128`,
				`data-testid="hilo-docs">3<`, `highest number 40`,
				`data-op="next"`,
			},
		},
		{
			name:   "a return shows and moves Max back",
			before: []step{{name: "return", method: "PUT", url: "/databases/hl/hilo/return?tag=users&end=96&last=40", headers: client, status: 204}},
			contains: []string{
				`data-testid="hilo-max">40<`, `data-op="return"`, `used up to 40 of a range ending at 96 (Max moved back)`,
				`data-testid="hilo-range">33–96<`,
			},
		},
		{
			name:   "a stale return is reported as ignored",
			before: []step{{name: "stale return", method: "PUT", url: "/databases/hl/hilo/return?tag=users&end=32&last=10", status: 204}},
			contains: []string{
				`data-testid="hilo-max">40<`, `(ignored: a later range was taken)`,
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check(t, h, c.before)
			body := get(t, h, "/studio/db/hl/hilo").Body.String()
			r := row(body, "users")
			for _, want := range c.contains {
				if !strings.Contains(r, want) {
					t.Errorf("users row lacks %q:\n%s", want, r)
				}
			}
		})
	}
	body := get(t, h, "/studio/db/hl/hilo").Body.String()
	if strings.Contains(body, "<img") || !strings.Contains(body, `&lt;img src=x onerror=alert(1)&gt;`) {
		t.Fatal("the tag is not escaped")
	}
	// Tags are listed in id order, each once.
	tags := regexp.MustCompile(`data-testid="hilo-row" data-tag="([^"]*)"`).FindAllStringSubmatch(body, -1)
	if len(tags) != 2 || tags[1][1] != "users" {
		t.Fatalf("rows %v", tags)
	}
}
