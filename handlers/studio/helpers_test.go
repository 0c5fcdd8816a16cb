package studio_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/web"
)

// The table-driven request helpers of the handler tests: a real node
// (web.New) driven in process. handlers/api and handlers/studio each have
// this file (test helpers cannot be shared across test packages).

type step struct {
	name    string
	method  string
	url     string
	body    string
	headers map[string]string
	status  int
	// checks on the response
	contains []string
	header   map[string]string
	errType  string // RavenDB exception type expected in the envelope
	match    *regexp.Regexp
}

func newServer(t *testing.T) http.Handler {
	t.Helper()
	srv, err := web.New(web.Config{DataDir: t.TempDir(), NodeTag: "A", PublicURL: "http://node-a.test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Handler()
}

func do(t *testing.T, h http.Handler, s step) *httptest.ResponseRecorder {
	t.Helper()
	req := localRequest(s.method, s.url, strings.NewReader(s.body))
	for k, v := range s.headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func check(t *testing.T, h http.Handler, steps []step) map[string]*httptest.ResponseRecorder {
	t.Helper()
	out := map[string]*httptest.ResponseRecorder{}
	for _, s := range steps {
		rec := do(t, h, s)
		out[s.name] = rec
		body := rec.Body.String()
		if rec.Code != s.status {
			t.Fatalf("%s: %s %s: status %d, want %d; body %s", s.name, s.method, s.url, rec.Code, s.status, body)
		}
		if rec.Header().Get("Raven-Server-Version") == "" {
			t.Fatalf("%s: no Raven-Server-Version header", s.name)
		}
		for _, c := range s.contains {
			if !strings.Contains(body, c) {
				t.Fatalf("%s: body lacks %q: %s", s.name, c, body)
			}
		}
		for k, v := range s.header {
			if got := rec.Header().Get(k); got != v {
				t.Fatalf("%s: header %s = %q, want %q", s.name, k, got, v)
			}
		}
		if s.match != nil && !s.match.MatchString(body) {
			t.Fatalf("%s: body %s does not match %s", s.name, body, s.match)
		}
		if s.errType != "" {
			var env struct{ Url, Type, Message, Error string }
			if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
				t.Fatalf("%s: error body is not an envelope: %s", s.name, body)
			}
			if env.Type != s.errType || env.Message == "" || env.Error == "" || env.Url == "" {
				t.Fatalf("%s: envelope %+v, want type %s", s.name, env, s.errType)
			}
		}
	}
	return out
}
