package studio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/dberr"
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
	s.addLive("documents", s.documentsLive, false)
}

// docsQuery is the documents page's query.
type docsQuery struct {
	collection string
	prefix     string
	before     int64
	after      string
}

func parseDocsQuery(q url.Values) (docsQuery, error) {
	dq := docsQuery{collection: q.Get("collection"), prefix: q.Get("prefix"), after: q.Get("after")}
	if b := q.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return dq, dberr.New(dberr.BadRequest, "The page cursor %q is not a valid etag.", b)
		}
		dq.before = n
	}
	return dq, nil
}

func (dq docsQuery) paged() bool { return dq.before > 0 || dq.after != "" }

// documents serves GET /studio/db/{db}/documents.
func (s *Studio) documents(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	dq, err := parseDocsQuery(c.QueryParams())
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	nav, count, canonical, known := docsNav(db, dq.collection)
	grid, err := docsGrid(c.Request().Context(), db, dq, canonical, known)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	title := "Documents"
	if dq.collection != "" {
		title = grid.Collection + " · Documents"
	}
	ch := s.chrome(c, title, db.Name(), views.NavDocuments, "documents")
	return render(c, http.StatusOK, ch, views.DocumentsPage(views.DocsPage{Nav: nav, Grid: grid, Count: count}))
}

// documentsLive refreshes the counts always and the grid on the first page
// only (deeper pages keep their rows until the user pages).
func (s *Studio) documentsLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	db, err := s.Catalog.Get(q.Get("db"))
	if err != nil {
		return nil, nil // the database went away; nothing to refresh
	}
	dq, err := parseDocsQuery(q)
	if err != nil {
		return nil, nil
	}
	nav, count, canonical, known := docsNav(db, dq.collection)
	frags := []views.Fragment{
		{ID: "collections-list", C: views.CollectionsList(nav)},
		{ID: "documents-count", C: views.DocumentsCount(count, !known)},
	}
	if !dq.paged() {
		grid, err := docsGrid(ctx, db, dq, canonical, known)
		if err != nil {
			return frags, err
		}
		frags = append(frags, views.Fragment{ID: "documents-grid", C: views.DocumentsGrid(grid)})
	}
	return frags, nil
}

// docsNav builds the collection list from the counters. It returns the
// count of the chosen view, the collection's canonical name and whether it
// exists ("" = all documents always exists).
func docsNav(db *storage.DB, collection string) (views.DocsNav, int64, string, bool) {
	st := db.Stats()
	nav := views.DocsNav{DB: db.Name(), All: collection == "", Total: st.Documents}
	canonical, known := collection, true
	if collection != "" {
		canonical, known = db.CanonicalCollection(collection)
		if !known {
			canonical = collection
		}
		nav.Active = canonical
	}
	count := st.Documents
	for _, col := range st.Collections {
		if col.Name == canonical && collection != "" {
			count = col.Docs
		}
		if col.Docs > 0 || (collection != "" && col.Name == canonical) {
			nav.Items = append(nav.Items, views.CollectionItem{Name: col.Name, Docs: col.Docs})
		}
	}
	if collection != "" && known && !docsHasItem(nav.Items, canonical) {
		count = 0 // exists but has never been counted here: empty
	}
	sort.Slice(nav.Items, func(i, j int) bool {
		a, b := nav.Items[i].Name, nav.Items[j].Name
		// Collections first, then the system ones (@empty, @hilo).
		if sa, sb := strings.HasPrefix(a, "@"), strings.HasPrefix(b, "@"); sa != sb {
			return sb
		}
		return strings.ToLower(a) < strings.ToLower(b)
	})
	return nav, count, canonical, known
}

func docsHasItem(items []views.CollectionItem, name string) bool {
	for _, it := range items {
		if it.Name == name {
			return true
		}
	}
	return false
}

// docsGrid reads one keyset page: by etag newest first, or by id when a
// prefix filters. One extra row tells whether there is a next page.
func docsGrid(ctx context.Context, db *storage.DB, dq docsQuery, canonical string, known bool) (views.DocsGrid, error) {
	g := views.DocsGrid{DB: db.Name(), Collection: canonical, Prefix: dq.prefix, Paged: dq.paged(), ShowCollection: dq.collection == ""}
	if !known {
		g.Unknown = true
		return g, nil
	}
	var docs []*storage.Document
	var err error
	var more bool
	var cursor string
	if dq.prefix != "" {
		docs, cursor, more, g.Partial, err = pageByIDIn(ctx, db, dq.prefix, canonical, dq.after, docsPageSize)
	} else {
		docs, err = db.PageByEtag(ctx, canonical, dq.before, docsPageSize+1, gridBodyBytes)
		if more = len(docs) > docsPageSize; more {
			docs = docs[:docsPageSize]
		}
	}
	if err != nil {
		return g, err
	}
	base := url.Values{}
	if canonical != "" {
		base.Set("collection", canonical)
	}
	if dq.prefix != "" {
		base.Set("prefix", dq.prefix)
	}
	if g.Paged {
		g.First = views.DBURLQ(db.Name(), "documents", base)
	}
	if more {
		next := url.Values{}
		for k, v := range base {
			next[k] = v
		}
		if dq.prefix != "" {
			next.Set("after", cursor)
		} else {
			next.Set("before", strconv.FormatInt(docs[len(docs)-1].Etag, 10))
		}
		g.Next = views.DBURLQ(db.Name(), "documents", next)
	}
	g.Columns, g.Rows = docsGridRows(docs)
	return g, nil
}

