package client

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"
)

// queryResult is the server's answer to POST /queries (the fields the
// client reads).
type queryResult struct {
	Results        []json.RawMessage          `json:"Results"`
	Includes       map[string]json.RawMessage `json:"Includes"`
	TotalResults   int64                      `json:"TotalResults"`
	SkippedResults int64                      `json:"SkippedResults"`
	DurationInMs   int64                      `json:"DurationInMs"`
	IndexName      string                     `json:"IndexName"`
	IndexTimestamp string                     `json:"IndexTimestamp"`
	LastQueryTime  string                     `json:"LastQueryTime"`
	IsStale        bool                       `json:"IsStale"`
	ResultEtag     int64                      `json:"ResultEtag"`
	NodeTag        string                     `json:"NodeTag"`
}

// execute sends the query (with take as the page size when the query has
// none or a larger one; -1 leaves it alone) and returns the server's answer.
func (q *Query) execute(take int) (*queryResult, error) {
	if err := q.s.checkOpen(); err != nil {
		return nil, err
	}
	run := q
	if take >= 0 && (q.pageSize == nil || *q.pageSize > take) {
		c := *q
		c.pageSize = &take
		run = &c
	}
	iq, err := run.IndexQuery()
	if err != nil {
		return nil, err
	}
	body, err := iq.MarshalJSON() // not json.Marshal, which would escape <, > and &
	if err != nil {
		return nil, err
	}
	q.s.requests++
	resp, err := q.s.store.executor.execute(q.s.ctx, &request{
		method:    http.MethodPost,
		path:      "/queries",
		query:     "queryHash=" + queryHash(body) + "&addTimeSeriesNames=true",
		body:      body,
		dbScoped:  true,
		cacheable: !q.noCaching && !q.s.NoCaching,
	})
	if err != nil {
		return nil, err
	}
	if resp.status == http.StatusNotFound {
		// A query on an index that does not exist: the envelope names
		// IndexDoesNotExistException.
		return nil, errorFromResponse(q.s.store.database, http.MethodPost, "/queries", resp.status, resp.header, resp.body)
	}
	var out queryResult
	if err := json.Unmarshal(resp.body, &out); err != nil {
		return nil, fmt.Errorf("rookery: query: %w (status %d, body %.200s)", err, resp.status, resp.body)
	}
	if resp.fromCache {
		out.DurationInMs = -1
	}
	for id, raw := range out.Includes {
		if _, tracked := q.s.byID[strings.ToLower(id)]; !tracked {
			q.s.included[strings.ToLower(id)] = raw
		}
	}
	if q.stats != nil {
		*q.stats = QueryStatistics{
			IsStale:        out.IsStale,
			DurationInMs:   out.DurationInMs,
			TotalResults:   out.TotalResults,
			SkippedResults: out.SkippedResults,
			IndexName:      out.IndexName,
			IndexTimestamp: parseServerTime(out.IndexTimestamp),
			LastQueryTime:  parseServerTime(out.LastQueryTime),
			ResultEtag:     out.ResultEtag,
			NodeTag:        out.NodeTag,
		}
	}
	return &out, nil
}

// queryHash makes the POST URL unique per query, so the HTTP cache (keyed
// by URL) can hold its answer; the server ignores it.
func queryHash(body []byte) string {
	h := sha256.Sum256(body)
	return hex.EncodeToString(h[:16])
}

// parseServerTime reads the server's dates (RFC 3339, with or without a
// zone; 7 fraction digits). The zero time for anything else.
func parseServerTime(s string) time.Time {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.9999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	return time.Time{}
}

// ToList runs the query and stores its results in out: a *[]*T (documents
// become tracked entities, as with Load), a *[]T, or a *[]map[string]any.
// Projections (SelectFields, group by) are decoded without tracking.
func (q *Query) ToList(out any) error {
	ov := reflect.ValueOf(out)
	if ov.Kind() != reflect.Pointer || ov.IsNil() || ov.Elem().Kind() != reflect.Slice {
		return fmt.Errorf("rookery: ToList needs a pointer to a slice, got %T", out)
	}
	res, err := q.execute(-1)
	if err != nil {
		return err
	}
	return q.s.decodeResults(res.Results, ov.Elem())
}

