package studio

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
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

// The documents grid (/documents): the collection list with counts, and a
// keyset-paged grid of one collection (or all documents) that also lists
// the conflicted ids, each with a badge linking to its resolution. Its
// view is all in the URL (collection, prefix, page cursor, page size,
// chosen columns), so a link or the live updates show the same grid.

const (
	// maxGridColumns bounds the chosen columns (col=…) of one grid.
	maxGridColumns = 32
	// maxColumnName bounds one chosen column's name, in bytes.
	maxColumnName = 256
	// maxGotoID bounds the id a "go to id" asks for (the form's maxlength).
	maxGotoID = 512
	// chooserFields bounds the fields the column chooser offers.
	chooserFields = 64
)

// docsQuery is the documents page's query.
type docsQuery struct {
	collection string
	prefix     string
	before     int64
	after      string
	size       int      // rows per page, one of views.DocsPageSizes
	cols       []string // chosen columns; nil for the automatic choice
	highlight  string   // the id a "go to id" jumped to
}

func parseDocsQuery(q url.Values) (docsQuery, error) {
	dq := docsQuery{collection: q.Get("collection"), prefix: q.Get("prefix"), after: q.Get("after"), size: docsPageSize, highlight: q.Get("hl")}
	if b := q.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return dq, dberr.New(dberr.BadRequest, "The page cursor %q is not a valid etag.", b)
		}
		dq.before = n
	}
	if s := q.Get("size"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || !slices.Contains(views.DocsPageSizes, n) {
			return dq, dberr.New(dberr.BadRequest, "The page size %q is not one of %s.", docShorten(s, 40), views.PageSizesText())
		}
		dq.size = n
	}
	seen := map[string]bool{}
	for _, c := range q["col"] {
		c = strings.TrimSpace(c)
		if c == "" || seen[c] {
			continue
		}
		if len(c) > maxColumnName {
			return dq, dberr.New(dberr.BadRequest, "A column name is at most %d bytes; %q… is %d.", maxColumnName, docShorten(c, 40), len(c))
		}
		if !utf8.ValidString(c) {
			return dq, dberr.New(dberr.BadRequest, "A column name must be valid UTF-8.")
		}
		seen[c] = true
		dq.cols = append(dq.cols, c)
		if len(dq.cols) > maxGridColumns {
			return dq, dberr.New(dberr.BadRequest, "A grid shows at most %d chosen columns.", maxGridColumns)
		}
	}
	if len(dq.highlight) > maxGotoID {
		dq.highlight = ""
	}
	return dq, nil
}

func (dq docsQuery) paged() bool { return dq.before > 0 || dq.after != "" }

// view is the query of this grid's first page: what every link of the grid
// (pager, page sizes, collections) keeps.
func (dq docsQuery) view(collection string) url.Values {
	v := url.Values{}
	if collection != "" {
		v.Set("collection", collection)
	}
	if dq.prefix != "" {
		v.Set("prefix", dq.prefix)
	}
	if dq.size != docsPageSize {
		v.Set("size", strconv.Itoa(dq.size))
	}
	if len(dq.cols) > 0 {
		v["col"] = slices.Clone(dq.cols)
	}
	return v
}

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
	ctx := c.Request().Context()
	if id := strings.TrimSpace(c.QueryParam("goto")); id != "" {
		return s.gotoDocument(c, db, dq, id)
	}
	nav, count, canonical, known, err := docsNav(ctx, db, dq)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	grid, err := docsGrid(ctx, db, dq, canonical, known)
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

