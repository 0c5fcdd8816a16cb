package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/names"
)

// Index definitions are part of the cluster state, as in RavenDB: every
// node builds the same indexes over its own copy of a database. The
// definition itself is opaque here (backend/index owns its shape); the
// state, lock mode and priority are fields, so the state machine can
// change them without reading the definition. The auto-index cleanup's
// decisions are logged here too, so every node shows the same log.
const (
	opIndexPut    = "index_put"
	opIndexDelete = "index_delete"
	opIndexSet    = "index_set"
	opIndexLog    = "index_log"

	maxIndexesPerCommand = 256
	maxIndexNameBytes    = 256
	// MaxIndexLog is how many cleanup decisions a database keeps.
	MaxIndexLog = 500
)

// IndexRecord is an index of a database as the cluster knows it.
type IndexRecord struct {
	Database   string
	Name       string
	Auto       bool            `json:",omitempty"`
	Definition json.RawMessage // the definition, owned by backend/index
	State      string          `json:",omitempty"` // Normal (""), Idle, Disabled
	LockMode   string          `json:",omitempty"` // Unlock (""), LockedIgnore, LockedError
	Priority   string          `json:",omitempty"` // Normal (""), Low, High
	// Superseded names the wider auto index that replaces this one.
	Superseded string    `json:",omitempty"`
	Created    time.Time `json:",omitempty"`
	// Version is the log index of the put that set the definition: it
	// changes only when the definition does.
	Version uint64 `json:",omitempty"`
}

// IndexDecision is one entry of a database's index log: what the auto-index
// cleanup (or a person) decided about an index, and why.
type IndexDecision struct {
	At     time.Time
	Index  string
	Action string // "idle", "normal", "delete", "keep", ...
	Reason string
	Node   string `json:",omitempty"` // the node that decided
}

// IndexSet is what an index_set command changes on every named index.
type IndexSet struct {
	Field string // "State", "LockMode" or "Priority"
	Value string
}

// IndexPut is an index_put command's content.
type IndexPut struct {
	Records []IndexRecord
	// IfAbsent keeps an existing index of the same name as it is (an auto
	// index two queries asked for at once).
	IfAbsent bool `json:",omitempty"`
	// Supersede marks these indexes as replaced by the first record.
	Supersede []string `json:",omitempty"`
}

var indexFieldValues = map[string][]string{
	"State":    {"Normal", "Idle", "Disabled"},
	"LockMode": {"Unlock", "LockedIgnore", "LockedError"},
	"Priority": {"Low", "Normal", "High"},
}

func indexKey(db, name string) string { return strings.ToLower(db) + "/" + strings.ToLower(name) }

func validIndexName(name string) error {
	if name == "" || len(name) > maxIndexNameBytes || !utf8.ValidString(name) {
		return dberr.New(dberr.BadRequest, "an index name is 1 to %d bytes of UTF-8, not %q", maxIndexNameBytes, names.Clip(name, 80))
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return dberr.New(dberr.BadRequest, "an index name has no control characters: %q", names.Clip(name, 80))
		}
	}
	return nil
}

func validDecisions(ds []IndexDecision) error {
	if len(ds) > MaxIndexLog {
		return dberr.New(dberr.BadRequest, "%d index decisions in one command; at most %d", len(ds), MaxIndexLog)
	}
	for _, d := range ds {
		if len(d.Index) > maxIndexNameBytes || len(d.Action) > 32 || len(d.Reason) > 2048 || len(d.Node) > 8 {
			return dberr.New(dberr.BadRequest, "an index decision is too long")
		}
	}
	return nil
}

