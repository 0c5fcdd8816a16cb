package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Lazy is a load deferred until its value is asked for: all the session's
// pending lazy loads then go to the server in one request (POST multi_get),
// as RavenDB's session.advanced.lazily does.
type Lazy struct {
	s     *Session
	id    string
	t     target
	done  bool
	found bool
	err   error
}

// LazyLoad registers a load of id into out (the targets of Load) and
// returns at once. A document the session already tracks needs no request.
func (s *Session) LazyLoad(id string, out any) (*Lazy, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	t, err := parseTarget(out)
	if err != nil {
		return nil, err
	}
	l := &Lazy{s: s, id: id, t: t}
	lid := strings.ToLower(id)
	if _, ok := s.deleted[lid]; ok {
		l.done = true
	} else if info, ok := s.byID[lid]; ok {
		l.done, l.found, l.err = true, true, t.fromTracked(info)
	} else {
		s.lazy = append(s.lazy, l)
	}
	return l, nil
}

// Value runs the session's pending lazy operations if they have not run
// yet, and says whether the document was found (out is then filled).
func (l *Lazy) Value() (bool, error) {
	if !l.done {
		if err := l.s.ExecuteAllPendingLazyOperations(); err != nil {
			return false, err
		}
	}
	return l.found, l.err
}

// ExecuteAllPendingLazyOperations sends every pending lazy load in one
// request.
func (s *Session) ExecuteAllPendingLazyOperations() error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	pending := s.lazy
	if len(pending) == 0 {
		return nil
	}
	type getRequest struct {
		URL     string            `json:"Url"`
		Query   string            `json:"Query"`
		Method  string            `json:"Method"`
		Headers map[string]string `json:"Headers"`
	}
	reqs := make([]getRequest, len(pending))
	for i, l := range pending {
		reqs[i] = getRequest{URL: "/databases/" + s.store.database + "/docs", Query: "?&id=" + url.QueryEscape(l.id), Method: http.MethodGet, Headers: map[string]string{}}
	}
	body, err := json.Marshal(map[string]any{"Requests": reqs})
	if err != nil {
		return err
	}
	s.requests++
	resp, err := s.store.executor.execute(s.ctx, &request{method: http.MethodPost, path: "/multi_get", body: body, dbScoped: true})
	if err != nil {
		return err
	}
	var out struct {
		Results []struct {
			Result     json.RawMessage `json:"Result"`
			StatusCode int             `json:"StatusCode"`
		} `json:"Results"`
	}
	if err := json.Unmarshal(resp.body, &out); err != nil {
		return fmt.Errorf("rookery: multi_get: %w (status %d)", err, resp.status)
	}
	if len(out.Results) != len(pending) {
		return fmt.Errorf("rookery: multi_get: %d results for %d requests", len(out.Results), len(pending))
	}
	s.lazy = nil
	for i, l := range pending {
		r := out.Results[i]
		l.done = true
		switch {
		case r.StatusCode == http.StatusNotFound:
		case r.StatusCode != http.StatusOK:
			l.err = fmt.Errorf("rookery: lazy load of %q: status %d: %.300s", l.id, r.StatusCode, r.Result)
		default:
			var docs struct {
				Results []json.RawMessage `json:"Results"`
			}
			if err := json.Unmarshal(r.Result, &docs); err != nil {
				l.err = fmt.Errorf("rookery: lazy load of %q: %w", l.id, err)
				continue
			}
			if len(docs.Results) == 0 || isNull(docs.Results[0]) {
				continue
			}
			l.found = true
			if info, ok := s.byID[strings.ToLower(l.id)]; ok {
				l.err = l.t.fromTracked(info)
			} else {
				l.err = s.materialize(l.id, docs.Results[0], l.t)
			}
		}
	}
	return nil
}
