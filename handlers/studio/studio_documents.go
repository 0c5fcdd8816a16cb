package studio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/batch"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/views"
)

// Documents pages: the collection list and keyset-paged grid, one
// document's page with its editor, delete and "New document". Every read is
// an index walk (PageByEtag, PageByID, Get) or the in-memory counters
// (Stats): nothing counts or scans a collection, so a page costs the same
// with a million documents as with ten.

const (
	docsPageSize = 50
	gridColumns  = 4  // body fields shown in the grid
	cellRunes    = 60 // a grid value is cut to this many characters
	titleRunes   = 400
	scanMembers  = 32 // top-level members read per document to pick columns
	// gridBodyBytes is how much of each body the grid reads: SQLite cuts
	// it (substr), so a page of 50 rows holds at most 400 KiB of bodies
	// however large the documents are. It covers the cells' text and
	// tooltips many times over; a document whose first members are larger
	// shows the start of the value that crosses it.
	gridBodyBytes = 8 << 10
	// docPageFullBytes is the largest document the document page shows
	// whole (indented, with the editor); a larger one shows its first
	// docPreviewBytes as stored and a link to the whole document.
	docPageFullBytes = 1 << 20
	docPreviewBytes  = 64 << 10
	// docsScanBudget bounds the ids a prefix page filtered by collection
	// reads (see pageByIDIn).
	docsScanBudget = views.DocsScanBudget
)

// registerDocuments adds the documents pages.
func (s *Studio) registerDocuments(g *echo.Group) {
	g.GET("/documents", s.documents)
	g.GET("/doc", s.docPage)
	g.POST("/doc", s.saveDoc)
	g.POST("/doc/delete", s.deleteDoc)
	g.GET("/doc/new", s.newDocForm)
	g.POST("/doc/new", s.createDoc)
	s.addLive("documents", s.documentsLive, false)
}

// docMember is one top-level member of a stored body.
type docMember struct {
	name string
	raw  jsontext.Value // the quoted name as stored
	val  jsontext.Value
	// cut: val is only the start of the value (the body was read up to a
	// bound), not valid JSON.
	cut bool
}

// docSplitBody reads the top-level members of a stored body, up to limit
// (0 for all), and the @metadata object (stored last, so only found when
// the limit is not reached).
func docSplitBody(body []byte, limit int) (members []docMember, meta jsontext.Value, err error) {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, nil, errors.New("not a JSON object")
	}
	for dec.PeekKind() != '}' {
		if limit > 0 && len(members) >= limit {
			break
		}
		rawName, err := dec.ReadValue()
		if err != nil {
			return members, meta, err
		}
		rawName = rawName.Clone()
		var name string
		if err := json.Unmarshal(rawName, &name); err != nil {
			return members, meta, err
		}
		at := dec.InputOffset()
		val, err := dec.ReadValue()
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) && at < int64(len(body)) {
				// A body read up to a bound ends inside this value: keep
				// its start.
				rest := bytes.TrimLeft(body[at:], " \t\r\n:")
				members = append(members, docMember{name: name, raw: rawName, val: jsontext.Value(rest), cut: true})
			}
			return members, meta, err
		}
		if name == "@metadata" {
			meta = val.Clone()
			continue
		}
		members = append(members, docMember{name: name, raw: rawName, val: val.Clone()})
	}
	return members, meta, nil
}

// docShorten cuts s to n characters with an ellipsis.
func docShorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	count := 0
	for i := range s {
		if count == n-1 {
			return s[:i] + "…"
		}
		count++
	}
	return s
}

// docPretty indents JSON by two spaces; the input as is when it does not parse.
func docPretty(raw []byte) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

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

// docPage serves GET /studio/db/{db}/doc?id=…
func (s *Studio) docPage(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	id := c.QueryParam("id")
	if id == "" {
		return s.studioError(c, db.Name(), dberr.New(dberr.BadRequest, "Which document? The address has no id."))
	}
	d, err := db.GetPrefix(c.Request().Context(), id, docPageFullBytes+1)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	if d == nil {
		return s.studioError(c, db.Name(), missingDoc(db.Name(), id))
	}
	p := views.DocPage{DB: db.Name(), ID: d.ID, Stored: docMeta(d), ChangeVector: d.ChangeVector}
	if !p.Stored.Preview {
		p.Editor = docEditorText(d)
	}
	return render(c, http.StatusOK, s.chrome(c, d.ID+" · Documents", db.Name(), views.NavDocuments, ""), views.DocumentPage(p))
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
		return p, dberr.New(dberr.BadRequest, "This is not a valid document: %v. Nothing was saved.", err)
	}
	return p, nil
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
	default:
		return s.studioError(c, db.Name(), err)
	}
	d, gerr := db.GetPrefix(ctx, id, docPageFullBytes+1)
	if gerr != nil {
		return s.studioError(c, db.Name(), gerr)
	}
	if d != nil {
		p.ID, p.Stored = d.ID, docMeta(d)
	} else if p.Conflict {
		p.Error = "Not saved: this document was deleted by someone else since you opened it. Create it again with New document if you still need it."
	}
	return render(c, status, s.chrome(c, id+" · Documents", db.Name(), views.NavDocuments, ""), views.DocumentPage(p))
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
	default:
		if errors.Is(err, context.Canceled) {
			return err
		}
		return s.studioError(c, db.Name(), err)
	}
	return render(c, status, s.chrome(c, "New document", db.Name(), views.NavDocuments, ""), views.NewDocumentPage(p))
}
