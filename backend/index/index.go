package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/names"
	"github.com/rookerydb/rookery/backend/storage"
)

// maxFields bounds the distinct fields (columns) one index may have.
const maxFields = 256

// field is one queryable field: the columns c<col>, x<col> of entries.
type field struct {
	name   string
	col    int
	search bool
	multi  bool
}

type collEtags struct {
	name        string // display name
	docs, tombs int64
}

type refKey struct{ src, ref string } // lower-cased source key, referenced collection

type refState struct {
	refName     string
	docs, tombs int64
	remapped    int64
	pend        refPending
}

// refPending is where the reference pass stopped inside one referenced
// document's referencing documents (zero: nowhere).
type refPending struct {
	tombstones bool
	key        string // the referenced document (lower-cased id)
	etag       int64  // its etag (or its tombstone's) when the pass started on it
	src        string // the last source re-mapped (sources go in key order)
}

// Index is one open index (see api.go).
type Index struct {
	def    Definition
	hash   string
	path   string
	db     *storage.DB
	opts   Options
	log    *slog.Logger
	mapper mapper

	connMu sync.RWMutex // write-held while Reset swaps the files
	w, r   *sql.DB

	// fresh is the database's last etag when a batch began with nothing
	// indexed yet, of any collection. A document version at or below it
	// existed before the index began, so it cannot have entries yet (an
	// earlier version, in this collection or another, was replaced before
	// the index began; a later one gets a higher etag): it is mapped
	// without looking for old entries. Used by the writer goroutine only; a
	// restart mid-build loses it (the rest of the build looks).
	fresh int64

	mu           sync.RWMutex
	fields       map[string]*field // by fieldKey
	byCol        []*field          // by col-1
	etags        map[string]collEtags
	refs         map[refKey]refState
	multiEntries bool
	entries      int64
	state        string // "" (as defined), StateError
	stateReason  string
	// pauseReason: indexing is paused on this node (Pause) and why; kept
	// in the file's meta ("paused"), so it outlives a restart.
	pauseReason  string
	errs         []IndexingError
	created      time.Time
	lastIndexing time.Time
	progress     chan struct{} // closed and replaced after every commit
	interest     map[string]bool

	// ctlMu serialises Reset, Pause, Resume and Close, which stop or
	// restart the writer.
	ctlMu   sync.Mutex
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	closed  atomic.Bool
	noHook  bool
	running bool

	mapAttempts, mapSuccesses, mapErrors          atomic.Int64
	refAttempts, refSuccesses, refErrors          atomic.Int64
	reduceAttempts, reduceSuccesses, reduceErrors atomic.Int64
	lastQueried                                   atomic.Int64
}

// Validate checks a definition (see api.go).
func Validate(d *Definition) error {
	if err := names.Index(d.Name); err != nil {
		return err
	}
	switch d.Type {
	case TypeAutoMap, TypeAutoMapReduce:
		_, err := newAutoMapper(d)
		return err
	case TypeJavaScriptMap, TypeJavaScriptMapReduce, "", "Map", "MapReduce":
		if len(d.Maps) == 0 {
			return defErr("Invalid", "index '%s' has no maps", d.Name)
		}
		if IsCSharp(d) {
			return defErr("NotSupported", "index '%s' is written in C# (LINQ), which Rookery does not run: it supports JavaScript indexes, e.g. map('Orders', o => ({ Company: o.Company }))", d.Name)
		}
		_, err := newJS(d, 5*time.Second)
		return err
	}
	return defErr("Invalid", "index '%s' has type '%s': AutoMap, AutoMapReduce, JavaScriptMap or JavaScriptMapReduce", d.Name, d.Type)
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 8192
	}
	if o.BatchTime <= 0 {
		o.BatchTime = time.Second
	}
	if o.MapTimeout <= 0 {
		o.MapTimeout = 5 * time.Second
	}
	if o.WritePause == 0 {
		o.WritePause = time.Millisecond
	}
	if o.MaxErrors <= 0 {
		o.MaxErrors = 500
	}
	if o.ErrorRate == 0 {
		o.ErrorRate = 0.5
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Open opens or creates an index (see api.go).
func Open(path string, def Definition, db *storage.DB, opts Options) (*Index, error) {
	return open(path, def, db, opts, false)
}

func open(path string, def Definition, db *storage.DB, opts Options, noHook bool) (*Index, error) {
	if err := Validate(&def); err != nil {
		return nil, err
	}
	opts.defaults()
	if s := def.Configuration["Indexing.MapTimeoutInSec"]; s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			opts.MapTimeout = time.Duration(n) * time.Second
		}
	}
	ix := &Index{
		def:    def,
		hash:   defHash(&def),
		path:   path,
		db:     db,
		opts:   opts,
		log:    opts.Logger.With("index", def.Name, "database", db.Name()),
		noHook: noHook,
		wake:   make(chan struct{}, 1),
	}
	if err := ix.buildMapper(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := ix.openFile(); err != nil {
		return nil, err
	}
	if !noHook {
		db.OnCommit(func(ch []storage.Change) { ix.notify(ch) })
	}
	ix.start()
	return ix, nil
}

