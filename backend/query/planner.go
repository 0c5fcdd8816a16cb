package query

import (
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/cespare/xxhash/v2"

	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/rql"
)

// Auto-index naming follows RavenDB (reference §1.6):
//
//	Auto/<Collection>/By<F1>And<F2>…          map: field names sorted, joined with And
//	Auto/<Collection>/By<Aggs>ReducedBy<Keys>  map-reduce: aggregated outputs (Count,
//	                                           the summed field) and the group-by keys
//	Auto/<Collection>/ById()                   map without fields
//	Auto/<Collection>ReducedBy<Keys>           map-reduce without aggregations
//
// A field with full-text search is written Search(Name), one compared
// exactly Exact(Name), both SearchAndExact… as Search(Name)AndExact(Name);
// a name that the client quotes ('First Name') keeps its quotes; @all_docs
// is AllDocs. A name over 256 characters is cut to 256, then "..." and the
// decimal XXHash64 of the whole name.
const maxAutoName = 256

// AutoIndexName is the name RavenDB gives an auto index with def's
// collection, fields and group-by keys.
func AutoIndexName(def index.Definition) string {
	coll := def.Collection
	if strings.EqualFold(coll, index.AllDocs) {
		coll = "AllDocs"
	}
	var fields []string
	for _, f := range def.Fields {
		fields = append(fields, fieldName(f))
	}
	sort.Strings(fields)
	var name string
	mapReduce := def.Type == index.TypeAutoMapReduce
	switch {
	case len(fields) > 0:
		name = "Auto/" + coll + "/By" + strings.Join(fields, "And")
	case mapReduce:
		name = "Auto/" + coll
	default:
		name = "Auto/" + coll + "/ById()"
	}
	if mapReduce {
		keys := make([]string, 0, len(def.GroupBy))
		for _, k := range def.GroupBy {
			keys = append(keys, quoteIfNeeded(k))
		}
		sort.Strings(keys)
		name += "ReducedBy" + strings.Join(keys, "And")
	}
	if len(name) > maxAutoName {
		name = name[:maxAutoName] + "..." + strconv.FormatUint(xxhash.Sum64String(name), 10)
	}
	return name
}

func fieldName(f index.AutoField) string {
	n := quoteIfNeeded(f.Name)
	switch {
	case f.Search && f.Exact:
		return "Search(" + n + ")AndExact(" + n + ")"
	case f.Search:
		return "Search(" + n + ")"
	case f.Exact:
		return "Exact(" + n + ")"
	}
	return n
}

// quoteIfNeeded quotes a field name the way a client must write it in RQL:
// when a segment does not lex as a name, or is a keyword.
func quoteIfNeeded(name string) string {
	for _, seg := range strings.Split(name, ".") {
		seg = strings.TrimSuffix(seg, "[]")
		if seg == "" || clientKeywords[strings.ToLower(seg)] {
			return "'" + name + "'"
		}
		for i, r := range seg {
			if i == 0 && !(unicode.IsLetter(r) || r == '_' || r == '@') ||
				!(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '@' || r == '-') {
				return "'" + name + "'"
			}
		}
	}
	return name
}

// clientKeywords are the field names the npm client quotes (QueryToken's
// RQL keywords).
var clientKeywords = map[string]bool{"as": true, "select": true, "where": true, "load": true, "group": true, "order": true, "include": true, "filter": true}

// need is what a dynamic query needs of an auto index.
type need struct {
	collection string
	mapReduce  bool
	groupBy    []string
	fields     map[string]*index.AutoField // by name
}

func (n *need) add(name string, search, exact bool, agg string) {
	f := n.fields[name]
	if f == nil {
		f = &index.AutoField{Name: name}
		n.fields[name] = f
	}
	f.Search = f.Search || search
	f.Exact = f.Exact || exact
	if agg != "" {
		f.Aggregation = agg
	}
}

// needs collects the fields a dynamic query filters, sorts and (grouped)
// aggregates on. id() is never a field: every index answers it.
func needs(q *rql.Query) *need {
	n := &need{collection: q.Collection, fields: map[string]*index.AutoField{}}
	if len(q.GroupBy) > 0 {
		n.mapReduce = true
		for _, g := range q.GroupBy {
			n.groupBy = append(n.groupBy, g.String())
		}
		for _, p := range q.Select {
			switch p.Func {
			case "count":
				n.add("Count", false, false, "Count")
			case "sum":
				n.add(p.Field.String(), false, false, "Sum")
			}
		}
		// A grouped query filters and sorts on its output (keys and
		// aggregations), which the reduce already has.
		return n
	}
	walkFields(q.Where, func(p rql.Path, search, exact bool) {
		if !p.ID {
			n.add(p.String(), search, exact, "")
		}
	})
	for _, o := range q.OrderBy {
		if !o.Random && !o.Score && !o.Field.ID {
			n.add(o.Field.String(), false, false, "")
		}
	}
	return n
}

// walkFields visits every field a where clause reads.
func walkFields(e rql.Expr, fn func(p rql.Path, search, exact bool)) {
	switch x := e.(type) {
	case rql.And:
		walkFields(x.L, fn)
		walkFields(x.R, fn)
	case rql.Or:
		walkFields(x.L, fn)
		walkFields(x.R, fn)
	case rql.Not:
		walkFields(x.E, fn)
	case rql.Compare:
		fn(x.Field, false, x.Exact)
	case rql.Between:
		fn(x.Field, false, false)
	case rql.In:
		fn(x.Field, false, false)
	case rql.Call:
		fn(x.Field, x.Name == "search" || x.Name == "lucene", false)
	case rql.Exists:
		fn(x.Field, false, false)
	}
}

