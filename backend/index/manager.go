package index

import (
	"errors"
	"sort"
	"strings"
	"sync"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
)

// Manager holds the open indexes of every database of a node. It knows no
// cluster: the caller feeds it definitions (see api.go).
type Manager struct {
	opts Options

	mu     sync.Mutex
	dbs    map[string]*dbIndexes // by lower-cased database name
	hooked map[*storage.DB]bool
}

type dbIndexes struct {
	db      *storage.DB
	indexes map[string]*Index // by lower-cased index name
}

// NewManager makes an empty manager.
func NewManager(opts Options) *Manager {
	return &Manager{opts: opts, dbs: map[string]*dbIndexes{}, hooked: map[*storage.DB]bool{}}
}

// sameContents tells whether two definitions build the same index.
func sameContents(a, b *Definition) bool { return defHash(a) == defHash(b) }

// Put opens or creates an index of db (see api.go).
func (m *Manager) Put(db *storage.DB, def Definition) (*Index, error) {
	if err := Validate(&def); err != nil {
		return nil, err
	}
	dbKey := strings.ToLower(db.Name())
	key := strings.ToLower(def.Name)
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.dbs[dbKey]
	if d == nil || d.db != db {
		if d != nil {
			for _, ix := range d.indexes {
				ix.Close()
			}
		}
		d = &dbIndexes{db: db, indexes: map[string]*Index{}}
		m.dbs[dbKey] = d
	}
	if !m.hooked[db] {
		m.hooked[db] = true
		db.OnCommit(func(ch []storage.Change) { m.notify(db, ch) })
	}
	path := FilePath(db.Path(), def.Name)
	if cur := d.indexes[key]; cur != nil {
		if sameContents(&cur.def, &def) {
			cur.setDefinitionState(def)
			return cur, nil
		}
		if err := cur.Close(); err != nil {
			return nil, err
		}
		delete(d.indexes, key)
		removeFiles(path)
	}
	for k, other := range d.indexes {
		if other.path == path && k != key {
			return nil, dberr.New(dberr.InvalidOperation, "index '%s' would share its file with index '%s'", def.Name, other.def.Name)
		}
	}
	ix, err := open(path, def, db, m.opts, true)
	if err != nil {
		return nil, err
	}
	d.indexes[key] = ix
	if m.opts.OnChange != nil {
		m.opts.OnChange(Event{Database: db.Name(), Index: def.Name, Type: "IndexAdded"})
	}
	return ix, nil
}

func (m *Manager) notify(db *storage.DB, ch []storage.Change) {
	m.mu.Lock()
	d := m.dbs[strings.ToLower(db.Name())]
	var list []*Index
	if d != nil && d.db == db {
		for _, ix := range d.indexes {
			list = append(list, ix)
		}
	}
	m.mu.Unlock()
	for _, ix := range list {
		ix.notify(ch)
	}
}

// Get finds an open index.
func (m *Manager) Get(dbName, name string) (*Index, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.dbs[strings.ToLower(dbName)]
	if d == nil {
		return nil, false
	}
	ix, ok := d.indexes[strings.ToLower(name)]
	return ix, ok
}

// List is a database's open indexes, sorted by name.
func (m *Manager) List(dbName string) []*Index {
	m.mu.Lock()
	d := m.dbs[strings.ToLower(dbName)]
	var out []*Index
	if d != nil {
		for _, ix := range d.indexes {
			out = append(out, ix)
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i].Name()) < strings.ToLower(out[j].Name()) })
	return out
}

// Delete closes an index and removes its files.
func (m *Manager) Delete(dbName, name string) error {
	m.mu.Lock()
	d := m.dbs[strings.ToLower(dbName)]
	var ix *Index
	if d != nil {
		ix = d.indexes[strings.ToLower(name)]
		delete(d.indexes, strings.ToLower(name))
	}
	m.mu.Unlock()
	if ix == nil {
		return dberr.New(dberr.NotFound, "index '%s' does not exist", name)
	}
	err := ix.Close()
	removeFiles(ix.path)
	if m.opts.OnChange != nil {
		m.opts.OnChange(Event{Database: dbName, Index: ix.Name(), Type: "IndexRemoved"})
	}
	return err
}

// CloseDatabase closes a database's indexes (their files stay).
func (m *Manager) CloseDatabase(dbName string) error {
	m.mu.Lock()
	d := m.dbs[strings.ToLower(dbName)]
	delete(m.dbs, strings.ToLower(dbName))
	m.mu.Unlock()
	if d == nil {
		return nil
	}
	var errs []error
	for _, ix := range d.indexes {
		errs = append(errs, ix.Close())
	}
	return errors.Join(errs...)
}

// Close closes every index.
func (m *Manager) Close() error {
	m.mu.Lock()
	var names []string
	for k := range m.dbs {
		names = append(names, k)
	}
	m.mu.Unlock()
	var errs []error
	for _, n := range names {
		errs = append(errs, m.CloseDatabase(n))
	}
	return errors.Join(errs...)
}
