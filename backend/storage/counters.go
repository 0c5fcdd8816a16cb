package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
)

// Counters (RavenDB's document counters). One row per (document, counter
// name) in the counters table holds one part per database copy that ever
// incremented it: the copy's running total, the copy's etag when the part
// last changed, and whether the part was deleted. A read sums the live
// parts. Replication sends the whole row (item kind KindCounters) and the
// receiver keeps, per copy, the part with the higher (etag, deleted): two
// copies incrementing at once never conflict and the sum is exact.

// KindCounters is the replication item kind of a counters row.
const KindCounters ItemKind = 3

// MaxCounterNameBytes bounds a counter name (UTF-8 bytes).
const MaxCounterNameBytes = 512

// maxCounterParts bounds the parts of one counter (database copies that
// incremented it) a replicated row may carry.
const maxCounterParts = 1024

// CounterSchema is the counters table, appended to Schema.
const CounterSchema = `
-- Counters: one row per (document, counter); etag is the row's last change
-- on this copy, drawn from the documents' counter. parts is JSON: one
-- {"db","tag","v","e","d"} per database copy; total sums the live parts.
CREATE TABLE IF NOT EXISTS counters (
	etag    INTEGER PRIMARY KEY,
	doc_key TEXT NOT NULL, -- lower-cased document id
	doc_id  TEXT NOT NULL,
	key     TEXT NOT NULL, -- lower-cased counter name
	name    TEXT NOT NULL, -- counter name as first spelled
	parts   TEXT NOT NULL,
	total   INTEGER NOT NULL,
	live    INTEGER NOT NULL, -- 0: deleted (kept so that the deletion replicates)
	last_modified INTEGER NOT NULL DEFAULT 0 -- unix nanoseconds, UTC
);
CREATE UNIQUE INDEX IF NOT EXISTS counters_doc_key ON counters(doc_key, key);
`

// CounterPart is one database copy's share of a counter.
type CounterPart struct {
	DB      string `json:"db"`  // the copy's database id
	Tag     string `json:"tag"` // the node tag of that copy
	Value   int64  `json:"v"`
	Etag    int64  `json:"e"` // the copy's etag when the part last changed
	Deleted bool   `json:"d,omitempty"`
}

// ValueKey is how RavenDB names a copy's value in a counter's
// CounterValues (GET /counters?full=true) and in counterRaw():
// "tag:etag-databaseid".
func (p CounterPart) ValueKey() string {
	return p.Tag + ":" + strconv.FormatInt(p.Etag, 10) + "-" + p.DB
}

// newer tells whether p wins over q (the same copy's part): higher etag,
// then deleted.
func (p CounterPart) newer(q CounterPart) bool {
	if p.Etag != q.Etag {
		return p.Etag > q.Etag
	}
	return p.Deleted && !q.Deleted
}

// Counter is one counter of a document.
type Counter struct {
	DocID string
	Name  string
	Etag  int64 // the row's etag on this copy
	Total int64
	Live  bool
	Parts []CounterPart
}

func sumParts(parts []CounterPart) (total int64, live bool) {
	for _, p := range parts {
		if !p.Deleted {
			total += p.Value
			live = true
		}
	}
	return total, live
}

// ValidateCounterName checks a counter name.
func ValidateCounterName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return dberr.New(dberr.BadRequest, "Counter name cannot be empty")
	case len(name) > MaxCounterNameBytes:
		return dberr.New(dberr.BadRequest, "Counter name is %d bytes long; the limit is %d UTF-8 bytes", len(name), MaxCounterNameBytes)
	case !utf8.ValidString(name):
		return dberr.New(dberr.BadRequest, "Counter name is not valid UTF-8")
	}
	return nil
}

