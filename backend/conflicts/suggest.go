package conflicts

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

// Suggest builds a merged starting point for a person resolving by hand:
// top-level fields on which every surviving version agrees keep their
// value; for the others it takes the latest version's value and names the
// field in conflicting. The result is a JSON object with @metadata (the
// collection only) last; nil when every version is a deletion.
//
// Fields keep the order of the versions: the latest version's order first,
// then fields only other versions have, in the order they appear there
// (never sorted, so the merge reads like the documents it came from).
func Suggest(versions []storage.Version) (body []byte, conflicting []string) {
	var live []storage.Version
	for _, v := range versions {
		if !v.Tombstone {
			live = append(live, v)
		}
	}
	if len(live) == 0 {
		return nil, nil
	}
	bi := latest(live, all(len(live)))
	base := live[bi]
	objs := make([]orderedObject, len(live))
	for i, v := range live {
		objs[i] = readOrdered(v.Body)
	}
	// The field order: the latest version's, then the others' new fields.
	var order []string
	placed := map[string]bool{"@metadata": true}
	for _, o := range append([]orderedObject{objs[bi]}, objs...) {
		for _, k := range o.names {
			if !placed[k] {
				placed[k] = true
				order = append(order, k)
			}
		}
	}
	baseObj := objs[bi]
	var out bytes.Buffer
	out.WriteByte('{')
	n := 0
	add := func(k string, v []byte) {
		if n > 0 {
			out.WriteByte(',')
		}
		name, _ := json.Marshal(k)
		out.Write(name)
		out.WriteByte(':')
		out.Write(v)
		n++
	}
	for _, k := range order {
		var first json.RawMessage
		same, seen := true, false
		for _, o := range objs {
			v, ok := o.values[k]
			if !ok {
				same = false
				continue
			}
			if !seen {
				first, seen = v, true
			} else if !document.JSONEqual(first, v) {
				same = false
			}
		}
		if same {
			add(k, first)
			continue
		}
		conflicting = append(conflicting, k)
		if v, ok := baseObj.values[k]; ok {
			add(k, v)
		}
	}
	md, _ := json.Marshal(map[string]string{"@collection": base.Collection})
	add("@metadata", md)
	out.WriteByte('}')
	sort.Strings(conflicting)
	var indented bytes.Buffer
	if err := json.Indent(&indented, out.Bytes(), "", "  "); err != nil {
		return out.Bytes(), conflicting
	}
	return indented.Bytes(), conflicting
}

// orderedObject is a JSON object's top-level members in their order (the
// first of duplicated names wins, as encoding/json's last-wins would hide
// the order).
type orderedObject struct {
	names  []string
	values map[string]json.RawMessage
}

// readOrdered reads a stored body's top-level members in order; an
// unreadable body gives the members read before the fault.
func readOrdered(body []byte) orderedObject {
	o := orderedObject{values: map[string]json.RawMessage{}}
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return o
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return o
		}
		name := tok.String()
		val, err := dec.ReadValue()
		if err != nil {
			return o
		}
		if _, dup := o.values[name]; !dup {
			o.names = append(o.names, name)
			o.values[name] = json.RawMessage(val.Clone())
		}
	}
	return o
}
