package studio

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/batch"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/views"
)

// The document pages: one document with its editor, delete, and "New
// document".

// docMeta prepares a stored document for the document page: the body
// without @metadata, and the metadata besides the collection. A document
// read only in part (larger than docPageFullBytes) gets a preview: the
// first docPreviewBytes of its body as stored, never indented or parsed.
func docMeta(d *storage.Document) *views.DocMeta {
	m := &views.DocMeta{ID: d.ID, Collection: d.Collection, ChangeVector: d.ChangeVector, Etag: d.Etag, LastModified: d.LastModified}
	if d.Truncated() || len(d.Body) > docPageFullBytes {
		m.Preview, m.Size, m.PreviewBytes = true, max(d.Size, int64(len(d.Body))), docPreviewBytes
		m.JSON = strings.ToValidUTF8(string(d.Body[:min(len(d.Body), docPreviewBytes)]), "") + "…"
		return m
	}
	members, meta, err := docSplitBody(d.Body, 0)
	if err != nil {
		m.JSON = docPretty(d.Body)
		return m
	}
	var b []byte
	b = append(b, '{')
	for i, mb := range members {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, mb.raw...)
		b = append(b, ':')
		b = append(b, mb.val...)
	}
	b = append(b, '}')
	m.JSON = docPretty(b)
	if other := docMetaWithout(meta, "@collection"); other != nil {
		m.OtherMeta = docPretty(other)
	}
	return m
}

// docMetaWithout returns the metadata object minus key; nil when nothing is left.
func docMetaWithout(meta jsontext.Value, key string) []byte {
	if meta.Kind() != '{' {
		return nil
	}
	ms, _, err := docSplitBody(meta, 0)
	if err != nil {
		return nil
	}
	var b []byte
	n := 0
	b = append(b, '{')
	for _, m := range ms {
		if m.name == key {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, m.raw...)
		b = append(b, ':')
		b = append(b, m.val...)
		n++
	}
	if n == 0 {
		return nil
	}
	return append(b, '}')
}

// docEditorText is what the editor starts with: the stored body, @metadata
// (with @collection) included, indented.
func docEditorText(d *storage.Document) string { return docPretty(d.Body) }

func missingDoc(db, id string) error {
	return dberr.New(dberr.NotFound, "There is no document %q in database %s. It may have been deleted.", id, db)
}

// registerDocument adds the document pages.
func (s *Studio) registerDocument(g *echo.Group) {
	g.GET("/doc", s.docPage)
	g.POST("/doc", s.saveDoc)
	g.POST("/doc/delete", s.deleteDoc)
	g.GET("/doc/new", s.newDocForm)
	g.POST("/doc/new", s.createDoc)
	s.addLive("doc", s.docLive, false)
	s.registerAttachments(g)
}

// docPage serves GET /studio/db/{db}/doc?id=…: the document with its
// editor and references, or, for a conflicted id, a banner that leads to
// its resolution.
func (s *Studio) docPage(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	id := c.QueryParam("id")
	if id == "" {
		return s.studioError(c, db.Name(), dberr.New(dberr.BadRequest, "Which document? The address has no id."))
	}
	ctx := c.Request().Context()
	d, err := db.GetPrefix(ctx, id, docPageFullBytes+1)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	if d == nil {
		p := views.DocPage{DB: db.Name(), ID: id}
		if p.InConflict, p.ID, err = docConflict(ctx, db, id); err != nil {
			return s.studioError(c, db.Name(), err)
		}
		if p.InConflict == nil {
			return s.studioError(c, db.Name(), missingDoc(db.Name(), id))
		}
		return render(c, http.StatusOK, s.chrome(c, p.ID+" · Documents", db.Name(), views.NavDocuments, "doc"), views.DocumentPage(p))
	}
	p := views.DocPage{DB: db.Name(), ID: d.ID, Stored: docMeta(d), ChangeVector: d.ChangeVector}
	if !p.Stored.Preview {
		p.Editor = docEditorText(d)
	}
	if err := s.docRefs(ctx, db, d, &p); err != nil {
		return s.studioError(c, db.Name(), err)
	}
	if p.Attachments, err = docAttachments(ctx, db, d.ID); err != nil {
		return s.studioError(c, db.Name(), err)
	}
	if p.Counters, err = docCounters(ctx, db, d.ID); err != nil {
		return s.studioError(c, db.Name(), err)
	}
	return render(c, http.StatusOK, s.chrome(c, d.ID+" · Documents", db.Name(), views.NavDocuments, "doc"), views.DocumentPage(p))
}

// docConflict describes a conflicted id for the banner (nil when id is not
// in conflict) and returns the id as first spelled.
func docConflict(ctx context.Context, db *storage.DB, id string) (*views.DocConflict, string, error) {
	b, ok, err := db.ConflictOf(ctx, id)
	if err != nil || !ok {
		return nil, id, err
	}
	return &views.DocConflict{Collection: b.Collection, Versions: b.Versions, Tombstones: b.Tombstones, Latest: b.Latest}, b.ID, nil
}

