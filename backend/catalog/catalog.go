// Package catalog manages the databases of a node: one directory per
// database under <data>/databases, each holding one SQLite file, and the
// databases found damaged (kept, not served, until re-seeded or deleted).
// See DESIGN.md.
package catalog

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/metrics"
	"github.com/rookerydb/rookery/backend/names"
	"github.com/rookerydb/rookery/backend/storage"
)

// ValidateName checks a database name (backend/names.Database).
func ValidateName(name string) error { return names.Database(name) }

// Catalog is the set of databases on this node.
type Catalog struct {
	root      string // the data directory
	dir       string // <root>/databases
	nodeTag   string
	integrity string
	log       *slog.Logger
	metrics   *metrics.Engine

	mu      sync.RWMutex
	dbs     map[string]*storage.DB // by lower-cased name
	damaged map[string]*Damage     // by lower-cased name; never also in dbs

	hooksMu sync.Mutex
	hooks   []func(Event)
}

// Event is a change to the set of databases.
type Event struct {
	Type string // "created", "deleted" or "damaged"
	Name string
	DB   *storage.DB // the database, for "created"
}

// OnChange registers fn to run after a database is created, deleted or
// found damaged. Databases opened (or found damaged) at start-up are
// reported through All and Damaged, not here.
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

// All returns every open database, sorted by name. Damaged databases are
// not among them (see Damaged).
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

// Config opens a catalog.
type Config struct {
	// DataDir is the node's data directory; databases live in
	// <DataDir>/databases.
	DataDir string
	NodeTag string
	// Integrity is the check every database gets when it is opened
	// (storage.IntegrityQuick when empty).
	Integrity string
	Logger    *slog.Logger
	Metrics   *metrics.Engine
}

// Open opens every database found under dir.
func Open(dir, nodeTag string, log *slog.Logger, m *metrics.Engine) (*Catalog, error) {
	return OpenWith(Config{DataDir: dir, NodeTag: nodeTag, Logger: log, Metrics: m})
}

// The folders of the data directory that are not databases.
const (
	trashDir   = "trash"   // deleted databases on their way out; emptied at start
	damagedDir = "damaged" // damaged copies moved aside by a re-seed; kept
	// damagedFile, in a database's directory, records a damage found while
	// it was served (a peer's acknowledgement beyond its last etag), which
	// opening the file cannot see again.
	damagedFile = "damaged.json"
	dbFile      = "documents.db"
)

// OpenWith opens every database found under cfg.DataDir/databases. A
// database that cannot be served (storage.DamageError, or any error opening
// it) is kept in the damaged state; the other databases open normally.
func OpenWith(cfg Config) (*Catalog, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	if err := storage.CheckIntegrityMode(cfg.Integrity); err != nil {
		return nil, err
	}
	c := &Catalog{root: cfg.DataDir, dir: filepath.Join(cfg.DataDir, "databases"), nodeTag: cfg.NodeTag, integrity: cfg.Integrity,
		log: cfg.Logger, metrics: cfg.Metrics, dbs: map[string]*storage.DB{}, damaged: map[string]*Damage{}}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, err
	}
	// Finish the deletes a crash interrupted. Nothing under databases/ is
	// ever judged by its name: a database may be called anything valid.
	if err := os.RemoveAll(filepath.Join(c.root, trashDir)); err != nil {
		c.log.Warn("could not empty the trash of deleted databases", "dir", filepath.Join(c.root, trashDir), "error", err)
	}
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		c.openDir(e.Name())
	}
	return c, nil
}

// openDir opens the database in databases/<key>, or records it damaged.
func (c *Catalog) openDir(key string) {
	dir := filepath.Join(c.dir, key)
	path := filepath.Join(dir, dbFile)
	if d, ok := readDamaged(dir); ok {
		d.Name, d.Dir = key, dir
		c.damaged[key] = d
		c.log.Error("database is damaged; not serving it", "database", key, "reason", d.Reason, "detail", d.Detail, "detected", d.Detected)
		return
	}
	_, statErr := os.Stat(path)
	if statErr != nil && !storage.HasMark(path) {
		return // not a database (an empty directory of an interrupted create)
	}
	db, err := storage.Open(path, storage.Options{Name: key, NodeTag: c.nodeTag, Integrity: c.integrity, Logger: c.log.With("database", key), Metrics: c.metrics})
	if err != nil {
		d := &Damage{Name: key, Reason: storage.ReasonUnreadable, Detail: err.Error(), Detected: time.Now().UTC(), Dir: dir}
		if de, ok := storage.AsDamage(err); ok {
			d.Reason, d.Detail = de.Reason, de.Detail
		}
		c.damaged[key] = d
		c.log.Error("database is damaged; not serving it (the node serves the others)", "database", key, "reason", d.Reason, "detail", d.Detail)
		return
	}
	if strings.ToLower(db.Name()) != key {
		// Not this directory's database (a directory copied or renamed by
		// hand, or a delete interrupted by a version before the trash):
		// serving it under either name would be a guess.
		db.Close()
		c.log.Warn("directory holds another database's file; not opened", "dir", dir, "holds", db.Name())
		return
	}
	c.dbs[key] = db
	c.log.Info("database opened", "database", db.Name(), "last_etag", db.LastEtag())
}

