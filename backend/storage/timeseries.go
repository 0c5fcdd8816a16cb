package storage

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
)

// KindTimeSeries marks a replicated time-series change: an entry (Type
// "Put") or a deleted range (Type "Delete"). Fields of such an Item: ID is
// the document id, Collection the series name, ChangeVector the Lamport
// number in decimal, LastModified the timestamp (Put) or the range's start
// (Delete) as unix milliseconds read as nanoseconds, Body the entry's data
// (tag and values, see encodeTSData) or the range's end in decimal.
const KindTimeSeries ItemKind = 4

// Time-series limits.
const (
	// MaxTSValues bounds the values of one entry (RavenDB's limit).
	MaxTSValues = 32
	// MaxTSNameBytes bounds a series name.
	MaxTSNameBytes = 256
	// MaxTSTagBytes bounds an entry's tag.
	MaxTSTagBytes = 1024
)

// Bounds of a range: no bound.
const (
	TSMin = math.MinInt64
	TSMax = math.MaxInt64
)

// TSAppend is one appended entry.
type TSAppend struct {
	Timestamp int64 // unix milliseconds
	Values    []float64
	Tag       *string
}

// TSDelete is one deleted range, bounds included (unix milliseconds).
type TSDelete struct {
	From, To int64
}

// TSOp is the changes of one series of one document (a TimeSeries command).
type TSOp struct {
	Name    string
	Appends []TSAppend
	Deletes []TSDelete
}

// TSEntry is one stored entry.
type TSEntry struct {
	Timestamp int64 // unix milliseconds
	Tag       *string
	Values    []float64
	Lamport   int64
}

// TSStats describes one series.
type TSStats struct {
	Name    string
	Entries int64
	Start   int64 // unix milliseconds
	End     int64
}

// tsClock is the database's Lamport clock for time series: above every
// number this copy has written or seen. It is kept in meta (ts_clock) and
// only used by the writer goroutine.
type tsClock struct {
	mu     sync.Mutex
	loaded bool
	v      int64
}

var tsClocks sync.Map // *DB -> *tsClock

func (tx *Tx) clock() (*tsClock, error) {
	c, _ := tsClocks.LoadOrStore(tx.db, &tsClock{})
	clk := c.(*tsClock)
	clk.mu.Lock()
	defer clk.mu.Unlock()
	if !clk.loaded {
		var s string
		err := tx.tx.QueryRow(`SELECT value FROM meta WHERE key = 'ts_clock'`).Scan(&s)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		clk.v, _ = strconv.ParseInt(s, 10, 64)
		clk.loaded = true
	}
	return clk, nil
}

// observe raises the clock to at least v and stores it.
func (tx *Tx) observe(v int64) error {
	clk, err := tx.clock()
	if err != nil {
		return err
	}
	clk.mu.Lock()
	if v <= clk.v {
		clk.mu.Unlock()
		return nil
	}
	clk.v = v
	clk.mu.Unlock()
	_, err = tx.exec(sqlTSSetClock, strconv.FormatInt(v, 10))
	return err
}

// tick returns a Lamport number above every one this copy knows.
func (tx *Tx) tick() (int64, error) {
	clk, err := tx.clock()
	if err != nil {
		return 0, err
	}
	clk.mu.Lock()
	v := clk.v + 1
	clk.mu.Unlock()
	return v, tx.observe(v)
}

