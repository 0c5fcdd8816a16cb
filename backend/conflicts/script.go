package conflicts

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/jsguard"
	"github.com/rookerydb/rookery/backend/storage"
)

// A script is the body of
//
//	function resolve(docs, hasTombstone, resolveToTombstone) { ... }
//
// docs holds the versions that are not deletions, each a whole document with
// its @metadata; hasTombstone says whether a version was a deletion. It
// returns the merged document, resolveToTombstone to delete the document,
// or null/undefined to leave the conflict for a person. The collection of
// the result is always the versions' collection.
const scriptWrapper = `function resolve(docs, hasTombstone, resolveToTombstone) {
%s
}
function __rookeryResolve(docsJSON, hasTombstone, marker, collection) {
	var r = resolve(JSON.parse(docsJSON), hasTombstone, marker);
	if (r === marker) return marker;
	if (r === null || r === undefined) return null;
	if (typeof r !== 'object' || Array.isArray(r)) {
		throw new TypeError('resolve must return a document object, resolveToTombstone, or null; it returned ' + (Array.isArray(r) ? 'an array' : typeof r));
	}
	var md = r['@metadata'];
	if (md === null || typeof md !== 'object' || Array.isArray(md)) { md = {}; r['@metadata'] = md; }
	md['@collection'] = collection;
	return JSON.stringify(r);
}`

// DefaultTimeLimit bounds one script run.
const DefaultTimeLimit = 100 * time.Millisecond

// ScriptError is a script that failed: it threw, ran out of time, or
// returned the wrong kind of value.
type ScriptError struct{ Msg string }

func (e *ScriptError) Error() string { return e.Msg }

func compile(script string) (*goja.Program, error) {
	if err := jsguard.Check("the resolution script", script, jsguard.DefaultMaxBytes, jsguard.DefaultMaxDepth); err != nil {
		return nil, &ScriptError{Msg: err.Error()}
	}
	prog, err := goja.Compile("resolve.js", fmt.Sprintf(scriptWrapper, script), false)
	if err != nil {
		return nil, &ScriptError{Msg: "script does not compile: " + err.Error()}
	}
	return prog, nil
}

// Engine runs strategies. Scripts run in pooled goja runtimes, each run
// bounded by TimeLimit.
type Engine struct {
	TimeLimit time.Duration
	Log       *slog.Logger

	marker string
	mu     sync.Mutex
	pools  map[string]*pool // by script text
}

type pool struct {
	prog *goja.Program
	free chan *goja.Runtime
}

// NewEngine returns an engine with the default time limit.
func NewEngine(log *slog.Logger) *Engine {
	if log == nil {
		log = slog.Default()
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return &Engine{TimeLimit: DefaultTimeLimit, Log: log, marker: "resolveToTombstone:" + hex.EncodeToString(b), pools: map[string]*pool{}}
}

func (r *Engine) pool(script string) (*pool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.pools[script]; ok {
		return p, nil
	}
	prog, err := compile(script)
	if err != nil {
		return nil, err
	}
	if len(r.pools) > 256 { // scripts come from configuration; keep the cache bounded anyway
		r.pools = map[string]*pool{}
	}
	p := &pool{prog: prog, free: make(chan *goja.Runtime, 8)}
	r.pools[script] = p
	return p, nil
}

func (p *pool) get() (*goja.Runtime, error) {
	select {
	case vm := <-p.free:
		return vm, nil
	default:
	}
	vm := goja.New()
	if _, err := vm.RunProgram(p.prog); err != nil {
		return nil, &ScriptError{Msg: "script failed to load: " + err.Error()}
	}
	return vm, nil
}

func (p *pool) put(vm *goja.Runtime) {
	select {
	case p.free <- vm:
	default:
	}
}

// runScript runs a merge script over the versions.
func (r *Engine) runScript(ctx context.Context, script string, versions []storage.Version) (Decision, error) {
	p, err := r.pool(script)
	if err != nil {
		return Decision{}, err
	}
	vm, err := p.get()
	if err != nil {
		return Decision{}, err
	}
	var docs []byte
	docs = append(docs, '[')
	hasTombstone := false
	for _, v := range versions {
		if v.Tombstone {
			hasTombstone = true
			continue
		}
		if len(docs) > 1 {
			docs = append(docs, ',')
		}
		docs = document.AppendJSON(docs, v.Body, v.ID, v.ChangeVector, v.LastModified)
	}
	docs = append(docs, ']')
	fn, ok := goja.AssertFunction(vm.Get("__rookeryResolve"))
	if !ok {
		return Decision{}, &ScriptError{Msg: "script wrapper missing"}
	}
	limit := r.TimeLimit
	if limit <= 0 {
		limit = DefaultTimeLimit
	}
	timer := time.AfterFunc(limit, func() { vm.Interrupt("time limit") })
	stop := context.AfterFunc(ctx, func() { vm.Interrupt("cancelled") })
	out, err := fn(goja.Undefined(), vm.ToValue(string(docs)), vm.ToValue(hasTombstone), vm.ToValue(r.marker), vm.ToValue(versions[0].Collection))
	// A time limit or a cancellation that fired just as the script ended
	// may still interrupt the runtime: such a runtime is not reused (its
	// next script would be stopped at once).
	late := !timer.Stop()
	late = !stop() || late
	if err != nil {
		// An interrupted or failed runtime is not reused.
		var intr *goja.InterruptedError
		if errors.As(err, &intr) {
			if intr.Value() == "cancelled" {
				return Decision{}, ctx.Err()
			}
			return Decision{}, &ScriptError{Msg: fmt.Sprintf("script ran longer than its time limit (%v)", limit)}
		}
		var ex *goja.Exception
		if errors.As(err, &ex) {
			return Decision{}, &ScriptError{Msg: "script threw: " + strings.TrimSpace(ex.Value().String())}
		}
		return Decision{}, &ScriptError{Msg: "script failed: " + err.Error()}
	}
	if !late {
		p.put(vm)
	}
	if goja.IsNull(out) || goja.IsUndefined(out) {
		return Decision{Declined: true, Winner: -1}, nil
	}
	s := out.String()
	lm := maxModified(versions)
	if s == r.marker {
		return Decision{Winner: -1, Resolution: storage.Resolution{Tombstone: true, LastModified: lm, Strategy: Script}}, nil
	}
	parsed, err := document.Parse([]byte(s))
	if err != nil {
		return Decision{}, &ScriptError{Msg: "script returned a document that cannot be stored: " + err.Error()}
	}
	return Decision{Winner: -1, Resolution: storage.Resolution{Body: parsed.Body, LastModified: lm, Strategy: Script}}, nil
}
