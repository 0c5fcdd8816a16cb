package index

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strings"
)

// formatVersion changes when the file layout changes: an older file is
// rebuilt.
const formatVersion = "2"

// FilePath is where an index's file lives: <dir of dbPath>/indexes/<FileName>.
func FilePath(dbPath, indexName string) string {
	return filepath.Join(filepath.Dir(dbPath), "indexes", FileName(indexName))
}

// FileName derives a safe file name from an index name: lower-cased,
// letters, digits, '.', '_' and '-' kept, anything else '_', cut to 64
// bytes, then "-" and 8 hex digits of the name's SHA-256 and ".db". Index
// names are case-insensitive, so the hash is over the lower-cased name; two
// different names never share a file (short of a hash collision, which
// Manager.Put refuses).
func FileName(indexName string) string {
	low := strings.ToLower(indexName)
	var b strings.Builder
	for _, r := range low {
		if b.Len() >= 64 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		case r == '.' && b.Len() > 0:
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	sum := sha256.Sum256([]byte(low))
	return b.String() + "-" + hex.EncodeToString(sum[:4]) + ".db"
}

const schema = `
CREATE TABLE IF NOT EXISTS meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) WITHOUT ROWID;

-- Per source collection: the last document and tombstone etags processed.
CREATE TABLE IF NOT EXISTS etags (
	collection TEXT PRIMARY KEY,
	docs       INTEGER NOT NULL DEFAULT 0,
	tombstones INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Per (source collection, referenced collection): the reference pass's
-- watermarks, how many source documents it re-mapped, and where it stopped
-- inside one referenced document's sources (pend_*; pend_etag 0: nowhere).
CREATE TABLE IF NOT EXISTS ref_etags (
	src        TEXT NOT NULL,
	ref        TEXT NOT NULL,
	docs       INTEGER NOT NULL DEFAULT 0,
	tombstones INTEGER NOT NULL DEFAULT 0,
	remapped   INTEGER NOT NULL DEFAULT 0,
	pend_tombstones INTEGER NOT NULL DEFAULT 0,
	pend_key   TEXT NOT NULL DEFAULT '',
	pend_etag  INTEGER NOT NULL DEFAULT 0,
	pend_src   TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (src, ref)
) WITHOUT ROWID;

-- The fields: field n is the columns c<n> (lower-cased strings, numbers,
-- markers) and x<n> (the original string when it differs) of entries.
CREATE TABLE IF NOT EXISTS fields (
	name   TEXT PRIMARY KEY,
	col    INTEGER NOT NULL,
	search INTEGER NOT NULL DEFAULT 0,
	multi  INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- The queryable rows. doc is the lower-cased document id (map) or the
-- group key (map-reduce); id the id as spelled; stored the stored fields
-- (map) or the reduced row (map-reduce) as JSON. Columns c<n>, x<n> are
-- added as fields appear.
CREATE TABLE IF NOT EXISTS entries (
	eid    INTEGER PRIMARY KEY,
	doc    TEXT NOT NULL,
	id     TEXT,
	stored TEXT
);
CREATE INDEX IF NOT EXISTS entries_doc ON entries(doc);

-- How many entries hold each value of each field column (c<n>), kept with
-- the entries in every batch: a lone equality counts its matches with one
-- lookup here instead of walking the column index (Compile).
CREATE TABLE IF NOT EXISTS value_counts (
	col INTEGER NOT NULL,
	v   NOT NULL,
	n   INTEGER NOT NULL,
	PRIMARY KEY (col, v)
) WITHOUT ROWID;

-- The values of multi-valued fields (arrays): one row per value.
CREATE TABLE IF NOT EXISTS arr (
	eid INTEGER NOT NULL,
	col INTEGER NOT NULL,
	v,
	x
);
CREATE INDEX IF NOT EXISTS arr_v ON arr(col, v);
CREATE INDEX IF NOT EXISTS arr_eid ON arr(eid);

-- load() references: source document -> referenced document, per
-- referenced collection (seed 004's "references table").
CREATE TABLE IF NOT EXISTS refs (
	ref_coll TEXT NOT NULL,
	ref_key  TEXT NOT NULL,
	src_coll TEXT NOT NULL,
	src      TEXT NOT NULL,
	PRIMARY KEY (ref_coll, ref_key, src_coll, src)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS refs_src ON refs(src);

-- Map-reduce: each document's map outputs, by group.
CREATE TABLE IF NOT EXISTS map_out (
	doc TEXT NOT NULL,
	grp TEXT NOT NULL,
	val TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS map_out_doc ON map_out(doc);
CREATE INDEX IF NOT EXISTS map_out_grp ON map_out(grp);

-- Per-document indexing errors (bounded).
CREATE TABLE IF NOT EXISTS errors (
	seq    INTEGER PRIMARY KEY,
	at     INTEGER NOT NULL,
	doc    TEXT NOT NULL,
	action TEXT NOT NULL,
	error  TEXT NOT NULL
);
`

// defHash is the hash of what decides an index's contents: a file built
// from another hash is rebuilt.
func defHash(d *Definition) string {
	x := struct {
		Type         string
		Collection   string
		Fields       []AutoField
		GroupBy      []string
		Maps         []string
		Reduce       string
		FieldOptions map[string]FieldOptions
	}{d.Type, strings.ToLower(d.Collection), d.Fields, d.GroupBy, d.Maps, d.Reduce, d.FieldOptions}
	b, _ := json.Marshal(x)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

func dsn(path string, readOnly bool) string {
	q := "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(0)"
	if readOnly {
		q += "&_pragma=query_only(1)"
	} else {
		q += "&_txlock=immediate&_pragma=cache_size(-65536)"
	}
	return "file:" + path + q
}

func readMeta(db *sql.DB) (map[string]string, error) {
	rows, err := db.Query(`SELECT key, value FROM meta`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, rows.Err()
}

const sqlSetMeta = `INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`