func (ix *Index) buildMapper() error {
	if ix.def.IsAuto() {
		m, err := newAutoMapper(&ix.def)
		if err != nil {
			return err
		}
		ix.mapper = m
	} else {
		e, err := newJS(&ix.def, ix.opts.MapTimeout)
		if err != nil {
			return err
		}
		ix.mapper = newJSMapper(&ix.def, e)
	}
	ix.interest = map[string]bool{}
	for _, s := range ix.mapper.sources() {
		ix.interest[strings.ToLower(s)] = true
	}
	return nil
}

func removeFiles(path string) {
	for _, s := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(path + s)
	}
}

// checkExisting says why an existing file must be rebuilt ("" when it can
// be used).
func (ix *Index) checkExisting() string {
	w, err := sql.Open("sqlite", dsn(ix.path, false))
	if err != nil {
		return err.Error()
	}
	defer w.Close()
	w.SetMaxOpenConns(1)
	meta, err := readMeta(w)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	switch {
	case meta["format"] != formatVersion:
		return "built by another version of the index format"
	case meta["def_hash"] != ix.hash:
		return "built from another definition"
	case meta["database_id"] != ix.db.DatabaseID():
		return "built from another database"
	}
	if meta["clean"] != "1" {
		var res string
		if err := w.QueryRow(`PRAGMA quick_check`).Scan(&res); err != nil || res != "ok" {
			return fmt.Sprintf("damaged (quick_check: %s %v)", res, err)
		}
	}
	var maxEtag sql.NullInt64
	if err := w.QueryRow(`SELECT max(m) FROM (SELECT max(docs) AS m FROM etags UNION ALL SELECT max(tombstones) FROM etags UNION ALL SELECT max(docs) FROM ref_etags UNION ALL SELECT max(tombstones) FROM ref_etags)`).Scan(&maxEtag); err != nil {
		return "unreadable: " + err.Error()
	}
	if maxEtag.Int64 > ix.db.LastEtag() {
		return fmt.Sprintf("ahead of its database (index etag %d, database etag %d)", maxEtag.Int64, ix.db.LastEtag())
	}
	return ""
}

