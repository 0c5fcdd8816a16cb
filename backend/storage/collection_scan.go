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
