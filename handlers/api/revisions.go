package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/batch"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/operations"
	"github.com/rookerydb/rookery/backend/storage"
)

// maxRevisionChangeVectors bounds the changeVector parameters of one
// GET /revisions.
const maxRevisionChangeVectors = 1024

// registerRevisions adds RavenDB's revisions endpoints: the configuration
// (kept in the cluster state), reads by id, change vector and time, the
// count, the bin of deleted documents, and reverts.
func (a *API) registerRevisions(g *echo.Group) {
	g.POST("/admin/revisions/config", a.setRevisionsConfig)
	g.GET("/revisions/config", a.getRevisionsConfig)
	g.GET("/revisions", a.getRevisions)
	g.GET("/revisions/count", a.revisionsCount)
	g.GET("/revisions/bin", a.revisionsBin)
	g.POST("/revisions/revert", a.revertRevisions)
	g.POST("/revisions/revert/docs", a.revertDocuments)
}

// setRevisionsConfig serves POST /databases/{db}/admin/revisions/config:
// the npm client's ConfigureRevisionsOperation reads RaftCommandIndex.
func (a *API) setRevisionsConfig(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	raw, err := readBody(c, 4<<20, "Invalid revisions configuration")
	if err != nil {
		return err
	}
	cfg, err := storage.ParseRevisionsConfig(raw)
	if err != nil {
		return err
	}
	var value json.RawMessage // nil removes the configuration
	if cfg != nil {
		if value, err = json.Marshal(cfg); err != nil {
			return err
		}
	}
	res, err := a.Cluster.SetSetting(c.Request().Context(), db.Name(), storage.RevisionsSettingKey, value)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"RaftCommandIndex": res.Index})
}

// getRevisionsConfig serves GET /databases/{db}/revisions/config (null
// when none).
func (a *API) getRevisionsConfig(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	cfg := db.RevisionsConfig()
	if cfg == nil {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSONCharsetUTF8, []byte("null"))
	}
	return writeJSON(c, http.StatusOK, cfg)
}

// getRevisions serves GET /databases/{db}/revisions: by id (paged, newest
// first, with TotalResults; or with before=, the revision current at that
// time), or by one or more changeVector parameters (results in their order,
// null for one not found; 404 when none is).
func (a *API) getRevisions(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	metadataOnly, err := boolParam(c, "metadataOnly")
	if err != nil {
		return err
	}
	q := c.QueryParams()
	if cvs := q["changeVector"]; len(cvs) > 0 {
		if len(cvs) > maxRevisionChangeVectors {
			return dberr.New(dberr.BadRequest, "At most %d change vectors per request", maxRevisionChangeVectors)
		}
		list := make([]*storage.Revision, len(cvs))
		found := false
		for i, cv := range cvs {
			if list[i], err = db.RevisionByChangeVector(ctx, cv); err != nil {
				return err
			}
			found = found || list[i] != nil
		}
		if !found {
			return c.NoContent(http.StatusNotFound)
		}
		return writeRevisions(c, list, -1, metadataOnly)
	}
	id, err := requiredParam(c, "id")
	if err != nil {
		return err
	}
	if b := c.QueryParam("before"); b != "" {
		at, ok := parseClientTime(b)
		if !ok {
			return badParam("before", b)
		}
		r, err := db.RevisionBefore(ctx, id, at)
		if err != nil {
			return err
		}
		if r == nil {
			return c.NoContent(http.StatusNotFound)
		}
		return writeRevisions(c, []*storage.Revision{r}, -1, metadataOnly)
	}
	start, pageSize, err := pagingWith(c, 25)
	if err != nil {
		return err
	}
	list, total, err := db.RevisionsFor(ctx, id, start, min(pageSize, 1024), 0)
	if err != nil {
		return err
	}
	return writeRevisions(c, list, total, metadataOnly)
}

// writeRevisions answers {"Results":[…]} (and TotalResults when total >= 0).
func writeRevisions(c echo.Context, list []*storage.Revision, total int, metadataOnly bool) error {
	buf := append(make([]byte, 0, 4096), `{"Results":[`...)
	for i, r := range list {
		if i > 0 {
			buf = append(buf, ',')
		}
		switch {
		case r == nil:
			buf = append(buf, "null"...)
		case metadataOnly:
			buf = appendRevisionMetadata(buf, r)
		default:
			buf = r.AppendJSON(buf)
		}
	}
	buf = append(buf, ']')
	if total >= 0 {
		buf = append(buf, `,"TotalResults":`...)
		buf = append(buf, []byte(jsonInt(total))...)
	}
	buf = append(buf, '}')
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSONCharsetUTF8, buf)
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

