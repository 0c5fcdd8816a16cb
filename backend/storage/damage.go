package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Reasons a database copy is damaged (DamageError.Reason); they are the
// label of rookery_database_damaged.
const (
	// ReasonUnreadable: the file cannot be opened as a database (not a
	// SQLite file, truncated below its own header, an error opening it).
	ReasonUnreadable = "unreadable"
	// ReasonIntegrity: SQLite's integrity check found errors.
	ReasonIntegrity = "integrity"
	// ReasonEtagRegression: the file's last etag is below the etag mark of
	// writes this node acknowledged (a truncated, garbled or deleted WAL).
	ReasonEtagRegression = "etag-regression"
	// ReasonDatabaseID: the file's database id is not the one its etag mark
	// was written for (another database's file put in its place).
	ReasonDatabaseID = "database-id"
	// ReasonPeerRegression: another member has acknowledged writes of this
	// copy that this copy no longer has (an older copy restored).
	ReasonPeerRegression = "peer-regression"
	// ReasonMissingFile: the database's directory has its etag mark but no
	// database file.
	ReasonMissingFile = "missing-file"
)

// DamageError is Open's answer for a file that must not be served: what is
// wrong with it, in one readable sentence.
type DamageError struct {
	Reason string
	Detail string
}

func (e *DamageError) Error() string { return e.Detail }

// AsDamage returns err's DamageError, if it is one.
func AsDamage(err error) (*DamageError, bool) {
	var d *DamageError
	ok := errors.As(err, &d)
	return d, ok
}

// Integrity modes of Options.Integrity.
const (
	IntegrityQuick = "quick" // PRAGMA quick_check (the default)
	IntegrityFull  = "full"  // PRAGMA integrity_check (also checks index contents)
	IntegrityOff   = "off"
)

// CheckIntegrityMode validates an integrity mode; "" is quick.
func CheckIntegrityMode(mode string) error {
	switch mode {
	case "", IntegrityQuick, IntegrityFull, IntegrityOff:
		return nil
	}
	return fmt.Errorf("integrity check %q: use quick, full or off", mode)
}

// MarkSuffix names a database file's etag mark: documents.db.mark.
const MarkSuffix = ".mark"

// The etag mark is one fixed-length line:
//
//	rookery-etag-mark 1 <database id, 22 chars> <etag, 19 digits> <crc32 of the rest, 8 hex>\n
//
// It is rewritten in place (one pwrite at offset 0) after every commit that
// moved the last etag, before the commit's requests are answered, and never
// fsynced on that path: the commit's own fsync came first, so the mark can
// lag the file (power loss) but never lead it.
const (
	markPrefix = "rookery-etag-mark 1 "
	markLen    = len(markPrefix) + 22 + 1 + 19 + 1 + 8 + 1
)

type etagMark struct {
	dbid string
	etag int64
}

func formatMark(dbid string, etag int64) []byte {
	b := make([]byte, 0, markLen)
	b = append(b, markPrefix...)
	b = append(b, dbid...)
	b = append(b, ' ')
	b = append(b, pad19(etag)...)
	b = append(b, ' ')
	b = append(b, "00000000\n"...)
	sealMark(b)
	return b
}

// sealMark writes the checksum of a formatted mark into its last field.
func sealMark(b []byte) {
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.ChecksumIEEE(b[:markLen-9]))
	hex.Encode(b[markLen-9:markLen-1], sum[:])
}

// parseMark reads a mark; ok is false for a missing, short, torn or
// foreign file (which is then ignored and rewritten).
func parseMark(b []byte) (m etagMark, ok bool) {
	if len(b) < markLen || !bytes.HasPrefix(b, []byte(markPrefix)) {
		return m, false
	}
	b = b[:markLen]
	fields := strings.Fields(string(b[len(markPrefix):]))
	if len(fields) != 3 || len(fields[0]) != 22 || len(fields[1]) != 19 {
		return m, false
	}
	want := append([]byte(nil), b...)
	sealMark(want)
	if !bytes.Equal(want, b) {
		return m, false
	}
	etag, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil || etag < 0 {
		return m, false
	}
	return etagMark{dbid: fields[0], etag: etag}, true
}

// readMark reads the mark beside path; present is false when there is no
// mark file at all.
func readMark(path string) (m etagMark, present, ok bool, err error) {
	b, err := os.ReadFile(path + MarkSuffix)
	if errors.Is(err, os.ErrNotExist) {
		return m, false, false, nil
	}
	if err != nil {
		return m, true, false, err
	}
	m, ok = parseMark(b)
	return m, true, ok, nil
}

// HasMark tells whether a database file has an etag mark beside it (it was
// opened by a version that keeps one).
func HasMark(path string) bool {
	_, err := os.Stat(path + MarkSuffix)
	return err == nil
}

// sqliteMagic starts every SQLite database file.
const sqliteMagic = "SQLite format 3\x00"

