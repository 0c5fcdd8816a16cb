package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/handlers/httpx"
)

func (a *API) registerIndexes(e *echo.Echo, g *echo.Group) {
	g.PUT("/indexes", a.putIndexes)
	g.PUT("/admin/indexes", a.putIndexes)
	g.GET("/indexes", a.getIndexes)
	g.DELETE("/indexes", a.deleteIndex)
	g.Add("RESET", "/indexes", a.resetIndex)
	g.GET("/indexes/stats", a.indexStats)
	g.GET("/indexes/errors", a.indexErrors)
	g.DELETE("/indexes/errors", a.deleteIndexErrors)
	g.GET("/indexes/status", a.indexingStatus)
	g.GET("/indexes/staleness", a.indexStaleness)
	g.POST("/indexes/has-changed", a.indexHasChanged)
	g.POST("/indexes/set-lock", a.setIndexesLock)
	g.POST("/indexes/set-priority", a.setIndexesPriority)
	g.POST("/admin/indexes/enable", a.enableIndex)
	g.POST("/admin/indexes/disable", a.disableIndex)
	g.POST("/admin/indexes/start", a.startIndexing)
	g.POST("/admin/indexes/stop", a.stopIndexing)
}

// maxIndexBody bounds a PUT /indexes body.
const maxIndexBody = 4 << 20

// wireDefinition is IndexDefinition as the clients send it.
type wireDefinition struct {
	Name          string
	Maps          []string
	Reduce        *string
	Fields        map[string]*index.FieldOptions
	Configuration map[string]string
	LockMode      string
	Priority      string
	State         string
}

func (w wireDefinition) definition() index.Definition {
	d := index.Definition{Name: w.Name, Maps: w.Maps, Configuration: w.Configuration, LockMode: w.LockMode, Priority: w.Priority}
	if w.Reduce != nil {
		d.Reduce = *w.Reduce
	}
	if len(w.Fields) > 0 {
		d.FieldOptions = map[string]index.FieldOptions{}
		for k, v := range w.Fields {
			if v != nil {
				d.FieldOptions[k] = *v
			}
		}
	}
	if d.LockMode == "Unlock" {
		d.LockMode = ""
	}
	if d.Priority == "Normal" {
		d.Priority = ""
	}
	return d
}

// putIndexes is PUT /indexes and /admin/indexes: JavaScript definitions
// are recorded through the cluster; C#/LINQ is refused with a message that
// says JavaScript indexes are supported.
func (a *API) putIndexes(c echo.Context) error {
	var body struct{ Indexes []wireDefinition }
	if err := readJSON(c, maxIndexBody, &body, "the index definitions"); err != nil {
		return err
	}
	defs := make([]index.Definition, len(body.Indexes))
	names := make([]string, len(body.Indexes))
	for i, w := range body.Indexes {
		defs[i] = w.definition()
		names[i] = w.Name
	}
	httpx.SetAuditTarget(c, strings.Join(names, ", "))
	res, err := a.Indexes.Put(c.Request().Context(), c.Param("db"), defs)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusCreated, map[string]any{"Results": res})
}

