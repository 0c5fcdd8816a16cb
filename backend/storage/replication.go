package storage

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/dberr"
)

// Item is one change as replication carries it: a document version or a
// tombstone, with the change vector it was written with and its etag on the
// source. Body is the stored form, passed through without re-encoding.
type Item struct {
	Type         string // "Put" or "Delete"
	ID           string
	Collection   string
	ChangeVector string
	Etag         int64
	LastModified time.Time
	Body         []byte
	// Conflict: the item is a stored conflict version.
	Conflict bool
	// Kind is what the item is: a document version (or tombstone), or an
	// extension's item (KindRevision, KindTimeSeries, ...).
	Kind ItemKind
	// RevisionFlags are a KindRevision item's flags.
	RevisionFlags RevisionFlags
	// Unordered: the version's vector does not carry a fresh entry of the
	// copy that wrote it (a merge of concurrent versions, a conflict
	// version, or a version that came from one), so copies may learn of it
	// after writes it did not precede. A sender must send it even when the
	// destination's database vector already covers its vector; for other
	// items that means the destination has it or something newer.
	Unordered bool
}

// ItemKind says what a replicated item carries (bits 2-4 of the wire
// item's kind byte).
type ItemKind uint8

// KindDocument is a document version or tombstone.
const KindDocument ItemKind = 0

// KindAttachment is an attachment content chunk: ID the hash, Body see
// AttachmentChunkBody.
const KindAttachment ItemKind = 1

// flagUnordered marks a stored version as Unordered (docs and tombstones
// flags column).
const flagUnordered = 1

// Skippable tells a sender that it may leave the item out for a
// destination whose database vector is dest: the vector is already merged
// there and the item is not Unordered.
func (it Item) Skippable(dest changevector.Vector) bool {
	if it.Unordered || it.Conflict || it.Kind != KindDocument {
		return false
	}
	cv, err := changevector.ParseStored(it.ChangeVector)
	return err == nil && changevector.Compare(cv, dest) == changevector.AlreadyMerged
}

// ChangesAfter returns up to limit documents, tombstones and conflict
// versions, and the extensions' changes (see ScanReplicationAfter), with an
// etag above after, in etag order: what a replication
// destination reads next. Conflict versions travel too, so every copy ends
// up with the same set. See ChangesAfterBytes.
func (db *DB) ChangesAfter(ctx context.Context, after int64, limit int) ([]Item, error) {
	var out []Item
	err := db.ScanReplicationAfter(ctx, after, limit, 0, func(it *Item) error {
		c := *it
		c.Body = bytes.Clone(it.Body)
		out = append(out, c)
		return nil
	})
	return out, err
}

// Outcome says what applying a replicated item did.
type Outcome int

const (
	// Skipped: this copy had already seen the item.
	Skipped Outcome = iota
	// Applied: the item was newer and replaced the local version.
	Applied
	// Merged: the versions were concurrent but equal (same content, or a
	// HiLo document whose highest Max won); stored with the merged vector.
	Merged
	// Conflicted: the versions were concurrent and different; all of them
	// are kept in the conflicts table.
	Conflicted
	// Resolved: the versions were concurrent and different, and the
	// database's resolver decided them; the resolution log has every
	// version.
	Resolved
)

func (o Outcome) String() string {
	return [...]string{"Skipped", "Applied", "Merged", "Conflicted", "Resolved"}[o]
}

// autoResolve asks the database's resolver to decide a conflict between the
// incoming item and the local version (when it exists) or the stored
// versions it has not superseded. Every copy reaches the same content from the same versions; the
// result is written as a local version (see below). It reports false when
// there is no resolver, the versions span collections, or the resolver
// declines.
func (tx *Tx) autoResolve(key string, it Item, stored []Version, local localVersion) (bool, error) {
	r := tx.db.currentResolver()
	if r == nil {
		return false, nil
	}
	versions := append([]Version(nil), stored...)
	if local.exists {
		versions = append(versions, Version{ID: local.id, Collection: local.coll, ChangeVector: local.cv,
			LastModified: time.Unix(0, local.lm).UTC(), Tombstone: local.tombstone, Body: local.body})
	}
	versions = append(versions, Version{ID: it.ID, Collection: it.Collection, ChangeVector: it.ChangeVector,
		LastModified: it.LastModified, Tombstone: it.Type == "Delete", Body: it.Body})
	coll := versions[0].Collection
	for _, v := range versions[1:] {
		if !strings.EqualFold(v.Collection, coll) {
			return false, nil
		}
	}
	res, ok := r.ResolveConflict(tx.db.name, coll, versions)
	if !ok {
		return false, nil
	}
	if local.exists {
		if err := tx.removeLocal(key, local); err != nil {
			return false, err
		}
	} else if err := tx.dropConflicts(key); err != nil {
		return false, err
	}
	// The result is a new local version: the merge of every version it
	// decided plus an entry of this copy's own, so that it supersedes the
	// versions on copies that stored the conflict instead of resolving it.
	// Copies that resolved alike hold identical content and merge without
	// another entry.
	_, cv := tx.peekWrite(baseOfVersions(versions))
	out := Item{Type: "Put", ID: versions[0].ID, Collection: coll, ChangeVector: cv, LastModified: res.LastModified, Body: res.Body}
	if res.Tombstone {
		out.Type, out.Body = "Delete", nil
	}
	if err := tx.writeVersion(key, out, localVersion{}); err != nil { // takes the peeked etag
		return false, err
	}
	tx.cv, tx.cvText = tx.pendingCV, tx.pendingText
	_, cname := tx.collectionKey(coll)
	return true, tx.logResolution(out.ID, cname, res.Strategy, "auto", versions, Version{
		ID: out.ID, Collection: cname, ChangeVector: out.ChangeVector, LastModified: out.LastModified, Tombstone: res.Tombstone, Body: out.Body,
	})
}

