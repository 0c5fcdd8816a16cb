package api

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/conflicts"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

// registerConflicts adds the conflict endpoints: RavenDB's listing and
// solver configuration, and Rookery's resolution log, preview and bulk
// operations.
func (a *API) registerConflicts(e *echo.Echo, g *echo.Group) {
	e.POST("/admin/replication/conflicts/solver", a.setSolver)
	g.GET("/replication/conflicts", a.listConflicts)
	g.GET("/replication/conflicts/solver", a.getSolver)
	g.GET("/studio-tasks/suggest-conflict-resolution", a.suggestResolution)
	g.GET("/conflicts/log", a.resolutionLog)
	e.GET("/internal/conflicts/log", a.nodeResolutionLog)
	g.POST("/conflicts/log/:seq/restore", a.restoreVersion)
	g.POST("/conflicts/preview", a.previewResolution)
	g.GET("/conflicts/operations", a.listOperations)
	g.POST("/conflicts/operations", a.startOperation)
	g.GET("/conflicts/operations/:op", a.getOperation)
	g.POST("/conflicts/operations/:op/cancel", a.cancelOperation)
	g.POST("/conflicts/operations/:op/resume", a.resumeOperation)
}

// VersionJSON is a version as the API shows it.
type VersionJSON struct {
	ChangeVector string
	LastModified string
	Tombstone    bool
	Doc          json.RawMessage // null for a deletion
}

func versionJSON(v storage.Version) VersionJSON {
	out := VersionJSON{ChangeVector: v.ChangeVector, LastModified: document.FormatTime(v.LastModified), Tombstone: v.Tombstone, Doc: json.RawMessage("null")}
	if !v.Tombstone {
		out.Doc = document.AppendJSON(nil, v.Body, v.ID, v.ChangeVector, v.LastModified)
	}
	return out
}

func loggedJSON(id string, v storage.LoggedVersion) VersionJSON {
	return versionJSON(storage.Version{ID: id, ChangeVector: v.ChangeVector, LastModified: v.LastModified, Tombstone: v.Tombstone, Body: v.Body})
}

// listConflicts serves GET /databases/{db}/replication/conflicts: the
// conflicted ids (RavenDB's shape), or with docId the versions of one.
func (a *API) listConflicts(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if id := c.QueryParam("docId"); id != "" {
		vs, err := db.ConflictVersions(ctx, []string{id})
		if err != nil {
			return err
		}
		list := vs[storage.LowerID(id)]
		out := struct {
			Id          string
			LargestEtag int64
			Results     []map[string]any
		}{Id: id, Results: []map[string]any{}}
		sums, _, err := db.ConflictList(ctx, storage.ConflictFilter{IDs: []string{id}}, 1)
		if err != nil {
			return err
		}
		if len(sums) == 1 {
			out.Id, out.LargestEtag = sums[0].ID, sums[0].LargestEtag
		}
		for _, v := range list {
			j := versionJSON(v)
			out.Results = append(out.Results, map[string]any{"ChangeVector": j.ChangeVector, "Doc": j.Doc, "LastModified": j.LastModified})
		}
		return writeJSON(c, http.StatusOK, out)
	}
	start, pageSize, err := paging(c)
	if err != nil {
		return err
	}
	list, total, err := db.ConflictsByEtag(ctx, start, min(pageSize, 10000))
	if err != nil {
		return err
	}
	type row struct {
		Id           string
		LastModified string
		Collection   string
		Versions     int
	}
	out := struct {
		TotalResults int
		Results      []row
	}{TotalResults: total, Results: []row{}}
	for _, s := range list {
		out.Results = append(out.Results, row{Id: s.ID, LastModified: document.FormatTime(s.LastModified), Collection: s.Collection, Versions: s.Versions})
	}
	return writeJSON(c, http.StatusOK, out)
}

// solverJSON is the solver configuration in RavenDB's shape plus Rookery's.
type solverJSON struct {
	ResolveToLatest     *bool                              `json:",omitempty"`
	ResolveByCollection map[string]struct{ Script string } `json:",omitempty"`
	// Rookery: the full configuration (takes precedence when given).
	Default     string                                `json:",omitempty"`
	Script      string                                `json:",omitempty"`
	Collections map[string]conflicts.CollectionConfig `json:",omitempty"`
}

func (a *API) solverConfig(db string) conflicts.Config {
	cfg, _ := conflicts.ParseConfig(a.Cluster.Setting(db, conflicts.SettingKey))
	return cfg
}

