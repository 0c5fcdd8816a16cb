// Package operations runs a node's long jobs (patch and delete by query,
// index resets, imports, exports, revision reverts and bulk conflict
// resolutions) as
// operations a client can follow: each has an id, a state with progress
// and a result, can be killed, and stays readable for a while after it ends,
// because the RavenDB clients poll /operations/state until they see it
// finished (a 404 there crashes them).
package operations

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
)

// Statuses of an operation (OperationStatus on the wire).
const (
	InProgress = "InProgress"
	Completed  = "Completed"
	Faulted    = "Faulted"
	Canceled   = "Canceled"
)

// Defaults.
const (
	// DefaultKeep is how long a finished operation stays readable.
	DefaultKeep = 15 * time.Minute
	// DefaultMaxKept bounds the finished operations kept (the oldest go
	// first once it is reached).
	DefaultMaxKept = 1000
)

// State is what /operations/state answers.
type State struct {
	Status   string
	Progress any // nil until the job reports some
	Result   any // the job's result, or an ExceptionResult when Faulted
}

// ExceptionResult is a faulted operation's result, as the clients read it
// (they raise the exception Type names).
type ExceptionResult struct {
	Type       string
	Message    string
	Error      string
	StatusCode int
}

// Info describes an operation for listings (the studio's notification
// area).
type Info struct {
	ID          int64
	Database    string // "" for a server-wide operation
	Kind        string // e.g. "DeleteByQuery", "UpdateByQuery", "IndexReset", "BulkConflictResolution"
	Description string
	Started     time.Time
	Ended       time.Time // zero while it runs
	Killable    bool
	State       State
}

// ErrKilled is the cause (context.Cause) of a job's context when the
// operation was killed (Kill); a registry closing cancels its jobs with
// plain context.Canceled instead.
var ErrKilled = errors.New("the operation was killed")

// Killed tells a job whether its context ended because the operation was
// killed, as opposed to the node shutting down (Close): a job that leaves
// something behind on a kill (a paused index) must not do so on a
// shutdown.
func Killed(ctx context.Context) bool { return errors.Is(context.Cause(ctx), ErrKilled) }

// Progress is how a running job reports how far it got.
type Progress struct {
	op *op
}

// ID is the operation's id.
func (p *Progress) ID() int64 { return p.op.info.ID }

// Set replaces the job's progress (a value that marshals to the client's
// progress shape, e.g. {"Processed":n,"Total":m}).
func (p *Progress) Set(v any) {
	p.op.r.mu.Lock()
	p.op.progress = v
	p.op.r.mu.Unlock()
	p.op.r.changed(p.op)
}

// Job is an operation's work: it returns the result, or an error (which
// faults the operation; a cancelled context cancels it).
type Job func(ctx context.Context, p *Progress) (any, error)

// Options configure a Registry.
type Options struct {
	Keep    time.Duration    // DefaultKeep when zero
	MaxKept int              // DefaultMaxKept when zero
	Now     func() time.Time // time.Now when nil
	// Describe turns a job's error into the exception the clients read
	// (the web layer's mapping of errors to RavenDB types and statuses).
	Describe func(error) ExceptionResult
	// OnChange is called (without locks held) when an operation starts,
	// reports progress or ends.
	OnChange func(Info)
}

type op struct {
	r                *Registry
	info             Info
	status           string
	progress, result any
	cancel           context.CancelCauseFunc
	done             chan struct{}
}

// Registry holds a node's operations. Ids are unique on the node, across
// databases (RavenDB numbers them per database; a client only needs an id
// it can poll).
type Registry struct {
	opts Options

	mu   sync.Mutex
	next int64
	ops  map[int64]*op
	base context.Context
	stop context.CancelFunc
}

// New makes a registry.
func New(opts Options) *Registry {
	if opts.Keep == 0 {
		opts.Keep = DefaultKeep
	}
	if opts.MaxKept == 0 {
		opts.MaxKept = DefaultMaxKept
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Describe == nil {
		opts.Describe = func(err error) ExceptionResult {
			return ExceptionResult{Type: "Raven.Client.Exceptions.RavenException", Message: err.Error(), Error: err.Error(), StatusCode: 500}
		}
	}
	base, stop := context.WithCancel(context.Background())
	return &Registry{opts: opts, ops: map[int64]*op{}, base: base, stop: stop}
}

// NextID reserves an id (GET /operations/next-operation-id): a client
// that starts an operation with it gets exactly that id.
func (r *Registry) NextID() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	return r.next
}

