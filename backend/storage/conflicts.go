package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
)

// Version is one version of a conflicted document, as a resolver sees it.
// Body is the stored form (see package document); nil for a deletion.
type Version struct {
	ID           string
	Collection   string
	ChangeVector string
	LastModified time.Time
	Tombstone    bool
	Body         []byte
}

// Resolution is what a conflict resolves to: a document body (stored form)
// or a deletion. Strategy names what decided it, for the resolution log.
type Resolution struct {
	Tombstone    bool
	Body         []byte
	LastModified time.Time
	Strategy     string
}

// Resolver decides conflicts as replication detects them. It returns false
// when the conflict should stay stored for a person (or a bulk operation)
// to resolve. It runs inside the write transaction, so it must be quick;
// implementations bound scripts by a time limit. Every copy of a database
// must reach the same answer from the same versions.
type Resolver interface {
	ResolveConflict(database, collection string, versions []Version) (Resolution, bool)
}

// SetResolver installs the automatic resolver (nil: every conflict stays).
func (db *DB) SetResolver(r Resolver) {
	db.resolverMu.Lock()
	db.resolver = r
	db.resolverMu.Unlock()
}

func (db *DB) currentResolver() Resolver {
	db.resolverMu.RLock()
	defer db.resolverMu.RUnlock()
	return db.resolver
}

// Fingerprint identifies a set of versions by their change vectors, in any
// order: a bulk operation resolves an id only while its fingerprint is the
// one it previewed.
func Fingerprint(versions []Version) string {
	cvs := make([]string, len(versions))
	for i, v := range versions {
		cvs[i] = v.ChangeVector
	}
	return fingerprintOf(cvs)
}

func fingerprintOf(cvs []string) string {
	sort.Strings(cvs)
	h := sha256.Sum256([]byte(strings.Join(cvs, "\n")))
	return hex.EncodeToString(h[:8])
}

// fullConflicts reads key's stored versions with their bodies, in etag
// order.
func (tx *Tx) fullConflicts(key string) ([]Version, []int64, error) {
	if !tx.mayHaveConflicts() {
		return nil, nil, nil
	}
	rows, err := tx.stmt(sqlConflictFull).Query(key)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var out []Version
	var etags []int64
	for rows.Next() {
		var v Version
		var etag, lm, tomb int64
		if err := rows.Scan(&etag, &v.ID, &v.Collection, &v.ChangeVector, &lm, &tomb, &v.Body); err != nil {
			return nil, nil, err
		}
		v.LastModified, v.Tombstone = time.Unix(0, lm).UTC(), tomb == 1
		out = append(out, v)
		etags = append(etags, etag)
	}
	return out, etags, rows.Err()
}

// ResolveConflict resolves id's stored versions to res as a local write by
// an operator (a person, a bulk operation): the result's vector is the
// merge of the versions plus a new own entry, so it supersedes them on
// every copy (a version this copy never received stays concurrent with it
// and conflicts again where they meet). It does nothing and returns false when the id's versions are
// no longer exactly the ones whose fingerprint is given ("" skips the
// check but still needs a conflict).
func (tx *Tx) ResolveConflict(id, fingerprint string, res Resolution, by string) (bool, Info, error) {
	key := LowerID(id)
	versions, _, err := tx.fullConflicts(key)
	if err != nil || len(versions) == 0 {
		return false, Info{}, err
	}
	if fingerprint != "" && Fingerprint(versions) != fingerprint {
		return false, Info{}, nil
	}
	if err := tx.dropConflicts(key); err != nil {
		return false, Info{}, err
	}
	first := versions[0]
	ckey, cname := tx.collectionKey(first.Collection)
	etag, cv := tx.nextWrite(baseOfVersions(versions))
	lm := tx.now.UnixNano()
	if res.Tombstone {
		if tx.mayHaveTombstones() {
			if err := tx.removeTombstone(key); err != nil {
				return false, Info{}, err
			}
		}
		if _, err := tx.exec(sqlInsertTombstone, etag, key, first.ID, cname, int64(0), cv, lm); err != nil {
			return false, Info{}, err
		}
		tx.delta(ckey, cname).Tombstones++
		tx.changes = append(tx.changes, Change{Type: "Delete", ID: first.ID, Collection: cname, ChangeVector: cv, Etag: etag})
	} else {
		if _, err := tx.exec(sqlInsertDoc, etag, key, first.ID, cname, cv, lm, res.Body); err != nil {
			return false, Info{}, err
		}
		if err := tx.keepHasRevisions(key); err != nil {
			return false, Info{}, err
		}
		if err := tx.syncRefs(key, res.Body); err != nil { // attachments
			return false, Info{}, err
		}
		tx.delta(ckey, cname).Docs++
		tx.noteID(first.ID, 1)
		tx.changes = append(tx.changes, Change{Type: "Put", ID: first.ID, Collection: cname, ChangeVector: cv, Etag: etag})
	}
	err = tx.logResolution(first.ID, cname, res.Strategy, by, versions, Version{
		ID: first.ID, Collection: cname, ChangeVector: cv, LastModified: tx.now, Tombstone: res.Tombstone, Body: res.Body,
	})
	return err == nil, Info{ID: first.ID, Collection: cname, ChangeVector: cv, Etag: etag, LastModified: tx.now}, err
}

