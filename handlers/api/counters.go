package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/batch"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

// Counters: GET and POST /databases/{db}/counters (GetCountersOperation,
// CounterBatchOperation), the Counters command of bulk_docs and the
// counter includes of GET /docs.

// registerCounters adds the counters routes to the database group.
func (a *API) registerCounters(g *echo.Group) {
	g.GET("/counters", a.getCounters)
	g.POST("/counters", a.postCounters)
}

// maxCounterBody bounds a POST /counters body.
const maxCounterBody = 16 << 20

// maxCounterNamesPerRequest bounds the counter= parameters of one request.
const maxCounterNamesPerRequest = 1 << 12

// allCounters is the name the client sends to include every counter.
const allCounters = "@all_counters"

// getCounters serves GET /counters?docId=&counter=...[&full=true].
func (a *API) getCounters(c echo.Context) error {
	db, docID, err := a.dbParam(c, "docId")
	if err != nil {
		return err
	}
	full, err := boolParam(c, "full")
	if err != nil {
		return err
	}
	names := c.QueryParams()["counter"]
	if len(names) > maxCounterNamesPerRequest {
		return dberr.New(dberr.BadRequest, "more than %d counter names", maxCounterNamesPerRequest)
	}
	for _, n := range names {
		if err := storage.ValidateCounterName(n); err != nil {
			return err
		}
	}
	cs, err := db.Counters(c.Request().Context(), docID, names)
	if err != nil {
		return err
	}
	buf := append([]byte(nil), `{"Counters":[`...)
	for i, ct := range cs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendCounterDetail(buf, ct, full)
	}
	buf = append(buf, "]}"...)
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSONCharsetUTF8, buf)
}

// postCounters serves POST /counters: a CounterBatch, {ReplyWithAllNodesValues,
// Documents:[{DocumentId, Operations}]}, run as one transaction.
func (a *API) postCounters(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	raw, err := readBody(c, maxCounterBody, "Counter batch")
	if err != nil {
		return err
	}
	var req struct {
		ReplyWithAllNodesValues bool
		Documents               []json.RawMessage
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		return dberr.New(dberr.BadRequest, "Invalid counter batch: %v", err)
	}
	docs := make([]*batch.CounterOps, 0, len(req.Documents))
	for _, d := range req.Documents {
		ops, err := batch.ParseCounterOps(d)
		if err != nil {
			return err
		}
		if strings.TrimSpace(ops.DocumentID) == "" {
			return dberr.New(dberr.BadRequest, "Invalid counter batch: a document without DocumentId")
		}
		docs = append(docs, ops)
	}
	var out []storage.Counter
	err = db.Write(c.Request().Context(), func(tx *storage.Tx) error {
		out = out[:0]
		tx.SetActor("api")
		for _, d := range docs {
			cs, err := batch.ApplyCounterOps(tx, d.DocumentID, d.Operations)
			if err != nil {
				return err
			}
			out = append(out, cs...)
		}
		return nil
	})
	if err != nil {
		return err
	}
	buf := append([]byte(nil), `{"Counters":[`...)
	for i := range out {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendCounterDetail(buf, &out[i], req.ReplyWithAllNodesValues)
	}
	buf = append(buf, "]}"...)
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSONCharsetUTF8, buf)
}

// appendCounterDetail writes a CounterDetail (null for nil); full adds the
// value of every copy, keyed "tag:etag-databaseid".
func appendCounterDetail(buf []byte, ct *storage.Counter, full bool) []byte {
	if ct == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, `{"DocumentId":`...)
	buf = document.AppendString(buf, ct.DocID)
	buf = append(buf, `,"CounterName":`...)
	buf = document.AppendString(buf, ct.Name)
	buf = append(buf, `,"TotalValue":`...)
	buf = strconv.AppendInt(buf, ct.Total, 10)
	buf = append(buf, `,"Etag":`...)
	buf = strconv.AppendInt(buf, ct.Etag, 10)
	buf = append(buf, `,"CounterValues":`...)
	if !full {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, '{')
		n := 0
		for _, p := range ct.Parts {
			if p.Deleted {
				continue
			}
			if n > 0 {
				buf = append(buf, ',')
			}
			n++
			buf = document.AppendString(buf, p.ValueKey())
			buf = append(buf, ':')
			buf = strconv.AppendInt(buf, p.Value, 10)
		}
		buf = append(buf, '}')
	}
	return append(buf, '}')
}

// appendCountersResult writes the bulk_docs result of a Counters command.
func appendCountersResult(buf []byte, r batch.Result) []byte {
	buf = append(buf, `{"Type":"Counters","Id":`...)
	buf = document.AppendString(buf, r.ID)
	if r.ChangeVector != "" {
		buf = append(buf, `,"DocumentChangeVector":`...)
		buf = document.AppendString(buf, r.ChangeVector)
	}
	buf = append(buf, `,"CountersDetail":{"Counters":[`...)
	for i := range r.Counters {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendCounterDetail(buf, &r.Counters[i], false)
	}
	return append(buf, "]}}"...)
}

// appendCounterIncludes writes `,"CounterIncludes":{id:[details]}` for the
// counter= parameters of a load (none: nothing written).
func appendCounterIncludes(ctx context.Context, db *storage.DB, buf []byte, docs []*storage.Document, names []string) ([]byte, error) {
	if len(names) == 0 {
		return buf, nil
	}
	if len(names) > maxCounterNamesPerRequest {
		return nil, dberr.New(dberr.BadRequest, "more than %d counter names", maxCounterNamesPerRequest)
	}
	all := false
	for _, n := range names {
		if n == allCounters {
			all = true
		} else if err := storage.ValidateCounterName(n); err != nil {
			return nil, err
		}
	}
	if all {
		names = nil
	}
	buf = append(buf, `,"CounterIncludes":{`...)
	n := 0
	for _, d := range docs {
		if d == nil {
			continue
		}
		cs, err := db.Counters(ctx, d.ID, names)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			buf = append(buf, ',')
		}
		n++
		buf = document.AppendString(buf, d.ID)
		buf = append(buf, ":["...)
		for i, ct := range cs {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendCounterDetail(buf, ct, false)
		}
		buf = append(buf, ']')
	}
	return append(buf, '}'), nil
}
