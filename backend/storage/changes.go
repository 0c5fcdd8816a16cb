package storage

import (
	"bytes"
	"context"
	"database/sql"
	"time"
)

// sqlChangesAfter reads documents, tombstones, conflict versions and
// revisions after an etag, in etag order. SQLite merges the rowid-ordered
// scans (no sort). The last column is the item's Kind; a revision's flags
// travel above bit 8 of the flags column (always Unordered).
const sqlChangesAfter = `
	SELECT 'Put', etag, id, collection, change_vector, last_modified, body, 0, flags, 0 FROM docs WHERE etag > ?1
	UNION ALL
	SELECT 'Delete', etag, id, collection, change_vector, last_modified, NULL, 0, flags, 0 FROM tombstones WHERE etag > ?1
	UNION ALL
	SELECT CASE tombstone WHEN 1 THEN 'Delete' ELSE 'Put' END, etag, id, collection, change_vector, last_modified, body, 1, 1, 0 FROM conflicts WHERE etag > ?1
	UNION ALL
	SELECT 'Put', etag, hash, '', change_vector, pos, data, 0, size, 1 FROM attachment_chunks WHERE etag > ?1
	UNION ALL
	SELECT CASE flags & 1 WHEN 1 THEN 'Delete' ELSE 'Put' END, etag, id, collection, change_vector, last_modified, body, 0, 1 | (flags << 8), 2 FROM revisions WHERE etag > ?1
	UNION ALL
	SELECT 'Put', etag, doc_id, name, '', last_modified, CAST(parts AS BLOB), 0, 0, 3 FROM counters WHERE etag > ?1
	ORDER BY 2 LIMIT ?2`

// sqlReplicationAfter is sqlChangesAfter with the time series' changes
// (KindTimeSeries items), for replication only. sqlChangesAfter carries the
// other extensions' items too (revisions…), which its other readers
// (indexes, queries, export) skip by Kind.
const sqlReplicationAfter = `
	SELECT 'Put', etag, id, collection, change_vector, last_modified, body, 0, flags, 0 FROM docs WHERE etag > ?1
	UNION ALL
	SELECT 'Delete', etag, id, collection, change_vector, last_modified, NULL, 0, flags, 0 FROM tombstones WHERE etag > ?1
	UNION ALL
	SELECT CASE tombstone WHEN 1 THEN 'Delete' ELSE 'Put' END, etag, id, collection, change_vector, last_modified, body, 1, 1, 0 FROM conflicts WHERE etag > ?1
	UNION ALL
	SELECT CASE flags & 1 WHEN 1 THEN 'Delete' ELSE 'Put' END, etag, id, collection, change_vector, last_modified, body, 0, 1 | (flags << 8), 2 FROM revisions WHERE etag > ?1
	UNION ALL
	SELECT 'Put', etag, doc_id, name, '', last_modified, CAST(parts AS BLOB), 0, 0, 3 FROM counters WHERE etag > ?1
	UNION ALL
	SELECT 'Put', etag, hash, '', change_vector, pos, data, 0, size, 1 FROM attachment_chunks WHERE etag > ?1
	UNION ALL
	SELECT 'Put', etag, coalesce((SELECT doc_id FROM ts_series s WHERE s.doc_key = e.doc_key AND s.lname = e.lname), doc_key),
		coalesce((SELECT name FROM ts_series s WHERE s.doc_key = e.doc_key AND s.lname = e.lname), lname),
		CAST(lamport AS TEXT), ts * 1, data, 0, 0, 4 FROM ts_entries e WHERE etag > ?1
	UNION ALL
	SELECT 'Delete', etag, coalesce((SELECT doc_id FROM ts_series s WHERE s.doc_key = d.doc_key AND s.lname = d.lname), doc_key),
		coalesce((SELECT name FROM ts_series s WHERE s.doc_key = d.doc_key AND s.lname = d.lname), lname),
		CAST(lamport AS TEXT), from_ts, CAST(to_ts AS TEXT), 0, 0, 4 FROM ts_deletes d WHERE etag > ?1
	ORDER BY 2 LIMIT ?2`

// ChangesAfterBytes returns the changes after an etag, in etag order, up to
// limit items and, when maxBytes > 0, up to about maxBytes: it stops after
// the item that reaches the bound, so it always returns at least one item
// when there is one. The tables are walked by their rowid (the etag).
func (db *DB) ChangesAfterBytes(ctx context.Context, after int64, limit, maxBytes int) ([]Item, error) {
	var out []Item
	err := db.ScanChangesAfter(ctx, after, limit, maxBytes, func(it *Item) error {
		c := *it
		c.Body = bytes.Clone(it.Body)
		out = append(out, c)
		return nil
	})
	return out, err
}

