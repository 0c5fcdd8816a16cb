package smuggler

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rookerydb/rookery/backend/index"
)

// dumpIndex is an item of a dump's Indexes section: {"Type", "IndexDefinition"}
// (the key is IndexDefinition, not Definition).
type dumpIndex struct {
	Type            string          `json:"Type"`
	IndexDefinition json.RawMessage `json:"IndexDefinition"`
}

// staticDef is a static index definition as RavenDB writes it.
type staticDef struct {
	Name          string                        `json:"Name"`
	Type          string                        `json:"Type,omitempty"`
	SourceType    string                        `json:"SourceType,omitempty"`
	LockMode      any                           `json:"LockMode,omitempty"`
	Priority      any                           `json:"Priority,omitempty"`
	State         any                           `json:"State,omitempty"`
	Maps          []string                      `json:"Maps"`
	Reduce        *string                       `json:"Reduce"`
	Fields        map[string]index.FieldOptions `json:"Fields"`
	Configuration map[string]string             `json:"Configuration"`
}

// autoField is a field of an auto index in its persisted form.
type autoField struct {
	Name                 string `json:"Name"`
	Indexing             string `json:"Indexing"`
	Aggregation          int    `json:"Aggregation"`
	Spatial              any    `json:"Spatial"`
	HasSuggestions       bool   `json:"HasSuggestions"`
	GroupByArrayBehavior string `json:"GroupByArrayBehavior,omitempty"`
}

// autoDef is an auto index as RavenDB persists it in a dump.
type autoDef struct {
	Name          string      `json:"Name"`
	Collections   []string    `json:"Collections"`
	LockMode      any         `json:"LockMode"`
	Priority      any         `json:"Priority"`
	MapFields     []autoField `json:"MapFields"`
	GroupByFields []autoField `json:"GroupByFields,omitempty"`
}

var lockModes = []string{"Unlock", "LockedIgnore", "LockedError"}
var priorities = []string{"Low", "Normal", "High"}

// enumName reads an enum written as a name or as its number.
func enumName(v any, names []string) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		if i := int(x); i >= 0 && i < len(names) && float64(i) == x {
			return names[i]
		}
	}
	return ""
}

func enumNumber(name string, names []string, def int) int {
	for i, n := range names {
		if strings.EqualFold(n, name) {
			return i
		}
	}
	return def
}

// exportIndex writes a definition as a dump item.
func exportIndex(d index.Definition) ([]byte, error) {
	if d.IsAuto() {
		a := autoDef{Name: d.Name, Collections: []string{d.Collection},
			LockMode: enumNumber(d.LockMode, lockModes, 0), Priority: enumNumber(d.Priority, priorities, 1)}
		for _, f := range d.Fields {
			af := autoField{Name: f.Name, Indexing: "Default"}
			switch {
			case f.Search:
				af.Indexing = "Search"
			case f.Exact:
				af.Indexing = "Exact"
			}
			switch f.Aggregation {
			case "Count":
				af.Aggregation = 1
			case "Sum":
				af.Aggregation = 2
			}
			a.MapFields = append(a.MapFields, af)
		}
		for _, g := range d.GroupBy {
			a.GroupByFields = append(a.GroupByFields, autoField{Name: g, Indexing: "Default", GroupByArrayBehavior: "ByIndividualValues"})
		}
		raw, err := json.Marshal(a)
		if err != nil {
			return nil, err
		}
		return json.Marshal(dumpIndex{Type: d.Type, IndexDefinition: raw})
	}
	s := staticDef{Name: d.Name, Type: d.Type, SourceType: "Documents", LockMode: orDefault(d.LockMode, "Unlock"),
		Priority: orDefault(d.Priority, "Normal"), Maps: d.Maps, Fields: d.FieldOptions, Configuration: d.Configuration}
	if d.Reduce != "" {
		r := d.Reduce
		s.Reduce = &r
	}
	if s.Fields == nil {
		s.Fields = map[string]index.FieldOptions{}
	}
	if s.Configuration == nil {
		s.Configuration = map[string]string{}
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return json.Marshal(dumpIndex{Type: d.Type, IndexDefinition: raw})
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// errSkipIndex is an index a dump holds that Rookery cannot run (C#/LINQ).
type errSkipIndex struct{ name, why string }

func (e *errSkipIndex) Error() string { return fmt.Sprintf("index %s skipped: %s", e.name, e.why) }

// importIndex reads a dump item into a definition.
func importIndex(raw []byte) (index.Definition, error) {
	var di dumpIndex
	if err := json.Unmarshal(raw, &di); err != nil {
		return index.Definition{}, fmt.Errorf("an index item that is not an index: %v", err)
	}
	if len(di.IndexDefinition) == 0 {
		// Some writers put the definition at the top level.
		di.IndexDefinition = raw
	}
	switch di.Type {
	case index.TypeAutoMap, index.TypeAutoMapReduce:
		var a autoDef
		if err := json.Unmarshal(di.IndexDefinition, &a); err != nil {
			return index.Definition{}, fmt.Errorf("auto index: %v", err)
		}
		if len(a.Collections) != 1 {
			return index.Definition{}, &errSkipIndex{a.Name, fmt.Sprintf("an auto index over %d collections", len(a.Collections))}
		}
		d := index.Definition{Name: a.Name, Type: di.Type, Collection: a.Collections[0],
			LockMode: enumName(a.LockMode, lockModes), Priority: enumName(a.Priority, priorities)}
		for _, f := range a.MapFields {
			af := index.AutoField{Name: f.Name}
			switch f.Indexing {
			case "Search":
				af.Search = true
			case "Exact":
				af.Exact = true
			}
			switch f.Aggregation {
			case 1:
				af.Aggregation = "Count"
			case 2:
				af.Aggregation = "Sum"
			}
			d.Fields = append(d.Fields, af)
		}
		for _, g := range a.GroupByFields {
			d.GroupBy = append(d.GroupBy, g.Name)
		}
		if d.LockMode == "Unlock" {
			d.LockMode = ""
		}
		if d.Priority == "Normal" {
			d.Priority = ""
		}
		return d, nil
	}
	var s staticDef
	if err := json.Unmarshal(di.IndexDefinition, &s); err != nil {
		return index.Definition{}, fmt.Errorf("index: %v", err)
	}
	typ := di.Type
	if typ == "" {
		typ = s.Type
	}
	switch typ {
	case index.TypeJavaScriptMap, index.TypeJavaScriptMapReduce:
	case "Map", "MapReduce":
		return index.Definition{}, &errSkipIndex{s.Name, "a C#/LINQ index; Rookery runs JavaScript indexes (map('Coll', d => ({...})))"}
	default:
		return index.Definition{}, &errSkipIndex{s.Name, fmt.Sprintf("an index of type %q", typ)}
	}
	d := index.Definition{Name: s.Name, Type: typ, Maps: s.Maps, FieldOptions: s.Fields, Configuration: s.Configuration,
		LockMode: enumName(s.LockMode, lockModes), Priority: enumName(s.Priority, priorities)}
	if s.Reduce != nil {
		d.Reduce = *s.Reduce
	}
	if len(d.FieldOptions) == 0 {
		d.FieldOptions = nil
	}
	if len(d.Configuration) == 0 {
		d.Configuration = nil
	}
	if d.LockMode == "Unlock" {
		d.LockMode = ""
	}
	if d.Priority == "Normal" {
		d.Priority = ""
	}
	return d, nil
}
