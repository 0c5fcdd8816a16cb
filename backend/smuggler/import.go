package smuggler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/patch"
	"github.com/rookerydb/rookery/backend/smuggler/dump"
	"github.com/rookerydb/rookery/backend/storage"
)

// importBatch is how many documents an import writes per transaction: a
// failure part way keeps every batch before it and nothing of the batch
// it broke (no half-written document).
const importBatch = 2048

// importBatchBytes bounds one batch's bodies.
const importBatchBytes = 8 << 20

// Import reads a dump from r into db and counts what it did in res. The
// dump's documents keep their ids, metadata and change vectors (HiLo
// documents are documents); identities are seeded (never moved back); JavaScript
// and auto index definitions are put; C#/LINQ ones are skipped by name;
// subscriptions are created. A malformed or truncated dump stops with a
// *dump.FormatError saying where, after committing what came before it.
func Import(ctx context.Context, db *storage.DB, svc Services, o Options, r io.Reader, lim dump.Limits, res *Result) (err error) {
	if err := o.check(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			res.message("ERROR", "%v", err)
		}
		res.finish(time.Now())
	}()
	var transform *patch.Script
	if strings.TrimSpace(o.TransformScript) != "" {
		s, err := patch.Compile(o.TransformScript, "")
		if err != nil {
			return err
		}
		s.TimeLimit = time.Duration(o.MaxStepsForTransformScript) * stepTime
		transform = s
	}
	dr, err := dump.NewReader(r, lim)
	if err != nil {
		return err
	}
	// Documents are checked once, by document.Parse (imp.doc).
	dr.ParsedStrictly("Docs", "Results")
	imp := &importer{ctx: ctx, db: db, svc: svc, o: o, res: res, transform: transform}
	defer func() {
		// Whatever stopped the import, what was read before it is kept.
		ferr := imp.flush()
		if werr := imp.wait(); ferr == nil {
			ferr = werr
		}
		if ferr != nil && err == nil {
			err = ferr
		}
	}()
	ahead := readAhead(dr)
	defer ahead.stop()
	section := ""
	for {
		it, err := ahead.next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if it.Section != section {
			if err := imp.flush(); err != nil {
				return err
			}
			section = it.Section
			imp.begin(section)
		}
		if err := imp.item(it); err != nil {
			return &ItemError{Section: it.Section, Item: it.Index, Offset: it.Offset, Err: err}
		}
		if imp.pending {
			if err := imp.flush(); err != nil {
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	res.message("INFO", "import finished: %d documents, %d conflict versions, %d indexes, %d identities, %d subscriptions",
		res.Documents.ReadCount, res.Conflicts.ReadCount, res.Indexes.ReadCount, res.Identities.ReadCount, res.Subscriptions.ReadCount)
	return nil
}

type importer struct {
	ctx       context.Context
	db        *storage.DB
	svc       Services
	o         Options
	res       *Result
	transform *patch.Script

	batch      []storage.Item
	batchBytes int
	conflicts  bool // the batch holds conflict versions
	pending    bool // the batch is full: write it before the next item
	inflight   <-chan error
	skipped    map[string]bool
}

// begin notes the start of a section.
func (imp *importer) begin(section string) {
	r := imp.res
	switch section {
	case "Docs", "Results":
		r.add(func() { start(&r.Documents.Counts) })
		if !imp.o.Has(TypeDocuments) {
			r.add(func() { r.Documents.Skipped = true })
		}
	case "Conflicts":
		r.add(func() { start(&r.Conflicts) })
	case "Indexes":
		r.add(func() { start(&r.Indexes) })
	case "Identities":
		r.add(func() { start(&r.Identities) })
	case "Subscriptions":
		r.add(func() { start(&r.Subscriptions) })
	case "RevisionDocuments":
		r.add(func() { start(&r.RevisionDocuments.Counts) })
	case "Tombstones":
		r.add(func() { start(&r.Tombstones) })
	case "CompareExchange", "CmpXchg":
		r.add(func() { start(&r.CompareExchange) })
	case "CounterGroups", "Counters", "CountersBatch":
		r.add(func() { start(&r.Counters.Counts) })
	case "TimeSeries":
		r.add(func() { start(&r.TimeSeries.Counts) })
	}
}

// notYet records, once per section, that Rookery has nothing to put an
// item type into yet.
func (imp *importer) notYet(section, what string) {
	if imp.skipped == nil {
		imp.skipped = map[string]bool{}
	}
	if !imp.skipped[section] {
		imp.skipped[section] = true
		imp.res.message("WARN", "%s: %s are read and counted but not imported (Rookery does not store them yet)", section, what)
	}
}

func (imp *importer) item(it *dump.Item) error {
	r := imp.res
	switch it.Section {
	case "BuildVersion":
		imp.res.message("INFO", "dump of build %s", strings.TrimSpace(string(it.JSON)))
		return nil
	case "DatabaseRecord":
		r.add(func() { start(&r.DatabaseRecord); r.DatabaseRecord.ReadCount++ })
		if imp.o.Has(TypeDatabaseRecord) {
			imp.res.message("INFO", "the database record is read; Rookery keeps this database's own configuration")
		}
		return nil
	case "Docs", "Results":
		if it.Kind == dump.KindAttachment {
			return imp.importAttachment(it)
		}
		if !imp.o.Has(TypeDocuments) {
			return nil
		}
		return imp.doc(it.JSON)
	case "Conflicts":
		if !imp.o.Has(TypeConflicts) {
			return nil
		}
		var c struct {
			ID           string          `json:"Id"`
			Collection   string          `json:"Collection"`
			ChangeVector string          `json:"ChangeVector"`
			LastModified string          `json:"LastModified"`
			Doc          json.RawMessage `json:"Doc"`
		}
		if err := json.Unmarshal(it.JSON, &c); err != nil {
			return err
		}
		if c.ID == "" || c.ChangeVector == "" {
			return errors.New("a conflict without Id or ChangeVector")
		}
		lm, _ := parseTime(c.LastModified)
		item := storage.Item{Type: "Delete", ID: c.ID, Collection: c.Collection, ChangeVector: c.ChangeVector, LastModified: lm}
		if len(c.Doc) > 0 && string(c.Doc) != "null" {
			p, err := document.Parse(c.Doc)
			if err != nil {
				return err
			}
			item.Type, item.Body, item.Collection = "Put", p.Body, p.Collection
		}
		imp.conflicts = true
		imp.add(item)
		r.add(func() { r.Conflicts.ReadCount++ })
		return nil
	case "Indexes":
		if !imp.o.Has(TypeIndexes) {
			return nil
		}
		d, err := importIndex(it.JSON)
		var skip *errSkipIndex
		if errors.As(err, &skip) {
			r.add(func() { r.Indexes.ErroredCount++ })
			imp.res.message("WARN", "%v", skip)
			return nil
		}
		if err != nil {
			return err
		}
		if err := imp.svc.PutIndex(imp.ctx, imp.db.Name(), d); err != nil {
			r.add(func() { r.Indexes.ErroredCount++ })
			imp.res.message("WARN", "index %s not imported: %v", d.Name, err)
			return nil
		}
		r.add(func() { r.Indexes.ReadCount++ })
		return nil
	case "Identities":
		if !imp.o.Has(TypeIdentities) {
			return nil
		}
		var kv struct {
			Key   string          `json:"Key"`
			Value json.RawMessage `json:"Value"`
		}
		if err := json.Unmarshal(it.JSON, &kv); err != nil {
			return err
		}
		// The value is a JSON string in RavenDB's dumps; accept a number too.
		s := strings.Trim(string(kv.Value), `"`)
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || kv.Key == "" {
			return fmt.Errorf("an identity %q with value %s", kv.Key, kv.Value)
		}
		key := strings.ToLower(kv.Key)
		if !strings.HasSuffix(key, "|") {
			key += "|"
		}
		if err := imp.svc.SeedIdentity(imp.ctx, imp.db.Name(), key, v); err != nil {
			return err
		}
		r.add(func() { r.Identities.ReadCount++ })
		return nil
	case "Subscriptions":
		if !imp.o.Has(TypeSubscriptions) {
			return nil
		}
		var s struct {
			Name            string `json:"SubscriptionName"`
			ID              int64  `json:"SubscriptionId"`
			Query           string `json:"Query"`
			ChangeVector    string `json:"ChangeVectorForNextBatchStartingPoint"`
			Disabled        bool   `json:"Disabled"`
			MentorNode      string `json:"MentorNode"`
			PinToMentorNode bool   `json:"PinToMentorNode"`
		}
		if err := json.Unmarshal(it.JSON, &s); err != nil {
			return err
		}
		sub := Subscription{Name: s.Name, ID: s.ID, Query: s.Query, ChangeVector: s.ChangeVector, Disabled: s.Disabled,
			MentorNode: s.MentorNode, PinToMentorNode: s.PinToMentorNode}
		if err := imp.svc.CreateSubscription(imp.ctx, imp.db, sub); err != nil {
			r.add(func() { r.Subscriptions.ErroredCount++ })
			imp.res.message("WARN", "subscription %s not imported: %v", s.Name, err)
			return nil
		}
		r.add(func() { r.Subscriptions.ReadCount++ })
		return nil
	case "RevisionDocuments":
		if it.Kind == dump.KindAttachment || !imp.o.Has(TypeRevisionDocuments) {
			return nil
		}
		rev, err := revisionItem(it.JSON)
		if err != nil {
			return err
		}
		if !imp.o.wantsCollection(rev.Collection) {
			return nil
		}
		imp.add(rev)
		r.add(func() { r.RevisionDocuments.ReadCount++ })
	case "Tombstones", "DocsDeletions":
		r.add(func() { r.Tombstones.ReadCount++ })
		imp.notYet(it.Section, "tombstones")
	case "CompareExchange", "CmpXchg", "CompareExchangeTombstones":
		return imp.importCmpXchg(it)
	case "CounterGroups", "Counters":
		if !imp.o.Has(TypeCounterGroups) || !imp.o.Has(TypeDocuments) {
			return nil
		}
		return imp.importCounters(it.Section, it.JSON)
	case "CountersBatch":
		r.add(func() { r.Counters.ReadCount++ })
		imp.notYet(it.Section, "legacy counter batches")
	case "TimeSeries":
		return imp.importTimeSeries(it)
	case "TimeSeriesDeletedRanges":
		r.add(func() { r.TimeSeries.ReadCount++ })
		imp.notYet(it.Section, "time series")
	case "Attachments", "AttachmentsDeletions":
		imp.notYet(it.Section, "legacy (3.x) attachments")
	default:
		// Unknown sections (Transformers, ReplicationHubCertificates, later
		// additions) are skipped, as RavenDB's importer skips them.
		if it.Index == 1 {
			imp.res.message("INFO", "section %s skipped", it.Section)
		}
	}
	return nil
}

// doc reads one document of a dump: its @metadata gives the id, the
// change vector and the last modification (parsed once, with the body).
func (imp *importer) doc(raw []byte) error {
	if imp.transform != nil {
		out, _, err := imp.transform.Run(raw, patch.Env{})
		if err != nil {
			var pe *patch.Error
			if errors.As(err, &pe) && pe.Thrown == "skip" {
				imp.res.add(func() { imp.res.Documents.SkippedCount++ })
				return nil
			}
			return err
		}
		raw = out
	}
	p, err := document.Parse(raw)
	if err != nil {
		return err
	}
	if p.Body, err = imp.docAttachments(raw, p.Body); err != nil {
		return err
	}
	id := p.Server["@id"]
	if id == "" {
		return errors.New("a document without @metadata.@id")
	}
	if !imp.o.wantsCollection(p.Collection) {
		imp.res.add(func() { imp.res.Documents.SkippedCount++ })
		return nil
	}
	lm, ok := parseTime(p.Server["@last-modified"])
	if !ok {
		lm = time.Now().UTC()
	}
	imp.add(storage.Item{Type: "Put", ID: id, Collection: p.Collection, ChangeVector: p.Server["@change-vector"], LastModified: lm, Body: p.Body})
	imp.res.add(func() { imp.res.Documents.ReadCount++ })
	return nil
}

func (imp *importer) add(it storage.Item) {
	imp.batch = append(imp.batch, it)
	imp.batchBytes += len(it.Body)
	if len(imp.batch) >= importBatch || imp.batchBytes >= importBatchBytes {
		imp.pending = true
	}
}

// flush hands the batch to the database as one transaction and goes on
// reading while it commits (one batch in flight; the next flush waits for
// it). Documents with a change vector go in as replicated versions (they
// keep it; concurrent versions of one id become a conflict, as they would
// by replication), the others as new writes.
func (imp *importer) flush() error {
	if err := imp.wait(); err != nil {
		return err
	}
	if len(imp.batch) == 0 {
		return nil
	}
	batch := imp.batch
	imp.batch, imp.batchBytes, imp.pending, imp.conflicts = make([]storage.Item, 0, importBatch), 0, false, false
	res := imp.res
	skipRevisions := imp.o.SkipRevisionCreation
	imp.inflight = imp.db.Submit(imp.ctx, func(tx *storage.Tx) error {
		var last int64
		tx.SkipRevisionCreation(skipRevisions)
		for _, it := range batch {
			if it.Kind == storage.KindDocument && it.ChangeVector == "" {
				if err := tx.SetAttachmentRefs(it.ID, it.Body); err != nil { // attachments
					return fmt.Errorf("document %s: %w", it.ID, err)
				}
				info, err := tx.Put(it.ID, document.Parsed{Body: it.Body, Collection: it.Collection}, nil)
				if err != nil {
					return fmt.Errorf("document %s: %w", it.ID, err)
				}
				last = info.Etag
				continue
			}
			if _, err := tx.ApplyReplicated(it); err != nil {
				return fmt.Errorf("document %s: %w", it.ID, err)
			}
		}
		if last > 0 {
			res.add(func() { res.Documents.LastEtag = last })
		}
		return nil
	})
	return nil
}

// wait waits for the batch in flight, if any.
func (imp *importer) wait() error {
	if imp.inflight == nil {
		return nil
	}
	err := <-imp.inflight
	imp.inflight = nil
	if err == nil {
		last := imp.db.LastEtag()
		imp.res.add(func() {
			if imp.res.Documents.LastEtag < last {
				imp.res.Documents.LastEtag = last
			}
		})
	}
	return err
}

func parseTime(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.9999999", "2006-01-02T15:04:05.9999999Z"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// ItemError is an item of a dump that could not be imported: where it is
// and why.
type ItemError struct {
	Section string
	Item    int
	Offset  int64
	Err     error
}

func (e *ItemError) Error() string {
	return fmt.Sprintf("dump in section %s, item %d, byte %d of the decompressed stream: %v", e.Section, e.Item, e.Offset, e.Err)
}

func (e *ItemError) Unwrap() error { return e.Err }