const (
	sqlTSSetClock     = `INSERT INTO meta(key, value) VALUES('ts_clock', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`
	sqlTSGetEntry     = `SELECT lamport, data FROM ts_entries WHERE doc_key = ? AND lname = ? AND ts = ?`
	sqlTSPutEntry     = `INSERT INTO ts_entries(doc_key, lname, ts, lamport, data, etag) VALUES(?, ?, ?, ?, ?, ?) ON CONFLICT(doc_key, lname, ts) DO UPDATE SET lamport = excluded.lamport, data = excluded.data, etag = excluded.etag`
	sqlTSDelRange     = `DELETE FROM ts_entries WHERE doc_key = ? AND lname = ? AND ts >= ? AND ts <= ? AND lamport < ?`
	sqlTSAddDelete    = `INSERT OR IGNORE INTO ts_deletes(etag, doc_key, lname, from_ts, to_ts, lamport) VALUES(?, ?, ?, ?, ?, ?)`
	sqlTSCoveredBy    = `SELECT 1 FROM ts_deletes WHERE doc_key = ? AND lname = ? AND from_ts <= ?3 AND to_ts >= ?3 AND lamport > ? LIMIT 1`
	sqlTSAddSeries    = `INSERT OR IGNORE INTO ts_series(doc_key, lname, doc_id, name) VALUES(?, ?, ?, ?)`
	sqlTSNames        = `SELECT name FROM ts_series s WHERE doc_key = ? AND EXISTS (SELECT 1 FROM ts_entries e WHERE e.doc_key = s.doc_key AND e.lname = s.lname)`
	sqlTSAnySeries    = `SELECT 1 FROM ts_series WHERE doc_key = ? LIMIT 1`
	sqlTSAnyEntry     = `SELECT 1 FROM ts_entries WHERE doc_key = ? AND lname = ? LIMIT 1`
	sqlTSDropSeries   = `DELETE FROM ts_series WHERE doc_key = ? AND lname = ?`
	sqlTSDropDocEnt   = `DELETE FROM ts_entries WHERE doc_key = ?`
	sqlTSDropDocSer   = `DELETE FROM ts_series WHERE doc_key = ?`
	sqlTSDropDocDel   = `DELETE FROM ts_deletes WHERE doc_key = ?`
	sqlTSHasTombstone = `SELECT 1 FROM tombstones WHERE key = ?`
)

func init() {
	writerStatements = append(writerStatements, sqlTSSetClock, sqlTSGetEntry, sqlTSPutEntry, sqlTSDelRange,
		sqlTSAddDelete, sqlTSCoveredBy, sqlTSAddSeries, sqlTSNames, sqlTSAnySeries, sqlTSAnyEntry, sqlTSDropSeries,
		sqlTSDropDocEnt, sqlTSDropDocSer, sqlTSDropDocDel, sqlTSHasTombstone)
}

// ValidateTSName checks a series name.
func ValidateTSName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return dberr.New(dberr.BadRequest, "Time series name cannot be empty")
	case len(name) > MaxTSNameBytes:
		return dberr.New(dberr.BadRequest, "Time series name is %d bytes long; the limit is %d", len(name), MaxTSNameBytes)
	case !utf8.ValidString(name):
		return dberr.New(dberr.BadRequest, "Time series name is not valid UTF-8")
	case strings.HasPrefix(strings.ToUpper(name), "INC:"):
		return dberr.New(dberr.BadRequest, "Incremental time series ('%s') are not supported by this server", name)
	case strings.ContainsAny(name, "@|"):
		return dberr.New(dberr.BadRequest, "Time series name '%s' cannot contain '@' or '|' (rollups are not supported)", name)
	}
	return nil
}

// encodeTSData writes an entry's tag and values: uvarint tag length + 1
// (0 for no tag), the tag, then each value as a little-endian float64.
func encodeTSData(tag *string, values []float64) []byte {
	n := 0
	if tag != nil {
		n = len(*tag)
	}
	b := make([]byte, 0, binary.MaxVarintLen64+n+8*len(values))
	if tag == nil {
		b = binary.AppendUvarint(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(*tag))+1)
		b = append(b, *tag...)
	}
	for _, v := range values {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

var errTSData = errors.New("bad time-series entry data")

// decodeTSData reads what encodeTSData wrote; values are appended to vals.
func decodeTSData(b []byte, vals []float64) (*string, []float64, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k)+1 {
		return nil, nil, errTSData
	}
	b = b[k:]
	var tag *string
	if n > 0 {
		s := string(b[:n-1])
		tag = &s
		b = b[n-1:]
	}
	if len(b)%8 != 0 || len(b)/8 > MaxTSValues || len(b) == 0 {
		return nil, nil, errTSData
	}
	for ; len(b) > 0; b = b[8:] {
		vals = append(vals, math.Float64frombits(binary.LittleEndian.Uint64(b)))
	}
	return tag, vals, nil
}

