// Package document turns incoming document JSON into Rookery's stored form,
// in one pass, and writes stored documents back out without re-encoding them.
//
// Stored form: the members the client sent, in the order sent, followed by
// "@metadata" holding the client's metadata keys minus the ones the server
// owns (@id, @change-vector, @last-modified, @flags and computed values).
// Serving a document splices the server-owned keys into the end of that
// object; the rest of the bytes go out as they came in.
package document

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// EmptyCollection is the collection of a document without @collection.
const EmptyCollection = "@empty"

// Parsed is a document ready to store.
type Parsed struct {
	Body       []byte // stored form
	Collection string // from @metadata.@collection, or EmptyCollection
	// Server is what the server-owned metadata said when it was a string
	// (@id, @change-vector, @last-modified…); it is not in Body. An import
	// reads a dump's ids and change vectors from here.
	Server map[string]string
}

// serverOwned are metadata keys the server computes; incoming values are dropped.
var serverOwned = map[string]bool{
	"@id": true, "@change-vector": true, "@last-modified": true, "@flags": true,
	"@index-score": true, "@projection": true, "@counters": true, "@attachments": true,
	"@timeseries": true, "@etag": true,
}

// Error is a document that cannot be stored; the message says why.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func errf(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// Parse reads one JSON object from raw.
func Parse(raw []byte) (Parsed, error) { return ParseMax(raw, 0) }

// ParseMax is Parse with ReadMax's size limit.
func ParseMax(raw []byte, max int64) (Parsed, error) {
	if max > 0 && int64(len(raw)) > max {
		return Parsed{}, &SizeError{Size: int64(len(raw)), Max: max}
	}
	// A bytes.Buffer is read in place (no copy into the decoder's own
	// buffer), and decoders are pooled: one document costs its stored body
	// and little else.
	dec := decoders.Get().(*jsontext.Decoder)
	defer func() {
		dec.Reset(emptyBuffer)
		decoders.Put(dec)
	}()
	dec.Reset(bytes.NewBuffer(raw))
	p, err := ReadMax(dec, max)
	if err != nil {
		return p, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return Parsed{}, errf("invalid document: unexpected data after the JSON object")
	}
	return p, nil
}

var decoders = sync.Pool{New: func() any { return jsontext.NewDecoder(emptyBuffer) }}

// emptyBuffer is what a pooled decoder reads while it waits: never written.
var emptyBuffer = new(bytes.Buffer)

// SizeError is a document over the size limit: its JSON is at least Size
// bytes (reading stops at the first member past the limit).
type SizeError struct{ Size, Max int64 }

func (e *SizeError) Error() string {
	return fmt.Sprintf("the document is larger than the limit of %d bytes", e.Max)
}

// Read consumes one JSON object value from dec and returns its stored form.
// The decoder must be positioned at the start of a value.
func Read(dec *jsontext.Decoder) (Parsed, error) { return ReadMax(dec, 0) }

// ReadMax is Read with a size limit: a document whose JSON takes more than
// max bytes (no limit when max <= 0) fails with a *SizeError as soon as a
// member crosses the limit, before the rest is copied.
func ReadMax(dec *jsontext.Decoder, max int64) (Parsed, error) {
	var p Parsed
	start := dec.InputOffset()
	over := func() error {
		if n := dec.InputOffset() - start; max > 0 && n > max {
			return &SizeError{Size: n, Max: max}
		}
		return nil
	}
	if k := dec.PeekKind(); k != '{' {
		if k == jsontext.KindInvalid {
			_, err := dec.ReadToken()
			return p, invalid(err)
		}
		return p, errf("a document must be a JSON object, got %s", kindName(k))
	}
	if _, err := dec.ReadToken(); err != nil {
		return p, invalid(err)
	}
	limit := MaxDepth()
	body := make([]byte, 0, 256)
	body = append(body, '{')
	var meta []byte
	hasMeta := false
	members := 0
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue()
		if err != nil {
			return p, invalid(err)
		}
		if isName(name, "@metadata") {
			hasMeta = true
			meta, p.Collection, err = readMetadata(dec, limit, &p)
			if err != nil {
				return p, err
			}
			continue
		}
		// name is only valid until the next read: copy it first.
		if members > 0 {
			body = append(body, ',')
		}
		body = append(body, name...)
		body = append(body, ':')
		val, err := dec.ReadValue()
		if err != nil {
			return p, invalid(err)
		}
		// The document is level 1: a member may nest limit-1 more.
		if err := checkDepth(dec, val, limit-1, limit); err != nil {
			return p, err
		}
		body = append(body, val...)
		members++
		if err := over(); err != nil {
			return Parsed{}, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return p, invalid(err)
	}
	if err := over(); err != nil {
		return Parsed{}, err
	}
	if members > 0 {
		body = append(body, ',')
	}
	body = append(body, `"@metadata":{`...)
	if hasMeta {
		body = append(body, meta...)
	}
	body = append(body, '}', '}')
	if p.Collection == "" {
		p.Collection = EmptyCollection
	}
	p.Body = body
	return p, nil
}

