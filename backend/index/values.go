package index

import (
	"encoding/json"
	"math"
	"strings"

	"github.com/rookerydb/rookery/backend/rql"
)

// How values are kept in a field's columns (c<n> and arr.v):
//
//	string      lower-cased TEXT (the default analyzer ignores case); the
//	            original goes to x<n> / arr.x when it differs (exact())
//	number      INTEGER when integral and in range, else REAL
//	bool        BLOB x'00' / x'01' (never equal to a string or number)
//	null        BLOB x'' (present but null: exists() is true)
//	object      BLOB x'02' (present, equal to nothing)
//	missing     SQL NULL
//
// SQLite orders NULL < numbers < TEXT < BLOB, so a range over numbers is
// bounded above by ” and a range over strings by x”.
var (
	blobNull   = []byte{}
	blobFalse  = []byte{0}
	blobTrue   = []byte{1}
	blobObject = []byte{2}
)

// encode returns the stored forms of one scalar value.
func encode(v any) (val, exact any) {
	switch x := v.(type) {
	case nil:
		return blobNull, nil
	case string:
		low := strings.ToLower(x)
		if low != x {
			return low, x
		}
		return low, nil
	case bool:
		if x {
			return blobTrue, nil
		}
		return blobFalse, nil
	case float64:
		return number(x), nil
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case float32:
		return number(float64(x)), nil
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, nil
		}
		f, _ := x.Float64()
		return number(f), nil
	}
	return blobObject, nil
}

func number(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return f
}

// paramValue normalizes a query parameter as rql's evaluator does.
func paramValue(x any) any {
	switch n := x.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case int32:
		return float64(n)
	case float32:
		return float64(n)
	case uint:
		return float64(n)
	case uint64:
		return float64(n)
	case uint32:
		return float64(n)
	case json.Number:
		f, _ := n.Float64()
		return f
	}
	return x
}

// fieldKey is how field names are matched: "[]" markers dropped, so a
// query on Tags finds the field Tags[] and the other way round.
func fieldKey(name string) string {
	return strings.ReplaceAll(name, "[]", "")
}

// splitPath turns a field name into rql path segments.
func splitPath(name string) rql.Path {
	return rql.Path{Segments: strings.Split(name, ".")}
}

// pathValues reads a path from a decoded document exactly as rql's
// evaluator does (arrays fan out).
func pathValues(p rql.Path, body map[string]any) []any {
	return p.Values(rql.Doc{Body: body})
}

// isArray tells whether a path fans out (has a [] segment).
func isArray(name string) bool { return strings.Contains(name, "[]") }

// fieldValue is one field of one entry: its values and whether it is
// multi-valued (an array).
type fieldValue struct {
	name  string
	vals  []any
	multi bool
	raw   any // the value as the map produced it (stored fields)
}

// entry is one index entry a map produced (or one reduced row).
type entry struct {
	fields []fieldValue
	stored map[string]any // nil: nothing stored
}

// entryFromObject turns a map output object (JS map, reduce result) into an
// entry: each top-level key is a field; an array value is multi-valued.
func entryFromObject(obj map[string]any, storeAll bool, stored func(string) bool) entry {
	var e entry
	for k, v := range obj {
		fv := fieldValue{name: k, raw: v}
		if arr, ok := v.([]any); ok {
			fv.multi = true
			fv.vals = flatten(arr)
		} else {
			fv.vals = []any{v}
		}
		e.fields = append(e.fields, fv)
		if storeAll || stored(k) {
			if e.stored == nil {
				e.stored = map[string]any{}
			}
			e.stored[k] = v
		}
	}
	return e
}

func flatten(arr []any) []any {
	out := make([]any, 0, len(arr))
	for _, a := range arr {
		if inner, ok := a.([]any); ok {
			out = append(out, flatten(inner)...)
		} else {
			out = append(out, a)
		}
	}
	return out
}