func (a *API) getSolver(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	cfg := a.solverConfig(db.Name())
	latest := cfg.Default == "" || cfg.Default == conflicts.Latest
	by := map[string]struct{ Script string }{}
	for name, cc := range cfg.Collections {
		if cc.Strategy == conflicts.Script {
			by[name] = struct{ Script string }{cc.Script}
		}
	}
	return writeJSON(c, http.StatusOK, map[string]any{
		"ResolveToLatest": latest, "ResolveByCollection": by,
		"Default": cmp.Or(cfg.Default, conflicts.Latest), "Script": cfg.Script, "Collections": cfg.Collections,
	})
}

// setSolver serves POST /admin/replication/conflicts/solver?name={db}.
// RavenDB's body ({ResolveToLatest, ResolveByCollection}) and Rookery's
// ({Default, Script, Collections}) are both understood.
func (a *API) setSolver(c echo.Context) error {
	name, err := requiredParam(c, "name")
	if err != nil {
		return err
	}
	if _, err := a.Catalog.Get(name); err != nil {
		return err
	}
	var in solverJSON
	if err := readJSON(c, 4<<20, &in, "Invalid solver configuration"); err != nil {
		return err
	}
	cfg := conflicts.Config{Default: in.Default, Script: in.Script, Collections: in.Collections}
	if in.Default == "" && in.Collections == nil {
		if in.ResolveToLatest != nil && !*in.ResolveToLatest {
			cfg.Default = conflicts.Manual
		}
		for coll, s := range in.ResolveByCollection {
			if cfg.Collections == nil {
				cfg.Collections = map[string]conflicts.CollectionConfig{}
			}
			if strings.TrimSpace(s.Script) != "" {
				cfg.Collections[coll] = conflicts.CollectionConfig{Strategy: conflicts.Script, Script: s.Script}
			}
		}
	}
	return a.saveSolver(c, name, cfg)
}

func (a *API) saveSolver(c echo.Context, name string, cfg conflicts.Config) error {
	index, err := conflicts.SaveConfig(c.Request().Context(), a.Cluster, name, &cfg)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"RaftCommandIndex": index, "Configuration": cfg})
}

