package studio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/query"
	"github.com/rookerydb/rookery/views"
)

// The Query page: RQL and its $parameters, run on this node by the same
// runner as POST /queries (so a query may create or extend an auto index,
// as it does from a client), with the results, the statistics, which index
// served it and why, and the timings. Running is a POST behind the
// same-origin check, so another site cannot make a reader's browser
// create indexes.

const (
	// queryMaxBytes and queryParamsMaxBytes bound what the form takes.
	queryMaxBytes       = 64 << 10
	queryParamsMaxBytes = 64 << 10
	// queryRowsShown bounds the grid; the statistics count every result.
	queryRowsShown = 200
	// queryPreviewFields and queryPreviewChars bound a row's preview.
	queryPreviewFields = 8
	queryPreviewChars  = 60
	// queryJSONMax bounds a result's whole text under its row.
	queryJSONMax = 16 << 10
)

var errNoQueries = dberr.New(dberr.Unavailable, "Queries are not available on this node.")

func (s *Studio) registerQuery(g *echo.Group) {
	g.GET("/query", s.queryPage)
	g.POST("/query", s.queryRun)
}

// queryPage serves GET /studio/db/{db}/query: the editor (?query= fills
// it, e.g. from a link; nothing runs on a GET).
func (s *Studio) queryPage(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	f := views.QueryForm{DB: db.Name(), Node: s.NodeTag, Query: c.QueryParam("query"), Params: c.QueryParam("params")}
	if f.Query == "" {
		f.Query = "from @all_docs"
	}
	return render(c, http.StatusOK, s.chrome(c, "Query · "+db.Name(), db.Name(), views.NavQuery, ""), views.QueryPage(f))
}

// queryRun serves POST /studio/db/{db}/query: runs the query and renders
// the page with its outcome (400 when the query or its parameters are
// wrong: the message says where).
func (s *Studio) queryRun(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	if err := s.readForm(c, db.Name()); err != nil {
		return err
	}
	f := views.QueryForm{DB: db.Name(), Node: s.NodeTag, Query: c.FormValue("query"), Params: c.FormValue("params"), Ran: true}
	ch := s.chrome(c, "Query · "+db.Name(), db.Name(), views.NavQuery, "")
	status := http.StatusOK
	req, msg := queryRequest(f.Query, f.Params)
	switch {
	case msg != "":
		f.Error = msg
	case s.Queries == nil:
		f.Error = errNoQueries.Error()
		status = http.StatusServiceUnavailable
	default:
		res, err := s.Queries.Run(c.Request().Context(), db, req)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return err
			}
			f.Error = err.Error()
			status = queryErrorStatus(err)
		} else {
			if s.OnQuery != nil {
				s.OnQuery(db.Name(), res)
			}
			f.Result = queryOutcome(res)
		}
	}
	if f.Error != "" && status == http.StatusOK {
		status = http.StatusBadRequest
	}
	return render(c, status, ch, views.QueryPage(f))
}

func queryErrorStatus(err error) int {
	var timeout *query.TimeoutError
	switch {
	case errors.As(err, &timeout):
		return http.StatusRequestTimeout
	case dberr.KindOf(err) == dberr.NotFound:
		return http.StatusNotFound
	case dberr.KindOf(err) == dberr.Unavailable:
		return http.StatusServiceUnavailable
	case dberr.KindOf(err) == dberr.BadRequest, dberr.KindOf(err) == dberr.InvalidOperation:
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// queryRequest checks the form: the query's size, and the parameters as
// one JSON object (empty: none). A problem is the message to show.
func queryRequest(q, params string) (query.Request, string) {
	req := query.Request{Query: q}
	switch {
	case strings.TrimSpace(q) == "":
		return req, "Write a query first, e.g. from Orders where Total > 100."
	case len(q) > queryMaxBytes:
		return req, "The query is longer than 64 KiB; nothing was run."
	case len(params) > queryParamsMaxBytes:
		return req, "The parameters are longer than 64 KiB; nothing was run."
	case !utf8.ValidString(q) || !utf8.ValidString(params):
		return req, "The query and its parameters must be UTF-8 text; nothing was run."
	}
	if p := strings.TrimSpace(params); p != "" {
		dec := json.NewDecoder(strings.NewReader(p))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil || m == nil || dec.More() {
			msg := "The parameters must be one JSON object, e.g. {\"name\": \"Rex\"}"
			if err != nil {
				msg += " (" + err.Error() + ")"
			}
			return req, msg + "; nothing was run."
		}
		req.QueryParameters = numbers(m).(map[string]any)
	}
	return req, ""
}

// numbers turns json.Numbers into int64 or float64, as the API's decoder
// gives them to the runner.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}

// queryOutcome is what the page shows of a result.
func queryOutcome(res *query.Result) *views.QueryOutcome {
	o := &views.QueryOutcome{Node: res.NodeTag, TotalResults: res.TotalResults, SkippedResults: res.SkippedResults, DurationInMs: res.DurationInMs,
		IsStale: res.IsStale, StaleReasons: res.Plan.StaleReasons, IndexName: res.IndexName, ResultEtag: res.ResultEtag,
		Why: res.Plan.Why, Kind: planKind(res.Plan.Why), Superseded: res.Plan.Superseded, Returned: len(res.Results), Includes: len(res.Includes)}
	if res.Timings != nil {
		for _, name := range sortedKeys(res.Timings.Timings) {
			o.Timings = append(o.Timings, views.QueryTiming{Stage: name, Ms: res.Timings.Timings[name].DurationInMs})
		}
	}
	for i, raw := range res.Results {
		if i == queryRowsShown {
			break
		}
		o.Rows = append(o.Rows, queryRow(raw))
	}
	return o
}

// planKind names how the query was served: created, reused, extended,
// collection scan, id lookup or static index.
func planKind(why string) string {
	switch {
	case strings.HasPrefix(why, "created "):
		return "created"
	case strings.HasPrefix(why, "used "):
		return "reused"
	case strings.HasPrefix(why, "extended "):
		return "extended"
	case why == "queried by name" || why == "static index":
		return "static index"
	}
	return why
}

// queryRow is a result's grid row: its id and collection (from
// @metadata) and a preview of its top-level fields in their order (a
// projection's fields as it selected them).
func queryRow(raw json.RawMessage) views.QueryRow {
	var r views.QueryRow
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		r.Fields = []views.QueryField{{Name: "value", Value: clip(string(raw))}}
		return r
	}
	n := 0
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		if k == "@metadata" {
			var meta struct {
				ID         string `json:"@id"`
				Collection string `json:"@collection"`
			}
			_ = json.Unmarshal(v, &meta)
			r.ID, r.Collection = meta.ID, meta.Collection
			continue
		}
		n++
		if len(r.Fields) < queryPreviewFields {
			var b bytes.Buffer
			if json.Compact(&b, v) != nil {
				b.Reset()
				b.Write(v)
			}
			r.Fields = append(r.Fields, views.QueryField{Name: k, Value: clip(b.String())})
		}
	}
	r.More = n - len(r.Fields)
	if len(raw) > queryJSONMax {
		r.JSON = strings.ToValidUTF8(string(raw[:queryJSONMax]), "") + "…"
	} else {
		r.JSON = docPretty(raw)
	}
	return r
}

func clip(s string) string {
	if utf8.RuneCountInString(s) <= queryPreviewChars {
		return s
	}
	r := []rune(s)
	return string(r[:queryPreviewChars]) + "…"
}
