package storage

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"
)

// IDState is what an id names: a stored document, or a conflicted id
// (versions, no document).
type IDState struct {
	ID         string // as first spelled
	Conflicted bool
}

// lookupChunk is how many ids one lookup statement carries (SQLite allows
// 32,766 variables; a small statement is cheap to prepare).
const lookupChunk = 200

// ExistingIDs tells which of ids name a stored document or a conflicted id,
// keyed by their lower-cased key. It reads no bodies: an index probe per id.
// The caller bounds the number of ids.
func (db *DB) ExistingIDs(ctx context.Context, ids []string) (map[string]IDState, error) {
	out := make(map[string]IDState)
	keys := make([]any, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		k := LowerID(id)
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	conflicted := db.conflicted.Load()
	for start := 0; start < len(keys); start += lookupChunk {
		chunk := keys[start:min(start+lookupChunk, len(keys))]
		in := "(" + strings.Repeat("?,", len(chunk)-1) + "?)"
		if err := db.lookupInto(ctx, out, `SELECT key, id FROM docs WHERE key IN `+in, chunk, false); err != nil {
			return nil, err
		}
		if conflicted {
			if err := db.lookupInto(ctx, out, `SELECT DISTINCT key, id FROM conflicts WHERE key IN `+in, chunk, true); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func (db *DB) lookupInto(ctx context.Context, out map[string]IDState, q string, args []any, conflicted bool) error {
	rows, err := db.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key, id string
		if err := rows.Scan(&key, &id); err != nil {
			return err
		}
		if _, dup := out[key]; !dup {
			out[key] = IDState{ID: id, Conflicted: conflicted}
		}
	}
	return rows.Err()
}

// ConflictBrief describes a conflicted id without reading its versions'
// bodies.
type ConflictBrief struct {
	ID         string
	Collection string
	Versions   int
	Tombstones int // versions that are deletions
	Latest     time.Time
}

// ConflictOf describes id's conflict; ok is false when id is not in
// conflict.
func (db *DB) ConflictOf(ctx context.Context, id string) (b ConflictBrief, ok bool, err error) {
	if !db.conflicted.Load() {
		return b, false, nil
	}
	var lm sql.NullInt64
	var name, coll sql.NullString
	err = db.reader.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(tombstone), 0), MAX(last_modified), MIN(id), MIN(collection) FROM conflicts WHERE key = ?`, LowerID(id)).
		Scan(&b.Versions, &b.Tombstones, &lm, &name, &coll)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && b.Versions == 0) {
		return ConflictBrief{}, false, nil
	}
	if err != nil {
		return ConflictBrief{}, false, err
	}
	b.ID, b.Collection = name.String, coll.String
	if lm.Valid {
		b.Latest = time.Unix(0, lm.Int64).UTC()
	}
	return b, true, nil
}