func (ix *Index) openFile() error {
	if fi, err := os.Stat(ix.path); err == nil && fi.Size() > 0 {
		if why := ix.checkExisting(); why != "" {
			ix.log.Warn("index file rebuilt from scratch", "file", ix.path, "reason", why)
			removeFiles(ix.path)
		}
	}
	w, err := sql.Open("sqlite", dsn(ix.path, false))
	if err != nil {
		return err
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if _, err := w.Exec(schema); err != nil {
		w.Close()
		return fmt.Errorf("index file %s: %w", ix.path, err)
	}
	r, err := sql.Open("sqlite", dsn(ix.path, true))
	if err != nil {
		w.Close()
		return err
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	ix.w, ix.r = w, r
	if err := ix.load(); err != nil {
		w.Close()
		r.Close()
		return fmt.Errorf("index file %s: %w", ix.path, err)
	}
	return nil
}

func (ix *Index) load() error {
	meta, err := readMeta(ix.w)
	if err != nil {
		return err
	}
	now := ix.opts.Now().UTC()
	if meta["format"] == "" {
		def := ix.Definition() // State and the like change under ix.mu
		created := def.Created
		if created.IsZero() {
			created = now
		}
		defJSON, _ := json.Marshal(def)
		for k, v := range map[string]string{"format": formatVersion, "def_hash": ix.hash, "database_id": ix.db.DatabaseID(),
			"created": created.UTC().Format(time.RFC3339Nano), "definition": string(defJSON)} {
			if _, err := ix.w.Exec(sqlSetMeta, k, v); err != nil {
				return err
			}
			meta[k] = v
		}
	}
	if _, err := ix.w.Exec(sqlSetMeta, "clean", "0"); err != nil {
		return err
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.created, _ = time.Parse(time.RFC3339Nano, meta["created"])
	ix.multiEntries = meta["multi_entries"] == "1"
	ix.state, ix.stateReason = "", ""
	if meta["error_state"] != "" {
		ix.state, ix.stateReason = StateError, meta["error_state"]
	}
	ix.pauseReason = meta["paused"]
	ix.fields = map[string]*field{}
	ix.byCol = nil
	rows, err := ix.w.Query(`SELECT name, col, search, multi FROM fields ORDER BY col`)
	if err != nil {
		return err
	}
	for rows.Next() {
		f := &field{}
		if err := rows.Scan(&f.name, &f.col, &f.search, &f.multi); err != nil {
			rows.Close()
			return err
		}
		ix.fields[fieldKey(f.name)] = f
		ix.byCol = append(ix.byCol, f)
	}
	rows.Close()
	ix.etags = map[string]collEtags{}
	for _, s := range ix.mapper.sources() {
		ix.etags[strings.ToLower(s)] = collEtags{name: s}
	}
	rows, err = ix.w.Query(`SELECT collection, docs, tombstones FROM etags`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var k string
		var e collEtags
		if err := rows.Scan(&k, &e.docs, &e.tombs); err != nil {
			rows.Close()
			return err
		}
		if cur, ok := ix.etags[k]; ok {
			e.name = cur.name
			ix.etags[k] = e
		}
	}
	rows.Close()
	ix.refs = map[refKey]refState{}
	rows, err = ix.w.Query(`SELECT src, ref, docs, tombstones, remapped, pend_tombstones, pend_key, pend_etag, pend_src FROM ref_etags`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var k refKey
		var s refState
		if err := rows.Scan(&k.src, &k.ref, &s.docs, &s.tombs, &s.remapped, &s.pend.tombstones, &s.pend.key, &s.pend.etag, &s.pend.src); err != nil {
			rows.Close()
			return err
		}
		s.refName = ix.collName(k.ref)
		ix.refs[k] = s
		ix.interest[k.ref] = true
	}
	rows.Close()
	ix.errs = nil
	rows, err = ix.w.Query(`SELECT at, doc, action, error FROM errors ORDER BY seq`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var at int64
		var e IndexingError
		if err := rows.Scan(&at, &e.Document, &e.Action, &e.Error); err != nil {
			rows.Close()
			return err
		}
		e.Timestamp = time.Unix(0, at).UTC()
		ix.errs = append(ix.errs, e)
	}
	rows.Close()
	if err := ix.w.QueryRow(`SELECT count(*) FROM entries`).Scan(&ix.entries); err != nil {
		return err
	}
	if err := ix.countValues(); err != nil {
		return err
	}
	ix.progress = make(chan struct{})
	// Auto indexes know their fields up front.
	if init := ix.mapper.initialFields(); len(init) > 0 {
		tx, err := ix.w.Begin()
		if err != nil {
			return err
		}
		var added []*field
		for _, af := range init {
			if _, ok := ix.fields[fieldKey(af.Name)]; ok {
				continue
			}
			f, err := ix.addField(tx, af.Name, af.Search, len(ix.byCol)+len(added)+1)
			if err != nil {
				_ = tx.Rollback()
				return err
			}
			added = append(added, f)
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		for _, f := range added {
			ix.fields[fieldKey(f.name)] = f
			ix.byCol = append(ix.byCol, f)
		}
	}
	return nil
}

// countValues fills value_counts from the entries once, for a file written
// before the table was kept (a new file has no entries: it only sets the
// mark).
func (ix *Index) countValues() error {
	var mark string
	err := ix.w.QueryRow(`SELECT value FROM meta WHERE key = 'value_counts'`).Scan(&mark)
	if err == nil && mark == "1" {
		return nil
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	tx, err := ix.w.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`DELETE FROM value_counts`); err != nil {
		return err
	}
	for _, f := range ix.byCol {
		if _, err := tx.Exec(fmt.Sprintf(`INSERT INTO value_counts(col, v, n) SELECT %d, c%d, count(*) FROM entries WHERE c%d IS NOT NULL GROUP BY c%d`,
			f.col, f.col, f.col, f.col)); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(sqlSetMeta, "value_counts", "1"); err != nil {
		return err
	}
	return tx.Commit()
}

// collName is the database's spelling of a collection (lower-cased key in).
func (ix *Index) collName(key string) string {
	if key == strings.ToLower(AllDocs) {
		return AllDocs
	}
	if n, ok := ix.db.CanonicalCollection(key); ok {
		return n
	}
	return key
}

// addField creates a field's columns (and full-text table) in tx.
func (ix *Index) addField(tx *sql.Tx, name string, search bool, col int) (*field, error) {
	if col > maxFields {
		return nil, fmt.Errorf("the index would have more than %d fields", maxFields)
	}
	stmts := []string{
		fmt.Sprintf(`ALTER TABLE entries ADD COLUMN c%d`, col),
		fmt.Sprintf(`ALTER TABLE entries ADD COLUMN x%d`, col),
		fmt.Sprintf(`CREATE INDEX entries_c%d ON entries(c%d)`, col, col),
	}
	if search {
		stmts = append(stmts, fmt.Sprintf(`CREATE VIRTUAL TABLE fts%d USING fts5(v, tokenize = "unicode61 remove_diacritics 0 tokenchars '-_'")`, col))
	}
	for _, s := range stmts {
		if _, err := tx.Exec(s); err != nil {
			return nil, err
		}
	}
	if _, err := tx.Exec(`INSERT INTO fields(name, col, search, multi) VALUES(?, ?, ?, 0)`, name, col, search); err != nil {
		return nil, err
	}
	return &field{name: name, col: col, search: search}, nil
}

// isSearch tells whether a field is full-text.
func (ix *Index) isSearch(name string) bool {
	if o, ok := ix.def.FieldOptions[name]; ok {
		return o.Indexing == "Search"
	}
	for _, f := range ix.def.Fields {
		if f.Name == name {
			return f.Search
		}
	}
	return false
}

func (ix *Index) start() {
	ix.stop = make(chan struct{})
	ix.done = make(chan struct{})
	ix.running = true
	go ix.run(ix.stop, ix.done)
	ix.Wake()
}

func (ix *Index) stopWorker() {
	if !ix.running {
		return
	}
	close(ix.stop)
	<-ix.done
	ix.running = false
}

// Wake tells the writer there may be new work.
func (ix *Index) Wake() {
	select {
	case ix.wake <- struct{}{}:
	default:
	}
}

// notify wakes the writer when a commit touched a collection it reads.
func (ix *Index) notify(ch []storage.Change) {
	if ix.closed.Load() {
		return
	}
	ix.mu.RLock()
	all := ix.interest[strings.ToLower(AllDocs)]
	hit := all
	for i := 0; i < len(ch) && !hit; i++ {
		hit = ix.interest[strings.ToLower(ch[i].Collection)]
	}
	ix.mu.RUnlock()
	if hit || len(ch) == 0 {
		ix.Wake()
	}
}

// Name is the index's name.
func (ix *Index) Name() string { return ix.def.Name }

// Definition is the index's definition.
func (ix *Index) Definition() Definition {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.def
}

// Path is the index's file.
func (ix *Index) Path() string { return ix.path }

// Close stops the writer and closes the file.
func (ix *Index) Close() error {
	if ix.closed.Swap(true) {
		return nil
	}
	ix.ctlMu.Lock()
	defer ix.ctlMu.Unlock()
	ix.stopWorker()
	ix.connMu.Lock()
	defer ix.connMu.Unlock()
	return ix.closeFile(true)
}

func (ix *Index) closeFile(clean bool) error {
	if clean {
		_, _ = ix.w.Exec(sqlSetMeta, "clean", "1")
		_, _ = ix.w.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	}
	return errors.Join(ix.r.Close(), ix.w.Close())
}

// Reset drops everything and indexes from scratch (a pause goes with the
// file).
func (ix *Index) Reset() error {
	ix.ctlMu.Lock()
	defer ix.ctlMu.Unlock()
	if ix.closed.Load() {
		return dberr.New(dberr.InvalidOperation, "index '%s' is closed", ix.def.Name)
	}
	ix.stopWorker()
	ix.connMu.Lock()
	_ = ix.closeFile(false)
	removeFiles(ix.path)
	err := ix.openFile()
	ix.connMu.Unlock()
	ix.mapAttempts.Store(0)
	ix.mapSuccesses.Store(0)
	ix.mapErrors.Store(0)
	if err != nil {
		return err
	}
	ix.start()
	return nil
}

// Pause stops this node's indexing of the index until Resume or Reset: the
// writer stops between two documents and the transaction in flight is
// rolled back, so the index stays as of its last commit (consistent, only
// behind). The reason is kept in the index file, shows in the stale
// reasons and Stats.Paused, and makes WaitNonStale fail at once.
func (ix *Index) Pause(reason string) error {
	ix.ctlMu.Lock()
	defer ix.ctlMu.Unlock()
	if ix.closed.Load() {
		return dberr.New(dberr.InvalidOperation, "index '%s' is closed", ix.def.Name)
	}
	if reason == "" {
		reason = "paused"
	}
	ix.mu.Lock()
	ix.pauseReason = reason
	ix.mu.Unlock()
	ix.stopWorker()
	ix.connMu.RLock()
	_, err := ix.w.Exec(sqlSetMeta, "paused", reason)
	ix.connMu.RUnlock()
	ix.start() // it idles while paused
	return err
}

// Resume ends a pause: indexing continues where it stopped. It tells
// whether the index was paused (one that was not is left alone).
func (ix *Index) Resume() (bool, error) {
	ix.ctlMu.Lock()
	defer ix.ctlMu.Unlock()
	if ix.closed.Load() {
		return false, dberr.New(dberr.InvalidOperation, "index '%s' is closed", ix.def.Name)
	}
	ix.mu.Lock()
	was := ix.pauseReason != ""
	ix.pauseReason = ""
	ix.mu.Unlock()
	if !was {
		return false, nil
	}
	ix.connMu.RLock()
	_, err := ix.w.Exec(`DELETE FROM meta WHERE key = 'paused'`)
	ix.connMu.RUnlock()
	ix.Wake()
	return true, err
}

// PauseReason is why indexing is paused on this node ("" when it is not).
func (ix *Index) PauseReason() string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.pauseReason
}

// MarkQueried records the last query time.
func (ix *Index) MarkQueried(t time.Time) { ix.lastQueried.Store(t.UnixNano()) }

// LastQueried is the last query time (zero when never queried since open).
func (ix *Index) LastQueried() time.Time {
	n := ix.lastQueried.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// Fields are the queryable field names.
func (ix *Index) Fields() []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]string, 0, len(ix.byCol))
	for _, f := range ix.byCol {
		out = append(out, f.name)
	}
	return out
}

// Errors are the recorded per-document errors, oldest first.
func (ix *Index) Errors() []IndexingError {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return append([]IndexingError(nil), ix.errs...)
}

// ClearErrors forgets the recorded errors.
func (ix *Index) ClearErrors() {
	ix.connMu.RLock()
	defer ix.connMu.RUnlock()
	ix.mu.Lock()
	ix.errs = nil
	ix.mu.Unlock()
	_, _ = ix.w.Exec(`DELETE FROM errors`)
}

// State is the index's state: the definition's, or StateError.
func (ix *Index) State() string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.state != "" {
		return ix.state
	}
	if ix.def.State == "" {
		return StateNormal
	}
	return ix.def.State
}

// setDefinitionState applies the cluster's State, Priority, LockMode and
// Superseded in place (they do not change the contents).
func (ix *Index) setDefinitionState(d Definition) {
	ix.mu.Lock()
	ix.def.State, ix.def.Priority, ix.def.LockMode, ix.def.Superseded = d.State, d.Priority, d.LockMode, d.Superseded
	ix.mu.Unlock()
	ix.Wake()
}

func (ix *Index) paused() bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.state == StateError || ix.def.State == StateDisabled || ix.pauseReason != ""
}

