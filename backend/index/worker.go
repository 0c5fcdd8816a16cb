package index

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

// errBudget stops a scan when the batch is full.
var errBudget = errors.New("batch budget spent")

// readChunk bounds what one read of the database returns (documents,
// tombstones, referencing documents). Each read is its own short snapshot:
// the index never keeps one open while it maps, because an open read
// snapshot stops the database's checkpoints from resetting its WAL, which
// then grows with every commit and makes each of them slower.
const readChunk = 64

// maxLoads bounds the load() results one batch keeps (see batch.loads).
const maxLoads = 4096

func (ix *Index) run(stop <-chan struct{}, done chan struct{}) {
	defer close(done)
	lowPriorityThread()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-stop:
			return
		case <-ix.wake:
		}
		for !ix.paused() {
			more, err := ix.runBatch(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				ix.log.Error("indexing batch failed", "err", err)
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
				}
				continue
			}
			if !more {
				break
			}
		}
	}
}

// batch is one index transaction.
type batch struct {
	ix *Index
	// ctx is for SQL calls: it is never cancelled, because a cancellable
	// context makes database/sql and the driver start a goroutine per
	// statement (tens of thousands a second while re-mapping, which starved
	// the database's writer of the scheduler); stop is the writer's own
	// context, checked between documents.
	ctx      context.Context
	stop     context.Context
	tx       *sql.Tx
	start    int64 // the database's last etag when the batch began
	units    int
	deadline time.Time
	full     bool
	changed  bool

	fields  map[string]*field
	byCol   []*field
	added   []*field
	multiOn []*field
	etags   map[string]collEtags
	refs    map[refKey]refState
	multi   bool
	entries int64
	// counts: the batch's changes to value_counts, per column and value
	// (written by persist).
	counts map[countKey]int64
	// dropSQL deletes a document's entries returning their columns, for
	// dropCols fields.
	dropSQL  string
	dropCols int
	errs     []IndexingError
	dirty    map[string]bool // map-reduce groups to recompute
	// remapped: the reference scan sequence (seq) current when a source
	// document was last re-mapped in this batch; a referenced document read
	// by scan s need not re-map a source re-mapped at a sequence >= s (it
	// already loaded that version or a newer one).
	remapped map[string]int64
	seq      int64
	// loads caches load() results by lower-cased id (nil entries: missing).
	// It is emptied at the start of the batch and before each read of
	// referenced documents, so a source re-mapped because referenced
	// document R changed at etag E always loads R at E or later.
	loads map[string]*loaded

	paceAt     time.Time
	paceWrites int64
	// seenWrites is the database's write count at the last document: the
	// writer yields only when it moved.
	seenWrites int64
	writesAt   time.Time

	ins     *sql.Stmt
	insCols int
	stmts   map[string]*sql.Stmt

	cur      string // source key of the document being mapped
	curDoc   string
	refsUsed bool
}

func (b *batch) stmt(q string) (*sql.Stmt, error) {
	if s, ok := b.stmts[q]; ok {
		return s, nil
	}
	s, err := b.tx.PrepareContext(b.ctx, q)
	if err != nil {
		return nil, err
	}
	b.stmts[q] = s
	return s, nil
}

func (b *batch) exec(q string, args ...any) (sql.Result, error) {
	s, err := b.stmt(q)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(b.ctx, args...)
}

// spend counts one work item. It stops the batch when the writer is told
// to stop (the error) or the batch's budget is spent (errBudget), and paces
// the work (see pace).
func (b *batch) spend() error {
	b.units++
	b.changed = true
	if err := b.stop.Err(); err != nil {
		return err
	}
	b.pace()
	if b.budgetSpent() {
		b.full = true
		return errBudget
	}
	return nil
}

// pace yields the processor after every document and, while the database
// is taking writes, rests Options.WritePause after each millisecond of work,
// so its writer (and its callers) find a free core: on 2 cores an indexing
// goroutine that never blocks otherwise holds its processor for whole 10 ms
// time slices while the writer, woken from its fsync, waits to run.
// busyWindow is how long after the database's last write the writer
// still counts it as taking writes.
const busyWindow = 5 * time.Millisecond