// gotoDocument answers "go to id": a redirect to the grid page whose first
// row is that id (a document or a conflicted id), highlighted, in the
// collection being viewed or, when the id is in another one, in its own;
// back to the view with a message when no such id exists.
func (s *Studio) gotoDocument(c echo.Context, db *storage.DB, dq docsQuery, id string) error {
	if len(id) > maxGotoID {
		return s.studioError(c, db.Name(), dberr.New(dberr.BadRequest, "An id is at most %d bytes; this one is %d.", maxGotoID, len(id)))
	}
	ctx := c.Request().Context()
	var etag int64
	var collection, found string
	d, err := db.GetPrefix(ctx, id, 1)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	if d != nil {
		etag, collection, found = d.Etag, d.Collection, d.ID
	} else {
		list, _, err := db.ConflictList(ctx, storage.ConflictFilter{IDs: []string{id}}, 1)
		if err != nil {
			return s.studioError(c, db.Name(), err)
		}
		if len(list) == 1 {
			etag, collection, found = list[0].LargestEtag, list[0].Collection, list[0].ID
		}
	}
	if found == "" {
		back := dq.view(dq.collection)
		back.Set("error", "No document has the id "+strconv.Quote(id)+" in this database.")
		return c.Redirect(http.StatusSeeOther, string(views.DBURLQ(db.Name(), "documents", back)))
	}
	view := dq.view("")
	view.Del("prefix") // the page holding the id, in etag order
	if dq.collection != "" {
		view.Set("collection", collection)
	}
	view.Set("before", strconv.FormatInt(etag+1, 10))
	view.Set("hl", found)
	return c.Redirect(http.StatusSeeOther, string(views.DBURLQ(db.Name(), "documents", view))+"#doc-current")
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
	nav, count, canonical, known, err := docsNav(ctx, db, dq)
	if err != nil {
		return nil, err
	}
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

// docsNav builds the collection list from the counters and the conflicted
// ids per collection: a collection's count is its documents plus its
// conflicted ids (a conflicted id has no document row, only versions), and
// a collection whose documents are all conflicted stays listed. It returns
// the count of the chosen view, the collection's canonical name and whether
// it exists ("" = all documents always exists).
func docsNav(ctx context.Context, db *storage.DB, dq docsQuery) (views.DocsNav, views.DocsCount, string, bool, error) {
	collection := dq.collection
	st := db.Stats()
	conf, err := db.ConflictsPerCollection(ctx)
	if err != nil {
		return views.DocsNav{}, views.DocsCount{}, "", false, err
	}
	nav := views.DocsNav{DB: db.Name(), All: collection == "", Keep: dq.view("")}
	nav.Keep.Del("collection")
	nav.Keep.Del("prefix")
	canonical, known := collection, true
	if collection != "" {
		canonical, known = db.CanonicalCollection(collection)
		if !known {
			if c, ok := conf[strings.ToLower(collection)]; ok {
				canonical, known = c.Name, true
			} else {
				canonical = collection
			}
		}
		nav.Active = canonical
	}
	items := map[string]*views.CollectionItem{}
	for _, col := range st.Collections {
		items[strings.ToLower(col.Name)] = &views.CollectionItem{Name: col.Name, Docs: col.Docs}
	}
	var all views.DocsCount
	all.Docs = st.Documents
	for key, c := range conf {
		it := items[key]
		if it == nil {
			it = &views.CollectionItem{Name: c.Name}
			items[key] = it
		}
		it.Conflicted = c.IDs
		all.Conflicted += c.IDs
	}
	nav.Total = all
	count := all
	if collection != "" {
		count = views.DocsCount{}
	}
	for key, it := range items {
		if collection != "" && key == strings.ToLower(canonical) {
			count = views.DocsCount{Docs: it.Docs, Conflicted: it.Conflicted}
		}
		if it.Docs+it.Conflicted > 0 || (collection != "" && key == strings.ToLower(canonical)) {
			nav.Items = append(nav.Items, *it)
		}
	}
	sort.Slice(nav.Items, func(i, j int) bool {
		a, b := nav.Items[i].Name, nav.Items[j].Name
		// Collections first, then the system ones (@empty, @hilo).
		if sa, sb := strings.HasPrefix(a, "@"), strings.HasPrefix(b, "@"); sa != sb {
			return sb
		}
		return strings.ToLower(a) < strings.ToLower(b)
	})
	return nav, count, canonical, known, nil
}

// gridItem is one row of the grid: a document or a conflicted id.
type gridItem struct {
	doc  *storage.Document
	conf *storage.ConflictSummary
}

func (it gridItem) etag() int64 {
	if it.doc != nil {
		return it.doc.Etag
	}
	return it.conf.LargestEtag
}

func (it gridItem) id() string {
	if it.doc != nil {
		return it.doc.ID
	}
	return it.conf.ID
}

// docsGrid reads one keyset page: by etag newest first, or by id when a
// prefix filters. Documents and conflicted ids are read separately, each
// one row past the page, and merged in the page's order, so one cursor
// pages through both.
func docsGrid(ctx context.Context, db *storage.DB, dq docsQuery, canonical string, known bool) (views.DocsGrid, error) {
	g := views.DocsGrid{DB: db.Name(), Collection: canonical, Prefix: dq.prefix, Paged: dq.paged(), ShowCollection: dq.collection == "",
		Size: dq.size, Chosen: len(dq.cols) > 0, Highlight: dq.highlight}
	if !known {
		g.Unknown = true
		return g, nil
	}
	var items []gridItem
	var more bool
	var cursor string
	if dq.prefix != "" {
		docs, dcursor, dmore, partial, err := pageByIDIn(ctx, db, dq.prefix, canonical, dq.after, dq.size)
		if err != nil {
			return g, err
		}
		confs, _, err := db.ConflictList(ctx, storage.ConflictFilter{Collection: canonical, Prefix: dq.prefix, AfterKey: storage.LowerID(dq.after)}, dq.size+1)
		if err != nil {
			return g, err
		}
		items, cursor, more, g.Partial = mergeByID(docs, dcursor, dmore, partial, confs, dq.size)
	} else {
		docs, err := db.PageByEtag(ctx, canonical, dq.before, dq.size+1, gridBodyBytes)
		if err != nil {
			return g, err
		}
		confs, err := db.ConflictPageByEtag(ctx, canonical, dq.before, dq.size+1)
		if err != nil {
			return g, err
		}
		items = mergeByEtag(docs, confs)
		if more = len(items) > dq.size; more {
			items = items[:dq.size]
		}
	}
	base := dq.view(canonical)
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
			next.Set("before", strconv.FormatInt(items[len(items)-1].etag(), 10))
		}
		g.Next = views.DBURLQ(db.Name(), "documents", next)
	}
	g.Columns, g.Fields, g.Rows = docsGridRows(db.Name(), items, dq.cols)
	return g, nil
}