// LastIndexedEtag is the highest etag processed in any source collection.
func (ix *Index) LastIndexedEtag() int64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var m int64
	for _, e := range ix.etags {
		m = max(m, e.docs, e.tombs)
	}
	return m
}

// ResultEtag changes whenever the index's answers can change.
func (ix *Index) ResultEtag() int64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	h := fnv.New64a()
	h.Write([]byte(ix.hash))
	keys := make([]string, 0, len(ix.etags))
	for k := range ix.etags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e := ix.etags[k]
		fmt.Fprintf(h, "|%s:%d:%d", k, e.docs, e.tombs)
	}
	rk := make([]refKey, 0, len(ix.refs))
	for k := range ix.refs {
		rk = append(rk, k)
	}
	sort.Slice(rk, func(i, j int) bool {
		if rk[i].src != rk[j].src {
			return rk[i].src < rk[j].src
		}
		return rk[i].ref < rk[j].ref
	})
	for _, k := range rk {
		s := ix.refs[k]
		fmt.Fprintf(h, "|%s>%s:%d:%d:%d", k.src, k.ref, s.docs, s.tombs, s.remapped)
	}
	fmt.Fprintf(h, "|%d", ix.entries)
	return int64(h.Sum64())
}

// Stale tells whether the index is stale and why.
func (ix *Index) Stale(ctx context.Context) (bool, []string) {
	r := ix.staleReasons(ctx, 0)
	return len(r) > 0, r
}

