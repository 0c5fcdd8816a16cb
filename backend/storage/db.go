// Package storage keeps one database in one SQLite file (modernc.org/sqlite,
// WAL): documents with their etags and change vectors, tombstones,
// per-collection counts and identity counters. All writes go through a single
// writer goroutine that merges concurrent requests into one transaction
// (group commit); a request is acknowledged only after that transaction is
// durably committed. Reads use a separate pool of connections.
//
// See DESIGN.md for the reasoning.
package storage

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/metrics"
)

// ErrClosed is returned by writes to a closed database.
var ErrClosed = &dberr.Error{Kind: dberr.Unavailable, Msg: "the database is closed"}

// MaxIDBytes is the longest document id, in UTF-8 bytes.
const MaxIDBytes = 512

// maxMerge bounds how many write requests one transaction merges.
const maxMerge = 512

// Options configure Open.
type Options struct {
	// Name is the database name (kept in the file's meta table).
	Name string
	// NodeTag is the tag of the node that owns this copy, e.g. "A".
	NodeTag string
	// Separator is the identity parts separator for new databases; "/" when empty.
	Separator string
	// Logger for this database; slog.Default() when nil.
	Logger *slog.Logger
	// ReadConns is the size of the read pool; 8 when zero.
	ReadConns int
	// Metrics receives the database's figures; a private set when nil.
	Metrics *metrics.Engine
	// Integrity is the check an existing file gets at open: IntegrityQuick
	// (the default when empty), IntegrityFull or IntegrityOff.
	Integrity string
}

// DB is one open database.
type DB struct {
	name    string
	path    string
	nodeTag string
	dbid    string
	sep     string
	log     *slog.Logger
	metrics *metrics.Engine

	writer *sql.DB
	reader *sql.DB
	wstmts map[string]*sql.Stmt // prepared once on the writer connection
	rget   *sql.Stmt            // point read on the read pool
	rscan  *sql.Stmt            // ChangesAfter's read on the read pool
	rrepl  *sql.Stmt            // ScanReplicationAfter's read (documents and extensions)
	rcoll  *sql.Stmt            // ScanCollection's read on the read pool

	reqs    chan *writeReq
	closeMu sync.RWMutex
	closed  bool
	done    chan struct{}

	// Writer-owned state, published under mu after each commit.
	mu          sync.RWMutex
	lastEtag    int64
	cv          changevector.Vector
	cvText      string
	collections map[string]*Collection           // by lower-cased name
	idNumbers   map[string]map[string]*IDNumbers // by prefix, then suffix
	lastWrite   time.Time
	writes      atomic.Int64 // documents written since open
	reads       atomic.Int64 // documents read since open (all readers)
	// conflicted is set once the file holds a conflict (a cheap guard for
	// loads of missing ids).
	conflicted atomic.Bool
	// attach: whether the file may hold attachment references (attachments.go).
	attach attachmentState
	// hasCounters is set once the file holds a counter (counters.go).
	hasCounters atomic.Bool

	hooksMu   sync.RWMutex
	hooks     []func([]Change)
	itemHooks []itemHook

	resolverMu sync.RWMutex
	resolver   Resolver

	rev revisionsState // revisions.go

	// The etag mark (damage.go), written by the writer goroutine.
	mark       *os.File
	markBuf    []byte
	markFailed bool

	ckpt *checkpointer // checkpoint.go
}

// Collection is a collection's name and counts.
type Collection struct {
	Name       string
	Docs       int64
	Tombstones int64
}

// Change is one committed document change.
type Change struct {
	Type         string // "Put" or "Delete"
	ID           string
	Collection   string
	ChangeVector string
	Etag         int64
}

// ItemChange is one committed counter or time-series change: what the
// Changes API sends as CounterChange and TimeSeriesChange. They are
// recorded only while an OnItemCommit hook wants them.
type ItemChange struct {
	Kind ItemKind // KindCounters or KindTimeSeries
	// Type: counters "Put" (a counter that was not live), "Increment",
	// "Delete"; time series "Put" (entries appended), "Delete" (a range).
	Type         string
	DocID        string
	Collection   string // the document's, "" when it is missing
	Name         string // the counter's or the series' name
	ChangeVector string
	Value        int64 // counters: the total after the change (0 once deleted)
	From, To     int64 // time series: the range changed, unix milliseconds (TSMin/TSMax: open)
}

