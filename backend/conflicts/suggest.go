package conflicts

import (
	"encoding/json"
	"sort"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

// Suggest builds a merged starting point for a person resolving by hand:
// top-level fields on which every surviving version agrees keep their
// value; for the others it takes the latest version's value and names the
// field in conflicting. The result is a JSON object with @metadata (the
// collection only); nil when every version is a deletion.
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
	base := live[latest(live, all(len(live)))]
	objs := make([]map[string]json.RawMessage, len(live))
	for i, v := range live {
		_ = json.Unmarshal(v.Body, &objs[i])
	}
	var baseObj map[string]json.RawMessage
	_ = json.Unmarshal(base.Body, &baseObj)
	if baseObj == nil {
		baseObj = map[string]json.RawMessage{}
	}
	keys := map[string]bool{}
	for _, o := range objs {
		for k := range o {
			keys[k] = true
		}
	}
	out := map[string]json.RawMessage{}
	for k := range keys {
		if k == "@metadata" {
			continue
		}
		var first json.RawMessage
		same, seen := true, false
		for _, o := range objs {
			v, ok := o[k]
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
			out[k] = first
			continue
		}
		conflicting = append(conflicting, k)
		if v, ok := baseObj[k]; ok {
			out[k] = v
		}
	}
	md, _ := json.Marshal(map[string]string{"@collection": base.Collection})
	out["@metadata"] = md
	sort.Strings(conflicting)
	body, _ = json.MarshalIndent(out, "", "  ")
	return body, conflicting
}
