package storage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
)

// Attachments (see DESIGN.md "Attachments"): content is stored once per
// SHA-256 in chunks (attachment_chunks), each chunk a replication item with
// an etag of the documents' counter; a document's references live in its
// stored body (@metadata.@attachments, @flags HasAttachments) and, for
// lookups and collection, in the attachments table.

// AttachmentChunkSize is the size of a content chunk row (the last chunk of
// a content may be shorter).
const AttachmentChunkSize = 256 << 10

// MaxAttachmentNameBytes bounds an attachment's name.
const MaxAttachmentNameBytes = 512

// AttachmentRef is one entry of a document's @metadata.@attachments.
type AttachmentRef struct {
	Name        string `json:"Name"`
	Hash        string `json:"Hash"`
	ContentType string `json:"ContentType"`
	Size        int64  `json:"Size"`
}

// AttachmentInfo describes an attachment of a stored document.
type AttachmentInfo struct {
	AttachmentRef
	DocumentID string
	// ChangeVector is the document version's change vector.
	ChangeVector string
}

func init() {
	writerStatements = append(writerStatements,
		sqlAttRefs, sqlAttRefUpsert, sqlAttRefDelete, sqlAttRefsDrop, sqlAttRefUsed, sqlAttRelease, sqlAttReleaseTouch,
		sqlAttChunkInsert, sqlAttChunkGet, sqlAttChunkRestamp, sqlAttChunkList, sqlAttChunkDrop, sqlAttContentSize)
}

const (
	sqlAttRefs         = `SELECT name, hash, content_type, size FROM attachments WHERE key = ? ORDER BY name`
	sqlAttRefUpsert    = `INSERT INTO attachments(key, name, hash, content_type, size) VALUES(?, ?, ?, ?, ?) ON CONFLICT(key, name) DO UPDATE SET hash = excluded.hash, content_type = excluded.content_type, size = excluded.size`
	sqlAttRefDelete    = `DELETE FROM attachments WHERE key = ? AND name = ?`
	sqlAttRefsDrop     = `DELETE FROM attachments WHERE key = ? RETURNING hash`
	sqlAttRefUsed      = `SELECT 1 FROM attachments WHERE hash = ? LIMIT 1`
	sqlAttRelease      = `INSERT INTO attachment_released(hash, at) VALUES(?, ?) ON CONFLICT(hash) DO UPDATE SET at = excluded.at`
	sqlAttReleaseTouch = `UPDATE attachment_released SET at = ? WHERE hash = ?`
	sqlAttChunkInsert  = `INSERT INTO attachment_chunks(etag, hash, pos, size, change_vector, data) VALUES(?, ?, ?, ?, ?, ?)`
	sqlAttChunkGet     = `SELECT etag, change_vector FROM attachment_chunks WHERE hash = ? AND pos = ?`
	sqlAttChunkRestamp = `UPDATE attachment_chunks SET etag = ?, change_vector = ? WHERE etag = ?`
	sqlAttChunkList    = `SELECT etag FROM attachment_chunks WHERE hash = ? ORDER BY pos`
	sqlAttChunkDrop    = `DELETE FROM attachment_chunks WHERE hash = ?`
	sqlAttContentSize  = `SELECT count(*), coalesce(sum(length(data)), 0), coalesce(max(size), -1) FROM attachment_chunks WHERE hash = ?`
)

// attachmentState tells whether the file may hold attachment references,
// so documents of databases that never had one skip every lookup.
type attachmentState struct {
	once sync.Once
	any  bool
	mu   sync.Mutex
}

