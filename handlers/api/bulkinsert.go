package api

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/bulkinsert"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/operations"
)

func (a *API) registerBulkInsert(g *echo.Group) {
	g.POST("/bulk_insert", a.bulkInsert)
}

// bulkInsert is POST /databases/{db}/bulk_insert?id=<operation id>
// [&skipOverwriteIfUnchanged=true]: the client's bulk insert, a streamed
// JSON array of commands (gzip when Content-Encoding says so), run as an
// operation the client can poll and kill. The answer comes once the stream
// is read and its last batch committed: 201 with no body, or the error
// that stopped it (the operation is then Faulted with the same error; the
// batches committed before it stay).
func (a *API) bulkInsert(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	var id int64
	if v := strings.TrimSpace(c.QueryParam("id")); v != "" {
		if id, err = strconv.ParseInt(v, 10, 64); err != nil || id <= 0 {
			return badParam("id", v)
		}
	}
	skip := false
	if v := strings.TrimSpace(c.QueryParam("skipOverwriteIfUnchanged")); v != "" {
		if skip, err = boolParam(c, "skipOverwriteIfUnchanged"); err != nil {
			return err
		}
	}
	// The npm client keeps its request body open after the closing "]"
	// and waits for the answer: answer without reading to the end of the
	// body (full duplex: net/http would otherwise try to drain it before
	// sending the headers) and close the connection afterwards.
	if err := http.NewResponseController(c.Response().Writer).EnableFullDuplex(); err != nil {
		slog.Warn("bulk insert: full duplex is not available on this connection", "err", err)
	}
	c.Response().Header().Set(echo.HeaderConnection, "close")
	var body io.Reader = c.Request().Body
	switch enc := strings.ToLower(strings.TrimSpace(c.Request().Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return dberr.New(dberr.BadRequest, "Bulk insert: the body is not gzip although Content-Encoding says so: %v", err)
		}
		defer zr.Close()
		body = zr
	default:
		return dberr.New(dberr.BadRequest, "Bulk insert: Content-Encoding '%s' is not supported (gzip or none)", enc)
	}
	reqCtx := c.Request().Context()
	opts := bulkinsert.Options{MaxDocumentSize: a.MaxDocumentSize, SkipOverwriteIfUnchanged: skip}
	var runErr error
	opID, err := a.Operations.Start(db.Name(), id, "BulkInsert", "Bulk insert into "+db.Name(), true, func(ctx context.Context, p *operations.Progress) (any, error) {
		jctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// A client that goes away ends the bulk insert too.
		stop := context.AfterFunc(reqCtx, cancel)
		defer stop()
		p.Set(bulkinsert.Progress{})
		res, err := bulkinsert.Run(jctx, db, body, opts, func(pr bulkinsert.Progress) { p.Set(pr) })
		if err != nil && ctx.Err() == nil && reqCtx.Err() != nil {
			err = dberr.New(dberr.BadRequest, "Bulk insert: the client closed the connection after %d documents were stored", res.Processed)
		}
		runErr = err
		if err != nil {
			return nil, err
		}
		return res, nil
	})
	if err != nil {
		return err
	}
	st, err := a.Operations.Wait(reqCtx, db.Name(), opID)
	if err != nil {
		return err
	}
	switch st.Status {
	case operations.Completed:
		c.Response().Header().Set(echo.HeaderContentLength, "0")
		c.Response().WriteHeader(http.StatusCreated)
		return nil
	case operations.Canceled:
		return dberr.New(dberr.InvalidOperation, "Bulk insert operation %d was killed; the batches committed before it stay", opID)
	}
	if runErr == nil {
		runErr = errors.New("the bulk insert failed")
	}
	return runErr
}
