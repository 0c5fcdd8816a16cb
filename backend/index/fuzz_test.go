package index

import (
	"strings"
	"testing"
)

// FuzzMapper feeds arbitrary index names and document bodies (deep and huge
// ones among the seeds) to the file-name derivation and both mappers: no
// input may panic, a file name stays short and safe, and the mappers either
// map or return an error.
func FuzzMapper(f *testing.F) {
	f.Add("Auto/Orders/ByLines[].Price", `{"Name":"a","Lines":[{"Price":1},{"Price":2}],"Tags":["x"]}`)
	f.Add("../../etc/passwd", `{"Name":null}`)
	f.Add("x\x00y", strings.Repeat(`{"a":`, 600)+"1"+strings.Repeat("}", 600))
	f.Add(strings.Repeat("Ü", 200), `{"Name":"`+strings.Repeat("z", 100000)+`"}`)
	f.Add("a", `[1,2,3]`)
	auto, err := newAutoMapper(&Definition{Name: "A", Type: TypeAutoMap, Collection: "Orders", Fields: []AutoField{{Name: "Name"}, {Name: "Lines[].Price"}, {Name: "Tags"}, {Name: "a.a.a"}}})
	if err != nil {
		f.Fatal(err)
	}
	js, err := newJS(&Definition{Name: "J", Type: TypeJavaScriptMap, Maps: []string{"map('Orders', o => ({ Name: o.Name, Lines: o.Lines, Id: id(o) }))"}}, 1e9)
	if err != nil {
		f.Fatal(err)
	}
	jm := newJSMapper(&Definition{Name: "J"}, js)
	f.Fuzz(func(t *testing.T, name, body string) {
		fn := FileName(name)
		if len(fn) > 80 || strings.ContainsAny(fn, "/\\\x00") || strings.HasPrefix(fn, ".") {
			t.Fatalf("file name %q", fn)
		}
		d := &docIn{key: "orders/1", id: "orders/1", coll: "Orders", body: []byte(body)}
		_, _, _ = auto.mapDoc(d)
		_, _, _ = jm.mapDoc(d)
	})
}
