package conflicts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/natural"
	"github.com/rookerydb/rookery/backend/operations"
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
	// Versions are the id's versions; a preview operation keeps them
	// without their bodies (Body nil), to hold a whole scope in memory.
	Versions []storage.Version
	Strategy string // the strategy that applies (configured resolves per collection)
	Winner   int    // index into Versions, -1 when merged or declined
	Declined bool   // left for a person
	// Result is what it resolves to (nil when declined or failed); in a
	// preview operation without its body.
	Result *storage.Resolution
	Error  string
}

// Resolves tells whether the strategy resolves the id.
func (it PreviewItem) Resolves() bool { return it.Result != nil && it.Error == "" }

// Outcome names what the strategy does to the id: "version" (one of the
// versions as it is), "deletion", "merged" (a script's new document),
// "declined" (left for a person) or "error".
func (it PreviewItem) Outcome() string {
	switch {
	case it.Error != "":
		return OutcomeError
	case it.Declined || it.Result == nil:
		return OutcomeDeclined
	case it.Result.Tombstone:
		return OutcomeDeletion
	case it.Winner < 0:
		return OutcomeMerged
	}
	return OutcomeVersion
}

// Outcomes of a strategy on one id (PreviewItem.Outcome).
const (
	OutcomeVersion  = "version"
	OutcomeDeletion = "deletion"
	OutcomeMerged   = "merged"
	OutcomeDeclined = "declined"
	OutcomeError    = "error"
)

// Operation kinds: a resolution writes; a preview only decides, over the
// whole scope, and keeps what it decided for the person to look at and
// apply.
const (
	KindResolve = "resolve"
	KindPreview = "preview"
)

// Operation states.
const (
	Running   = "running"
	Cancelled = "cancelled"
	Done      = "done"
	Failed    = "failed"
)

// Progress is an operation's state.
type Progress struct {
	ID       int64
	Kind     string // resolve or preview
	Database string
	Spec     Spec
	State    string
	Total    int // conflicted ids in scope when it started
	Done     int // ids looked at
	// Resolved counts the ids resolved (a preview: that would resolve).
	Resolved int
	// Skipped counts the ids changed since the preview, no longer
	// conflicted, or declined (a preview: declined, left for a person).
	Skipped int
	Errors  int
	Expired bool `json:",omitempty"` // a preview whose items were dropped to bound memory
	// OperationID is the node's operations registry id of the resolution's
	// latest run (each start and resume is one run: /operations/state,
	// /operations/kill); 0 for a preview, or a manager without a registry.
	OperationID int64  `json:",omitempty"`
	LastError   string `json:",omitempty"`
	Started     time.Time
	Ended       time.Time `json:",omitzero"`
}

// Operation is a running or finished bulk resolution.
type Operation struct {
	m      *Manager
	store  Store
	mu     sync.Mutex
	p      Progress
	cursor string // last key handled: resume starts after it
	// pinned are the ids of an operation pinned to a preview, in natural
	// order; pos is how many are handled (resume starts there).
	pinned []string
	pos    int
	items  []PreviewItem // a preview's decisions
	cancel func()
	// kill is set by Cancel: a run registered in the operations registry
	// that starts after it kills itself (Cancel came before the registry
	// knew the run).
	kill bool
	done chan struct{}
}

// Items returns a finished preview's decisions in natural id order (nil
// while it runs, or once expired).
func (o *Operation) Items() []PreviewItem {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.p.State != Done {
		return nil
	}
	return o.items
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
	// Operations, when set, registers every run of a resolution (not of a
	// preview) as an operation of kind OperationKind: listed with the
	// database's operations, its RunProgress readable in /operations/state
	// while it runs and after it ends, killed by /operations/kill (which is
	// what Cancel does then).
	Operations *operations.Registry
	// KeepPreviews is how many finished previews keep their decisions
	// (DefaultKeepPreviews when 0); an older one must be run again.
	KeepPreviews int

	mu   sync.Mutex
	next int64
	ops  map[int64]*Operation

	sumMu     sync.Mutex
	summaries map[string]*cachedSummary // database → last summary
}

// DefaultKeepPreviews bounds the previews held in memory: each holds one
// small record per conflicted id in its scope.
const DefaultKeepPreviews = 8

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