type localVersion struct {
	exists    bool
	tombstone bool
	etag      int64
	id        string
	coll      string
	cv        string
	body      []byte
	lm        int64
}

func (tx *Tx) localVersion(key string) (localVersion, error) {
	var v localVersion
	err := tx.queryRow(sqlGetDoc, key).Scan(&v.etag, &v.id, &v.coll, &v.cv, &v.lm, new(int64), &v.body)
	if err == nil {
		v.exists = true
		return v, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return v, err
	}
	if !tx.mayHaveTombstones() {
		return v, nil
	}
	err = tx.queryRow(sqlGetTombstone, key).Scan(&v.etag, &v.id, &v.coll, &v.cv, &v.lm)
	if err == nil {
		v.exists, v.tombstone = true, true
		return v, nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return v, nil
	}
	return v, err
}

// ApplyReplicated applies an item that came from another copy of this
// database. Its change vector decides: already seen (skip), newer (apply
// with that vector), or concurrent (merge when equal, else keep every
// version as a conflict). The database vector absorbs the item's vector in
// every case.
func (tx *Tx) ApplyReplicated(it Item) (Outcome, error) {
	switch it.Kind {
	case KindDocument:
	case KindAttachment:
		return tx.applyAttachmentChunk(it)
	case KindRevision:
		return tx.applyRevision(it)
	case KindTimeSeries:
		return tx.applyTimeSeries(it)
	case KindCounters:
		return tx.applyCounters(it)
	default:
		return Skipped, dberr.New(dberr.BadRequest, "replicated item %s: unknown kind %d", it.ID, it.Kind)
	}
	incoming, err := changevector.Parse(it.ChangeVector)
	if err != nil {
		return Skipped, dberr.New(dberr.BadRequest, "replicated item %s: %v", it.ID, err)
	}
	if err := ValidateID(it.ID); err != nil {
		return Skipped, err
	}
	key := LowerID(it.ID)
	tx.absorb(incoming)
	conflicts, etags, err := tx.fullConflicts(key)
	if err != nil {
		return Skipped, err
	}
	if len(conflicts) > 0 {
		for _, c := range conflicts {
			cv, _ := changevector.ParseStored(c.ChangeVector)
			if changevector.Compare(incoming, cv) == changevector.AlreadyMerged {
				return Skipped, nil
			}
		}
		// The stored versions are those no other version has seen; drop
		// the ones this item supersedes, so every copy keeps the same set
		// whatever order the versions arrive in.
		var left []Version
		for i, c := range conflicts {
			cv, _ := changevector.ParseStored(c.ChangeVector)
			if changevector.Compare(incoming, cv) == changevector.Update {
				if _, err := tx.exec(sqlDeleteConflictByEtag, etags[i]); err != nil {
					return Skipped, err
				}
				if err := tx.releaseListed(c.Body); err != nil {
					return Skipped, err
				}
				continue
			}
			left = append(left, c)
		}
		if len(left) == 0 {
			// Newer than every version: it resolves the conflict.
			return Applied, tx.writeVersion(key, it, localVersion{})
		}
		if ok, err := tx.autoResolve(key, it, left, localVersion{}); ok || err != nil {
			return Resolved, err
		}
		return Conflicted, tx.addConflict(key, it)
	}
	// Fast path for an id this copy has never seen (catch-up, new
	// documents): while the database holds no tombstone, an insert that
	// succeeds proves there was no local version, so the item is newer.
	// (Unordered versions take the long way, which stores their flag.)
	if it.Type == "Put" && !it.Unordered && !it.Conflict && len(incoming) > 0 && !tx.mayHaveTombstones() {
		if inserted, err := tx.insertNewVersion(key, it); err != nil || inserted {
			return Applied, err
		}
	}
	local, err := tx.localVersion(key)
	if err != nil {
		return Skipped, err
	}
	localCV, _ := changevector.ParseStored(local.cv)
	switch changevector.Compare(incoming, localCV) {
	case changevector.AlreadyMerged:
		return Skipped, nil
	case changevector.Update:
		return Applied, tx.writeVersion(key, it, local)
	}
	// Concurrent versions.
	merged := changevector.Merge(incoming, localCV).String()
	switch {
	case local.tombstone && it.Type == "Delete",
		!local.tombstone && it.Type == "Put" && bytes.Equal(local.body, it.Body):
		it.ChangeVector, it.Unordered = merged, true
		return Merged, tx.writeVersion(key, it, local)
	case !local.tombstone && it.Type == "Put" && mergeAttachments(&it, local.body):
		// Versions that differ only in their attachments: the union.
		it.ChangeVector, it.Unordered = merged, true
		return Merged, tx.writeVersion(key, it, local)
	case !local.tombstone && it.Type == "Put" && mergeSeriesNames(&it, local.body):
		// Versions that differ only in their time-series names merge.
		it.ChangeVector, it.Unordered = merged, true
		return Merged, tx.writeVersion(key, it, local)
	case !local.tombstone && it.Type == "Put" && strings.HasPrefix(key, "raven/hilo/"):
		// HiLo documents never conflict: the highest Max wins, so a range
		// is never handed out twice.
		if hiloMax(local.body) > hiloMax(it.Body) {
			it.Body, it.LastModified = local.body, time.Unix(0, local.lm).UTC()
		}
		it.ChangeVector, it.Unordered = merged, true
		return Merged, tx.writeVersion(key, it, local)
	}
	if ok, err := tx.autoResolve(key, it, nil, local); ok || err != nil {
		return Resolved, err
	}
	// Keep both: the local version moves into the conflicts table.
	if err := tx.addConflict(key, Item{
		Type: map[bool]string{true: "Delete", false: "Put"}[local.tombstone], ID: local.id, Collection: local.coll,
		ChangeVector: local.cv, LastModified: time.Unix(0, local.lm).UTC(), Body: local.body,
	}); err != nil {
		return Skipped, err
	}
	if err := tx.removeLocal(key, local); err != nil {
		return Skipped, err
	}
	return Conflicted, tx.addConflict(key, it)
}

