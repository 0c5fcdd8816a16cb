package api

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/patch"
	"github.com/rookerydb/rookery/backend/query"
	"github.com/rookerydb/rookery/backend/rql"
	"github.com/rookerydb/rookery/backend/storage"
)

func (a *API) registerQueries(g *echo.Group) {
	g.POST("/queries", a.runQuery)
	g.GET("/queries", a.runQuery)
	g.PATCH("/queries", a.patchByQuery)
	g.DELETE("/queries", a.deleteByQuery)
	g.POST("/streams/queries", a.streamQuery)
	g.GET("/streams/queries", a.streamQuery)
	g.GET("/streams/docs", a.streamDocs)
}

// queryRequest reads a query from the body (POST) or the URL (GET
// ?query=...&parameters={json}), with the URL's flags.
func queryRequest(c echo.Context) (query.Request, error) {
	var req query.Request
	if c.Request().Method == http.MethodGet {
		req.Query = c.QueryParam("query")
		if p := c.QueryParam("parameters"); p != "" {
			if err := json.Unmarshal([]byte(p), &req.QueryParameters); err != nil {
				return req, dberr.New(dberr.BadRequest, "the parameters are not a JSON object: %v", err)
			}
		}
		if v, _ := boolParam(c, "waitForNonStaleResults"); v {
			req.WaitForNonStaleResults = true
		}
		if t := c.QueryParam("waitForNonStaleResultsTimeoutInMs"); t != "" {
			if err := req.WaitForNonStaleResultsTimeout.UnmarshalJSON([]byte(t)); err != nil {
				return req, err
			}
		}
	} else {
		b, err := readBody(c, queryBodyLimit(), "the query")
		if err != nil {
			return req, err
		}
		if req, err = query.ParseRequest(b); err != nil {
			return req, err
		}
	}
	if strings.TrimSpace(req.Query) == "" {
		return req, dberr.New(dberr.BadRequest, "the query is empty")
	}
	var err error
	if req.MetadataOnly, err = boolParam(c, "metadataOnly"); err != nil {
		return req, err
	}
	if req.DisableAutoIndexCreation, err = boolParam(c, "disableAutoIndexCreation"); err != nil {
		return req, err
	}
	return req, nil
}

// runQuery is POST (and GET) /queries: the answer, with the result etag
// as ETag so the client's cache asks again with If-None-Match (304).
func (a *API) runQuery(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	req, err := queryRequest(c)
	if err != nil {
		return err
	}
	res, err := a.Queries.Run(c.Request().Context(), db, req)
	if err != nil {
		return err
	}
	a.Indexes.Queried(db.Name(), res)
	etag := query.FormatETag(res)
	c.Response().Header().Set("ETag", etag)
	if inm := c.Request().Header.Get("If-None-Match"); inm != "" && unquote(inm) == unquote(etag) {
		return c.NoContent(http.StatusNotModified)
	}
	return writeJSON(c, http.StatusOK, res)
}

// streamQuery is /streams/queries in the jsonl format the clients read:
// one {"Item":…} line per result, then {"Stats":…}.
func (a *API) streamQuery(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	req, err := queryRequest(c)
	if err != nil {
		return err
	}
	w := c.Response()
	started := false
	bw := bufio.NewWriterSize(w, 64<<10)
	start := func() {
		if !started {
			started = true
			w.Header().Set(echo.HeaderContentType, "application/jsonl; charset=utf-8")
			w.WriteHeader(http.StatusOK)
		}
	}
	res, err := a.Queries.Stream(c.Request().Context(), db, req, func(raw json.RawMessage) error {
		start()
		bw.WriteString(`{"Item":`)
		bw.Write(raw)
		_, err := bw.WriteString("}\n")
		return err
	})
	if err != nil {
		if !started {
			return err
		}
		// The status is sent: the client sees the stream end early.
		a.logStreamError(db, err)
		return nil
	}
	start()
	a.Indexes.Queried(db.Name(), res)
	stats, _ := json.Marshal(map[string]any{
		"ResultEtag": res.ResultEtag, "IsStale": res.IsStale, "IndexName": res.IndexName,
		"TotalResults": res.TotalResults, "IndexTimestamp": res.IndexTimestamp.UTC().Format("2006-01-02T15:04:05.0000000Z"),
	})
	bw.WriteString(`{"Stats":`)
	bw.Write(stats)
	bw.WriteString("}\n")
	return bw.Flush()
}