// docLive refreshes the document page's view of the stored version: its
// change vector, or that it is gone or in conflict. The page's script
// compares it with the version the editor's text is based on.
func (s *Studio) docLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	db, err := s.Catalog.Get(q.Get("db"))
	if err != nil {
		return nil, nil // the database went away; nothing to refresh
	}
	id := q.Get("id")
	if id == "" {
		return nil, nil
	}
	st := views.DocServer{State: "gone"}
	d, err := db.GetPrefix(ctx, id, 1)
	if err != nil {
		return nil, err
	}
	if d != nil {
		st = views.DocServer{State: "stored", ChangeVector: d.ChangeVector, LastModified: d.LastModified}
	} else if conflicted, err := db.HasConflict(ctx, id); err != nil {
		return nil, err
	} else if conflicted {
		st.State = "conflict"
	}
	return []views.Fragment{{ID: "doc-server", C: views.DocServerState(st)}}, nil
}

// readDocForm parses a posted form before any field is read: Go reads at
// most 10 MB of a url-encoded body and, when a body is larger, every field
// reads as empty, which must not look like an empty document.
func (s *Studio) readDocForm(c echo.Context, db string) error {
	if err := c.Request().ParseForm(); err != nil {
		return s.studioError(c, db, dberr.New(dberr.BadRequest, "The form could not be read (%v); nothing was saved. Documents larger than 10 MB need the API.", err))
	}
	return nil
}

// parseDocText parses the editor's text into a document.
func (s *Studio) parseDocText(text, id string) (document.Parsed, error) {
	if strings.TrimSpace(text) == "" {
		return document.Parsed{}, dberr.New(dberr.BadRequest, "The document is empty; write a JSON object, e.g. {}.")
	}
	p, err := document.ParseMax([]byte(text), s.MaxDocumentSize)
	var se *document.SizeError
	if errors.As(err, &se) {
		return p, document.TooLarge(se, id)
	}
	if err != nil {
		if line, col, reason, ok := docSyntaxPlace(text); ok {
			return p, dberr.New(dberr.BadRequest, "This is not a valid document: line %d, column %d: %s. Nothing was saved.", line, col, reason)
		}
		return p, dberr.New(dberr.BadRequest, "This is not a valid document: %v. Nothing was saved.", err)
	}
	return p, nil
}

// docErrorAt places a refused text's syntax error for the editor (0, 0
// when the text is well-formed JSON).
func docErrorAt(err error, text string) (line, col int) {
	if dberr.KindOf(err) != dberr.BadRequest {
		return 0, 0
	}
	line, col, _, _ = docSyntaxPlace(text)
	return line, col
}

