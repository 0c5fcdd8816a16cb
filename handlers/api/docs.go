package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/batch"
	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/query"
	"github.com/rookerydb/rookery/backend/storage"
)

// getDocs serves GET /databases/{db}/docs: by id(s) with includes, by id
// prefix, or the most recent documents.
func (a *API) getDocs(c echo.Context) error {
	q := c.QueryParams()
	return a.loadDocs(c, q["id"])
}

// postDocs serves the POST form the client uses when the ids are long:
// {"Ids":[...]}.
func (a *API) postDocs(c echo.Context) error {
	raw, err := readBody(c, maxLoadBody, `Invalid body: expected {"Ids":[...]}`)
	if err != nil {
		return err
	}
	ids, err := readIDs(raw)
	if err != nil {
		return err
	}
	return a.loadDocs(c, ids)
}

// maxLoadBody and maxLoadIDs bound a POST /docs body: 64 MiB, a million
// ids.
const (
	maxLoadBody = 64 << 20
	maxLoadIDs  = 1 << 20
)

// readIDs reads {"Ids":[...]} in one pass (other members are skipped),
// counting the ids as they come.
func readIDs(raw []byte) ([]string, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	bad := func(format string, args ...any) error {
		return dberr.New(dberr.BadRequest, "Invalid body: expected {\"Ids\":[...]}: at byte %d: %s", dec.InputOffset(), fmt.Sprintf(format, args...))
	}
	if tok, err := dec.ReadToken(); err != nil {
		return nil, bad("%v", err)
	} else if tok.Kind() != '{' {
		return nil, bad("not a JSON object")
	}
	var ids []string
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, bad("%v", err)
		}
		if !strings.EqualFold(name.String(), "Ids") {
			if err := dec.SkipValue(); err != nil {
				return nil, bad("%v", err)
			}
			continue
		}
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, bad("%v", err)
		}
		switch tok.Kind() {
		case 'n':
			continue
		case '[':
		default:
			return nil, bad("Ids must be an array of strings")
		}
		for dec.PeekKind() != ']' {
			if len(ids) == maxLoadIDs {
				return nil, bad("more than %d ids", maxLoadIDs)
			}
			t, err := dec.ReadToken()
			if err != nil {
				return nil, bad("%v", err)
			}
			switch t.Kind() {
			case '"':
				ids = append(ids, t.String())
			case 'n':
				ids = append(ids, "")
			default:
				return nil, bad("Ids must be an array of strings")
			}
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, bad("%v", err)
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, bad("%v", err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, bad("unexpected data after the JSON object")
	}
	return ids, nil
}

func (a *API) loadDocs(c echo.Context, idList []string) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	q := c.QueryParams()
	metadataOnly, err := boolParam(c, "metadataOnly")
	if err != nil {
		return err
	}
	var docs []*storage.Document
	byID := len(idList) > 0
	switch {
	case byID:
		for _, id := range idList {
			if len(id) > storage.MaxIDBytes*4 {
				return dberr.New(dberr.BadRequest, "Document id is too long")
			}
		}
		if docs, err = db.GetMany(ctx, idList); err != nil {
			return err
		}
		for i, d := range docs {
			if d != nil {
				continue
			}
			if conflicted, err := db.HasConflict(ctx, idList[i]); err != nil {
				return err
			} else if conflicted {
				e := dberr.New(dberr.DocumentConflict, "Conflict detected on '%s': its versions must be resolved before it can be loaded.", idList[i])
				e.DocID = idList[i]
				return e
			}
		}
		if len(idList) == 1 && docs[0] == nil {
			return c.NoContent(http.StatusNotFound)
		}
	default:
		start, pageSize, err := paging(c)
		if err != nil {
			return err
		}
		if q.Has("startsWith") {
			docs, err = startsWith(c, db, q.Get("startsWith"), start, pageSize)
		} else {
			docs, err = db.Recent(ctx, start, pageSize)
		}
		if err != nil {
			return err
		}
	}
	var included []*storage.Document
	var cmpxchg []byte
	if !metadataOnly {
		if included, cmpxchg, err = a.loadIncludes(c, db, docs, q["include"], q["cmpxchg"]); err != nil {
			return err
		}
	}
	etag := etagOf(docs, included)
	if cmpxchg != nil {
		// The values change without the documents: they are part of the answer's etag.
		etag = etagWith(etag, cmpxchg)
	}
	if notModified(c, etag) {
		return c.NoContent(http.StatusNotModified)
	}
	buf := make([]byte, 0, 256+len(docs)*512+len(cmpxchg))
	buf = append(buf, `{"Results":[`...)
	for i, d := range docs {
		if i > 0 {
			buf = append(buf, ',')
		}
		switch {
		case d == nil:
			buf = append(buf, "null"...)
		case metadataOnly:
			buf = appendMetadataOnly(buf, d)
		default:
			buf = d.AppendJSON(buf)
		}
	}
	buf = append(buf, `],"Includes":{`...)
	for i, d := range included {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = document.AppendString(buf, d.ID)
		buf = append(buf, ':')
		buf = d.AppendJSON(buf)
	}
	buf = append(buf, '}')
	if buf, err = appendCounterIncludes(ctx, db, buf, docs, q["counter"]); err != nil {
		return err
	}
	if cmpxchg != nil {
		buf = append(buf, `,"CompareExchangeValueIncludes":`...)
		buf = append(buf, cmpxchg...)
	}
	buf = append(buf, '}')
	c.Response().Header().Set("ETag", `"`+etag+`"`)
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSONCharsetUTF8, buf)
}