// Get returns an open database.
func (c *Catalog) Get(name string) (*storage.DB, error) {
	c.mu.RLock()
	db := c.dbs[strings.ToLower(name)]
	d := c.damaged[strings.ToLower(name)]
	c.mu.RUnlock()
	if d != nil {
		return nil, d.err()
	}
	if db == nil {
		return nil, &dberr.Error{Kind: dberr.DatabaseMissing, Database: name, Msg: "Database '" + name + "' does not exist."}
	}
	return db, nil
}

// Has tells whether the node has this database, served or damaged.
func (c *Catalog) Has(name string) bool {
	key := strings.ToLower(name)
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.dbs[key] != nil || c.damaged[key] != nil
}

// Separator checks an identity parts separator: "/" when empty, otherwise
// one character other than '|'.
func Separator(sep string) (string, error) { return names.Separator(sep) }

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
	if d := c.damaged[key]; d != nil {
		return nil, d.err()
	}
	dir := filepath.Join(c.dir, key)
	if _, err := os.Stat(filepath.Join(dir, dbFile)); err == nil {
		return nil, dberr.New(dberr.InvalidOperation, "Database '%s' cannot be created here: %s holds a database file this node did not open (see the log); move it away first", name, dir)
	}
	// Leftovers of an interrupted create hold no database file.
	if err := c.toTrash(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return c.openNew(key, name, opts)
}

// openNew creates the directory and an empty database in it; c.mu is held.
func (c *Catalog) openNew(key, name string, opts Options) (*storage.DB, error) {
	dir := filepath.Join(c.dir, key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	db, err := storage.Open(filepath.Join(dir, dbFile), storage.Options{Name: name, NodeTag: c.nodeTag, Separator: opts.Separator, Integrity: c.integrity, Logger: c.log.With("database", name), Metrics: c.metrics})
	if err != nil {
		_ = c.toTrash(dir)
		return nil, err
	}
	c.dbs[key] = db
	return db, nil
}

// toTrash moves a directory into <data>/trash under a random name and
// removes it there; a crash mid-removal leaves it in the trash, which the
// next start empties. The directory is gone from databases/ at once.
func (c *Catalog) toTrash(dir string) error {
	if _, err := os.Stat(dir); err != nil {
		return err
	}
	trash := filepath.Join(c.root, trashDir)
	if err := os.MkdirAll(trash, 0o755); err != nil {
		return err
	}
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(trash, hex.EncodeToString(rnd[:]))
	if err := os.Rename(dir, tmp); err != nil {
		return os.RemoveAll(dir) // cannot move it (another file system?): remove it in place
	}
	return os.RemoveAll(tmp)
}

// Delete closes a database and removes its files.
func (c *Catalog) Delete(name string) error {
	c.mu.Lock()
	key := strings.ToLower(name)
	db := c.dbs[key]
	damaged := c.damaged[key]
	if db == nil && damaged == nil {
		c.mu.Unlock()
		return &dberr.Error{Kind: dberr.DatabaseMissing, Database: name, Msg: "Database '" + name + "' does not exist."}
	}
	delete(c.dbs, key)
	delete(c.damaged, key)
	c.mu.Unlock()
	var err error
	if db != nil {
		err = db.Close()
		name = db.Name()
	}
	// Out of databases/ in one rename, so a crash mid-removal never leaves
	// a half database that opens at the next start.
	if rerr := c.toTrash(filepath.Join(c.dir, key)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	c.log.Info("database deleted", "database", name)
	c.emit(Event{Type: "deleted", Name: name})
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
