package storage

// The statements of the write path, prepared once per database.
const (
	sqlSavepoint           = `SAVEPOINT req`
	sqlRelease             = `RELEASE req`
	sqlRollbackTo          = `ROLLBACK TO req`
	sqlSetLastEtag         = `INSERT INTO meta(key, value) VALUES('last_etag', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`
	sqlSetLastWrite        = `INSERT INTO meta(key, value) VALUES('last_write', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`
	sqlSetChangeVector     = `INSERT INTO meta(key, value) VALUES('change_vector', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`
	sqlAddCollectionCounts = `INSERT INTO collections(key, name, docs, tombstones) VALUES(?, ?, ?, ?)
			ON CONFLICT(key) DO UPDATE SET docs = docs + excluded.docs, tombstones = tombstones + excluded.tombstones`
	sqlGetDoc                = `SELECT ` + docColumns + ` FROM docs WHERE key = ?`
	sqlExists                = `SELECT 1 FROM docs WHERE key = ?`
	sqlLookup                = `SELECT etag, id, collection, change_vector FROM docs WHERE key = ?`
	sqlUpdateDoc             = `UPDATE docs SET etag = ?, change_vector = ?, last_modified = ?, body = ?, flags = 0 WHERE etag = ?`
	sqlInsertDoc             = `INSERT INTO docs(etag, key, id, collection, change_vector, last_modified, flags, body) VALUES(?, ?, ?, ?, ?, ?, 0, ?)`
	sqlInsertNewDoc          = `INSERT INTO docs(etag, key, id, collection, change_vector, last_modified, flags, body) VALUES(?, ?, ?, ?, ?, ?, 0, ?) ON CONFLICT(key) DO NOTHING`
	sqlRemoveTombstone       = `DELETE FROM tombstones WHERE key = ? RETURNING collection`
	sqlDeleteDoc             = `DELETE FROM docs WHERE etag = ?`
	sqlInsertTombstone       = `INSERT INTO tombstones(etag, key, id, collection, deleted_etag, change_vector, last_modified, flags) VALUES(?, ?, ?, ?, ?, ?, ?, 0)`
	sqlGetTombstone          = `SELECT etag, id, collection, change_vector, last_modified FROM tombstones WHERE key = ?`
	sqlDeleteTombstoneByEtag = `DELETE FROM tombstones WHERE etag = ?`
	sqlInsertConflict        = `INSERT INTO conflicts(etag, key, id, collection, change_vector, last_modified, tombstone, body) VALUES(?, ?, ?, ?, ?, ?, ?, ?)`
	sqlDropConflicts         = `DELETE FROM conflicts WHERE key = ?`
	sqlDeleteConflictByEtag  = `DELETE FROM conflicts WHERE etag = ?`
	sqlConflictFull          = `SELECT etag, id, collection, change_vector, last_modified, tombstone, body FROM conflicts WHERE key = ? ORDER BY etag`
	sqlLogResolution         = `INSERT INTO resolutions(key, id, collection, at, strategy, by, node, versions, result) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlInsertReplDoc         = `INSERT INTO docs(etag, key, id, collection, change_vector, last_modified, flags, body) VALUES(?, ?, ?, ?, ?, ?, ?, ?)`
	sqlInsertReplTombstone   = `INSERT INTO tombstones(etag, key, id, collection, deleted_etag, change_vector, last_modified, flags) VALUES(?, ?, ?, ?, ?, ?, ?, ?)`
	sqlGetSourceEtag         = `SELECT last_etag FROM replication_sources WHERE source = ?`
	sqlSetSourceEtag         = `INSERT INTO replication_sources(source, last_etag) VALUES(?, ?) ON CONFLICT(source) DO UPDATE SET last_etag = max(last_etag, excluded.last_etag)`
	sqlAddIDNumbers          = `INSERT INTO id_numbers(key, prefix, suffix, docs, max_n) VALUES(?, ?, ?, ?, ?)
			ON CONFLICT(key) DO UPDATE SET docs = docs + excluded.docs, max_n = max(max_n, excluded.max_n)`
)

var writerStatements = []string{
	sqlSavepoint,
	sqlRelease,
	sqlRollbackTo,
	sqlSetLastEtag,
	sqlSetLastWrite,
	sqlSetChangeVector,
	sqlAddCollectionCounts,
	sqlGetDoc,
	sqlExists,
	sqlLookup,
	sqlUpdateDoc,
	sqlInsertDoc,
	sqlInsertNewDoc,
	sqlRemoveTombstone,
	sqlDeleteDoc,
	sqlInsertTombstone,
	sqlAddIDNumbers,
	sqlGetTombstone,
	sqlDeleteTombstoneByEtag,
	sqlInsertConflict,
	sqlDropConflicts,
	sqlDeleteConflictByEtag,
	sqlGetSourceEtag,
	sqlConflictFull,
	sqlInsertReplDoc,
	sqlInsertReplTombstone,
	sqlLogResolution,
	sqlSetSourceEtag,
}
