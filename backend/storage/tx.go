package storage

import (
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/metrics"
)

// Tx is a write request's view of a merged transaction. It is only valid
// inside the function given to DB.Write.
type Tx struct {
	db       *DB
	tx       *sql.Tx
	now      time.Time
	lastEtag int64
	cv       changevector.Vector
	cvText   string
	deltas   map[string]*Collection
	changes  []Change
	stmts    map[string]*sql.Stmt // transaction-bound views of db.wstmts
	// tombstones is the database's tombstone count when the transaction began.
	tombstones int64

	pendingCV   changevector.Vector
	pendingText string

	idDeltas map[string]*IDNumbers

	// anyConflicts: this transaction stored a conflict.
	anyConflicts bool
	// actor is who the current request's resolutions are logged as.
	actor string
	// revWritten: this transaction stored a revision (revisions.go);
	// skipRev: the current request's puts create none.
	revWritten, skipRev bool
	revCfg              *RevisionsConfig // read once per transaction (revisionsConfig)
	revCfgRead          bool
	// anyCounters: this transaction wrote a counter.
	anyCounters bool
	// wantItems: record counter and time-series changes in items (an
	// OnItemCommit hook wants them); itemsMark is where the current
	// request's start.
	wantItems bool
	items     []ItemChange
	itemsMark int
}

// stmt returns the prepared statement for q bound to this transaction.
func (tx *Tx) stmt(q string) *sql.Stmt {
	if st, ok := tx.stmts[q]; ok {
		return st
	}
	st := tx.tx.Stmt(tx.db.wstmts[q])
	tx.stmts[q] = st
	return st
}

func (tx *Tx) exec(q string, args ...any) (sql.Result, error) { return tx.stmt(q).Exec(args...) }

func (tx *Tx) queryRow(q string, args ...any) *sql.Row { return tx.stmt(q).QueryRow(args...) }

// run executes one request's function inside a savepoint, so that its
// failure rolls back its own changes and nothing else. Without savepoint
// (a request alone in its transaction), the caller rolls back the whole
// transaction when it fails.
func (tx *Tx) run(fn func(*Tx) error, savepoint bool) error {
	if !savepoint {
		tx.actor, tx.skipRev = "", false
		tx.itemsMark = len(tx.items)
		return safeCall(fn, tx)
	}
	if _, err := tx.exec(sqlSavepoint); err != nil {
		return err
	}
	tx.actor, tx.skipRev = "", false
	etag, cv, cvText, nchanges := tx.lastEtag, tx.cv, tx.cvText, len(tx.changes)
	tx.itemsMark = len(tx.items)
	saved := make(map[string]Collection, len(tx.deltas))
	for k, d := range tx.deltas {
		saved[k] = *d
	}
	savedIDs := make(map[string]IDNumbers, len(tx.idDeltas))
	for k, d := range tx.idDeltas {
		savedIDs[k] = *d
	}
	err := safeCall(fn, tx)
	if err == nil {
		if _, err = tx.exec(sqlRelease); err == nil {
			return nil
		}
	}
	if _, rerr := tx.exec(sqlRollbackTo); rerr != nil {
		return errors.Join(err, rerr)
	}
	_, _ = tx.exec(sqlRelease)
	tx.lastEtag, tx.cv, tx.cvText, tx.changes = etag, cv, cvText, tx.changes[:nchanges]
	tx.items = tx.items[:tx.itemsMark]
	for k := range tx.deltas {
		if s, ok := saved[k]; ok {
			*tx.deltas[k] = s
		} else {
			delete(tx.deltas, k)
		}
	}
	for k := range tx.idDeltas {
		if s, ok := savedIDs[k]; ok {
			*tx.idDeltas[k] = s
		} else {
			delete(tx.idDeltas, k)
		}
	}
	return err
}