func (a *API) logStreamError(db *storage.DB, err error) {
	if a.Log != nil {
		a.Log.Warn("a stream ended early", "database", db.Name(), "error", err)
	}
}

// streamDocs is /streams/docs: every document (or those whose id starts
// with startsWith) in jsonl, one document per line.
func (a *API) streamDocs(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	q := "from @all_docs"
	params := map[string]any{}
	if p := c.QueryParam("startsWith"); p != "" {
		q += " where startsWith(id(), $prefix)"
		params["prefix"] = p
	}
	start, pageSize, err := pagingWith(c, 1<<62)
	if err != nil {
		return err
	}
	if start > 0 || pageSize < 1<<62 {
		q += " limit $skip, $take"
		params["skip"], params["take"] = start, pageSize
	}
	w := c.Response()
	started := false
	bw := bufio.NewWriterSize(w, 64<<10)
	_, err = a.Queries.Stream(c.Request().Context(), db, query.Request{Query: q, QueryParameters: params}, func(raw json.RawMessage) error {
		if !started {
			started = true
			w.Header().Set(echo.HeaderContentType, "application/jsonl; charset=utf-8")
			w.WriteHeader(http.StatusOK)
		}
		bw.Write(raw)
		_, err := bw.WriteString("\n")
		return err
	})
	if err != nil {
		if !started {
			return err
		}
		a.logStreamError(db, err)
		return nil
	}
	if !started {
		w.Header().Set(echo.HeaderContentType, "application/jsonl; charset=utf-8")
		w.WriteHeader(http.StatusOK)
	}
	return bw.Flush()
}

// waitForIndexes is bulk_docs' ?waitForIndexesTimeout=…: it waits until
// the indexes (all of the database's, or the named ones) have processed
// etag; with waitForIndexThrow=false a timeout is not an error.
func (a *API) waitForIndexes(c echo.Context, db *storage.DB, etag int64) error {
	t := c.QueryParam("waitForIndexesTimeout")
	if t == "" {
		return nil
	}
	timeout, err := query.ParseTimeSpan(t)
	if err != nil {
		return dberr.New(dberr.BadRequest, "waitForIndexesTimeout: %v", err)
	}
	throw := c.QueryParam("waitForIndexThrow") != "false"
	names := c.QueryParams()["waitForSpecificIndex"]
	ctx, cancel := contextWithTimeout(c, timeout)
	defer cancel()
	ixs := a.Indexes.Manager.List(db.Name())
	for _, ix := range ixs {
		if len(names) > 0 && !slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, ix.Name()) }) {
			continue
		}
		if err := ix.WaitNonStale(ctx, etag); err != nil {
			if !throw {
				return nil
			}
			_, reasons := ix.Stale(c.Request().Context())
			return &query.TimeoutError{Index: ix.Name(), Timeout: timeout, Reasons: reasons}
		}
	}
	return nil
}

// timeParam reads a duration given as integer milliseconds or a TimeSpan.
func timeParam(c echo.Context, name string) (time.Duration, error) {
	v := strings.TrimSpace(c.QueryParam(name))
	if v == "" {
		return 0, nil
	}
	d, err := query.ParseTimeSpan(v)
	if err != nil {
		return 0, badParam(name, v)
	}
	return d, nil
}

// checkUpdateQuery parses a patch or delete by query before it becomes an
// operation: a syntax error, or a missing (patch) or present (delete)
// update clause, is the request's 400.
func checkUpdateQuery(text string, update bool) error {
	q, err := rql.Parse(text)
	if err != nil {
		return &query.InvalidQueryError{Query: text, Err: err}
	}
	if update && q.Update == nil {
		return &query.InvalidQueryError{Query: text, Err: errors.New("a patch by query needs an update { ... } clause")}
	}
	if !update && q.Update != nil {
		return &query.InvalidQueryError{Query: text, Err: errors.New("a delete by query has no update clause")}
	}
	if update {
		if _, err := patch.Compile(*q.Update, q.Alias); err != nil {
			return err
		}
	}
	return nil
}
