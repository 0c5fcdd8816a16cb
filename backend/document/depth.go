package document

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/go-json-experiment/json/jsontext"
)

// DefaultMaxDepth bounds the nesting of a document: the document object is
// level 1, a member that is an object or array level 2, and so on. Real
// documents nest a few levels, rarely more than tens; 512 leaves room for
// tree-shaped data while keeping every later decoder (encoding/json into
// any, goja's JSON.parse in conflict scripts, the studio's rendering) far
// from deep recursion.
const DefaultMaxDepth = 512

// HardMaxDepth is the ceiling of the limit: the JSON decoders underneath
// (jsontext and encoding/json) stop at 10,000 levels themselves.
const HardMaxDepth = 10000

var maxDepth atomic.Int64

// MinMaxDepth is the lowest limit accepted: the npm client's documents
// carry "@metadata":{"@nested-object-types":{}}, three levels.
const MinMaxDepth = 3

// SetMaxDepth sets the nesting limit of every later Parse and Read (the
// server sets it once at start from its flags); 0 means DefaultMaxDepth.
func SetMaxDepth(n int) error {
	if n != 0 && (n < MinMaxDepth || n > HardMaxDepth) {
		return fmt.Errorf("the JSON depth limit must be between %d and %d, not %d", MinMaxDepth, HardMaxDepth, n)
	}
	maxDepth.Store(int64(n))
	return nil
}

// MaxDepth returns the nesting limit in force.
func MaxDepth() int {
	if n := maxDepth.Load(); n > 0 {
		return int(n)
	}
	return DefaultMaxDepth
}

// tooDeep is the error of a value nested past the limit; offset is the
// byte offset of the bracket that opens the first level too many.
func tooDeep(offset int64, limit int) error {
	return errf("invalid document JSON: nested deeper than %d levels at byte %d (the limit is set by --max-json-depth)", limit, offset)
}

// TooDeep reports whether err is jsontext's own depth error (past
// HardMaxDepth) and, if so, returns the error Rookery answers for it,
// positioned and naming the limit; otherwise nil.
func TooDeep(err error) error {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) && se.Err != nil && strings.Contains(se.Err.Error(), "exceeded max depth") {
		return tooDeep(se.ByteOffset, MaxDepth())
	}
	return nil
}

// invalid describes a decoding error: a depth error as tooDeep, any other
// as invalid JSON.
func invalid(err error) error {
	if d := TooDeep(err); d != nil {
		return d
	}
	return errf("invalid document JSON: %v", err)
}

// checkDepth refuses val, a complete JSON value just read from dec, when it
// nests more than allowed levels (a scalar is 0, [] is 1). A value shorter
// than 2*(allowed+1) bytes cannot, so most values cost one comparison.
func checkDepth(dec *jsontext.Decoder, val jsontext.Value, allowed, limit int) error {
	if len(val) < 2*(allowed+1) {
		return nil
	}
	if at := deeperThan(val, allowed); at >= 0 {
		return tooDeep(dec.InputOffset()-int64(len(val))+int64(at), limit)
	}
	return nil
}

// CheckDepth refuses a stored or incoming body (one JSON object) that nests
// past the limit in force, for bodies that do not come through Parse or
// Read (replication).
func CheckDepth(body []byte) error {
	limit := MaxDepth()
	if len(body) < 2*(limit+1) {
		return nil
	}
	if at := deeperThan(body, limit); at >= 0 {
		return tooDeep(int64(at), limit)
	}
	return nil
}

// special marks the bytes deeperThan stops at.
var special = [256]bool{'"': true, '[': true, '{': true, ']': true, '}': true}

// deeperThan returns the offset of the first '[' or '{' of v, valid JSON,
// that opens level allowed+1, or -1. A string's end is looked for with a
// plain loop over its first bytes (most strings are short) and then with
// IndexByte.
func deeperThan(v []byte, allowed int) int {
	depth := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !special[c] {
			continue
		}
		switch c {
		case '"':
			i++
			for {
				j, end := i, min(i+16, len(v))
				for j < end && v[j] != '"' {
					j++
				}
				if j == end {
					k := bytes.IndexByte(v[end:], '"')
					if k < 0 {
						return -1 // not valid JSON; the decoder has said so
					}
					j = end + k
				}
				i = j
				if v[i-1] != '\\' {
					break
				}
				n := 1
				for k := i - 2; k >= 0 && v[k] == '\\'; k-- {
					n++
				}
				if n%2 == 0 {
					break
				}
				i++
			}
		case '[', '{':
			depth++
			if depth > allowed {
				return i
			}
		default:
			depth--
		}
	}
	return -1
}
