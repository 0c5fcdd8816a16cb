package patch

import (
	"errors"

	"github.com/dop251/goja"
)

// Counters is what counter(), incrementCounter() and deleteCounter() of a
// script reach: the document counters of the transaction the patch runs in.
type Counters interface {
	// Counter returns a counter's value; ok is false when it does not exist.
	Counter(docID, name string) (value int64, ok bool, err error)
	IncrementCounter(docID, name string, delta int64) error
	DeleteCounter(docID, name string) error
}

var errNoCounters = errors.New("counters are not available to this script")

// installCounters defines counter(doc, name), incrementCounter(doc, name[,
// delta]) and deleteCounter(doc, name); doc is a document (its @metadata.@id)
// or an id.
func installCounters(vm *goja.Runtime, c Counters) {
	docID := func(v goja.Value) string {
		if o, ok := v.(*goja.Object); ok {
			if md, ok := o.Get("@metadata").(*goja.Object); ok {
				if id := md.Get("@id"); id != nil && !goja.IsUndefined(id) && !goja.IsNull(id) {
					return id.String()
				}
			}
			panic(vm.NewTypeError("the document given to a counter function has no @metadata.@id"))
		}
		if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
			panic(vm.NewTypeError("a counter function needs a document or an id"))
		}
		return v.String()
	}
	fail := func(err error) { panic(vm.NewGoError(err)) }
	_ = vm.Set("counter", func(doc goja.Value, name string) goja.Value {
		if c == nil {
			fail(errNoCounters)
		}
		v, ok, err := c.Counter(docID(doc), name)
		if err != nil {
			fail(err)
		}
		if !ok {
			return goja.Null()
		}
		return vm.ToValue(v)
	})
	_ = vm.Set("incrementCounter", func(call goja.FunctionCall) goja.Value {
		if c == nil {
			fail(errNoCounters)
		}
		delta := int64(1)
		if d := call.Argument(2); !goja.IsUndefined(d) {
			delta = d.ToInteger()
		}
		if err := c.IncrementCounter(docID(call.Argument(0)), call.Argument(1).String(), delta); err != nil {
			fail(err)
		}
		return goja.Undefined()
	})
	_ = vm.Set("deleteCounter", func(doc goja.Value, name string) goja.Value {
		if c == nil {
			fail(errNoCounters)
		}
		if err := c.DeleteCounter(docID(doc), name); err != nil {
			fail(err)
		}
		return goja.Undefined()
	})
}