func appendRevisionMetadata(buf []byte, r *storage.Revision) []byte {
	var m struct {
		Meta json.RawMessage `json:"@metadata"`
	}
	if err := json.Unmarshal(r.AppendJSON(nil), &m); err != nil || m.Meta == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, `{"@metadata":`...)
	buf = append(buf, m.Meta...)
	return append(buf, '}')
}

// parseClientTime reads a time as the clients write it.
func parseClientTime(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.9999999", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// revisionsCount serves GET /databases/{db}/revisions/count?id=.
func (a *API) revisionsCount(c echo.Context) error {
	db, id, err := a.dbParam(c, "id")
	if err != nil {
		return err
	}
	n, err := db.RevisionsCount(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"RevisionsCount": n})
}

// revisionsBin serves GET /databases/{db}/revisions/bin: the deleted
// documents that have revisions, each by its delete revision, newest
// first. (The npm client sends pageSize only when it has none, as
// "undefined": such a value means the default.)
func (a *API) revisionsBin(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	start, err := intParam(c, "start", 0)
	if err != nil || start < 0 || start > 1<<31 {
		return badParam("start", c.QueryParam("start"))
	}
	pageSize := int64(25)
	if v := c.QueryParam("pageSize"); v != "" && v != "undefined" && v != "null" {
		if pageSize, err = intParam(c, "pageSize", 25); err != nil || pageSize < 0 {
			return badParam("pageSize", v)
		}
	}
	list, err := db.RevisionsBin(c.Request().Context(), int(start), int(min(pageSize, 1024)))
	if err != nil {
		return err
	}
	return writeRevisions(c, list, -1, false)
}

// revertRevisions serves POST /databases/{db}/revisions/revert
// ({"Time":"…","WindowInSec":n}): an operation that returns every document
// with revisions to what it was at Time.
func (a *API) revertRevisions(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	var in struct {
		Time        string
		WindowInSec int64
	}
	if err := readJSON(c, 1<<16, &in, "Invalid revert request"); err != nil {
		return err
	}
	at, ok := parseClientTime(in.Time)
	if !ok {
		return dberr.New(dberr.BadRequest, "Time '%s' is not a date", in.Time)
	}
	if in.WindowInSec < 0 {
		return dberr.New(dberr.BadRequest, "WindowInSec must not be negative")
	}
	id, err := intParam(c, "operationId", 0)
	if err != nil {
		return err
	}
	window := time.Duration(in.WindowInSec) * time.Second
	opID, err := a.Operations.Start(db.Name(), id, "DatabaseRevert", "Revert revisions to "+at.Format(time.RFC3339), true,
		func(ctx context.Context, p *operations.Progress) (any, error) {
			res, err := db.RevertRevisions(ctx, at, window, func(r storage.RevertRevisionsResult) { p.Set(r) })
			return res, err
		})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"OperationId": opID, "OperationNodeTag": a.NodeTag})
}

// revertDocuments serves POST /databases/{db}/revisions/revert/docs
// ({"IdToChangeVector":{"id":"cv",…}}): each document becomes its chosen
// revision again, in one transaction. 204.
func (a *API) revertDocuments(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	var in struct{ IdToChangeVector map[string]string }
	if err := readJSON(c, 4<<20, &in, "Invalid revert request"); err != nil {
		return err
	}
	if len(in.IdToChangeVector) == 0 {
		return dberr.New(dberr.BadRequest, "IdToChangeVector is required")
	}
	err = db.Write(c.Request().Context(), func(tx *storage.Tx) error {
		tx.SetActor("api")
		for id, cv := range in.IdToChangeVector {
			if strings.TrimSpace(cv) == "" {
				return dberr.New(dberr.BadRequest, "No change vector for '%s'", id)
			}
			if _, err := tx.RevertTo(id, cv); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// appendForceRevisionResult is a ForceRevisionCreation command's result.
func appendForceRevisionResult(buf []byte, r batch.Result) []byte {
	buf = append(buf, `{"Type":"ForceRevisionCreation","RevisionCreated":`...)
	if !r.RevisionCreated {
		return append(buf, `false}`...)
	}
	buf = append(buf, `true,"@id":`...)
	buf = document.AppendString(buf, r.ID)
	buf = append(buf, `,"@change-vector":`...)
	buf = document.AppendString(buf, r.ChangeVector)
	buf = append(buf, `,"@last-modified":"`...)
	buf = r.LastModified.UTC().AppendFormat(buf, document.TimeFormat)
	return append(buf, `","@flags":"HasRevisions"}`...)
}

// revisionsTotal is the database's number of revisions for /stats (0 when
// it cannot be read).
func revisionsTotal(c echo.Context, db *storage.DB) int64 {
	n, _ := db.RevisionsTotal(c.Request().Context())
	return n
}