// First runs the query for one result and stores it in out (*T, **T or
// *map[string]any). found is false, with no error, when nothing matched.
func (q *Query) First(out any) (found bool, err error) {
	res, err := q.execute(1)
	if err != nil {
		return false, err
	}
	if len(res.Results) == 0 {
		return false, nil
	}
	return true, q.s.decodeOne(res.Results[0], out)
}

// Single runs the query and stores its only result in out. It fails with
// ErrNoResults or ErrMoreThanOneResult otherwise.
func (q *Query) Single(out any) error {
	res, err := q.execute(2)
	if err != nil {
		return err
	}
	switch len(res.Results) {
	case 0:
		return ErrNoResults
	case 1:
		return q.s.decodeOne(res.Results[0], out)
	}
	return ErrMoreThanOneResult
}

// Count returns the number of matches (the server's TotalResults; no
// document is sent).
func (q *Query) Count() (int64, error) {
	res, err := q.execute(0)
	if err != nil {
		return 0, err
	}
	return res.TotalResults, nil
}

// Any reports whether anything matches.
func (q *Query) Any() (bool, error) {
	if q.distinct {
		res, err := q.execute(1)
		if err != nil {
			return false, err
		}
		return len(res.Results) > 0, nil
	}
	n, err := q.Count()
	return n > 0, err
}

// isProjection tells a projected result (not a whole document): one that
// the server marked @projection, or that has no @id.
func isProjection(raw json.RawMessage) bool {
	var env struct {
		Metadata map[string]any `json:"@metadata"`
	}
	if json.Unmarshal(raw, &env) != nil || env.Metadata == nil {
		return true
	}
	if p, _ := env.Metadata["@projection"].(bool); p {
		return true
	}
	id, _ := env.Metadata["@id"].(string)
	return id == ""
}

func resultID(raw json.RawMessage) string {
	var env struct {
		Metadata struct {
			ID string `json:"@id"`
		} `json:"@metadata"`
	}
	_ = json.Unmarshal(raw, &env)
	return env.Metadata.ID
}

// decodeResults appends every result to the slice sv.
func (s *Session) decodeResults(results []json.RawMessage, sv reflect.Value) error {
	et := sv.Type().Elem()
	out := reflect.MakeSlice(sv.Type(), 0, len(results))
	for _, raw := range results {
		slot := reflect.New(et)
		if err := s.decodeOne(raw, slot.Interface()); err != nil {
			return err
		}
		out = reflect.Append(out, slot.Elem())
	}
	sv.Set(out)
	return nil
}

// decodeOne stores one result in out (a pointer): a document becomes a
// tracked entity when out is **T or *map; projections and *T targets of a
// document already tracked under another type are plain decodes.
func (s *Session) decodeOne(raw json.RawMessage, out any) error {
	t, err := parseTarget(out)
	if err != nil {
		// Scalars (a single projected value) and other shapes: plain JSON.
		return json.Unmarshal(raw, out)
	}
	if isProjection(raw) {
		if t.kind == targetStruct || t.kind == targetMap {
			return unmarshalProjection(raw, t.v)
		}
		p := reflect.New(t.v.Type().Elem().Elem())
		if err := unmarshalProjection(raw, p); err != nil {
			return err
		}
		t.v.Elem().Set(p)
		return nil
	}
	id := resultID(raw)
	if info, ok := s.byID[strings.ToLower(id)]; ok {
		return t.fromTracked(info)
	}
	return s.materialize(id, raw, t)
}

// unmarshalProjection decodes a projection into v (a pointer), without its
// @metadata for maps.
func unmarshalProjection(raw json.RawMessage, v reflect.Value) error {
	if err := json.Unmarshal(raw, v.Interface()); err != nil {
		return err
	}
	if m := v.Elem(); m.Kind() == reflect.Map && !m.IsNil() {
		m.SetMapIndex(reflect.ValueOf("@metadata").Convert(m.Type().Key()), reflect.Value{})
		m.SetMapIndex(reflect.ValueOf("__PROJECTED_NESTED_OBJECT_TYPES__").Convert(m.Type().Key()), reflect.Value{})
	}
	return nil
}
