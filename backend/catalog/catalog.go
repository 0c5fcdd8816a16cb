// Package catalog manages the databases of a node: one directory per
// database under <data>/databases, each holding one SQLite file.
package catalog

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/metrics"
	"github.com/rookerydb/rookery/backend/names"
	"github.com/rookerydb/rookery/backend/storage"
)

// ValidateName checks a database name (backend/names.Database).
func ValidateName(name string) error { return names.Database(name) }

// Catalog is the set of databases on this node.
type Catalog struct {
	dir     string
	nodeTag string
	log     *slog.Logger
	metrics *metrics.Engine

	mu  sync.RWMutex
	dbs map[string]*storage.DB // by lower-cased name

	hooksMu sync.Mutex
	hooks   []func(Event)
}

// Event is a change to the set of databases.
type Event struct {
	Type string // "created" or "deleted"
	Name string
	DB   *storage.DB // the database, for "created"
}

// OnChange registers fn to run after a database is created or deleted.
// Databases opened at start-up are reported through All, not here.
func (c *Catalog) OnChange(fn func(Event)) {
	c.hooksMu.Lock()
	c.hooks = append(c.hooks, fn)
	c.hooksMu.Unlock()
}

func (c *Catalog) emit(e Event) {
	c.hooksMu.Lock()
	hooks := append([]func(Event){}, c.hooks...)
	c.hooksMu.Unlock()
	for _, h := range hooks {
		h(e)
	}
}

// All returns every open database, sorted by name.
func (c *Catalog) All() []*storage.DB {
	c.mu.RLock()
	out := make([]*storage.DB, 0, len(c.dbs))
	for _, db := range c.dbs {
		out = append(out, db)
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Open opens every database found under dir.
func Open(dir, nodeTag string, log *slog.Logger, m *metrics.Engine) (*Catalog, error) {
	if log == nil {
		log = slog.Default()
	}
	if m == nil {
		m = metrics.New()
	}
	c := &Catalog{dir: filepath.Join(dir, "databases"), nodeTag: nodeTag, log: log, metrics: m, dbs: map[string]*storage.DB{}}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if strings.HasSuffix(e.Name(), ".deleting") {
			// A delete that was interrupted: finish it.
			_ = os.RemoveAll(filepath.Join(c.dir, e.Name()))
			continue
		}
		path := filepath.Join(c.dir, e.Name(), "documents.db")
		if _, err := os.Stat(path); err != nil {
			continue
		}
		db, err := storage.Open(path, storage.Options{Name: e.Name(), NodeTag: nodeTag, Logger: log.With("database", e.Name()), Metrics: m})
		if err != nil {
			c.Close()
			return nil, err
		}
		c.dbs[strings.ToLower(db.Name())] = db
		log.Info("database opened", "database", db.Name(), "last_etag", db.LastEtag())
	}
	return c, nil
}

// Get returns an open database.
func (c *Catalog) Get(name string) (*storage.DB, error) {
	c.mu.RLock()
	db := c.dbs[strings.ToLower(name)]
	c.mu.RUnlock()
	if db == nil {
		return nil, &dberr.Error{Kind: dberr.DatabaseMissing, Database: name, Msg: "Database '" + name + "' does not exist."}
	}
	return db, nil
}

// Separator checks an identity parts separator: "/" when empty, otherwise
// one character other than '|'.
func Separator(sep string) (string, error) {
	if sep == "" {
		return "/", nil
	}
	if len([]rune(sep)) != 1 || sep == "|" {
		return "", dberr.New(dberr.BadRequest, "The identity parts separator must be one character other than '|', not %q", sep)
	}
	return sep, nil
}

// Options are the settings of a new database.
type Options struct {
	// Separator is the identity parts separator: "companies|" becomes
	// "companies" + Separator + "1". "/" when empty.
	Separator string
}

// Create makes a new database.
func (c *Catalog) Create(name string, opts Options) (*storage.DB, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	sep, err := Separator(opts.Separator)
	if err != nil {
		return nil, err
	}
	opts.Separator = sep
	db, err := c.create(name, opts)
	if err != nil {
		return nil, err
	}
	c.log.Info("database created", "database", name)
	c.emit(Event{Type: "created", Name: name, DB: db})
	return db, nil
}

func (c *Catalog) create(name string, opts Options) (*storage.DB, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := strings.ToLower(name)
	if c.dbs[key] != nil {
		return nil, dberr.New(dberr.Concurrency, "Database '%s' already exists!", name)
	}
	dir := filepath.Join(c.dir, key)
	_ = os.RemoveAll(dir) // leftovers of an interrupted delete
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	db, err := storage.Open(filepath.Join(dir, "documents.db"), storage.Options{Name: name, NodeTag: c.nodeTag, Separator: opts.Separator, Logger: c.log.With("database", name), Metrics: c.metrics})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	c.dbs[key] = db
	return db, nil
}

// Delete closes a database and removes its files.
func (c *Catalog) Delete(name string) error {
	c.mu.Lock()
	key := strings.ToLower(name)
	db := c.dbs[key]
	if db == nil {
		c.mu.Unlock()
		return &dberr.Error{Kind: dberr.DatabaseMissing, Database: name, Msg: "Database '" + name + "' does not exist."}
	}
	delete(c.dbs, key)
	c.mu.Unlock()
	err := db.Close()
	dir := filepath.Join(c.dir, key)
	// Rename first so a crash mid-removal never leaves a half database that
	// opens at the next start.
	tmp := dir + ".deleting"
	if rerr := os.Rename(dir, tmp); rerr == nil {
		dir = tmp
	}
	err = errors.Join(err, os.RemoveAll(dir))
	c.log.Info("database deleted", "database", name)
	c.emit(Event{Type: "deleted", Name: db.Name()})
	return err
}

// Names lists the databases, sorted.
func (c *Catalog) Names() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]string, 0, len(c.dbs))
	for _, db := range c.dbs {
		out = append(out, db.Name())
	}
	sort.Strings(out)
	return out
}

// Close closes every database, letting queued writes finish.
func (c *Catalog) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for k, db := range c.dbs {
		errs = append(errs, db.Close())
		delete(c.dbs, k)
	}
	return errors.Join(errs...)
}
