package handlers

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/catalog"
	"github.com/rookerydb/rookery/backend/dberr"
)

// topology serves GET /topology?name=db. An unknown database gets the 503
// form with Database-Missing that the client turns into
// DatabaseDoesNotExistException.
func (a *API) topology(c echo.Context) error {
	name, err := requiredParam(c, "name")
	if err != nil {
		return err
	}
	db, err := a.Catalog.Get(name)
	if err != nil {
		c.Response().Header().Set("Database-Missing", name)
		return writeJSON(c, http.StatusServiceUnavailable, map[string]string{
			"Type":    "Error",
			"Message": "Database " + name + " wasn't found",
		})
	}
	return writeJSON(c, http.StatusOK, map[string]any{
		"Promotables": []any{},
		"Nodes": []map[string]string{{
			"Url": a.URL(), "ClusterTag": a.NodeTag, "ServerRole": "Member", "Database": db.Name(),
		}},
		"Etag": 1,
	})
}

// clusterTopology serves GET /cluster/topology: a one-node cluster.
func (a *API) clusterTopology(c echo.Context) error {
	nodes := map[string]string{a.NodeTag: a.URL()}
	return writeJSON(c, http.StatusOK, map[string]any{
		"Topology": map[string]any{
			"TopologyId":  "rookery-" + a.NodeTag,
			"AllNodes":    nodes,
			"Members":     nodes,
			"Promotables": map[string]string{},
			"Watchers":    map[string]string{},
			"LastNodeId":  a.NodeTag,
			"Etag":        1,
		},
		"Etag":         1,
		"Leader":       a.NodeTag,
		"NodeTag":      a.NodeTag,
		"CurrentState": "Leader",
		"CurrentTerm":  1,
		"Status":       map[string]any{},
	})
}

func (a *API) nodeInfo(c echo.Context) error {
	return writeJSON(c, http.StatusOK, map[string]any{
		"NodeTag":       a.NodeTag,
		"TopologyId":    "rookery-" + a.NodeTag,
		"ServerRole":    "Member",
		"CurrentState":  "Leader",
		"ClusterStatus": "Joined",
		"HasFixedPort":  true,
	})
}

func (a *API) buildVersion(c echo.Context) error {
	return writeJSON(c, http.StatusOK, map[string]any{
		"BuildVersion": 71000, "ProductVersion": "7.1", "CommitHash": "rookery", "FullVersion": ServerVersion,
	})
}

// listDatabases serves GET /databases[?namesOnly=true].
func (a *API) listDatabases(c echo.Context) error {
	names := a.Catalog.Names()
	start, err := intParam(c, "start", 0)
	if err != nil {
		return err
	}
	pageSize, err := intParam(c, "pageSize", int64(len(names)))
	if err != nil {
		return err
	}
	if start > int64(len(names)) {
		start = int64(len(names))
	}
	end := min(int64(len(names)), start+max(pageSize, 0))
	names = names[start:end]
	if namesOnly, _ := boolParam(c, "namesOnly"); namesOnly {
		return writeJSON(c, http.StatusOK, map[string]any{"Databases": names})
	}
	out := make([]map[string]any, 0, len(names))
	for _, n := range names {
		out = append(out, map[string]any{"Name": n, "Disabled": false, "NodesTopology": map[string]any{"Members": []map[string]string{{"NodeTag": a.NodeTag, "NodeUrl": a.URL()}}}})
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Databases": out})
}

func (a *API) record(name, sep string) map[string]any {
	return map[string]any{
		"DatabaseName":           name,
		"IdentityPartsSeparator": sep,
		"Disabled":               false,
		"Encrypted":              false,
		"Settings":               map[string]string{},
		"Topology": map[string]any{
			"Members": []string{a.NodeTag}, "Promotables": []string{}, "Rehabs": []string{}, "ReplicationFactor": 1,
		},
	}
}

// createDatabase serves PUT /admin/databases?name=: the body is a
// DatabaseRecord; only its name matters on a single node.
func (a *API) createDatabase(c echo.Context) error {
	var rec struct {
		DatabaseName string
		// IdentityPartsSeparator is Rookery's database setting for the
		// separator of identity and server-side ids ("/" by default).
		IdentityPartsSeparator string
	}
	raw, err := io.ReadAll(io.LimitReader(c.Request().Body, 1<<20))
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(raw))) > 0 {
		if err := json.Unmarshal(raw, &rec); err != nil {
			return dberr.New(dberr.BadRequest, "Invalid database record: %v", err)
		}
	}
	name := rec.DatabaseName
	if name == "" {
		name = c.QueryParam("name")
	}
	if name == "" {
		return dberr.New(dberr.BadRequest, "The database name is required (DatabaseName in the body or ?name=)")
	}
	if q := c.QueryParam("name"); q != "" && !strings.EqualFold(q, name) {
		return dberr.New(dberr.BadRequest, "The name in the query string (%s) and in the record (%s) differ", q, name)
	}
	db, err := a.Catalog.Create(name, catalog.Options{Separator: rec.IdentityPartsSeparator})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusCreated, map[string]any{
		"RaftCommandIndex": db.LastEtag() + 1,
		"Name":             db.Name(),
		"Topology":         a.record(db.Name(), db.Separator())["Topology"],
		"NodesAddedTo":     []string{a.URL()},
	})
}

// deleteDatabases serves DELETE /admin/databases. Deleting a database that
// does not exist is not an error: the end state is the one asked for.
func (a *API) deleteDatabases(c echo.Context) error {
	var body struct {
		DatabaseNames []string
		HardDelete    bool
	}
	if err := json.NewDecoder(io.LimitReader(c.Request().Body, 1<<20)).Decode(&body); err != nil {
		return dberr.New(dberr.BadRequest, "Invalid body: expected {\"DatabaseNames\":[...]}: %v", err)
	}
	if len(body.DatabaseNames) == 0 {
		return dberr.New(dberr.BadRequest, "DatabaseNames is empty")
	}
	for _, n := range body.DatabaseNames {
		if err := a.Catalog.Delete(n); err != nil && !dberr.Is(err, dberr.DatabaseMissing) {
			return err
		}
	}
	return writeJSON(c, http.StatusOK, map[string]any{"RaftCommandIndex": 1, "PendingDeletes": []string{}})
}

// databaseRecord serves GET /admin/databases?name=.
func (a *API) databaseRecord(c echo.Context) error {
	name, err := requiredParam(c, "name")
	if err != nil {
		return err
	}
	db, err := a.Catalog.Get(name)
	if err != nil {
		return c.NoContent(http.StatusNotFound)
	}
	return writeJSON(c, http.StatusOK, a.record(db.Name(), db.Separator()))
}
