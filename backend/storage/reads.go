package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Get reads one document; nil when missing.
func (db *DB) Get(ctx context.Context, id string) (*Document, error) {
	d, err := scanDoc(db.rget.QueryRowContext(ctx, LowerID(id)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err == nil {
		db.reads.Add(1)
		err = db.AddCounterNames(ctx, []*Document{d})
	}
	return d, err
}

// GetMany reads several documents from one consistent snapshot. The result
// is in request order, nil for missing ids.
func (db *DB) GetMany(ctx context.Context, ids []string) ([]*Document, error) {
	rtx, err := db.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer rtx.Rollback()
	stmt := rtx.StmtContext(ctx, db.rget)
	if err != nil {
		return nil, err
	}
	defer stmt.Close()
	out := make([]*Document, len(ids))
	for i, id := range ids {
		d, err := scanDoc(stmt.QueryRowContext(ctx, LowerID(id)))
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[i] = d
		db.reads.Add(1)
	}
	if db.hasCounters.Load() {
		if err := addCounterNames(ctx, rtx, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// StartsWith pages through documents whose id starts with prefix
// (case-insensitively), in id order.
func (db *DB) StartsWith(ctx context.Context, prefix string, start, pageSize int) ([]*Document, error) {
	lo := LowerID(prefix)
	var rows *sql.Rows
	var err error
	if hi, ok := prefixUpperBound(lo); ok {
		rows, err = db.reader.QueryContext(ctx, `SELECT `+docColumns+` FROM docs WHERE key >= ? AND key < ? ORDER BY key LIMIT ? OFFSET ?`, lo, hi, pageSize, start)
	} else {
		rows, err = db.reader.QueryContext(ctx, `SELECT `+docColumns+` FROM docs WHERE key >= ? ORDER BY key LIMIT ? OFFSET ?`, lo, pageSize, start)
	}
	if err != nil {
		return nil, err
	}
	return db.collect(rows)
}

// Recent pages through documents from the most recently written.
func (db *DB) Recent(ctx context.Context, start, pageSize int) ([]*Document, error) {
	rows, err := db.reader.QueryContext(ctx, `SELECT `+docColumns+` FROM docs ORDER BY etag DESC LIMIT ? OFFSET ?`, pageSize, start)
	if err != nil {
		return nil, err
	}
	return db.collect(rows)
}

func (db *DB) collect(rows *sql.Rows) ([]*Document, error) {
	defer rows.Close()
	var out []*Document
	for rows.Next() {
		d, err := scanDoc(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	db.reads.Add(int64(len(out)))
	return out, rows.Err()
}

// prefixUpperBound is the smallest string greater than every string that
// starts with p (byte-wise, which is how SQLite's BINARY collation compares).
func prefixUpperBound(p string) (string, bool) {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

// IntegrityCheck runs SQLite's integrity check and checks that the counters
// agree with the rows: the per-collection counts and the last etag.
func (db *DB) IntegrityCheck(ctx context.Context) error {
	var res string
	if err := db.reader.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&res); err != nil {
		return err
	}
	if res != "ok" {
		return fmt.Errorf("integrity check: %s", res)
	}
	rows, err := db.reader.QueryContext(ctx, `SELECT c.name, c.docs, (SELECT count(*) FROM docs d WHERE d.collection = c.name) FROM collections c`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var counted, actual int64
		if err := rows.Scan(&name, &counted, &actual); err != nil {
			return err
		}
		if counted != actual {
			return fmt.Errorf("collection %s: counter says %d documents, table has %d", name, counted, actual)
		}
	}
	var maxEtag sql.NullInt64
	if err := db.reader.QueryRowContext(ctx, `SELECT max(m) FROM (SELECT max(etag) AS m FROM docs UNION ALL SELECT max(etag) FROM tombstones UNION ALL SELECT max(etag) FROM conflicts)`).Scan(&maxEtag); err != nil {
		return err
	}
	if maxEtag.Int64 > db.LastEtag() {
		return fmt.Errorf("last etag %d is behind the stored etag %d", db.LastEtag(), maxEtag.Int64)
	}
	return rows.Err()
}

// CanonicalCollection returns the stored spelling of a collection name
// (collections are case-insensitive) and whether it exists.
func (db *DB) CanonicalCollection(name string) (string, bool) {
	return db.collectionName(strings.ToLower(name))
}

// PageByEtag is keyset paging, newest first: up to limit documents of
// collection ("" for all) with an etag below before (0 for the newest).
// It walks an index, so a page costs the same at any depth. Each body is
// read only up to its first maxBody bytes (SQLite cuts it; Size is the whole
// length); all of it when maxBody <= 0.
func (db *DB) PageByEtag(ctx context.Context, collection string, before int64, limit, maxBody int) ([]*Document, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	cols, args := db.bodyColumns(maxBody)
	var rows *sql.Rows
	var err error
	if collection == "" {
		rows, err = db.reader.QueryContext(ctx, `SELECT `+cols+` FROM docs WHERE etag < ? ORDER BY etag DESC LIMIT ?`, append(args, before, limit)...)
	} else {
		name, ok := db.CanonicalCollection(collection)
		if !ok {
			return nil, nil
		}
		rows, err = db.reader.QueryContext(ctx, `SELECT `+cols+` FROM docs WHERE collection = ? AND etag < ? ORDER BY etag DESC LIMIT ?`, append(args, name, before, limit)...)
	}
	if err != nil {
		return nil, err
	}
	return db.collectBodies(rows, maxBody)
}

// PageByID is keyset paging in id order over ids starting with prefix, after
// the id after ("" for the first page), optionally within one collection.
// maxBody bounds each body as in PageByEtag.
func (db *DB) PageByID(ctx context.Context, prefix, collection, after string, limit, maxBody int) ([]*Document, error) {
	lo := LowerID(prefix)
	if a := LowerID(after); a != "" && a >= lo {
		lo = a + "\x00"
	}
	cols, args := db.bodyColumns(maxBody)
	q := `SELECT ` + cols + ` FROM docs WHERE key >= ?`
	args = append(args, lo)
	if hi, ok := prefixUpperBound(LowerID(prefix)); ok {
		q += ` AND key < ?`
		args = append(args, hi)
	}
	if collection != "" {
		name, ok := db.CanonicalCollection(collection)
		if !ok {
			return nil, nil
		}
		// Unary + keeps SQLite on the id index: using the collection index
		// would sort the whole collection by id.
		q += ` AND +collection = ?`
		args = append(args, name)
	}
	q += ` ORDER BY key LIMIT ?`
	args = append(args, limit)
	rows, err := db.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return db.collectBodies(rows, maxBody)
}

// GetPrefix reads one document with at most the first maxBody bytes of its
// body (Size is the whole length); nil when missing.
func (db *DB) GetPrefix(ctx context.Context, id string, maxBody int) (*Document, error) {
	d, err := scanDocPrefix(db.reader.QueryRowContext(ctx, `SELECT `+docPrefixColumns+` FROM docs WHERE key = ?`, maxBody, LowerID(id)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err == nil {
		db.reads.Add(1)
	}
	return d, err
}

func (db *DB) bodyColumns(maxBody int) (string, []any) {
	if maxBody > 0 {
		return docPrefixColumns, []any{maxBody}
	}
	return docColumns, nil
}

func (db *DB) collectBodies(rows *sql.Rows, maxBody int) ([]*Document, error) {
	if maxBody <= 0 {
		return db.collect(rows)
	}
	defer rows.Close()
	var out []*Document
	for rows.Next() {
		d, err := scanDocPrefix(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	db.reads.Add(int64(len(out)))
	return out, rows.Err()
}