// TimeSeries applies one TimeSeries command to a document: its deletes,
// then its appends, all under one Lamport number. The document must exist.
// A series that appears or disappears changes the document's
// @metadata.@timeseries (a new document version).
func (tx *Tx) TimeSeries(id string, op TSOp) error {
	if err := ValidateTSName(op.Name); err != nil {
		return err
	}
	for _, a := range op.Appends {
		if len(a.Values) == 0 || len(a.Values) > MaxTSValues {
			return dberr.New(dberr.BadRequest, "Time series '%s': an entry has %d values; it must have 1 to %d", op.Name, len(a.Values), MaxTSValues)
		}
		for _, v := range a.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return dberr.New(dberr.BadRequest, "Time series '%s': values must be finite numbers", op.Name)
			}
		}
		if a.Tag != nil && len(*a.Tag) > MaxTSTagBytes {
			return dberr.New(dberr.BadRequest, "Time series '%s': a tag is %d bytes long; the limit is %d", op.Name, len(*a.Tag), MaxTSTagBytes)
		}
	}
	for _, d := range op.Deletes {
		if d.From > d.To {
			return dberr.New(dberr.BadRequest, "Time series '%s': a deleted range ends before it starts", op.Name)
		}
	}
	doc, err := tx.Get(id)
	if err != nil {
		return err
	}
	if doc == nil {
		return dberr.New(dberr.InvalidOperation, "Cannot operate on time series of a missing document: %s", id)
	}
	key, lname := LowerID(doc.ID), strings.ToLower(op.Name)
	lamport, err := tx.tick()
	if err != nil {
		return err
	}
	hadEntries, err := tx.tsAnyEntry(key, lname)
	if err != nil {
		return err
	}
	for _, d := range op.Deletes {
		tx.lastEtag++
		if _, err := tx.exec(sqlTSAddDelete, tx.lastEtag, key, lname, d.From, d.To, lamport); err != nil {
			return err
		}
		if _, err := tx.exec(sqlTSDelRange, key, lname, d.From, d.To, lamport); err != nil {
			return err
		}
		if tx.wantItems {
			tx.noteSeries("Delete", doc.ID, doc.Collection, op.Name, d.From, d.To, tx.lastEtag)
		}
	}
	if len(op.Appends) > 0 {
		if _, err := tx.exec(sqlTSAddSeries, key, lname, doc.ID, op.Name); err != nil {
			return err
		}
	}
	for _, a := range op.Appends {
		tx.lastEtag++
		if _, err := tx.exec(sqlTSPutEntry, key, lname, a.Timestamp, lamport, encodeTSData(a.Tag, a.Values), tx.lastEtag); err != nil {
			return err
		}
		if tx.wantItems {
			tx.noteSeries("Put", doc.ID, doc.Collection, op.Name, a.Timestamp, a.Timestamp, tx.lastEtag)
		}
	}
	hasEntries := len(op.Appends) > 0
	if !hasEntries && hadEntries {
		if hasEntries, err = tx.tsAnyEntry(key, lname); err != nil {
			return err
		}
	}
	if hadEntries == hasEntries {
		return nil
	}
	// The series appeared or disappeared: a new document version carries
	// the new list of names.
	if !hasEntries {
		if _, err := tx.exec(sqlTSDropSeries, key, lname); err != nil {
			return err
		}
	}
	p, err := document.Parse(doc.Body)
	if err != nil {
		return err
	}
	_, err = tx.Put(doc.ID, p, nil)
	return err
}