// onlyIDs tells whether a where clause reads nothing but id() (and true):
// such a query runs over the collection without an index.
func onlyIDs(e rql.Expr) bool {
	ok := true
	walkFields(e, func(p rql.Path, search, _ bool) {
		if !p.ID || search {
			ok = false
		}
	})
	return ok
}

// definition is the auto index a need asks for, with extra fields merged in.
func (n *need) definition() index.Definition {
	def := index.Definition{Type: index.TypeAutoMap, Collection: n.collection}
	if n.mapReduce {
		def.Type = index.TypeAutoMapReduce
		def.GroupBy = append([]string(nil), n.groupBy...)
	}
	for _, f := range n.fields {
		def.Fields = append(def.Fields, *f)
	}
	sort.Slice(def.Fields, func(i, j int) bool { return def.Fields[i].Name < def.Fields[j].Name })
	def.Name = AutoIndexName(def)
	return def
}

// covers tells whether def has every field of n with the options n needs.
func (n *need) covers(def *index.Definition) bool {
	if !n.sameShape(def) {
		return false
	}
	for _, want := range n.fields {
		if !hasField(def, want) {
			return false
		}
	}
	return true
}

// sameShape: same collection, same kind, and for map-reduce the same keys.
func (n *need) sameShape(def *index.Definition) bool {
	if !def.IsAuto() || !strings.EqualFold(def.Collection, n.collection) {
		return false
	}
	if (def.Type == index.TypeAutoMapReduce) != n.mapReduce {
		return false
	}
	if n.mapReduce {
		if len(def.GroupBy) != len(n.groupBy) {
			return false
		}
		a, b := append([]string(nil), def.GroupBy...), append([]string(nil), n.groupBy...)
		sort.Strings(a)
		sort.Strings(b)
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
	}
	return true
}

func hasField(def *index.Definition, want *index.AutoField) bool {
	for _, f := range def.Fields {
		if f.Name == want.Name && (f.Search || !want.Search) && (f.Exact || !want.Exact) && f.Aggregation == want.Aggregation {
			return true
		}
	}
	return false
}

// Decision is how the planner served a dynamic query.
type Decision struct {
	// Use is the index to query (an existing one, or Create's name).
	Use string
	// Create is the definition to create; nil when an existing index
	// serves the query.
	Create *index.Definition
	// Supersedes are the existing auto indexes the new one replaces (their
	// fields are all in it): they are retired once it has caught up.
	Supersedes []string
	// Why is the studio's one-line account: "used X", "created X",
	// "extended A into X".
	Why string
}

// PlanAutoIndex picks or designs the auto index for a dynamic query among the
// database's definitions. RavenDB's rules (reference §1.7): an auto index
// with every needed field (Idle ones included) serves it; otherwise a new
// one is made with the union of the query's fields and those of every
// auto index of the same shape that shares a field with it (a partial
// match), and every auto index of that shape whose fields are all in the new
// one is superseded. Superseded indexes are not used.
func PlanAutoIndex(q *rql.Query, defs []index.Definition) Decision {
	n := needs(q)
	var best *index.Definition
	for i := range defs {
		d := &defs[i]
		if d.Superseded != "" || !n.covers(d) {
			continue
		}
		// Prefer the narrowest complete index, then the name (stable).
		if best == nil || len(d.Fields) < len(best.Fields) || len(d.Fields) == len(best.Fields) && d.Name < best.Name {
			best = d
		}
	}
	if best != nil {
		return Decision{Use: best.Name, Why: "used " + best.Name}
	}
	var extended []string
	for i := range defs {
		d := &defs[i]
		if d.Superseded != "" || !n.sameShape(d) {
			continue
		}
		shares := false
		for _, f := range d.Fields {
			if n.fields[f.Name] != nil {
				shares = true
			}
		}
		if !shares {
			continue
		}
		extended = append(extended, d.Name)
		for _, f := range d.Fields {
			n.add(f.Name, f.Search, f.Exact, f.Aggregation)
		}
	}
	def := n.definition()
	dec := Decision{Use: def.Name, Create: &def, Why: "created " + def.Name}
	for i := range defs {
		d := &defs[i]
		if d.Name != def.Name && d.Superseded == "" && d.IsAuto() && subsumes(&def, d) {
			dec.Supersedes = append(dec.Supersedes, d.Name)
		}
	}
	if len(extended) > 0 {
		dec.Why = "extended " + strings.Join(extended, ", ") + " into " + def.Name
	}
	return dec
}

// subsumes tells whether wide has every field of narrow, with the same shape.
func subsumes(wide, narrow *index.Definition) bool {
	n := &need{collection: wide.Collection, mapReduce: wide.Type == index.TypeAutoMapReduce, groupBy: wide.GroupBy}
	if !n.sameShape(narrow) {
		return false
	}
	for i := range narrow.Fields {
		if !hasField(wide, &narrow.Fields[i]) {
			return false
		}
	}
	return true
}
