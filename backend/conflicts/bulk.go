package conflicts

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
)

// Configured, as a bulk strategy, applies each collection's configured
// strategy (a manual collection is left alone).
const Configured = "configured"

// Store is what bulk operations need of a database.
type Store interface {
	Name() string
	NodeTag() string
	ConflictList(ctx context.Context, f storage.ConflictFilter, limit int) ([]storage.ConflictSummary, string, error)
	ConflictTotal(ctx context.Context, f storage.ConflictFilter) (int, error)
	ConflictVersions(ctx context.Context, ids []string) (map[string][]storage.Version, error)
	Write(ctx context.Context, fn func(tx *storage.Tx) error) error
}

// Scope is which conflicts an operation covers. Empty: all of them.
type Scope struct {
	Collection string   `json:",omitempty"`
	Prefix     string   `json:",omitempty"`
	IDs        []string `json:",omitempty"`
}

// Spec describes a bulk resolution.
type Spec struct {
	Strategy string // latest, local, node:TAG, script, configured
	Script   string `json:",omitempty"`
	Scope    Scope
	// Expected pins the operation to a preview: only these ids (lower-cased
	// or not), each only while its versions' fingerprint is the one shown.
	Expected map[string]string `json:",omitempty"`
	// By is who started it, for the resolution log.
	By string `json:",omitempty"`
}

// PreviewItem is what a strategy would do to one conflicted id.
type PreviewItem struct {
	ID          string
	Collection  string
	Fingerprint string
	Versions    []storage.Version
	Strategy    string // the strategy that applies (configured resolves per collection)
	Winner      int    // index into Versions, -1 when merged or declined
	Declined    bool   // left for a person
	Result      *storage.Resolution
	Error       string
}

// Operation states.
const (
	Running   = "running"
	Cancelled = "cancelled"
	Done      = "done"
	Failed    = "failed"
)

// Progress is an operation's state.
type Progress struct {
	ID        int64
	Database  string
	Spec      Spec
	State     string
	Total     int // conflicted ids in scope when it started
	Done      int // ids looked at
	Resolved  int
	Skipped   int // changed since the preview, no longer conflicted, or declined
	Errors    int
	LastError string `json:",omitempty"`
	Started   time.Time
	Ended     time.Time `json:",omitzero"`
}

// Operation is a running or finished bulk resolution.
type Operation struct {
	m      *Manager
	store  Store
	mu     sync.Mutex
	p      Progress
	cursor string // last key handled: resume starts after it
	cancel context.CancelFunc
	done   chan struct{}
}

// Progress returns a copy of the operation's state.
func (o *Operation) Progress() Progress {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.p
	return p
}