func (b *batch) pace() {
	// An idle database needs no courtesy: yielding a goroutine locked to
	// its thread is a thread switch per document.
	now := time.Now()
	if w := b.ix.db.Writes(); w != b.seenWrites {
		b.seenWrites, b.writesAt = w, now
	}
	if now.Sub(b.writesAt) < busyWindow {
		runtime.Gosched()
	}
	rest := b.ix.opts.WritePause
	if rest <= 0 || b.units%8 != 0 {
		return
	}
	if b.paceAt.IsZero() {
		b.paceAt, b.paceWrites = now, b.ix.db.Writes()
		return
	}
	if now.Sub(b.paceAt) < time.Millisecond {
		return
	}
	if w := b.ix.db.Writes(); w != b.paceWrites {
		time.Sleep(rest)
		b.paceWrites = w
	}
	b.paceAt = time.Now()
}

func (b *batch) budgetSpent() bool {
	return b.units >= b.ix.opts.BatchSize || (b.units%16 == 0 && time.Now().After(b.deadline))
}

func (ix *Index) runBatch(ctx context.Context) (more bool, err error) {
	ix.connMu.RLock()
	defer ix.connMu.RUnlock()
	tx, err := ix.w.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	b := &batch{ix: ix, ctx: context.WithoutCancel(ctx), stop: ctx, tx: tx, start: ix.db.LastEtag(), deadline: time.Now().Add(ix.opts.BatchTime),
		stmts: map[string]*sql.Stmt{}, dirty: map[string]bool{}, remapped: map[string]int64{}, fields: map[string]*field{},
		loads: map[string]*loaded{}}
	ix.mu.RLock()
	for k, v := range ix.fields {
		c := *v
		b.fields[k] = &c
	}
	for _, f := range ix.byCol {
		b.byCol = append(b.byCol, b.fields[fieldKey(f.name)])
	}
	b.etags = make(map[string]collEtags, len(ix.etags))
	for k, v := range ix.etags {
		b.etags[k] = v
	}
	b.refs = make(map[refKey]refState, len(ix.refs))
	for k, v := range ix.refs {
		b.refs[k] = v
	}
	b.multi = ix.multiEntries
	b.refsUsed = len(ix.refs) > 0
	ix.mu.RUnlock()
	empty := true // nothing indexed yet, of any collection
	for _, e := range b.etags {
		empty = empty && e.docs == 0 && e.tombs == 0
	}
	if empty {
		ix.fresh = ix.db.LastEtag()
	}
	defer func() {
		for _, s := range b.stmts {
			s.Close()
		}
		if b.ins != nil {
			b.ins.Close()
		}
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if js, ok := ix.mapper.(*jsMapper); ok {
		js.js.load = b.load
		defer func() { js.js.load = nil }()
	}
	for _, k := range sortedKeys(b.etags) {
		if err := b.mapPass(k); err != nil {
			return false, err
		}
		if b.full {
			break
		}
	}
	if !b.full {
		if err := b.refPass(); err != nil {
			return false, err
		}
	}
	if err := b.reduceDirty(); err != nil {
		return false, err
	}
	if !b.changed {
		return false, tx.Rollback()
	}
	if err := b.persist(); err != nil {
		return false, err
	}
	for _, s := range b.stmts {
		s.Close()
	}
	b.stmts = map[string]*sql.Stmt{}
	if b.ins != nil {
		b.ins.Close()
		b.ins = nil
	}
	if err := tx.Commit(); err != nil {
		return false, err
	}
	ix.publish(b)
	if ix.opts.OnChange != nil {
		ix.opts.OnChange(Event{Database: ix.db.Name(), Index: ix.Name(), Type: "BatchCompleted", Etag: ix.LastIndexedEtag()})
	}
	return b.full, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// mapPass indexes one source's documents and tombstones after its etags,
// reading them readChunk at a time.
func (b *batch) mapPass(key string) error {
	e := b.etags[key]
	ix := b.ix
	b.cur = key
	fresh := int64(0)
	if e.name != AllDocs {
		fresh = ix.fresh
	}
	for !b.full {
		n := min(readChunk, ix.opts.BatchSize-b.units)
		if n <= 0 {
			b.full = true
			return nil
		}
		var docs []docIn
		var dels []string
		var etags []int64
		var err error
		if e.name == AllDocs {
			err = ix.db.ScanChangesAfter(b.ctx, e.docs, n, 0, func(it *storage.Item) error {
				etags = append(etags, it.Etag)
				switch {
				case it.Conflict, it.Kind != storage.KindDocument:
					dels = append(dels, "")
					docs = append(docs, docIn{})
				case it.Type == "Delete":
					dels = append(dels, storage.LowerID(it.ID))
					docs = append(docs, docIn{})
				default:
					dels = append(dels, "")
					docs = append(docs, docIn{key: storage.LowerID(it.ID), id: it.ID, coll: it.Collection, etag: it.Etag,
						cv: it.ChangeVector, lm: document.FormatTime(it.LastModified), body: bytes.Clone(it.Body)})
				}
				return nil
			})
		} else {
			err = ix.db.ScanCollection(b.ctx, e.name, e.docs, n, func(d *storage.Document) error {
				etags = append(etags, d.Etag)
				docs = append(docs, docIn{key: storage.LowerID(d.ID), id: d.ID, coll: d.Collection, etag: d.Etag,
					cv: d.ChangeVector, lm: document.FormatTime(d.LastModified), body: bytes.Clone(d.Body)})
				return nil
			})
		}
		if err != nil {
			return err
		}
		for i := range docs {
			switch {
			case dels != nil && dels[i] != "":
				err = b.removeDoc(dels[i])
			case docs[i].key != "":
				err = b.indexDoc(&docs[i], false, docs[i].etag <= fresh)
			}
			if err != nil {
				return err
			}
			e.docs = etags[i]
			if e.name == AllDocs {
				e.tombs = etags[i]
			}
			b.etags[key] = e
			if err := b.spend(); err != nil {
				if err == errBudget {
					return nil
				}
				return err
			}
		}
		if len(docs) < n {
			break
		}
	}
	if e.name == AllDocs {
		return nil
	}
	for !b.full {
		n := min(readChunk, ix.opts.BatchSize-b.units)
		if n <= 0 {
			b.full = true
			return nil
		}
		var tombs []storage.Tombstone
		if err := ix.db.ScanTombstones(b.ctx, e.name, e.tombs, n, func(t *storage.Tombstone) error {
			tombs = append(tombs, *t)
			return nil
		}); err != nil {
			return err
		}
		for _, t := range tombs {
			if err := b.removeDoc(storage.LowerID(t.ID)); err != nil {
				return err
			}
			e.tombs = t.Etag
			b.etags[key] = e
			if err := b.spend(); err != nil {
				if err == errBudget {
					return nil
				}
				return err
			}
		}
		if len(tombs) < n {
			break
		}
	}
	return nil
}

// removeDoc deletes what a document put in the index.
func (b *batch) removeDoc(key string) error {
	if b.ix.mapper.reduces() {
		rows, err := b.tx.QueryContext(b.ctx, `SELECT DISTINCT grp FROM map_out WHERE doc = ?`, key)
		if err != nil {
			return err
		}
		var groups []string
		for rows.Next() {
			var g string
			if err := rows.Scan(&g); err != nil {
				rows.Close()
				return err
			}
			groups = append(groups, g)
		}
		rows.Close()
		if len(groups) > 0 {
			for _, g := range groups {
				b.dirty[g] = true
			}
			if _, err := b.exec(`DELETE FROM map_out WHERE doc = ?`, key); err != nil {
				return err
			}
		}
	} else if err := b.deleteEntries(key); err != nil {
		return err
	}
	if b.refsUsed {
		if _, err := b.exec(`DELETE FROM refs WHERE src = ?`, key); err != nil {
			return err
		}
	}
	return nil
}

// countKey is one value of one field column in value_counts; v is the
// column's stored form (string, int64, float64), or a marker blob as a
// blobKey.
type countKey struct {
	col int
	v   any
}

type blobKey string

// count records that an entry holding v in column col was added (+1) or
// removed (-1).
func (b *batch) count(col int, v any, d int64) {
	switch x := v.(type) {
	case nil:
		return
	case []byte:
		v = blobKey(x)
	}
	if b.counts == nil {
		b.counts = map[countKey]int64{}
	}
	b.counts[countKey{col, v}] += d
}

// dropEntryRows deletes the entries rows of one document (or group) and
// takes their values off value_counts.
func (b *batch) dropEntryRows(doc string) error {
	if b.dropSQL == "" || b.dropCols != len(b.byCol) { // once per batch and field count
		var q strings.Builder
		q.WriteString("DELETE FROM entries WHERE doc = ? RETURNING 0")
		for _, f := range b.byCol {
			fmt.Fprintf(&q, ", c%d", f.col)
		}
		b.dropSQL, b.dropCols = q.String(), len(b.byCol)
	}
	s, err := b.stmt(b.dropSQL)
	if err != nil {
		return err
	}
	rows, err := s.QueryContext(b.ctx, doc)
	if err != nil {
		return err
	}
	defer rows.Close()
	vals := make([]any, len(b.byCol)+1)
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		b.entries--
		for i, f := range b.byCol {
			b.count(f.col, vals[i+1], -1)
		}
	}
	return rows.Err()
}

// deleteEntries removes the entries of one document (or group).
func (b *batch) deleteEntries(doc string) error {
	side := false // rows in arr or fts<n> to delete too
	for _, f := range b.byCol {
		side = side || f.multi || f.search
	}
	if !side {
		return b.dropEntryRows(doc)
	}
	s, err := b.stmt(`SELECT eid FROM entries WHERE doc = ?`)
	if err != nil {
		return err
	}
	rows, err := s.QueryContext(b.ctx, doc)
	if err != nil {
		return err
	}
	var eids []int64
	for rows.Next() {
		var e int64
		if err := rows.Scan(&e); err != nil {
			rows.Close()
			return err
		}
		eids = append(eids, e)
	}
	rows.Close()
	if len(eids) == 0 {
		return nil
	}
	anyMulti := false
	for _, f := range b.byCol {
		anyMulti = anyMulti || f.multi
	}
	for _, eid := range eids {
		if anyMulti {
			if _, err := b.exec(`DELETE FROM arr WHERE eid = ?`, eid); err != nil {
				return err
			}
		}
		for _, f := range b.byCol {
			if f.search {
				if _, err := b.exec(fmt.Sprintf(`DELETE FROM fts%d WHERE rowid = ?`, f.col), eid); err != nil {
					return err
				}
			}
		}
	}
	return b.dropEntryRows(doc)
}

// indexDoc (re-)maps one document; fresh says it has no entries yet, so
// there are none to remove first (Index.fresh).
func (b *batch) indexDoc(d *docIn, remap, fresh bool) error {
	ix := b.ix
	if !fresh {
		if err := b.removeDoc(d.key); err != nil {
			return err
		}
	}
	if remap {
		ix.refAttempts.Add(1)
	} else {
		ix.mapAttempts.Add(1)
	}
	b.curDoc = d.key
	entries, outs, err := ix.mapper.mapDoc(d)
	b.curDoc = ""
	if err != nil {
		if remap {
			ix.refErrors.Add(1)
		} else {
			ix.mapErrors.Add(1)
		}
		b.recordError(d.id, "Map", err)
		return nil
	}
	if remap {
		ix.refSuccesses.Add(1)
	} else {
		ix.mapSuccesses.Add(1)
	}
	if ix.mapper.reduces() {
		for _, o := range outs {
			key, err := ix.mapper.groupKey(o)
			if err != nil {
				b.recordError(d.id, "Map", fmt.Errorf("groupBy: %w", err))
				continue
			}
			kb, err := json.Marshal(key)
			if err != nil {
				b.recordError(d.id, "Map", fmt.Errorf("group key: %w", err))
				continue
			}
			vb, err := json.Marshal(o)
			if err != nil {
				b.recordError(d.id, "Map", err)
				continue
			}
			if _, err := b.exec(`INSERT INTO map_out(doc, grp, val) VALUES(?, ?, ?)`, d.key, string(kb), string(vb)); err != nil {
				return err
			}
			b.dirty[string(kb)] = true
		}
		return nil
	}
	if len(entries) > 1 && !b.multi {
		b.multi = true
		if _, err := b.exec(sqlSetMeta, "multi_entries", "1"); err != nil {
			return err
		}
	}
	for i := range entries {
		if err := b.insertEntry(d.key, d.id, &entries[i]); err != nil {
			if isDocError(err) {
				b.recordError(d.id, "Map", err)
				return nil
			}
			return err
		}
	}
	return nil
}

type docError struct{ error }

func isDocError(err error) bool {
	var d docError
	return errors.As(err, &d)
}

// field finds or creates a field.
func (b *batch) field(name string) (*field, error) {
	if f, ok := b.fields[fieldKey(name)]; ok {
		return f, nil
	}
	if len(b.byCol) >= maxFields {
		return nil, docError{fmt.Errorf("the index would have more than %d fields (field '%s')", maxFields, name)}
	}
	f, err := b.ix.addField(b.tx, name, b.ix.isSearch(name), len(b.byCol)+1)
	if err != nil {
		return nil, err
	}
	b.fields[fieldKey(name)] = f
	b.byCol = append(b.byCol, f)
	b.added = append(b.added, f)
	if b.ins != nil {
		b.ins.Close()
		b.ins = nil
	}
	for q, s := range b.stmts {
		s.Close()
		delete(b.stmts, q)
	}
	return f, nil
}

func (b *batch) insertEntry(doc, id string, e *entry) error {
	type placed struct {
		f  *field
		fv *fieldValue
	}
	ps := make([]placed, 0, len(e.fields))
	for i := range e.fields {
		f, err := b.field(e.fields[i].name)
		if err != nil {
			return err
		}
		ps = append(ps, placed{f, &e.fields[i]})
	}
	if b.ins == nil || b.insCols != len(b.byCol) {
		var cols, qs strings.Builder
		cols.WriteString("doc, id, stored")
		qs.WriteString("?, ?, ?")
		for _, f := range b.byCol {
			fmt.Fprintf(&cols, ", c%d, x%d", f.col, f.col)
			qs.WriteString(", ?, ?")
		}
		s, err := b.tx.PrepareContext(b.ctx, "INSERT INTO entries("+cols.String()+") VALUES("+qs.String()+")")
		if err != nil {
			return err
		}
		if b.ins != nil {
			b.ins.Close()
		}
		b.ins, b.insCols = s, len(b.byCol)
	}
	args := make([]any, 3+2*len(b.byCol))
	args[0] = doc
	if id != "" {
		args[1] = id
	}
	if e.stored != nil {
		sb, err := json.Marshal(e.stored)
		if err != nil {
			return docError{err}
		}
		args[2] = string(sb)
	}
	for _, p := range ps {
		if p.fv.multi || len(p.fv.vals) > 1 {
			continue
		}
		if len(p.fv.vals) == 1 {
			args[3+2*(p.f.col-1)], args[4+2*(p.f.col-1)] = encode(p.fv.vals[0])
		}
	}
	res, err := b.ins.ExecContext(b.ctx, args...)
	if err != nil {
		return err
	}
	eid, err := res.LastInsertId()
	if err != nil {
		return err
	}
	b.entries++
	for _, p := range ps {
		if !p.fv.multi && len(p.fv.vals) == 1 {
			b.count(p.f.col, args[3+2*(p.f.col-1)], 1)
		}
	}
	for _, p := range ps {
		if (p.fv.multi || len(p.fv.vals) > 1) && len(p.fv.vals) > 0 {
			if !p.f.multi {
				p.f.multi = true
				b.multiOn = append(b.multiOn, p.f)
				if _, err := b.exec(`UPDATE fields SET multi = 1 WHERE col = ?`, p.f.col); err != nil {
					return err
				}
			}
			for _, v := range p.fv.vals {
				val, ex := encode(v)
				if _, err := b.exec(`INSERT INTO arr(eid, col, v, x) VALUES(?, ?, ?, ?)`, eid, p.f.col, val, ex); err != nil {
					return err
				}
			}
		}
		if p.f.search {
			var parts []string
			for _, v := range p.fv.vals {
				switch x := v.(type) {
				case string:
					parts = append(parts, x)
				case float64, int64, bool:
					parts = append(parts, fmt.Sprint(x))
				}
			}
			if len(parts) > 0 {
				if _, err := b.exec(fmt.Sprintf(`INSERT INTO fts%d(rowid, v) VALUES(?, ?)`, p.f.col), eid, strings.Join(parts, "\n")); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (b *batch) recordError(docID, action string, err error) {
	b.changed = true
	b.errs = append(b.errs, IndexingError{Timestamp: b.ix.opts.Now().UTC(), Document: docID, Action: action, Error: err.Error()})
}

// loaded is one load() result.
type loaded struct {
	body             []byte
	id, coll, cv, lm string
}

// load is the JS engine's load() while this batch maps a document.
func (b *batch) load(id, coll string, track bool) ([]byte, string, string, string, string, bool, error) {
	key := storage.LowerID(id)
	d, ok := b.loads[key]
	if !ok {
		doc, err := b.ix.db.Get(b.ctx, id)
		if err != nil {
			return nil, "", "", "", "", false, err
		}
		if doc != nil {
			d = &loaded{body: doc.Body, id: doc.ID, coll: doc.Collection, cv: doc.ChangeVector, lm: document.FormatTime(doc.LastModified)}
		}
		if len(b.loads) >= maxLoads {
			clear(b.loads)
		}
		b.loads[key] = d
	}
	refColl := coll
	if refColl == "" && d != nil {
		refColl = d.coll
	}
	if track && refColl != "" && b.curDoc != "" {
		rk := refKey{src: b.cur, ref: strings.ToLower(refColl)}
		if _, ok := b.refs[rk]; !ok {
			// Everything up to the batch's start etag was visible to
			// the loads that created the pair.
			b.refs[rk] = refState{refName: b.ix.collName(rk.ref), docs: b.start, tombs: b.start}
			b.refsUsed = true
		}
		if _, err := b.exec(`INSERT OR IGNORE INTO refs(ref_coll, ref_key, src_coll, src) VALUES(?, ?, ?, ?)`, rk.ref, key, b.cur, b.curDoc); err != nil {
			return nil, "", "", "", "", false, err
		}
	}
	if d == nil || (coll != "" && !strings.EqualFold(d.coll, coll)) {
		return nil, "", "", "", "", false, nil
	}
	return d.body, d.id, d.coll, d.cv, d.lm, true, nil
}

// refPass re-maps the already indexed documents that reference documents
// changed or deleted after the reference watermarks.
func (b *batch) refPass() error {
	keys := make([]refKey, 0, len(b.refs))
	for k := range b.refs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].src+"\x00"+keys[i].ref < keys[j].src+"\x00"+keys[j].ref })
	for _, rk := range keys {
		src, ok := b.etags[rk.src]
		if !ok || src.docs == 0 {
			continue // nothing indexed yet: nothing to re-map
		}
		st := b.refs[rk]
		err := b.refScan(rk, src, &st, false)
		if err == nil && !b.full {
			err = b.refScan(rk, src, &st, true)
		}
		b.refs[rk] = st
		if err != nil {
			return err
		}
		if b.full {
			return nil
		}
	}
	return nil
}

// refChange is one referenced document (or tombstone) after a watermark.
type refChange struct {
	key  string
	etag int64
}

// refScan walks one referenced collection's documents (or tombstones)
// after the pair's watermark, readChunk at a time, and re-maps the
// referencing documents of each. A referenced document with more
// referencing documents than the batch can take is done over several
// batches: the position (the referenced document, its etag and the last
// source re-mapped) is kept in st.pend and committed with the batch, so the
// pass resumes there, after a restart too; if the document changed in
// between, its sources are all re-mapped again.
func (b *batch) refScan(rk refKey, src collEtags, st *refState, tombstones bool) error {
	ix := b.ix
	for !b.full {
		n := min(readChunk, ix.opts.BatchSize-b.units)
		if n <= 0 {
			b.full = true
			return nil
		}
		b.seq++
		seq := b.seq
		clear(b.loads)
		var changes []refChange
		var err error
		if tombstones {
			err = ix.db.ScanTombstones(b.ctx, st.refName, st.tombs, n, func(t *storage.Tombstone) error {
				changes = append(changes, refChange{storage.LowerID(t.ID), t.Etag})
				return nil
			})
		} else {
			err = ix.db.ScanCollection(b.ctx, st.refName, st.docs, n, func(d *storage.Document) error {
				changes = append(changes, refChange{storage.LowerID(d.ID), d.Etag})
				return nil
			})
		}
		if err != nil {
			return err
		}
		for _, c := range changes {
			done, err := b.remapReferrers(rk, src, st, c, tombstones, seq)
			if err != nil {
				return err
			}
			if !done {
				return nil
			}
			st.pend = refPending{}
			if tombstones {
				st.tombs = c.etag
			} else {
				st.docs = c.etag
			}
			if err := b.spend(); err != nil {
				if err == errBudget {
					return nil
				}
				return err
			}
		}
		if len(changes) < n {
			return nil
		}
	}
	return nil
}

// remapReferrers re-maps the already indexed sources that reference one
// changed referenced document, in source key order, readChunk at a time.
// It returns false when the batch's budget ran out first (st.pend then says
// where to resume).
func (b *batch) remapReferrers(rk refKey, src collEtags, st *refState, c refChange, tombstones bool, seq int64) (bool, error) {
	ix := b.ix
	after := ""
	if p := st.pend; p.etag == c.etag && p.key == c.key && p.tombstones == tombstones {
		after = p.src
	}
	q, err := b.stmt(`SELECT src FROM refs WHERE ref_coll = ? AND ref_key = ? AND src_coll = ? AND src > ? ORDER BY src LIMIT ?`)
	if err != nil {
		return false, err
	}
	for {
		rows, err := q.QueryContext(b.ctx, rk.ref, c.key, rk.src, after, readChunk)
		if err != nil {
			return false, err
		}
		var srcs []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				rows.Close()
				return false, err
			}
			srcs = append(srcs, s)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return false, err
		}
		if len(srcs) == 0 {
			return true, nil
		}
		todo := srcs[:0:0]
		for _, s := range srcs {
			if r, ok := b.remapped[s]; !ok || r < seq {
				todo = append(todo, s)
			}
		}
		docs, err := ix.db.GetMany(b.ctx, todo)
		if err != nil {
			return false, err
		}
		for i, d := range docs {
			s := todo[i]
			// Only documents already indexed: newer ones are the map
			// pass's (and a deleted one the tombstone pass's).
			if d == nil || d.Etag > src.docs || (src.name != AllDocs && !strings.EqualFold(d.Collection, src.name)) {
				continue
			}
			b.remapped[s] = b.seq
			prev := b.cur
			b.cur = rk.src
			err = b.indexDoc(&docIn{key: s, id: d.ID, coll: d.Collection, etag: d.Etag, cv: d.ChangeVector,
				lm: document.FormatTime(d.LastModified), body: d.Body}, true, false)
			b.cur = prev
			if err != nil {
				return false, err
			}
			st.remapped++
			b.units++
			b.changed = true
			if err := b.stop.Err(); err != nil {
				return false, err
			}
			b.pace()
			if b.budgetSpent() {
				b.full = true
				st.pend = refPending{tombstones: tombstones, key: c.key, etag: c.etag, src: s}
				return false, nil
			}
		}
		after = srcs[len(srcs)-1]
		if len(srcs) < readChunk {
			return true, nil
		}
	}
}

