package studio_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func form(vals map[string]string) string {
	v := url.Values{}
	for k, x := range vals {
		v.Set(k, x)
	}
	return v.Encode()
}

// localRequest is an in-process request from a loopback client (an
// unsecured node serves only loopback callers by default) to the Host
// httptest uses (example.com: a node that serves allows it in these tests).
func localRequest(method, target string, body io.Reader) *http.Request {
	req := httptest.NewRequest(method, target, body)
	req.RemoteAddr = "127.0.0.1:40000"
	return req
}

func postForm(t *testing.T, h http.Handler, path string, vals map[string]string, headers map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := localRequest("POST", path, strings.NewReader(form(vals)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func get(t *testing.T, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, localRequest("GET", path, nil))
	return rec
}

func TestStudioDatabasesAndDashboard(t *testing.T) {
	h := newServer(t)
	cases := []struct {
		name     string
		do       func() *httptest.ResponseRecorder
		status   int
		contains []string
		location string
	}{
		{"root redirects", func() *httptest.ResponseRecorder { return get(t, h, "/") }, 302, nil, "/studio/"},
		{"dashboard empty", func() *httptest.ResponseRecorder { return get(t, h, "/studio/") }, 200,
			[]string{`data-testid="dashboard"`, `data-testid="dash-databases">0<`, `data-live="/studio/live?page=dashboard"`, `aria-current="page" href="/studio/"`}, ""},
		{"create", func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/databases", map[string]string{"name": "shop", "separator": "/"}, map[string]string{"Origin": "http://example.com", "Sec-Fetch-Site": "same-origin"})
		}, 303, nil, "/studio/databases?flash=Database+shop+created."},
		{"create duplicate", func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/databases", map[string]string{"name": "shop"}, nil)
		}, 303, nil, "/studio/databases?error=Database+%27shop%27+already+exists%21"},
		{"create bad name", func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/databases", map[string]string{"name": "<b>x</b>"}, nil)
		}, 303, nil, ""},
		{"cross-origin create refused", func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/databases", map[string]string{"name": "evil"}, map[string]string{"Origin": "http://evil.example"})
		}, 403, nil, ""},
		{"cross-site fetch refused", func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/databases", map[string]string{"name": "evil"}, map[string]string{"Sec-Fetch-Site": "cross-site"})
		}, 403, nil, ""},
		{"databases page", func() *httptest.ResponseRecorder { return get(t, h, "/studio/databases?flash=Database+shop+created.") }, 200,
			[]string{`data-db="shop"`, `data-testid="flash">Database shop created.<`, `for="new-db-name"`}, ""},
		{"flash is escaped", func() *httptest.ResponseRecorder {
			return get(t, h, "/studio/databases?error=%3Cscript%3Ealert(1)%3C/script%3E")
		}, 200,
			[]string{`&lt;script&gt;alert(1)&lt;/script&gt;`}, ""},
		{"delete needs the typed name", func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/databases/delete", map[string]string{"name": "shop", "confirm": "shap"}, nil)
		}, 303, nil, ""},
		{"still there", func() *httptest.ResponseRecorder { return get(t, h, "/studio/databases") }, 200, []string{`data-db="shop"`}, ""},
		{"delete", func() *httptest.ResponseRecorder {
			return postForm(t, h, "/studio/databases/delete", map[string]string{"name": "shop", "confirm": "shop"}, nil)
		}, 303, nil, "/studio/databases?flash=Database+shop+deleted."},
		{"gone", func() *httptest.ResponseRecorder { return get(t, h, "/studio/databases") }, 200, []string{`data-testid="no-databases"`}, ""},
		{"unknown studio page is an HTML 404", func() *httptest.ResponseRecorder { return get(t, h, "/studio/no-such-page") }, 404,
			[]string{`data-testid="message"`, "There is no studio page at /studio/no-such-page."}, ""},
		{"static css", func() *httptest.ResponseRecorder { return get(t, h, "/static/studio.css") }, 200, []string{"--accent"}, ""},
		{"static js", func() *httptest.ResponseRecorder { return get(t, h, "/static/live.js") }, 200, []string{"WebSocket"}, ""},
	}
	for _, c := range cases {
		rec := c.do()
		if rec.Code != c.status {
			t.Fatalf("%s: status %d, want %d: %.300s", c.name, rec.Code, c.status, rec.Body.String())
		}
		for _, s := range c.contains {
			if !strings.Contains(rec.Body.String(), s) {
				t.Fatalf("%s: body lacks %q", c.name, s)
			}
		}
		if c.location != "" && rec.Header().Get("Location") != c.location {
			t.Fatalf("%s: Location %q, want %q", c.name, rec.Header().Get("Location"), c.location)
		}
		if c.name == "delete needs the typed name" && !strings.Contains(rec.Header().Get("Location"), "error=") {
			t.Fatalf("a wrong confirmation must report an error, got %q", rec.Header().Get("Location"))
		}
	}
}