// outDefinition is IndexDefinition as the server writes it (RavenDB's key
// order; Type, not IndexType).
type outDefinition struct {
	Name                                         string
	SourceType                                   string
	Type                                         string
	LockMode                                     string
	Priority                                     string
	State                                        string
	OutputReduceToCollection                     *string
	DeploymentMode                               *string
	ReduceOutputIndex                            *int64
	PatternForOutputReduceToCollectionReferences *string
	PatternReferencesCollectionName              *string
	Configuration                                map[string]string
	AdditionalSources                            map[string]string
	AdditionalAssemblies                         []any
	Reduce                                       *string
	Maps                                         []string
	Fields                                       map[string]index.FieldOptions
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func toWire(d index.Definition) outDefinition {
	o := outDefinition{Name: d.Name, SourceType: "Documents", Type: d.Type, LockMode: orDefault(d.LockMode, "Unlock"),
		Priority: orDefault(d.Priority, "Normal"), State: orDefault(d.State, "Normal"), Configuration: d.Configuration,
		AdditionalSources: map[string]string{}, AdditionalAssemblies: []any{}, Maps: d.Maps, Fields: d.FieldOptions}
	if o.Configuration == nil {
		o.Configuration = map[string]string{}
	}
	if o.Fields == nil {
		o.Fields = map[string]index.FieldOptions{}
	}
	if d.Reduce != "" {
		r := d.Reduce
		o.Reduce = &r
	}
	if d.IsAuto() {
		// An auto index has no source text: describe what it indexes.
		var fields []string
		for _, f := range d.Fields {
			name := f.Name
			switch {
			case f.Aggregation != "":
				name = f.Aggregation + "(" + f.Name + ")"
			case f.Search:
				name = "Search(" + f.Name + ")"
			case f.Exact:
				name = "Exact(" + f.Name + ")"
			}
			fields = append(fields, name)
		}
		m := "auto index over '" + d.Collection + "': " + strings.Join(fields, ", ")
		if len(d.GroupBy) > 0 {
			m += " group by " + strings.Join(d.GroupBy, ", ")
		}
		o.Maps = []string{m}
	}
	if o.Maps == nil {
		o.Maps = []string{}
	}
	return o
}

// definitions lists a database's definitions from the cluster (every node
// answers the same).
func (a *API) definitions(c echo.Context) ([]index.Definition, error) {
	if _, err := a.db(c); err != nil {
		return nil, err
	}
	return a.Indexes.List(c.Param("db")), nil
}

func (a *API) getIndexes(c echo.Context) error {
	defs, err := a.definitions(c)
	if err != nil {
		return err
	}
	if name := c.QueryParam("name"); name != "" {
		for _, d := range defs {
			if strings.EqualFold(d.Name, name) {
				return writeJSON(c, http.StatusOK, map[string]any{"Results": []outDefinition{toWire(d)}})
			}
		}
		// An unknown name is an empty list: the clients turn it into null.
		return writeJSON(c, http.StatusOK, map[string]any{"Results": []outDefinition{}})
	}
	start, pageSize, err := pagingWith(c, 1024)
	if err != nil {
		return err
	}
	if start > len(defs) {
		start = len(defs)
	}
	defs = defs[start:]
	if len(defs) > pageSize {
		defs = defs[:pageSize]
	}
	if ok, _ := boolParam(c, "namesOnly"); ok {
		names := make([]string, len(defs))
		for i, d := range defs {
			names[i] = d.Name
		}
		return writeJSON(c, http.StatusOK, map[string]any{"Results": names})
	}
	out := make([]outDefinition, len(defs))
	for i, d := range defs {
		out[i] = toWire(d)
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Results": out})
}

func indexName(c echo.Context) (string, error) { return requiredParam(c, "name") }

func (a *API) deleteIndex(c echo.Context) error {
	name, err := indexName(c)
	if err != nil {
		return err
	}
	if _, err := a.db(c); err != nil {
		return err
	}
	if err := a.Indexes.Delete(c.Request().Context(), c.Param("db"), []string{name}, who(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// who names the caller in the index log.
func who(c echo.Context) string {
	if id := auth.FromContext(c.Request().Context()); id != nil && id.Name != "" {
		return id.Name
	}
	return "a client at " + c.RealIP()
}

// resetIndex rebuilds this node's copy of an index (RESET /indexes).
func (a *API) resetIndex(c echo.Context) error {
	name, err := indexName(c)
	if err != nil {
		return err
	}
	db, err := a.db(c)
	if err != nil {
		return err
	}
	ix, err := a.Indexes.Open(c.Param("db"), name)
	if err != nil {
		return err
	}
	if err := ix.Reset(); err != nil {
		return err
	}
	a.followIndexReset(db, ix)
	return c.NoContent(http.StatusNoContent)
}

// indexes resolves ?name= (repeatable; all of the database's when absent)
// to this node's open indexes.
func (a *API) openIndexes(c echo.Context) ([]*index.Index, error) {
	if _, err := a.db(c); err != nil {
		return nil, err
	}
	var names []string
	for _, n := range c.QueryParams()["name"] {
		if n != "" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		var out []*index.Index
		for _, rec := range a.Indexes.List(c.Param("db")) {
			if ix, err := a.Indexes.Open(c.Param("db"), rec.Name); err == nil {
				out = append(out, ix)
			}
		}
		return out, nil
	}
	out := make([]*index.Index, 0, len(names))
	for _, n := range names {
		ix, err := a.Indexes.Open(c.Param("db"), n)
		if err != nil {
			return nil, err
		}
		out = append(out, ix)
	}
	return out, nil
}

func wireTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := document.FormatTime(t)
	return &s
}

// wireStats is IndexStats as the clients read it (Collections is always
// an object: the npm client calls Object.keys on it).
func wireStats(db *storage.DB, ix *index.Index) map[string]any {
	s := ix.Stats()
	d := ix.Definition()
	colls := map[string]any{}
	for name, cs := range s.Collections {
		if canon, ok := db.CanonicalCollection(name); ok {
			name = canon
		}
		colls[name] = map[string]int64{"LastProcessedDocumentEtag": cs.LastProcessedDocumentEtag, "LastProcessedTombstoneEtag": cs.LastProcessedTombstoneEtag,
			"DocumentLag": cs.DocumentLag, "TombstoneLag": cs.TombstoneLag}
	}
	status := runningStatus(s.State, s.Paused)
	return map[string]any{
		"Name": s.Name, "MapAttempts": s.MapAttempts, "MapSuccesses": s.MapSuccesses, "MapErrors": s.MapErrors,
		"MapReferenceAttempts": s.MapReferenceAttempts, "MapReferenceSuccesses": s.MapReferenceSuccesses, "MapReferenceErrors": s.MapReferenceErrors,
		"ReduceAttempts": s.ReduceAttempts, "ReduceSuccesses": s.ReduceSuccesses, "ReduceErrors": s.ReduceErrors,
		"MappedPerSecondRate": 0, "ReducedPerSecondRate": 0, "MaxNumberOfOutputsPerDocument": 0,
		"Collections": colls, "LastQueryingTime": wireTime(s.LastQueryingTime), "State": s.State, "Priority": orDefault(d.Priority, "Normal"),
		"CreatedTimestamp": wireTime(s.CreatedTimestamp), "LastIndexingTime": wireTime(s.LastIndexingTime), "IsStale": s.IsStale,
		"LockMode": orDefault(d.LockMode, "Unlock"), "Type": s.Type, "SourceType": "Documents", "SearchEngineType": "None",
		"Status": status, "EntriesCount": s.EntriesCount, "ErrorsCount": s.ErrorsCount,
		"ReferencesHeld": s.ReferencesHeld, "References": s.References, "StaleReasons": s.StaleReasons, "SizeOnDisk": s.SizeOnDisk,
		"NodeTag": "", "PauseReason": s.Paused,
	}
}

// runningStatus is an index's IndexRunningStatus: Disabled (everywhere,
// through the cluster), Paused (on this node: a killed reset's rebuild) or
// Running.
func runningStatus(state, paused string) string {
	switch {
	case state == index.StateDisabled:
		return "Disabled"
	case paused != "":
		return "Paused"
	}
	return "Running"
}

func (a *API) indexStats(c echo.Context) error {
	ixs, err := a.openIndexes(c)
	if err != nil {
		return err
	}
	db, err := a.db(c)
	if err != nil {
		return err
	}
	out := make([]map[string]any, len(ixs))
	for i, ix := range ixs {
		out[i] = wireStats(db, ix)
		out[i]["NodeTag"] = a.NodeTag
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Results": out})
}

func (a *API) indexErrors(c echo.Context) error {
	ixs, err := a.openIndexes(c)
	if err != nil {
		return err
	}
	type wireError struct {
		Timestamp string
		Document  string
		Action    string
		Error     string
	}
	type entry struct {
		Name   string
		Errors []wireError
	}
	out := make([]entry, len(ixs))
	for i, ix := range ixs {
		out[i] = entry{Name: ix.Name(), Errors: []wireError{}}
		for _, e := range ix.Errors() {
			out[i].Errors = append(out[i].Errors, wireError{Timestamp: document.FormatTime(e.Timestamp), Document: e.Document, Action: e.Action, Error: e.Error})
		}
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Results": out})
}

func (a *API) deleteIndexErrors(c echo.Context) error {
	ixs, err := a.openIndexes(c)
	if err != nil {
		return err
	}
	for _, ix := range ixs {
		ix.ClearErrors()
	}
	return c.NoContent(http.StatusNoContent)
}

func (a *API) indexingStatus(c echo.Context) error {
	ixs, err := a.openIndexes(c)
	if err != nil {
		return err
	}
	type st struct{ Name, Status string }
	out := make([]st, len(ixs))
	for i, ix := range ixs {
		out[i] = st{Name: ix.Name(), Status: runningStatus(ix.State(), ix.PauseReason())}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	// Indexing as a whole is Paused when every index is (a database-wide
	// POST /admin/indexes/stop); disabled ones leave it Running.
	overall := "Running"
	if len(out) > 0 {
		overall = "Paused"
		for _, o := range out {
			if o.Status != "Paused" {
				overall = "Running"
				break
			}
		}
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Status": overall, "Indexes": out})
}

func (a *API) indexStaleness(c echo.Context) error {
	name, err := indexName(c)
	if err != nil {
		return err
	}
	if _, err := a.db(c); err != nil {
		return err
	}
	ix, err := a.Indexes.Open(c.Param("db"), name)
	if err != nil {
		return err
	}
	stale, reasons := ix.Stale(c.Request().Context())
	if reasons == nil {
		reasons = []string{}
	}
	return writeJSON(c, http.StatusOK, map[string]any{"IsStale": stale, "StalenessReasons": reasons})
}

// indexHasChanged compares a definition with the recorded one.
func (a *API) indexHasChanged(c echo.Context) error {
	var w wireDefinition
	if err := readJSON(c, maxIndexBody, &w, "the index definition"); err != nil {
		return err
	}
	defs, err := a.definitions(c)
	if err != nil {
		return err
	}
	next := w.definition()
	for _, d := range defs {
		if strings.EqualFold(d.Name, w.Name) {
			same := slices.Equal(d.Maps, next.Maps) && d.Reduce == next.Reduce && jsonEqual(d.FieldOptions, next.FieldOptions) && jsonEqual(d.Configuration, next.Configuration)
			return writeJSON(c, http.StatusOK, map[string]bool{"Changed": !same})
		}
	}
	return writeJSON(c, http.StatusOK, map[string]bool{"Changed": true})
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	if string(x) == "null" || string(x) == "{}" {
		x = []byte("{}")
	}
	if string(y) == "null" || string(y) == "{}" {
		y = []byte("{}")
	}
	return string(x) == string(y)
}

func (a *API) setIndexes(c echo.Context, field, key string) error {
	if _, err := a.db(c); err != nil {
		return err
	}
	var body map[string]json.RawMessage
	if err := readJSON(c, 1<<20, &body, "the request"); err != nil {
		return err
	}
	var names []string
	var value string
	if err := json.Unmarshal(body["IndexNames"], &names); err != nil || len(names) == 0 {
		return dberr.New(dberr.BadRequest, "IndexNames is a list of index names")
	}
	if err := json.Unmarshal(body[key], &value); err != nil {
		return dberr.New(dberr.BadRequest, "%s is required", key)
	}
	httpx.SetAuditTarget(c, strings.Join(names, ", ")+" "+field+"="+value)
	if err := a.Indexes.Set(c.Request().Context(), c.Param("db"), names, field, value, who(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (a *API) setIndexesLock(c echo.Context) error { return a.setIndexes(c, "LockMode", "Mode") }

func (a *API) setIndexesPriority(c echo.Context) error {
	return a.setIndexes(c, "Priority", "Priority")
}

func (a *API) setIndexState(c echo.Context, state string) error {
	name, err := indexName(c)
	if err != nil {
		return err
	}
	if _, err := a.db(c); err != nil {
		return err
	}
	if err := a.Indexes.Set(c.Request().Context(), c.Param("db"), []string{name}, "State", state, who(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// startIndexing is POST /admin/indexes/start (the clients'
// StartIndexOperation with ?name=, StartIndexingOperation without): it
// resumes the indexes paused on this node (a killed reset's rebuild
// continues where it stopped); the others are left as they are.
func (a *API) startIndexing(c echo.Context) error {
	ixs, err := a.openIndexes(c)
	if err != nil {
		return err
	}
	for _, ix := range ixs {
		if _, err := ix.Resume(); err != nil {
			return err
		}
	}
	return c.NoContent(http.StatusNoContent)
}

// stopIndexing is POST /admin/indexes/stop (the clients' StopIndexOperation
// with ?name=, StopIndexingOperation without): the indexes stop indexing on
// this node (Index.Pause, kept across restarts; their queries answer stale)
// until POST /admin/indexes/start or the studio's Resume. Other nodes go on
// indexing, as RavenDB's stop is a node's too.
func (a *API) stopIndexing(c echo.Context) error {
	ixs, err := a.openIndexes(c)
	if err != nil {
		return err
	}
	reason := "indexing was stopped on this node by " + who(c) + " (POST /admin/indexes/stop); POST /admin/indexes/start resumes it"
	for _, ix := range ixs {
		if err := ix.Pause(reason); err != nil {
			return err
		}
	}
	return c.NoContent(http.StatusNoContent)
}

func (a *API) enableIndex(c echo.Context) error  { return a.setIndexState(c, "Normal") }
func (a *API) disableIndex(c echo.Context) error { return a.setIndexState(c, "Disabled") }