// reduceDirty recomputes the map-reduce groups the batch touched.
func (b *batch) reduceDirty() error {
	if len(b.dirty) == 0 {
		return nil
	}
	ix := b.ix
	for _, g := range sortedKeys(b.dirty) {
		rows, err := b.tx.QueryContext(b.ctx, `SELECT val FROM map_out WHERE grp = ?`, g)
		if err != nil {
			return err
		}
		var vals []string
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return err
			}
			vals = append(vals, v)
		}
		rows.Close()
		if err := b.deleteEntries(g); err != nil {
			return err
		}
		if len(vals) == 0 {
			continue
		}
		ix.reduceAttempts.Add(1)
		var first map[string]any
		if err := json.Unmarshal([]byte(vals[0]), &first); err != nil {
			return err
		}
		key, err := ix.mapper.groupKey(first)
		if err == nil {
			var row map[string]any
			row, err = ix.mapper.reduce(key, vals)
			if err == nil {
				e := entryFromObject(row, true, nil)
				err = b.insertEntry(g, "", &e)
				if err != nil && !isDocError(err) {
					return err
				}
			}
		}
		if err != nil {
			ix.reduceErrors.Add(1)
			b.recordError(g, "Reduce", err)
			continue
		}
		ix.reduceSuccesses.Add(1)
	}
	b.dirty = map[string]bool{}
	return nil
}

