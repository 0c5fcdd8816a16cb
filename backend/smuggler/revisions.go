package smuggler

import (
	"context"
	"errors"
	"strings"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/smuggler/dump"
	"github.com/rookerydb/rookery/backend/storage"
)

// exportRevisions writes the RevisionDocuments section: every revision in
// etag order, as RavenDB writes them (the document with its metadata and
// "@flags" saying it is a revision; a delete revision is only metadata).
func exportRevisions(ctx context.Context, db *storage.DB, o Options, dw *dump.Writer, res *Result) error {
	res.add(func() { start(&res.RevisionDocuments.Counts) })
	if err := dw.Begin("RevisionDocuments"); err != nil {
		return err
	}
	var buf []byte
	after := int64(0)
	for {
		n := 0
		err := db.ScanRevisions(ctx, after, exportPage, func(r *storage.Revision) error {
			n++
			after = r.Etag
			if !o.wantsCollection(r.Collection) {
				return nil
			}
			buf = r.AppendJSON(buf[:0])
			if err := dw.Item(buf); err != nil {
				return err
			}
			etag := r.Etag
			res.add(func() { res.RevisionDocuments.ReadCount++; res.RevisionDocuments.LastEtag = etag })
			return nil
		})
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return dw.End()
}

// revisionItem reads one revision of a dump into a replicated revision
// item: kept with its change vector (one already present is ignored).
func revisionItem(raw []byte) (storage.Item, error) {
	p, err := document.Parse(raw)
	if err != nil {
		return storage.Item{}, err
	}
	id, cv := p.Server["@id"], p.Server["@change-vector"]
	if id == "" || cv == "" {
		return storage.Item{}, errors.New("a revision without @metadata.@id or @change-vector")
	}
	lm, _ := parseTime(p.Server["@last-modified"])
	it := storage.Item{Type: "Put", Kind: storage.KindRevision, ID: id, Collection: p.Collection, ChangeVector: cv,
		LastModified: lm, Body: p.Body, Unordered: true}
	for _, f := range strings.Split(p.Server["@flags"], ",") {
		switch strings.TrimSpace(f) {
		case "DeleteRevision":
			it.Type, it.Body = "Delete", nil
		case "Conflicted":
			it.RevisionFlags |= storage.RevisionConflicted
		case "Resolved":
			it.RevisionFlags |= storage.RevisionResolved
		case "Reverted":
			it.RevisionFlags |= storage.RevisionReverted
		}
	}
	return it, nil
}