// ScanChangesAfter visits what ChangesAfterBytes returns without copying
// the bodies: it.Body is only valid during the call (a sender encodes it
// straight into a message).
func (db *DB) ScanChangesAfter(ctx context.Context, after int64, limit, maxBytes int, fn func(it *Item) error) error {
	return db.scanAfter(ctx, db.rscan, after, limit, maxBytes, fn)
}

// ScanReplicationAfter is ScanChangesAfter with the changes of the
// document extensions (Item.Kind != KindDocument) in the same etag order:
// what a replication sender sends.
func (db *DB) ScanReplicationAfter(ctx context.Context, after int64, limit, maxBytes int, fn func(it *Item) error) error {
	return db.scanAfter(ctx, db.rrepl, after, limit, maxBytes, fn)
}

func (db *DB) scanAfter(ctx context.Context, stmt *sql.Stmt, after int64, limit, maxBytes int, fn func(it *Item) error) error {
	// Prepared once: replication reads after every commit, and parsing
	// this compound query cost more than running it.
	rows, err := stmt.QueryContext(ctx, after, limit)
	if err != nil {
		return err
	}
	defer rows.Close()
	size := 0
	var it Item
	var body sql.RawBytes
	var chunk []byte
	for rows.Next() {
		var lm, flags int64
		if err := rows.Scan(&it.Type, &it.Etag, &it.ID, &it.Collection, &it.ChangeVector, &lm, &body, &it.Conflict, &flags, &it.Kind); err != nil {
			return err
		}
		it.Unordered = flags&flagUnordered != 0
		it.RevisionFlags = 0
		if it.Kind == KindRevision {
			it.RevisionFlags = RevisionFlags(flags>>8) &^ RevisionDelete // the Delete type says it
		}
		it.LastModified = time.Unix(0, lm).UTC()
		it.Body = body
		if it.Kind == KindAttachment { // lm is the chunk's position, flags the content's size
			chunk = AttachmentChunkBody(chunk[:0], lm, flags, body)
			it.Body, it.Unordered, it.LastModified = chunk, false, time.Unix(0, 0).UTC()
		}
		db.reads.Add(1)
		if err := fn(&it); err != nil {
			return err
		}
		size += len(body) + len(it.ID) + len(it.ChangeVector)
		if maxBytes > 0 && size >= maxBytes {
			break
		}
	}
	return rows.Err()
}

// CountChangesAfter is how many items (documents, tombstones and conflict
// versions) have an etag above after: what a replication destination that
// accepted up to after still lacks. It is 0 without a query when after is
// the last etag. Documents and tombstones are counted per collection on the
// (collection, etag) indexes, which are far narrower than the tables, so the
// cost follows the number counted, not the size of the database.
func (db *DB) CountChangesAfter(ctx context.Context, after int64) (int64, error) {
	type coll struct {
		name             string
		docs, tombstones bool
	}
	db.mu.RLock()
	last := db.lastEtag
	colls := make([]coll, 0, len(db.collections))
	for _, c := range db.collections {
		colls = append(colls, coll{c.Name, c.Docs > 0, c.Tombstones > 0})
	}
	db.mu.RUnlock()
	if after >= last {
		return 0, nil
	}
	rtx, err := db.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer rtx.Rollback()
	var total int64
	count := func(q string, args ...any) error {
		var n int64
		if err := rtx.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			return err
		}
		total += n
		return nil
	}
	for _, c := range colls {
		if c.docs {
			if err := count(`SELECT count(*) FROM docs WHERE collection = ? AND etag > ?`, c.name, after); err != nil {
				return 0, err
			}
		}
		if c.tombstones {
			if err := count(`SELECT count(*) FROM tombstones WHERE collection = ? AND etag > ?`, c.name, after); err != nil {
				return 0, err
			}
		}
	}
	if db.attachmentsHeld() {
		if err := count(`SELECT count(*) FROM attachment_chunks WHERE etag > ?`, after); err != nil {
			return 0, err
		}
	}
	if db.conflicted.Load() {
		if err := count(`SELECT count(*) FROM conflicts WHERE etag > ?`, after); err != nil {
			return 0, err
		}
	}
	if db.rev.has.Load() {
		if err := count(`SELECT count(*) FROM revisions WHERE etag > ?`, after); err != nil {
			return 0, err
		}
	}
	if db.hasCounters.Load() {
		if err := count(`SELECT count(*) FROM counters WHERE etag > ?`, after); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// CountReplicationAfter is CountChangesAfter plus the extensions' changes
// after the etag (time-series entries and deleted ranges): the items a
// replication destination that accepted up to after still lacks.
func (db *DB) CountReplicationAfter(ctx context.Context, after int64) (int64, error) {
	n, err := db.CountChangesAfter(ctx, after)
	if err != nil || after >= db.LastEtag() {
		return n, err
	}
	var ts int64
	err = db.reader.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM ts_entries WHERE etag > ?1) + (SELECT count(*) FROM ts_deletes WHERE etag > ?1)`, after).Scan(&ts)
	return n + ts, err
}
