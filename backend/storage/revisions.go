package storage

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
)

// KindRevision marks a replicated item that is a revision (see
// EXTENSIONS: bits 2-4 of the wire kind byte).
const KindRevision ItemKind = 2

// RevisionFlags describe a revision (the revisions.flags column and the
// wire's revision flags).
type RevisionFlags int64

const (
	// RevisionDelete: the revision records a deletion (RavenDB's
	// "DeleteRevision"); it has no body.
	RevisionDelete RevisionFlags = 1 << iota
	// RevisionConflicted: a version that took part in a conflict.
	RevisionConflicted
	// RevisionResolved: the result of a conflict resolution.
	RevisionResolved
	// RevisionReverted: written by reverting the document to a revision.
	RevisionReverted
)

// revisionFlagsMask is every flag a replicated revision may carry.
const revisionFlagsMask = RevisionDelete | RevisionConflicted | RevisionResolved | RevisionReverted

// flagHasRevisions marks a document (docs.flags) that has revisions; it is
// served as "@flags":"HasRevisions".
const flagHasRevisions = 2

// String is the @flags text RavenDB writes for a revision.
func (f RevisionFlags) String() string {
	parts := make([]string, 0, 5)
	if f&RevisionConflicted != 0 {
		parts = append(parts, "Conflicted")
	}
	if f&RevisionDelete != 0 {
		parts = append(parts, "DeleteRevision")
	}
	parts = append(parts, "HasRevisions")
	if f&RevisionResolved != 0 {
		parts = append(parts, "Resolved")
	}
	if f&RevisionReverted != 0 {
		parts = append(parts, "Reverted")
	}
	parts = append(parts, "Revision")
	return strings.Join(parts, ", ")
}

const (
	sqlInsertRevision = `INSERT INTO revisions(etag, change_vector, key, id, collection, last_modified, flags, body)
		VALUES(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(change_vector) DO NOTHING`
	sqlMarkRevisionFlags  = `UPDATE revisions SET flags = flags | ? WHERE change_vector = ?`
	sqlMarkHasRevisions   = `UPDATE docs SET flags = flags | 2 WHERE key = ?`
	sqlMarkIfRevisions    = `UPDATE docs SET flags = flags | 2 WHERE key = ?1 AND EXISTS(SELECT 1 FROM revisions WHERE key = ?1)`
	sqlRevisionAges       = `SELECT etag, last_modified FROM revisions WHERE key = ? ORDER BY last_modified DESC, etag DESC`
	sqlDeleteRevision     = `DELETE FROM revisions WHERE etag = ?`
	sqlPurgeRevisions     = `DELETE FROM revisions WHERE key = ?`
	sqlGetRevisionByCV    = `SELECT ` + revisionColumns + ` FROM revisions WHERE change_vector = ?`
	revisionColumns       = `etag, id, collection, change_vector, last_modified, flags, body`
	revisionPrefixColumns = `etag, id, collection, change_vector, last_modified, flags, substr(body, 1, ?), length(body)`
)

func init() {
	writerStatements = append(writerStatements, sqlInsertRevision, sqlMarkRevisionFlags, sqlMarkHasRevisions, sqlMarkIfRevisions,
		sqlRevisionAges, sqlDeleteRevision, sqlPurgeRevisions, sqlGetRevisionByCV)
}

// RevisionsCollectionConfig is one collection's revisions configuration, in
// RavenDB's shape (the npm client's RevisionsCollectionConfiguration).
type RevisionsCollectionConfig struct {
	Disabled bool
	// MinimumRevisionsToKeep: keep at most this many (null: no count limit).
	MinimumRevisionsToKeep *int64 `json:",omitempty"`
	// MinimumRevisionAgeToKeep: a TimeSpan ("d.hh:mm:ss"); revisions older
	// than this go (null: no age limit).
	MinimumRevisionAgeToKeep *string `json:",omitempty"`
	PurgeOnDelete            bool
	// MaximumRevisionsToDeleteUponDocumentUpdate bounds the revisions one
	// write removes (null: no bound).
	MaximumRevisionsToDeleteUponDocumentUpdate *int64 `json:",omitempty"`

	age time.Duration
}