func init() {
	validators[opIndexPut] = func(c *Command) error {
		if err := names.Database(c.Name); err != nil {
			return err
		}
		if c.IndexPut == nil || len(c.IndexPut.Records) == 0 || len(c.IndexPut.Records) > maxIndexesPerCommand {
			return dberr.New(dberr.BadRequest, "invalid cluster command %q: 1 to %d indexes", c.Op, maxIndexesPerCommand)
		}
		for _, r := range c.IndexPut.Records {
			if err := validIndexName(r.Name); err != nil {
				return err
			}
			if len(r.Definition) == 0 || len(r.Definition) > maxSettingBytes || !json.Valid(r.Definition) {
				return dberr.New(dberr.BadRequest, "invalid cluster command %q: the definition of %q is not JSON of at most %d bytes", c.Op, names.Clip(r.Name, 80), maxSettingBytes)
			}
			for f, v := range map[string]string{"State": r.State, "LockMode": r.LockMode, "Priority": r.Priority} {
				if v != "" && !slices.Contains(indexFieldValues[f], v) {
					return dberr.New(dberr.BadRequest, "%s %q is not one of %s", f, names.Clip(v, 40), strings.Join(indexFieldValues[f], ", "))
				}
			}
		}
		for _, s := range c.IndexPut.Supersede {
			if err := validIndexName(s); err != nil {
				return err
			}
		}
		return validDecisions(c.Decisions)
	}
	validators[opIndexDelete] = func(c *Command) error {
		if err := names.Database(c.Name); err != nil {
			return err
		}
		if len(c.Keys) == 0 || len(c.Keys) > maxIndexesPerCommand {
			return dberr.New(dberr.BadRequest, "invalid cluster command %q: 1 to %d indexes", c.Op, maxIndexesPerCommand)
		}
		return validDecisions(c.Decisions)
	}
	validators[opIndexSet] = func(c *Command) error {
		if err := names.Database(c.Name); err != nil {
			return err
		}
		if len(c.Keys) == 0 || len(c.Keys) > maxIndexesPerCommand {
			return dberr.New(dberr.BadRequest, "invalid cluster command %q: 1 to %d indexes", c.Op, maxIndexesPerCommand)
		}
		if c.IndexSet == nil || !slices.Contains(indexFieldValues[c.IndexSet.Field], c.IndexSet.Value) {
			return dberr.New(dberr.BadRequest, "invalid cluster command %q: a field (State, LockMode, Priority) and one of its values", c.Op)
		}
		return validDecisions(c.Decisions)
	}
	validators[opIndexLog] = func(c *Command) error {
		if err := names.Database(c.Name); err != nil {
			return err
		}
		if len(c.Decisions) == 0 {
			return dberr.New(dberr.BadRequest, "invalid cluster command %q: no decisions", c.Op)
		}
		return validDecisions(c.Decisions)
	}

	appliers[opIndexPut] = func(st *state, c *Command, index uint64) Result {
		if _, ok := st.Databases[strings.ToLower(c.Name)]; !ok {
			return Result{Err: "Database '" + c.Name + "' does not exist.", Kind: "missing"}
		}
		if st.Indexes == nil {
			st.Indexes = map[string]*IndexRecord{}
		}
		// LockedError refuses the whole command before anything changes.
		for _, r := range c.IndexPut.Records {
			old, ok := st.Indexes[indexKey(c.Name, r.Name)]
			if ok && !c.IndexPut.IfAbsent && old.LockMode == "LockedError" && !bytes.Equal(old.Definition, r.Definition) {
				return Result{Err: "Cannot change the definition of index '" + old.Name + "': its lock mode is LockedError.", Kind: "conflict"}
			}
		}
		for _, r := range c.IndexPut.Records {
			k := indexKey(c.Name, r.Name)
			old, ok := st.Indexes[k]
			if ok && (c.IndexPut.IfAbsent || old.LockMode == "LockedIgnore" || bytes.Equal(old.Definition, r.Definition)) {
				continue // unchanged, locked, or made by another query first
			}
			rec := r
			rec.Database = c.Name
			rec.Definition = append(json.RawMessage(nil), r.Definition...)
			rec.Version = index
			if ok {
				// A new definition keeps what people set on the index.
				rec.Created = old.Created
				if rec.LockMode == "" {
					rec.LockMode = old.LockMode
				}
				if rec.Priority == "" {
					rec.Priority = old.Priority
				}
			}
			st.Indexes[k] = &rec
		}
		if len(c.IndexPut.Supersede) > 0 {
			by := c.IndexPut.Records[0].Name
			for _, s := range c.IndexPut.Supersede {
				if old, ok := st.Indexes[indexKey(c.Name, s)]; ok && !strings.EqualFold(s, by) {
					cp := *old
					cp.Superseded = by
					st.Indexes[indexKey(c.Name, s)] = &cp
				}
			}
		}
		appendIndexLog(st, c.Name, c.Decisions)
		return Result{Value: int64(index)}
	}
	appliers[opIndexDelete] = func(st *state, c *Command, _ uint64) Result {
		var missing []string
		for _, n := range c.Keys {
			k := indexKey(c.Name, n)
			if _, ok := st.Indexes[k]; !ok {
				missing = append(missing, n)
				continue
			}
			delete(st.Indexes, k)
		}
		appendIndexLog(st, c.Name, c.Decisions)
		if len(missing) > 0 {
			return Result{Err: "Index '" + strings.Join(missing, "', '") + "' does not exist.", Kind: "not_found"}
		}
		return Result{}
	}
	appliers[opIndexSet] = func(st *state, c *Command, _ uint64) Result {
		var missing []string
		for _, n := range c.Keys {
			k := indexKey(c.Name, n)
			old, ok := st.Indexes[k]
			if !ok {
				missing = append(missing, n)
				continue
			}
			cp := *old
			v := c.IndexSet.Value
			switch c.IndexSet.Field {
			case "State":
				if v == "Normal" {
					v = ""
				}
				cp.State = v
			case "LockMode":
				if v == "Unlock" {
					v = ""
				}
				cp.LockMode = v
			case "Priority":
				if v == "Normal" {
					v = ""
				}
				cp.Priority = v
			}
			st.Indexes[k] = &cp
		}
		appendIndexLog(st, c.Name, c.Decisions)
		if len(missing) > 0 {
			return Result{Err: "Index '" + strings.Join(missing, "', '") + "' does not exist.", Kind: "not_found"}
		}
		return Result{}
	}
	appliers[opIndexLog] = func(st *state, c *Command, _ uint64) Result {
		if _, ok := st.Databases[strings.ToLower(c.Name)]; !ok {
			return Result{Err: "Database '" + c.Name + "' does not exist.", Kind: "missing"}
		}
		appendIndexLog(st, c.Name, c.Decisions)
		return Result{}
	}
}