func (ix *Index) staleReasons(ctx context.Context, cutoff int64) []string {
	ix.mu.RLock()
	state, reason, defState, pause := ix.state, ix.stateReason, ix.def.State, ix.pauseReason
	etags := make(map[string]collEtags, len(ix.etags))
	for k, v := range ix.etags {
		etags[k] = v
	}
	refs := make(map[refKey]refState, len(ix.refs))
	for k, v := range ix.refs {
		refs[k] = v
	}
	ix.mu.RUnlock()
	var out []string
	if state == StateError {
		out = append(out, "The index is in error state: "+reason)
	}
	if defState == StateDisabled {
		out = append(out, "The index is disabled")
	}
	if pause != "" {
		out = append(out, "Indexing is paused on this node: "+pause)
	}
	keys := make([]string, 0, len(etags))
	for k := range etags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e := etags[k]
		if e.name == AllDocs {
			last := ix.db.LastEtag()
			if cutoff > 0 {
				last = min(last, cutoff)
			}
			if e.docs < last {
				out = append(out, fmt.Sprintf("There are still some documents to process from all collections (processed up to etag %d of %d)", e.docs, last))
			}
			continue
		}
		out = append(out, ix.pending(ctx, "documents", e.name, e.docs, e.tombs, cutoff)...)
	}
	rk := make([]refKey, 0, len(refs))
	for k := range refs {
		rk = append(rk, k)
	}
	sort.Slice(rk, func(i, j int) bool { return rk[i].ref+"\x00"+rk[i].src < rk[j].ref+"\x00"+rk[j].src })
	for _, k := range rk {
		s := refs[k]
		out = append(out, ix.pending(ctx, "document references", s.refName, s.docs, s.tombs, cutoff)...)
	}
	return out
}