// RevisionsConfig is a database's revisions configuration: a default and
// per-collection entries (collection names case-insensitive).
type RevisionsConfig struct {
	Default     *RevisionsCollectionConfig            `json:",omitempty"`
	Collections map[string]*RevisionsCollectionConfig `json:",omitempty"`

	byKey map[string]*RevisionsCollectionConfig
}

// RevisionsSettingKey is the key of the configuration among a database's
// cluster settings.
const RevisionsSettingKey = "revisions"

// ParseRevisionsConfig reads and validates a configuration (nil or null:
// none).
func ParseRevisionsConfig(raw []byte) (*RevisionsConfig, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if err := document.CheckDepth(raw); err != nil {
		return nil, err
	}
	var c RevisionsConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, dberr.New(dberr.BadRequest, "Invalid revisions configuration: %v", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks the values and prepares the lookups.
func (c *RevisionsConfig) Validate() error {
	check := func(name string, cc *RevisionsCollectionConfig) error {
		if cc == nil {
			return nil
		}
		if cc.MinimumRevisionsToKeep != nil && *cc.MinimumRevisionsToKeep < 0 {
			return dberr.New(dberr.BadRequest, "Revisions configuration of %s: MinimumRevisionsToKeep must not be negative", name)
		}
		if cc.MaximumRevisionsToDeleteUponDocumentUpdate != nil && *cc.MaximumRevisionsToDeleteUponDocumentUpdate <= 0 {
			return dberr.New(dberr.BadRequest, "Revisions configuration of %s: MaximumRevisionsToDeleteUponDocumentUpdate must be positive", name)
		}
		cc.age = 0
		if cc.MinimumRevisionAgeToKeep != nil {
			d, err := ParseTimeSpan(*cc.MinimumRevisionAgeToKeep)
			if err != nil {
				return dberr.New(dberr.BadRequest, "Revisions configuration of %s: MinimumRevisionAgeToKeep: %v", name, err)
			}
			if d <= 0 {
				return dberr.New(dberr.BadRequest, "Revisions configuration of %s: MinimumRevisionAgeToKeep must be positive", name)
			}
			cc.age = d
		}
		return nil
	}
	if err := check("the default", c.Default); err != nil {
		return err
	}
	if len(c.Collections) > 10000 {
		return dberr.New(dberr.BadRequest, "Revisions configuration: at most 10000 collections")
	}
	c.byKey = make(map[string]*RevisionsCollectionConfig, len(c.Collections))
	for name, cc := range c.Collections {
		if strings.TrimSpace(name) == "" {
			return dberr.New(dberr.BadRequest, "Revisions configuration: a collection name is empty")
		}
		if err := check("collection "+name, cc); err != nil {
			return err
		}
		if cc != nil {
			c.byKey[strings.ToLower(name)] = cc
		}
	}
	return nil
}

// For returns the configuration in force for a collection: its own entry,
// else the default; nil when revisions are off for it.
func (c *RevisionsConfig) For(collection string) *RevisionsCollectionConfig {
	if c == nil || strings.EqualFold(collection, "@hilo") {
		return nil // HiLo documents are the server's, never versioned
	}
	cc, ok := c.byKey[strings.ToLower(collection)]
	if !ok {
		cc = c.Default
	}
	if cc == nil || cc.Disabled {
		return nil
	}
	return cc
}

// ParseTimeSpan reads a .NET TimeSpan as the client sends it:
// [-][d.]hh:mm:ss[.fffffff] (also d:hh:mm:ss).
func ParseTimeSpan(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	bad := fmt.Errorf("%q is not a TimeSpan (d.hh:mm:ss)", s)
	if s == "" || len(s) > 40 {
		return 0, bad
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var days int64
	parts := strings.Split(s, ":")
	switch len(parts) {
	case 3:
		if i := strings.IndexByte(parts[0], '.'); i >= 0 {
			d, err := strconv.ParseInt(parts[0][:i], 10, 64)
			if err != nil {
				return 0, bad
			}
			days, parts[0] = d, parts[0][i+1:]
		}
	case 4:
		d, err := strconv.ParseInt(parts[0], 10, 64)
		if err != nil {
			return 0, bad
		}
		days, parts = d, parts[1:]
	default:
		return 0, bad
	}
	h, err1 := strconv.ParseInt(parts[0], 10, 64)
	m, err2 := strconv.ParseInt(parts[1], 10, 64)
	secs, err3 := strconv.ParseFloat(parts[2], 64)
	if err1 != nil || err2 != nil || err3 != nil || days < 0 || days > 100000 || h < 0 || h > 23 || m < 0 || m > 59 || secs < 0 || secs >= 60 {
		return 0, bad
	}
	d := time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(secs*float64(time.Second))
	if neg {
		d = -d
	}
	return d, nil
}

// FormatTimeSpan writes a duration as a TimeSpan ("d.hh:mm:ss").
func FormatTimeSpan(d time.Duration) string {
	days := int64(d / (24 * time.Hour))
	d -= time.Duration(days) * 24 * time.Hour
	s := fmt.Sprintf("%02d:%02d:%02d", int64(d/time.Hour), int64(d%time.Hour/time.Minute), int64(d%time.Minute/time.Second))
	if days > 0 {
		s = strconv.FormatInt(days, 10) + "." + s
	}
	return s
}

// revisionsState is a database's revisions machinery: where the
// configuration comes from (the cluster state), its parsed cache, and the
// clock the write path and purging read (injectable for tests).
type revisionsState struct {
	mu     sync.Mutex
	source func() []byte
	raw    []byte
	cfg    *RevisionsConfig
	clock  func() time.Time
	// has: the file holds (or held) a revision; spares the counts a query.
	has atomic.Bool
}

// SetRevisionsSource installs where the database reads its revisions
// configuration from (the cluster's setting); nil means none. Read at every
// write of a document, parsed only when it changed.
func (db *DB) SetRevisionsSource(fn func() []byte) {
	db.rev.mu.Lock()
	db.rev.source, db.rev.raw, db.rev.cfg = fn, nil, nil
	db.rev.mu.Unlock()
}

// SetClock replaces the clock of the write path (transaction times, and
// so revision times and age purging); nil restores time.Now. For tests.
func (db *DB) SetClock(fn func() time.Time) {
	db.rev.mu.Lock()
	db.rev.clock = fn
	db.rev.mu.Unlock()
}

func (db *DB) clockNow() time.Time {
	db.rev.mu.Lock()
	fn := db.rev.clock
	db.rev.mu.Unlock()
	if fn == nil {
		return time.Now().UTC()
	}
	return fn().UTC()
}

// RevisionsConfig is the configuration in force (nil: none).
func (db *DB) RevisionsConfig() *RevisionsConfig {
	db.rev.mu.Lock()
	defer db.rev.mu.Unlock()
	if db.rev.source == nil {
		return nil
	}
	raw := db.rev.source()
	if len(raw) == 0 {
		db.rev.raw, db.rev.cfg = nil, nil
		return nil
	}
	if db.rev.cfg != nil && bytes.Equal(raw, db.rev.raw) {
		return db.rev.cfg
	}
	cfg, err := ParseRevisionsConfig(raw)
	if err != nil {
		db.log.Warn("revisions configuration ignored", "database", db.name, "error", err)
		cfg = nil
	}
	db.rev.raw, db.rev.cfg = append([]byte(nil), raw...), cfg
	return cfg
}

// revisionsConfig is the configuration in force, read once per merged
// transaction (every put asks).
func (tx *Tx) revisionsConfig() *RevisionsConfig {
	if !tx.revCfgRead {
		tx.revCfg, tx.revCfgRead = tx.db.RevisionsConfig(), true
	}
	return tx.revCfg
}

// insertRevision stores a revision unless one with its change vector
// exists; it reports whether it did.
func (tx *Tx) insertRevision(key, id, collection, cv string, lm int64, flags RevisionFlags, body []byte) (bool, error) {
	etag := tx.lastEtag + 1
	res, err := tx.exec(sqlInsertRevision, etag, cv, key, id, collection, lm, int64(flags), body)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return false, err
	}
	tx.lastEtag = etag
	tx.revWritten = true
	return true, nil
}

// mayHaveRevisions is false while the database holds no revision and this
// transaction wrote none.
func (tx *Tx) mayHaveRevisions() bool { return tx.db.rev.has.Load() || tx.revWritten }

// keepHasRevisions marks a document just written (a new row, flags 0) as
// HasRevisions when this node holds revisions of it. The flag then depends
// only on which revisions a node holds, not on the order in which a
// document and its revisions were written or arrived, so copies that hold
// the same revisions serve the same @flags (the conflict revisions of a
// resolution arrive by replication before or after the resolved version).
func (tx *Tx) keepHasRevisions(key string) error {
	if !tx.mayHaveRevisions() {
		return nil
	}
	_, err := tx.exec(sqlMarkIfRevisions, key)
	return err
}

// revisionAfterPut writes the revision of a local put when the
// collection's configuration asks for one, and purges.
func (tx *Tx) revisionAfterPut(key string, info Info, body []byte) error {
	cc := tx.revisionsConfig().For(info.Collection)
	if tx.skipRev || cc == nil {
		return tx.keepHasRevisions(key)
	}
	if _, err := tx.insertRevision(key, info.ID, info.Collection, info.ChangeVector, info.LastModified.UnixNano(), 0, body); err != nil {
		return err
	}
	if _, err := tx.exec(sqlMarkHasRevisions, key); err != nil {
		return err
	}
	return tx.purgeRevisions(key, cc)
}

// SkipRevisionCreation makes the current request's puts write no revision
// (an import with SkipRevisionCreation).
func (tx *Tx) SkipRevisionCreation(skip bool) { tx.skipRev = skip }

// revisionAfterDelete purges the revisions of a deleted document
// (PurgeOnDelete) or records the deletion as a revision.
func (tx *Tx) revisionAfterDelete(key string, info Info) error {
	cc := tx.revisionsConfig().For(info.Collection)
	if cc == nil {
		return nil
	}
	if cc.PurgeOnDelete {
		_, err := tx.exec(sqlPurgeRevisions, key)
		return err
	}
	if _, err := tx.insertRevision(key, info.ID, info.Collection, info.ChangeVector, info.LastModified.UnixNano(), RevisionDelete, nil); err != nil {
		return err
	}
	return tx.purgeRevisions(key, cc)
}

// revisionOfConflict keeps a version that went into a conflict as a
// revision, configured or not (as RavenDB does).
func (tx *Tx) revisionOfConflict(key string, it Item) error {
	flags := RevisionConflicted
	if it.Type == "Delete" {
		flags |= RevisionDelete
	}
	_, cname := tx.collectionKey(it.Collection)
	ok, err := tx.insertRevision(key, it.ID, cname, it.ChangeVector, it.LastModified.UnixNano(), flags, it.Body)
	if err != nil || ok {
		return err
	}
	_, err = tx.exec(sqlMarkRevisionFlags, int64(RevisionConflicted), it.ChangeVector)
	return err
}

// revisionOfResolution keeps a conflict's resolution as a revision.
func (tx *Tx) revisionOfResolution(result Version) error {
	key := LowerID(result.ID)
	flags := RevisionResolved
	if result.Tombstone {
		flags |= RevisionDelete
	}
	ok, err := tx.insertRevision(key, result.ID, result.Collection, result.ChangeVector, result.LastModified.UnixNano(), flags, result.Body)
	if err != nil {
		return err
	}
	if !ok {
		if _, err := tx.exec(sqlMarkRevisionFlags, int64(RevisionResolved), result.ChangeVector); err != nil {
			return err
		}
	}
	_, err = tx.exec(sqlMarkHasRevisions, key)
	return err
}

// purgeRevisions removes key's revisions beyond the configuration, oldest
// first: a revision goes when it is beyond the MinimumRevisionsToKeep newest
// (when set) and older than MinimumRevisionAgeToKeep (when set), at most
// MaximumRevisionsToDeleteUponDocumentUpdate of them.
func (tx *Tx) purgeRevisions(key string, cc *RevisionsCollectionConfig) error {
	if cc == nil || (cc.MinimumRevisionsToKeep == nil && cc.age == 0) {
		return nil
	}
	rows, err := tx.stmt(sqlRevisionAges).Query(key)
	if err != nil {
		return err
	}
	var doomed []int64
	cutoff := int64(0)
	if cc.age > 0 {
		cutoff = tx.now.Add(-cc.age).UnixNano()
	}
	i := int64(0)
	for rows.Next() {
		var etag, lm int64
		if err := rows.Scan(&etag, &lm); err != nil {
			rows.Close()
			return err
		}
		keep := false
		if cc.MinimumRevisionsToKeep != nil && i < *cc.MinimumRevisionsToKeep {
			keep = true
		}
		if cc.age > 0 && lm >= cutoff {
			keep = true
		}
		if !keep {
			doomed = append(doomed, etag)
		}
		i++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	// Oldest first, so a bounded purge removes the oldest.
	for j := len(doomed) - 1; j >= 0; j-- {
		if m := cc.MaximumRevisionsToDeleteUponDocumentUpdate; m != nil && int64(len(doomed)-1-j) >= *m {
			break
		}
		if _, err := tx.exec(sqlDeleteRevision, doomed[j]); err != nil {
			return err
		}
	}
	return nil
}

// applyRevision stores a replicated revision: one already present (same
// change vector) is ignored. The document it belongs to is marked, and the
// configuration's limits apply on this copy too.
func (tx *Tx) applyRevision(it Item) (Outcome, error) {
	if _, err := changevector.Parse(it.ChangeVector); err != nil {
		return Skipped, dberr.New(dberr.BadRequest, "replicated revision of %s: %v", it.ID, err)
	}
	if err := ValidateID(it.ID); err != nil {
		return Skipped, err
	}
	if it.RevisionFlags&^revisionFlagsMask != 0 {
		return Skipped, dberr.New(dberr.BadRequest, "replicated revision of %s: unknown flags %d", it.ID, it.RevisionFlags)
	}
	flags := it.RevisionFlags
	if it.Type == "Delete" {
		flags |= RevisionDelete
	}
	body := it.Body
	if flags&RevisionDelete != 0 {
		body = nil
	}
	key := LowerID(it.ID)
	_, cname := tx.collectionKey(it.Collection)
	ok, err := tx.insertRevision(key, it.ID, cname, it.ChangeVector, it.LastModified.UnixNano(), flags, body)
	if err != nil {
		return Skipped, err
	}
	if _, err := tx.exec(sqlMarkHasRevisions, key); err != nil {
		return Skipped, err
	}
	if !ok {
		return Skipped, nil
	}
	return Applied, tx.purgeRevisions(key, tx.revisionsConfig().For(cname))
}

// revisionAfterReplicatedDelete applies PurgeOnDelete to a deletion that
// came by replication.
func (tx *Tx) revisionAfterReplicatedDelete(key, collection string) error {
	if !tx.mayHaveRevisions() {
		return nil
	}
	if cc := tx.revisionsConfig().For(collection); cc != nil && cc.PurgeOnDelete {
		_, err := tx.exec(sqlPurgeRevisions, key)
		return err
	}
	return nil
}

// Revision is a stored revision.
type Revision struct {
	Etag         int64
	ID           string
	Collection   string
	ChangeVector string
	LastModified time.Time
	Flags        RevisionFlags
	Body         []byte // stored form; nil for a delete revision
	// Size is the whole body's length when Body is a prefix (bounded reads).
	Size int64
}

func scanRevision(row interface{ Scan(...any) error }, prefix bool) (*Revision, error) {
	r := &Revision{}
	var lm, flags int64
	var err error
	if prefix {
		var size sql.NullInt64
		err = row.Scan(&r.Etag, &r.ID, &r.Collection, &r.ChangeVector, &lm, &flags, &r.Body, &size)
		r.Size = size.Int64
	} else {
		err = row.Scan(&r.Etag, &r.ID, &r.Collection, &r.ChangeVector, &lm, &flags, &r.Body)
	}
	if err != nil {
		return nil, err
	}
	r.LastModified = time.Unix(0, lm).UTC()
	r.Flags = RevisionFlags(flags)
	return r, nil
}

// AppendJSON writes the revision as clients see it: the document with its
// metadata and "@flags" saying it is a revision. A delete revision is a
// document with only its metadata.
func (r *Revision) AppendJSON(dst []byte) []byte {
	body := r.Body
	if len(body) == 0 {
		if r.Collection != "" && r.Collection != document.EmptyCollection {
			body = document.AppendString([]byte(`{"@metadata":{"@collection":`), r.Collection)
			body = append(body, '}', '}')
		} else {
			body = []byte(`{"@metadata":{}}`)
		}
	}
	return appendFlags(document.AppendJSON(dst, body, r.ID, r.ChangeVector, r.LastModified), len(dst), r.Flags.String())
}

// appendFlags puts "@flags" into the metadata of the served document that
// starts at out[start:] (it ends with the metadata's and the document's
// closing braces).
func appendFlags(out []byte, start int, flags ...string) []byte {
	if len(flags) == 0 {
		return out
	}
	n := len(out)
	if n-start < 2 || out[n-1] != '}' || out[n-2] != '}' {
		return out
	}
	// The metadata is the served object's last member. A stored body may
	// carry "@flags" of its own (HasTimeSeries): the flags join it, so the
	// object never holds the key twice.
	meta := bytes.LastIndex(out[start:], []byte(`"@metadata":{`))
	if meta >= 0 {
		meta += start
		if at := bytes.Index(out[meta:], []byte(`"@flags":"`)); at >= 0 {
			vs := meta + at + len(`"@flags":"`)
			if ve := bytes.IndexByte(out[vs:], '"'); ve >= 0 {
				ve += vs
				have := string(out[vs:ve])
				add := ""
				for _, f := range flags {
					if !strings.Contains(have, f) {
						add += ", " + f
					}
				}
				if add == "" {
					return out
				}
				if have == "" {
					add = add[2:]
				}
				tail := append([]byte(add), out[ve:]...)
				return append(out[:ve], tail...)
			}
		}
	}
	out = out[:n-2]
	out = append(out, `,"@flags":`...)
	out = document.AppendString(out, strings.Join(flags, ", "))
	return append(out, '}', '}')
}

// appendDocFlags adds the flags a served document has beside its stored
// body: HasRevisions (its row's flags), HasCounters.
func appendDocFlags(out []byte, start int, flags int64, counters bool) []byte {
	var fs []string
	if flags&flagHasRevisions != 0 {
		fs = append(fs, "HasRevisions")
	}
	if counters {
		fs = append(fs, "HasCounters")
	}
	return appendFlags(out, start, fs...)
}

// RevisionsFor returns an id's revisions, newest first, from start, at most
// pageSize, and how many there are. maxBody > 0 reads only that much of
// each body (Size says how much there was).
func (db *DB) RevisionsFor(ctx context.Context, id string, start, pageSize, maxBody int) ([]*Revision, int, error) {
	key := LowerID(id)
	var total int
	if err := db.reader.QueryRowContext(ctx, `SELECT count(*) FROM revisions WHERE key = ?`, key).Scan(&total); err != nil {
		return nil, 0, err
	}
	if total == 0 || pageSize <= 0 || start >= total {
		return []*Revision{}, total, nil
	}
	cols, args := revisionColumns, []any{key, pageSize, start}
	if maxBody > 0 {
		cols, args = revisionPrefixColumns, []any{maxBody, key, pageSize, start}
	}
	rows, err := db.reader.QueryContext(ctx, `SELECT `+cols+` FROM revisions WHERE key = ? ORDER BY last_modified DESC, etag DESC LIMIT ? OFFSET ?`, args...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	out := []*Revision{}
	for rows.Next() {
		r, err := scanRevision(rows, maxBody > 0)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, r)
	}
	return out, total, rows.Err()
}

// RevisionsCount is how many revisions an id has.
func (db *DB) RevisionsCount(ctx context.Context, id string) (int64, error) {
	var n int64
	err := db.reader.QueryRowContext(ctx, `SELECT count(*) FROM revisions WHERE key = ?`, LowerID(id)).Scan(&n)
	return n, err
}

// RevisionByChangeVector returns one revision (nil when there is none).
func (db *DB) RevisionByChangeVector(ctx context.Context, cv string) (*Revision, error) {
	r, err := scanRevision(db.reader.QueryRowContext(ctx, `SELECT `+revisionColumns+` FROM revisions WHERE change_vector = ?`, cv), false)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return r, err
}

// RevisionBefore returns the revision of id that was current at a time:
// the newest one modified at or before it (nil when none).
func (db *DB) RevisionBefore(ctx context.Context, id string, before time.Time) (*Revision, error) {
	r, err := scanRevision(db.reader.QueryRowContext(ctx, `SELECT `+revisionColumns+` FROM revisions WHERE key = ? AND last_modified <= ?
		ORDER BY last_modified DESC, etag DESC LIMIT 1`, LowerID(id), before.UnixNano()), false)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return r, err
}

// RevisionsBin lists the deleted documents that have revisions: each one's
// newest revision, when it is a delete revision and the document does not
// exist, newest first.
func (db *DB) RevisionsBin(ctx context.Context, start, pageSize int) ([]*Revision, error) {
	if pageSize <= 0 {
		return []*Revision{}, nil
	}
	rows, err := db.reader.QueryContext(ctx, `SELECT `+revisionColumns+` FROM revisions r
		WHERE flags & 1 = 1
		  AND etag = (SELECT max(etag) FROM revisions x WHERE x.key = r.key)
		  AND NOT EXISTS (SELECT 1 FROM docs d WHERE d.key = r.key)
		ORDER BY etag DESC LIMIT ? OFFSET ?`, pageSize, start)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*Revision{}
	for rows.Next() {
		r, err := scanRevision(rows, false)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// RevisionsTotal is the number of revisions the database holds.
func (db *DB) RevisionsTotal(ctx context.Context) (int64, error) {
	if !db.rev.has.Load() {
		return 0, nil
	}
	var n int64
	err := db.reader.QueryRowContext(ctx, `SELECT count(*) FROM revisions`).Scan(&n)
	return n, err
}

// ScanRevisions visits every revision with an etag above after, in etag
// order, up to limit (export).
func (db *DB) ScanRevisions(ctx context.Context, after int64, limit int, fn func(r *Revision) error) error {
	rows, err := db.reader.QueryContext(ctx, `SELECT `+revisionColumns+` FROM revisions WHERE etag > ? ORDER BY etag LIMIT ?`, after, limit)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanRevision(rows, false)
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// PutRevision stores a revision as given (an import): ignored when one with
// its change vector exists; it reports whether it was stored.
func (tx *Tx) PutRevision(r Revision) (bool, error) {
	if err := ValidateID(r.ID); err != nil {
		return false, err
	}
	if _, err := changevector.Parse(r.ChangeVector); err != nil || r.ChangeVector == "" {
		return false, dberr.New(dberr.BadRequest, "revision of %s: bad change vector %q", r.ID, r.ChangeVector)
	}
	key := LowerID(r.ID)
	_, cname := tx.collectionKey(r.Collection)
	body := r.Body
	if r.Flags&RevisionDelete != 0 {
		body = nil
	}
	ok, err := tx.insertRevision(key, r.ID, cname, r.ChangeVector, r.LastModified.UnixNano(), r.Flags&revisionFlagsMask, body)
	if err != nil || !ok {
		return ok, err
	}
	_, err = tx.exec(sqlMarkHasRevisions, key)
	return true, err
}

// RevertTo makes the revision with change vector cv the document's current
// version again (a new local write: a put of its body, or a delete for a
// delete revision). It reports the write.
func (tx *Tx) RevertTo(id, cv string) (Info, error) {
	r, err := scanRevision(tx.queryRow(sqlGetRevisionByCV, cv), false)
	if errors.Is(err, sql.ErrNoRows) {
		return Info{}, dberr.New(dberr.NotFound, "Revision with change vector '%s' was not found", cv)
	}
	if err != nil {
		return Info{}, err
	}
	if id != "" && !strings.EqualFold(r.ID, id) {
		return Info{}, dberr.New(dberr.BadRequest, "Revision '%s' belongs to '%s', not to '%s'", cv, r.ID, id)
	}
	return tx.revertTo(r)
}

func (tx *Tx) revertTo(r *Revision) (Info, error) {
	if r.Flags&RevisionDelete != 0 {
		info, _, err := tx.Delete(r.ID, nil)
		return info, err
	}
	return tx.Put(r.ID, document.Parsed{Body: r.Body, Collection: r.Collection}, nil)
}

// RevertRevisionsResult counts what RevertRevisions did.
type RevertRevisionsResult struct {
	ScannedRevisions  int64
	ScannedDocuments  int64
	RevertedDocuments int64
}

// RevertRevisions returns every document that has revisions to what it was
// at a time: documents changed after it are put back to their newest
// revision at or before it, and documents created after it (every revision
// newer) are deleted. Documents with no revision changed after the time are
// left alone. window bounds how far back before the time a revision may be
// (0: no bound). It runs in chunks of ids, each its own write.
func (db *DB) RevertRevisions(ctx context.Context, at time.Time, window time.Duration, progress func(RevertRevisionsResult)) (RevertRevisionsResult, error) {
	var res RevertRevisionsResult
	afterKey := ""
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		rows, err := db.reader.QueryContext(ctx, `SELECT key, count(*), max(last_modified) FROM revisions WHERE key > ? GROUP BY key ORDER BY key LIMIT 256`, afterKey)
		if err != nil {
			return res, err
		}
		type group struct {
			key    string
			n      int64
			newest int64
		}
		var groups []group
		for rows.Next() {
			var g group
			if err := rows.Scan(&g.key, &g.n, &g.newest); err != nil {
				rows.Close()
				return res, err
			}
			groups = append(groups, g)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return res, err
		}
		if len(groups) == 0 {
			return res, nil
		}
		afterKey = groups[len(groups)-1].key
		var reverted int64
		err = db.Write(ctx, func(tx *Tx) error {
			reverted = 0
			tx.SetActor("revert")
			for _, g := range groups {
				if g.newest <= at.UnixNano() {
					continue // nothing changed after the time
				}
				r, err := scanRevision(tx.queryRow(sqlRevisionAtOrBefore, g.key, at.UnixNano()), false)
				if err != nil && !errors.Is(err, sql.ErrNoRows) {
					return err
				}
				if r != nil && window > 0 && r.LastModified.Before(at.Add(-window)) {
					continue
				}
				if r == nil {
					// Created after the time: delete it (when it exists).
					var id string
					if err := tx.queryRow(sqlGetRevisionIDByKey, g.key).Scan(&id); err != nil {
						return err
					}
					if _, deleted, err := tx.Delete(id, nil); err != nil {
						return err
					} else if deleted {
						reverted++
					}
					continue
				}
				cur, err := tx.Get(r.ID)
				if err != nil {
					return err
				}
				if cur != nil && cur.ChangeVector == r.ChangeVector || cur == nil && r.Flags&RevisionDelete != 0 {
					continue
				}
				if _, err := tx.revertTo(r); err != nil {
					return err
				}
				reverted++
			}
			return nil
		})
		if err != nil {
			return res, err
		}
		for _, g := range groups {
			res.ScannedRevisions += g.n
		}
		res.ScannedDocuments += int64(len(groups))
		res.RevertedDocuments += reverted
		if progress != nil {
			progress(res)
		}
	}
}

const (
	sqlGetRevisionIDByKey = `SELECT id FROM revisions WHERE key = ? ORDER BY etag DESC LIMIT 1`
	sqlRevisionAtOrBefore = `SELECT ` + revisionColumns + ` FROM revisions WHERE key = ? AND last_modified <= ? ORDER BY last_modified DESC, etag DESC LIMIT 1`
)

func init() {
	writerStatements = append(writerStatements, sqlGetRevisionIDByKey, sqlRevisionAtOrBefore)
}

// ForceRevision stores a revision of the document as it is now, configured
// or not; created is false when that version already is a revision. A
// missing document is an error.
func (tx *Tx) ForceRevision(id string) (info Info, created bool, err error) {
	d, err := tx.Get(id)
	if err != nil {
		return Info{}, false, err
	}
	if d == nil {
		return Info{}, false, dberr.New(dberr.NotFound, "Failed to create revision for document %s because the document doesn't exist", id)
	}
	info = Info{ID: d.ID, Collection: d.Collection, ChangeVector: d.ChangeVector, Etag: d.Etag, LastModified: d.LastModified}
	key := LowerID(d.ID)
	created, err = tx.insertRevision(key, d.ID, d.Collection, d.ChangeVector, d.LastModified.UnixNano(), 0, d.Body)
	if err != nil || !created {
		return info, false, err
	}
	if _, err := tx.exec(sqlMarkHasRevisions, key); err != nil {
		return info, false, err
	}
	return info, true, tx.purgeRevisions(key, tx.revisionsConfig().For(d.Collection))
}