// checkHeader looks at an existing file before SQLite does: a file SQLite
// would silently treat as a new, empty database (empty) or reject with a
// vague error (garbage, cut inside its header) is named here. A file cut
// below the page count its header records is caught too, when no WAL is
// beside it (with a WAL, a checkpoint interrupted by a crash can leave the
// main file legitimately shorter; the integrity check covers that case).
func checkHeader(path string, marked bool) error {
	name := filepath.Base(path) // details name files, not the node's paths
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		if marked {
			return &DamageError{Reason: ReasonMissingFile, Detail: fmt.Sprintf("the database file %s is missing but its etag mark is there: acknowledged writes were in it", name)}
		}
		return nil
	}
	if err != nil {
		return &DamageError{Reason: ReasonUnreadable, Detail: fmt.Sprintf("cannot open %s: %v", name, rootCause(err))}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return &DamageError{Reason: ReasonUnreadable, Detail: fmt.Sprintf("cannot read %s: %v", name, rootCause(err))}
	}
	size := fi.Size()
	if size == 0 {
		if marked || walSize(path) > 0 {
			return &DamageError{Reason: ReasonUnreadable, Detail: fmt.Sprintf("the database file %s is empty (0 bytes) but acknowledged writes were in it", name)}
		}
		return nil // created, then stopped before SQLite wrote anything
	}
	var h [100]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return &DamageError{Reason: ReasonUnreadable, Detail: fmt.Sprintf("%s is %d bytes, shorter than a SQLite header: it was truncated", name, size)}
	}
	if string(h[:16]) != sqliteMagic {
		return &DamageError{Reason: ReasonUnreadable, Detail: fmt.Sprintf("%s is not a SQLite database (its first bytes are %q)", name, h[:16])}
	}
	pageSize := int64(binary.BigEndian.Uint16(h[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	pages := int64(binary.BigEndian.Uint32(h[28:32]))
	valid := binary.BigEndian.Uint32(h[24:28]) == binary.BigEndian.Uint32(h[92:96])
	if valid && pages > 0 && pageSize >= 512 && walSize(path) == 0 && pages*pageSize > size {
		return &DamageError{Reason: ReasonUnreadable, Detail: fmt.Sprintf("%s was truncated: its header records %d pages of %d bytes (%d bytes) but the file has %d bytes", name, pages, pageSize, pages*pageSize, size)}
	}
	return nil
}

func walSize(path string) int64 {
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		return 0
	}
	return fi.Size()
}

// integrityCheck runs SQLite's check (quick or full) and returns what it
// found, at most a few lines.
func (db *DB) integrityCheck(mode string) error {
	pragma := "PRAGMA quick_check(5)"
	if mode == IntegrityFull {
		pragma = "PRAGMA integrity_check(5)"
	}
	rows, err := db.writer.Query(pragma)
	if err != nil {
		return &DamageError{Reason: ReasonIntegrity, Detail: fmt.Sprintf("the integrity check (%s) could not run: %v", mode, err)}
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return &DamageError{Reason: ReasonIntegrity, Detail: fmt.Sprintf("the integrity check (%s) failed: %v", mode, err)}
		}
		if s != "ok" {
			problems = append(problems, s)
		}
	}
	if err := rows.Err(); err != nil {
		return &DamageError{Reason: ReasonIntegrity, Detail: fmt.Sprintf("the integrity check (%s) failed: %v", mode, err)}
	}
	if len(problems) > 0 {
		return &DamageError{Reason: ReasonIntegrity, Detail: fmt.Sprintf("the integrity check (%s) found: %s", mode, strings.Join(problems, "; "))}
	}
	return nil
}

// checkMark compares the file with its etag mark and opens the mark for the
// writer; a file without a mark (new, or from a version without marks) gets
// one.
func (db *DB) checkMark() error {
	m, present, ok, err := readMark(db.path)
	if err != nil {
		return &DamageError{Reason: ReasonUnreadable, Detail: fmt.Sprintf("cannot read the etag mark %s: %v", filepath.Base(db.path)+MarkSuffix, rootCause(err))}
	}
	if present && !ok {
		// A torn or foreign mark (power loss during its write, an edit):
		// it proves nothing either way.
		db.log.Warn("the etag mark is unreadable; writing a new one", "mark", db.path+MarkSuffix)
	}
	if ok {
		if m.dbid != db.dbid {
			return &DamageError{Reason: ReasonDatabaseID, Detail: fmt.Sprintf("the file holds database id %s but this node acknowledged writes to database id %s here (etag mark %s): it is another database's file, or an older one", db.dbid, m.dbid, filepath.Base(db.path)+MarkSuffix)}
		}
		if m.etag > db.lastEtag {
			return &DamageError{Reason: ReasonEtagRegression, Detail: fmt.Sprintf("the file's last etag is %d but this node acknowledged writes up to etag %d: the writes with etags %d to %d are missing (a truncated, garbled or deleted write-ahead log, or an older file)", db.lastEtag, m.etag, db.lastEtag+1, m.etag)}
		}
	}
	f, err := os.OpenFile(db.path+MarkSuffix, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open the etag mark: %w", err)
	}
	db.mark = f
	db.markBuf = formatMark(db.dbid, db.lastEtag)
	if _, err := f.WriteAt(db.markBuf, 0); err != nil {
		f.Close()
		return fmt.Errorf("write the etag mark: %w", err)
	}
	// Once, at open: the mark is then on disk however the node stops.
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync the etag mark: %w", err)
	}
	return nil
}

// writeMark records etag as acknowledged. Called by the writer after a
// durable commit and before the commit's requests are answered; no fsync.
func (db *DB) writeMark(etag int64) {
	if db.mark == nil {
		return
	}
	b := db.markBuf
	// Only the 19 etag digits change.
	off := len(markPrefix) + 23
	copy(b[off:off+19], pad19(etag))
	sealMark(b)
	if _, err := db.mark.WriteAt(b, 0); err != nil && !db.markFailed {
		db.markFailed = true
		db.log.Error("could not write the etag mark; damage to this database's write-ahead log may go unnoticed", "mark", db.path+MarkSuffix, "error", err)
	}
}