type itemHook struct {
	wanted func() bool
	fn     func([]ItemChange)
}

type writeReq struct {
	ctx   context.Context
	fn    func(*Tx) error
	done  chan error
	alone bool // a transaction of its own (SubmitAlone)
}

func dsn(path string, readOnly bool) string {
	q := "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(0)"
	if readOnly {
		q += "&_pragma=query_only(1)"
	} else {
		q += "&_txlock=immediate&_pragma=wal_autocheckpoint(" + strconv.Itoa(writerAutoCheckpoint) + ")&_pragma=cache_size(-" + strconv.Itoa(writerCacheKiB) + ")"
	}
	return "file:" + path + q
}

// Open opens (creating if needed) the database file at path. A file that
// must not be served (see damage.go) gets a *DamageError saying why.
func Open(path string, opts Options) (*DB, error) {
	if opts.NodeTag == "" {
		opts.NodeTag = "A"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 8
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.New()
	}
	if err := CheckIntegrityMode(opts.Integrity); err != nil {
		return nil, err
	}
	if opts.Integrity == "" {
		opts.Integrity = IntegrityQuick
	}
	marked := HasMark(path)
	if err := checkHeader(path, marked); err != nil {
		return nil, err
	}
	existed := false
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		existed = true
	}
	// Keep the write-ahead log as it was found until the file is known to
	// be sound: SQLite folds its valid part into the file and deletes it
	// when the last connection closes, so the evidence of a damaged log
	// would be gone.
	walCopy := keepWAL(path, opts.Logger)
	db, err := open(path, opts, existed)
	if err != nil {
		if _, ok := AsDamage(err); !ok && existed {
			reason := ReasonUnreadable
			if isCorrupt(err) {
				// The file opened as a database, but a page it read while
				// opening (the schema, the counts) is damaged: what the
				// integrity check would have said.
				reason = ReasonIntegrity
			}
			err = &DamageError{Reason: reason, Detail: fmt.Sprintf("SQLite cannot open %s: %v", filepath.Base(path), rootCause(err))}
		}
		if d, ok := AsDamage(err); ok && walCopy != "" {
			d.Detail += "; the write-ahead log as found is kept beside it as " + filepath.Base(walCopy)
		}
		return nil, err
	}
	if walCopy != "" {
		_ = os.Remove(walCopy)
	}
	go db.writeLoop()
	return db, nil
}

// rootCause strips the wrapping (which names the file's path) off err.
// isCorrupt tells whether err is SQLite's SQLITE_CORRUPT ("database disk
// image is malformed").
func isCorrupt(err error) bool {
	return strings.Contains(err.Error(), "database disk image is malformed")
}

func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

// maxKeptWAL bounds the copy keepWAL makes.
const maxKeptWAL = 64 << 20

// WALCopySuffix names the copy of a write-ahead log found at open.
const WALCopySuffix = "-wal.found"

// keepWAL copies a non-empty write-ahead log (one left by a crash) aside
// and returns the copy's path, or "".
func keepWAL(path string, log *slog.Logger) string {
	n := walSize(path)
	if n == 0 {
		return ""
	}
	if n > maxKeptWAL {
		log.Info("write-ahead log too large to keep a copy of while the database opens", "bytes", n)
		return ""
	}
	src, err := os.Open(path + "-wal")
	if err != nil {
		return ""
	}
	defer src.Close()
	dst := path + WALCopySuffix
	out, err := os.Create(dst)
	if err != nil {
		return ""
	}
	_, err = io.Copy(out, src)
	if err = errors.Join(err, out.Close()); err != nil {
		_ = os.Remove(dst)
		return ""
	}
	return dst
}