// pageByIDIn is keyset paging in id order over ids starting with prefix,
// optionally within one collection. The collection is filtered here while
// walking the id index, a bounded number of ids per page: asking SQLite for
// both conditions lets it pick the collection index and sort the whole
// collection. cursor is the id the next page starts after; partial says the
// budget ran out before the page filled.
func pageByIDIn(ctx context.Context, db *storage.DB, prefix, collection, after string, limit int) (docs []*storage.Document, cursor string, more, partial bool, err error) {
	if collection == "" {
		docs, err = db.PageByID(ctx, prefix, "", after, limit+1, gridBodyBytes)
		if err != nil || len(docs) <= limit {
			return docs, "", false, false, err
		}
		docs = docs[:limit]
		return docs, docs[limit-1].ID, true, false, nil
	}
	const chunk = 100
	for scanned := 0; scanned < docsScanBudget; {
		batch, err := db.PageByID(ctx, prefix, "", after, chunk, gridBodyBytes)
		if err != nil {
			return nil, "", false, false, err
		}
		for _, d := range batch {
			scanned++
			if strings.EqualFold(d.Collection, collection) {
				if len(docs) == limit {
					return docs, docs[limit-1].ID, true, false, nil
				}
				docs = append(docs, d)
			}
			after = d.ID
		}
		if len(batch) < chunk {
			return docs, "", false, false, nil
		}
	}
	return docs, after, true, true, nil
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

// docsGridRows picks the columns (the first distinct top-level fields across the
// page, in order of appearance) and renders each row's values.
func docsGridRows(docs []*storage.Document) ([]string, []views.DocRow) {
	type parsed struct {
		byName map[string]docMember
	}
	var cols []string
	seen := map[string]bool{}
	ps := make([]parsed, len(docs))
	for i, d := range docs {
		ms, _, _ := docSplitBody(d.Body, scanMembers)
		ps[i].byName = make(map[string]docMember, len(ms))
		for _, m := range ms {
			if _, dup := ps[i].byName[m.name]; !dup {
				ps[i].byName[m.name] = m
			}
			if len(cols) < gridColumns && !seen[m.name] {
				seen[m.name] = true
				cols = append(cols, m.name)
			}
		}
	}
	rows := make([]views.DocRow, len(docs))
	for i, d := range docs {
		r := views.DocRow{ID: d.ID, Collection: d.Collection, ChangeVector: d.ChangeVector, Etag: d.Etag, LastModified: d.LastModified}
		for _, col := range cols {
			v, ok := ps[i].byName[col]
			if !ok {
				r.Cells = append(r.Cells, views.DocCell{Kind: "missing"})
				continue
			}
			if v.cut {
				r.Cells = append(r.Cells, docCutCell(v.val))
				continue
			}
			r.Cells = append(r.Cells, docCell(v.val))
		}
		rows[i] = r
	}
	return cols, rows
}

// docCell shortens one value for the grid: strings as their text, everything
// else as compact JSON.
func docCell(v jsontext.Value) views.DocCell {
	var text, kind string
	switch v.Kind() {
	case '"':
		kind = "string"
		if err := json.Unmarshal(v, &text); err != nil {
			text = string(v)
		}
	case '0':
		kind, text = "number", string(v)
	case 't', 'f':
		kind, text = "bool", string(v)
	case 'n':
		kind, text = "null", "null"
	default:
		kind = "object"
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			text = string(v)
		} else {
			text = b.String()
		}
	}
	short := docShorten(text, cellRunes)
	title := ""
	if short != text {
		title = docShorten(text, titleRunes)
	}
	return views.DocCell{Text: short, Title: title, Kind: kind}
}

// docCutCell shows the start of a value the bounded read cut: the text as
// far as it goes (a string's without its opening quote), always marked
// with an ellipsis.
func docCutCell(v []byte) views.DocCell {
	kind := "object"
	switch {
	case len(v) > 0 && v[0] == '"':
		kind, v = "string", v[1:]
	case len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')):
		kind = "number"
	}
	text := strings.ToValidUTF8(string(v[:min(len(v), titleRunes*4)]), "")
	return views.DocCell{Text: docShorten(text+"…", cellRunes), Title: docShorten(text+"…", titleRunes), Kind: kind}
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
