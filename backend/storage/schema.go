package storage

// Schema is the SQL of a database file. It is exported so that benchmarks can
// measure raw SQLite against the same tables.
const Schema = `
CREATE TABLE IF NOT EXISTS meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) WITHOUT ROWID;

-- The etag is the rowid: etag-ordered scans ("everything after etag X", for
-- replication and subscriptions) walk the table in storage order, and new
-- writes append at its end.
CREATE TABLE IF NOT EXISTS docs (
	etag          INTEGER PRIMARY KEY,
	key           TEXT NOT NULL UNIQUE, -- lower-cased id
	id            TEXT NOT NULL,        -- id as first spelled
	collection    TEXT NOT NULL,        -- collection as first spelled
	change_vector TEXT NOT NULL,
	last_modified INTEGER NOT NULL,     -- unix nanoseconds, UTC
	flags         INTEGER NOT NULL DEFAULT 0,
	body          BLOB NOT NULL         -- stored form, see package document
);
CREATE INDEX IF NOT EXISTS docs_collection_etag ON docs(collection, etag);

CREATE TABLE IF NOT EXISTS tombstones (
	etag          INTEGER PRIMARY KEY,
	key           TEXT NOT NULL UNIQUE,
	id            TEXT NOT NULL,
	collection    TEXT NOT NULL,
	deleted_etag  INTEGER NOT NULL,
	change_vector TEXT NOT NULL,
	last_modified INTEGER NOT NULL,
	flags         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS tombstones_collection_etag ON tombstones(collection, etag);

-- Per-collection counts, kept in the same transaction as the writes, so
-- statistics never scan the documents.
CREATE TABLE IF NOT EXISTS collections (
	key        TEXT PRIMARY KEY, -- lower-cased name
	name       TEXT NOT NULL,
	docs       INTEGER NOT NULL DEFAULT 0,
	tombstones INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Conflicting versions of documents that replication could not order: a
-- conflicted id has no row in docs, only its versions here. Versions draw
-- etags from the same counter as documents.
CREATE TABLE IF NOT EXISTS conflicts (
	etag          INTEGER PRIMARY KEY,
	key           TEXT NOT NULL,
	id            TEXT NOT NULL,
	collection    TEXT NOT NULL,
	change_vector TEXT NOT NULL,
	last_modified INTEGER NOT NULL,
	tombstone     INTEGER NOT NULL DEFAULT 0,
	body          BLOB
);
CREATE INDEX IF NOT EXISTS conflicts_key ON conflicts(key);

-- The resolution log: every conflict resolution this copy made, automatic
-- or by a person, with every version it replaced (JSON), so a losing
-- version can be looked at and restored. Kept per node, not replicated.
CREATE TABLE IF NOT EXISTS resolutions (
	seq        INTEGER PRIMARY KEY,
	key        TEXT NOT NULL,
	id         TEXT NOT NULL,
	collection TEXT NOT NULL,
	at         INTEGER NOT NULL, -- unix nanoseconds, UTC
	strategy   TEXT NOT NULL,    -- "auto:latest", "auto:script", "manual", "bulk:latest", ...
	by         TEXT NOT NULL,    -- who or what resolved it
	node       TEXT NOT NULL,    -- the node that resolved it
	versions   TEXT NOT NULL,    -- JSON array of the replaced versions
	result     TEXT NOT NULL     -- JSON: what it resolved to
);
CREATE INDEX IF NOT EXISTS resolutions_key ON resolutions(key, seq);

-- Replication: the last etag accepted from each source database copy.
CREATE TABLE IF NOT EXISTS replication_sources (
	source    TEXT PRIMARY KEY, -- the source's database id
	last_etag INTEGER NOT NULL
) WITHOUT ROWID;

-- Per id-prefix figures for ids of the form prefix/N or prefix/N-TAG (HiLo
-- ids): how many exist and the highest N ever written. The HiLo page and
-- the identity audit read them without scanning ids.
CREATE TABLE IF NOT EXISTS id_numbers (
	key    TEXT PRIMARY KEY, -- lower-cased prefix (separator included) + suffix
	prefix TEXT NOT NULL,
	suffix TEXT NOT NULL,    -- "" for prefix/N, "-A" for prefix/N-A
	docs   INTEGER NOT NULL DEFAULT 0,
	max_n  INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Attachments (attachments.go): content once per SHA-256, in chunks that
-- take etags from the documents' counter and replicate as items; pos is the
-- chunk's byte offset, size the whole content's.
CREATE TABLE IF NOT EXISTS attachment_chunks (
	etag          INTEGER PRIMARY KEY,
	hash          TEXT NOT NULL,    -- base64 SHA-256 of the whole content
	pos           INTEGER NOT NULL,
	size          INTEGER NOT NULL,
	change_vector TEXT NOT NULL,    -- of the document version that stored it
	data          BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS attachment_chunks_hash ON attachment_chunks(hash, pos);
-- The references of the current document versions (their bodies list them
-- in @metadata.@attachments): lookups and collection of unreferenced content.
CREATE TABLE IF NOT EXISTS attachments (
	key          TEXT NOT NULL, -- lower-cased document id
	name         TEXT NOT NULL,
	hash         TEXT NOT NULL,
	content_type TEXT NOT NULL,
	size         INTEGER NOT NULL,
	PRIMARY KEY (key, name)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS attachments_hash ON attachments(hash);
-- Contents a replicated delete or a replicated version released (no current
-- version listed them any more), with the time of the release or of the
-- last replicated chunk of the content since: CollectReleased deletes those
-- still unreferenced once they are old enough (attachments.go).
CREATE TABLE IF NOT EXISTS attachment_released (
	hash TEXT PRIMARY KEY,
	at   INTEGER NOT NULL -- Unix milliseconds
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS attachment_released_at ON attachment_released(at);

-- Revisions: stored versions of documents, identified by their change
-- vector. They draw etags from the documents' counter and replicate in one
-- etag order with them (see revisions.go).
CREATE TABLE IF NOT EXISTS revisions (
	etag          INTEGER PRIMARY KEY,
	change_vector TEXT NOT NULL UNIQUE,
	key           TEXT NOT NULL,              -- lower-cased document id
	id            TEXT NOT NULL,
	collection    TEXT NOT NULL,
	last_modified INTEGER NOT NULL,           -- unix nanoseconds, UTC
	flags         INTEGER NOT NULL DEFAULT 0, -- RevisionFlags
	body          BLOB                        -- stored form; NULL for a delete revision
);
CREATE INDEX IF NOT EXISTS revisions_key ON revisions(key, last_modified, etag);


-- Time series (timeseries.go). Entries are keyed by (document key, series
-- name lower-cased, timestamp in unix milliseconds): a range read is one
-- b-tree range scan. data is the tag and the values (see encodeTSData);
-- lamport decides between versions of one timestamp on every copy. Every
-- change takes an etag from the documents' counter; ts_deletes keeps the
-- deleted ranges so that copies that learn of them late drop what they
-- covered.
CREATE TABLE IF NOT EXISTS ts_series (
	doc_key TEXT NOT NULL,
	lname   TEXT NOT NULL,
	doc_id  TEXT NOT NULL,
	name    TEXT NOT NULL,
	PRIMARY KEY (doc_key, lname)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ts_entries (
	doc_key TEXT NOT NULL,
	lname   TEXT NOT NULL,
	ts      INTEGER NOT NULL,
	lamport INTEGER NOT NULL,
	data    BLOB NOT NULL,
	etag    INTEGER NOT NULL,
	PRIMARY KEY (doc_key, lname, ts)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ts_entries_etag ON ts_entries(etag);
CREATE TABLE IF NOT EXISTS ts_deletes (
	etag    INTEGER PRIMARY KEY,
	doc_key TEXT NOT NULL,
	lname   TEXT NOT NULL,
	from_ts INTEGER NOT NULL,
	to_ts   INTEGER NOT NULL,
	lamport INTEGER NOT NULL,
	UNIQUE (doc_key, lname, from_ts, to_ts, lamport)
);
` + CounterSchema