func (tx *Tx) tsAnyEntry(key, lname string) (bool, error) {
	var one int
	err := tx.queryRow(sqlTSAnyEntry, key, lname).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// tsNames lists the series of a document that hold entries, sorted
// case-insensitively.
func (tx *Tx) tsNames(key string) ([]string, error) {
	var one int
	err := tx.queryRow(sqlTSAnySeries, key).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rows, err := tx.stmt(sqlTSNames).Query(key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	sortNames(names)
	return names, rows.Err()
}

func sortNames(names []string) {
	sort.Slice(names, func(i, j int) bool {
		a, b := strings.ToLower(names[i]), strings.ToLower(names[j])
		if a != b {
			return a < b
		}
		return names[i] < names[j]
	})
}

// withSeriesNames is the document body a local write stores: the stored
// form with @metadata.@timeseries and the HasTimeSeries flag set from the
// document's series. Bodies of documents without series pass unchanged.
// Called by put for an existing document (a client's body never carries
// the server-owned keys).
func (tx *Tx) withSeriesNames(key string, body []byte, flags string) ([]byte, error) {
	names, err := tx.tsNames(key)
	if err != nil || len(names) == 0 {
		return body, err
	}
	return spliceSeriesNames(body, names, flags), nil
}

// spliceSeriesNames appends "@flags" and "@timeseries" to the stored
// form's @metadata (which must not hold them). other are flags to keep.
func spliceSeriesNames(body []byte, names []string, other string) []byte {
	n := len(body)
	if n < 2 || body[n-1] != '}' || body[n-2] != '}' {
		return body
	}
	var flags []string
	for _, f := range strings.Split(other, ",") {
		if f = strings.TrimSpace(f); f != "" && f != "HasTimeSeries" {
			flags = append(flags, f)
		}
	}
	if len(names) > 0 {
		flags = append(flags, "HasTimeSeries")
	}
	out := make([]byte, 0, n+64)
	out = append(out, body[:n-2]...)
	sep := body[n-3] != '{'
	if len(flags) > 0 {
		if sep {
			out = append(out, ',')
		}
		out = append(out, `"@flags":`...)
		out = document.AppendString(out, strings.Join(flags, ", "))
		sep = true
	}
	if len(names) > 0 {
		if sep {
			out = append(out, ',')
		}
		out = append(out, `"@timeseries":[`...)
		for i, name := range names {
			if i > 0 {
				out = append(out, ',')
			}
			out = document.AppendString(out, name)
		}
		out = append(out, ']')
	}
	return append(out, '}', '}')
}

// seriesNamesOf splits a stored body into its form without the
// server-owned keys, its @timeseries names and its @flags.
func seriesNamesOf(body []byte) (clean []byte, names []string, flags string, attachments json.RawMessage, ok bool) {
	p, err := document.Parse(body)
	if err != nil {
		return nil, nil, "", nil, false
	}
	var v struct {
		Meta struct {
			TS  []string        `json:"@timeseries"`
			Att json.RawMessage `json:"@attachments"`
		} `json:"@metadata"`
	}
	if json.Unmarshal(body, &v) != nil {
		return nil, nil, "", nil, false
	}
	return p.Body, v.Meta.TS, p.Server["@flags"], v.Meta.Att, true
}

// mergeSeriesNames decides two concurrent versions of a document that
// differ only in their time-series names (and flags): it sets it.Body to
// the version with the union of the names and reports true. Every copy
// computes the same body from the same two versions.
func mergeSeriesNames(it *Item, local []byte) bool {
	if !bytes.Contains(it.Body, []byte(`"@timeseries"`)) && !bytes.Contains(local, []byte(`"@timeseries"`)) {
		return false
	}
	a, an, af, aa, ok1 := seriesNamesOf(it.Body)
	b, bn, bf, ba, ok2 := seriesNamesOf(local)
	// The attachment list is server-owned (document.Parse drops it): two
	// versions that differ in it are not this case, and an equal one is
	// put back.
	if !ok1 || !ok2 || !bytes.Equal(a, b) || !bytes.Equal(aa, ba) {
		return false
	}
	if len(aa) > 0 && string(aa) != "null" {
		if n := len(a); n >= 2 && a[n-1] == '}' && a[n-2] == '}' {
			withAtt := append([]byte(nil), a[:n-2]...)
			if a[n-3] != '{' {
				withAtt = append(withAtt, ',')
			}
			withAtt = append(withAtt, `"@attachments":`...)
			withAtt = append(withAtt, aa...)
			a = append(withAtt, '}', '}')
		}
	}
	seen := map[string]bool{}
	var names []string
	for _, n := range append(an, bn...) {
		if k := strings.ToLower(n); !seen[k] {
			seen[k] = true
			names = append(names, n)
		}
	}
	sortNames(names)
	fl := map[string]bool{}
	var flags []string
	for _, f := range strings.Split(af+","+bf, ",") {
		if f = strings.TrimSpace(f); f != "" && !fl[f] {
			fl[f] = true
			flags = append(flags, f)
		}
	}
	sort.Strings(flags)
	it.Body = spliceSeriesNames(a, names, strings.Join(flags, ","))
	return true
}

// dropSeries removes every series of a deleted document.
func (tx *Tx) dropSeries(key string) error {
	var one int
	err := tx.queryRow(sqlTSAnySeries, key).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, q := range []string{sqlTSDropDocEnt, sqlTSDropDocSer, sqlTSDropDocDel} {
		if _, err := tx.exec(q, key); err != nil {
			return err
		}
	}
	return nil
}

// applyTimeSeries applies a replicated time-series change. For one
// timestamp the greater (Lamport number, data) wins; a deleted range
// removes the entries with a smaller number and is remembered, so an entry
// it covers that arrives later is dropped. What this copy has already (the
// same entry, the same range) is skipped without taking an etag, so
// changes that come back from other copies stop here.
func (tx *Tx) applyTimeSeries(it Item) (Outcome, error) {
	lamport, err := strconv.ParseInt(it.ChangeVector, 10, 64)
	if err != nil || lamport <= 0 {
		return Skipped, dberr.New(dberr.BadRequest, "replicated time series of %s: bad Lamport number %q", it.ID, it.ChangeVector)
	}
	if err := ValidateID(it.ID); err != nil {
		return Skipped, err
	}
	if strings.TrimSpace(it.Collection) == "" || len(it.Collection) > MaxTSNameBytes {
		return Skipped, dberr.New(dberr.BadRequest, "replicated time series of %s: bad name", it.ID)
	}
	key, lname := LowerID(it.ID), strings.ToLower(it.Collection)
	ts := it.LastModified.UnixNano()
	if err := tx.observe(lamport); err != nil {
		return Skipped, err
	}
	// A document deleted here took its series along: what arrives for it
	// afterwards is dropped (the tombstone reaches every copy).
	docID, coll := it.ID, ""
	var ok bool
	if tx.wantItems {
		var doc *existing
		doc, err = tx.lookup(key)
		if ok = doc != nil; ok {
			docID, coll = doc.id, doc.collection
		}
	} else {
		ok, err = tx.Exists(it.ID)
	}
	if err != nil {
		return Skipped, err
	} else if !ok {
		var one int
		err := tx.queryRow(sqlTSHasTombstone, key).Scan(&one)
		if err == nil {
			return Skipped, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return Skipped, err
		}
	}
	if it.Type == "Delete" {
		to, err := strconv.ParseInt(string(it.Body), 10, 64)
		if err != nil || to < ts {
			return Skipped, dberr.New(dberr.BadRequest, "replicated time series of %s: bad range", it.ID)
		}
		res, err := tx.exec(sqlTSAddDelete, tx.lastEtag+1, key, lname, ts, to, lamport)
		if err != nil {
			return Skipped, err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return Skipped, nil
		}
		tx.lastEtag++
		if _, err := tx.exec(sqlTSDelRange, key, lname, ts, to, lamport); err != nil {
			return Skipped, err
		}
		if tx.wantItems {
			tx.noteSeries("Delete", docID, coll, it.Collection, ts, to, tx.lastEtag)
		}
		return Applied, nil
	}
	if _, _, err := decodeTSData(it.Body, nil); err != nil {
		return Skipped, dberr.New(dberr.BadRequest, "replicated time series of %s: %v", it.ID, err)
	}
	var have int64
	var data []byte
	err = tx.queryRow(sqlTSGetEntry, key, lname, ts).Scan(&have, &data)
	switch {
	case err == nil:
		if have > lamport || (have == lamport && bytes.Compare(data, it.Body) >= 0) {
			return Skipped, nil
		}
	case !errors.Is(err, sql.ErrNoRows):
		return Skipped, err
	}
	var one int
	err = tx.queryRow(sqlTSCoveredBy, key, lname, ts, lamport).Scan(&one)
	if err == nil {
		return Skipped, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Skipped, err
	}
	if _, err := tx.exec(sqlTSAddSeries, key, lname, it.ID, it.Collection); err != nil {
		return Skipped, err
	}
	tx.lastEtag++
	if _, err := tx.exec(sqlTSPutEntry, key, lname, ts, lamport, it.Body, tx.lastEtag); err != nil {
		return Skipped, err
	}
	if tx.wantItems {
		tx.noteSeries("Put", docID, coll, it.Collection, ts, ts, tx.lastEtag)
	}
	return Applied, nil
}

// TSReader reads series on the read pool, in one read transaction.
type TSReader struct {
	tx  *sql.Tx
	ctx context.Context
}

// ReadTimeSeries opens a read transaction for series reads; Close it.
func (db *DB) ReadTimeSeries(ctx context.Context) (*TSReader, error) {
	tx, err := db.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	return &TSReader{tx: tx, ctx: ctx}, nil
}

// Close ends the read transaction.
func (r *TSReader) Close() { _ = r.tx.Rollback() }

// DocumentID returns the document's id as spelled, or "" when it does not
// exist.
func (r *TSReader) DocumentID(id string) (string, error) {
	var s string
	err := r.tx.QueryRowContext(r.ctx, `SELECT id FROM docs WHERE key = ?`, LowerID(id)).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return s, err
}

// SeriesName returns the series' name as first spelled, "" when the
// document has no such series.
func (r *TSReader) SeriesName(id, name string) (string, error) {
	var s string
	err := r.tx.QueryRowContext(r.ctx, `SELECT name FROM ts_series WHERE doc_key = ? AND lname = ?`, LowerID(id), strings.ToLower(name)).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return s, err
}

// Count is how many entries of a series lie in [from, to].
func (r *TSReader) Count(id, name string, from, to int64) (int64, error) {
	var n int64
	err := r.tx.QueryRowContext(r.ctx, `SELECT count(*) FROM ts_entries WHERE doc_key = ? AND lname = ? AND ts >= ? AND ts <= ?`,
		LowerID(id), strings.ToLower(name), from, to).Scan(&n)
	return n, err
}

// Range visits the entries of a series in [from, to] in time order,
// skipping start and visiting at most pageSize (all when < 0). e and its
// Values are only valid during the call.
func (r *TSReader) Range(id, name string, from, to int64, start, pageSize int, fn func(e *TSEntry) error) error {
	if pageSize == 0 {
		return nil
	}
	limit := int64(pageSize)
	if pageSize < 0 {
		limit = -1
	}
	rows, err := r.tx.QueryContext(r.ctx, `SELECT ts, lamport, data FROM ts_entries WHERE doc_key = ? AND lname = ? AND ts >= ? AND ts <= ? ORDER BY ts LIMIT ? OFFSET ?`,
		LowerID(id), strings.ToLower(name), from, to, limit, start)
	if err != nil {
		return err
	}
	defer rows.Close()
	var e TSEntry
	var data sql.RawBytes
	vals := make([]float64, 0, MaxTSValues)
	for rows.Next() {
		if err := rows.Scan(&e.Timestamp, &e.Lamport, &data); err != nil {
			return err
		}
		tag, v, err := decodeTSData(data, vals[:0])
		if err != nil {
			return err
		}
		e.Tag, e.Values = tag, v
		if err := fn(&e); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Stats describes every series of a document that holds entries.
func (r *TSReader) Stats(id string) ([]TSStats, error) {
	rows, err := r.tx.QueryContext(r.ctx, `SELECT s.name, count(*), min(e.ts), max(e.ts) FROM ts_series s JOIN ts_entries e ON e.doc_key = s.doc_key AND e.lname = s.lname WHERE s.doc_key = ? GROUP BY s.lname`, LowerID(id))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []TSStats
	for rows.Next() {
		var s TSStats
		if err := rows.Scan(&s.Name, &s.Entries, &s.Start, &s.End); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i].Name) < strings.ToLower(out[j].Name) })
	return out, rows.Err()
}

// TSTime converts unix milliseconds to a time.
func TSTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// TSSeries names one series: its document (id and collection) and name.
type TSSeries struct {
	DocID, Collection, Name string
}

// AllSeries lists every series that holds entries, by document key and
// name (an export walks them).
func (r *TSReader) AllSeries() ([]TSSeries, error) {
	rows, err := r.tx.QueryContext(r.ctx, `SELECT s.doc_id, coalesce(d.collection, ''), s.name FROM ts_series s LEFT JOIN docs d ON d.key = s.doc_key
		WHERE EXISTS (SELECT 1 FROM ts_entries e WHERE e.doc_key = s.doc_key AND e.lname = s.lname) ORDER BY s.doc_key, s.lname`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []TSSeries
	for rows.Next() {
		var s TSSeries
		if err := rows.Scan(&s.DocID, &s.Collection, &s.Name); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// Sample visits at most about buckets entries of [from, to], in time order:
// the first entry of each of buckets equal slices of the range (all of them
// when the range holds fewer). SQLite walks the range once without handing
// every row out, so a chart of a million points stays cheap.
func (r *TSReader) Sample(id, name string, from, to int64, buckets int, fn func(e *TSEntry) error) error {
	if from == TSMin || to == TSMax {
		var lo, hi sql.NullInt64
		if err := r.tx.QueryRowContext(r.ctx, `SELECT min(ts), max(ts) FROM ts_entries WHERE doc_key = ? AND lname = ? AND ts >= ? AND ts <= ?`,
			LowerID(id), strings.ToLower(name), from, to).Scan(&lo, &hi); err != nil || !lo.Valid {
			return err
		}
		from, to = lo.Int64, hi.Int64
	}
	width := (to - from) / int64(max(buckets, 1))
	if width < 1 {
		width = 1
	}
	rows, err := r.tx.QueryContext(r.ctx, `SELECT min(ts), lamport, data FROM ts_entries WHERE doc_key = ? AND lname = ? AND ts >= ? AND ts <= ? GROUP BY (ts - ?) / ? ORDER BY 1`,
		LowerID(id), strings.ToLower(name), from, to, from, width)
	if err != nil {
		return err
	}
	defer rows.Close()
	var e TSEntry
	var data []byte
	for rows.Next() {
		if err := rows.Scan(&e.Timestamp, &e.Lamport, &data); err != nil {
			return err
		}
		tag, v, err := decodeTSData(data, nil)
		if err != nil {
			return err
		}
		e.Tag, e.Values = tag, v
		if err := fn(&e); err != nil {
			return err
		}
	}
	return rows.Err()
}
