package client

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

type Company struct {
	ID   string
	Name string
}

type personWithId struct {
	Id   string
	Name string
}

type tagged struct {
	Key  string `rookery:"id"`
	Name string
}

type jsonTagged struct {
	DocKey string `json:"id"`
	Name   string `json:"name"`
}

type noID struct {
	Name string
}

type intID struct {
	ID   int
	Name string
}

type Base struct {
	ID string `json:"-"`
}

type embedded struct {
	Base
	Name string
}

type OrderLine struct {
	ID string
}

type Box[T any] struct {
	ID   string
	Item T
}

func TestTypeInfo(t *testing.T) {
	tc := &typeCache{conv: DefaultConventions()}
	cases := []struct {
		v          any
		collection string
		tag        string
		idField    string // "" when none
		idJSON     string
	}{
		{Company{}, "Companies", "companies", "ID", "ID"},
		{personWithId{}, "personWithIds", "personWithIds", "Id", "Id"},
		{tagged{}, "taggeds", "taggeds", "Key", "Key"},
		{jsonTagged{}, "jsonTaggeds", "jsontaggeds", "DocKey", "id"},
		{noID{}, "noIDs", "noIDs", "", ""},
		{intID{}, "intIDs", "intIDs", "", ""},
		{embedded{}, "embeddeds", "embeddeds", "ID", ""},
		{OrderLine{}, "OrderLines", "OrderLines", "ID", "ID"},
		{Box[int]{}, "Boxes", "boxes", "ID", "ID"},
		{map[string]any{}, "", "", "", ""},
	}
	for _, c := range cases {
		typ := reflect.TypeOf(c.v)
		ti := tc.get(typ)
		if ti.collection != c.collection || ti.tag != c.tag {
			t.Errorf("%s: collection %q tag %q, want %q %q", typ, ti.collection, ti.tag, c.collection, c.tag)
		}
		field := ""
		if ti.idField != nil {
			field = typ.FieldByIndex(ti.idField).Name
		}
		if field != c.idField || ti.idJSONName != c.idJSON {
			t.Errorf("%s: id field %q (json %q), want %q (json %q)", typ, field, ti.idJSONName, c.idField, c.idJSON)
		}
	}
	if ti := tc.get(reflect.TypeOf(Company{})); !strings.HasSuffix(ti.goType, "client.Company") {
		t.Errorf("go type hint %q", ti.goType)
	}
}

func TestConventionOverrides(t *testing.T) {
	conv := (&Conventions{
		FindCollectionName: func(t reflect.Type) string { return "Things" + t.Name() },
		FindIdentityProperty: func(f reflect.StructField) bool {
			return f.Name == "Name"
		},
		TransformCollectionNameToDocumentIDPrefix: strings.ToUpper,
		IdentityPartsSeparator:                    "-",
	}).withDefaults()
	tc := &typeCache{conv: conv}
	ti := tc.get(reflect.TypeOf(Company{}))
	if ti.collection != "ThingsCompany" || ti.tag != "THINGSCOMPANY" {
		t.Errorf("override: collection %q tag %q", ti.collection, ti.tag)
	}
	if reflect.TypeOf(Company{}).FieldByIndex(ti.idField).Name != "Name" {
		t.Errorf("override: id field %v", ti.idField)
	}
	if conv.IdentityPartsSeparator != "-" || conv.RequestTimeout == 0 || conv.MaxHTTPCacheSize == 0 {
		t.Errorf("defaults not filled: %+v", conv)
	}
	if (&Conventions{IdentityPartsSeparator: "|"}).withDefaults().IdentityPartsSeparator != "/" {
		t.Error("| accepted as separator")
	}
}

func TestRebuildObject(t *testing.T) {
	meta := []byte(`{"@collection":"Users"}`)
	got, err := rebuildObject([]byte(`{"ID":"users/1","Name":"x","Nested":{"ID":"keep"},"N":[1,2]}`), []string{"ID"}, meta)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"Name":"x","Nested":{"ID":"keep"},"N":[1,2],"@metadata":{"@collection":"Users"}}`
	if string(got) != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	got, err = rebuildObject([]byte(`{}`), nil, meta)
	if err != nil || string(got) != `{"@metadata":{"@collection":"Users"}}` {
		t.Errorf("empty object: %s %v", got, err)
	}
	got, err = rebuildObject([]byte(`{"ID":"a"}`), []string{"ID"}, meta)
	if err != nil || string(got) != `{"@metadata":{"@collection":"Users"}}` {
		t.Errorf("only id: %s %v", got, err)
	}
	tricky := `{ "a\"}" : "x\"},{\\" , "ID":{"k":["}",{"]":1}]},"n" : -1.5e3,"t":true,"z":null,"u\u0049D":"esc" }`
	got, err = rebuildObject([]byte(tricky), []string{"ID", "uID"}, meta)
	want = `{"a\"}" : "x\"},{\\","n" : -1.5e3,"t":true,"z":null,"@metadata":{"@collection":"Users"}}`
	if err != nil || string(got) != want {
		t.Errorf("tricky:\n got %s\nwant %s (%v)", got, want, err)
	}
	var check map[string]any
	if err := json.Unmarshal(got, &check); err != nil || len(check) != 5 {
		t.Errorf("tricky result is not the expected JSON: %v %v", check, err)
	}
	for _, bad := range []string{`{"a":}`, `{"a" 1}`, `{"a":"x`, `{"a":[1,2}`, `{a:1}`} {
		if _, err := rebuildObject([]byte(bad), []string{"x"}, meta); err == nil {
			t.Errorf("malformed %s accepted", bad)
		}
	}
	if _, err := rebuildObject([]byte(`[1]`), nil, meta); err == nil {
		t.Error("array accepted as a document")
	}
}

func TestNewUUID(t *testing.T) {
	a, b := newUUID(), newUUID()
	if len(a) != 36 || a == b || a[14] != '4' || strings.Count(a, "-") != 4 {
		t.Errorf("uuids %q %q", a, b)
	}
}