func open(path string, opts Options, existed bool) (*DB, error) {
	w, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if _, err := w.Exec(Schema); err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(opts.ReadConns)
	r.SetMaxIdleConns(opts.ReadConns)
	db := &DB{
		path:        path,
		nodeTag:     opts.NodeTag,
		log:         opts.Logger,
		metrics:     opts.Metrics,
		writer:      w,
		reader:      r,
		reqs:        make(chan *writeReq, 1024),
		done:        make(chan struct{}),
		collections: map[string]*Collection{},
		idNumbers:   map[string]map[string]*IDNumbers{},
	}
	fail := func(err error) (*DB, error) {
		if db.mark != nil {
			db.mark.Close()
		}
		r.Close()
		w.Close()
		if _, ok := AsDamage(err); ok {
			return nil, err
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if existed && opts.Integrity != IntegrityOff {
		if err := db.integrityCheck(opts.Integrity); err != nil {
			return fail(err)
		}
	}
	if err := db.load(opts); err != nil {
		return fail(err)
	}
	if err := db.checkMark(); err != nil {
		return fail(err)
	}
	if err := db.prepare(); err != nil {
		return fail(err)
	}
	if db.ckpt, err = startCheckpointer(path); err != nil {
		return fail(err)
	}
	return db, nil
}

func (db *DB) load(opts Options) error {
	meta := map[string]string{}
	rows, err := db.writer.Query(`SELECT key, value FROM meta`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return err
		}
		meta[k] = v
	}
	rows.Close()
	if meta["database_id"] == "" {
		if m, _, ok, _ := readMark(db.path); ok {
			// Everything, the database id included, was in a lost WAL.
			return &DamageError{Reason: ReasonEtagRegression, Detail: fmt.Sprintf("the file holds no data at all but this node acknowledged writes up to etag %d to database id %s here: the writes with etags 1 to %d are missing (a truncated, garbled or deleted write-ahead log)", m.etag, m.dbid, m.etag)}
		}
		id := uuid.New()
		meta["database_id"] = base64.RawStdEncoding.EncodeToString(id[:])
		meta["name"] = opts.Name
		sep := opts.Separator
		if sep == "" {
			sep = "/"
		}
		meta["separator"] = sep
		meta["created"] = time.Now().UTC().Format(time.RFC3339Nano)
		for _, k := range []string{"database_id", "name", "separator", "created"} {
			if _, err := db.writer.Exec(`INSERT INTO meta(key, value) VALUES(?, ?)`, k, meta[k]); err != nil {
				return err
			}
		}
	}
	db.dbid = meta["database_id"]
	db.name = meta["name"]
	db.sep = meta["separator"]
	if db.sep == "" {
		db.sep = "/"
	}
	if s := meta["change_vector"]; s != "" {
		v, err := changevector.ParseStored(s)
		if err != nil {
			return fmt.Errorf("stored database change vector: %w", err)
		}
		db.cv = v
		db.cvText = s
	}
	if s := meta["last_etag"]; s != "" {
		db.lastEtag, _ = strconv.ParseInt(s, 10, 64)
	}
	// The etag counter never goes below what the file holds, nor below this
	// node's own entry in the database vector.
	var maxEtag sql.NullInt64
	if err := db.writer.QueryRow(`SELECT max(m) FROM (SELECT max(etag) AS m FROM docs UNION ALL SELECT max(etag) FROM tombstones UNION ALL SELECT max(etag) FROM conflicts UNION ALL SELECT max(etag) FROM revisions UNION ALL SELECT max(etag) FROM counters UNION ALL SELECT max(etag) FROM ts_entries UNION ALL SELECT max(etag) FROM ts_deletes)`).Scan(&maxEtag); err != nil {
		return err
	}
	if maxEtag.Int64 > db.lastEtag {
		db.lastEtag = maxEtag.Int64
	}
	if own := db.cv.Get(db.dbid); own > db.lastEtag {
		db.lastEtag = own
	}
	if s := meta["last_write"]; s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			db.lastWrite = time.Unix(0, n).UTC()
		}
	}
	irows, err := db.writer.Query(`SELECT key, prefix, suffix, docs, max_n FROM id_numbers`)
	if err != nil {
		return err
	}
	for irows.Next() {
		var key string
		var r IDNumbers
		if err := irows.Scan(&key, &r.Prefix, &r.Suffix, &r.Docs, &r.MaxN); err != nil {
			irows.Close()
			return err
		}
		*db.idShape(r.Prefix, r.Suffix) = r
	}
	irows.Close()
	var any int
	if err := db.writer.QueryRow(`SELECT count(*) FROM (SELECT 1 FROM conflicts LIMIT 1)`).Scan(&any); err != nil {
		return err
	}
	db.conflicted.Store(any > 0)
	if err := db.writer.QueryRow(`SELECT count(*) FROM (SELECT 1 FROM revisions LIMIT 1)`).Scan(&any); err != nil {
		return err
	}
	db.rev.has.Store(any > 0)
	if err := db.loadCounters(); err != nil {
		return err
	}
	crows, err := db.writer.Query(`SELECT key, name, docs, tombstones FROM collections`)
	if err != nil {
		return err
	}
	defer crows.Close()
	for crows.Next() {
		var key string
		c := &Collection{}
		if err := crows.Scan(&key, &c.Name, &c.Docs, &c.Tombstones); err != nil {
			return err
		}
		db.collections[key] = c
	}
	return crows.Err()
}

