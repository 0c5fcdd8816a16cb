package query

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/rql"
)

// CmpXchgValue is a compare-exchange value as Options.CmpXchg reads it:
// Value is what was stored ({"Object": …, "@metadata"?}).
type CmpXchgValue struct {
	Key   string
	Index uint64
	Value json.RawMessage
}

const (
	// MaxIncludedCmpXchgValues bounds the distinct compare-exchange keys
	// one answer includes (a query, or a load of GET /docs?cmpxchg=).
	MaxIncludedCmpXchgValues = 1 << 14
	// maxCmpXchgKeyBytes: a longer string cannot be a key (the cluster's
	// keys are at most 512 bytes); such values are not looked up.
	maxCmpXchgKeyBytes = 1024
)

// CmpXchgIncludes gathers compare-exchange keys (the strings documents
// hold at the include paths) and writes them as RavenDB's
// CompareExchangeValueIncludes: key → {"Key","Index","Value"}, a missing
// key as {"Key": key, "Index": -1, "Value": null}, which the client
// records as missing (so it does not ask again). Keys are compared
// case-insensitively, as the cluster compares them. GET /docs uses it too.
type CmpXchgIncludes struct {
	keys []string
	seen map[string]bool
}

// Add notes the string values of vs (a value, or the elements of an
// array) as keys; past MaxIncludedCmpXchgValues it refuses.
func (c *CmpXchgIncludes) Add(vs ...any) error {
	for _, v := range vs {
		if arr, ok := v.([]any); ok {
			if err := c.Add(arr...); err != nil {
				return err
			}
			continue
		}
		k, ok := v.(string)
		if !ok || k == "" || len(k) > maxCmpXchgKeyBytes {
			continue
		}
		low := strings.ToLower(k)
		if c.seen[low] {
			continue
		}
		if len(c.keys) >= MaxIncludedCmpXchgValues {
			return dberr.New(dberr.BadRequest, "the answer would include more than %d compare exchange values; ask for fewer results", MaxIncludedCmpXchgValues)
		}
		if c.seen == nil {
			c.seen = map[string]bool{}
		}
		c.seen[low] = true
		c.keys = append(c.keys, k)
	}
	return nil
}

// Len is how many keys were noted.
func (c *CmpXchgIncludes) Len() int { return len(c.keys) }

// AppendJSON writes the object of the noted keys, read with get.
func (c *CmpXchgIncludes) AppendJSON(buf []byte, get func(key string) (CmpXchgValue, bool)) []byte {
	buf = append(buf, '{')
	for i, k := range c.keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		v, ok := get(k)
		if !ok {
			buf = document.AppendString(buf, k)
			buf = append(buf, `:{"Key":`...)
			buf = document.AppendString(buf, k)
			buf = append(buf, `,"Index":-1,"Value":null}`...)
			continue
		}
		buf = document.AppendString(buf, v.Key)
		buf = append(buf, `:{"Key":`...)
		buf = document.AppendString(buf, v.Key)
		buf = append(buf, `,"Index":`...)
		buf = strconv.AppendUint(buf, v.Index, 10)
		buf = append(buf, `,"Value":`...)
		if len(v.Value) == 0 {
			buf = append(buf, "null"...)
		} else {
			buf = append(buf, v.Value...)
		}
		buf = append(buf, '}')
	}
	return append(buf, '}')
}

// includeCmpXchg answers include cmpxchg(path): the values whose keys the
// page's documents hold at the paths.
func (e *exec) includeCmpXchg(bodies []map[string]any) error {
	var inc CmpXchgIncludes
	for _, b := range bodies {
		if b == nil {
			continue
		}
		for _, p := range e.q.CmpXchg {
			if err := inc.Add(p.Values(rql.Doc{Body: b})...); err != nil {
				return &InvalidQueryError{Query: e.req.Query, Err: err}
			}
		}
	}
	db := e.db.Name()
	e.res.CompareExchangeValueIncludes = inc.AppendJSON(nil, func(key string) (CmpXchgValue, bool) {
		return e.r.opts.CmpXchg(db, key)
	})
	return nil
}