func readMetadata(dec *jsontext.Decoder, limit int, p *Parsed) (members []byte, collection string, err error) {
	switch k := dec.PeekKind(); k {
	case '{':
	case 'n':
		if _, err := dec.ReadToken(); err != nil {
			return nil, "", invalid(err)
		}
		return nil, "", nil
	default:
		if k == jsontext.KindInvalid {
			_, err := dec.ReadToken()
			return nil, "", invalid(err)
		}
		return nil, "", errf("@metadata must be a JSON object, got %s", kindName(k))
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, "", invalid(err)
	}
	n := 0
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue()
		if err != nil {
			return nil, "", invalid(err)
		}
		// name is only valid until the next peek or read: copy it first,
		// and drop the member again if it is not kept.
		key := nameString(name)
		mark := len(members)
		if n > 0 {
			members = append(members, ',')
		}
		members = append(members, name...)
		members = append(members, ':')
		if key == "@collection" {
			if k := dec.PeekKind(); k != '"' && k != 'n' {
				if k == jsontext.KindInvalid {
					_, err := dec.ReadToken()
					return nil, "", invalid(err)
				}
				return nil, "", errf("@metadata.@collection must be a string, got %s", kindName(k))
			}
		}
		val, err := dec.ReadValue()
		if err != nil {
			return nil, "", invalid(err)
		}
		// @metadata is level 2: its members may nest limit-2 more.
		if err := checkDepth(dec, val, limit-2, limit); err != nil {
			return nil, "", err
		}
		drop := serverOwned[key]
		if key == "@collection" && !drop {
			if val[0] == 'n' {
				drop = true
			} else if collection = nameString(val); collection == "" {
				drop = true
			}
		}
		if drop {
			members = members[:mark]
			if serverOwned[key] && len(val) > 0 && val[0] == '"' {
				if p.Server == nil {
					p.Server = make(map[string]string, 3)
				}
				p.Server[key] = nameString(val)
			}
			continue
		}
		members = append(members, val...)
		n++
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, "", invalid(err)
	}
	return members, collection, nil
}

func isName(raw jsontext.Value, want string) bool {
	if len(raw) == len(want)+2 && string(raw[1:len(raw)-1]) == want {
		return true
	}
	return bytes.IndexByte(raw, '\\') >= 0 && nameString(raw) == want
}

func nameString(raw jsontext.Value) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	tok, err := jsontext.NewDecoder(bytes.NewReader(raw)).ReadToken()
	if err != nil {
		return string(raw[1 : len(raw)-1])
	}
	return tok.String()
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '{':
		return "an object"
	}
	return "invalid JSON"
}

// TimeFormat is RavenDB's wire format for date-times: 7 fractional digits, UTC.
const TimeFormat = "2006-01-02T15:04:05.0000000Z"

// FormatTime writes t in TimeFormat.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// AppendJSON writes a stored body with the server-owned metadata spliced in:
// @change-vector, @id and @last-modified, in that order, last in @metadata.
func AppendJSON(dst, stored []byte, id, changeVector string, lastModified time.Time) []byte {
	n := len(stored)
	if n < 2 || stored[n-1] != '}' || stored[n-2] != '}' {
		// Not the stored form; emit as is (never happens for engine-written bodies).
		return append(dst, stored...)
	}
	dst = append(dst, stored[:n-2]...)
	if stored[n-3] != '{' {
		dst = append(dst, ',')
	}
	dst = append(dst, `"@change-vector":`...)
	dst = strconv.AppendQuote(dst, changeVector)
	dst = append(dst, `,"@id":`...)
	dst = AppendString(dst, id)
	dst = append(dst, `,"@last-modified":"`...)
	dst = lastModified.UTC().AppendFormat(dst, TimeFormat)
	dst = append(dst, '"', '}', '}')
	return dst
}

// AppendString quotes s as a JSON string (also for callers building
// responses around stored bodies).
func AppendString(dst []byte, s string) []byte {
	v, err := jsontext.AppendQuote(dst, s)
	if err != nil {
		return strconv.AppendQuote(dst, s)
	}
	return v
}