// Start registers an operation and runs job in its own goroutine; it
// returns the id once the operation is readable, so the reply that names
// the id can never be polled too early. id 0 takes a new id; a given id
// (from NextID) must not be in use.
func (r *Registry) Start(db string, id int64, kind, description string, killable bool, job Job) (int64, error) {
	r.mu.Lock()
	if id < 0 {
		r.mu.Unlock()
		return 0, dberr.New(dberr.BadRequest, "operation id %d is not valid", id)
	}
	if id == 0 {
		r.next++
		id = r.next
	} else if _, used := r.ops[id]; used {
		r.mu.Unlock()
		return 0, dberr.New(dberr.Concurrency, "operation %d already exists", id)
	} else if id > r.next {
		r.next = id
	}
	ctx, cancel := context.WithCancelCause(r.base)
	o := &op{r: r, status: InProgress, cancel: cancel, done: make(chan struct{}),
		info: Info{ID: id, Database: db, Kind: kind, Description: description, Started: r.opts.Now().UTC(), Killable: killable}}
	r.ops[id] = o
	r.pruneLocked()
	r.mu.Unlock()
	r.changed(o)
	go r.run(ctx, o, job)
	return id, nil
}

func (r *Registry) run(ctx context.Context, o *op, job Job) {
	defer close(o.done)
	var res any
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = dberr.New(dberr.Internal, "the operation failed: %v", p)
			}
		}()
		res, err = job(ctx, &Progress{op: o})
		return err
	}()
	r.mu.Lock()
	switch {
	case err == nil:
		o.status, o.result = Completed, res
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		o.status, o.result = Canceled, nil
	default:
		e := r.opts.Describe(err)
		o.status, o.result = Faulted, e
	}
	o.info.Ended = r.opts.Now().UTC()
	o.cancel(nil)
	r.mu.Unlock()
	r.changed(o)
}

func (r *Registry) changed(o *op) {
	if r.opts.OnChange == nil {
		return
	}
	r.mu.Lock()
	info := o.snapshot()
	r.mu.Unlock()
	r.opts.OnChange(info)
}

func (o *op) snapshot() Info {
	i := o.info
	i.State = State{Status: o.status, Progress: o.progress, Result: o.result}
	return i
}

// pruneLocked forgets finished operations past Keep, and the oldest
// finished ones beyond MaxKept.
func (r *Registry) pruneLocked() {
	now := r.opts.Now()
	var finished []*op
	for id, o := range r.ops {
		if o.status == InProgress {
			continue
		}
		if now.Sub(o.info.Ended) > r.opts.Keep {
			delete(r.ops, id)
			continue
		}
		finished = append(finished, o)
	}
	if len(finished) > r.opts.MaxKept {
		sort.Slice(finished, func(i, j int) bool { return finished[i].info.Ended.Before(finished[j].info.Ended) })
		for _, o := range finished[:len(finished)-r.opts.MaxKept] {
			delete(r.ops, o.info.ID)
		}
	}
}

// lookup finds an operation of a database ("" for server-wide ones).
func (r *Registry) lookup(db string, id int64) (*op, bool) {
	o, ok := r.ops[id]
	if !ok || !strings.EqualFold(o.info.Database, db) {
		return nil, false
	}
	return o, true
}

func notFound(id int64) error {
	return dberr.New(dberr.NotFound, "Operation %d does not exist (it may have finished more than the keep period ago).", id)
}

// State reads an operation's state.
func (r *Registry) State(db string, id int64) (State, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	o, ok := r.lookup(db, id)
	if !ok {
		return State{}, notFound(id)
	}
	return State{Status: o.status, Progress: o.progress, Result: o.result}, nil
}

// Get describes one operation.
func (r *Registry) Get(db string, id int64) (Info, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.lookup(db, id)
	if !ok {
		return Info{}, notFound(id)
	}
	return o.snapshot(), nil
}

// Kill cancels a running operation; killing a finished one does nothing.
func (r *Registry) Kill(db string, id int64) error {
	r.mu.Lock()
	o, ok := r.lookup(db, id)
	r.mu.Unlock()
	if !ok {
		return notFound(id)
	}
	if !o.info.Killable {
		return dberr.New(dberr.InvalidOperation, "Operation %d (%s) cannot be killed.", id, o.info.Kind)
	}
	o.cancel(ErrKilled)
	return nil
}

// Wait waits until an operation ends (or ctx does) and returns its state.
func (r *Registry) Wait(ctx context.Context, db string, id int64) (State, error) {
	r.mu.Lock()
	o, ok := r.lookup(db, id)
	r.mu.Unlock()
	if !ok {
		return State{}, notFound(id)
	}
	select {
	case <-o.done:
	case <-ctx.Done():
		return State{}, ctx.Err()
	}
	return r.State(db, id)
}

// List describes a database's operations ("" for server-wide ones), the
// newest first.
func (r *Registry) List(db string) []Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	var out []Info
	for _, o := range r.ops {
		if strings.EqualFold(o.info.Database, db) {
			out = append(out, o.snapshot())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	return out
}

// Running describes every running operation of the node, of every
// database and server-wide, the newest first (the studio's notification
// area).
func (r *Registry) Running() []Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Info
	for _, o := range r.ops {
		if o.status == InProgress {
			out = append(out, o.snapshot())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	return out
}

// Close cancels every running operation and waits for them to end.
func (r *Registry) Close() {
	r.stop()
	r.mu.Lock()
	var running []*op
	for _, o := range r.ops {
		running = append(running, o)
	}
	r.mu.Unlock()
	for _, o := range running {
		<-o.done
	}
}
