package storage

import (
	"strconv"
	"strings"

	"github.com/rookerydb/rookery/backend/document"
)

// PutItem is one document of PutMany: an id (the same rules as Put's) and
// the parsed document.
type PutItem struct {
	ID  string
	Doc document.Parsed
}

// putManyRows is how many new documents one multi-row INSERT carries.
const putManyRows = 32

// sqlInsertRun inserts putManyRows new documents, skipping any whose key is
// taken (by an existing document or by an earlier row of the same
// statement). OR IGNORE, not ON CONFLICT(key) DO NOTHING: with no
// constraint left that could abort the statement, SQLite needs no
// statement journal for it (the etags are new and every column is given).
var sqlInsertRun = func() string {
	var b strings.Builder
	b.WriteString(`INSERT OR IGNORE INTO docs(etag, key, id, collection, change_vector, last_modified, flags, body) VALUES `)
	for i := 0; i < putManyRows; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`(?, ?, ?, ?, ?, ?, 0, ?)`)
	}
	return b.String()
}()

const sqlEtagsIn = `SELECT etag, key FROM docs WHERE etag BETWEEN ? AND ?`

func init() {
	writerStatements = append(writerStatements, sqlInsertRun, sqlEtagsIn)
}

// PutMany stores documents with no concurrency check, in order, with
// exactly the outcome of calling Put for each in turn (etags, change
// vectors, spellings, counts, changes; a failing item returns its error,
// and the caller's request rolls back as it would after Put's error).
//
// While the database holds no tombstone and no conflict, runs of
// putManyRows documents with plain ids go in one multi-row INSERT OR
// IGNORE (no statement journal: nothing is left that could abort), each
// row with the etag and change vector Put would have given it; a row that
// was skipped (its id existed, or came earlier in the run) is then
// written by Put with that same etag, in order. Everything else
// (generated ids, short runs, a database with tombstones or conflicts)
// goes through Put.
func (tx *Tx) PutMany(items []PutItem) ([]Info, error) {
	out := make([]Info, 0, len(items))
	i := 0
	for i < len(items) {
		j := i
		if tx.canPutMany() {
			for j < len(items) && j-i < putManyRows && tx.plainID(items[j].ID) {
				j++
			}
		}
		if j-i == putManyRows {
			infos, err := tx.putRun(items[i:j], out)
			if err != nil {
				return infos, err
			}
			out = infos
			i = j
			continue
		}
		if j == i {
			j = i + 1
		}
		for ; i < j; i++ {
			info, err := tx.Put(items[i].ID, items[i].Doc, nil)
			if err != nil {
				return out, err
			}
			out = append(out, info)
		}
	}
	return out, nil
}

// canPutMany: no tombstone to remove and no conflict to resolve for any id.
func (tx *Tx) canPutMany() bool {
	// Revisions (configured, or held for an id) are written by Put, one
	// document at a time.
	return !tx.mayHaveTombstones() && !tx.mayHaveConflicts() && !tx.mayHaveRevisions() && tx.revisionsConfig() == nil
}

// plainID is an id Put stores as given (not generated, not an identity)
// and that passes ValidateID.
func (tx *Tx) plainID(id string) bool {
	if strings.HasSuffix(id, tx.db.sep) || strings.HasSuffix(id, "|") {
		return false
	}
	return ValidateID(id) == nil
}

func (tx *Tx) putRun(run []PutItem, out []Info) ([]Info, error) {
	base, baseText := tx.cv, tx.cvText
	baseEtag := tx.lastEtag
	lm := tx.now.UnixNano()
	type row struct {
		key, cname, ckey, cv string
	}
	rows := make([]row, len(run))
	args := make([]any, 0, 7*len(run))
	// Every row's vector is the base with this node's entry at the row's
	// etag: format it from a template rather than build a vector per row.
	cvBefore, cvAfter := base.EtagTemplate(tx.db.nodeTag, tx.db.dbid)
	var cvBuf []byte
	for k, it := range run {
		etag := baseEtag + 1 + int64(k)
		cvBuf = append(strconv.AppendInt(append(cvBuf[:0], cvBefore...), etag, 10), cvAfter...)
		cv := string(cvBuf)
		ckey, cname := tx.collectionKey(it.Doc.Collection)
		// Register the spelling now, so a later row of a new collection
		// gets the first row's spelling, as Put one by one would.
		tx.delta(ckey, cname)
		key := LowerID(it.ID)
		rows[k] = row{key: key, cname: cname, ckey: ckey, cv: cv}
		args = append(args, etag, key, it.ID, cname, cv, lm, it.Doc.Body)
	}
	res, err := tx.exec(sqlInsertRun, args...)
	if err != nil {
		return out, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return out, err
	}
	var inserted map[int64]bool
	if n != int64(len(run)) {
		// Some ids were taken: find which rows went in (their etags are
		// new, so a row with that etag and key is one of them; OR IGNORE
		// would also skip a row whose etag were taken, which must not
		// pass for inserted).
		inserted = make(map[int64]bool, n)
		r, err := tx.stmt(sqlEtagsIn).Query(baseEtag+1, baseEtag+int64(len(run)))
		if err != nil {
			return out, err
		}
		for r.Next() {
			var e int64
			var key string
			if err := r.Scan(&e, &key); err != nil {
				r.Close()
				return out, err
			}
			if k := e - baseEtag - 1; rows[k].key == key {
				inserted[e] = true
			}
		}
		r.Close()
		if err := r.Err(); err != nil {
			return out, err
		}
	}
	last := baseEtag + int64(len(run))
	for k, it := range run {
		etag := baseEtag + 1 + int64(k)
		rw := rows[k]
		if inserted == nil || inserted[etag] {
			tx.delta(rw.ckey, rw.cname).Docs++
			tx.noteID(it.ID, 1)
			tx.changes = append(tx.changes, Change{Type: "Put", ID: it.ID, Collection: rw.cname, ChangeVector: rw.cv, Etag: etag})
			out = append(out, Info{ID: it.ID, Collection: rw.cname, ChangeVector: rw.cv, Etag: etag, LastModified: tx.now})
			continue
		}
		// The id was taken: Put writes it with the etag it would have had.
		tx.lastEtag, tx.cv, tx.cvText = etag-1, base, baseText
		info, err := tx.Put(it.ID, it.Doc, nil)
		if err != nil {
			return out, err
		}
		if info.Etag != etag {
			return out, &putManyError{want: etag, got: info.Etag}
		}
		out = append(out, info)
	}
	tx.lastEtag = last
	tx.cv = base.WithEntry(tx.db.nodeTag, last, tx.db.dbid)
	tx.cvText = tx.cv.String()
	return out, nil
}

type putManyError struct{ want, got int64 }

func (e *putManyError) Error() string {
	return "internal error: PutMany wrote etag " + strconv.FormatInt(e.got, 10) + " where " + strconv.FormatInt(e.want, 10) + " was due"
}
