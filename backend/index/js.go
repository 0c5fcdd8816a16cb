package index

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"

	"github.com/rookerydb/rookery/backend/dberr"
)

// DefinitionError is a definition the engine refuses. It unwraps to a
// *dberr.Error of kind BadRequest (HTTP 400); Reason tells the HTTP layer
// which RavenDB exception to name:
//
//	"NotSupported"  a C#/LINQ definition (RavenDB: NotSupportedException)
//	"Compilation"   JavaScript that does not compile or run its top level
//	                (RavenDB: IndexCompilationException)
//	"Invalid"       anything else (name, type, fields)
type DefinitionError struct {
	Reason string
	Msg    string
}

func (e *DefinitionError) Error() string { return e.Msg }

// Unwrap makes dberr.KindOf see a BadRequest.
func (e *DefinitionError) Unwrap() error { return &dberr.Error{Kind: dberr.BadRequest, Msg: e.Msg} }

func defErr(reason, format string, args ...any) error {
	return &DefinitionError{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// IsCSharp tells whether a static definition is C#/LINQ, as RavenDB's
// clients detect it: Maps[0] trimmed starts with "from" or "docs".
func IsCSharp(d *Definition) bool {
	if len(d.Maps) == 0 {
		return false
	}
	s := strings.TrimSpace(d.Maps[0])
	return strings.HasPrefix(s, "from") || strings.HasPrefix(s, "docs")
}

// errTimeout is the interrupt value of a run over the time limit.
var errTimeout = errors.New("the script ran over its time limit")

// jsEngine is one index's JavaScript runtime: not safe for concurrent use
// (only the index's writer goroutine runs it).
type jsEngine struct {
	vm      *goja.Runtime
	maps    []jsMap
	keyFn   goja.Callable // reduce: groupBy(x => key)
	aggFn   goja.Callable // reduce: .aggregate(g => row)
	parse   goja.Callable
	timeout time.Duration

	mu  sync.Mutex
	gen uint64

	// load is the current document's load(); nil outside a map call.
	load func(id, coll string, track bool) (body []byte, docID, docColl string, cv string, lm string, ok bool, err error)
}

type jsMap struct {
	coll string // as written; AllDocs for every collection
	fn   goja.Callable
}

// newJS compiles a definition's scripts: every Maps string, then Reduce.
func newJS(d *Definition, timeout time.Duration) (*jsEngine, error) {
	e := &jsEngine{vm: goja.New(), timeout: timeout}
	vm := e.vm
	vm.SetMaxCallStackSize(2000)
	parse, ok := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("parse"))
	if !ok {
		return nil, errors.New("JSON.parse is missing")
	}
	e.parse = parse
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(vm.Set("map", func(call goja.FunctionCall) goja.Value {
		coll := call.Argument(0)
		fn, ok := goja.AssertFunction(call.Argument(1))
		if goja.IsUndefined(coll) || goja.IsNull(coll) || !ok {
			panic(vm.NewTypeError("map() takes a collection name and a function: map('Orders', o => ({ ... }))"))
		}
		e.maps = append(e.maps, jsMap{coll: coll.String(), fn: fn})
		return goja.Undefined()
	}))
	loader := func(track bool) func(call goja.FunctionCall) goja.Value {
		return func(call goja.FunctionCall) goja.Value {
			idv := call.Argument(0)
			if goja.IsUndefined(idv) || goja.IsNull(idv) {
				return goja.Null()
			}
			if e.load == nil {
				return goja.Null()
			}
			coll := ""
			if c := call.Argument(1); !goja.IsUndefined(c) && !goja.IsNull(c) {
				coll = c.String()
			}
			body, id, dcoll, cv, lm, found, err := e.load(idv.String(), coll, track)
			if err != nil {
				panic(vm.NewGoError(err))
			}
			if !found {
				return goja.Null()
			}
			return e.docValue(body, id, dcoll, cv, lm)
		}
	}
	must(vm.Set("load", loader(true)))
	must(vm.Set("loadDocument", loader(true)))
	nt := vm.NewObject()
	must(nt.Set("load", loader(false)))
	must(vm.Set("noTracking", nt))
	meta := func(call goja.FunctionCall) goja.Value {
		o, ok := call.Argument(0).(*goja.Object)
		if !ok {
			return goja.Null()
		}
		return o.Get("@metadata")
	}
	must(vm.Set("getMetadata", meta))
	must(vm.Set("metadataFor", meta))
	must(vm.Set("id", func(call goja.FunctionCall) goja.Value {
		o, ok := call.Argument(0).(*goja.Object)
		if !ok {
			return goja.Null()
		}
		m, ok := o.Get("@metadata").(*goja.Object)
		if !ok {
			return goja.Null()
		}
		return m.Get("@id")
	}))
	must(vm.Set("groupBy", func(call goja.FunctionCall) goja.Value {
		fn, ok := goja.AssertFunction(call.Argument(0))
		if !ok {
			panic(vm.NewTypeError("groupBy() takes a function: groupBy(x => x.Key)"))
		}
		o := vm.NewObject()
		_ = o.Set("aggregate", func(c goja.FunctionCall) goja.Value {
			agg, ok := goja.AssertFunction(c.Argument(0))
			if !ok {
				panic(vm.NewTypeError("aggregate() takes a function: aggregate(g => ({ ... }))"))
			}
			e.keyFn, e.aggFn = fn, agg
			return goja.Undefined()
		})
		return o
	}))
	for i, src := range d.Maps {
		if err := e.runTop(fmt.Sprintf("map %d", i+1), src); err != nil {
			return nil, err
		}
	}
	if len(e.maps) == 0 {
		return nil, defErr("Compilation", "the index's maps call map() nowhere: write map('Collection', doc => ({ ... }))")
	}
	if d.Type == TypeJavaScriptMapReduce || strings.TrimSpace(d.Reduce) != "" {
		if err := e.runTop("reduce", d.Reduce); err != nil {
			return nil, err
		}
		if e.keyFn == nil {
			return nil, defErr("Compilation", "the reduce does not call groupBy(...).aggregate(...): write groupBy(x => x.Key).aggregate(g => ({ Key: g.key, ... }))")
		}
	}
	return e, nil
}

func (e *jsEngine) runTop(what, src string) (err error) {
	prog, cerr := goja.Compile(what, src, false)
	if cerr != nil {
		return defErr("Compilation", "JavaScript index %s does not compile: %v", what, cerr)
	}
	_, rerr := e.call(func() (goja.Value, error) { return e.vm.RunProgram(prog) })
	if rerr != nil {
		return defErr("Compilation", "JavaScript index %s fails: %v", what, rerr)
	}
	return nil
}

// call runs fn under the time limit; a panic or a JS exception is an error.
func (e *jsEngine) call(fn func() (goja.Value, error)) (v goja.Value, err error) {
	e.mu.Lock()
	e.gen++
	g := e.gen
	e.mu.Unlock()
	t := time.AfterFunc(e.timeout, func() {
		e.mu.Lock()
		if e.gen == g {
			e.vm.Interrupt(errTimeout)
		}
		e.mu.Unlock()
	})
	defer func() {
		e.mu.Lock()
		e.gen++
		e.mu.Unlock()
		t.Stop()
		e.vm.ClearInterrupt()
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	v, err = fn()
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		err = fmt.Errorf("the script ran over its time limit of %s", e.timeout)
	}
	return v, err
}

// docValue makes a JS object of a stored document with its metadata.
func (e *jsEngine) docValue(body []byte, id, coll, cv, lm string) goja.Value {
	v, err := jsonValue(e.vm, body)
	if err != nil {
		if v, err = e.parse(goja.Undefined(), e.vm.ToValue(string(body))); err != nil {
			panic(err)
		}
	}
	o, ok := v.(*goja.Object)
	if !ok {
		return v
	}
	m, ok := o.Get("@metadata").(*goja.Object)
	if !ok {
		m = e.vm.NewObject()
		_ = o.Set("@metadata", m)
	}
	_ = m.Set("@id", id)
	if coll != "" {
		_ = m.Set("@collection", coll)
	}
	_ = m.Set("@change-vector", cv)
	_ = m.Set("@last-modified", lm)
	return o
}

// mapDoc runs every map of the document's collection and returns the
// objects they produced.
func (e *jsEngine) mapDoc(doc *docIn) ([]map[string]any, error) {
	var docVal goja.Value
	var out []map[string]any
	for _, m := range e.maps {
		if m.coll != AllDocs && !strings.EqualFold(m.coll, doc.coll) {
			continue
		}
		res, err := e.call(func() (goja.Value, error) {
			if docVal == nil {
				docVal = e.docValue(doc.body, doc.id, doc.coll, doc.cv, doc.lm)
			}
			return m.fn(goja.Undefined(), docVal)
		})
		if err != nil {
			return nil, err
		}
		objs, err := exportObjects(res)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func exportObjects(v goja.Value) ([]map[string]any, error) {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return nil, nil
	}
	switch x := v.Export().(type) {
	case map[string]any:
		return []map[string]any{x}, nil
	case []any:
		var out []map[string]any
		for _, el := range x {
			switch m := el.(type) {
			case nil:
			case map[string]any:
				out = append(out, m)
			default:
				return nil, fmt.Errorf("the map returned an array holding a %T; it must hold objects", el)
			}
		}
		return out, nil
	default:
		return nil, fmt.Errorf("the map returned a %T; it must return an object, an array of objects or null", x)
	}
}

// groupKey runs the reduce's groupBy function over one map output.
func (e *jsEngine) groupKey(out map[string]any) (any, error) {
	v, err := e.call(func() (goja.Value, error) { return e.keyFn(goja.Undefined(), e.vm.ToValue(out)) })
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, nil
	}
	return v.Export(), nil
}

// reduce runs aggregate over one group's map outputs (JSON texts).
func (e *jsEngine) reduce(key any, vals []string) (map[string]any, error) {
	v, err := e.call(func() (goja.Value, error) {
		arr, err := e.parse(goja.Undefined(), e.vm.ToValue("["+strings.Join(vals, ",")+"]"))
		if err != nil {
			return nil, err
		}
		kb, _ := json.Marshal(key)
		kv, err := e.parse(goja.Undefined(), e.vm.ToValue(string(kb)))
		if err != nil {
			return nil, err
		}
		g := e.vm.NewObject()
		_ = g.Set("key", kv)
		_ = g.Set("values", arr)
		return e.aggFn(goja.Undefined(), g)
	})
	if err != nil {
		return nil, err
	}
	objs, err := exportObjects(v)
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("aggregate() must return one object, got %d", len(objs))
	}
	return objs[0], nil
}

// RavenType is the clients' exception type: IndexCompilationException for
// JavaScript that does not compile, NotSupportedException for C#.
func (e *DefinitionError) RavenType() string {
	switch e.Reason {
	case "Compilation":
		return "Raven.Client.Exceptions.Documents.Compilation.IndexCompilationException"
	case "NotSupported":
		return "System.NotSupportedException"
	}
	return "Raven.Client.Exceptions.BadRequestException"
}