// appendLogged writes a version as the resolution log keeps it (the JSON
// of LoggedVersion). Bodies are stored forms, valid JSON already, and go in
// as they are: no re-encoding on the resolution path.
func appendLogged(b []byte, v Version) []byte {
	b = append(b, `{"ChangeVector":`...)
	b = document.AppendString(b, v.ChangeVector)
	b = append(b, `,"LastModified":"`...)
	b = v.LastModified.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","Tombstone":`...)
	b = strconv.AppendBool(b, v.Tombstone)
	if !v.Tombstone && len(v.Body) > 0 {
		b = append(b, `,"Body":`...)
		b = append(b, v.Body...)
	}
	return append(b, '}')
}

// logResolution appends to the resolution log, in the same transaction as
// the resolution.
func (tx *Tx) logResolution(id, collection, strategy, by string, versions []Version, result Version) error {
	size := 64
	for _, v := range versions {
		size += len(v.Body) + len(v.ChangeVector) + 96
	}
	vb := make([]byte, 0, size)
	vb = append(vb, '[')
	for i, v := range versions {
		if i > 0 {
			vb = append(vb, ',')
		}
		vb = appendLogged(vb, v)
	}
	vb = append(vb, ']')
	rb := appendLogged(make([]byte, 0, len(result.Body)+160), result)
	if _, err := tx.exec(sqlLogResolution, LowerID(id), id, collection, tx.now.UnixNano(), strategy, by, tx.db.nodeTag, string(vb), string(rb)); err != nil {
		return err
	}
	return tx.revisionOfResolution(result)
}

// ConflictSummary is one conflicted id for listings.
type ConflictSummary struct {
	ID           string
	Collection   string
	Versions     int
	LastModified time.Time // of the newest version
	LargestEtag  int64
}

// ConflictFilter narrows a listing or a bulk operation's scope.
type ConflictFilter struct {
	Collection string   // exact, case-insensitive
	Prefix     string   // id prefix, case-insensitive
	IDs        []string // a chosen selection
	AfterKey   string   // keyset paging: lower-cased id to start after
}