// appendIndexLog adds decisions to a database's log, keeping the newest
// MaxIndexLog (copy on write: readers share the old slice).
func appendIndexLog(st *state, db string, ds []IndexDecision) {
	if len(ds) == 0 {
		return
	}
	if st.IndexLog == nil {
		st.IndexLog = map[string][]IndexDecision{}
	}
	k := strings.ToLower(db)
	log := append(append([]IndexDecision(nil), st.IndexLog[k]...), ds...)
	if len(log) > MaxIndexLog {
		log = log[len(log)-MaxIndexLog:]
	}
	st.IndexLog[k] = log
}

// dropIndexes removes a deleted database's indexes and log.
func dropIndexes(st *state, db string) {
	prefix := strings.ToLower(db) + "/"
	for k := range st.Indexes {
		if strings.HasPrefix(k, prefix) {
			delete(st.Indexes, k)
		}
	}
	delete(st.IndexLog, strings.ToLower(db))
}

// PutIndexes records index definitions (a changed definition gets a new
// Version; an unchanged one is left as it is) and returns once this node
// serves them; Value is the log index (RavenDB's RaftCommandIndex).
func (c *Cluster) PutIndexes(ctx context.Context, db string, put IndexPut, decisions ...IndexDecision) (Result, error) {
	return c.applyAndWait(ctx, Command{Op: opIndexPut, Name: db, IndexPut: &put, Decisions: decisions})
}

// DeleteIndexes removes indexes; an unknown one is a "not_found" error
// (the others are still removed).
func (c *Cluster) DeleteIndexes(ctx context.Context, db string, indexes []string, decisions ...IndexDecision) (Result, error) {
	return c.applyAndWait(ctx, Command{Op: opIndexDelete, Name: db, Keys: indexes, Decisions: decisions})
}

// SetIndexes changes the state, lock mode or priority of indexes.
func (c *Cluster) SetIndexes(ctx context.Context, db string, indexes []string, set IndexSet, decisions ...IndexDecision) (Result, error) {
	return c.applyAndWait(ctx, Command{Op: opIndexSet, Name: db, Keys: indexes, IndexSet: &set, Decisions: decisions})
}

// LogIndexDecisions adds decisions that changed nothing (an index kept,
// and why) to a database's index log.
func (c *Cluster) LogIndexDecisions(ctx context.Context, db string, decisions []IndexDecision) (Result, error) {
	return c.Apply(ctx, Command{Op: opIndexLog, Name: db, Decisions: decisions})
}

// Indexes lists a database's indexes by name.
func (c *Cluster) Indexes(db string) []IndexRecord {
	c.fsm.mu.RLock()
	defer c.fsm.mu.RUnlock()
	prefix := strings.ToLower(db) + "/"
	var out []IndexRecord
	for k, v := range c.fsm.st.Indexes {
		if strings.HasPrefix(k, prefix) {
			out = append(out, *v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Index finds one index by name (case-insensitive).
func (c *Cluster) Index(db, name string) (IndexRecord, bool) {
	c.fsm.mu.RLock()
	defer c.fsm.mu.RUnlock()
	r, ok := c.fsm.st.Indexes[indexKey(db, name)]
	if !ok {
		return IndexRecord{}, false
	}
	return *r, true
}

// IndexLog is a database's index log, oldest first.
func (c *Cluster) IndexLog(db string) []IndexDecision {
	c.fsm.mu.RLock()
	defer c.fsm.mu.RUnlock()
	return append([]IndexDecision(nil), c.fsm.st.IndexLog[strings.ToLower(db)]...)
}