// prepare compiles the hot statements once: SQLite's parser would
// otherwise run on every call.
func (db *DB) prepare() error {
	db.wstmts = map[string]*sql.Stmt{}
	for _, q := range writerStatements {
		st, err := db.writer.Prepare(q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		db.wstmts[q] = st
	}
	var err error
	if db.rget, err = db.reader.Prepare(sqlGetDoc); err != nil {
		return err
	}
	if db.rscan, err = db.reader.Prepare(sqlChangesAfter); err != nil {
		return err
	}
	if db.rrepl, err = db.reader.Prepare(sqlReplicationAfter); err != nil {
		return err
	}
	db.rcoll, err = db.reader.Prepare(sqlCollectionAfter)
	return err
}

// Name is the database name.
func (db *DB) Name() string { return db.name }

// Path is the SQLite file.
func (db *DB) Path() string { return db.path }

// NodeTag is the tag of the node that owns this copy.
func (db *DB) NodeTag() string { return db.nodeTag }

// DatabaseID is this copy's 22-character base64 id.
func (db *DB) DatabaseID() string { return db.dbid }

// Separator is the identity parts separator ("/" by default).
func (db *DB) Separator() string { return db.sep }

// Metrics is the collector set this database reports to.
func (db *DB) Metrics() *metrics.Engine { return db.metrics }

// OnCommit registers fn to be called, on the writer goroutine, with the
// changes of every committed transaction (also of one that only stored
// conflict versions, with no document change). fn must not block.
func (db *DB) OnCommit(fn func([]Change)) {
	db.hooksMu.Lock()
	db.hooks = append(db.hooks, fn)
	db.hooksMu.Unlock()
}

// OnItemCommit registers fn to be called, on the writer goroutine after a
// commit (after the OnCommit hooks), with the transaction's counter and
// time-series changes, when it has any. They are recorded only when some
// hook's wanted returns true as the transaction begins, so a database
// nobody watches pays nothing for them. Neither function may block; fn must
// not modify the slice.
func (db *DB) OnItemCommit(wanted func() bool, fn func([]ItemChange)) {
	db.hooksMu.Lock()
	db.itemHooks = append(db.itemHooks, itemHook{wanted: wanted, fn: fn})
	db.hooksMu.Unlock()
}

// itemsWanted asks the OnItemCommit hooks whether to record item changes
// (no lock held while asking).
func (db *DB) itemsWanted() bool {
	for _, h := range db.itemHooksCopy() {
		if h.wanted() {
			return true
		}
	}
	return false
}

func (db *DB) itemHooksCopy() []itemHook {
	db.hooksMu.RLock()
	defer db.hooksMu.RUnlock()
	return db.itemHooks[:len(db.itemHooks):len(db.itemHooks)]
}

// Write runs fn inside a merged write transaction and returns once that
// transaction has committed durably (or fn's error). fn's changes are all or
// nothing: when fn returns an error they are rolled back, and other merged
// requests are unaffected. fn may run on another goroutine and must not keep
// tx after it returns.
func (db *DB) Write(ctx context.Context, fn func(tx *Tx) error) error {
	return <-db.Submit(ctx, fn)
}

// Submit queues fn as Write does but returns at once; the channel yields
// what Write would return. Requests run in the order they were submitted,
// so a caller can keep several in flight (they may share a commit).
func (db *DB) Submit(ctx context.Context, fn func(tx *Tx) error) <-chan error {
	return db.submit(&writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)})
}

// SubmitAlone is Submit for a large request that gains nothing from sharing
// a commit (a bulk insert's batch): it runs in a transaction of its own,
// never merged with others.
func (db *DB) SubmitAlone(ctx context.Context, fn func(tx *Tx) error) <-chan error {
	return db.submit(&writeReq{ctx: ctx, fn: fn, done: make(chan error, 1), alone: true})
}