// persist writes the transaction's counters: last etag, database change
// vector and collection counts.
func (tx *Tx) persist(startEtag int64, startCV string) error {
	if tx.lastEtag != startEtag {
		if _, err := tx.exec(sqlSetLastEtag, strconv.FormatInt(tx.lastEtag, 10)); err != nil {
			return err
		}
		if _, err := tx.exec(sqlSetLastWrite, strconv.FormatInt(tx.now.UnixNano(), 10)); err != nil {
			return err
		}
	}
	if tx.cvText != startCV {
		if _, err := tx.exec(sqlSetChangeVector, tx.cvText); err != nil {
			return err
		}
	}
	for key, d := range tx.idDeltas {
		if _, err := tx.exec(sqlAddIDNumbers, key, d.Prefix, d.Suffix, d.Docs, d.MaxN); err != nil {
			return err
		}
	}
	for key, d := range tx.deltas {
		if d.Docs == 0 && d.Tombstones == 0 {
			continue
		}
		if _, err := tx.exec(sqlAddCollectionCounts,
			key, d.Name, d.Docs, d.Tombstones); err != nil {
			return err
		}
	}
	return nil
}

// Metrics is the collector set of the database being written.
func (tx *Tx) Metrics() *metrics.Engine { return tx.db.metrics }

// Now is the transaction's timestamp (UTC).
func (tx *Tx) Now() time.Time { return tx.now }

// NodeTag is the tag of the node writing.
func (tx *Tx) NodeTag() string { return tx.db.nodeTag }

// Separator is the database's identity parts separator.
func (tx *Tx) Separator() string { return tx.db.sep }

// Document is a stored document.
type Document struct {
	ID           string
	Collection   string
	ChangeVector string
	Etag         int64
	LastModified time.Time
	Flags        int64
	Body         []byte // stored form; see document.AppendJSON
	// Size is the length of the whole stored body, set by the bounded reads
	// (PageByEtag and PageByID with maxBody, GetPrefix) whose Body may be
	// only a prefix of it; 0 from the others.
	Size int64
	// Counters are the names of the document's live counters and
	// CountersEtag the last etag of its counters, set by the reads that
	// serve documents to clients (see AddCounterNames).
	Counters     []string
	CountersEtag int64
}

// Truncated tells whether Body is only a prefix of the stored body.
func (d *Document) Truncated() bool { return d.Size > int64(len(d.Body)) }

// AppendJSON writes the document as clients see it, metadata included.
func (d *Document) AppendJSON(dst []byte) []byte {
	start := len(dst)
	out := document.AppendJSON(dst, d.Body, d.ID, d.ChangeVector, d.LastModified)
	if len(d.Counters) > 0 {
		out = appendCounterNames(out, start, d.Counters)
	}
	return appendDocFlags(out, start, d.Flags, len(d.Counters) > 0)
}

// Info describes a write's outcome.
type Info struct {
	ID           string
	Collection   string
	ChangeVector string
	Etag         int64
	LastModified time.Time
}

const docColumns = `etag, id, collection, change_vector, last_modified, flags, body`

// docPrefixColumns are docColumns with the body cut to its first ? bytes
// (substr counts bytes on a BLOB) and its whole length.
const docPrefixColumns = `etag, id, collection, change_vector, last_modified, flags, substr(body, 1, ?), length(body)`

func scanDocPrefix(row interface{ Scan(...any) error }) (*Document, error) {
	d := &Document{}
	var lm int64
	if err := row.Scan(&d.Etag, &d.ID, &d.Collection, &d.ChangeVector, &lm, &d.Flags, &d.Body, &d.Size); err != nil {
		return nil, err
	}
	d.LastModified = time.Unix(0, lm).UTC()
	return d, nil
}

func scanDoc(row interface{ Scan(...any) error }) (*Document, error) {
	d := &Document{}
	var lm int64
	if err := row.Scan(&d.Etag, &d.ID, &d.Collection, &d.ChangeVector, &lm, &d.Flags, &d.Body); err != nil {
		return nil, err
	}
	d.LastModified = time.Unix(0, lm).UTC()
	return d, nil
}

