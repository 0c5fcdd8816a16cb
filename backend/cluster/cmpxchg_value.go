package cluster

import (
	"bytes"
	"encoding/json"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
)

// DefaultMaxCmpXchgValueSize is --max-cmpxchg-value-size's default.
const DefaultMaxCmpXchgValueSize = 1 << 20

// MaxCmpXchgValue is the value limit in force for a configured one (0: the
// default); values travel in log entries of at most 4 MiB, so it is at
// most 3 MiB.
func MaxCmpXchgValue(configured int64) int64 {
	if configured <= 0 {
		return DefaultMaxCmpXchgValueSize
	}
	return min(configured, 3<<20)
}

// CheckCmpXchgValue checks a compare-exchange value's JSON: an object of at
// most limit bytes, nested no deeper than the document limit.
func CheckCmpXchgValue(b []byte, limit int64) error {
	if int64(len(b)) > limit {
		return dberr.New(dberr.TooLarge, "the compare exchange value is %d bytes; at most %d (--max-cmpxchg-value-size)", len(b), limit)
	}
	if d := jsonDepth(b); d > document.MaxDepth() {
		return dberr.New(dberr.BadRequest, "the compare exchange value nests deeper than %d levels", document.MaxDepth())
	}
	if _, err := document.Parse(b); err != nil {
		return dberr.New(dberr.BadRequest, "the compare exchange value must be a JSON object: %v", err)
	}
	return nil
}

// jsonDepth is the deepest nesting of brackets in b (outside strings).
func jsonDepth(b []byte) int {
	depth, deepest, inStr, esc := 0, 0, false, false
	for _, ch := range b {
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case ch == '\\':
				esc = true
			case ch == '"':
				inStr = false
			}
		case ch == '"':
			inStr = true
		case ch == '{' || ch == '[':
			depth++
			deepest = max(deepest, depth)
		case ch == '}' || ch == ']':
			depth--
		}
	}
	return deepest
}

// marshalExact encodes log commands and snapshots without HTML escaping, so
// the JSON values they carry (compare-exchange values, documents) keep
// their bytes: "<" stays "<", not "\u003c".
func marshalExact(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