func hiloMax(body []byte) int64 {
	var v struct{ Max int64 }
	_ = json.Unmarshal(body, &v)
	return v.Max
}

// absorb merges a replicated vector into the database vector.
func (tx *Tx) absorb(v changevector.Vector) {
	tx.cv = changevector.Merge(tx.cv, v)
	tx.cvText = tx.cv.String()
}

// writeVersion stores a replicated version (document or tombstone) with its
// own change vector, replacing whatever local version there is.
func (tx *Tx) writeVersion(key string, it Item, local localVersion) error {
	if err := tx.removeLocal(key, local); err != nil {
		return err
	}
	tx.lastEtag++
	etag := tx.lastEtag
	ckey, cname := tx.collectionKey(it.Collection)
	lm := it.LastModified.UnixNano()
	id := it.ID
	if local.exists {
		id = local.id // ids keep their first spelling
	}
	var flags int64
	if it.Unordered || it.Conflict {
		flags = flagUnordered // a version that came from a conflict stays unordered
	}
	if it.Type == "Delete" {
		if err := tx.dropSeries(key); err != nil {
			return err
		}
		if err := tx.dropCounters(key); err != nil {
			return err
		}
		if _, err := tx.exec(sqlInsertReplTombstone, etag, key, id, cname, local.etag, it.ChangeVector, lm, flags); err != nil {
			return err
		}
		tx.delta(ckey, cname).Tombstones++
		tx.changes = append(tx.changes, Change{Type: "Delete", ID: id, Collection: cname, ChangeVector: it.ChangeVector, Etag: etag})
		return tx.revisionAfterReplicatedDelete(key, cname)
	}
	if _, err := tx.exec(sqlInsertReplDoc, etag, key, id, cname, it.ChangeVector, lm, flags, it.Body); err != nil {
		return err
	}
	if err := tx.keepHasRevisions(key); err != nil {
		return err
	}
	if err := tx.syncRefs(key, it.Body); err != nil { // attachments
		return err
	}
	tx.delta(ckey, cname).Docs++
	tx.noteID(id, 1)
	tx.changes = append(tx.changes, Change{Type: "Put", ID: id, Collection: cname, ChangeVector: it.ChangeVector, Etag: etag})
	return nil
}