// pending checks one collection's documents and tombstones against
// watermarks (up to cutoff when > 0).
func (ix *Index) pending(ctx context.Context, what, coll string, docs, tombs, cutoff int64) []string {
	var d, t bool
	if cutoff > 0 {
		var err error
		if d, t, err = ix.db.CollectionPending(ctx, coll, docs, tombs, cutoff); err != nil {
			return []string{fmt.Sprintf("Could not read the etags of collection '%s': %v", coll, err)}
		}
	} else {
		lastDoc, lastTomb, err := ix.db.CollectionEtags(ctx, coll)
		if err != nil {
			return []string{fmt.Sprintf("Could not read the etags of collection '%s': %v", coll, err)}
		}
		d, t = docs < lastDoc, tombs < lastTomb
	}
	var out []string
	if d {
		out = append(out, fmt.Sprintf("There are still some %s to process from collection '%s'", what, coll))
	}
	if t {
		tw := "tombstones"
		if what != "documents" {
			tw = "tombstone references"
		}
		out = append(out, fmt.Sprintf("There are still some %s to process from collection '%s'", tw, coll))
	}
	return out
}

// WaitNonStale waits until everything up to cutoffEtag is processed.
func (ix *Index) WaitNonStale(ctx context.Context, cutoffEtag int64) error {
	for {
		ix.mu.RLock()
		ch := ix.progress
		ix.mu.RUnlock()
		reasons := ix.staleReasons(ctx, cutoffEtag)
		if len(reasons) == 0 {
			return nil
		}
		if ix.closed.Load() {
			return dberr.New(dberr.InvalidOperation, "index '%s' is closed", ix.def.Name)
		}
		if ix.paused() {
			return dberr.New(dberr.InvalidOperation, "index '%s' cannot become non-stale: %s", ix.def.Name, strings.Join(reasons, "; "))
		}
		ix.Wake()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stats returns the index's figures.
func (ix *Index) Stats() Stats {
	ctx := context.Background()
	stale, reasons := ix.Stale(ctx)
	ix.mu.RLock()
	s := Stats{
		Name:                  ix.def.Name,
		Type:                  ix.def.Type,
		EntriesCount:          ix.entries,
		Collections:           map[string]CollectionStats{},
		MapAttempts:           ix.mapAttempts.Load(),
		MapSuccesses:          ix.mapSuccesses.Load(),
		MapErrors:             ix.mapErrors.Load(),
		MapReferenceAttempts:  ix.refAttempts.Load(),
		MapReferenceSuccesses: ix.refSuccesses.Load(),
		MapReferenceErrors:    ix.refErrors.Load(),
		ReduceAttempts:        ix.reduceAttempts.Load(),
		ReduceSuccesses:       ix.reduceSuccesses.Load(),
		ReduceErrors:          ix.reduceErrors.Load(),
		ErrorsCount:           len(ix.errs),
		IsStale:               stale,
		StaleReasons:          reasons,
		CreatedTimestamp:      ix.created,
		LastIndexingTime:      ix.lastIndexing,
		LastQueryingTime:      ix.LastQueried(),
		Paused:                ix.pauseReason,
	}
	etags := make([]collEtags, 0, len(ix.etags))
	for _, e := range ix.etags {
		etags = append(etags, e)
	}
	for k, r := range ix.refs {
		s.References = append(s.References, ReferenceStats{Source: ix.etags[k.src].name, Referenced: r.refName,
			LastReferencedEtag: r.docs, LastReferencedTombstoneEtag: r.tombs, Remapped: r.remapped})
	}
	ix.mu.RUnlock()
	s.State = ix.State()
	sort.Slice(s.References, func(i, j int) bool {
		return s.References[i].Source+"\x00"+s.References[i].Referenced < s.References[j].Source+"\x00"+s.References[j].Referenced
	})
	for _, e := range etags {
		cs := CollectionStats{LastProcessedDocumentEtag: e.docs, LastProcessedTombstoneEtag: e.tombs}
		if e.name != AllDocs {
			cs.DocumentLag, _ = ix.db.CountCollectionAfter(ctx, e.name, e.docs)
			cs.TombstoneLag, _ = ix.countTombstonesAfter(ctx, e.name, e.tombs)
		} else {
			cs.DocumentLag, _ = ix.db.CountChangesAfter(ctx, e.docs)
		}
		s.Collections[e.name] = cs
	}
	ix.connMu.RLock()
	_ = ix.r.QueryRowContext(ctx, `SELECT count(*) FROM refs`).Scan(&s.ReferencesHeld)
	ix.connMu.RUnlock()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if fi, err := os.Stat(ix.path + suffix); err == nil {
			s.SizeOnDisk += fi.Size()
		}
	}
	return s
}

func (ix *Index) countTombstonesAfter(ctx context.Context, coll string, after int64) (int64, error) {
	var n int64
	err := ix.db.ScanTombstones(ctx, coll, after, 1<<30, func(*storage.Tombstone) error { n++; return nil })
	return n, err
}