func (f ConflictFilter) where() (string, []any) {
	var conds []string
	var args []any
	if f.Collection != "" {
		conds = append(conds, "lower(collection) = ?")
		args = append(args, strings.ToLower(f.Collection))
	}
	if f.Prefix != "" {
		p := LowerID(f.Prefix)
		conds = append(conds, "key >= ? AND key < ?")
		args = append(args, p, p+"\U0010FFFF")
	}
	if len(f.IDs) > 0 {
		ph := strings.TrimSuffix(strings.Repeat("?,", len(f.IDs)), ",")
		conds = append(conds, "key IN ("+ph+")")
		for _, id := range f.IDs {
			args = append(args, LowerID(id))
		}
	}
	if f.AfterKey != "" {
		conds = append(conds, "key > ?")
		args = append(args, f.AfterKey)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// ConflictList lists conflicted ids matching f in id order, with the keyset
// cursor of the last one.
func (db *DB) ConflictList(ctx context.Context, f ConflictFilter, limit int) ([]ConflictSummary, string, error) {
	if !db.conflicted.Load() {
		return nil, "", nil
	}
	where, args := f.where()
	rows, err := db.reader.QueryContext(ctx, `SELECT key, min(id), min(collection), count(*), max(last_modified), max(etag) FROM conflicts`+where+` GROUP BY key ORDER BY key LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []ConflictSummary
	var last string
	for rows.Next() {
		var s ConflictSummary
		var lm int64
		if err := rows.Scan(&last, &s.ID, &s.Collection, &s.Versions, &lm, &s.LargestEtag); err != nil {
			return nil, "", err
		}
		s.LastModified = time.Unix(0, lm).UTC()
		out = append(out, s)
	}
	return out, last, rows.Err()
}

// ConflictTotal counts the conflicted ids matching f.
func (db *DB) ConflictTotal(ctx context.Context, f ConflictFilter) (int, error) {
	if !db.conflicted.Load() {
		return 0, nil
	}
	f.AfterKey = ""
	where, args := f.where()
	var n int
	err := db.reader.QueryRowContext(ctx, `SELECT count(DISTINCT key) FROM conflicts`+where, args...).Scan(&n)
	return n, err
}

// ConflictsByEtag lists conflicted ids in order of their newest version's
// etag (the RavenDB listing order), with the total.
func (db *DB) ConflictsByEtag(ctx context.Context, start, pageSize int) ([]ConflictSummary, int, error) {
	if !db.conflicted.Load() {
		return nil, 0, nil
	}
	total, err := db.ConflictTotal(ctx, ConflictFilter{})
	if err != nil {
		return nil, 0, err
	}
	rows, err := db.reader.QueryContext(ctx, `SELECT min(id), min(collection), count(*), max(last_modified), max(etag) AS e FROM conflicts GROUP BY key ORDER BY e LIMIT ? OFFSET ?`, pageSize, start)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []ConflictSummary
	for rows.Next() {
		var s ConflictSummary
		var lm int64
		if err := rows.Scan(&s.ID, &s.Collection, &s.Versions, &lm, &s.LargestEtag); err != nil {
			return nil, 0, err
		}
		s.LastModified = time.Unix(0, lm).UTC()
		out = append(out, s)
	}
	return out, total, rows.Err()
}

// ConflictVersions reads the stored versions of each of ids (lower-cased
// keys in the map), for a bulk operation's chunk.
func (db *DB) ConflictVersions(ctx context.Context, ids []string) (map[string][]Version, error) {
	out := map[string][]Version{}
	if len(ids) == 0 || !db.conflicted.Load() {
		return out, nil
	}
	where, args := ConflictFilter{IDs: ids}.where()
	rows, err := db.reader.QueryContext(ctx, `SELECT key, id, collection, change_vector, last_modified, tombstone, body FROM conflicts`+where+` ORDER BY key, etag`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var v Version
		var lm, tomb int64
		if err := rows.Scan(&key, &v.ID, &v.Collection, &v.ChangeVector, &lm, &tomb, &v.Body); err != nil {
			return nil, err
		}
		v.LastModified, v.Tombstone = time.Unix(0, lm).UTC(), tomb == 1
		out[key] = append(out[key], v)
	}
	return out, rows.Err()
}

// ResolutionEntry is one line of the resolution log: every version a
// resolution replaced and what it resolved to.
type ResolutionEntry struct {
	Seq        int64
	ID         string
	Collection string
	At         time.Time
	Strategy   string
	By         string
	Node       string
	Versions   []LoggedVersion
	Result     LoggedVersion
}

// LoggedVersion is a version as the log keeps it.
type LoggedVersion struct {
	ChangeVector string
	LastModified time.Time
	Tombstone    bool
	Body         json.RawMessage `json:",omitempty"` // stored form
}

// ResolutionFilter narrows the resolution log.
type ResolutionFilter struct {
	ID         string // exact id, case-insensitive
	Prefix     string
	Collection string
	Strategy   string // prefix match: "auto" matches "auto:latest"
	By         string // prefix match
	BeforeSeq  int64  // keyset paging, newest first
}

// Resolutions reads the log, newest first, and the number of entries
// matching the filter.
func (db *DB) Resolutions(ctx context.Context, f ResolutionFilter, limit int) ([]ResolutionEntry, int, error) {
	var conds []string
	var args []any
	if f.ID != "" {
		conds, args = append(conds, "key = ?"), append(args, LowerID(f.ID))
	}
	if f.Prefix != "" {
		p := LowerID(f.Prefix)
		conds, args = append(conds, "key >= ? AND key < ?"), append(args, p, p+"\U0010FFFF")
	}
	if f.Collection != "" {
		conds, args = append(conds, "lower(collection) = ?"), append(args, strings.ToLower(f.Collection))
	}
	if f.Strategy != "" {
		conds, args = append(conds, "substr(strategy, 1, ?) = ?"), append(args, len(f.Strategy), f.Strategy)
	}
	if f.By != "" {
		conds, args = append(conds, "substr(by, 1, ?) = ?"), append(args, len(f.By), f.By)
	}
	where := ""
	if len(conds) > 0 {
		where = " WHERE " + strings.Join(conds, " AND ")
	}
	var total int
	if err := db.reader.QueryRowContext(ctx, `SELECT count(*) FROM resolutions`+where, args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	if f.BeforeSeq > 0 {
		if where == "" {
			where = " WHERE seq < ?"
		} else {
			where += " AND seq < ?"
		}
		args = append(args, f.BeforeSeq)
	}
	rows, err := db.reader.QueryContext(ctx, `SELECT seq, id, collection, at, strategy, by, node, versions, result FROM resolutions`+where+` ORDER BY seq DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []ResolutionEntry
	for rows.Next() {
		var e ResolutionEntry
		var at int64
		var vs, rs string
		if err := rows.Scan(&e.Seq, &e.ID, &e.Collection, &at, &e.Strategy, &e.By, &e.Node, &vs, &rs); err != nil {
			return nil, 0, err
		}
		e.At = time.Unix(0, at).UTC()
		if err := json.Unmarshal([]byte(vs), &e.Versions); err != nil {
			return nil, 0, err
		}
		if err := json.Unmarshal([]byte(rs), &e.Result); err != nil {
			return nil, 0, err
		}
		out = append(out, e)
	}
	return out, total, rows.Err()
}

// Resolution reads one log entry.
func (db *DB) Resolution(ctx context.Context, seq int64) (ResolutionEntry, error) {
	list, _, err := db.Resolutions(ctx, ResolutionFilter{BeforeSeq: seq + 1}, 1)
	if err != nil {
		return ResolutionEntry{}, err
	}
	if len(list) == 0 || list[0].Seq != seq {
		return ResolutionEntry{}, dberr.New(dberr.NotFound, "resolution log entry %d does not exist", seq)
	}
	return list[0], nil
}

// CollectionConflicts is how many conflicted ids a collection has.
type CollectionConflicts struct {
	Name string // as first spelled by the id's versions
	IDs  int64
}

// ConflictsPerCollection counts conflicted ids per collection, keyed by the
// lower-cased collection name. An id whose versions disagree on their
// collection counts once, in the collection of its smallest spelling (the
// one ConflictList shows). Like ConflictTotal it reads the conflicts
// table (one row per stored version), not the documents, and costs
// nothing while the database has never held a conflict.
func (db *DB) ConflictsPerCollection(ctx context.Context) (map[string]CollectionConflicts, error) {
	out := map[string]CollectionConflicts{}
	if !db.conflicted.Load() {
		return out, nil
	}
	rows, err := db.reader.QueryContext(ctx, `SELECT min(c), count(*) FROM (SELECT min(collection) AS c FROM conflicts GROUP BY key) GROUP BY lower(c)`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var c CollectionConflicts
		if err := rows.Scan(&c.Name, &c.IDs); err != nil {
			return nil, err
		}
		out[strings.ToLower(c.Name)] = c
	}
	return out, rows.Err()
}

// ConflictPageByEtag lists conflicted ids of collection ("" for all) whose
// newest version's etag is below before (0 for no bound), newest first:
// the keyset order of PageByEtag. Conflict versions draw their etags from
// the documents' counter, so a grid can merge both lists by etag and keep
// one cursor.
func (db *DB) ConflictPageByEtag(ctx context.Context, collection string, before int64, limit int) ([]ConflictSummary, error) {
	if !db.conflicted.Load() {
		return nil, nil
	}
	if before <= 0 {
		before = math.MaxInt64
	}
	where, args := ConflictFilter{Collection: collection}.where()
	rows, err := db.reader.QueryContext(ctx, `SELECT min(id), min(collection), count(*), max(last_modified), max(etag) AS e FROM conflicts`+where+` GROUP BY key HAVING e < ? ORDER BY e DESC LIMIT ?`, append(args, before, limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ConflictSummary
	for rows.Next() {
		var s ConflictSummary
		var lm int64
		if err := rows.Scan(&s.ID, &s.Collection, &s.Versions, &lm, &s.LargestEtag); err != nil {
			return nil, err
		}
		s.LastModified = time.Unix(0, lm).UTC()
		out = append(out, s)
	}
	return out, rows.Err()
}
