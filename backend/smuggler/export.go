package smuggler

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/patch"
	"github.com/rookerydb/rookery/backend/smuggler/dump"
	"github.com/rookerydb/rookery/backend/storage"
)

// Subscription is a subscription as a dump carries it.
type Subscription struct {
	Name            string
	ID              int64
	Query           string
	Disabled        bool
	MentorNode      string
	PinToMentorNode bool
	// ChangeVector is where delivery stands
	// (ChangeVectorForNextBatchStartingPoint); "" from the beginning.
	ChangeVector string
}

// Services are what a dump carries beside the documents, kept by the
// cluster: identities, index definitions, subscriptions.
type Services interface {
	Identities(db string) map[string]int64
	SeedIdentity(ctx context.Context, db, prefix string, value int64) error
	IndexDefinitions(db string) []index.Definition
	PutIndex(ctx context.Context, db string, d index.Definition) error
	Subscriptions(db string) []Subscription
	CreateSubscription(ctx context.Context, db *storage.DB, s Subscription) error
}

// exportPage is how many changes an export reads per page.
const exportPage = 512

// Export writes db's dump to w. It reads the documents page by page in
// etag order (constant memory whatever the database weighs) and counts
// what it wrote in res; ctx ends it early.
func Export(ctx context.Context, db *storage.DB, svc Services, o Options, w io.Writer, res *Result) error {
	if err := o.check(); err != nil {
		return err
	}
	defer func() { res.finish(time.Now()) }()
	var transform *patch.Script
	if strings.TrimSpace(o.TransformScript) != "" {
		s, err := patch.Compile(o.TransformScript, "")
		if err != nil {
			return err
		}
		s.TimeLimit = time.Duration(o.MaxStepsForTransformScript) * stepTime
		transform = s
	}
	dw, err := dump.NewWriter(w, o.compression())
	if err != nil {
		return err
	}
	if err := dw.Property("BuildVersion", []byte(strconv.Itoa(dump.BuildVersion))); err != nil {
		return err
	}
	if o.Has(TypeDatabaseRecord) {
		rec, _ := json.Marshal(map[string]any{"DatabaseName": db.Name(), "Encrypted": false, "Settings": map[string]string{}})
		if err := dw.Property("DatabaseRecord", rec); err != nil {
			return err
		}
		res.add(func() { start(&res.DatabaseRecord); res.DatabaseRecord.ReadCount = 1 })
	}
	if o.Has(TypeDocuments) || o.Has(TypeConflicts) {
		if err := exportDocs(ctx, db, o, transform, dw, res); err != nil {
			return err
		}
	}
	if o.Has(TypeRevisionDocuments) {
		if err := exportRevisions(ctx, db, o, dw, res); err != nil {
			return err
		}
	}
	if o.Has(TypeTimeSeries) && o.Has(TypeDocuments) {
		if err := exportTimeSeries(ctx, db, o, dw, res); err != nil {
			return err
		}
	}
	if o.Has(TypeCounterGroups) && o.Has(TypeDocuments) {
		if err := exportCounters(ctx, db, o, dw, res); err != nil {
			return err
		}
	}
	if o.Has(TypeIndexes) {
		res.add(func() { start(&res.Indexes) })
		if err := dw.Begin("Indexes"); err != nil {
			return err
		}
		defs := svc.IndexDefinitions(db.Name())
		sort.Slice(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name })
		for _, d := range defs {
			raw, err := exportIndex(d)
			if err != nil {
				return err
			}
			if err := dw.Item(raw); err != nil {
				return err
			}
			res.add(func() { res.Indexes.ReadCount++ })
		}
		if err := dw.End(); err != nil {
			return err
		}
	}
	if o.Has(TypeIdentities) {
		res.add(func() { start(&res.Identities) })
		if err := dw.Begin("Identities"); err != nil {
			return err
		}
		ids := svc.Identities(db.Name())
		keys := make([]string, 0, len(ids))
		for k := range ids {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			raw, _ := json.Marshal(map[string]string{"Key": k, "Value": strconv.FormatInt(ids[k], 10)})
			if err := dw.Item(raw); err != nil {
				return err
			}
			res.add(func() { res.Identities.ReadCount++ })
		}
		if err := dw.End(); err != nil {
			return err
		}
	}
	if o.Has(TypeCompareExchange) {
		if err := exportCmpXchg(svc, db.Name(), dw, res); err != nil {
			return err
		}
	}
	if o.Has(TypeSubscriptions) {
		res.add(func() { start(&res.Subscriptions) })
		if err := dw.Begin("Subscriptions"); err != nil {
			return err
		}
		subs := svc.Subscriptions(db.Name())
		sort.Slice(subs, func(i, j int) bool { return subs[i].Name < subs[j].Name })
		for _, s := range subs {
			raw, _ := json.Marshal(map[string]any{
				"SubscriptionName": s.Name, "SubscriptionId": s.ID, "Query": s.Query,
				"ChangeVectorForNextBatchStartingPoint": s.ChangeVector, "Disabled": s.Disabled,
				"MentorNode": s.MentorNode, "PinToMentorNode": s.PinToMentorNode,
			})
			if err := dw.Item(raw); err != nil {
				return err
			}
			res.add(func() { res.Subscriptions.ReadCount++ })
		}
		if err := dw.End(); err != nil {
			return err
		}
	}
	return dw.Close()
}

