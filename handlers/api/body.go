package api

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/rql"
)

// readBody reads a request body of at most limit bytes; a longer one is a
// 413 saying what and how much (never a silently truncated body that then
// fails to parse somewhere in the middle).
func readBody(c echo.Context, limit int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(c.Request().Body, limit+1))
	if err != nil {
		return nil, dberr.New(dberr.BadRequest, "%s: reading the body: %v", what, err)
	}
	if int64(len(b)) > limit {
		return nil, dberr.New(dberr.TooLarge, "%s: the body is larger than %d bytes", what, limit)
	}
	return b, nil
}

// readJSON decodes a body of at most limit bytes into v; a longer body is a
// 413, JSON that does not decode a 400 starting with what.
func readJSON(c echo.Context, limit int64, v any, what string) error {
	b, err := readBody(c, limit, what)
	if err != nil {
		return err
	}
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(v); err != nil {
		return dberr.New(dberr.BadRequest, "%s: %v", what, err)
	}
	return nil
}

// queryBodyLimit bounds a body that carries an RQL query (subscription
// options, the test query): 1 MiB, or more when --max-query-length allows
// longer queries.
func queryBodyLimit() int64 {
	return max(1<<20, int64(rql.CurrentLimits().MaxLength)+64<<10)
}
