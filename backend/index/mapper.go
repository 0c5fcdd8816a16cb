package index

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/rookerydb/rookery/backend/rql"
)

// docIn is one document handed to a mapper.
type docIn struct {
	key, id, coll string
	etag          int64
	cv, lm        string
	body          []byte
}

// mapper turns documents into entries (map indexes) or map outputs
// (map-reduce), and map-reduce groups into rows.
type mapper interface {
	// sources are the collections read: AllDocs alone when any map reads
	// every collection.
	sources() []string
	// mapDoc maps one document: entries for a map index, outputs for a
	// map-reduce index.
	mapDoc(d *docIn) (entries []entry, outputs []map[string]any, err error)
	reduces() bool
	// groupKey is an output's group.
	groupKey(out map[string]any) (any, error)
	// reduce folds one group's outputs (JSON) into its row.
	reduce(key any, vals []string) (map[string]any, error)
	// initialFields are the fields known before any document (auto).
	initialFields() []AutoField
}

// autoMapper serves TypeAutoMap and TypeAutoMapReduce.
type autoMapper struct {
	def      *Definition
	paths    []rql.Path // per def.Fields (map) or per GroupBy (reduce)
	aggs     []AutoField
	aggP     []rql.Path
	isReduce bool
}

func newAutoMapper(d *Definition) (*autoMapper, error) {
	m := &autoMapper{def: d, isReduce: d.Type == TypeAutoMapReduce}
	if strings.TrimSpace(d.Collection) == "" {
		return nil, defErr("Invalid", "auto index '%s' has no collection", d.Name)
	}
	if m.isReduce {
		if len(d.GroupBy) == 0 {
			return nil, defErr("Invalid", "auto map-reduce index '%s' has no group-by fields", d.Name)
		}
		for _, g := range d.GroupBy {
			m.paths = append(m.paths, splitPath(g))
		}
		for _, f := range d.Fields {
			switch f.Aggregation {
			case "Count", "Sum":
				m.aggs = append(m.aggs, f)
				m.aggP = append(m.aggP, splitPath(f.Name))
			case "":
			default:
				return nil, defErr("Invalid", "auto map-reduce field '%s' has aggregation '%s': Count or Sum", f.Name, f.Aggregation)
			}
		}
		return m, nil
	}
	if len(d.Fields) == 0 {
		return nil, defErr("Invalid", "auto index '%s' has no fields", d.Name)
	}
	for _, f := range d.Fields {
		if f.Name == "" {
			return nil, defErr("Invalid", "auto index '%s' has a field without a name", d.Name)
		}
		m.paths = append(m.paths, splitPath(f.Name))
	}
	return m, nil
}

func (m *autoMapper) sources() []string { return []string{m.def.Collection} }
func (m *autoMapper) reduces() bool     { return m.isReduce }

func (m *autoMapper) initialFields() []AutoField {
	if !m.isReduce {
		return m.def.Fields
	}
	var out []AutoField
	for _, g := range m.def.GroupBy {
		out = append(out, AutoField{Name: g})
	}
	for _, f := range m.aggs {
		out = append(out, AutoField{Name: f.Name})
	}
	return out
}

func decodeBody(b []byte) (map[string]any, error) {
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, fmt.Errorf("the document is not a JSON object: %v", err)
	}
	return body, nil
}

func (m *autoMapper) mapDoc(d *docIn) ([]entry, []map[string]any, error) {
	body, err := decodeBody(d.body)
	if err != nil {
		return nil, nil, err
	}
	if m.isReduce {
		out := map[string]any{}
		for i, p := range m.paths {
			vals := pathValues(p, body)
			if len(vals) > 0 {
				out[m.def.GroupBy[i]] = vals[0]
			} else {
				out[m.def.GroupBy[i]] = nil
			}
		}
		for i, f := range m.aggs {
			if f.Aggregation == "Count" {
				out[f.Name] = 1.0
				continue
			}
			sum := 0.0
			for _, v := range pathValues(m.aggP[i], body) {
				if n, ok := v.(float64); ok {
					sum += n
				}
			}
			out[f.Name] = sum
		}
		return nil, []map[string]any{out}, nil
	}
	e := entry{fields: make([]fieldValue, len(m.paths))}
	for i, p := range m.paths {
		vals := pathValues(p, body)
		e.fields[i] = fieldValue{name: m.def.Fields[i].Name, vals: vals, multi: len(vals) > 1}
	}
	return []entry{e}, nil, nil
}

func (m *autoMapper) groupKey(out map[string]any) (any, error) {
	key := make([]any, len(m.def.GroupBy))
	for i, g := range m.def.GroupBy {
		key[i] = out[g]
	}
	return key, nil
}

func (m *autoMapper) reduce(key any, vals []string) (map[string]any, error) {
	row := map[string]any{}
	if k, ok := key.([]any); ok {
		for i, g := range m.def.GroupBy {
			if i < len(k) {
				row[g] = k[i]
			}
		}
	}
	sums := make([]float64, len(m.aggs))
	for _, v := range vals {
		var o map[string]any
		if err := json.Unmarshal([]byte(v), &o); err != nil {
			return nil, err
		}
		for i, f := range m.aggs {
			if n, ok := o[f.Name].(float64); ok {
				sums[i] += n
			}
		}
	}
	for i, f := range m.aggs {
		row[f.Name] = sums[i]
	}
	return row, nil
}

// jsMapper serves TypeJavaScriptMap and TypeJavaScriptMapReduce.
type jsMapper struct {
	def      *Definition
	js       *jsEngine
	srcs     []string
	storeAll bool
}

func newJSMapper(d *Definition, e *jsEngine) *jsMapper {
	m := &jsMapper{def: d, js: e}
	seen := map[string]bool{}
	for _, mp := range e.maps {
		if mp.coll == AllDocs {
			m.srcs = []string{AllDocs}
			break
		}
		if k := strings.ToLower(mp.coll); !seen[k] {
			seen[k] = true
			m.srcs = append(m.srcs, mp.coll)
		}
	}
	sort.Strings(m.srcs)
	if o, ok := d.FieldOptions["__all_fields"]; ok && o.Storage == "Yes" {
		m.storeAll = true
	}
	return m
}

func (m *jsMapper) sources() []string          { return m.srcs }
func (m *jsMapper) reduces() bool              { return m.js.keyFn != nil }
func (m *jsMapper) initialFields() []AutoField { return nil }

func (m *jsMapper) stored(name string) bool {
	o, ok := m.def.FieldOptions[name]
	return ok && o.Storage == "Yes"
}

func (m *jsMapper) mapDoc(d *docIn) ([]entry, []map[string]any, error) {
	objs, err := m.js.mapDoc(d)
	if err != nil {
		return nil, nil, err
	}
	if m.reduces() {
		return nil, objs, nil
	}
	entries := make([]entry, 0, len(objs))
	for _, o := range objs {
		entries = append(entries, entryFromObject(o, m.storeAll, m.stored))
	}
	return entries, nil, nil
}

func (m *jsMapper) groupKey(out map[string]any) (any, error) { return m.js.groupKey(out) }

func (m *jsMapper) reduce(key any, vals []string) (map[string]any, error) {
	return m.js.reduce(key, vals)
}
