package studio

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/indexes"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/views"
)

// Indexes pages: every index of a database as the cluster records it (so
// every node lists the same indexes), with this node's figures of each
// (progress, staleness, references, errors), when the auto-index cleanup
// will act on it, and the cleanup's decision log; and one index's page
// with its definition, reference cost, errors and the actions. Both
// refresh live every second. An index name holds slashes (Auto/Orders/ByName),
// so the index page takes it as ?name=.

// indexLogShown bounds the decisions the Indexes page shows (newest first).
const indexLogShown = 200

// indexErrorsShown bounds the errors an index page shows (newest first).
const indexErrorsShown = 200

var errNoIndexes = dberr.New(dberr.Unavailable, "Indexes are not available on this node.")

func (s *Studio) registerIndexes(g *echo.Group) {
	g.GET("/indexes", s.indexesPage)
	g.GET("/index", s.indexPage)
	g.POST("/index/reset", s.indexReset)
	g.POST("/index/delete", s.indexDelete)
	g.POST("/index/disable", s.indexState)
	g.POST("/index/enable", s.indexState)
	g.POST("/index/resume", s.indexResume)
	s.addLive("indexes", s.indexesLive, true)
	s.addLive("index", s.indexLive, true)
}

// indexRecords are the database's indexes as the cluster records them
// (this node's open indexes when the node runs no cluster).
func (s *Studio) indexRecords(db string) []cluster.IndexRecord {
	if s.Cluster != nil {
		return s.Cluster.Indexes(db)
	}
	var out []cluster.IndexRecord
	if s.Indexes != nil {
		for _, ix := range s.Indexes.List(db) {
			if rec, err := indexes.Record(db, ix.Definition()); err == nil {
				out = append(out, rec)
			}
		}
	}
	return out
}

// cleanupConfig is the database's auto-index cleanup configuration: the
// record's Indexing.* settings (RavenDB's keys), defaults when absent.
func (s *Studio) cleanupConfig(db string) (indexes.Config, string) {
	if s.IndexConfig != nil {
		return s.IndexConfig(db), ""
	}
	settings := map[string]string{}
	if s.Cluster != nil {
		if raw := s.Cluster.Setting(db, indexes.SettingsKey); len(raw) > 0 {
			if err := json.Unmarshal(raw, &settings); err != nil {
				return indexes.DefaultConfig(), "The database's indexing settings are unreadable (" + err.Error() + "); the defaults apply"
			}
		}
	}
	cfg, err := indexes.ParseConfig(settings)
	if err != nil {
		return indexes.DefaultConfig(), err.Error() + "; the defaults apply"
	}
	return cfg, ""
}

// usage is the record of when each index and collection of db was last
// queried: the cluster's (IndexUsage) or, without it, this node's open
// indexes (a collection counts the latest query of any of its indexes).
func (s *Studio) usage(db string) (indexes.Report, string) {
	if s.IndexUsage != nil {
		return s.IndexUsage(db), "node " + s.NodeTag + ", which the leader's cleanup merges with every member's"
	}
	r := indexes.Report{Indexes: map[string]time.Time{}, Collections: map[string]time.Time{}}
	if s.Indexes != nil {
		for _, ix := range s.Indexes.List(db) {
			q := ix.Stats().LastQueryingTime
			if q.IsZero() {
				continue
			}
			r.Indexes[strings.ToLower(ix.Name())] = q
			for _, c := range sourceCollections(ix.Definition()) {
				if k := strings.ToLower(c); q.After(r.Collections[k]) {
					r.Collections[k] = q
				}
			}
		}
	}
	return r, "node " + s.NodeTag
}