func (db *DB) submit(req *writeReq) <-chan error {
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		req.done <- ErrClosed
		return req.done
	}
	select {
	case db.reqs <- req:
	case <-req.ctx.Done():
		req.done <- req.ctx.Err()
	}
	// Once queued the request always completes: it either runs, or is
	// skipped because its context ended before it started.
	return req.done
}

// Close finishes the queued writes and closes the file.
func (db *DB) Close() error {
	db.closeMu.Lock()
	if db.closed {
		db.closeMu.Unlock()
		<-db.done
		return nil
	}
	db.closed = true
	close(db.reqs)
	db.closeMu.Unlock()
	<-db.done
	_ = db.ckpt.close()
	// Fold the WAL back into the main file so a closed database is one file.
	_, _ = db.writer.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	for _, st := range db.wstmts {
		st.Close()
	}
	if db.rget != nil {
		db.rget.Close()
	}
	if db.rscan != nil {
		db.rscan.Close()
	}
	if db.rrepl != nil {
		db.rrepl.Close()
	}
	if db.rcoll != nil {
		db.rcoll.Close()
	}
	err := errors.Join(db.reader.Close(), db.writer.Close())
	if db.mark != nil {
		err = errors.Join(err, db.mark.Close())
	}
	return err
}

func (db *DB) writeLoop() {
	defer close(db.done)
	batch := make([]*writeReq, 0, maxMerge)
	var next *writeReq // an alone request met while merging: the next batch
	for {
		req := next
		next = nil
		if req == nil {
			r, ok := <-db.reqs
			if !ok {
				break
			}
			req = r
		}
		batch = append(batch[:0], req)
	drain:
		for !req.alone && len(batch) < maxMerge {
			select {
			case r, ok := <-db.reqs:
				if !ok {
					break drain
				}
				if r.alone {
					next = r
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		db.runBatch(batch)
		for i := range batch {
			batch[i] = nil
		}
	}
}

func (db *DB) runBatch(batch []*writeReq) {
	start := time.Now()
	errs := make([]error, len(batch))
	fail := func(err error) {
		for i := range batch {
			if errs[i] == nil {
				errs[i] = err
			}
			batch[i].done <- errs[i]
		}
		db.metrics.Transactions.WithLabelValues("failed").Inc()
	}
	sqlTx, err := db.writer.Begin()
	if err != nil {
		fail(fmt.Errorf("begin transaction: %w", err))
		return
	}
	wantItems := db.itemsWanted() // before mu: the mutexes are never nested
	db.mu.RLock()
	tx := &Tx{
		db:       db,
		tx:       sqlTx,
		now:      db.clockNow(),
		lastEtag: db.lastEtag,
		cv:       db.cv,
		cvText:   db.cvText,
		deltas:   map[string]*Collection{},
		stmts:    map[string]*sql.Stmt{},
		idDeltas: map[string]*IDNumbers{},
	}
	tx.wantItems = wantItems
	for _, c := range db.collections {
		tx.tombstones += c.Tombstones
	}
	db.mu.RUnlock()
	startEtag, startCV := tx.lastEtag, tx.cvText
	// A request alone in its transaction needs no savepoint: when it
	// fails, the whole transaction is rolled back.
	alone := len(batch) == 1
	ok := 0
	for i, req := range batch {
		if err := req.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if errs[i] = tx.run(req.fn, !alone); errs[i] == nil {
			ok++
		}
	}
	if alone && errs[0] != nil {
		_ = sqlTx.Rollback()
		batch[0].done <- errs[0]
		db.metrics.Transactions.WithLabelValues("rolled_back").Inc()
		return
	}
	if ok > 0 {
		if err := tx.persist(startEtag, startCV); err != nil {
			_ = sqlTx.Rollback()
			fail(fmt.Errorf("write transaction: %w", err))
			return
		}
	}
	if err := sqlTx.Commit(); err != nil {
		fail(fmt.Errorf("commit: %w", err))
		return
	}
	// Durable: record the etag mark, publish the new state, then
	// acknowledge.
	if tx.lastEtag != startEtag {
		db.writeMark(tx.lastEtag)
	}
	db.ckpt.notify()
	db.mu.Lock()
	db.lastEtag = tx.lastEtag
	db.cv = tx.cv
	db.cvText = tx.cvText
	for key, d := range tx.deltas {
		c := db.collections[key]
		if c == nil {
			c = &Collection{Name: d.Name}
			db.collections[key] = c
		}
		c.Docs += d.Docs
		c.Tombstones += d.Tombstones
	}
	for _, d := range tx.idDeltas {
		v := db.idShape(d.Prefix, d.Suffix)
		v.Docs += d.Docs
		v.MaxN = max(v.MaxN, d.MaxN)
	}
	if len(tx.changes) > 0 {
		db.lastWrite = tx.now
	}
	db.mu.Unlock()
	db.writes.Add(int64(len(tx.changes)))
	if tx.anyConflicts {
		db.conflicted.Store(true)
	}
	if tx.anyCounters {
		db.hasCounters.Store(true)
	}
	db.metrics.TxMergeSize.Observe(float64(len(batch)))
	db.metrics.TxCommitSeconds.Observe(time.Since(start).Seconds())
	db.metrics.Transactions.WithLabelValues("committed").Inc()
	if len(tx.changes) > 0 {
		puts, dels := 0, 0
		for _, c := range tx.changes {
			if c.Type == "Put" {
				puts++
			} else {
				dels++
			}
		}
		if puts > 0 {
			db.metrics.DocumentsWritten.WithLabelValues(db.name, "put").Add(float64(puts))
		}
		if dels > 0 {
			db.metrics.DocumentsWritten.WithLabelValues(db.name, "delete").Add(float64(dels))
		}
	}
	for i := range batch {
		batch[i].done <- errs[i]
	}
	// A transaction that only stored conflict versions or extension items
	// (revisions, counters, time series…: anything that took an etag) has
	// no document change, but watchers (the studio, replication senders:
	// those items travel too) still need to hear about it.
	if tx.revWritten {
		db.rev.has.Store(true)
	}
	if len(tx.changes) > 0 || tx.anyConflicts || tx.lastEtag != startEtag {
		db.hooksMu.RLock()
		for _, h := range db.hooks {
			h(tx.changes)
		}
		db.hooksMu.RUnlock()
	}
	if len(tx.items) > 0 {
		for _, h := range db.itemHooksCopy() {
			h.fn(tx.items)
		}
	}
}

// Stats is a snapshot of a database's counters.
type Stats struct {
	Name         string
	DatabaseID   string
	LastEtag     int64
	ChangeVector string
	Documents    int64
	Tombstones   int64
	Collections  []Collection
	SizeOnDisk   int64
	LastWrite    time.Time
}

// Stats returns the current counters without touching the documents.
func (db *DB) Stats() Stats {
	db.mu.RLock()
	s := Stats{
		Name:         db.name,
		DatabaseID:   db.dbid,
		LastEtag:     db.lastEtag,
		ChangeVector: db.cvText,
		LastWrite:    db.lastWrite,
	}
	for _, c := range db.collections {
		if c.Docs == 0 && c.Tombstones == 0 {
			continue
		}
		s.Documents += c.Docs
		s.Tombstones += c.Tombstones
		s.Collections = append(s.Collections, *c)
	}
	db.mu.RUnlock()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if fi, err := os.Stat(db.path + suffix); err == nil {
			s.SizeOnDisk += fi.Size()
		}
	}
	return s
}

// Writes is how many documents were written (put or deleted) since Open.
func (db *DB) Writes() int64 { return db.writes.Load() }

// LastEtag is the last etag committed.
func (db *DB) LastEtag() int64 {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.lastEtag
}

// ChangeVector is the database change vector.
func (db *DB) ChangeVector() string {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.cvText
}

func (db *DB) collectionName(key string) (string, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if c, ok := db.collections[key]; ok {
		return c.Name, true
	}
	return "", false
}

// safeCall runs fn, turning a panic into an internal error so it never
// takes the writer goroutine (and every waiting client) down.
func safeCall(fn func(*Tx) error, tx *Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			tx.db.log.Error("panic in write transaction", "panic", r, "stack", string(debug.Stack()))
			err = dberr.New(dberr.Internal, "internal error: %v", r)
		}
	}()
	return fn(tx)
}

// LowerID is the storage key of a document id: ids are case-insensitive.
func LowerID(id string) string {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 0x80 {
			return strings.ToLower(id)
		}
		if c >= 'A' && c <= 'Z' {
			return strings.ToLower(id)
		}
	}
	return id
}