// paging reads start and pageSize (default 1024).
func paging(c echo.Context) (start, pageSize int, err error) { return pagingWith(c, 1024) }

// pagingWith reads start and pageSize, refusing negative or huge values.
func pagingWith(c echo.Context, defaultSize int64) (start, pageSize int, err error) {
	s, err := intParam(c, "start", 0)
	if err != nil {
		return 0, 0, err
	}
	p, err := intParam(c, "pageSize", defaultSize)
	if err != nil {
		return 0, 0, err
	}
	if s < 0 || p < 0 || s > 1<<31 || p > 1<<31 {
		return 0, 0, dberr.New(dberr.BadRequest, "start and pageSize must be between 0 and 2^31")
	}
	return int(s), int(p), nil
}

func appendMetadataOnly(buf []byte, d *storage.Document) []byte {
	full := d.AppendJSON(nil)
	var m struct {
		Meta json.RawMessage `json:"@metadata"`
	}
	if err := json.Unmarshal(full, &m); err != nil {
		return append(buf, "null"...)
	}
	buf = append(buf, `{"@metadata":`...)
	buf = append(buf, m.Meta...)
	return append(buf, '}')
}

// startsWith pages through ids with a prefix, applying the optional
// matches/exclude wildcard filters ('*', '?', alternatives split by '|') to
// the part after the prefix, and startAfter.
func startsWith(c echo.Context, db *storage.DB, prefix string, start, pageSize int) ([]*storage.Document, error) {
	ctx := c.Request().Context()
	matches, exclude, startAfter := c.QueryParam("matches"), c.QueryParam("exclude"), c.QueryParam("startAfter")
	if matches == "" && exclude == "" && startAfter == "" {
		return db.StartsWith(ctx, prefix, start, pageSize)
	}
	var out []*storage.Document
	skipped := 0
	const chunk = 1024
	lowerAfter := storage.LowerID(startAfter)
	for offset := 0; len(out) < pageSize; offset += chunk {
		page, err := db.StartsWith(ctx, prefix, offset, chunk)
		if err != nil {
			return nil, err
		}
		for _, d := range page {
			if startAfter != "" && storage.LowerID(d.ID) <= lowerAfter {
				continue
			}
			rest := strings.ToLower(d.ID[min(len(prefix), len(d.ID)):])
			if matches != "" && !wildcardAny(matches, rest) {
				continue
			}
			if exclude != "" && wildcardAny(exclude, rest) {
				continue
			}
			if skipped < start {
				skipped++
				continue
			}
			if len(out) < pageSize {
				out = append(out, d)
			}
		}
		if len(page) < chunk {
			break
		}
	}
	return out, nil
}

