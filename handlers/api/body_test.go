package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/backend/dberr"
)

// POST /docs reads {"Ids":[...]} in one pass: the ids as encoding/json
// would read them, other members skipped, at most maxLoadIDs ids, and any
// other shape a 400 with the byte offset.
func TestReadIDs(t *testing.T) {
	ids, err := readIDs([]byte(`{"Other":[1,{"a":2}],"ids":["users/1-A","x\u0041",null]}`))
	if err != nil || len(ids) != 3 || ids[0] != "users/1-A" || ids[1] != "xA" || ids[2] != "" {
		t.Fatalf("%q %v", ids, err)
	}
	if ids, err := readIDs([]byte(`{"Ids":null}`)); err != nil || len(ids) != 0 {
		t.Fatalf("null: %q %v", ids, err)
	}
	for _, bad := range []string{``, `[]`, `{"Ids":[1]}`, `{"Ids":{}}`, `{"Ids":["a"]`, `{"Ids":["a"]}x`,
		`{"Ids":[` + strings.Repeat(`"",`, maxLoadIDs) + `""]}`, `{"X":` + strings.Repeat("[", 100_000) + `}`} {
		if _, err := readIDs([]byte(bad)); !dberr.Is(err, dberr.BadRequest) || !strings.Contains(err.Error(), "at byte") {
			t.Errorf("%.40q: %v", bad, err)
		}
	}
}

func FuzzReadIDs(f *testing.F) {
	f.Add([]byte(`{"Ids":["users/1-A","users/2-A"]}`))
	f.Add([]byte(`{"Other":[1,{"a":2}],"ids":["x\u0041",null]}`))
	f.Add([]byte(`{"Ids":[` + strings.Repeat(`"a",`, 100_000) + `"b"]}`))
	f.Add([]byte(`{"X":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `,"Ids":["a"]}`))
	f.Add([]byte(strings.Repeat(`{"a":`, 100_000)))
	f.Fuzz(func(t *testing.T, raw []byte) {
		ids, err := readIDs(raw)
		if err != nil {
			if !dberr.Is(err, dberr.BadRequest) {
				t.Fatalf("error of the wrong kind: %v", err)
			}
			return
		}
		if len(ids) > maxLoadIDs {
			t.Fatalf("%d ids", len(ids))
		}
		// Whatever it accepts, encoding/json reads the same ids from (when
		// the body has one Ids member).
		var body struct{ Ids []string }
		if strings.Count(strings.ToLower(string(raw)), `"ids"`) == 1 && json.Unmarshal(raw, &body) == nil && len(body.Ids) != len(ids) {
			t.Fatalf("%d ids, encoding/json reads %d", len(ids), len(body.Ids))
		}
	})
}