// Start begins a bulk resolution in the background. An operation pinned
// to a preview (Spec.Expected) walks exactly the previewed ids, however
// many, in natural order; otherwise it walks the scope.
func (m *Manager) Start(st Store, spec Spec) (*Operation, error) {
	return m.begin(st, spec, KindResolve)
}

// StartPreview decides the whole scope in the background without writing:
// the operation's progress counts what would resolve, and Items gives
// every decision once it is done. ApplyPreview resolves exactly that.
func (m *Manager) StartPreview(st Store, spec Spec) (*Operation, error) {
	spec.Expected = nil
	return m.begin(st, spec, KindPreview)
}

// ApplyPreview starts the resolution a finished preview showed: every id
// it would resolve, each only while its versions are those previewed.
func (m *Manager) ApplyPreview(st Store, preview *Operation, by string) (*Operation, error) {
	p := preview.Progress()
	if p.Kind != KindPreview || !strings.EqualFold(p.Database, st.Name()) {
		return nil, dberr.New(dberr.BadRequest, "operation %d is not a preview of %s", p.ID, st.Name())
	}
	if p.State != Done {
		return nil, dberr.New(dberr.BadRequest, "preview %d is %s; apply a finished preview", p.ID, p.State)
	}
	items := preview.Items()
	if p.Expired || items == nil {
		return nil, dberr.New(dberr.BadRequest, "preview %d is too old to apply (newer previews replaced it); preview again", p.ID)
	}
	spec := p.Spec
	spec.By, spec.Expected = by, map[string]string{}
	for _, it := range items {
		if it.Resolves() {
			spec.Expected[it.ID] = it.Fingerprint
		}
	}
	if len(spec.Expected) == 0 {
		return nil, dberr.New(dberr.BadRequest, "preview %d resolves nothing; choose another strategy", p.ID)
	}
	return m.begin(st, spec, KindResolve)
}

