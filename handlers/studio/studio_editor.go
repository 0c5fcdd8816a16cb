package studio

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/views"
)

// The document editor's server side: where a refused text's JSON error is
// (line and column), and which strings of a document are ids of other
// documents (its references).

const (
	// DefaultMaxDocReferences is how many distinct strings of a document
	// the document page checks for being ids (--max-doc-references).
	DefaultMaxDocReferences = 256
	// refIDBytes is the longest string taken for an id.
	refIDBytes = 512
)

// docSyntaxPlace finds where text stops being one JSON value: the line and
// column (both from 1, the column in characters) and the reason. ok is
// false when text is well-formed JSON. Text is at most the document size
// limit (the caller checked it); the decoder reads values without
// recursion and bounds nesting itself.
func docSyntaxPlace(text string) (line, col int, reason string, ok bool) {
	dec := jsontext.NewDecoder(strings.NewReader(text))
	var off int64
	if _, err := dec.ReadValue(); err != nil {
		var se *jsontext.SyntacticError
		if !errors.As(err, &se) {
			if errors.Is(err, io.EOF) {
				return 1, 1, "the text is empty", true
			}
			return 0, 0, "", false
		}
		off, reason = se.ByteOffset, se.Err.Error()
		if errors.Is(se.Err, io.ErrUnexpectedEOF) {
			reason = "the text ends before the JSON does"
		}
		if se.JSONPointer != "" {
			reason += " (in " + string(se.JSONPointer) + ")"
		}
	} else if _, err := dec.ReadToken(); errors.Is(err, io.EOF) {
		return 0, 0, "", false
	} else {
		off = dec.InputOffset()
		off += int64(len(text[off:]) - len(strings.TrimLeft(text[off:], " \t\r\n")))
		reason = "unexpected text after the end of the JSON value"
	}
	off = min(max(off, 0), int64(len(text)))
	before := text[:off]
	line = strings.Count(before, "\n") + 1
	col = utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
	return line, col, reason, true
}

// refCandidate is a string of a document that may be an id.
type refCandidate struct {
	value string
	path  string // JSON pointer of its first occurrence
}

// refCandidates collects the distinct strings of a stored body that could
// be document ids, in document order, at most limit of them (capped tells
// that there were more). Taken: string values (not member names) of 1 to
// 512 bytes without whitespace or control characters, other than the
// document's own id, outside @metadata.
func refCandidates(body []byte, self string, limit int) (cands []refCandidate, capped bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, false // a stored body is an object
	}
	seen := map[string]bool{storage.LowerID(self): true}
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return cands, false // the end, or a body that stops parsing: what was found so far
		}
		if tok.Kind() != '"' {
			continue
		}
		depth := dec.StackDepth()
		if k, n := dec.StackIndex(depth); k == '{' && n%2 == 1 {
			// A member name; @metadata's value is skipped whole.
			if depth == 1 && tok.String() == "@metadata" {
				if err := dec.SkipValue(); err != nil {
					return cands, false
				}
			}
			continue
		}
		v := tok.String()
		if !refShaped(v) {
			continue
		}
		key := storage.LowerID(v)
		if seen[key] {
			continue
		}
		if len(cands) == limit {
			return cands, true
		}
		seen[key] = true
		cands = append(cands, refCandidate{value: v, path: string(dec.StackPointer())})
	}
}

// refShaped tells whether a string could be taken for an id.
func refShaped(v string) bool {
	if v == "" || len(v) > refIDBytes || !utf8.ValidString(v) {
		return false
	}
	for _, r := range v {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// docRefs fills the page's references: the candidates that are ids of
// stored (or conflicted) documents, checked in one bounded lookup that
// reads no bodies. A preview (a document too large to show) has none.
func (s *Studio) docRefs(ctx context.Context, db *storage.DB, d *storage.Document, p *views.DocPage) error {
	if p.Stored == nil || p.Stored.Preview {
		return nil
	}
	limit := s.MaxDocReferences
	switch {
	case limit < 0:
		return nil // references are off (--max-doc-references -1)
	case limit == 0:
		limit = DefaultMaxDocReferences
	}
	cands, capped := refCandidates(d.Body, d.ID, limit)
	p.RefsCapped, p.RefsLimit = capped, limit
	if len(cands) == 0 {
		return nil
	}
	values := make([]string, len(cands))
	for i, c := range cands {
		values[i] = c.value
	}
	found, err := db.ExistingIDs(ctx, values)
	if err != nil {
		return err
	}
	for _, c := range cands {
		if st, ok := found[storage.LowerID(c.value)]; ok {
			p.Refs = append(p.Refs, views.DocRef{ID: st.ID, Path: c.path, Conflicted: st.Conflicted})
		}
	}
	return nil
}
