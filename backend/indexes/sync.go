package indexes

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/jsguard"
	"github.com/rookerydb/rookery/backend/storage"
)

// Definition turns a cluster record into the definition the engine builds:
// the stored definition with the record's state, lock mode, priority and
// supersession laid over it (those change without a new definition).
func Definition(rec cluster.IndexRecord) (index.Definition, error) {
	var def index.Definition
	if err := json.Unmarshal(rec.Definition, &def); err != nil {
		return def, fmt.Errorf("index %q: the stored definition is not readable: %w", rec.Name, err)
	}
	def.Name = rec.Name
	def.State = rec.State
	def.LockMode = rec.LockMode
	def.Priority = rec.Priority
	def.Superseded = rec.Superseded
	if def.Created.IsZero() {
		def.Created = rec.Created
	}
	return def, nil
}

// Record turns a definition into the record the cluster keeps.
func Record(db string, def index.Definition) (cluster.IndexRecord, error) {
	stored := def
	// What the record carries in its own fields is not part of the
	// definition's bytes, so changing it is not a new definition.
	stored.State, stored.LockMode, stored.Priority, stored.Superseded = "", "", "", ""
	b, err := json.Marshal(stored)
	if err != nil {
		return cluster.IndexRecord{}, err
	}
	state := def.State
	if state == index.StateNormal {
		state = ""
	}
	return cluster.IndexRecord{Database: db, Name: def.Name, Auto: def.IsAuto(), Definition: b, State: state,
		LockMode: def.LockMode, Priority: def.Priority, Created: def.Created}, nil
}

// Sync makes the open indexes of one database copy follow the cluster's
// records: every record is put (the engine leaves an unchanged definition
// alone and rebuilds a changed one) and every open index without a record
// is deleted with its file. It returns the problems it met, one per index,
// and carries on with the others.
func Sync(m *index.Manager, db *storage.DB, recs []cluster.IndexRecord) []error {
	var errs []error
	want := map[string]bool{}
	for _, rec := range recs {
		want[strings.ToLower(rec.Name)] = true
		def, err := Definition(rec)
		if err == nil {
			err = guardScripts(def)
		}
		if err == nil {
			_, err = m.Put(db, def)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("index %q of %s: %w", rec.Name, db.Name(), err))
		}
	}
	for _, ix := range m.List(db.Name()) {
		if !want[strings.ToLower(ix.Name())] {
			if err := m.Delete(db.Name(), ix.Name()); err != nil {
				errs = append(errs, fmt.Errorf("index %q of %s: %w", ix.Name(), db.Name(), err))
			}
		}
	}
	return errs
}

// guardScripts bounds a definition's JavaScript before the engine compiles
// it (also for a definition that reached the state some other way than
// Service.Put).
func guardScripts(def index.Definition) error {
	for _, m := range def.Maps {
		if err := jsguard.Check("a map of index '"+def.Name+"'", m, jsguard.DefaultMaxBytes, jsguard.DefaultMaxDepth); err != nil {
			return err
		}
	}
	return jsguard.Check("the reduce of index '"+def.Name+"'", def.Reduce, jsguard.DefaultMaxBytes, jsguard.DefaultMaxDepth)
}