// exportDocs writes the Docs section and, after it, the Conflicts section
// (the conflict versions met on the way are kept in a spill list of their
// etags and read again, so memory stays one page).
func exportDocs(ctx context.Context, db *storage.DB, o Options, transform *patch.Script, dw *dump.Writer, res *Result) error {
	docs, conflicts := o.Has(TypeDocuments), o.Has(TypeConflicts)
	if docs {
		res.add(func() { start(&res.Documents.Counts) })
		if err := dw.Begin("Docs"); err != nil {
			return err
		}
	}
	var conflictEtags []int64
	var buf []byte
	after := int64(0)
	last := db.LastEtag()
	res.add(func() { res.pos = Position{Total: last, Unit: "etags"} })
	now := time.Now().UTC()
	for {
		n := 0
		var werr error
		err := db.ScanChangesAfter(ctx, after, exportPage, 8<<20, func(it *storage.Item) error {
			n++
			after = it.Etag
			if it.Kind != storage.KindDocument {
				return nil // exported in their own sections
			}
			if it.Conflict {
				if conflicts {
					conflictEtags = append(conflictEtags, it.Etag-1)
				}
				return nil
			}
			if !docs || it.Type != "Put" || !o.wantsCollection(it.Collection) {
				return nil
			}
			if !o.includeExpired() && expired(it.Body, now) {
				res.add(func() { res.Documents.SkippedCount++ })
				return nil
			}
			body, err := exportAttachments(ctx, db, o, dw, res, it) // streams written before their document
			if err != nil {
				werr = err
				return err
			}
			buf = document.AppendJSON(buf[:0], body, it.ID, it.ChangeVector, it.LastModified)
			if transform != nil {
				out, _, err := transform.Run(buf, patch.Env{})
				if err != nil {
					if pe, ok := err.(*patch.Error); ok && pe.Thrown == "skip" {
						res.add(func() { res.Documents.SkippedCount++ })
						return nil
					}
					res.add(func() { res.Documents.ErroredCount++ })
					res.message("WARN", "document %s: the transform script failed: %v", it.ID, err)
					return nil
				}
				buf = append(buf[:0], out...)
			}
			if werr = dw.Item(buf); werr != nil {
				return werr
			}
			etag := it.Etag
			res.add(func() { res.Documents.ReadCount++; res.Documents.LastEtag = etag })
			return nil
		})
		if werr != nil {
			return werr
		}
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		res.posDone.Store(min(after, last))
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	res.posDone.Store(last)
	if docs {
		if err := dw.End(); err != nil {
			return err
		}
	}
	if !conflicts {
		return nil
	}
	res.add(func() { start(&res.Conflicts) })
	if err := dw.Begin("Conflicts"); err != nil {
		return err
	}
	for _, e := range conflictEtags {
		var werr error
		err := db.ScanChangesAfter(ctx, e, 1, 64<<20, func(it *storage.Item) error {
			if !it.Conflict || it.Kind != storage.KindDocument || it.Etag != e+1 || !o.wantsCollection(it.Collection) {
				return nil
			}
			item := map[string]any{"Id": it.ID, "Collection": it.Collection, "ChangeVector": it.ChangeVector,
				"Etag": it.Etag, "LastModified": document.FormatTime(it.LastModified), "Flags": "Conflicted", "Doc": nil}
			if it.Type == "Put" {
				item["Doc"] = json.RawMessage(document.AppendJSON(nil, it.Body, it.ID, it.ChangeVector, it.LastModified))
			}
			raw, err := json.Marshal(item)
			if err != nil {
				return err
			}
			werr = dw.Item(raw)
			res.add(func() { res.Conflicts.ReadCount++; res.Conflicts.LastEtag = it.Etag })
			return werr
		})
		if werr != nil {
			return werr
		}
		if err != nil {
			return err
		}
	}
	return dw.End()
}

// expired tells whether a stored body's @metadata.@expires is before now.
func expired(body []byte, now time.Time) bool {
	if !bytes.Contains(body, []byte(`"@expires"`)) {
		return false
	}
	var d struct {
		Metadata struct {
			Expires string `json:"@expires"`
		} `json:"@metadata"`
	}
	if json.Unmarshal(body, &d) != nil || d.Metadata.Expires == "" {
		return false
	}
	t, ok := parseTime(d.Metadata.Expires)
	return ok && t.Before(now)
}