// sourceCollections are the collections an index reads.
func sourceCollections(def index.Definition) []string {
	if def.IsAuto() {
		return []string{def.Collection}
	}
	var out []string
	for _, m := range def.Maps {
		if c := jsMapCollection(m); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// jsMapCollection reads the collection of map('Name', ...) for the
// cleanup's "collection queried" fallback; "" when it is not that shape.
func jsMapCollection(m string) string {
	i := strings.Index(m, "map(")
	if i < 0 {
		return ""
	}
	rest := strings.TrimSpace(m[i+4:])
	if rest == "" || (rest[0] != '\'' && rest[0] != '"') {
		return ""
	}
	end := strings.IndexByte(rest[1:], rest[0])
	if end < 0 {
		return ""
	}
	return rest[1 : 1+end]
}

// indexRow builds one row: the record's truth, this node's figures.
func (s *Studio) indexRow(ctx context.Context, db *storage.DB, rec cluster.IndexRecord, cfg indexes.Config, use indexes.Report, counts map[string]int64, now time.Time) views.IndexRow {
	def, err := indexes.Definition(rec)
	row := views.IndexRow{Name: rec.Name, Auto: rec.Auto, State: orNormal(rec.State), LockMode: rec.LockMode, Priority: rec.Priority,
		Superseded: rec.Superseded, Created: rec.Created, Definition: def}
	if err != nil {
		row.DefinitionError = err.Error()
	}
	row.Type = def.Type
	var ix *index.Index
	if s.Indexes != nil {
		ix, row.Open = s.Indexes.Get(db.Name(), rec.Name)
	}
	if row.Open {
		st := ix.Stats()
		row.Stats = st
		if st.State == index.StateError {
			row.State = index.StateError
		} else if st.Paused != "" && row.State == index.StateNormal {
			row.State = indexPaused
		}
		row.LastQuery = st.LastQueryingTime
		for _, name := range sortedKeys(st.Collections) {
			cs := st.Collections[name]
			c := views.IndexCollection{Name: name, Processed: cs.LastProcessedDocumentEtag, ProcessedTombstone: cs.LastProcessedTombstoneEtag,
				Lag: cs.DocumentLag, TombstoneLag: cs.TombstoneLag}
			if name == index.AllDocs {
				c.Last = db.LastEtag()
				c.Docs = counts[""]
			} else {
				c.Last, c.LastTombstone, _ = db.CollectionEtags(ctx, name)
				c.Docs = counts[strings.ToLower(name)]
			}
			row.Collections = append(row.Collections, c)
		}
	}
	if q := use.Indexes[strings.ToLower(rec.Name)]; q.After(row.LastQuery) {
		row.LastQuery = q
	}
	u := indexes.Usage{Name: rec.Name, Collection: def.Collection, Auto: rec.Auto, State: rec.State, Created: rec.Created,
		LastQueried: row.LastQuery, Superseded: rec.Superseded}
	if u.Created.IsZero() {
		u.Created = def.Created
	}
	row.Cleanup.Action, row.Cleanup.At, row.Cleanup.Why = indexes.Next(now, cfg, use.Started, u, use.Collections[strings.ToLower(def.Collection)])
	return row
}

func orNormal(state string) string {
	if state == "" {
		return index.StateNormal
	}
	return state
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// collectionCounts are the documents of each collection (lower-cased;
// "" is every document).
func collectionCounts(db *storage.DB) map[string]int64 {
	st := db.Stats()
	out := map[string]int64{"": st.Documents}
	for _, c := range st.Collections {
		out[strings.ToLower(c.Name)] = c.Docs
	}
	return out
}

func (s *Studio) indexesData(ctx context.Context, db *storage.DB) views.IndexesData {
	d := views.IndexesData{DB: db.Name(), Node: s.NodeTag, Enabled: s.Indexes != nil, Clustered: s.Cluster != nil}
	cfg, cfgErr := s.cleanupConfig(db.Name())
	use, scope := s.usage(db.Name())
	d.Config, d.ConfigError, d.UsageScope = cfg, cfgErr, scope
	counts := collectionCounts(db)
	now := time.Now()
	for _, rec := range s.indexRecords(db.Name()) {
		d.Rows = append(d.Rows, s.indexRow(ctx, db, rec, cfg, use, counts, now))
	}
	if s.Cluster != nil {
		log := s.Cluster.IndexLog(db.Name())
		d.LogTotal = len(log)
		for i := len(log) - 1; i >= 0 && len(d.Log) < indexLogShown; i-- {
			d.Log = append(d.Log, log[i])
		}
	}
	return d
}

// indexDetail is one index's page data.
func (s *Studio) indexDetail(ctx context.Context, db *storage.DB, name string) views.IndexDetail {
	d := views.IndexDetail{DB: db.Name(), Name: name, Node: s.NodeTag, Enabled: s.Indexes != nil}
	var rec cluster.IndexRecord
	if s.Cluster != nil {
		rec, d.Found = s.Cluster.Index(db.Name(), name)
	} else {
		for _, r := range s.indexRecords(db.Name()) {
			if strings.EqualFold(r.Name, name) {
				rec, d.Found = r, true
			}
		}
	}
	if !d.Found {
		return d
	}
	cfg, _ := s.cleanupConfig(db.Name())
	use, scope := s.usage(db.Name())
	d.UsageScope = scope
	d.Row = s.indexRow(ctx, db, rec, cfg, use, collectionCounts(db), time.Now())
	d.Name = rec.Name
	if d.Row.Open {
		ix, _ := s.Indexes.Get(db.Name(), rec.Name)
		errs := ix.Errors()
		d.ErrorsTotal = len(errs)
		for i := len(errs) - 1; i >= 0 && len(d.Errors) < indexErrorsShown; i-- {
			d.Errors = append(d.Errors, errs[i])
		}
	}
	return d
}

// indexesPage serves GET /studio/db/{db}/indexes.
func (s *Studio) indexesPage(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	ch := s.chrome(c, "Indexes · "+db.Name(), db.Name(), views.NavIndexes, "indexes")
	ch.Query = url.Values{}
	return render(c, http.StatusOK, ch, views.IndexesPage(s.indexesData(c.Request().Context(), db)))
}

func (s *Studio) indexesLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	db, err := s.Catalog.Get(q.Get("db"))
	if err != nil {
		return nil, nil
	}
	d := s.indexesData(ctx, db)
	return []views.Fragment{{ID: "indexes-body", C: views.IndexesBody(d)}, {ID: "index-log", C: views.IndexLog(d)}}, nil
}

// indexPage serves GET /studio/db/{db}/index?name=.
func (s *Studio) indexPage(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	name := c.QueryParam("name")
	if name == "" {
		return c.Redirect(http.StatusFound, string(views.DBURL(db.Name(), "indexes")))
	}
	d := s.indexDetail(c.Request().Context(), db, name)
	if !d.Found {
		return s.studioError(c, db.Name(), dberr.New(dberr.NotFound, "Index '%s' does not exist in %s.", name, db.Name()))
	}
	ch := s.chrome(c, d.Name+" · Indexes", db.Name(), views.NavIndexes, "index")
	ch.Query = url.Values{"name": {d.Name}}
	return render(c, http.StatusOK, ch, views.IndexPage(d))
}

func (s *Studio) indexLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	db, err := s.Catalog.Get(q.Get("db"))
	if err != nil {
		return nil, nil
	}
	return []views.Fragment{{ID: "index-detail", C: views.IndexDetailBody(s.indexDetail(ctx, db, q.Get("name")))}}, nil
}

// indexAction resolves the database and the named index of an action;
// back is where the action goes afterwards.
func (s *Studio) indexAction(c echo.Context) (db *storage.DB, rec cluster.IndexRecord, back string, err error) {
	db, err = s.studioDB(c)
	if err != nil {
		return nil, rec, "", s.studioError(c, "", err)
	}
	if err := s.readForm(c, db.Name()); err != nil {
		return nil, rec, "", err
	}
	name := c.FormValue("name")
	back = string(views.IndexURL(db.Name(), name))
	found := false
	if s.Cluster != nil {
		rec, found = s.Cluster.Index(db.Name(), name)
	}
	if !found {
		return nil, rec, "", redirectFlash(c, string(views.DBURL(db.Name(), "indexes")), "Index '"+name+"' does not exist in "+db.Name()+"; nothing was changed.", true)
	}
	return db, rec, string(views.IndexURL(db.Name(), rec.Name)), nil
}

// localIndexAction resolves an action on this node's copy of the named
// index (reset, resume). ix is nil when the request is already answered
// (no database, no such index, no open indexes on this node, or the index
// not open here); the handler then returns done. notOpen ends the message
// for an index not open here ("; nothing was resumed.").
func (s *Studio) localIndexAction(c echo.Context, notOpen string) (db *storage.DB, ix *index.Index, rec cluster.IndexRecord, back string, done error) {
	db, rec, back, err := s.indexAction(c)
	if db == nil {
		return nil, nil, rec, back, err
	}
	if s.Indexes == nil {
		return nil, nil, rec, back, redirectFlash(c, back, errNoIndexes.Error(), true)
	}
	ix, ok := s.Indexes.Get(db.Name(), rec.Name)
	if !ok {
		return nil, nil, rec, back, redirectFlash(c, back, "Index "+rec.Name+" is not open on node "+s.NodeTag+notOpen, true)
	}
	return db, ix, rec, back, nil
}

// decision is a person's action for the index log.
func (s *Studio) decision(c echo.Context, name, action, reason string) cluster.IndexDecision {
	who := "the studio"
	if id := auth.FromContext(c.Request().Context()); id != nil && id.Name != "" && !id.Unsecured {
		who = id.Name + " in the studio"
	}
	return cluster.IndexDecision{At: time.Now().UTC(), Index: name, Action: action, Reason: reason + " by " + who, Node: s.NodeTag}
}

// indexReset serves POST /studio/db/{db}/index/reset: this node's copy of
// the index drops its entries and indexes from scratch (other nodes keep
// theirs). The rebuild is an operation, as after the API's reset: shown
// with the running operations, and killing it pauses the index.
func (s *Studio) indexReset(c echo.Context) error {
	db, ix, rec, back, done := s.localIndexAction(c, " yet; nothing was reset.")
	if ix == nil {
		return done
	}
	if err := ix.Reset(); err != nil {
		return redirectFlash(c, back, err.Error(), true)
	}
	msg := "Index " + rec.Name + " reset on node " + s.NodeTag + ": it indexes from scratch here (the other nodes keep their copies)."
	if s.Operations != nil {
		if id, err := index.FollowReset(s.Operations, db.Name(), db.LastEtag(), ix); err == nil {
			msg += " The rebuild is operation " + strconv.FormatInt(id, 10) + "."
		}
	}
	return redirectFlash(c, back, msg, false)
}

// indexPaused is the state the studio shows for an index paused on this
// node (a killed reset's rebuild): the cluster's state stays Normal.
const indexPaused = "Paused"

// indexResume serves POST /studio/db/{db}/index/resume: this node's copy of
// a paused index indexes again from where it stopped.
func (s *Studio) indexResume(c echo.Context) error {
	_, ix, rec, back, done := s.localIndexAction(c, "; nothing was resumed.")
	if ix == nil {
		return done
	}
	was, err := ix.Resume()
	switch {
	case err != nil:
		return redirectFlash(c, back, err.Error(), true)
	case !was:
		return redirectFlash(c, back, "Index "+rec.Name+" was not paused on node "+s.NodeTag+"; nothing was changed.", false)
	}
	return redirectFlash(c, back, "Index "+rec.Name+" resumed on node "+s.NodeTag+": it indexes again from where it stopped.", false)
}

// indexDelete serves POST /studio/db/{db}/index/delete: the name typed
// again confirms it; the cluster deletes the index on every node.
func (s *Studio) indexDelete(c echo.Context) error {
	db, rec, back, err := s.indexAction(c)
	if db == nil {
		return err
	}
	if c.FormValue("confirm") != rec.Name {
		return redirectFlash(c, back, "Type the index name exactly to delete it; nothing was deleted.", true)
	}
	if _, err := s.Cluster.DeleteIndexes(c.Request().Context(), db.Name(), []string{rec.Name}, s.decision(c, rec.Name, "delete", "deleted")); err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		return redirectFlash(c, back, err.Error(), true)
	}
	return redirectFlash(c, string(views.DBURL(db.Name(), "indexes")), "Index "+rec.Name+" deleted on every node.", false)
}

// indexState serves POST /studio/db/{db}/index/disable and /enable,
// through the cluster (every node).
func (s *Studio) indexState(c echo.Context) error {
	db, rec, back, err := s.indexAction(c)
	if db == nil {
		return err
	}
	value, verb := index.StateDisabled, "disabled"
	if strings.HasSuffix(c.Path(), "/enable") {
		value, verb = index.StateNormal, "enabled"
	}
	set := cluster.IndexSet{Field: "State", Value: value}
	if _, err := s.Cluster.SetIndexes(c.Request().Context(), db.Name(), []string{rec.Name}, set, s.decision(c, rec.Name, strings.ToLower(value), verb)); err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		return redirectFlash(c, back, err.Error(), true)
	}
	return redirectFlash(c, back, "Index "+rec.Name+" "+verb+" on every node.", false)
}