// Wait blocks until the operation stops running.
func (o *Operation) Wait(ctx context.Context) error {
	o.mu.Lock()
	done := o.done
	o.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Manager runs bulk operations on this node.
type Manager struct {
	Engine   *Engine
	Auto     *Auto // for the configured strategy
	Chunk    int   // ids per transaction (256 when 0)
	OnChange func(database string)

	mu   sync.Mutex
	next int64
	ops  map[int64]*Operation
}

// NewManager returns a manager using the engine (and auto's configuration
// for the configured strategy).
func NewManager(e *Engine, auto *Auto) *Manager {
	return &Manager{Engine: e, Auto: auto, ops: map[int64]*Operation{}}
}

func (m *Manager) changed(db string) {
	if m.OnChange != nil {
		m.OnChange(db)
	}
}

// checkSpec normalises the strategy.
func (m *Manager) checkSpec(spec *Spec) error {
	if strings.EqualFold(strings.TrimSpace(spec.Strategy), Configured) {
		spec.Strategy = Configured
		return nil
	}
	norm, err := checkStrategy(spec.Strategy, spec.Script, true)
	if err != nil {
		return dberr.New(dberr.BadRequest, "%v", err)
	}
	if norm == "" {
		norm = Latest
	}
	if norm == Manual {
		return dberr.New(dberr.BadRequest, "manual resolves nothing; choose latest, local, node:<tag>, script or configured")
	}
	spec.Strategy = norm
	return nil
}

func (s Spec) filter() storage.ConflictFilter {
	f := storage.ConflictFilter{Collection: s.Scope.Collection, Prefix: s.Scope.Prefix, IDs: s.Scope.IDs}
	if s.Expected != nil {
		f.IDs = f.IDs[:0:0]
		for id := range s.Expected {
			f.IDs = append(f.IDs, id)
		}
		sort.Strings(f.IDs)
		if len(f.IDs) == 0 {
			f.IDs = []string{"\x00none"}
		}
	}
	return f
}

func (s Spec) expected(id string) (string, bool) {
	if s.Expected == nil {
		return "", false
	}
	if fp, ok := s.Expected[id]; ok {
		return fp, true
	}
	fp, ok := s.Expected[storage.LowerID(id)]
	if !ok {
		for k, v := range s.Expected {
			if strings.EqualFold(k, id) {
				return v, true
			}
		}
	}
	return fp, ok
}

// decide applies the spec's strategy to one id's versions.
func (m *Manager) decide(ctx context.Context, st Store, spec Spec, versions []storage.Version) (string, Decision, error) {
	strategy, script := spec.Strategy, spec.Script
	if strategy == Configured {
		if m.Auto == nil {
			strategy, script = Latest, ""
		} else {
			strategy, script = m.Auto.Config(st.Name()).For(versions[0].Collection)
		}
	}
	d, err := m.Engine.Decide(ctx, strategy, script, st.NodeTag(), versions)
	return strategy, d, err
}

// Preview shows what the spec would do to up to limit conflicted ids in its
// scope, without writing anything, and how many ids the scope holds.
func (m *Manager) Preview(ctx context.Context, st Store, spec Spec, limit int) ([]PreviewItem, int, error) {
	if err := m.checkSpec(&spec); err != nil {
		return nil, 0, err
	}
	f := spec.filter()
	total, err := st.ConflictTotal(ctx, f)
	if err != nil {
		return nil, 0, err
	}
	list, _, err := st.ConflictList(ctx, f, limit)
	if err != nil {
		return nil, 0, err
	}
	ids := make([]string, len(list))
	for i, c := range list {
		ids[i] = c.ID
	}
	versions, err := st.ConflictVersions(ctx, ids)
	if err != nil {
		return nil, 0, err
	}
	out := make([]PreviewItem, 0, len(list))
	for _, c := range list {
		vs := versions[storage.LowerID(c.ID)]
		if len(vs) == 0 {
			continue
		}
		it := PreviewItem{ID: c.ID, Collection: c.Collection, Fingerprint: storage.Fingerprint(vs), Versions: vs, Winner: -1}
		strategy, d, err := m.decide(ctx, st, spec, vs)
		it.Strategy = strategy
		switch {
		case err != nil:
			it.Error = err.Error()
		case d.Declined:
			it.Declined = true
		default:
			res := d.Resolution
			it.Result, it.Winner = &res, d.Winner
		}
		out = append(out, it)
	}
	return out, total, nil
}

// Start begins a bulk resolution in the background.
func (m *Manager) Start(st Store, spec Spec) (*Operation, error) {
	if err := m.checkSpec(&spec); err != nil {
		return nil, err
	}
	total, err := st.ConflictTotal(context.Background(), spec.filter())
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.next++
	op := &Operation{m: m, store: st, p: Progress{ID: m.next, Database: st.Name(), Spec: spec, Total: total, Started: time.Now().UTC()}}
	m.ops[op.p.ID] = op
	m.trim()
	m.mu.Unlock()
	op.start()
	return op, nil
}

// trim keeps the 100 newest finished operations. Called with m.mu held.
func (m *Manager) trim() {
	if len(m.ops) <= 100 {
		return
	}
	ids := make([]int64, 0, len(m.ops))
	for id := range m.ops {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	for _, id := range ids[:len(ids)-100] {
		if m.ops[id].Progress().State != Running {
			delete(m.ops, id)
		}
	}
}

// Get returns an operation of the database by id.
func (m *Manager) Get(database string, id int64) (*Operation, bool) {
	m.mu.Lock()
	op, ok := m.ops[id]
	m.mu.Unlock()
	if !ok || !strings.EqualFold(op.Progress().Database, database) {
		return nil, false
	}
	return op, true
}

// List returns a database's operations, newest first.
func (m *Manager) List(database string) []Progress {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Progress
	for _, op := range m.ops {
		if p := op.Progress(); strings.EqualFold(p.Database, database) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID > out[b].ID })
	return out
}

func (o *Operation) start() {
	ctx, cancel := context.WithCancel(context.Background())
	o.mu.Lock()
	o.p.State, o.p.Ended = Running, time.Time{}
	o.cancel = cancel
	o.done = make(chan struct{})
	done := o.done
	o.mu.Unlock()
	go func() {
		defer close(done)
		defer cancel()
		err := o.run(ctx)
		o.mu.Lock()
		switch {
		case errors.Is(err, context.Canceled):
			o.p.State = Cancelled
		case err != nil:
			o.p.State, o.p.LastError = Failed, err.Error()
		default:
			o.p.State = Done
		}
		o.p.Ended = time.Now().UTC()
		o.mu.Unlock()
		o.m.changed(o.p.Database)
	}()
}

// Cancel stops a running operation after the chunk in flight; it can be
// resumed.
func (o *Operation) Cancel() {
	o.mu.Lock()
	cancel := o.cancel
	o.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Resume continues a cancelled or failed operation where it stopped.
func (o *Operation) Resume() error {
	o.mu.Lock()
	state := o.p.State
	o.mu.Unlock()
	if state == Running || state == Done {
		return dberr.New(dberr.BadRequest, "operation %d is %s; only a cancelled or failed operation can be resumed", o.p.ID, state)
	}
	o.start()
	return nil
}

// run resolves the scope chunk by chunk, in id order after the cursor. Each
// id is its own write request, so group commit puts a chunk in one
// transaction while each id stays atomic: it resolves only if its versions
// are still the ones decided on.
func (o *Operation) run(ctx context.Context) error {
	chunk := o.m.Chunk
	if chunk <= 0 {
		chunk = 256
	}
	o.mu.Lock()
	spec := o.p.Spec
	o.mu.Unlock()
	by := fmt.Sprintf("bulk operation %d", o.p.ID)
	if spec.By != "" {
		by += " (" + spec.By + ")"
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		f := spec.filter()
		o.mu.Lock()
		f.AfterKey = o.cursor
		o.mu.Unlock()
		list, last, err := o.store.ConflictList(ctx, f, chunk)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return nil
		}
		ids := make([]string, len(list))
		for i, c := range list {
			ids[i] = c.ID
		}
		versions, err := o.store.ConflictVersions(ctx, ids)
		if err != nil {
			return err
		}
		var resolved, skipped, failed int
		var lastErr string
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, c := range list {
			vs := versions[storage.LowerID(c.ID)]
			fp := storage.Fingerprint(vs)
			if want, ok := spec.expected(c.ID); ok && want != fp {
				skipped++ // changed since the preview
				continue
			}
			if len(vs) == 0 {
				skipped++
				continue
			}
			_, d, err := o.m.decide(ctx, o.store, spec, vs)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				failed++
				lastErr = c.ID + ": " + err.Error()
				continue
			}
			if d.Declined {
				skipped++
				continue
			}
			wg.Add(1)
			go func(id string, res storage.Resolution) {
				defer wg.Done()
				var ok bool
				err := o.store.Write(context.WithoutCancel(ctx), func(tx *storage.Tx) error {
					var err error
					ok, _, err = tx.ResolveConflict(id, fp, res, by)
					return err
				})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					failed++
					lastErr = id + ": " + err.Error()
				case ok:
					resolved++
				default:
					skipped++ // changed between reading and writing
				}
			}(c.ID, d.Resolution)
		}
		wg.Wait()
		o.mu.Lock()
		o.cursor = last
		o.p.Done += len(list)
		o.p.Resolved += resolved
		o.p.Skipped += skipped
		o.p.Errors += failed
		if lastErr != "" {
			o.p.LastError = lastErr
		}
		o.mu.Unlock()
		o.m.changed(o.p.Database)
	}
}