const (
	sqlCounterGet    = `SELECT etag, doc_id, name, parts FROM counters WHERE doc_key = ? AND key = ?`
	sqlCounterInsert = `INSERT INTO counters(etag, doc_key, doc_id, key, name, parts, total, live, last_modified) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlCounterUpdate = `UPDATE counters SET etag = ?, parts = ?, total = ?, live = ?, last_modified = ? WHERE etag = ?`
	sqlCounterDrop   = `DELETE FROM counters WHERE doc_key = ?`
)

func init() {
	writerStatements = append(writerStatements, sqlCounterGet, sqlCounterInsert, sqlCounterUpdate, sqlCounterDrop)
}

// loadCounters notes at open whether the file holds counters.
func (db *DB) loadCounters() error {
	var any int
	if err := db.writer.QueryRow(`SELECT count(*) FROM (SELECT 1 FROM counters LIMIT 1)`).Scan(&any); err != nil {
		return err
	}
	db.hasCounters.Store(any > 0)
	return nil
}

// HasCounters tells whether the file has ever held a counter (a cheap
// guard for the reads that add counter names to documents).
func (db *DB) HasCounters() bool { return db.hasCounters.Load() }

type counterRow struct {
	exists bool
	etag   int64
	docID  string
	name   string
	parts  []CounterPart
}

func (tx *Tx) counterRow(docKey, key string) (counterRow, error) {
	var r counterRow
	var parts string
	err := tx.queryRow(sqlCounterGet, docKey, key).Scan(&r.etag, &r.docID, &r.name, &parts)
	if errors.Is(err, sql.ErrNoRows) {
		return r, nil
	}
	if err != nil {
		return r, err
	}
	r.exists = true
	if err := json.Unmarshal([]byte(parts), &r.parts); err != nil {
		return r, dberr.New(dberr.Internal, "stored counter %s of %s: %v", r.name, r.docID, err)
	}
	return r, nil
}

// writeCounterRow stores a row under a new etag.
func (tx *Tx) writeCounterRow(docKey, key string, r counterRow, etag int64) (Counter, error) {
	sort.Slice(r.parts, func(i, j int) bool { return r.parts[i].DB < r.parts[j].DB })
	raw, err := json.Marshal(r.parts)
	if err != nil {
		return Counter{}, err
	}
	total, live := sumParts(r.parts)
	if r.exists {
		_, err = tx.exec(sqlCounterUpdate, etag, string(raw), total, live, tx.now.UnixNano(), r.etag)
	} else {
		_, err = tx.exec(sqlCounterInsert, etag, docKey, r.docID, key, r.name, string(raw), total, live, tx.now.UnixNano())
	}
	if err != nil {
		return Counter{}, err
	}
	tx.anyCounters = true
	return Counter{DocID: r.docID, Name: r.name, Etag: etag, Total: total, Live: live, Parts: r.parts}, nil
}

// MissingDocumentError is a counter write on a document that does not
// exist. It is told to clients as DocumentDoesNotExistException with a 400:
// the clients turn a 404 of a batch into "no response" instead of the
// exception.
type MissingDocumentError struct{ Err *dberr.Error }

func (e MissingDocumentError) Error() string { return e.Err.Error() }

// RavenType names the client's exception.
func (e MissingDocumentError) RavenType() string {
	return "Raven.Client.Exceptions.Documents.DocumentDoesNotExistException"
}

func (e MissingDocumentError) Unwrap() error { return e.Err }

func counterMissingDoc(docID string) error {
	return MissingDocumentError{dberr.New(dberr.InvalidOperation, "Cannot operate on counters of document '%s': the document does not exist", docID)}
}

// IncrementCounter adds delta to this copy's part of a counter of an
// existing document (a missing document is a NotFound error) and returns
// the counter. A deleted counter starts again from delta.
func (tx *Tx) IncrementCounter(docID, name string, delta int64) (Counter, error) {
	if err := ValidateCounterName(name); err != nil {
		return Counter{}, err
	}
	docKey := LowerID(docID)
	doc, err := tx.lookup(docKey)
	if err != nil {
		return Counter{}, err
	}
	if doc == nil {
		return Counter{}, counterMissingDoc(docID)
	}
	key := strings.ToLower(name)
	r, err := tx.counterRow(docKey, key)
	if err != nil {
		return Counter{}, err
	}
	if !r.exists {
		r.docID, r.name = doc.id, name
	}
	_, wasLive := sumParts(r.parts)
	etag := tx.lastEtag + 1
	own := -1
	for i, p := range r.parts {
		if p.DB == tx.db.dbid {
			own = i
		}
	}
	if own < 0 {
		r.parts = append(r.parts, CounterPart{DB: tx.db.dbid, Tag: tx.db.nodeTag})
		own = len(r.parts) - 1
	}
	p := &r.parts[own]
	if p.Deleted {
		// A deleted counter starts again from delta; the other copies'
		// deleted parts stay deleted.
		p.Value = 0
	}
	total, _ := sumParts(r.parts)
	if (delta > 0 && p.Value > math.MaxInt64-delta) || (delta < 0 && p.Value < math.MinInt64-delta) ||
		(delta > 0 && total > math.MaxInt64-delta) || (delta < 0 && total < math.MinInt64-delta) {
		return Counter{}, dberr.New(dberr.BadRequest, "Counter '%s' of '%s': adding %d overflows a 64-bit integer", name, docID, delta)
	}
	p.Value += delta
	p.Etag, p.Deleted, p.Tag = etag, false, tx.db.nodeTag
	c, err := tx.writeCounterRow(docKey, key, r, etag)
	if err != nil {
		return Counter{}, err
	}
	tx.lastEtag = etag
	if tx.wantItems {
		typ := "Increment"
		if !wasLive {
			typ = "Put"
		}
		tx.noteCounter(typ, c, doc.collection)
	}
	return c, nil
}

func isDeletedRow(parts []CounterPart) bool {
	_, live := sumParts(parts)
	return !live
}

// DeleteCounter deletes a counter of a document: every part is marked
// deleted (the row stays, so the deletion replicates). Deleting a missing
// counter does nothing; deleted reports whether there was a live one.
func (tx *Tx) DeleteCounter(docID, name string) (deleted bool, err error) {
	if err := ValidateCounterName(name); err != nil {
		return false, err
	}
	docKey := LowerID(docID)
	r, err := tx.counterRow(docKey, strings.ToLower(name))
	if err != nil || !r.exists || isDeletedRow(r.parts) {
		return false, err
	}
	for i := range r.parts {
		r.parts[i].Deleted = true
	}
	etag := tx.lastEtag + 1
	c, err := tx.writeCounterRow(docKey, strings.ToLower(name), r, etag)
	if err != nil {
		return false, err
	}
	tx.lastEtag = etag
	if tx.wantItems {
		id, coll, err := tx.docOf(docKey, c.DocID)
		if err != nil {
			return false, err
		}
		c.DocID = id
		tx.noteCounter("Delete", c, coll)
	}
	return true, nil
}

// Counter reads one counter inside the transaction; nil when missing or
// deleted.
func (tx *Tx) Counter(docID, name string) (*Counter, error) {
	docKey := LowerID(docID)
	r, err := tx.counterRow(docKey, strings.ToLower(name))
	if err != nil || !r.exists {
		return nil, err
	}
	total, live := sumParts(r.parts)
	if !live {
		return nil, nil
	}
	return &Counter{DocID: r.docID, Name: r.name, Etag: r.etag, Total: total, Live: true, Parts: r.parts}, nil
}

// dropCounters removes every counter of a deleted document.
func (tx *Tx) dropCounters(docKey string) error {
	if !tx.anyCounters && !tx.db.hasCounters.Load() {
		return nil
	}
	_, err := tx.exec(sqlCounterDrop, docKey)
	return err
}

// applyCounters merges a replicated counters row: per copy, the part with
// the higher (etag, deleted) wins. The row changes (and takes a new etag,
// so it travels on) only when a part did.
func (tx *Tx) applyCounters(it Item) (Outcome, error) {
	if err := ValidateID(it.ID); err != nil {
		return Skipped, err
	}
	if err := ValidateCounterName(it.Collection); err != nil {
		return Skipped, err
	}
	// The replicated body is the row's parts, a JSON array.
	var in struct{ Parts []CounterPart }
	if err := json.Unmarshal(it.Body, &in.Parts); err != nil {
		return Skipped, dberr.New(dberr.BadRequest, "replicated counter %s of %s: %v", it.Collection, it.ID, err)
	}
	if len(in.Parts) > maxCounterParts {
		return Skipped, dberr.New(dberr.BadRequest, "replicated counter %s of %s: %d parts, the limit is %d", it.Collection, it.ID, len(in.Parts), maxCounterParts)
	}
	docKey, key := LowerID(it.ID), strings.ToLower(it.Collection)
	r, err := tx.counterRow(docKey, key)
	if err != nil {
		return Skipped, err
	}
	if !r.exists {
		r.docID, r.name = it.ID, it.Collection
		if d, err := tx.lookup(docKey); err != nil {
			return Skipped, err
		} else if d != nil {
			r.docID = d.id
		}
	}
	_, wasLive := sumParts(r.parts)
	changed := false
	for _, p := range in.Parts {
		if p.DB == "" {
			return Skipped, dberr.New(dberr.BadRequest, "replicated counter %s of %s: a part without a database id", it.Collection, it.ID)
		}
		found := false
		for i := range r.parts {
			if r.parts[i].DB == p.DB {
				found = true
				if p.newer(r.parts[i]) {
					r.parts[i] = p
					changed = true
				}
			}
		}
		if !found {
			r.parts = append(r.parts, p)
			changed = true
		}
	}
	if !changed {
		return Skipped, nil
	}
	etag := tx.lastEtag + 1
	c, err := tx.writeCounterRow(docKey, key, r, etag)
	if err != nil {
		return Skipped, err
	}
	tx.lastEtag = etag
	if tx.wantItems && (c.Live || wasLive) {
		// A merged row is a Put of its new total, or the Delete of a live
		// counter; one that stays deleted changes nothing visible.
		id, coll, err := tx.docOf(docKey, c.DocID)
		if err != nil {
			return Skipped, err
		}
		c.DocID = id
		typ := "Put"
		if !c.Live {
			typ = "Delete"
		}
		tx.noteCounter(typ, c, coll)
	}
	return Applied, nil
}

// PutCounterParts stores a counter as given (the import of a dump): the
// parts are merged like a replicated row.
func (tx *Tx) PutCounterParts(docID, name string, parts []CounterPart) error {
	body, err := json.Marshal(parts)
	if err != nil {
		return err
	}
	_, err = tx.applyCounters(Item{ID: docID, Collection: name, Body: body, Kind: KindCounters})
	return err
}

// Counters reads counters of a document: every live one (by name, sorted
// case-insensitively) when names is empty, else the named ones in order,
// nil for a missing or deleted one.
func (db *DB) Counters(ctx context.Context, docID string, names []string) ([]*Counter, error) {
	docKey := LowerID(docID)
	scan := func(rows *sql.Rows) (*Counter, error) {
		c := &Counter{}
		var parts string
		if err := rows.Scan(&c.Etag, &c.DocID, &c.Name, &parts); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(parts), &c.Parts); err != nil {
			return nil, err
		}
		c.Total, c.Live = sumParts(c.Parts)
		return c, nil
	}
	if len(names) == 0 {
		rows, err := db.reader.QueryContext(ctx, `SELECT etag, doc_id, name, parts FROM counters WHERE doc_key = ? AND live = 1 ORDER BY key`, docKey)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []*Counter
		for rows.Next() {
			c, err := scan(rows)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return out, rows.Err()
	}
	rtx, err := db.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer rtx.Rollback()
	out := make([]*Counter, len(names))
	for i, n := range names {
		rows, err := rtx.QueryContext(ctx, `SELECT etag, doc_id, name, parts FROM counters WHERE doc_key = ? AND key = ? AND live = 1`, docKey, strings.ToLower(n))
		if err != nil {
			return nil, err
		}
		if rows.Next() {
			if out[i], err = scan(rows); err != nil {
				rows.Close()
				return nil, err
			}
		}
		rows.Close()
	}
	return out, nil
}

// AddCounterNames sets Counters and CountersEtag of the documents that
// have live counters (nothing while the file never held one).
func (db *DB) AddCounterNames(ctx context.Context, docs []*Document) error {
	if !db.hasCounters.Load() {
		return nil
	}
	rtx, err := db.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer rtx.Rollback()
	return addCounterNames(ctx, rtx, docs)
}

func addCounterNames(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, docs []*Document) error {
	for _, d := range docs {
		if d == nil {
			continue
		}
		d.Counters, d.CountersEtag = nil, 0
		rows, err := q.QueryContext(ctx, `SELECT name, etag, live FROM counters WHERE doc_key = ? ORDER BY key`, LowerID(d.ID))
		if err != nil {
			return err
		}
		for rows.Next() {
			var name string
			var etag int64
			var live bool
			if err := rows.Scan(&name, &etag, &live); err != nil {
				rows.Close()
				return err
			}
			// A deleted counter still moves the etag: a cached copy
			// that listed it must be refreshed.
			d.CountersEtag = max(d.CountersEtag, etag)
			if live {
				d.Counters = append(d.Counters, name)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}

// ScanCounters visits every live counter in (document, name) order (the
// export of a dump), up to limit rows after the given position; the
// position of a row is (doc_key, key).
func (db *DB) ScanCounters(ctx context.Context, fn func(c *Counter) error) error {
	if !db.hasCounters.Load() {
		return nil
	}
	rows, err := db.reader.QueryContext(ctx, `SELECT etag, doc_id, name, parts FROM counters WHERE live = 1 ORDER BY doc_key, key`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		c := &Counter{}
		var parts string
		if err := rows.Scan(&c.Etag, &c.DocID, &c.Name, &parts); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(parts), &c.Parts); err != nil {
			return err
		}
		c.Total, c.Live = sumParts(c.Parts)
		if err := fn(c); err != nil {
			return err
		}
	}
	return rows.Err()
}

// appendCounterNames adds "@counters" (the document's counter names) to a
// served document's metadata; its "HasCounters" flag is added with the
// others (appendDocFlags).
func appendCounterNames(out []byte, start int, names []string) []byte {
	n := len(out)
	if n-start < 2 || out[n-1] != '}' || out[n-2] != '}' {
		return out
	}
	out = out[:n-2]
	out = append(out, `,"@counters":[`...)
	for i, name := range names {
		if i > 0 {
			out = append(out, ',')
		}
		out = document.AppendString(out, name)
	}
	return append(out, ']', '}', '}')
}

// AllCounters reads a document's live counters inside the transaction, in
// case-insensitive name order.
func (tx *Tx) AllCounters(docID string) ([]Counter, error) {
	rows, err := tx.tx.Query(`SELECT etag, doc_id, name, parts FROM counters WHERE doc_key = ? AND live = 1 ORDER BY key`, LowerID(docID))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Counter
	for rows.Next() {
		var c Counter
		var parts string
		if err := rows.Scan(&c.Etag, &c.DocID, &c.Name, &parts); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(parts), &c.Parts); err != nil {
			return nil, err
		}
		c.Total, c.Live = sumParts(c.Parts)
		out = append(out, c)
	}
	return out, rows.Err()
}

// PatchCounters gives a patch script the counters of a transaction (it
// satisfies patch.Counters).
type PatchCounters struct{ Tx *Tx }

// Counter reads a live counter.
func (p PatchCounters) Counter(docID, name string) (int64, bool, error) {
	c, err := p.Tx.Counter(docID, name)
	if err != nil || c == nil {
		return 0, false, err
	}
	return c.Total, true, nil
}

// IncrementCounter increments a counter of an existing document.
func (p PatchCounters) IncrementCounter(docID, name string, delta int64) error {
	_, err := p.Tx.IncrementCounter(docID, name, delta)
	return err
}

// DeleteCounter deletes a counter.
func (p PatchCounters) DeleteCounter(docID, name string) error {
	_, err := p.Tx.DeleteCounter(docID, name)
	return err
}