// suggestResolution serves a merged starting point for a manual resolution.
func (a *API) suggestResolution(c echo.Context) error {
	db, id, err := a.dbParam(c, "docId")
	if err != nil {
		return err
	}
	vs, err := db.ConflictVersions(c.Request().Context(), []string{id})
	if err != nil {
		return err
	}
	list := vs[storage.LowerID(id)]
	if len(list) == 0 {
		return dberr.New(dberr.NotFound, "Document '%s' is not in conflict", id)
	}
	body, fields := conflicts.Suggest(list)
	if body == nil {
		body = []byte("null")
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Document": json.RawMessage(body), "ConflictingFields": fields})
}

// resolutionLog serves GET /databases/{db}/conflicts/log.
func (a *API) resolutionLog(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	before, err := intParam(c, "before", 0)
	if err != nil {
		return err
	}
	pageSize, err := intParam(c, "pageSize", 100)
	if err != nil {
		return err
	}
	if pageSize <= 0 {
		return badParam("pageSize", c.QueryParam("pageSize"))
	}
	f := storage.ResolutionFilter{ID: c.QueryParam("id"), Prefix: c.QueryParam("prefix"), Collection: c.QueryParam("collection"),
		Strategy: c.QueryParam("strategy"), By: c.QueryParam("by"), BeforeSeq: before}
	list, total, err := db.Resolutions(c.Request().Context(), f, int(min(pageSize, 1000)))
	if err != nil {
		return err
	}
	type entry struct {
		Seq        int64
		Id         string
		Collection string
		At         string
		Strategy   string
		By         string
		Node       string
		Versions   []VersionJSON
		Result     VersionJSON
	}
	out := struct {
		TotalResults int
		Results      []entry
	}{TotalResults: total, Results: []entry{}}
	for _, e := range list {
		en := entry{Seq: e.Seq, Id: e.ID, Collection: e.Collection, At: document.FormatTime(e.At), Strategy: e.Strategy, By: e.By, Node: e.Node, Result: loggedJSON(e.ID, e.Result)}
		for _, v := range e.Versions {
			en.Versions = append(en.Versions, loggedJSON(e.ID, v))
		}
		out.Results = append(out.Results, en)
	}
	return writeJSON(c, http.StatusOK, out)
}

// NodeResolutionLog is a node's answer to GET /internal/conflicts/log: its
// own resolution log (the stored forms, as the studio shows them), for the
// studio of another node that gathers the cluster's logs.
type NodeResolutionLog struct {
	Node         string
	TotalResults int
	Results      []storage.ResolutionEntry
}

// nodeResolutionLog serves GET /internal/conflicts/log?db=… (cluster
// nodes only): the filters and paging of the public log, newest first.
func (a *API) nodeResolutionLog(c echo.Context) error {
	db, err := a.Catalog.Get(c.QueryParam("db"))
	if err != nil {
		return err
	}
	before, err := intParam(c, "before", 0)
	if err != nil {
		return err
	}
	pageSize, err := intParam(c, "pageSize", 100)
	if err != nil {
		return err
	}
	if pageSize <= 0 {
		return badParam("pageSize", c.QueryParam("pageSize"))
	}
	f := storage.ResolutionFilter{ID: c.QueryParam("id"), Prefix: c.QueryParam("prefix"), Collection: c.QueryParam("collection"),
		Strategy: c.QueryParam("strategy"), By: c.QueryParam("by"), BeforeSeq: before}
	list, total, err := db.Resolutions(c.Request().Context(), f, int(min(pageSize, 1000)))
	if err != nil {
		return err
	}
	if list == nil {
		list = []storage.ResolutionEntry{}
	}
	return writeJSON(c, http.StatusOK, NodeResolutionLog{Node: a.NodeTag, TotalResults: total, Results: list})
}

func (a *API) restoreVersion(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	seq, err := strconv.ParseInt(c.Param("seq"), 10, 64)
	if err != nil {
		return badParam("seq", c.Param("seq"))
	}
	v, err := intParam(c, "version", -1)
	if err != nil {
		return err
	}
	info, err := conflicts.RestoreVersion(c.Request().Context(), db, seq, int(v), "restore by api")
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Id": info.ID, "ChangeVector": info.ChangeVector})
}

// bulkRequest is the body of a preview or a bulk operation.
type bulkRequest struct {
	conflicts.Spec
	Limit int `json:",omitempty"` // preview only
}

func readBulk(c echo.Context) (bulkRequest, error) {
	var in bulkRequest
	if err := readJSON(c, 16<<20, &in, `Invalid body: expected {"Strategy":..., "Scope":{...}}`); err != nil {
		return in, err
	}
	if in.By == "" {
		in.By = "api"
	}
	return in, nil
}

// PreviewJSON is one preview line on the wire.
type PreviewJSON struct {
	Id          string
	Collection  string
	Fingerprint string
	Strategy    string
	Winner      int
	Declined    bool
	Error       string `json:",omitempty"`
	Result      *VersionJSON
	Versions    []VersionJSON
}

// PreviewLines converts preview items for the wire.
func PreviewLines(items []conflicts.PreviewItem) []PreviewJSON {
	out := []PreviewJSON{}
	for _, it := range items {
		p := PreviewJSON{Id: it.ID, Collection: it.Collection, Fingerprint: it.Fingerprint, Strategy: it.Strategy, Winner: it.Winner, Declined: it.Declined, Error: it.Error}
		for _, v := range it.Versions {
			p.Versions = append(p.Versions, versionJSON(v))
		}
		if it.Result != nil {
			r := versionJSON(storage.Version{ID: it.ID, Tombstone: it.Result.Tombstone, Body: it.Result.Body, LastModified: it.Result.LastModified})
			p.Result = &r
		}
		out = append(out, p)
	}
	return out
}

func (a *API) previewResolution(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	in, err := readBulk(c)
	if err != nil {
		return err
	}
	limit := in.Limit
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	items, total, err := a.Conflicts.Preview(c.Request().Context(), db, in.Spec, limit)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Total": total, "Items": PreviewLines(items)})
}

func (a *API) startOperation(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	in, err := readBulk(c)
	if err != nil {
		return err
	}
	op, err := a.Conflicts.Start(db, in.Spec)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusAccepted, op.Progress())
}

func (a *API) listOperations(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	list := a.Conflicts.List(db.Name())
	if list == nil {
		list = []conflicts.Progress{}
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Results": list})
}

func (a *API) operation(c echo.Context) (*conflicts.Operation, error) {
	db, err := a.db(c)
	if err != nil {
		return nil, err
	}
	id, err := strconv.ParseInt(c.Param("op"), 10, 64)
	if err != nil {
		return nil, badParam("op", c.Param("op"))
	}
	op, ok := a.Conflicts.Get(db.Name(), id)
	if !ok {
		return nil, dberr.New(dberr.NotFound, "bulk operation %d does not exist on this node", id)
	}
	return op, nil
}

func (a *API) getOperation(c echo.Context) error {
	op, err := a.operation(c)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, op.Progress())
}

func (a *API) cancelOperation(c echo.Context) error {
	op, err := a.operation(c)
	if err != nil {
		return err
	}
	op.Cancel()
	_ = op.Wait(c.Request().Context())
	return writeJSON(c, http.StatusOK, op.Progress())
}

func (a *API) resumeOperation(c echo.Context) error {
	op, err := a.operation(c)
	if err != nil {
		return err
	}
	if err := op.Resume(); err != nil {
		return err
	}
	return writeJSON(c, http.StatusAccepted, op.Progress())
}