// persist writes the etags and errors in the batch's transaction.
func (b *batch) persist() error {
	for k, d := range b.counts {
		if d == 0 {
			continue
		}
		v := k.v
		if x, ok := v.(blobKey); ok {
			v = []byte(x)
		}
		if _, err := b.exec(`INSERT INTO value_counts(col, v, n) VALUES(?, ?, ?) ON CONFLICT(col, v) DO UPDATE SET n = n + excluded.n`, k.col, v, d); err != nil {
			return err
		}
		if d < 0 {
			if _, err := b.exec(`DELETE FROM value_counts WHERE col = ? AND v = ? AND n <= 0`, k.col, v); err != nil {
				return err
			}
		}
	}
	for k, e := range b.etags {
		if _, err := b.exec(`INSERT INTO etags(collection, docs, tombstones) VALUES(?, ?, ?) ON CONFLICT(collection) DO UPDATE SET docs = excluded.docs, tombstones = excluded.tombstones`, k, e.docs, e.tombs); err != nil {
			return err
		}
	}
	for k, s := range b.refs {
		if _, err := b.exec(`INSERT INTO ref_etags(src, ref, docs, tombstones, remapped, pend_tombstones, pend_key, pend_etag, pend_src) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT(src, ref) DO UPDATE SET docs = excluded.docs, tombstones = excluded.tombstones, remapped = excluded.remapped,
			pend_tombstones = excluded.pend_tombstones, pend_key = excluded.pend_key, pend_etag = excluded.pend_etag, pend_src = excluded.pend_src`,
			k.src, k.ref, s.docs, s.tombs, s.remapped, s.pend.tombstones, s.pend.key, s.pend.etag, s.pend.src); err != nil {
			return err
		}
	}
	for _, e := range b.errs {
		if _, err := b.exec(`INSERT INTO errors(at, doc, action, error) VALUES(?, ?, ?, ?)`, e.Timestamp.UnixNano(), e.Document, e.Action, e.Error); err != nil {
			return err
		}
	}
	if len(b.errs) > 0 {
		if _, err := b.exec(`DELETE FROM errors WHERE seq <= (SELECT max(seq) FROM errors) - ?`, b.ix.opts.MaxErrors); err != nil {
			return err
		}
	}
	// The error state is decided here so it is stored with the batch.
	ix := b.ix
	att, bad := ix.mapAttempts.Load(), ix.mapErrors.Load()
	if ix.opts.ErrorRate > 0 && att >= 100 && float64(bad) > ix.opts.ErrorRate*float64(att) {
		reason := fmt.Sprintf("%d of %d map attempts failed (more than %.0f%%); the last error: %s", bad, att, ix.opts.ErrorRate*100, lastErr(b.errs))
		if _, err := b.exec(sqlSetMeta, "error_state", reason); err != nil {
			return err
		}
		ix.mu.Lock()
		ix.state, ix.stateReason = StateError, reason
		ix.mu.Unlock()
	}
	return nil
}

func lastErr(errs []IndexingError) string {
	if len(errs) == 0 {
		return "none recorded in the last batch"
	}
	return errs[len(errs)-1].Error
}

// publish makes a committed batch visible.
func (ix *Index) publish(b *batch) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, f := range b.added {
		ix.fields[fieldKey(f.name)] = f
		ix.byCol = append(ix.byCol, f)
	}
	for _, f := range b.multiOn {
		if cur, ok := ix.fields[fieldKey(f.name)]; ok {
			cur.multi = true
		}
	}
	ix.etags = b.etags
	ix.refs = b.refs
	for k := range b.refs {
		ix.interest[k.ref] = true
	}
	ix.multiEntries = b.multi
	ix.entries += b.entries
	ix.errs = append(ix.errs, b.errs...)
	if n := len(ix.errs) - ix.opts.MaxErrors; n > 0 {
		ix.errs = append([]IndexingError(nil), ix.errs[n:]...)
	}
	ix.lastIndexing = ix.opts.Now().UTC()
	close(ix.progress)
	ix.progress = make(chan struct{})
}