// mergeByEtag merges documents and conflicted ids, both newest first, into
// one list newest first (etags are unique across both).
func mergeByEtag(docs []*storage.Document, confs []storage.ConflictSummary) []gridItem {
	out := make([]gridItem, 0, len(docs)+len(confs))
	i, j := 0, 0
	for i < len(docs) || j < len(confs) {
		if j == len(confs) || (i < len(docs) && docs[i].Etag > confs[j].LargestEtag) {
			out = append(out, gridItem{doc: docs[i]})
			i++
		} else {
			out = append(out, gridItem{conf: &confs[j]})
			j++
		}
	}
	return out
}

// mergeByID merges a page of documents in id order (with its own cursor,
// whether it has more and whether it stopped early) with conflicted ids in
// id order (read one past the page). While the documents have more, only
// the conflicted ids up to where the documents stopped may join this page:
// the others come with the pages after it.
func mergeByID(docs []*storage.Document, dcursor string, dmore, partial bool, confs []storage.ConflictSummary, limit int) (items []gridItem, cursor string, more, part bool) {
	bound := ""
	if dmore {
		bound = storage.LowerID(dcursor)
	}
	i, j := 0, 0
	for i < len(docs) || j < len(confs) {
		if j < len(confs) && bound != "" && storage.LowerID(confs[j].ID) > bound {
			confs = confs[:j] // past where the documents stopped
			continue
		}
		if j == len(confs) || (i < len(docs) && storage.LowerID(docs[i].ID) < storage.LowerID(confs[j].ID)) {
			items = append(items, gridItem{doc: docs[i]})
			i++
		} else {
			items = append(items, gridItem{conf: &confs[j]})
			j++
		}
	}
	if len(items) > limit {
		items = items[:limit]
		return items, items[limit-1].id(), true, false
	}
	if dmore {
		return items, dcursor, true, partial
	}
	return items, "", false, false
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

// docsGridRows picks the columns and renders each row's values. The columns
// are the chosen ones, or else the first gridColumns distinct top-level
// fields across the page, in order of appearance. fields is what the
// column chooser offers: the columns, then the other fields seen on the
// page (at most chooserFields).
func docsGridRows(db string, items []gridItem, chosen []string) (cols, fields []string, rows []views.DocRow) {
	limit := scanMembers
	if len(chosen) > 0 {
		limit = 0 // a chosen field may be anywhere in the part read
		cols = chosen
	}
	seen := map[string]bool{}
	for _, c := range cols {
		seen[c] = true
	}
	fields = slices.Clone(cols)
	byName := make([]map[string]docMember, len(items))
	for i, it := range items {
		if it.doc == nil {
			continue
		}
		ms, _, _ := docSplitBody(it.doc.Body, limit)
		byName[i] = make(map[string]docMember, len(ms))
		for _, m := range ms {
			if _, dup := byName[i][m.name]; !dup {
				byName[i][m.name] = m
			}
			if seen[m.name] {
				continue
			}
			if len(chosen) == 0 && len(cols) < gridColumns {
				cols = append(cols, m.name)
				fields = append(fields, m.name)
				seen[m.name] = true
			} else if len(fields) < chooserFields {
				fields = append(fields, m.name)
				seen[m.name] = true
			}
		}
	}
	rows = make([]views.DocRow, len(items))
	for i, it := range items {
		if it.conf != nil {
			c := it.conf
			rows[i] = views.DocRow{ID: c.ID, Collection: c.Collection, Etag: c.LargestEtag, LastModified: c.LastModified,
				Conflict: true, Versions: c.Versions, ConflictURL: views.ConflictDocURL(db, c.ID)}
			for range cols {
				rows[i].Cells = append(rows[i].Cells, views.DocCell{Kind: "conflict"})
			}
			continue
		}
		d := it.doc
		r := views.DocRow{ID: d.ID, Collection: d.Collection, ChangeVector: d.ChangeVector, Etag: d.Etag, LastModified: d.LastModified}
		for _, col := range cols {
			v, ok := byName[i][col]
			switch {
			case !ok:
				r.Cells = append(r.Cells, views.DocCell{Kind: "missing"})
			case v.cut:
				r.Cells = append(r.Cells, docCutCell(v.val))
			default:
				r.Cells = append(r.Cells, docCell(v.val))
			}
		}
		rows[i] = r
	}
	return cols, fields, rows
}

// docCell shortens one value for the grid: strings as their text, numbers,
// booleans and null as written, objects and arrays summarised ({3 fields},
// [5 items]) with their compact JSON as the tooltip.
func docCell(v jsontext.Value) views.DocCell {
	var text, kind, title string
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
		if v.Kind() == '[' {
			kind = "array"
		}
		text = docSummary(v)
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			title = docShorten(string(v), titleRunes)
		} else {
			title = docShorten(b.String(), titleRunes)
		}
		return views.DocCell{Text: text, Title: title, Kind: kind}
	}
	return views.DocCell{Text: docShorten(text, cellRunes), Title: docShorten(text, titleRunes), Kind: kind}
}