func wildcardAny(patterns, s string) bool {
	for _, p := range strings.Split(strings.ToLower(patterns), "|") {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}

// loadIncludes answers a load's include= paths (the documents their values
// name, nil when none) and cmpxchg= paths (the compare-exchange values their
// values name, as the object of CompareExchangeValueIncludes; nil when no
// cmpxchg= was given), parsing each loaded document's body once for both.
// An error is the one the two used to give in turn: reading the included
// documents, then a bad cmpxchg path, no cluster, or too many values.
func (a *API) loadIncludes(c echo.Context, db *storage.DB, docs []*storage.Document, incPaths, cxPaths []string) ([]*storage.Document, []byte, error) {
	var (
		cxErr error // the cmpxchg= answer's error, returned after the includes are read
		cl    *cluster.Cluster
		inc   query.CmpXchgIncludes
	)
	if len(cxPaths) > 0 {
		if cxErr = checkCmpXchgIncludePaths(cxPaths); cxErr == nil {
			cl, cxErr = a.cmpXchgCluster()
		}
	}
	walkCx := len(cxPaths) > 0 && cxErr == nil
	seen := map[string]bool{}
	var want []string
	if len(incPaths) > 0 {
		for _, d := range docs {
			if d != nil {
				seen[storage.LowerID(d.ID)] = true
			}
		}
	}
	for _, d := range docs {
		if d == nil || len(incPaths) == 0 && !walkCx {
			continue
		}
		var body any
		if err := json.Unmarshal(d.Body, &body); err != nil {
			continue
		}
		for _, p := range incPaths {
			for _, id := range valuesAt(body, strings.Split(p, ".")) {
				key := storage.LowerID(id)
				if !seen[key] {
					seen[key] = true
					want = append(want, id)
				}
			}
		}
		if walkCx {
			if cxErr = addCmpXchgKeys(&inc, body, cxPaths); cxErr != nil {
				walkCx = false
			}
		}
	}
	var included []*storage.Document
	if len(want) > 0 {
		got, err := db.GetMany(c.Request().Context(), want)
		if err != nil {
			return nil, nil, err
		}
		included = got[:0]
		for _, d := range got {
			if d != nil {
				included = append(included, d)
			}
		}
	}
	if len(cxPaths) == 0 {
		return included, nil, nil
	}
	if cxErr != nil {
		return nil, nil, cxErr
	}
	return included, cmpXchgIncludesJSON(db, cl, &inc), nil
}

// valuesAt collects the string values at a dotted path; "[]" after a name
// walks into an array ("Lines[].Product").
func valuesAt(v any, parts []string) []string {
	if len(parts) == 0 {
		switch t := v.(type) {
		case string:
			return []string{t}
		case []any:
			var out []string
			for _, e := range t {
				if s, ok := e.(string); ok {
					out = append(out, s)
				}
			}
			return out
		}
		return nil
	}
	name := strings.TrimSuffix(parts[0], "[]")
	obj, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	next := obj[name]
	if arr, ok := next.([]any); ok && len(parts) > 1 {
		var out []string
		for _, e := range arr {
			out = append(out, valuesAt(e, parts[1:])...)
		}
		return out
	}
	return valuesAt(next, parts[1:])
}

// headDoc serves HEAD /docs?id= (exists): 200 with the change vector as
// ETag, 404, or 304 when the client's vector is current.
func (a *API) headDoc(c echo.Context) error {
	db, id, err := a.dbParam(c, "id")
	if err != nil {
		return err
	}
	d, err := db.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	if d == nil {
		return c.NoContent(http.StatusNotFound)
	}
	if inm := c.Request().Header.Get("If-None-Match"); inm != "" && unquote(inm) == d.ChangeVector {
		return c.NoContent(http.StatusNotModified)
	}
	c.Response().Header().Set("ETag", `"`+d.ChangeVector+`"`)
	return c.NoContent(http.StatusOK)
}

// expectedCV reads If-Match: absent means no check, `""` means the
// document must be new (as RavenDB's clients send it), and anything else is
// the expected change vector. A header that is there but blank is refused:
// it must not silently turn the check off; one longer than a change vector
// may be is a 400 too.
func expectedCV(c echo.Context) (*string, error) {
	vals := c.Request().Header.Values("If-Match")
	if len(vals) == 0 {
		return nil, nil
	}
	h := strings.TrimSpace(vals[0])
	v := unquote(h)
	if len(vals) > 1 || h == "" || (v != "" && strings.TrimSpace(v) == "") {
		return nil, dberr.New(dberr.BadRequest, "The If-Match header is blank or repeated: give one change vector, or \"\" for a document that must not exist yet")
	}
	if err := changevector.CheckLength(v); err != nil {
		return nil, dberr.New(dberr.BadRequest, "If-Match: %v", err)
	}
	return &v, nil
}

// putDoc serves PUT /docs?id= with the same id rules as a batch.
func (a *API) putDoc(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	// The body is bounded by the server's request-body limit (web); as it
	// is the document, reading stops one byte past the document limit.
	var body io.Reader = c.Request().Body
	if max := a.MaxDocumentSize; max > 0 {
		if c.Request().ContentLength > max {
			return document.TooLarge(&document.SizeError{Size: c.Request().ContentLength, Max: max}, c.QueryParam("id"))
		}
		body = io.LimitReader(body, max+1)
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	doc, err := document.ParseMax(raw, a.MaxDocumentSize)
	if err != nil {
		return documentError(err, c.QueryParam("id"))
	}
	cv, err := expectedCV(c)
	if err != nil {
		return err
	}
	cmd := batch.Command{Type: batch.Put, ID: c.QueryParam("id"), ChangeVector: cv, Document: doc}
	res, err := batch.Execute(c.Request().Context(), db, a.idents(), []batch.Command{cmd})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusCreated, map[string]string{"Id": res[0].ID, "ChangeVector": res[0].ChangeVector})
}

// deleteDoc serves DELETE /docs?id=.
func (a *API) deleteDoc(c echo.Context) error {
	db, id, err := a.dbParam(c, "id")
	if err != nil {
		return err
	}
	cv, err := expectedCV(c)
	if err != nil {
		return err
	}
	cmd := batch.Command{Type: batch.Delete, ID: id, ChangeVector: cv}
	if _, err := batch.Execute(c.Request().Context(), db, a.idents(), []batch.Command{cmd}); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// documentError explains a document that cannot be stored: over the size
// limit (413, naming the limit and its flag) or not valid (400).
func documentError(err error, id string) error {
	var se *document.SizeError
	if errors.As(err, &se) {
		return document.TooLarge(se, id)
	}
	var de *dberr.Error
	if errors.As(err, &de) {
		return err
	}
	return dberr.New(dberr.BadRequest, "%v", err)
}

// bulkDocs serves POST /bulk_docs: the session's SaveChanges, one
// all-or-nothing transaction.
func (a *API) bulkDocs(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	// The body is bounded by the server's request-body limit (web).
	cmds, clusterWide, err := a.parseBatch(c, db) // JSON, or multipart with attachments
	defer batch.RemoveStaged(cmds)
	if err != nil {
		var se *document.SizeError
		if errors.As(err, &se) {
			return &dberr.Error{Kind: dberr.TooLarge, Err: se, Msg: err.Error() + fmt.Sprintf(", the largest document this server accepts (--max-document-size is %s). Nothing was stored.", document.FormatBytes(se.Max))}
		}
		return err
	}
	if clusterWide {
		return a.clusterBulkDocs(c, db, cmds)
	}
	res, err := batch.ExecuteWith(c.Request().Context(), db, a.idents(), cmds, batch.Options{PatchTimeLimit: a.PatchTimeLimit})
	if err != nil {
		return err
	}
	// session.advanced.waitForIndexesAfterSaveChanges: the reply waits
	// until the indexes have processed this batch.
	if err := a.waitForIndexes(c, db, db.LastEtag()); err != nil {
		return err
	}
	buf := make([]byte, 0, 64+len(res)*192)
	buf = append(buf, `{"Results":[`...)
	for i, r := range res {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendResult(buf, r)
	}
	buf = append(buf, "]}"...)
	return c.Blob(http.StatusCreated, echo.MIMEApplicationJSONCharsetUTF8, buf)
}

func appendResult(buf []byte, r batch.Result) []byte {
	switch r.Type {
	case batch.Patch:
		return appendPatchResult(buf, r)
	case batch.Counters:
		buf = appendCountersResult(buf, r)
	case batch.Put:
		buf = append(buf, `{"Type":"PUT","@id":`...)
		buf = document.AppendString(buf, r.ID)
		buf = append(buf, `,"@collection":`...)
		buf = document.AppendString(buf, r.Collection)
		buf = append(buf, `,"@change-vector":`...)
		buf = document.AppendString(buf, r.ChangeVector)
		buf = append(buf, `,"@last-modified":"`...)
		buf = r.LastModified.UTC().AppendFormat(buf, document.TimeFormat)
		buf = append(buf, `"}`...)
	case batch.AttachmentPut, batch.AttachmentDelete:
		buf = appendAttachmentResult(buf, r)
	case batch.ForceRevision:
		buf = appendForceRevisionResult(buf, r)
	case batch.TimeSeries:
		buf = append(buf, `{"Type":"TimeSeries","Id":`...)
		buf = document.AppendString(buf, r.ID)
		buf = append(buf, '}')
	default:
		buf = append(buf, `{"Id":`...)
		buf = document.AppendString(buf, r.ID)
		buf = append(buf, `,"Type":"DELETE","Deleted":`...)
		if r.Deleted {
			buf = append(buf, `true,"ChangeVector":`...)
			buf = document.AppendString(buf, r.ChangeVector)
		} else {
			buf = append(buf, `false`...)
		}
		buf = append(buf, '}')
	}
	return buf
}
