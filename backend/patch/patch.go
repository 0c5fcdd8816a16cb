// Package patch runs RavenDB's JavaScript patches over documents in goja:
// the script sees the document as `this` (and as the query's alias, for
// `from Orders as o update { o.X = 1 }`), its arguments as `args`, and the
// helpers id(doc), getMetadata(doc), load(id) and load([ids]) (read-only
// copies of other documents), put(id, doc[, changeVector]) and
// del(id[, changeVector]) (writes of other documents, through the caller's
// transaction, at most Env.MaxWrites of them), output()/console.log() for
// debug output. Each run is bounded in time (goja counts no statements, so a
// runaway loop is interrupted by a timer; Env.Deadline shares one budget
// between the runs of a request) and a script whose result is not a
// document is refused.
package patch

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/dop251/goja"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/jsguard"
)

// DefaultTimeLimit bounds one script run over one document.
const DefaultTimeLimit = 500 * time.Millisecond

// Error is a script that does not compile, throws, runs out of time or
// returns what is not a document. The HTTP layer reports it as a 400
// JavaScriptException.
type Error struct {
	Msg string
	// Thrown is the value the script threw when it threw a string
	// (`throw 'skip'` in an export transform).
	Thrown string
}

func (e *Error) Error() string { return e.Msg }

// IsError tells whether err is a script's failure.
func IsError(err error) bool {
	_, ok := err.(*Error)
	return ok
}

var aliasRE = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// reserved are names a query alias cannot take in the script's scope.
var reserved = map[string]bool{"this": true, "args": true, "load": true, "id": true, "getMetadata": true, "output": true, "console": true, "put": true, "del": true}

// DefaultMaxWrites bounds the put() and del() calls of one run.
const DefaultMaxWrites = 1024

// Script is a compiled patch.
type Script struct {
	prog      *goja.Program
	TimeLimit time.Duration
	pool      chan *goja.Runtime
}

// Compile compiles a patch body. alias is the query's alias ("" for none):
// inside the body it names the document, as `this` does.
func Compile(body, alias string) (*Script, error) {
	param := "__doc"
	if alias != "" {
		if !aliasRE.MatchString(alias) || reserved[alias] {
			return nil, &Error{Msg: fmt.Sprintf("the alias %q cannot name the document in a patch", alias)}
		}
		param = alias
	}
	if err := jsguard.Check("the patch script", body, jsguard.DefaultMaxBytes, jsguard.DefaultMaxDepth); err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	src := "(function(" + param + ") {\n" + body + "\n})"
	prog, err := goja.Compile("patch.js", src, false)
	if err != nil {
		return nil, &Error{Msg: "the patch script does not compile: " + err.Error()}
	}
	return &Script{prog: prog, TimeLimit: DefaultTimeLimit, pool: make(chan *goja.Runtime, 4)}, nil
}

// Env is what a run may reach beyond the document.
type Env struct {
	// Args are the script's arguments (the request's Values or the
	// query's parameters).
	Args map[string]any
	// Load reads another document as JSON with its @metadata (nil, nil
	// when it does not exist).
	Load func(id string) ([]byte, error)
	// Output receives output()/console.log() values (debug).
	Output func(string)
	// Put writes another document (its JSON, @metadata included) with an
	// optional expected change vector, and returns the id it was stored
	// under; nil leaves put() refused.
	Put func(id string, doc []byte, changeVector *string) (string, error)
	// Delete deletes another document (an optional expected change
	// vector); it tells whether there was one. nil leaves del() refused.
	Delete func(id string, changeVector *string) (bool, error)
	// MaxWrites bounds the put() and del() calls of the run
	// (DefaultMaxWrites when zero).
	MaxWrites int
	// Deadline, when set, ends the run earlier than the script's own time
	// limit: the scripts of one request share one budget.
	Deadline time.Time
	// Actions, when set, receives what the run did besides changing the
	// document (the debug output's Actions).
	Actions *Actions
	// Counters serves counter(), incrementCounter() and deleteCounter()
	// (counters.go); nil: they throw.
	Counters Counters
}

// Actions are the other documents a run read, wrote and deleted.
type Actions struct {
	LoadDocument   []string `json:"LoadDocument,omitempty"`
	PutDocument    []string `json:"PutDocument,omitempty"`
	DeleteDocument []string `json:"DeleteDocument,omitempty"`
}