// docSummary says how many members an object or array has: "{3 fields}",
// "[1 item]", "{}" and "[]" when empty.
func docSummary(v jsontext.Value) string {
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	open, err := dec.ReadToken()
	if err != nil {
		return "…"
	}
	n := 0
	for dec.PeekKind() != '}' && dec.PeekKind() != ']' && dec.PeekKind() != 0 {
		if open.Kind() == '{' {
			if _, err := dec.ReadToken(); err != nil { // the name
				break
			}
		}
		if err := dec.SkipValue(); err != nil {
			break
		}
		n++
	}
	if open.Kind() == '[' {
		switch n {
		case 0:
			return "[]"
		case 1:
			return "[1 item]"
		}
		return "[" + strconv.Itoa(n) + " items]"
	}
	switch n {
	case 0:
		return "{}"
	case 1:
		return "{1 field}"
	}
	return "{" + strconv.Itoa(n) + " fields}"
}

// docCutCell shows the start of a value the bounded read cut: a string's
// text as far as it goes, a number's digits, an object or array as {…} or
// […] (its members cannot be counted), always marked as cut, with the
// start of its text as the tooltip.
func docCutCell(v []byte) views.DocCell {
	kind := "object"
	switch {
	case len(v) > 0 && v[0] == '"':
		kind, v = "string", v[1:]
	case len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')):
		kind = "number"
	case len(v) > 0 && v[0] == '[':
		kind = "array"
	}
	text := strings.ToValidUTF8(string(v[:min(len(v), titleRunes*4)]), "")
	title := docShorten(text+"…", titleRunes)
	switch kind {
	case "object":
		return views.DocCell{Text: "{…}", Title: title, Kind: kind}
	case "array":
		return views.DocCell{Text: "[…]", Title: title, Kind: kind}
	}
	return views.DocCell{Text: docShorten(text+"…", cellRunes), Title: title, Kind: kind}
}
