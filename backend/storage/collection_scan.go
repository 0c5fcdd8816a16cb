package storage

import (
	"context"
	"database/sql"
	"time"
)

// sqlCollectionAfter walks one collection's documents in etag order on the
// (collection, etag) index: what a subscription reads.
const sqlCollectionAfter = `SELECT ` + docColumns + ` FROM docs WHERE collection = ? AND etag > ? ORDER BY etag LIMIT ?`

// ScanCollection visits up to limit documents of a collection with an etag
// above after, in etag order. d.Body is only valid during the call (the
// caller copies what it keeps). An unknown collection visits nothing.
func (db *DB) ScanCollection(ctx context.Context, collection string, after int64, limit int, fn func(d *Document) error) error {
	name, ok := db.CanonicalCollection(collection)
	if !ok {
		return nil
	}
	rows, err := db.rcoll.QueryContext(ctx, name, after, limit)
	if err != nil {
		return err
	}
	defer rows.Close()
	var d Document
	var body sql.RawBytes
	var lm int64
	for rows.Next() {
		if err := rows.Scan(&d.Etag, &d.ID, &d.Collection, &d.ChangeVector, &lm, &d.Flags, &body); err != nil {
			return err
		}
		d.LastModified = time.Unix(0, lm).UTC()
		d.Body = body
		db.reads.Add(1)
		if err := fn(&d); err != nil {
			return err
		}
	}
	return rows.Err()
}

// CountCollectionAfter is how many documents of a collection have an etag
// above after, counted on the (collection, etag) index.
func (db *DB) CountCollectionAfter(ctx context.Context, collection string, after int64) (int64, error) {
	name, ok := db.CanonicalCollection(collection)
	if !ok {
		return 0, nil
	}
	var n int64
	err := db.reader.QueryRowContext(ctx, `SELECT count(*) FROM docs WHERE collection = ? AND etag > ?`, name, after).Scan(&n)
	return n, err
}

// CollectionLastEtag is the etag of a collection's newest document (0 when
// it has none).
func (db *DB) CollectionLastEtag(ctx context.Context, collection string) (int64, error) {
	name, ok := db.CanonicalCollection(collection)
	if !ok {
		return 0, nil
	}
	var n sql.NullInt64
	err := db.reader.QueryRowContext(ctx, `SELECT max(etag) FROM docs WHERE collection = ?`, name).Scan(&n)
	return n.Int64, err
}

// DocsRead is how many documents readers have read since the file was
// opened (loads, pages, replication and subscription scans).
func (db *DB) DocsRead() int64 { return db.reads.Load() }

// Tombstone is one deleted document's marker, as ScanTombstones reads it.
type Tombstone struct {
	Etag       int64
	ID         string
	Collection string
}

// ScanTombstones visits up to limit tombstones of a collection with an etag
// above after, in etag order, on the (collection, etag) index: what an
// index reads to follow deletes. An unknown collection visits nothing.
func (db *DB) ScanTombstones(ctx context.Context, collection string, after int64, limit int, fn func(t *Tombstone) error) error {
	name, ok := db.CanonicalCollection(collection)
	if !ok {
		return nil
	}
	rows, err := db.reader.QueryContext(ctx, `SELECT etag, id, collection FROM tombstones WHERE collection = ? AND etag > ? ORDER BY etag LIMIT ?`, name, after, limit)
	if err != nil {
		return err
	}
	defer rows.Close()
	var t Tombstone
	for rows.Next() {
		if err := rows.Scan(&t.Etag, &t.ID, &t.Collection); err != nil {
			return err
		}
		if err := fn(&t); err != nil {
			return err
		}
	}
	return rows.Err()
}

// CollectionEtags are the etags of a collection's newest document and newest
// tombstone (0 when it has none), read from one snapshot on the (collection,
// etag) indexes.
func (db *DB) CollectionEtags(ctx context.Context, collection string) (lastDoc, lastTombstone int64, err error) {
	name, ok := db.CanonicalCollection(collection)
	if !ok {
		return 0, 0, nil
	}
	var d, t sql.NullInt64
	err = db.reader.QueryRowContext(ctx, `SELECT (SELECT max(etag) FROM docs WHERE collection = ?1), (SELECT max(etag) FROM tombstones WHERE collection = ?1)`, name).Scan(&d, &t)
	return d.Int64, t.Int64, err
}

// CollectionPending tells whether a collection has a document with an etag
// in (docsAfter, upTo] and a tombstone with an etag in (tombstonesAfter,
// upTo]: what an index still has to process before it has caught up with a
// cut-off etag.
func (db *DB) CollectionPending(ctx context.Context, collection string, docsAfter, tombstonesAfter, upTo int64) (docs, tombstones bool, err error) {
	name, ok := db.CanonicalCollection(collection)
	if !ok {
		return false, false, nil
	}
	var d, t int
	err = db.reader.QueryRowContext(ctx, `SELECT EXISTS(SELECT 1 FROM docs WHERE collection = ?1 AND etag > ?2 AND etag <= ?4), EXISTS(SELECT 1 FROM tombstones WHERE collection = ?1 AND etag > ?3 AND etag <= ?4)`, name, docsAfter, tombstonesAfter, upTo).Scan(&d, &t)
	return d != 0, t != 0, err
}