// Get reads a document inside the transaction; nil when missing.
func (tx *Tx) Get(id string) (*Document, error) {
	d, err := scanDoc(tx.queryRow(sqlGetDoc, LowerID(id)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return d, err
}

// Exists tells whether a document with this id exists.
func (tx *Tx) Exists(id string) (bool, error) {
	var one int
	err := tx.queryRow(sqlExists, LowerID(id)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// ValidateID checks a final document id.
func ValidateID(id string) error {
	if strings.TrimSpace(id) == "" {
		return dberr.New(dberr.BadRequest, "Document id cannot be empty")
	}
	if len(id) > MaxIDBytes {
		return dberr.New(dberr.BadRequest, "Document id is %d bytes long; the limit is %d UTF-8 bytes", len(id), MaxIDBytes)
	}
	if !utf8.ValidString(id) {
		return dberr.New(dberr.BadRequest, "Document id is not valid UTF-8")
	}
	if strings.HasSuffix(id, "|") {
		return dberr.New(dberr.BadRequest, "Document id '%s' ends with '|': identity ids must be resolved before they are stored", id)
	}
	return nil
}

func (tx *Tx) collectionKey(name string) (key, canonical string) {
	key = strings.ToLower(name)
	if d, ok := tx.deltas[key]; ok {
		return key, d.Name
	}
	if n, ok := tx.db.collectionName(key); ok {
		return key, n
	}
	return key, name
}

func (tx *Tx) delta(key, name string) *Collection {
	d := tx.deltas[key]
	if d == nil {
		d = &Collection{Name: name}
		tx.deltas[key] = d
	}
	return d
}

// peekWrite returns the etag and vector the next local write would get,
// without taking them; commitWrite takes them. See nextWrite for base.
func (tx *Tx) peekWrite(base changevector.Vector) (int64, string) {
	etag := tx.lastEtag + 1
	tx.pendingCV = tx.cv.WithEntry(tx.db.nodeTag, etag, tx.db.dbid)
	tx.pendingText = tx.pendingCV.String()
	if base == nil {
		return etag, tx.pendingText
	}
	return etag, base.WithEntry(tx.db.nodeTag, etag, tx.db.dbid).String()
}

func (tx *Tx) commitWrite() {
	tx.lastEtag++
	tx.cv, tx.cvText = tx.pendingCV, tx.pendingText
}

// nextWrite takes the next etag and returns the change vector of a local
// write. base is what this copy holds of the id (its document's vector, or
// the merge of its conflict versions): the write's vector is base plus this
// copy's new entry, so it claims to supersede only versions this copy has
// actually stored. Without a base (an id this copy holds no version of) it
// is the database vector plus the entry, RavenDB's rule. The database
// vector always takes the new entry. (Deriving every write from the
// database vector lost acknowledged writes: see DESIGN.md, "Change
// vectors".)
func (tx *Tx) nextWrite(base changevector.Vector) (int64, string) {
	etag, cv := tx.peekWrite(base)
	tx.commitWrite()
	return etag, cv
}

// baseOf is the base (see nextWrite) of a stored version's vector text;
// nil when it has none.
func baseOf(cv string) changevector.Vector {
	v, err := changevector.ParseStored(cv)
	if err != nil || len(v) == 0 {
		return nil
	}
	return v
}

// baseOfVersions merges the vectors of an id's conflict versions.
func baseOfVersions(vs []Version) changevector.Vector {
	var all []changevector.Vector
	for _, v := range vs {
		if b := baseOf(v.ChangeVector); b != nil {
			all = append(all, b)
		}
	}
	if len(all) == 0 {
		return nil
	}
	return changevector.Merge(all...)
}

type existing struct {
	etag       int64
	id         string
	collection string
	cv         string
}

func (tx *Tx) lookup(key string) (*existing, error) {
	e := &existing{}
	err := tx.queryRow(sqlLookup, key).Scan(&e.etag, &e.id, &e.collection, &e.cv)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return e, err
}

// Put stores a document. The id rules: empty gives a GUID; a trailing
// separator gives prefix + 19-digit etag + "-" + node tag; a trailing '|'
// is an error (identities are resolved by the caller). expected is the
// optimistic-concurrency check: nil for none, "" for "must not exist",
// otherwise the exact current change vector.
func (tx *Tx) Put(id string, doc document.Parsed, expected *string) (Info, error) {
	known := false // the id is known to be new
	switch {
	case strings.TrimSpace(id) == "":
		id = uuid.NewString()
		known = true
	case strings.HasSuffix(id, "|"):
		return Info{}, dberr.New(dberr.BadRequest, "Document id '%s' ends with '|': identity ids must be resolved before they are stored", id)
	case strings.HasSuffix(id, tx.db.sep):
		id = id + pad19(tx.lastEtag+1) + "-" + tx.db.nodeTag
		known = true
	}
	if err := ValidateID(id); err != nil {
		return Info{}, err
	}
	key := LowerID(id)
	var resolved []Version
	if !known {
		// A write to a conflicted id resolves it: its vector (the database
		// vector plus this write) has seen every version.
		var err error
		if resolved, err = tx.takeConflicts(key); err != nil {
			return Info{}, err
		}
		if err := checkConflictExpectation(id, resolved, expected); err != nil {
			return Info{}, err
		}
		if len(resolved) > 0 {
			expected = nil // checked against the versions
		}
	}
	info, err := tx.put(id, key, known, doc, expected, baseOfVersions(resolved))
	if err == nil {
		err = tx.revisionAfterPut(LowerID(info.ID), info, doc.Body)
	}
	if err == nil && len(resolved) > 0 {
		err = tx.logResolution(info.ID, info.Collection, "manual", tx.by(), resolved, Version{
			ID: info.ID, Collection: info.Collection, ChangeVector: info.ChangeVector, LastModified: info.LastModified, Body: doc.Body,
		})
	}
	return info, err
}

// by names who a local write's conflict resolution is attributed to.
func (tx *Tx) by() string {
	if tx.actor != "" {
		return tx.actor
	}
	return "client write"
}

// SetActor names who the request's writes are attributed to in the
// resolution log ("studio", "api", ...).
func (tx *Tx) SetActor(who string) { tx.actor = who }

func (tx *Tx) put(id, key string, known bool, doc document.Parsed, expected *string, base changevector.Vector) (Info, error) {
	ckey, cname := tx.collectionKey(doc.Collection)
	// Fast path for a new document: try the insert first and look the
	// document up only when the id is taken. It serves ids known to be new,
	// "no check" and "must be new"; a concrete expected vector needs the
	// current document first.
	if expected == nil || *expected == "" {
		etag, cv := tx.peekWrite(base)
		res, err := tx.exec(sqlInsertNewDoc, etag, key, id, cname, cv, tx.now.UnixNano(), doc.Body)
		if err != nil {
			return Info{}, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return Info{}, err
		} else if n == 1 {
			tx.commitWrite()
			if !known && tx.mayHaveTombstones() {
				if err := tx.removeTombstone(key); err != nil {
					return Info{}, err
				}
			}
			tx.delta(ckey, cname).Docs++
			tx.noteID(id, 1)
			tx.changes = append(tx.changes, Change{Type: "Put", ID: id, Collection: cname, ChangeVector: cv, Etag: etag})
			return Info{ID: id, Collection: cname, ChangeVector: cv, Etag: etag, LastModified: tx.now}, nil
		}
		if known {
			return Info{}, dberr.New(dberr.Internal, "generated id %s is already taken", id)
		}
	}
	old, err := tx.lookup(key)
	if err != nil {
		return Info{}, err
	}
	if expected != nil {
		switch {
		case *expected == "" && old != nil:
			return Info{}, concurrencyErr("Document %s has change vector %s, but Put was called with expecting new document. Optimistic concurrency violation, transaction will be aborted.", old.id, old.cv)
		case *expected != "" && old == nil:
			return Info{}, concurrencyErr("Document %s does not exist, but Put was called with change vector: %s. Optimistic concurrency violation, transaction will be aborted.", id, *expected)
		case *expected != "" && old.cv != *expected:
			return Info{}, concurrencyErr("Document %s has change vector %s, but Put was called with change vector %s. Optimistic concurrency violation, transaction will be aborted.", old.id, old.cv, *expected)
		}
	}
	if old != nil && !strings.EqualFold(old.collection, cname) {
		return Info{}, dberr.New(dberr.InvalidOperation, "Changing '%s' from '%s' to '%s' via update is not supported. Delete it and recreate the document.", old.id, old.collection, cname)
	}
	if old != nil { // a document's time-series names stay in its body (timeseries.go)
		if doc.Body, err = tx.withSeriesNames(key, doc.Body, doc.Server["@flags"]); err != nil {
			return Info{}, err
		}
	}
	if old != nil {
		base = baseOf(old.cv)
	}
	etag, cv := tx.nextWrite(base)
	lm := tx.now.UnixNano()
	if old != nil {
		id = old.id                               // ids keep their first spelling
		body, err := tx.bodyForPut(key, doc.Body) // attachments
		if err != nil {
			return Info{}, err
		}
		if _, err := tx.exec(sqlUpdateDoc, etag, cv, lm, body, old.etag); err != nil {
			return Info{}, err
		}
	} else {
		if tx.mayHaveTombstones() {
			if err := tx.removeTombstone(key); err != nil {
				return Info{}, err
			}
		}
		if _, err := tx.exec(sqlInsertDoc, etag, key, id, cname, cv, lm, doc.Body); err != nil {
			return Info{}, err
		}
		tx.delta(ckey, cname).Docs++
		tx.noteID(id, 1)
	}
	tx.changes = append(tx.changes, Change{Type: "Put", ID: id, Collection: cname, ChangeVector: cv, Etag: etag})
	return Info{ID: id, Collection: cname, ChangeVector: cv, Etag: etag, LastModified: tx.now}, nil
}

// mayHaveTombstones is false when the database holds no tombstone at all,
// which spares every new document a tombstone lookup.
func (tx *Tx) mayHaveTombstones() bool {
	if tx.tombstones > 0 {
		return true
	}
	for _, d := range tx.deltas {
		if d.Tombstones != 0 {
			return true
		}
	}
	return false
}

func (tx *Tx) removeTombstone(key string) error {
	var coll string
	err := tx.queryRow(sqlRemoveTombstone, key).Scan(&coll)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	ckey, cname := tx.collectionKey(coll)
	tx.delta(ckey, cname).Tombstones--
	return nil
}

// Delete removes a document and leaves a tombstone. Deleting a missing
// document is not an error; deleted reports whether anything was removed.
func (tx *Tx) Delete(id string, expected *string) (info Info, deleted bool, err error) {
	key := LowerID(id)
	versions, err := tx.takeConflicts(key)
	if err != nil {
		return Info{}, false, err
	}
	if expected != nil && *expected != "" {
		if err := checkConflictExpectation(id, versions, expected); err != nil {
			return Info{}, false, err
		}
	}
	if len(versions) > 0 {
		// Deleting a conflicted id resolves it to a tombstone.
		etag, cv := tx.nextWrite(baseOfVersions(versions))
		c := versions[0]
		ckey, cname := tx.collectionKey(c.Collection)
		if tx.mayHaveTombstones() {
			if err := tx.removeTombstone(key); err != nil {
				return Info{}, false, err
			}
		}
		if _, err := tx.exec(sqlInsertTombstone, etag, key, c.ID, cname, int64(0), cv, tx.now.UnixNano()); err != nil {
			return Info{}, false, err
		}
		tx.delta(ckey, cname).Tombstones++
		tx.changes = append(tx.changes, Change{Type: "Delete", ID: c.ID, Collection: cname, ChangeVector: cv, Etag: etag})
		info := Info{ID: c.ID, Collection: cname, ChangeVector: cv, Etag: etag, LastModified: tx.now}
		err := tx.logResolution(c.ID, cname, "manual", tx.by(), versions, Version{ID: c.ID, Collection: cname, ChangeVector: cv, LastModified: tx.now, Tombstone: true})
		return info, err == nil, err
	}
	old, err := tx.lookup(key)
	if err != nil {
		return Info{}, false, err
	}
	if expected != nil && *expected != "" {
		if old == nil {
			return Info{}, false, concurrencyErr("Document %s does not exist, but delete was called with change vector '%s'. Optimistic concurrency violation, transaction will be aborted.", id, *expected)
		}
		if old.cv != *expected {
			return Info{}, false, concurrencyErr("Document %s has change vector %s, but Delete was called with change vector '%s'. Optimistic concurrency violation, transaction will be aborted.", old.id, old.cv, *expected)
		}
	}
	if old == nil {
		return Info{ID: id}, false, nil
	}
	etag, cv := tx.nextWrite(baseOf(old.cv))
	lm := tx.now.UnixNano()
	if _, err := tx.exec(sqlDeleteDoc, old.etag); err != nil {
		return Info{}, false, err
	}
	if _, err := tx.dropRefs(key, true); err != nil { // attachments
		return Info{}, false, err
	}
	if err := tx.dropSeries(key); err != nil { // its time series go with it
		return Info{}, false, err
	}
	if err := tx.dropCounters(key); err != nil {
		return Info{}, false, err
	}
	if _, err := tx.exec(sqlInsertTombstone,
		etag, key, old.id, old.collection, old.etag, cv, lm); err != nil {
		return Info{}, false, err
	}
	ckey, cname := tx.collectionKey(old.collection)
	d := tx.delta(ckey, cname)
	d.Docs--
	d.Tombstones++
	tx.noteID(old.id, -1)
	tx.changes = append(tx.changes, Change{Type: "Delete", ID: old.id, Collection: cname, ChangeVector: cv, Etag: etag})
	info = Info{ID: old.id, Collection: cname, ChangeVector: cv, Etag: etag, LastModified: tx.now}
	return info, true, tx.revisionAfterDelete(key, info)
}

func concurrencyErr(format string, args ...any) error {
	return dberr.New(dberr.Concurrency, format, args...)
}

func pad19(n int64) string {
	s := strconv.FormatInt(n, 10)
	if len(s) >= 19 {
		return s
	}
	return strings.Repeat("0", 19-len(s)) + s
}

// checkConflictExpectation applies optimistic concurrency to a write that
// resolves a conflict: "must be new" fails (the id exists, in conflict),
// and an expected change vector must have seen every version, so a client
// holding a vector from before the conflict cannot resolve it blindly.
// Without an expectation the write resolves the conflict.
func checkConflictExpectation(id string, versions []Version, expected *string) error {
	if expected == nil || len(versions) == 0 {
		return nil
	}
	if *expected == "" {
		return concurrencyErr("Document %s is in conflict (%d versions), but the write expected a new document. Optimistic concurrency violation, transaction will be aborted.", id, len(versions))
	}
	exp, err := changevector.Parse(*expected)
	if err != nil {
		return dberr.New(dberr.BadRequest, "change vector %q: %v", *expected, err)
	}
	for _, v := range versions {
		cv, _ := changevector.ParseStored(v.ChangeVector)
		if changevector.Compare(cv, exp) != changevector.AlreadyMerged {
			return concurrencyErr("Document %s is in conflict and its version %s is newer than the expected change vector %s. Optimistic concurrency violation, transaction will be aborted.", id, v.ChangeVector, *expected)
		}
	}
	return nil
}
