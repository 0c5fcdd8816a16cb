package query

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/rookerydb/rookery/backend/index"
)

// Definitions are the index definitions of the cluster state: the lead's
// implementation reads and writes them through Raft so every node builds the
// same indexes. The runner never writes anything else.
type Definitions interface {
	// List returns every index definition (static and auto) of a database.
	List(db string) []index.Definition
	// PutAuto creates the auto index def and, in the same change, marks each
	// index named in supersedes as replaced by it (Definition.Superseded =
	// def.Name). It returns once this node has applied the change and its
	// index Manager has the index open. Putting a definition that already
	// exists under that name is not an error (two queries may race to create
	// it).
	PutAuto(ctx context.Context, db string, def index.Definition, supersedes []string) error
}

// Index is what the runner uses of an open index (*index.Index).
type Index interface {
	Name() string
	Definition() index.Definition
	Search(ctx context.Context, q index.SearchQuery) (*index.SearchResult, error)
	WaitNonStale(ctx context.Context, cutoffEtag int64) error
	Stale(ctx context.Context) (bool, []string)
	ResultEtag() int64
	MarkQueried(t time.Time)
	Stats() index.Stats
}

// Indexes finds the open indexes of a database (the node's index.Manager,
// through ManagerIndexes).
type Indexes interface {
	Get(db, name string) (Index, bool)
}

// LocalDefinitions is an in-memory Definitions for one node without a
// cluster (tests, benchmarks): it keeps the definitions and opens each new
// one with put (e.g. a function calling (*index.Manager).Put).
type LocalDefinitions struct {
	mu   sync.Mutex
	defs map[string][]index.Definition // by database (lower-cased)
	put  func(db string, def index.Definition) error
}

// NewLocalDefinitions returns an empty LocalDefinitions that opens new
// indexes with put.
func NewLocalDefinitions(put func(db string, def index.Definition) error) *LocalDefinitions {
	return &LocalDefinitions{defs: map[string][]index.Definition{}, put: put}
}

// List returns the database's definitions.
func (m *LocalDefinitions) List(db string) []index.Definition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]index.Definition(nil), m.defs[strings.ToLower(db)]...)
}

// PutAuto adds an auto index and marks the ones it supersedes.
func (m *LocalDefinitions) PutAuto(ctx context.Context, db string, def index.Definition, supersedes []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := strings.ToLower(db)
	list := m.defs[key]
	for i := range list {
		for _, s := range supersedes {
			if list[i].Name == s {
				list[i].Superseded = def.Name
			}
		}
	}
	found := false
	for _, d := range list {
		if d.Name == def.Name {
			found = true
		}
	}
	if !found {
		if def.Created.IsZero() {
			def.Created = time.Now().UTC()
		}
		if m.put != nil {
			if err := m.put(db, def); err != nil {
				return err
			}
		}
		list = append(list, def)
	}
	m.defs[key] = list
	return nil
}

// Put stores a definition as is (a static index, or a state change made by
// the caller).
func (m *LocalDefinitions) Put(db string, def index.Definition) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := strings.ToLower(db)
	list := m.defs[key]
	for i := range list {
		if list[i].Name == def.Name {
			list[i] = def
			return nil
		}
	}
	if m.put != nil {
		if err := m.put(db, def); err != nil {
			return err
		}
	}
	m.defs[key] = append(list, def)
	return nil
}

// IndexLookup adapts a function that finds an open index, such as
// (*index.Manager).Get, to Indexes.
type IndexLookup func(db, name string) (*index.Index, bool)

// Get finds an index.
func (f IndexLookup) Get(db, name string) (Index, bool) {
	ix, ok := f(db, name)
	if !ok || ix == nil {
		return nil, false
	}
	return ix, true
}