// saveDoc serves POST /studio/db/{db}/doc: optimistic concurrency on the
// change vector the editor was opened with.
func (s *Studio) saveDoc(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	if err := s.readDocForm(c, db.Name()); err != nil {
		return err
	}
	ctx := c.Request().Context()
	id, cv, text := c.FormValue("id"), c.FormValue("changeVector"), c.FormValue("json")
	if id == "" {
		return s.studioError(c, db.Name(), dberr.New(dberr.BadRequest, "Which document? The form has no id."))
	}
	if cv == "" {
		// The editor always carries the version it was opened with; without
		// it a save could silently overwrite someone else's change.
		err = dberr.New(dberr.BadRequest, "The form does not say which version of the document it edits; reload the document and edit again.")
	}
	var parsed document.Parsed
	if err == nil {
		parsed, err = s.parseDocText(text, id)
	}
	if err == nil {
		err = db.Write(ctx, func(tx *storage.Tx) error {
			_, err := tx.Put(id, parsed, &cv)
			return err
		})
	}
	if err == nil {
		return redirectFlash(c, string(views.DocURL(db.Name(), id)), "Saved.", false)
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	// Refused: show the stored version as it is now, and the user's text
	// with the version it was based on, so nothing typed is lost.
	p := views.DocPage{DB: db.Name(), ID: id, Editor: text, ChangeVector: cv}
	status := http.StatusBadRequest
	switch dberr.KindOf(err) {
	case dberr.Concurrency:
		status, p.Conflict = http.StatusConflict, true
		p.Error = "Not saved: this document was changed by someone else since you opened it; reload to see their version."
	case dberr.BadRequest, dberr.InvalidOperation, dberr.TooLarge:
		p.Error = err.Error()
		p.ErrLine, p.ErrCol = docErrorAt(err, text)
	default:
		return s.studioError(c, db.Name(), err)
	}
	d, gerr := db.GetPrefix(ctx, id, docPageFullBytes+1)
	if gerr != nil {
		return s.studioError(c, db.Name(), gerr)
	}
	if d != nil {
		p.ID, p.Stored = d.ID, docMeta(d)
		if gerr := s.docRefs(ctx, db, d, &p); gerr != nil {
			return s.studioError(c, db.Name(), gerr)
		}
	} else if p.Conflict {
		var conflict *views.DocConflict
		if conflict, _, gerr = docConflict(ctx, db, id); gerr != nil {
			return s.studioError(c, db.Name(), gerr)
		}
		if conflict != nil {
			p.InConflict = conflict
			p.Error = "Not saved: this document went into conflict since you opened it (versions from other nodes arrived). Resolve the conflict first; your text is below, copy what you need."
		} else {
			p.Error = "Not saved: this document was deleted by someone else since you opened it. Create it again with New document if you still need it."
		}
	}
	return render(c, status, s.chrome(c, id+" · Documents", db.Name(), views.NavDocuments, "doc"), views.DocumentPage(p))
}

// deleteDoc serves POST /studio/db/{db}/doc/delete.
func (s *Studio) deleteDoc(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	if err := s.readDocForm(c, db.Name()); err != nil {
		return err
	}
	id, cv := c.FormValue("id"), c.FormValue("changeVector")
	if id == "" {
		return s.studioError(c, db.Name(), dberr.New(dberr.BadRequest, "Which document? The form has no id."))
	}
	back := string(views.DocURL(db.Name(), id))
	if c.FormValue("confirm") != "yes" {
		return redirectFlash(c, back, "Tick the confirmation box to delete; nothing was deleted.", true)
	}
	var expected *string
	if cv != "" {
		expected = &cv
	}
	var info storage.Info
	var deleted bool
	err = db.Write(c.Request().Context(), func(tx *storage.Tx) error {
		var err error
		info, deleted, err = tx.Delete(id, expected)
		return err
	})
	switch {
	case dberr.Is(err, dberr.Concurrency):
		return redirectFlash(c, back, "Not deleted: this document was changed by someone else since you opened it; check their version first.", true)
	case err != nil:
		return s.studioError(c, db.Name(), err)
	case !deleted:
		return redirectFlash(c, string(views.DBURL(db.Name(), "documents")), "Document "+id+" was already gone.", true)
	}
	to := views.DBURLQ(db.Name(), "documents", url.Values{"collection": {info.Collection}})
	return redirectFlash(c, string(to), "Deleted "+info.ID+".", false)
}

// newDocForm serves GET /studio/db/{db}/doc/new[?collection=…].
func (s *Studio) newDocForm(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	p := views.NewDocPage{DB: db.Name(), Separator: db.Separator(), JSON: "{\n  \n}"}
	if coll := c.QueryParam("collection"); coll != "" {
		if canonical, ok := db.CanonicalCollection(coll); ok {
			coll = canonical
		}
		if !strings.HasPrefix(coll, "@") {
			p.ID = strings.ToLower(coll) + db.Separator()
			name, _ := json.Marshal(coll)
			p.JSON = docPretty([]byte(`{"@metadata":{"@collection":` + string(name) + `}}`))
		}
	}
	return render(c, http.StatusOK, s.chrome(c, "New document", db.Name(), views.NavDocuments, ""), views.NewDocumentPage(p))
}

// createDoc serves POST /studio/db/{db}/doc/new: the document must be new.
// The id rules are the API's: empty → GUID, trailing separator → server-made
// id, trailing '|' → the next identity.
func (s *Studio) createDoc(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	if err := s.readDocForm(c, db.Name()); err != nil {
		return err
	}
	id, text := strings.TrimSpace(c.FormValue("id")), c.FormValue("json")
	p := views.NewDocPage{DB: db.Name(), ID: id, JSON: text, Separator: db.Separator()}
	parsed, err := s.parseDocText(text, id)
	var res []batch.Result
	if err == nil {
		mustBeNew := ""
		res, err = batch.Execute(c.Request().Context(), db, s.idents(), []batch.Command{{Type: batch.Put, ID: id, ChangeVector: &mustBeNew, Document: parsed}})
	}
	if err == nil {
		return redirectFlash(c, string(views.DocURL(db.Name(), res[0].ID)), "Created "+res[0].ID+".", false)
	}
	status := http.StatusBadRequest
	switch dberr.KindOf(err) {
	case dberr.Concurrency:
		status = http.StatusConflict
		p.Error = "A document with the id " + id + " already exists; nothing was created. Choose another id, or open that document to edit it."
	case dberr.BadRequest, dberr.InvalidOperation, dberr.TooLarge:
		p.Error = err.Error()
		p.ErrLine, p.ErrCol = docErrorAt(err, text)
	default:
		if errors.Is(err, context.Canceled) {
			return err
		}
		return s.studioError(c, db.Name(), err)
	}
	return render(c, status, s.chrome(c, "New document", db.Name(), views.NavDocuments, ""), views.NewDocumentPage(p))
}
