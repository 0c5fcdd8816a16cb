package indexes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/rookerydb/rookery/backend/catalog"
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/jsguard"
	"github.com/rookerydb/rookery/backend/query"
)

// Service is one node's index management: definitions go through the
// cluster state, and this node's index.Manager follows them over its own
// copy of each database. The API and the studio both call it; it is the
// query runner's Definitions.
type Service struct {
	Cluster *cluster.Cluster
	Catalog *catalog.Catalog
	Manager *index.Manager
	Tracker *Tracker
	NodeTag string
	Log     *slog.Logger
	Now     func() time.Time

	syncMu sync.Map // database (lower-cased) -> *sync.Mutex

	caughtMu sync.Mutex
	caughtUp map[string]time.Time // "db/index" -> first seen non-stale

	// synced is, per database, the fingerprint of the records the last
	// sync applied: the reconciler calls SyncAll after every log entry
	// (subscription acknowledgements included), which is then a string
	// comparison.
	synced sync.Map // database (lower-cased) -> string
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

func (s *Service) lock(db string) *sync.Mutex {
	m, _ := s.syncMu.LoadOrStore(strings.ToLower(db), &sync.Mutex{})
	return m.(*sync.Mutex)
}

// SyncDatabase makes this node's indexes of db follow the cluster's
// records (when this node holds a copy of db).
func (s *Service) SyncDatabase(db string) {
	d, err := s.Catalog.Get(db)
	if err != nil {
		return
	}
	mu := s.lock(db)
	mu.Lock()
	defer mu.Unlock()
	recs := s.Cluster.Indexes(db)
	var fp strings.Builder
	fmt.Fprintf(&fp, "%p|", d) // a re-created database is a new *storage.DB
	for _, r := range recs {
		fmt.Fprintf(&fp, "%s|%d|%s|%s|%s|%s;", strings.ToLower(r.Name), r.Version, r.State, r.LockMode, r.Priority, r.Superseded)
	}
	key := strings.ToLower(db)
	if prev, ok := s.synced.Load(key); ok && prev.(string) == fp.String() && len(s.Manager.List(db)) == len(recs) {
		return
	}
	errs := Sync(s.Manager, d, recs)
	for _, err := range errs {
		s.log().Error("index could not follow the cluster's definition", "database", db, "error", err)
	}
	if len(errs) == 0 {
		s.synced.Store(key, fp.String())
	} else {
		s.synced.Delete(key)
	}
}

// SyncAll follows the records of every database this node holds.
func (s *Service) SyncAll() {
	for _, name := range s.Catalog.Names() {
		s.SyncDatabase(name)
	}
}

// List returns a database's definitions (query.Definitions).
func (s *Service) List(db string) []index.Definition {
	var out []index.Definition
	for _, rec := range s.Cluster.Indexes(db) {
		def, err := Definition(rec)
		if err != nil {
			continue
		}
		out = append(out, def)
	}
	return out
}

// PutAuto records an auto index a query needs (and the narrower ones it
// supersedes) and returns once this node has it open (query.Definitions).
func (s *Service) PutAuto(ctx context.Context, db string, def index.Definition, supersedes []string) error {
	if def.Created.IsZero() {
		def.Created = s.now().UTC()
	}
	rec, err := Record(db, def)
	if err != nil {
		return err
	}
	why := "a query on " + def.Collection + " needed it"
	if len(supersedes) > 0 {
		why = fmt.Sprintf("a query needed more fields than %s had", strings.Join(supersedes, ", "))
	}
	if _, err := s.Cluster.PutIndexes(ctx, db, cluster.IndexPut{Records: []cluster.IndexRecord{rec}, IfAbsent: true, Supersede: supersedes},
		cluster.IndexDecision{At: s.now().UTC(), Index: def.Name, Action: "create", Reason: why, Node: s.NodeTag}); err != nil {
		return err
	}
	s.SyncDatabase(db)
	return nil
}

// PutResult is one index a put recorded.
type PutResult struct {
	Index            string
	RaftCommandIndex int64
}

// Put validates and records static index definitions (PUT /indexes).
// A C#/LINQ definition is refused (JavaScript indexes are supported).
func (s *Service) Put(ctx context.Context, db string, defs []index.Definition) ([]PutResult, error) {
	if len(defs) == 0 {
		return nil, dberr.New(dberr.BadRequest, "no index definition given")
	}
	recs := make([]cluster.IndexRecord, 0, len(defs))
	for i := range defs {
		d := &defs[i]
		if strings.HasPrefix(strings.ToLower(d.Name), "auto/") && !d.IsAuto() {
			return nil, dberr.New(dberr.BadRequest, "Index name '%s' is reserved for auto indexes: names starting with 'Auto/' are made by queries", d.Name)
		}
		if d.Type == "" || !d.IsAuto() {
			d.Type = index.TypeJavaScriptMap
			if strings.TrimSpace(d.Reduce) != "" {
				d.Type = index.TypeJavaScriptMapReduce
			}
		}
		for i, m := range d.Maps {
			if err := jsguard.Check(fmt.Sprintf("map %d of index '%s'", i+1, d.Name), m, jsguard.DefaultMaxBytes, jsguard.DefaultMaxDepth); err != nil {
				return nil, err
			}
		}
		if err := jsguard.Check(fmt.Sprintf("the reduce of index '%s'", d.Name), d.Reduce, jsguard.DefaultMaxBytes, jsguard.DefaultMaxDepth); err != nil {
			return nil, err
		}
		if err := index.Validate(d); err != nil {
			return nil, err
		}
		if old, ok := s.Cluster.Index(db, d.Name); ok {
			d.Created = old.Created
		}
		if d.Created.IsZero() {
			d.Created = s.now().UTC()
		}
		rec, err := Record(db, *d)
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	r, err := s.Cluster.PutIndexes(ctx, db, cluster.IndexPut{Records: recs})
	if err != nil {
		return nil, clusterErr(r, err)
	}
	s.SyncDatabase(db)
	out := make([]PutResult, len(defs))
	for i, d := range defs {
		out[i] = PutResult{Index: d.Name, RaftCommandIndex: r.Value}
	}
	return out, nil
}

// clusterErr gives a refused cluster command its kind.
func clusterErr(r cluster.Result, err error) error {
	var de *dberr.Error
	if errors.As(err, &de) {
		return err
	}
	switch r.Kind {
	case "not_found":
		return dberr.New(dberr.NotFound, "%s", r.Err)
	case "conflict":
		return dberr.New(dberr.InvalidOperation, "%s", r.Err)
	case "missing":
		return dberr.New(dberr.DatabaseMissing, "%s", r.Err)
	}
	return err
}

// Delete removes indexes everywhere.
func (s *Service) Delete(ctx context.Context, db string, names []string, by string) error {
	var ds []cluster.IndexDecision
	for _, n := range names {
		ds = append(ds, cluster.IndexDecision{At: s.now().UTC(), Index: n, Action: "delete", Reason: "deleted by " + by, Node: s.NodeTag})
	}
	r, err := s.Cluster.DeleteIndexes(ctx, db, names, ds...)
	s.SyncDatabase(db)
	if err != nil {
		return clusterErr(r, err)
	}
	return nil
}

// Set changes the state ("Normal", "Disabled"), lock mode or priority of
// indexes everywhere.
func (s *Service) Set(ctx context.Context, db string, names []string, field, value, by string) error {
	var ds []cluster.IndexDecision
	if field == "State" {
		for _, n := range names {
			ds = append(ds, cluster.IndexDecision{At: s.now().UTC(), Index: n, Action: strings.ToLower(value), Reason: "set by " + by, Node: s.NodeTag})
		}
	}
	r, err := s.Cluster.SetIndexes(ctx, db, names, cluster.IndexSet{Field: field, Value: value}, ds...)
	s.SyncDatabase(db)
	if err != nil {
		return clusterErr(r, err)
	}
	return nil
}

// Open finds this node's open index (NotFound when the cluster has no
// such index; Unavailable when it has one this node has not opened).
func (s *Service) Open(db, name string) (*index.Index, error) {
	if ix, ok := s.Manager.Get(db, name); ok {
		return ix, nil
	}
	if _, ok := s.Cluster.Index(db, name); ok {
		return nil, dberr.New(dberr.Unavailable, "Index '%s' is not open on node %s yet", name, s.NodeTag)
	}
	return nil, &query.IndexDoesNotExistError{Name: name}
}

// Queried records that a query of db was served (for the auto-index
// cleanup): by an index, or by its collection directly.
func (s *Service) Queried(db string, res *query.Result) {
	if res == nil {
		return
	}
	now := s.now()
	name := res.IndexName
	switch {
	case strings.HasPrefix(name, "collection/"):
		s.Tracker.Queried(db, "", strings.TrimPrefix(name, "collection/"), now)
		return
	case name == "AllDocs" || name == "":
		return
	}
	ix, ok := s.Manager.Get(db, name)
	if !ok {
		s.Tracker.Queried(db, name, "", now)
		return
	}
	def := ix.Definition()
	if def.Collection != "" {
		s.Tracker.Queried(db, name, def.Collection, now)
		return
	}
	s.Tracker.Queried(db, name, "", now)
	for coll := range ix.Stats().Collections {
		s.Tracker.Queried(db, "", coll, now)
	}
}

// Usage is this node's record of db, with what the node knows of its
// indexes' progress (when each first caught up), for the cleanup.
func (s *Service) Usage(db string) Report {
	r := s.Tracker.Report(db)
	return r
}

// CaughtUp notes, for every open index of db that is not stale, when it
// was first seen so (the superseding rule waits on it).
func (s *Service) CaughtUp(ctx context.Context, db string) map[string]time.Time {
	s.caughtMu.Lock()
	defer s.caughtMu.Unlock()
	if s.caughtUp == nil {
		s.caughtUp = map[string]time.Time{}
	}
	out := map[string]time.Time{}
	for _, ix := range s.Manager.List(db) {
		k := strings.ToLower(db + "/" + ix.Name())
		if stale, _ := ix.Stale(ctx); stale {
			delete(s.caughtUp, k)
			continue
		}
		if _, ok := s.caughtUp[k]; !ok {
			s.caughtUp[k] = s.now()
		}
		out[strings.ToLower(ix.Name())] = s.caughtUp[k]
	}
	return out
}

// Config reads a database's cleanup configuration from its record's
// settings (RavenDB's keys).
func (s *Service) Config(db string) Config {
	raw := s.Cluster.Setting(db, SettingsKey)
	if len(raw) == 0 {
		return DefaultConfig()
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return DefaultConfig()
	}
	c, err := ParseConfig(m)
	if err != nil {
		return DefaultConfig()
	}
	return c
}

// SettingsKey is where a database's indexing configuration (RavenDB's
// "Indexing.*" keys, string values) is kept in its record.
const SettingsKey = "indexing"

// Cleanup runs the auto-index cleanup of one database on the leader:
// reports are every member node's usage (this node's included). Decisions
// that change an index go through the cluster; a kept index is logged once
// per reason.
func (s *Service) Cleanup(ctx context.Context, db string, reports []Report) ([]Decision, error) {
	merged := Merge(reports...)
	caught := s.CaughtUp(ctx, db)
	var usage []Usage
	for _, rec := range s.Cluster.Indexes(db) {
		def, err := Definition(rec)
		if err != nil {
			continue
		}
		usage = append(usage, Usage{Name: rec.Name, Collection: def.Collection, Auto: rec.Auto, State: rec.State, Created: rec.Created,
			LastQueried: merged.Indexes[strings.ToLower(rec.Name)], Superseded: rec.Superseded, CaughtUpAt: caught[strings.ToLower(rec.Name)]})
	}
	now := s.now()
	decisions := Decide(now, s.Config(db), merged.Started, usage, merged.Collections)
	last := map[string]string{}
	for _, d := range s.Cluster.IndexLog(db) {
		last[strings.ToLower(d.Index)] = d.Action + "/" + d.Reason
	}
	var keep []cluster.IndexDecision
	for _, d := range decisions {
		entry := cluster.IndexDecision{At: now.UTC(), Index: d.Index, Action: d.Action, Reason: d.Reason, Node: s.NodeTag}
		var err error
		switch d.Action {
		case ActionIdle:
			_, err = s.Cluster.SetIndexes(ctx, db, []string{d.Index}, cluster.IndexSet{Field: "State", Value: "Idle"}, entry)
		case ActionNormal:
			_, err = s.Cluster.SetIndexes(ctx, db, []string{d.Index}, cluster.IndexSet{Field: "State", Value: "Normal"}, entry)
		case ActionDelete:
			_, err = s.Cluster.DeleteIndexes(ctx, db, []string{d.Index}, entry)
		case ActionKeep:
			// Log a kept index when the rule keeping it changes, not at
			// every pass.
			if prev, ok := last[strings.ToLower(d.Index)]; !ok || !strings.HasPrefix(prev, "keep/") || !sameRule(prev, d) {
				keep = append(keep, entry)
			}
		}
		if err != nil {
			return decisions, err
		}
	}
	if len(keep) > 0 {
		if _, err := s.Cluster.LogIndexDecisions(ctx, db, keep); err != nil {
			return decisions, err
		}
	}
	s.SyncDatabase(db)
	return decisions, nil
}

// sameRule tells whether a logged "keep" entry was made by the same rule
// as d (the reasons of one rule start alike; times in them move).
func sameRule(prev string, d Decision) bool {
	reason := strings.TrimPrefix(prev, "keep/")
	cut := func(s string) string {
		if i := strings.IndexAny(s, "0123456789"); i >= 0 {
			return s[:i]
		}
		return s
	}
	return cut(reason) == cut(d.Reason)
}
