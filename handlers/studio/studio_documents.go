package studio

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"

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