func (tx *Tx) mayHaveAttachments() bool {
	s := &tx.db.attach
	s.once.Do(func() {
		var one int
		err := tx.tx.QueryRow(`SELECT 1 FROM attachments LIMIT 1`).Scan(&one)
		s.mu.Lock()
		s.any = s.any || err == nil
		s.mu.Unlock()
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.any
}

func (tx *Tx) noteAttachments() {
	tx.mayHaveAttachments()
	s := &tx.db.attach
	s.mu.Lock()
	s.any = true
	s.mu.Unlock()
}

// Staged is an attachment's content written to a temporary file beside the
// database, with its hash and size, before the write that stores it is
// queued.
type Staged struct {
	Path string
	Hash string // base64 SHA-256
	Size int64
}

// Remove deletes the staged file.
func (s *Staged) Remove() {
	if s != nil && s.Path != "" {
		_ = os.Remove(s.Path)
	}
}

// TooLargeAttachment is the error of content over the size limit.
type TooLargeAttachment struct{ Max int64 }

func (e *TooLargeAttachment) Error() string {
	return fmt.Sprintf("the attachment is larger than %d bytes, the largest attachment this server accepts (--max-attachment-size). Nothing was stored.", e.Max)
}

// StageAttachment copies r into a temporary file in the directory of the
// database (so the later copy into the file stays on one disk), hashing it
// on the way; more than max bytes (no limit when max <= 0) fail with a
// dberr.TooLarge. Memory use is one copy buffer.
func (db *DB) StageAttachment(r io.Reader, max int64) (*Staged, error) {
	dir := db.path[:strings.LastIndexAny(db.path, `/\`)+1]
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "attachment-*.tmp")
	if err != nil {
		return nil, err
	}
	st := &Staged{Path: f.Name()}
	h := sha256.New()
	src := r
	if max > 0 {
		src = io.LimitReader(r, max+1)
	}
	n, err := io.CopyBuffer(io.MultiWriter(f, h), src, make([]byte, 64<<10))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && max > 0 && n > max {
		err = &dberr.Error{Kind: dberr.TooLarge, Msg: (&TooLargeAttachment{Max: max}).Error()}
	}
	if err != nil {
		st.Remove()
		return nil, err
	}
	st.Size = n
	st.Hash = base64.StdEncoding.EncodeToString(h.Sum(nil))
	return st, nil
}

// ValidateAttachmentName checks a name a client gave.
func ValidateAttachmentName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return dberr.New(dberr.BadRequest, "Attachment name cannot be empty")
	case len(name) > MaxAttachmentNameBytes:
		return dberr.New(dberr.BadRequest, "Attachment name is %d bytes long; the limit is %d UTF-8 bytes", len(name), MaxAttachmentNameBytes)
	case !utf8.ValidString(name):
		return dberr.New(dberr.BadRequest, "Attachment name is not valid UTF-8")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return dberr.New(dberr.BadRequest, "Attachment name contains a control character")
		}
	}
	return nil
}

func validateContentType(ct string) error {
	if len(ct) > 1024 || !utf8.ValidString(ct) {
		return dberr.New(dberr.BadRequest, "Attachment content type is invalid or longer than 1024 bytes")
	}
	return nil
}

// attachmentDoc loads the current document of a local attachment change,
// applying the optimistic-concurrency expectation.
func (tx *Tx) attachmentDoc(id string, expected *string) (*Document, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	doc, err := tx.Get(id)
	if err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, dberr.New(dberr.NotFound, "Document %s does not exist", id)
	}
	if expected != nil && *expected != "" && doc.ChangeVector != *expected {
		return nil, concurrencyErr("Document %s has change vector %s, but the attachment change was called with change vector %s. Optimistic concurrency violation, transaction will be aborted.", doc.ID, doc.ChangeVector, *expected)
	}
	return doc, nil
}

// PutAttachment stores staged content as attachment name of document id
// (which must exist) and writes a new version of the document listing it.
// The content is written once per hash; the staged file stays the caller's.
func (tx *Tx) PutAttachment(id, name, contentType string, st *Staged, expected *string) (AttachmentInfo, error) {
	if err := ValidateAttachmentName(name); err != nil {
		return AttachmentInfo{}, err
	}
	if err := validateContentType(contentType); err != nil {
		return AttachmentInfo{}, err
	}
	doc, err := tx.attachmentDoc(id, expected)
	if err != nil {
		return AttachmentInfo{}, err
	}
	key := LowerID(doc.ID)
	tx.noteAttachments()
	// The chunks take etags before the document, and the change vector the
	// document version will have: a destination that has seen that version
	// has seen the content (see Item.Skippable).
	complete, rows, err := tx.contentState(st.Hash)
	if err != nil {
		return AttachmentInfo{}, err
	}
	n := chunksFor(st.Size)
	if complete {
		n = rows
	}
	docCV := tx.cv.WithEntry(tx.db.nodeTag, tx.lastEtag+n+1, tx.db.dbid).String()
	if b := baseOf(doc.ChangeVector); b != nil { // see nextWrite
		docCV = b.WithEntry(tx.db.nodeTag, tx.lastEtag+n+1, tx.db.dbid).String()
	}
	if err := tx.storeContent(st, complete, docCV); err != nil {
		return AttachmentInfo{}, err
	}
	if _, err := tx.exec(sqlAttRefUpsert, key, name, st.Hash, contentType, st.Size); err != nil {
		return AttachmentInfo{}, err
	}
	info, err := tx.rewriteWithRefs(doc)
	if err != nil {
		return AttachmentInfo{}, err
	}
	if info.ChangeVector != docCV {
		return AttachmentInfo{}, dberr.New(dberr.Internal, "attachment chunks of %s were stamped %s, the document got %s", id, docCV, info.ChangeVector)
	}
	return AttachmentInfo{AttachmentRef: AttachmentRef{Name: name, Hash: st.Hash, ContentType: contentType, Size: st.Size},
		DocumentID: info.ID, ChangeVector: info.ChangeVector}, nil
}

// chunksFor is how many chunk etags storing (or re-stamping) a content takes.
func chunksFor(size int64) int64 {
	if size <= 0 {
		return 1
	}
	return (size + AttachmentChunkSize - 1) / AttachmentChunkSize
}

// storeContent writes the staged content's chunks unless the content is
// already complete; then its chunks are re-stamped (new etags and cv), so
// a copy that collected the content gets it again before the document
// version that now refers to it.
func (tx *Tx) storeContent(st *Staged, complete bool, cv string) error {
	if complete {
		return tx.restampContent(st.Hash, cv)
	}
	if _, err := tx.exec(sqlAttChunkDrop, st.Hash); err != nil { // a partial copy
		return err
	}
	f, err := os.Open(st.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, AttachmentChunkSize)
	var pos int64
	for {
		n, err := io.ReadFull(f, buf)
		if err == io.EOF && pos > 0 {
			break
		}
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return err
		}
		tx.lastEtag++
		if _, err := tx.exec(sqlAttChunkInsert, tx.lastEtag, st.Hash, pos, st.Size, cv, buf[:n]); err != nil {
			return err
		}
		pos += int64(n)
		if n < len(buf) {
			break
		}
	}
	if pos != st.Size {
		return dberr.New(dberr.Internal, "staged attachment %s changed size: %d, expected %d", st.Path, pos, st.Size)
	}
	return nil
}

// column reads the one column of every row of a query (rows and err as
// the query returned them) and closes the rows.
func column[T any](rows *sql.Rows, err error) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (tx *Tx) restampContent(hash, cv string) error {
	etags, err := column[int64](tx.stmt(sqlAttChunkList).Query(hash))
	if err != nil {
		return err
	}
	for _, e := range etags {
		tx.lastEtag++
		if _, err := tx.exec(sqlAttChunkRestamp, tx.lastEtag, cv, e); err != nil {
			return err
		}
	}
	return nil
}

// contentState tells whether every byte of a content is stored, and in how
// many chunk rows.
func (tx *Tx) contentState(hash string) (complete bool, rows int64, err error) {
	var have, size int64
	if err := tx.queryRow(sqlAttContentSize, hash).Scan(&rows, &have, &size); err != nil {
		return false, 0, err
	}
	return rows > 0 && have == size, rows, nil
}

// DeleteAttachment removes attachment name from document id and writes a
// new version of the document; content no longer referenced is collected.
// deleted is false when the document has no such attachment.
func (tx *Tx) DeleteAttachment(id, name string, expected *string) (info Info, deleted bool, err error) {
	doc, err := tx.attachmentDoc(id, expected)
	if err != nil {
		return Info{}, false, err
	}
	key := LowerID(doc.ID)
	var hash string
	err = tx.tx.QueryRow(`DELETE FROM attachments WHERE key = ? AND name = ? RETURNING hash`, key, name).Scan(&hash)
	if errors.Is(err, sql.ErrNoRows) {
		return Info{ID: doc.ID, ChangeVector: doc.ChangeVector}, false, nil
	}
	if err != nil {
		return Info{}, false, err
	}
	info, err = tx.rewriteWithRefs(doc)
	if err != nil {
		return Info{}, false, err
	}
	_, err = tx.collect([]string{hash})
	return info, true, err
}

// rewriteWithRefs writes a new local version of doc whose body lists the
// references the attachments table holds for it.
func (tx *Tx) rewriteWithRefs(doc *Document) (Info, error) {
	cv := doc.ChangeVector
	return tx.put(doc.ID, LowerID(doc.ID), false, document.Parsed{Body: doc.Body, Collection: doc.Collection}, &cv, nil)
}

// refs reads the references of a document from the attachments table.
func (tx *Tx) refs(key string) ([]AttachmentRef, error) {
	rows, err := tx.stmt(sqlAttRefs).Query(key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AttachmentRef
	for rows.Next() {
		var r AttachmentRef
		if err := rows.Scan(&r.Name, &r.Hash, &r.ContentType, &r.Size); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// bodyForPut is the body a local write of an existing document stores: the
// client's body (which never carries @attachments: the server owns it) with
// the document's references.
func (tx *Tx) bodyForPut(key string, body []byte) ([]byte, error) {
	var refs []AttachmentRef
	if tx.mayHaveAttachments() {
		var err error
		if refs, err = tx.refs(key); err != nil {
			return nil, err
		}
	}
	if len(refs) == 0 && !bytes.Contains(body, []byte(`"@attachments"`)) && !bytes.Contains(body, []byte("HasAttachments")) {
		return body, nil
	}
	return WithAttachments(body, refs)
}

// dropRefs removes a document's references (its version is going away)
// and returns the hashes they named; with collect, content no longer
// referenced is deleted at once (a local delete).
func (tx *Tx) dropRefs(key string, collect bool) ([]string, error) {
	if !tx.mayHaveAttachments() {
		return nil, nil
	}
	hashes, err := column[string](tx.stmt(sqlAttRefsDrop).Query(key))
	if err != nil || !collect {
		return hashes, err
	}
	_, err = tx.collect(hashes)
	return hashes, err
}

// release notes contents that a replicated delete or version no longer
// lists: CollectReleased deletes them later if nothing refers to them by
// then (see DESIGN.md, "Collection").
func (tx *Tx) release(hashes []string) error {
	for _, h := range hashes {
		if _, err := tx.exec(sqlAttRelease, h, tx.now.UnixMilli()); err != nil {
			return err
		}
	}
	return nil
}

// releaseListed releases the contents a version's body lists (a stored
// conflict version that is going away).
func (tx *Tx) releaseListed(body []byte) error {
	if !bytes.Contains(body, []byte(`"@attachments"`)) {
		return nil
	}
	refs, err := AttachmentsOf(body)
	if err != nil {
		return nil // a list that cannot be read names nothing to release
	}
	hashes := make([]string, 0, len(refs))
	for _, r := range refs {
		hashes = append(hashes, r.Hash)
	}
	return tx.release(hashes)
}

// syncRefs sets a document's references from a version's body (a
// replicated or resolved version); the hashes the previous version listed
// and this one does not are released.
func (tx *Tx) syncRefs(key string, body []byte) error {
	has := bytes.Contains(body, []byte(`"@attachments"`))
	if !has && !tx.mayHaveAttachments() {
		return nil
	}
	dropped, err := tx.dropRefs(key, false)
	if err != nil {
		return err
	}
	var refs []AttachmentRef
	if has {
		if refs, err = AttachmentsOf(body); err != nil {
			return err
		}
	}
	if len(refs) > 0 {
		tx.noteAttachments()
	}
	for _, r := range refs {
		if _, err := tx.exec(sqlAttRefUpsert, key, r.Name, r.Hash, r.ContentType, r.Size); err != nil {
			return err
		}
	}
	released := dropped[:0]
	for _, h := range dropped {
		kept := false
		for _, r := range refs {
			if r.Hash == h {
				kept = true
				break
			}
		}
		if !kept {
			released = append(released, h)
		}
	}
	return tx.release(released)
}

// collect deletes the content of hashes that no document and no conflict
// version refers to any more, and returns how many contents it deleted. It
// is called by local deletes and by CollectReleased: content that
// replication delivered ahead of its document is never among them (see
// DESIGN.md for the window this leaves).
func (tx *Tx) collect(hashes []string) (int, error) {
	n := 0
	for _, h := range hashes {
		var one int
		err := tx.queryRow(sqlAttRefUsed, h).Scan(&one)
		if err == nil {
			continue
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return n, err
		}
		if tx.mayHaveConflicts() {
			err := tx.tx.QueryRow(`SELECT 1 FROM conflicts WHERE instr(body, ?) > 0 LIMIT 1`, h).Scan(&one)
			if err == nil {
				continue
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return n, err
			}
		}
		res, err := tx.exec(sqlAttChunkDrop, h)
		if err != nil {
			return n, err
		}
		if k, _ := res.RowsAffected(); k > 0 {
			n++
		}
	}
	return n, nil
}

// collectReleasedBatch bounds the contents one CollectReleased transaction
// looks at, so the writer is never held long.
const collectReleasedBatch = 500

// CollectReleased deletes the contents that replicated deletes and versions
// released before before (or whose last replicated chunk came before it)
// and that no document or conflict version refers to any more. It returns
// how many contents it deleted. A released content something refers to
// again is forgotten, not deleted.
func (db *DB) CollectReleased(ctx context.Context, before time.Time) (int, error) {
	total := 0
	for {
		var one int
		err := db.reader.QueryRowContext(ctx, `SELECT 1 FROM attachment_released WHERE at < ? LIMIT 1`, before.UnixMilli()).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
		more := false
		err = db.Write(ctx, func(tx *Tx) error {
			hashes, err := column[string](tx.tx.Query(`DELETE FROM attachment_released WHERE hash IN
				(SELECT hash FROM attachment_released WHERE at < ? ORDER BY at LIMIT ?) RETURNING hash`, before.UnixMilli(), collectReleasedBatch))
			if err != nil {
				return err
			}
			more = len(hashes) == collectReleasedBatch
			n, err := tx.collect(hashes)
			total += n
			return err
		})
		if err != nil || !more {
			return total, err
		}
	}
}

// CollectAttachments deletes every content no document or conflict version
// refers to and returns how many contents it deleted. Run it while no
// replication is delivering: content that arrived ahead of its document is
// unreferenced too.
func (db *DB) CollectAttachments(ctx context.Context) (int, error) {
	n := 0
	err := db.Write(ctx, func(tx *Tx) error {
		hashes, err := column[string](tx.tx.Query(`SELECT DISTINCT hash FROM attachment_chunks WHERE hash NOT IN (SELECT hash FROM attachments)`))
		if err != nil {
			return err
		}
		n, err = tx.collect(hashes)
		return err
	})
	return n, err
}

// Attachment chunk items (replication). The item's ID is the content hash,
// its ChangeVector the vector stamped on the chunk, its Body the chunk's
// position and the content's whole size (two uvarints) followed by the
// bytes.

// AttachmentChunkBody encodes an attachment item's body.
func AttachmentChunkBody(dst []byte, pos, size int64, data []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(pos))
	dst = binary.AppendUvarint(dst, uint64(size))
	return append(dst, data...)
}

// ParseAttachmentChunk decodes an attachment item's body.
func ParseAttachmentChunk(body []byte) (pos, size int64, data []byte, err error) {
	p, n := binary.Uvarint(body)
	if n <= 0 || p > 1<<62 {
		return 0, 0, nil, errors.New("bad attachment chunk")
	}
	body = body[n:]
	s, n := binary.Uvarint(body)
	if n <= 0 || s > 1<<62 || p+uint64(len(body)-n) > s {
		return 0, 0, nil, errors.New("bad attachment chunk")
	}
	return int64(p), int64(s), body[n:], nil
}

// applyAttachmentChunk stores a replicated chunk. A chunk already present
// is re-stamped when the incoming vector is newer than its own (a copy
// re-sent it for a new reference), so it travels on to the copies this one
// feeds; otherwise it is skipped.
func (tx *Tx) applyAttachmentChunk(it Item) (Outcome, error) {
	pos, size, data, err := ParseAttachmentChunk(it.Body)
	if err != nil {
		return Skipped, dberr.New(dberr.BadRequest, "replicated attachment %s: %v", it.ID, err)
	}
	if len(it.ID) != 44 {
		return Skipped, dberr.New(dberr.BadRequest, "replicated attachment hash %q is not a base64 SHA-256", it.ID)
	}
	incoming, err := changevector.Parse(it.ChangeVector)
	if err != nil {
		return Skipped, dberr.New(dberr.BadRequest, "replicated attachment %s: %v", it.ID, err)
	}
	// A released content that is coming again may be listed by a version
	// that follows: its release starts over.
	if _, err := tx.exec(sqlAttReleaseTouch, tx.now.UnixMilli(), it.ID); err != nil {
		return Skipped, err
	}
	var etag int64
	var cv string
	err = tx.queryRow(sqlAttChunkGet, it.ID, pos).Scan(&etag, &cv)
	if errors.Is(err, sql.ErrNoRows) {
		tx.lastEtag++
		_, err = tx.exec(sqlAttChunkInsert, tx.lastEtag, it.ID, pos, size, it.ChangeVector, data)
		return Applied, err
	}
	if err != nil {
		return Skipped, err
	}
	stored, _ := changevector.ParseStored(cv)
	if changevector.Compare(incoming, stored) != changevector.Update {
		return Skipped, nil
	}
	tx.lastEtag++
	_, err = tx.exec(sqlAttChunkRestamp, tx.lastEtag, it.ChangeVector, etag)
	return Applied, err
}

// Attachment reads the attachment name of document id; nil when the
// document or the attachment does not exist. It reads the references
// table, never the document's body (which may be large).
func (db *DB) Attachment(ctx context.Context, id, name string) (*AttachmentInfo, error) {
	a := &AttachmentInfo{}
	err := db.reader.QueryRowContext(ctx, `SELECT d.id, d.change_vector, a.name, a.hash, a.content_type, a.size
		FROM attachments a JOIN docs d ON d.key = a.key WHERE a.key = ? AND a.name = ?`, LowerID(id), name).
		Scan(&a.DocumentID, &a.ChangeVector, &a.Name, &a.Hash, &a.ContentType, &a.Size)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Attachments lists the attachments of a stored document, by name (nil
// when it has none or does not exist), from the references table.
func (db *DB) Attachments(ctx context.Context, id string) ([]AttachmentRef, error) {
	rows, err := db.reader.QueryContext(ctx, sqlAttRefs, LowerID(id))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AttachmentRef
	for rows.Next() {
		var r AttachmentRef
		if err := rows.Scan(&r.Name, &r.Hash, &r.ContentType, &r.Size); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// OpenContent streams a content chunk by chunk (one chunk in memory).
func (db *DB) OpenContent(ctx context.Context, hash string) io.ReadCloser {
	return &contentReader{ctx: ctx, db: db, hash: hash}
}

type contentReader struct {
	ctx  context.Context
	db   *DB
	hash string
	pos  int64
	buf  []byte
	done bool
}

func (r *contentReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.done {
			return 0, io.EOF
		}
		var pos int64
		var data []byte
		err := r.db.reader.QueryRowContext(r.ctx, `SELECT pos, data FROM attachment_chunks WHERE hash = ? AND pos >= ? ORDER BY pos LIMIT 1`, r.hash, r.pos).Scan(&pos, &data)
		if errors.Is(err, sql.ErrNoRows) {
			r.done = true
			continue
		}
		if err != nil {
			return 0, err
		}
		if pos != r.pos {
			return 0, fmt.Errorf("attachment content %s is missing bytes at %d", r.hash, r.pos)
		}
		r.pos += int64(len(data))
		r.buf = data
		if len(data) == 0 {
			r.done = true
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *contentReader) Close() error { r.done, r.buf = true, nil; return nil }

// HasContent tells whether every byte of a content is stored.
func (db *DB) HasContent(ctx context.Context, hash string) (bool, error) {
	var n, have, size int64
	err := db.reader.QueryRowContext(ctx, sqlAttContentSize, hash).Scan(&n, &have, &size)
	return err == nil && n > 0 && have == size, err
}

// AttachmentsOf reads @metadata.@attachments of a stored body.
func AttachmentsOf(body []byte) ([]AttachmentRef, error) {
	if !bytes.Contains(body, []byte(`"@attachments"`)) {
		return nil, nil
	}
	_, meta, err := splitMetadata(body)
	if err != nil || meta == nil {
		return nil, err
	}
	var out []AttachmentRef
	err = eachMember(meta, func(name string, raw jsontext.Value) error {
		if name != "@attachments" {
			return nil
		}
		dec := jsontext.NewDecoder(bytes.NewReader(raw))
		if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
			return errors.New("@attachments is not an array")
		}
		for dec.PeekKind() != ']' {
			v, err := dec.ReadValue()
			if err != nil {
				return err
			}
			var r AttachmentRef
			if err := eachMember(v, func(n string, f jsontext.Value) error {
				switch n {
				case "Name", "Hash", "ContentType":
					var s string
					if len(f) > 0 && f[0] == '"' {
						s, _ = unquoteJSON(f)
					}
					switch n {
					case "Name":
						r.Name = s
					case "Hash":
						r.Hash = s
					default:
						r.ContentType = s
					}
				case "Size":
					fmt.Sscan(string(f), &r.Size)
				}
				return nil
			}); err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

func unquoteJSON(v jsontext.Value) (string, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	tok, err := dec.ReadToken()
	if err != nil {
		return "", err
	}
	return tok.String(), nil
}

// splitMetadata returns the stored body up to its @metadata value and that
// value (the stored form keeps @metadata last).
func splitMetadata(body []byte) (prefix []byte, meta jsontext.Value, err error) {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, nil, errors.New("not a JSON object")
	}
	for dec.PeekKind() != '}' {
		nameTok, err := dec.ReadToken()
		if err != nil {
			return nil, nil, err
		}
		name := nameTok.String()
		at := dec.InputOffset()
		v, err := dec.ReadValue()
		if err != nil {
			return nil, nil, err
		}
		if name == "@metadata" && v.Kind() == '{' {
			// skip whitespace between the colon and the value
			start := at
			for start < int64(len(body)) && body[start] != '{' {
				start++
			}
			prefix, meta = body[:start], jsontext.Value(body[start:dec.InputOffset()])
		}
	}
	return prefix, meta, nil
}

// eachMember calls fn for each member of a JSON object.
func eachMember(obj jsontext.Value, fn func(name string, raw jsontext.Value) error) error {
	dec := jsontext.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return errors.New("not a JSON object")
	}
	for dec.PeekKind() != '}' {
		nameTok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		name := nameTok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if err := fn(name, v); err != nil {
			return err
		}
	}
	return nil
}

// WithAttachments returns a stored body whose @metadata lists refs (sorted
// by name) in @attachments, with HasAttachments in @flags; with no refs both
// are removed (other flags stay). The same body and refs give the same
// bytes on every copy.
func WithAttachments(body []byte, refs []AttachmentRef) ([]byte, error) {
	prefix, meta, err := splitMetadata(body)
	if err != nil {
		return nil, err
	}
	if meta == nil {
		return nil, errors.New("the stored body has no @metadata")
	}
	var flags []string
	out := append([]byte(nil), prefix...)
	out = append(out, '{')
	first := true
	comma := func() {
		if !first {
			out = append(out, ',')
		}
		first = false
	}
	err = eachMember(meta, func(name string, raw jsontext.Value) error {
		switch name {
		case "@attachments":
			return nil
		case "@flags":
			if s, err := unquoteJSON(raw); err == nil {
				for _, f := range strings.Split(s, ",") {
					if f = strings.TrimSpace(f); f != "" && f != "HasAttachments" {
						flags = append(flags, f)
					}
				}
			}
			return nil
		}
		comma()
		out = document.AppendString(out, name)
		out = append(out, ':')
		out = append(out, raw...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(refs) > 0 {
		refs = append([]AttachmentRef(nil), refs...)
		sort.Slice(refs, func(i, j int) bool { return refs[i].Name < refs[j].Name })
		comma()
		out = append(out, `"@attachments":[`...)
		for i, r := range refs {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, `{"Name":`...)
			out = document.AppendString(out, r.Name)
			out = append(out, `,"Hash":`...)
			out = document.AppendString(out, r.Hash)
			out = append(out, `,"ContentType":`...)
			out = document.AppendString(out, r.ContentType)
			out = append(out, `,"Size":`...)
			out = fmt.Appendf(out, "%d}", r.Size)
		}
		out = append(out, ']')
		flags = append(flags, "HasAttachments")
	}
	if len(flags) > 0 {
		comma()
		out = append(out, `"@flags":`...)
		out = document.AppendString(out, strings.Join(flags, ", "))
	}
	out = append(out, '}', '}')
	return out, nil
}

// mergeAttachmentVersions merges two concurrent versions of a document
// that differ only in their attachments: the result lists the union (for
// one name on both, the greater hash wins, so every copy picks the same).
// ok is false when the versions differ otherwise.
func mergeAttachmentVersions(a, b []byte) (merged []byte, ok bool) {
	if !bytes.Contains(a, []byte(`"@attachments"`)) && !bytes.Contains(b, []byte(`"@attachments"`)) {
		return nil, false
	}
	ra, err1 := AttachmentsOf(a)
	rb, err2 := AttachmentsOf(b)
	sa, err3 := WithAttachments(a, nil)
	sb, err4 := WithAttachments(b, nil)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || !bytes.Equal(sa, sb) {
		return nil, false
	}
	byName := map[string]AttachmentRef{}
	for _, r := range append(ra, rb...) {
		if o, ok := byName[r.Name]; !ok || r.Hash > o.Hash {
			byName[r.Name] = r
		}
	}
	union := make([]AttachmentRef, 0, len(byName))
	for _, r := range byName {
		union = append(union, r)
	}
	out, err := WithAttachments(sa, union)
	return out, err == nil
}

// mergeAttachments makes it the union of two concurrent versions that
// differ only in their attachments (see mergeAttachmentVersions).
func mergeAttachments(it *Item, local []byte) bool {
	merged, ok := mergeAttachmentVersions(local, it.Body)
	if ok {
		it.Body = merged
	}
	return ok
}

// attachmentsHeld tells whether the file holds attachment content (one
// indexed probe until a write has noted some).
func (db *DB) attachmentsHeld() bool {
	s := &db.attach
	s.mu.Lock()
	known := s.any
	s.mu.Unlock()
	if known {
		return true
	}
	var one int
	return db.reader.QueryRow(`SELECT 1 FROM attachment_chunks LIMIT 1`).Scan(&one) == nil
}

// SetAttachmentRefs sets the references of document id from a body that
// lists them (an import writing the document next).
func (tx *Tx) SetAttachmentRefs(id string, body []byte) error {
	return tx.syncRefs(LowerID(id), body)
}

// AttachmentCounts returns how many attachment references the current
// documents hold and how many distinct contents are stored (index scans;
// nothing while the file never held an attachment).
func (db *DB) AttachmentCounts(ctx context.Context) (refs, unique int64, err error) {
	if !db.attachmentsHeld() {
		return 0, 0, nil
	}
	if err := db.reader.QueryRowContext(ctx, `SELECT count(*) FROM attachments`).Scan(&refs); err != nil {
		return 0, 0, err
	}
	err = db.reader.QueryRowContext(ctx, `SELECT count(DISTINCT hash) FROM attachment_chunks`).Scan(&unique)
	return refs, unique, err
}
