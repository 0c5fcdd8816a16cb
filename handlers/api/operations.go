package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/operations"
	"github.com/rookerydb/rookery/backend/query"
	"github.com/rookerydb/rookery/backend/queryops"
)

func (a *API) registerOperations(e *echo.Echo, g *echo.Group) {
	g.GET("/operations/next-operation-id", a.nextOperationID)
	g.GET("/operations/state", a.operationState)
	g.POST("/operations/kill", a.killOperation)
	g.GET("/operations", a.listDatabaseOperations)
	e.GET("/operations/state", a.operationState)
	e.GET("/admin/operations/next-operation-id", a.nextOperationID)
	e.POST("/admin/operations/kill", a.killOperation)
}

// opDB is the database of an operations route ("" for the server-wide
// ones).
func opDB(c echo.Context) string { return c.Param("db") }

func (a *API) nextOperationID(c echo.Context) error {
	if db := opDB(c); db != "" {
		if _, err := a.Catalog.Get(db); err != nil {
			return err
		}
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Id": a.Operations.NextID(), "NodeTag": a.NodeTag})
}

func operationID(c echo.Context) (int64, error) {
	id, err := intParam(c, "id", 0)
	if err != nil {
		return 0, err
	}
	if id <= 0 {
		return 0, dberr.New(dberr.BadRequest, "Query string parameter 'id' is required")
	}
	return id, nil
}

// operationState answers what the clients poll until an operation ends;
// a finished operation stays readable for the registry's keep period.
func (a *API) operationState(c echo.Context) error {
	id, err := operationID(c)
	if err != nil {
		return err
	}
	st, err := a.Operations.State(opDB(c), id)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, st)
}

func (a *API) killOperation(c echo.Context) error {
	id, err := operationID(c)
	if err != nil {
		return err
	}
	if err := a.Operations.Kill(opDB(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (a *API) listDatabaseOperations(c echo.Context) error {
	if _, err := a.Catalog.Get(opDB(c)); err != nil {
		return err
	}
	if id := c.QueryParam("id"); id != "" {
		n, err := operationID(c)
		if err != nil {
			return err
		}
		info, err := a.Operations.Get(opDB(c), n)
		if err != nil {
			return err
		}
		return writeJSON(c, http.StatusOK, info)
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Results": a.Operations.List(opDB(c))})
}

// queryOpOptions reads the query string of PATCH and DELETE /queries;
// an empty value counts as absent (the clients send allowStale=&details=).
func queryOpOptions(c echo.Context) (queryops.Options, int64, error) {
	var o queryops.Options
	var err error
	if v := strings.TrimSpace(c.QueryParam("allowStale")); v != "" {
		if o.AllowStale, err = boolParam(c, "allowStale"); err != nil {
			return o, 0, err
		}
	}
	if v := strings.TrimSpace(c.QueryParam("details")); v != "" {
		if o.Details, err = boolParam(c, "details"); err != nil {
			return o, 0, err
		}
	}
	if v := strings.TrimSpace(c.QueryParam("maxOpsPerSec")); v != "" {
		n, err := intParam(c, "maxOpsPerSec", 0)
		if err != nil || n < 0 || n > 1<<30 {
			return o, 0, badParam("maxOpsPerSec", v)
		}
		o.MaxOpsPerSec = int(n)
	}
	if o.StaleTimeout, err = timeParam(c, "staleTimeout"); err != nil {
		return o, 0, err
	}
	var id int64
	if v := strings.TrimSpace(c.QueryParam("operationId")); v != "" {
		if id, err = intParam(c, "operationId", 0); err != nil || id <= 0 {
			return o, 0, badParam("operationId", v)
		}
	}
	return o, id, nil
}

// patchByQuery is PATCH /queries: {"Query":{"Query":"from … update {…}",
// "QueryParameters":…}}, run as an operation; the reply names it at once.
func (a *API) patchByQuery(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	o, id, err := queryOpOptions(c)
	if err != nil {
		return err
	}
	b, err := readBody(c, queryBodyLimit(), "the patch by query")
	if err != nil {
		return err
	}
	var wrapped struct{ Query *query.Request }
	if err := json.Unmarshal(b, &wrapped); err != nil || wrapped.Query == nil || wrapped.Query.Query == "" {
		return dberr.New(dberr.BadRequest, "the patch by query body is {\"Query\":{\"Query\":\"from … update { … }\",\"QueryParameters\":{…}}}")
	}
	req := *wrapped.Query
	// Check the query before answering: a bad one is a 400, not a
	// faulted operation.
	if err := checkUpdateQuery(req.Query, true); err != nil {
		return err
	}
	opID, err := a.Operations.Start(db.Name(), id, "UpdateByQuery", req.Query, true, func(ctx context.Context, p *operations.Progress) (any, error) {
		return queryops.Patch(ctx, a.Queries, db, req, o, func(pr queryops.Progress) { p.Set(pr) })
	})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"OperationId": opID, "OperationNodeTag": a.NodeTag})
}

// deleteByQuery is DELETE /queries: the query object bare.
func (a *API) deleteByQuery(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	o, id, err := queryOpOptions(c)
	if err != nil {
		return err
	}
	b, err := readBody(c, queryBodyLimit(), "the delete by query")
	if err != nil {
		return err
	}
	req, err := query.ParseRequest(b)
	if err != nil {
		return err
	}
	if err := checkUpdateQuery(req.Query, false); err != nil {
		return err
	}
	opID, err := a.Operations.Start(db.Name(), id, "DeleteByQuery", req.Query, true, func(ctx context.Context, p *operations.Progress) (any, error) {
		return queryops.Delete(ctx, a.Queries, db, req, o, func(pr queryops.Progress) { p.Set(pr) })
	})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"OperationId": opID, "OperationNodeTag": a.NodeTag})
}

// contextWithTimeout bounds a wait by d within the request's context.
func contextWithTimeout(c echo.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Request().Context(), d)
}