func (m *Manager) begin(st Store, spec Spec, kind string) (*Operation, error) {
	if err := m.checkSpec(&spec); err != nil {
		return nil, err
	}
	op := &Operation{m: m, store: st}
	var total int
	if spec.Expected != nil {
		for id := range spec.Expected {
			op.pinned = append(op.pinned, id)
		}
		slices.SortFunc(op.pinned, func(a, b string) int { return natural.Compare(storage.LowerID(a), storage.LowerID(b)) })
		total = len(op.pinned)
	} else {
		var err error
		if total, err = st.ConflictTotal(context.Background(), spec.filter()); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	m.next++
	op.p = Progress{ID: m.next, Kind: kind, Database: st.Name(), Spec: spec, Total: total, Started: time.Now().UTC()}
	m.ops[op.p.ID] = op
	m.trim()
	m.mu.Unlock()
	op.start()
	return op, nil
}

// trim keeps the 100 newest finished operations, and the decisions of the
// newest finished previews only. Called with m.mu held.
func (m *Manager) trim() {
	ids := make([]int64, 0, len(m.ops))
	for id := range m.ops {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] > ids[b] })
	keep := m.KeepPreviews
	if keep <= 0 {
		keep = DefaultKeepPreviews
	}
	previews := 0
	for i, id := range ids {
		op := m.ops[id]
		op.mu.Lock()
		state, kind := op.p.State, op.p.Kind
		if kind == KindPreview && state != Running {
			previews++
			if previews > keep && op.items != nil {
				op.items, op.p.Expired = nil, true
			}
		}
		op.mu.Unlock()
		if i >= 100 && state != Running {
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

// List returns a database's operations (resolutions and previews),
// newest first.
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
	o.mu.Lock()
	o.p.State, o.p.Ended = Running, time.Time{}
	o.kill = false
	o.done = make(chan struct{})
	done, db := o.done, o.p.Database
	reg := o.m.Operations
	if o.p.Kind != KindResolve {
		reg = nil
	}
	if reg == nil {
		ctx, cancel := context.WithCancel(context.Background())
		o.cancel = cancel
		o.mu.Unlock()
		go func() {
			defer close(done)
			defer cancel()
			o.finish(o.run(ctx, nil))
		}()
		return
	}
	// The id is taken before the run is registered, so Cancel can always
	// name it.
	id := reg.NextID()
	o.p.OperationID = id
	o.cancel = func() { _ = reg.Kill(db, id) }
	desc := o.describeLocked()
	o.mu.Unlock()
	_, err := reg.Start(db, id, OperationKind, desc, true, func(ctx context.Context, p *operations.Progress) (any, error) {
		defer close(done)
		o.mu.Lock()
		kill := o.kill
		o.mu.Unlock()
		if kill {
			_ = reg.Kill(db, id)
		}
		err := o.run(ctx, p)
		res := o.finish(err)
		if err != nil {
			return nil, err
		}
		res.Message = fmt.Sprintf("Resolved %d of %d conflicted ids (%d skipped, %d errors).", res.Resolved, res.Total, res.Skipped, res.Errors)
		return res, nil
	})
	if err != nil { // not registered: the run never started
		o.finish(err)
		close(done)
	}
}

// OperationKind is the kind of a resolution's runs in the operations
// registry (Manager.Operations).
const OperationKind = "BulkConflictResolution"

// RunProgress is a resolution's progress in the operations registry, the
// Processed/Total shape the clients read, and its result once it completed
// (with Message). The counts are the operation's: a resumed operation's
// include its earlier runs.
type RunProgress struct {
	Processed int // ids looked at
	Total     int // conflicted ids in scope when the operation started
	Resolved  int
	Skipped   int // changed since the preview, no longer conflicted, declined
	Errors    int
	LastError string `json:",omitempty"`
	// Operation is the bulk operation's number (GET
	// /databases/{db}/conflicts/operations/{Operation}).
	Operation int64
	Message   string `json:",omitempty"`
}

func (o *Operation) runProgressLocked() RunProgress {
	return RunProgress{Processed: o.p.Done, Total: o.p.Total, Resolved: o.p.Resolved, Skipped: o.p.Skipped, Errors: o.p.Errors,
		LastError: o.p.LastError, Operation: o.p.ID}
}

// describeLocked is the run's description in the operations registry.
func (o *Operation) describeLocked() string {
	s := o.p.Spec
	scope := "every conflict"
	switch {
	case s.Expected != nil:
		scope = fmt.Sprintf("%d previewed ids", len(s.Expected))
	case len(s.Scope.IDs) > 0:
		scope = fmt.Sprintf("%d chosen ids", len(s.Scope.IDs))
	case s.Scope.Collection != "" && s.Scope.Prefix != "":
		scope = fmt.Sprintf("collection %s, ids starting with %q", s.Scope.Collection, s.Scope.Prefix)
	case s.Scope.Collection != "":
		scope = "collection " + s.Scope.Collection
	case s.Scope.Prefix != "":
		scope = fmt.Sprintf("ids starting with %q", s.Scope.Prefix)
	}
	return fmt.Sprintf("conflict resolution %d (%s) on %s", o.p.ID, s.Strategy, scope)
}

// finish records how a run ended and tells OnChange.
func (o *Operation) finish(err error) RunProgress {
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
	res, db := o.runProgressLocked(), o.p.Database
	o.mu.Unlock()
	o.m.changed(db)
	return res
}

// Cancel stops a running operation between two ids: the ids already
// handled stay resolved (their writes in flight complete), the others are
// not touched; it can be resumed. A registered run is killed through the
// registry, so it ends Canceled there too.
func (o *Operation) Cancel() {
	o.mu.Lock()
	o.kill = true
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
	if state != Running && state != Done {
		o.p.State = Running // a second Resume meanwhile is refused
	}
	o.mu.Unlock()
	if state == Running || state == Done {
		return dberr.New(dberr.BadRequest, "operation %d is %s; only a cancelled or failed operation can be resumed", o.p.ID, state)
	}
	o.start()
	return nil
}

// nextChunk returns the next ids to handle (with their collections when
// known) and the cursor after them: the pinned ids from pos, or the scope's
// conflicted ids after the cursor in key order.
func (o *Operation) nextChunk(ctx context.Context, spec Spec, chunk int) ([]string, string, int, error) {
	o.mu.Lock()
	cursor, pos, pinned := o.cursor, o.pos, o.pinned
	o.mu.Unlock()
	if pinned != nil {
		end := min(len(pinned), pos+chunk)
		return pinned[pos:end], "", end, nil
	}
	f := spec.filter()
	f.AfterKey = cursor
	list, last, err := o.store.ConflictList(ctx, f, chunk)
	if err != nil {
		return nil, "", 0, err
	}
	ids := make([]string, len(list))
	for i, c := range list {
		ids[i] = c.ID
	}
	return ids, last, 0, nil
}

// run works through the scope chunk by chunk. A resolution submits each
// id as its own write request, so group commit puts a chunk in one
// transaction while each id stays atomic: it resolves only if its versions
// are still the ones decided on. A preview only decides, and keeps each
// decision (without bodies). A cancelled ctx stops it between two ids: the
// writes already submitted complete and are counted, the cursor stays after
// the last id handled, and it returns ctx.Err(). p, when not nil, hears the
// progress after every chunk (the operations registry).
func (o *Operation) run(ctx context.Context, p *operations.Progress) error {
	chunk := o.m.Chunk
	if chunk <= 0 {
		chunk = 256
	}
	o.mu.Lock()
	spec, kind, db := o.p.Spec, o.p.Kind, o.p.Database
	rp := o.runProgressLocked()
	o.mu.Unlock()
	if p != nil {
		p.Set(rp)
	}
	by := fmt.Sprintf("bulk operation %d", o.p.ID)
	if spec.By != "" {
		by += " (" + spec.By + ")"
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		ids, last, pos, err := o.nextChunk(ctx, spec, chunk)
		if err != nil {
			return stopErr(ctx, err)
		}
		if len(ids) == 0 {
			if kind == KindPreview {
				o.mu.Lock()
				slices.SortFunc(o.items, func(a, b PreviewItem) int {
					return natural.Compare(storage.LowerID(a.ID), storage.LowerID(b.ID))
				})
				o.mu.Unlock()
			}
			return nil
		}
		versions, err := o.store.ConflictVersions(ctx, ids)
		if err != nil {
			return stopErr(ctx, err)
		}
		var resolved, skipped, failed, handled int
		var lastErr string
		var items []PreviewItem
		var wg sync.WaitGroup
		var mu sync.Mutex
		stopped := false
		for _, id := range ids {
			if ctx.Err() != nil {
				stopped = true
				break
			}
			vs := versions[storage.LowerID(id)]
			fp := storage.Fingerprint(vs)
			if want, ok := spec.expected(id); ok && want != fp {
				handled++
				skipped++ // changed since the preview
				continue
			}
			if len(vs) == 0 {
				handled++
				skipped++ // resolved meanwhile
				continue
			}
			strategy, d, err := o.m.decide(ctx, o.store, spec, vs)
			if err != nil && ctx.Err() != nil {
				stopped = true // interrupted: this id is not handled
				break
			}
			handled++
			if kind == KindPreview {
				it := previewItem(vs, fp, strategy, d, err)
				switch it.Outcome() {
				case OutcomeError:
					failed++
					lastErr = vs[0].ID + ": " + it.Error
				case OutcomeDeclined:
					skipped++
				default:
					resolved++
				}
				items = append(items, it)
				continue
			}
			if err != nil {
				failed++
				lastErr = id + ": " + err.Error()
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
			}(id, d.Resolution)
		}
		wg.Wait()
		o.mu.Lock()
		switch {
		case handled == len(ids):
			o.cursor, o.pos = last, pos
		case handled > 0 && o.pinned != nil:
			o.pos = pos - len(ids) + handled
		case handled > 0:
			o.cursor = storage.LowerID(ids[handled-1])
		}
		o.items = append(o.items, items...)
		o.p.Done += handled
		o.p.Resolved += resolved
		o.p.Skipped += skipped
		o.p.Errors += failed
		if lastErr != "" {
			o.p.LastError = lastErr
		}
		rp := o.runProgressLocked()
		o.mu.Unlock()
		if p != nil {
			p.Set(rp)
		}
		o.m.changed(db)
		if stopped {
			return ctx.Err()
		}
	}
}

// stopErr is err, or ctx's error when ctx ended (a read cut short by a
// cancel is a cancel, not a failure).
func stopErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// previewItem records one decision without the bodies.
func previewItem(vs []storage.Version, fp, strategy string, d Decision, err error) PreviewItem {
	it := PreviewItem{ID: vs[0].ID, Collection: vs[0].Collection, Fingerprint: fp, Strategy: strategy, Winner: -1,
		Versions: make([]storage.Version, len(vs))}
	for i, v := range vs {
		v.Body = nil
		it.Versions[i] = v
	}
	switch {
	case err != nil:
		it.Error = err.Error()
	case d.Declined:
		it.Declined = true
	default:
		res := d.Resolution
		res.Body = nil
		it.Result, it.Winner = &res, d.Winner
	}
	return it
}