// optString reads an optional string argument (undefined and null: nil).
func optString(v goja.Value) *string {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return nil
	}
	s := v.String()
	return &s
}

// Run applies the script to a document (JSON with its @metadata, as
// clients see it) and returns the patched document's JSON. changed says
// whether the script changed anything.
func (s *Script) Run(doc []byte, env Env) (out []byte, changed bool, err error) {
	vm := s.get()
	defer s.put(vm)
	// The script works on plain JavaScript objects: the document is parsed
	// once, by the runtime's own JSON.parse.
	jsonObj := vm.Get("JSON").ToObject(vm)
	parse, _ := goja.AssertFunction(jsonObj.Get("parse"))
	stringify, _ := goja.AssertFunction(jsonObj.Get("stringify"))
	jsDoc, err := parse(goja.Undefined(), vm.ToValue(string(doc)))
	if err != nil {
		return nil, false, dberr.New(dberr.Internal, "the document to patch is not JSON: %v", err)
	}
	if o, ok := jsDoc.(*goja.Object); !ok || o.ClassName() == "Array" {
		return nil, false, &Error{Msg: "the document to patch is not an object"}
	}
	var argsVal goja.Value = vm.NewObject()
	if env.Args != nil {
		b, _ := json.Marshal(env.Args)
		if argsVal, err = parse(goja.Undefined(), vm.ToValue(string(b))); err != nil {
			return nil, false, err
		}
	}
	_ = vm.Set("args", argsVal)
	// A patch by query's script names the query's parameters as $name.
	if o, ok := argsVal.(*goja.Object); ok {
		for _, k := range o.Keys() {
			if aliasRE.MatchString(k) {
				_ = vm.Set("$"+k, o.Get(k))
				// The runtime goes back to the pool: the next run must not
				// see this run's parameters.
				defer vm.GlobalObject().Delete("$" + k)
			}
		}
	}
	_ = vm.Set("id", func(v goja.Value) goja.Value {
		o, ok := v.(*goja.Object)
		if !ok {
			return goja.Null()
		}
		if md, ok := o.Get("@metadata").(*goja.Object); ok {
			if id := md.Get("@id"); id != nil {
				return id
			}
		}
		return goja.Null()
	})
	_ = vm.Set("getMetadata", func(v goja.Value) goja.Value {
		if o, ok := v.(*goja.Object); ok {
			return o.Get("@metadata")
		}
		return goja.Null()
	})
	loadOne := func(id string) goja.Value {
		if env.Load == nil {
			return goja.Null()
		}
		if env.Actions != nil {
			env.Actions.LoadDocument = append(env.Actions.LoadDocument, id)
		}
		b, err := env.Load(id)
		if err != nil {
			panic(vm.NewGoError(err))
		}
		if b == nil {
			return goja.Null()
		}
		v, err := parse(goja.Undefined(), vm.ToValue(string(b)))
		if err != nil {
			panic(err)
		}
		return v
	}
	_ = vm.Set("load", func(v goja.Value) goja.Value {
		// load([ids]) loads each, in order.
		if o, ok := v.(*goja.Object); ok && o.ClassName() == "Array" {
			var ids []string
			if err := vm.ExportTo(o, &ids); err != nil {
				panic(vm.NewTypeError("load() takes an id or an array of ids"))
			}
			out := make([]any, len(ids))
			for i, id := range ids {
				out[i] = loadOne(id)
			}
			return vm.NewArray(out...)
		}
		if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
			panic(vm.NewTypeError("load() needs an id"))
		}
		return loadOne(v.String())
	})
	maxWrites := env.MaxWrites
	if maxWrites <= 0 {
		maxWrites = DefaultMaxWrites
	}
	writes := 0
	countWrite := func() {
		writes++
		if writes > maxWrites {
			panic(vm.NewGoError(&Error{Msg: fmt.Sprintf("the patch script called put() and del() more than %d times", maxWrites)}))
		}
	}
	_ = vm.Set("put", func(call goja.FunctionCall) goja.Value {
		if env.Put == nil {
			panic(vm.NewTypeError("put() is not available here"))
		}
		idv := call.Argument(0)
		if goja.IsUndefined(idv) || goja.IsNull(idv) {
			panic(vm.NewTypeError("put() needs an id"))
		}
		o, ok := call.Argument(1).(*goja.Object)
		if !ok || o.ClassName() == "Array" {
			panic(vm.NewTypeError("put() needs a document object"))
		}
		countWrite()
		b, err := stringify(goja.Undefined(), o)
		if err != nil {
			panic(err)
		}
		id, err := env.Put(idv.String(), []byte(b.String()), optString(call.Argument(2)))
		if err != nil {
			panic(vm.NewGoError(err))
		}
		if env.Actions != nil {
			env.Actions.PutDocument = append(env.Actions.PutDocument, id)
		}
		return vm.ToValue(id)
	})
	_ = vm.Set("del", func(call goja.FunctionCall) goja.Value {
		if env.Delete == nil {
			panic(vm.NewTypeError("del() is not available here"))
		}
		idv := call.Argument(0)
		if goja.IsUndefined(idv) || goja.IsNull(idv) {
			panic(vm.NewTypeError("del() needs an id"))
		}
		countWrite()
		deleted, err := env.Delete(idv.String(), optString(call.Argument(1)))
		if err != nil {
			panic(vm.NewGoError(err))
		}
		if env.Actions != nil {
			env.Actions.DeleteDocument = append(env.Actions.DeleteDocument, idv.String())
		}
		return vm.ToValue(deleted)
	})
	out1 := func(call goja.FunctionCall) goja.Value {
		if env.Output != nil {
			parts := make([]string, len(call.Arguments))
			for i, a := range call.Arguments {
				parts[i] = a.String()
			}
			env.Output(strings.Join(parts, " "))
		}
		return goja.Undefined()
	}
	_ = vm.Set("output", out1)
	installCounters(vm, env.Counters)
	console := vm.NewObject()
	_ = console.Set("log", out1)
	_ = vm.Set("console", console)

	fnVal, err := vm.RunProgram(s.prog)
	if err != nil {
		return nil, false, &Error{Msg: "the patch script failed to load: " + err.Error()}
	}
	fn, _ := goja.AssertFunction(fnVal)
	limit := s.TimeLimit
	if !env.Deadline.IsZero() {
		if left := time.Until(env.Deadline); left < limit {
			limit = left
		}
		if limit <= 0 {
			return nil, false, &Error{Msg: "the request's patch scripts ran out of their shared time limit"}
		}
	}
	fired := make(chan struct{})
	timer := time.AfterFunc(limit, func() { vm.Interrupt("time limit"); close(fired) })
	_, err = fn(jsDoc, jsDoc)
	if !timer.Stop() {
		// The limit fired, maybe just as the script ended: wait until its
		// interrupt is set, so the clear below is the last word and the
		// pooled runtime starts its next run clean.
		<-fired
	}
	vm.ClearInterrupt()
	if err != nil {
		if _, ok := err.(*goja.InterruptedError); ok {
			return nil, false, &Error{Msg: fmt.Sprintf("the patch script ran longer than its %s limit", limit)}
		}
		e := &Error{Msg: "the patch script failed: " + err.Error()}
		if ex, ok := err.(*goja.Exception); ok {
			// What put(), del() or load() failed with (a concurrency
			// error, the write bound) keeps its own kind, unless the
			// script caught it.
			if inner := ex.Unwrap(); inner != nil {
				return nil, false, inner
			}
			if s, ok := ex.Value().Export().(string); ok {
				e.Thrown = s
			}
		}
		return nil, false, e
	}
	res, err := stringify(goja.Undefined(), jsDoc)
	if err != nil {
		return nil, false, &Error{Msg: "the patched document cannot be written as JSON: " + err.Error()}
	}
	out = []byte(res.String())
	return out, !document.JSONEqual(doc, out), nil
}

func (s *Script) get() *goja.Runtime {
	select {
	case vm := <-s.pool:
		return vm
	default:
		return goja.New()
	}
}

func (s *Script) put(vm *goja.Runtime) {
	select {
	case s.pool <- vm:
	default:
	}
}

// RavenType is the clients' exception type for a failed script.
func (e *Error) RavenType() string {
	return "Raven.Client.Exceptions.Documents.Patching.JavaScriptException"
}

// Unwrap makes a failed script a 400.
func (e *Error) Unwrap() error { return dberr.New(dberr.BadRequest, "%s", e.Msg) }
