package index

import (
	"strings"
	"testing"

	"github.com/dop251/goja"
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

// FuzzJSONValue checks the direct JSON-to-JavaScript builder against
// JSON.parse: for any input it either declines (and JSON.parse is used) or
// builds a value that JSON.stringify writes exactly as it writes
// JSON.parse's, key order and number forms included. Deep and huge inputs
// are among the seeds.
func FuzzJSONValue(f *testing.F) {
	for _, s := range []string{
		`{"Name":"a","Age":3,"F":1.5,"E":-1e3,"Z":0,"N":null,"T":true,"X":false,"A":[1,"b",{"c":[]}],"O":{}}`,
		`{"a":1,"a":2,"__proto__":{"x":1},"constructor":3}`,
		`{"s":"é ü 日本 \u00e9 \n","k\"":1}`, `[]`, `"x"`, `12`, `-0`, `1e400`, `{"a":01}`, `{"a":1,}`, `[1 2]`,
		`{"a":"` + "\xff" + `"}`, ` { "a" : [ 1 , 2 ] } `, `{"a":1}x`,
		strings.Repeat(`{"a":`, 600) + "1" + strings.Repeat("}", 600),
		strings.Repeat("[", 100000),
	} {
		f.Add(s)
	}
	e, err := newJS(&Definition{Name: "J", Type: TypeJavaScriptMap, Maps: []string{"map('X', x => x)"}}, 1e9)
	if err != nil {
		f.Fatal(err)
	}
	stringify, _ := goja.AssertFunction(e.vm.Get("JSON").ToObject(e.vm).Get("stringify"))
	f.Fuzz(func(t *testing.T, s string) {
		v, err := jsonValue(e.vm, []byte(s))
		if err != nil {
			return
		}
		want, perr := e.parse(goja.Undefined(), e.vm.ToValue(s))
		if perr != nil {
			t.Fatalf("%q: built a value but JSON.parse fails: %v", s, perr)
		}
		a, err1 := stringify(goja.Undefined(), v)
		b, err2 := stringify(goja.Undefined(), want)
		if err1 != nil || err2 != nil || a.String() != b.String() {
			t.Fatalf("%q: built %v, JSON.parse %v (%v %v)", s, a, b, err1, err2)
		}
		if o, ok := v.(*goja.Object); ok {
			if w, ok := want.(*goja.Object); ok && o.ClassName() != w.ClassName() {
				t.Fatalf("%q: class %s, JSON.parse %s", s, o.ClassName(), w.ClassName())
			}
		}
	})
}