// insertNewVersion stores a replicated document unless the id exists; it
// reports whether it did.
func (tx *Tx) insertNewVersion(key string, it Item) (bool, error) {
	ckey, cname := tx.collectionKey(it.Collection)
	etag := tx.lastEtag + 1
	res, err := tx.exec(sqlInsertNewDoc, etag, key, it.ID, cname, it.ChangeVector, it.LastModified.UnixNano(), it.Body)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	tx.lastEtag = etag
	if err := tx.keepHasRevisions(key); err != nil {
		return false, err
	}
	if err := tx.syncRefs(key, it.Body); err != nil { // attachments
		return false, err
	}
	tx.delta(ckey, cname).Docs++
	tx.noteID(it.ID, 1)
	tx.changes = append(tx.changes, Change{Type: "Put", ID: it.ID, Collection: cname, ChangeVector: it.ChangeVector, Etag: etag})
	return true, nil
}

// removeLocal deletes the local document or tombstone row of key.
func (tx *Tx) removeLocal(key string, local localVersion) error {
	if !local.exists {
		return nil
	}
	ckey, cname := tx.collectionKey(local.coll)
	if local.tombstone {
		if _, err := tx.exec(sqlDeleteTombstoneByEtag, local.etag); err != nil {
			return err
		}
		tx.delta(ckey, cname).Tombstones--
		return nil
	}
	if _, err := tx.exec(sqlDeleteDoc, local.etag); err != nil {
		return err
	}
	dropped, err := tx.dropRefs(key, false) // attachments
	if err != nil {
		return err
	}
	if err := tx.release(dropped); err != nil {
		return err
	}
	tx.delta(ckey, cname).Docs--
	tx.noteID(local.id, -1)
	return nil
}

// mayHaveConflicts is false while the database has never held a conflict,
// sparing every write a lookup.
func (tx *Tx) mayHaveConflicts() bool {
	return tx.anyConflicts || tx.db.conflicted.Load()
}

// takeConflicts drops the stored versions of key (a local write is
// resolving them) and returns what they were.
func (tx *Tx) takeConflicts(key string) ([]Version, error) {
	versions, _, err := tx.fullConflicts(key)
	if err != nil || len(versions) == 0 {
		return nil, err
	}
	return versions, tx.dropConflicts(key)
}

func (tx *Tx) addConflict(key string, it Item) error {
	tx.anyConflicts = true
	tx.lastEtag++
	tomb := 0
	if it.Type == "Delete" {
		tomb = 1
	}
	_, cname := tx.collectionKey(it.Collection)
	if _, err := tx.exec(sqlInsertConflict, tx.lastEtag, key, it.ID, cname, it.ChangeVector, it.LastModified.UnixNano(), tomb, it.Body); err != nil {
		return err
	}
	return tx.revisionOfConflict(key, it)
}

// dropConflicts drops the stored versions of key; the contents they listed
// are released (the version that replaces them lists its own).
func (tx *Tx) dropConflicts(key string) error {
	if tx.mayHaveAttachments() {
		bodies, err := column[[]byte](tx.tx.Query(`SELECT body FROM conflicts WHERE key = ? AND instr(body, '"@attachments"') > 0`, key))
		if err != nil {
			return err
		}
		for _, b := range bodies {
			if err := tx.releaseListed(b); err != nil {
				return err
			}
		}
	}
	_, err := tx.exec(sqlDropConflicts, key)
	return err
}

// SourceEtag is the last etag accepted from a source copy (by database id).
func (tx *Tx) SourceEtag(source string) (int64, error) {
	var v int64
	err := tx.queryRow(sqlGetSourceEtag, source).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// SetSourceEtag records the last etag accepted from a source copy.
func (tx *Tx) SetSourceEtag(source string, etag int64) error {
	_, err := tx.exec(sqlSetSourceEtag, source, etag)
	return err
}

// HasConflict tells whether an id is in conflict.
func (db *DB) HasConflict(ctx context.Context, id string) (bool, error) {
	if !db.conflicted.Load() {
		return false, nil
	}
	var one int
	err := db.reader.QueryRowContext(ctx, `SELECT 1 FROM conflicts WHERE key = ? LIMIT 1`, LowerID(id)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// ConflictCount is the number of conflicted ids.
func (db *DB) ConflictCount(ctx context.Context) (int, error) {
	return db.ConflictTotal(ctx, ConflictFilter{})
}

// ConflictCounts returns the number of conflicted ids and of stored
// conflict versions.
func (db *DB) ConflictCounts(ctx context.Context) (ids, versions int, err error) {
	if !db.conflicted.Load() {
		return 0, 0, nil
	}
	err = db.reader.QueryRowContext(ctx, `SELECT COUNT(DISTINCT key), COUNT(*) FROM conflicts`).Scan(&ids, &versions)
	return ids, versions, err
}
