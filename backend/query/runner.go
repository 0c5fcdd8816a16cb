// Package query runs RQL queries (POST /queries and friends) over a
// database: collection and id() queries straight over the documents, the
// others over an index, picking or creating RavenDB-named auto indexes. It
// speaks no HTTP: the API layer decodes a Request and writes the Result.
package query

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/rql"
	"github.com/rookerydb/rookery/backend/storage"
)

// Options tune a Runner; zero values take the defaults named.
type Options struct {
	// NewIndexWait is how long a query that created an auto index waits
	// for it to catch up, so the first query sees data (RavenDB: 15 s); the
	// query's own WaitForNonStaleResultsTimeout wins when it gives one.
	NewIndexWait time.Duration
	// DefaultWait is the WaitForNonStaleResults timeout when the request
	// gives none (15 s, the clients' default).
	DefaultWait time.Duration
	// DisableAutoIndexes refuses dynamic queries that need a new auto index
	// (Indexing.DisableQueryOptimizerGeneratedIndexes).
	DisableAutoIndexes bool
	Now                func() time.Time
	Logger             *slog.Logger
	// CmpXchg reads a database's compare-exchange value by key (ok false
	// when there is none) for include cmpxchg(); the server wires the
	// cluster's. Nil: such queries are refused.
	CmpXchg func(db, key string) (v CmpXchgValue, ok bool)
}

// Runner runs queries. It is safe for concurrent use.
type Runner struct {
	defs    Definitions
	indexes Indexes
	opts    Options

	planMu sync.Map // database name (lower-cased) -> *sync.Mutex: one auto-index decision at a time per database
}

func (r *Runner) planLock(db string) *sync.Mutex {
	m, _ := r.planMu.LoadOrStore(strings.ToLower(db), &sync.Mutex{})
	return m.(*sync.Mutex)
}

// NewRunner returns a runner over the cluster's definitions and the node's
// open indexes.
func NewRunner(defs Definitions, indexes Indexes, opts Options) *Runner {
	if opts.NewIndexWait <= 0 {
		opts.NewIndexWait = 15 * time.Second
	}
	if opts.DefaultWait <= 0 {
		opts.DefaultWait = 15 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Runner{defs: defs, indexes: indexes, opts: opts}
}

// exec is one query being run.
type exec struct {
	r      *Runner
	db     *storage.DB
	req    Request
	q      *rql.Query
	params map[string]any
	skip   int
	take   int // < 0: all
	start  time.Time
	cutoff int64 // the database's last etag when the query started

	// served by an index
	idx       Index
	mapReduce bool
	rename    map[string]string // select alias -> reduce output field

	res     *Result
	timings map[string]*Timings
	// counterIDs are the documents rendered, for include counters().
	counterIDs []string
	// counterNames are the counters the select's counter() and
	// counterRaw() items read, in select order (counters.go).
	counterNames []string
	streaming    bool // Stream: page through the hits
}

func (e *exec) stage(name string, since time.Time) {
	if e.timings != nil {
		e.timings[name] = &Timings{DurationInMs: time.Since(since).Milliseconds()}
	}
}

// Run runs a query and returns its whole (paged) answer.
func (r *Runner) Run(ctx context.Context, db *storage.DB, req Request) (*Result, error) {
	e, err := r.prepare(ctx, db, req, false)
	if err != nil {
		return nil, err
	}
	var out []json.RawMessage
	var bodies []map[string]any // for includes
	wantBodies := (len(e.q.Include) > 0 || len(e.q.CmpXchg) > 0) && !req.MetadataOnly
	emit := func(raw json.RawMessage, body map[string]any) error {
		out = append(out, raw)
		if wantBodies {
			bodies = append(bodies, body)
		}
		return nil
	}
	t := time.Now()
	if err := e.run(ctx, emit, wantBodies); err != nil {
		return nil, err
	}
	e.stage("Query", t)
	e.res.Results = out
	if len(e.q.Include) > 0 && !req.MetadataOnly {
		t := time.Now()
		if err := e.includes(ctx, bodies); err != nil {
			return nil, err
		}
		e.stage("Includes", t)
	}
	if e.q.Counters != nil && !req.MetadataOnly {
		if err := e.includeCounters(ctx); err != nil {
			return nil, err
		}
	}
	if len(e.q.CmpXchg) > 0 && !req.MetadataOnly {
		if err := e.includeCmpXchg(bodies); err != nil {
			return nil, err
		}
	}
	return e.finish(), nil
}

// Stream visits the results one by one without holding them (for
// /streams/queries); the returned Result has the statistics and no
// Results. Includes are not streamed (nor are they by RavenDB).
func (r *Runner) Stream(ctx context.Context, db *storage.DB, req Request, fn func(result json.RawMessage) error) (*Result, error) {
	e, err := r.prepare(ctx, db, req, false)
	if err != nil {
		return nil, err
	}
	e.streaming = true
	if err := e.run(ctx, func(raw json.RawMessage, _ map[string]any) error { return fn(raw) }, false); err != nil {
		return nil, err
	}
	return e.finish(), nil
}

// IDs hands the ids of the documents a query matches to fn, batch at a time
// (patch and delete by query). Documents written after the query started
// are not visited (a patched document is not patched again). It refuses
// map-reduce queries. The set is read before the first batch is handed over
// for index queries, so fn may change what it gets.
func (r *Runner) IDs(ctx context.Context, db *storage.DB, req Request, batch int, fn func(ids []string) error) (*Result, error) {
	if batch <= 0 {
		batch = 1024
	}
	e, err := r.prepare(ctx, db, req, true)
	if err != nil {
		return nil, err
	}
	if e.mapReduce {
		return nil, &InvalidQueryError{Query: req.Query, Err: errors.New("a map-reduce (group by) query has no documents to patch or delete")}
	}
	var ids []string
	flush := func() error {
		if len(ids) == 0 {
			return nil
		}
		err := fn(ids)
		ids = nil
		return err
	}
	if e.idx != nil {
		// Snapshot the ids first: changing documents moves index entries.
		all, err := e.indexIDs(ctx)
		if err != nil {
			return nil, err
		}
		for _, id := range all {
			ids = append(ids, id)
			if len(ids) == batch {
				if err := flush(); err != nil {
					return nil, err
				}
			}
		}
	} else {
		err := e.collection(ctx, true, func(d *storage.Document) (bool, error) {
			ids = append(ids, d.ID)
			if len(ids) == batch {
				return false, flush()
			}
			return false, nil
		})
		if err != nil {
			return nil, err
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return e.finish(), nil
}

// prepare parses the query, resolves paging and picks what serves it.
func (r *Runner) prepare(ctx context.Context, db *storage.DB, req Request, forUpdate bool) (*exec, error) {
	start := r.opts.Now()
	q, err := rql.Parse(req.Query)
	if err != nil {
		return nil, &InvalidQueryError{Query: req.Query, Err: err}
	}
	if q.Update != nil && !forUpdate {
		return nil, &InvalidQueryError{Query: req.Query, Err: errors.New("a query with update { … } is a patch: send it with PATCH /queries")}
	}
	if req.ProjectionBehavior == "FromIndexOrThrow" && len(q.Select) > 0 && len(q.GroupBy) == 0 {
		return nil, &InvalidQueryError{Query: req.Query, Err: errors.New("ProjectionBehavior FromIndexOrThrow: this index stores no fields; projections are read from the documents")}
	}
	e := &exec{r: r, db: db, req: req, q: q, params: req.QueryParameters, start: start, cutoff: db.LastEtag()}
	if e.params == nil {
		e.params = map[string]any{}
	}
	e.res = &Result{NodeTag: db.NodeTag(), LastQueryTime: start.UTC()}
	if q.Timings {
		e.timings = map[string]*Timings{}
	}
	if e.skip, err = e.intValue(q.Skip, 0); err != nil {
		return nil, err
	}
	if e.take, err = e.intValue(q.Take, -1); err != nil {
		return nil, err
	}
	if forUpdate {
		e.skip, e.take = 0, -1
	}
	for _, p := range q.Include {
		e.res.IncludedPaths = append(e.res.IncludedPaths, p.String())
	}
	if err := e.counterProjections(); err != nil {
		return nil, err
	}
	if len(q.CmpXchg) > 0 && r.opts.CmpXchg == nil && !forUpdate {
		return nil, dberr.New(dberr.Unavailable, "include cmpxchg() needs the cluster's compare-exchange values, which this node does not serve")
	}
	t := time.Now()
	switch {
	case q.Index != "":
		err = e.staticIndex(ctx)
	case len(q.GroupBy) == 0 && onlyIDs(q.Where) && collectionOrder(q.OrderBy):
		e.collectionPlan()
	default:
		err = e.autoIndex(ctx)
	}
	if err != nil {
		return nil, err
	}
	if e.mapReduce && len(e.counterNames) > 0 {
		return nil, &InvalidQueryError{Query: req.Query, Err: fmt.Errorf("counter() and counterRaw() read a document's counters; the results of the map-reduce index %s are not documents", e.idx.Name())}
	}
	e.stage("Planning", t)
	return e, nil
}

// collectionOrder: a collection query sorts by nothing but id(), score()
// (no scores there) or random().
func collectionOrder(os []rql.Order) bool {
	for _, o := range os {
		if !o.Random && !o.Score && !o.Field.ID {
			return false
		}
	}
	return true
}

func (e *exec) intValue(v *rql.Value, def int) (int, error) {
	if v == nil {
		return def, nil
	}
	x := v.Literal
	if v.Param != "" {
		var ok bool
		if x, ok = e.params[v.Param]; !ok {
			return 0, &InvalidQueryError{Query: e.req.Query, Err: fmt.Errorf("the query uses $%s, which has no value", v.Param)}
		}
	}
	var f float64
	switch n := x.(type) {
	case nil:
		return def, nil
	case float64:
		f = n
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, &InvalidQueryError{Query: e.req.Query, Err: fmt.Errorf("limit and offset take whole numbers, not %v", x)}
		}
	default:
		return 0, &InvalidQueryError{Query: e.req.Query, Err: fmt.Errorf("limit and offset take whole numbers, not %v", x)}
	}
	if f < 0 || f != float64(int64(f)) || f > 1<<31 {
		return 0, &InvalidQueryError{Query: e.req.Query, Err: fmt.Errorf("limit and offset take whole numbers between 0 and 2^31, not %v", x)}
	}
	return int(f), nil
}

func (e *exec) collectionPlan() {
	coll := e.q.Collection
	if strings.EqualFold(coll, index.AllDocs) {
		e.res.IndexName = "AllDocs"
	} else {
		if name, ok := e.db.CanonicalCollection(coll); ok {
			coll = name
		}
		e.res.IndexName = "collection/" + coll
	}
	why := "collection scan"
	if _, ok := idSet(e.q.Where, e.params); ok {
		why = "id lookup"
	}
	e.res.Plan = Plan{Index: e.res.IndexName, Why: why}
}

func (e *exec) staticIndex(ctx context.Context) error {
	name := e.q.Index
	for _, d := range e.r.defs.List(e.db.Name()) {
		if strings.EqualFold(d.Name, name) {
			name = d.Name
			break
		}
	}
	idx, ok := e.r.indexes.Get(e.db.Name(), name)
	if !ok {
		return &IndexDoesNotExistError{Name: e.q.Index}
	}
	e.useIndex(idx)
	e.res.Plan = Plan{Index: idx.Name(), Why: "queried by name"}
	return e.wait(ctx, false)
}

func (e *exec) useIndex(idx Index) {
	e.idx = idx
	e.res.IndexName = idx.Name()
	def := idx.Definition()
	e.mapReduce = def.Type == index.TypeAutoMapReduce || def.Type == index.TypeJavaScriptMapReduce
	if e.mapReduce {
		e.rename = map[string]string{}
		for _, p := range e.q.Select {
			if p.As == "" {
				continue
			}
			switch p.Func {
			case "count":
				e.rename[p.As] = "Count"
			case "sum":
				e.rename[p.As] = p.Field.String()
			case "":
				e.rename[p.As] = p.Field.String()
			}
		}
	}
}

func (e *exec) autoIndex(ctx context.Context) error {
	q := e.q
	if name, ok := e.db.CanonicalCollection(q.Collection); ok {
		q.Collection = name
	}
	if strings.EqualFold(q.Collection, index.AllDocs) {
		q.Collection = index.AllDocs
	}
	r := e.r
	mu := r.planLock(e.db.Name())
	mu.Lock()
	dec := PlanAutoIndex(q, r.defs.List(e.db.Name()))
	if dec.Create != nil {
		if e.req.DisableAutoIndexCreation || r.opts.DisableAutoIndexes {
			mu.Unlock()
			return &InvalidQueryError{Query: e.req.Query, Err: fmt.Errorf("no index serves this query and creating auto indexes is disabled (it would create %s)", dec.Use)}
		}
		def := *dec.Create
		def.Created = r.opts.Now().UTC()
		def.State = index.StateNormal
		if err := r.defs.PutAuto(ctx, e.db.Name(), def, dec.Supersedes); err != nil {
			mu.Unlock()
			return err
		}
		r.opts.Logger.Info("auto index", "database", e.db.Name(), "decision", dec.Why, "supersedes", dec.Supersedes)
	}
	mu.Unlock()
	idx, ok := r.indexes.Get(e.db.Name(), dec.Use)
	for deadline := time.Now().Add(5 * time.Second); !ok && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		idx, ok = r.indexes.Get(e.db.Name(), dec.Use)
	}
	if !ok {
		return dberr.New(dberr.Unavailable, "the auto index %s is not open on this node yet", dec.Use)
	}
	e.useIndex(idx)
	e.res.Plan = Plan{Index: dec.Use, Why: dec.Why, Superseded: dec.Supersedes}
	return e.wait(ctx, dec.Create != nil)
}

// wait waits for non-stale results when the query asks (a TimeoutError when
// they do not come in time) and, for a brand-new index, briefly anyway.
func (e *exec) wait(ctx context.Context, created bool) error {
	t := time.Now()
	defer e.stage("Wait", t)
	timeout := time.Duration(e.req.WaitForNonStaleResultsTimeout)
	switch {
	case e.req.WaitForNonStaleResults:
		if timeout <= 0 {
			timeout = e.r.opts.DefaultWait
		}
	case created:
		if timeout <= 0 || timeout > e.r.opts.NewIndexWait {
			timeout = e.r.opts.NewIndexWait
		}
	default:
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := e.idx.WaitNonStale(wctx, e.cutoff)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if !e.req.WaitForNonStaleResults {
		return nil // a new index still catching up: answer what it has
	}
	_, reasons := e.idx.Stale(ctx)
	return &TimeoutError{Index: e.idx.Name(), Timeout: timeout, Reasons: reasons}
}

// finish fills the statistics.
func (e *exec) finish() *Result {
	res := e.res
	h := fnv.New64a()
	var buf [8]byte
	put := func(v int64) {
		for i := range buf {
			buf[i] = byte(v >> (8 * i))
		}
		h.Write(buf[:])
	}
	if e.idx != nil {
		e.idx.MarkQueried(e.r.opts.Now())
		stale, reasons := e.idx.Stale(context.Background())
		res.IsStale = stale
		res.Plan.StaleReasons = reasons
		res.IndexTimestamp = e.idx.Stats().LastIndexingTime
		put(e.idx.ResultEtag())
	} else {
		res.IndexTimestamp = e.start.UTC()
		for _, v := range e.collectionEtag() {
			put(v)
		}
	}
	h.Write([]byte(e.req.Query))
	for _, in := range res.Includes {
		h.Write(in.Doc) // includes follow documents outside what the index tracks
	}
	// Counters and compare-exchange values change without their documents
	// (or the index) changing: what the answer carries of them goes in.
	h.Write(res.CounterIncludes)
	h.Write(res.CompareExchangeValueIncludes)
	if len(e.counterNames) > 0 {
		for _, r := range res.Results {
			h.Write(r)
		}
	}
	res.ResultEtag = int64(h.Sum64())
	if res.Results == nil {
		res.Results = []json.RawMessage{}
	}
	if res.Includes == nil {
		res.Includes = Includes{}
	}
	res.DurationInMs = e.r.opts.Now().Sub(e.start).Milliseconds()
	if e.timings != nil {
		res.Timings = &Timings{DurationInMs: res.DurationInMs, Timings: e.timings}
	}
	return res
}

// collectionEtag: the collection's last document and tombstone etags and
// its count (every write to the collection moves one of them).
func (e *exec) collectionEtag() []int64 {
	ctx := context.Background()
	st := e.db.Stats()
	if e.res.IndexName == "AllDocs" {
		return []int64{st.LastEtag, st.Documents, st.Tombstones}
	}
	var docs, tombs int64
	for _, c := range st.Collections {
		if strings.EqualFold(c.Name, e.q.Collection) {
			docs, tombs = c.Docs, c.Tombstones
		}
	}
	lastDoc, lastTomb, _ := e.db.CollectionEtags(ctx, e.q.Collection)
	return []int64{lastDoc, lastTomb, docs, tombs}
}

// emitFn receives one rendered result and, when includes are wanted, the
// body it came from.
type emitFn func(raw json.RawMessage, body map[string]any) error

// run produces the page of results.
func (e *exec) run(ctx context.Context, emit emitFn, wantBodies bool) error {
	if e.idx != nil {
		return e.runIndex(ctx, emit, wantBodies)
	}
	return e.runCollection(ctx, emit, wantBodies)
}

// pager applies distinct, skip and take to rendered results and counts.
type pager struct {
	e        *exec
	emit     emitFn
	seen     map[string]bool // distinct
	n        int             // results after distinct
	skipped  int64
	distinct bool
}

func (p *pager) add(raw json.RawMessage, body map[string]any) (full bool, err error) {
	if p.distinct {
		k := string(raw)
		if p.seen[k] {
			p.skipped++
			return false, nil
		}
		p.seen[k] = true
	}
	p.n++
	if p.n <= p.e.skip {
		return false, nil
	}
	if p.e.take >= 0 && p.n > p.e.skip+p.e.take {
		return false, nil
	}
	return false, p.emit(raw, body)
}

func (p *pager) full() bool { return p.e.take >= 0 && p.n >= p.e.skip+p.e.take }

// runCollection answers a query straight from the documents.
func (e *exec) runCollection(ctx context.Context, emit emitFn, wantBodies bool) error {
	p := &pager{e: e, emit: emit, distinct: e.q.Distinct && len(e.q.Select) > 0, seen: map[string]bool{}}
	materialize := len(e.q.OrderBy) > 0 && !onlyScore(e.q.OrderBy)
	// Without a filter, distinct or sort, the count is the collection's
	// and the scan stops at the end of the page.
	countOnly := e.q.Where == nil && !p.distinct && !materialize
	if countOnly {
		e.res.TotalResults = e.collectionCount()
	}
	var docs []*storage.Document
	err := e.collection(ctx, false, func(d *storage.Document) (bool, error) {
		if materialize {
			c := *d
			c.Body = bytes.Clone(d.Body)
			docs = append(docs, &c)
			return false, nil
		}
		raw, body, err := e.render(d, wantBodies)
		if err != nil {
			return false, err
		}
		if _, err := p.add(raw, body); err != nil {
			return false, err
		}
		return countOnly && p.full(), nil
	})
	if err != nil {
		return err
	}
	if materialize {
		sortDocs(docs, e.q.OrderBy)
		for _, d := range docs {
			raw, body, err := e.render(d, wantBodies)
			if err != nil {
				return err
			}
			if _, err := p.add(raw, body); err != nil {
				return err
			}
		}
	}
	if !countOnly {
		e.res.TotalResults = int64(p.n)
	}
	e.res.SkippedResults = p.skipped
	return nil
}

func onlyScore(os []rql.Order) bool {
	for _, o := range os {
		if !o.Score {
			return false
		}
	}
	return true
}

// sortDocs orders documents by id() and shuffles them for random().
func sortDocs(docs []*storage.Document, os []rql.Order) {
	for _, o := range os {
		if o.Random {
			rand.Shuffle(len(docs), func(i, j int) { docs[i], docs[j] = docs[j], docs[i] })
			return
		}
	}
	sort.SliceStable(docs, func(i, j int) bool {
		for _, o := range os {
			if !o.Field.ID {
				continue
			}
			a, b := storage.LowerID(docs[i].ID), storage.LowerID(docs[j].ID)
			if a != b {
				return (a < b) != o.Desc
			}
		}
		return false
	})
}

func (e *exec) collectionCount() int64 {
	st := e.db.Stats()
	if e.res.IndexName == "AllDocs" {
		return st.Documents
	}
	for _, c := range st.Collections {
		if strings.EqualFold(c.Name, e.q.Collection) {
			return c.Docs
		}
	}
	return 0
}

// collection visits the documents of the query's collection that its
// (id-only) where clause matches, in etag order, or in the order of an id
// list for id() = / in. fn returns true to stop. With upToCutoff, documents
// written after the query started are left out.
func (e *exec) collection(ctx context.Context, upToCutoff bool, fn func(d *storage.Document) (bool, error)) error {
	all := e.res.IndexName == "AllDocs"
	inColl := func(d *storage.Document) bool { return all || strings.EqualFold(d.Collection, e.q.Collection) }
	match := func(d *storage.Document) (bool, error) {
		if !inColl(d) || upToCutoff && d.Etag > e.cutoff {
			return false, nil
		}
		ok, err := e.q.Match(rql.Doc{ID: d.ID}, e.params)
		if err != nil {
			return false, &InvalidQueryError{Query: e.req.Query, Err: err}
		}
		return ok, nil
	}
	if ids, ok := idSet(e.q.Where, e.params); ok {
		docs, err := e.db.GetMany(ctx, ids)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, d := range docs {
			if d == nil || seen[storage.LowerID(d.ID)] {
				continue
			}
			seen[storage.LowerID(d.ID)] = true
			if ok, err := match(d); err != nil || !ok {
				if err != nil {
					return err
				}
				continue
			}
			if stop, err := fn(d); err != nil || stop {
				return err
			}
		}
		return nil
	}
	const page = 512
	if prefix, ok := idPrefix(e.q.Where, e.params); ok {
		coll := e.q.Collection
		if all {
			coll = ""
		}
		after := ""
		for {
			docs, err := e.db.PageByID(ctx, prefix, coll, after, page, 0)
			if err != nil {
				return err
			}
			for _, d := range docs {
				if ok, err := match(d); err != nil || !ok {
					if err != nil {
						return err
					}
					continue
				}
				if stop, err := fn(d); err != nil || stop {
					return err
				}
			}
			if len(docs) < page {
				return nil
			}
			after = docs[len(docs)-1].ID
		}
	}
	var after int64
	for {
		n := 0
		stop := false
		visit := func(d *storage.Document) error {
			n++
			after = d.Etag
			ok, err := match(d)
			if err != nil || !ok {
				return err
			}
			stop, err = fn(d)
			if stop {
				return errStop
			}
			return err
		}
		var err error
		if all {
			err = e.db.ScanChangesAfter(ctx, after, page, 0, func(it *storage.Item) error {
				if it.Type != "Put" || it.Conflict || it.Kind != storage.KindDocument {
					n++
					after = it.Etag
					return nil
				}
				d := storage.Document{ID: it.ID, Collection: it.Collection, ChangeVector: it.ChangeVector, Etag: it.Etag, LastModified: it.LastModified, Body: it.Body}
				return visit(&d)
			})
		} else {
			err = e.db.ScanCollection(ctx, e.q.Collection, after, page, visit)
		}
		if errors.Is(err, errStop) {
			return nil
		}
		if err != nil {
			return err
		}
		if n < page || upToCutoff && after >= e.cutoff {
			return nil
		}
	}
}

var errStop = errors.New("stop")

// idSet returns the ids of a where clause that is exactly id() = v,
// id() in (…), or an or of those.
func idSet(e rql.Expr, params map[string]any) ([]string, bool) {
	switch x := e.(type) {
	case rql.Compare:
		if !x.Field.ID || x.Op != "=" {
			return nil, false
		}
		v, ok := resolveValue(x.Value, params)
		s, isStr := v.(string)
		return []string{s}, ok && isStr
	case rql.In:
		if !x.Field.ID || x.All {
			return nil, false
		}
		var out []string
		for _, v := range x.Values {
			r, ok := resolveValue(v, params)
			if !ok {
				return nil, false
			}
			list, isList := r.([]any)
			if !isList {
				list = []any{r}
			}
			for _, item := range list {
				s, isStr := item.(string)
				if !isStr {
					return nil, false
				}
				out = append(out, s)
			}
		}
		return out, true
	case rql.Or:
		a, ok1 := idSet(x.L, params)
		b, ok2 := idSet(x.R, params)
		return append(a, b...), ok1 && ok2
	}
	return nil, false
}

// idPrefix returns p of a where clause that is exactly startsWith(id(), p).
func idPrefix(e rql.Expr, params map[string]any) (string, bool) {
	c, ok := e.(rql.Call)
	if !ok || !c.Field.ID || c.Name != "startsWith" {
		return "", false
	}
	v, ok := resolveValue(c.Value, params)
	s, isStr := v.(string)
	return s, ok && isStr
}

func resolveValue(v rql.Value, params map[string]any) (any, bool) {
	if v.Param == "" {
		return v.Literal, true
	}
	x, ok := params[v.Param]
	return x, ok
}

// runIndex answers a query from its index: a page of hits (all of them for
// distinct), then the documents they name.
func (e *exec) runIndex(ctx context.Context, emit emitFn, wantBodies bool) error {
	p := &pager{e: e, emit: emit, distinct: e.q.Distinct && len(e.q.Select) > 0, seen: map[string]bool{}}
	sq := index.SearchQuery{Where: e.where(), Params: e.params, OrderBy: e.orderBy(), Skip: e.skip, Take: e.take}
	if p.distinct {
		sq.Skip, sq.Take = 0, -1
	}
	if e.streaming && !p.distinct {
		return e.streamIndex(ctx, sq, emit)
	}
	t := time.Now()
	sr, err := e.idx.Search(ctx, sq)
	if err != nil {
		return e.searchError(err)
	}
	e.stage("Search", t)
	t = time.Now()
	defer e.stage("Load", t)
	e.res.TotalResults = sr.TotalResults
	e.res.SkippedResults = sr.SkippedResults
	if !p.distinct {
		// The index paged already: emit everything it returned.
		e.skip, e.take = 0, -1
	}
	if e.mapReduce {
		for _, h := range sr.Hits {
			raw, body, err := e.renderRow(h.Stored)
			if err != nil {
				return err
			}
			if _, err := p.add(raw, body); err != nil {
				return err
			}
		}
	} else {
		ids := make([]string, len(sr.Hits))
		for i, h := range sr.Hits {
			ids[i] = h.DocID
		}
		docs, err := e.db.GetMany(ctx, ids)
		if err != nil {
			return err
		}
		for _, d := range docs {
			if d == nil {
				continue // deleted since it was indexed
			}
			raw, body, err := e.render(d, wantBodies)
			if err != nil {
				return err
			}
			if _, err := p.add(raw, body); err != nil {
				return err
			}
		}
	}
	if p.distinct {
		e.res.TotalResults = int64(p.n)
		e.res.SkippedResults = p.skipped
	}
	return nil
}

// streamPage is how many hits a stream reads from the index at a time
// (a variable for the tests).
var streamPage = 512

// streamIndex pages through the hits, loading and emitting one page of
// documents at a time.
func (e *exec) streamIndex(ctx context.Context, sq index.SearchQuery, emit emitFn) error {
	left := sq.Take // < 0: all
	for first := true; ; first = false {
		sq.Take = streamPage
		if left >= 0 && left < streamPage {
			sq.Take = left
		}
		sr, err := e.idx.Search(ctx, sq)
		if err != nil {
			return e.searchError(err)
		}
		if first {
			e.res.TotalResults = sr.TotalResults
		}
		e.res.SkippedResults += sr.SkippedResults
		if e.mapReduce {
			for _, h := range sr.Hits {
				raw, _, err := e.renderRow(h.Stored)
				if err != nil {
					return err
				}
				if err := emit(raw, nil); err != nil {
					return err
				}
			}
		} else {
			ids := make([]string, len(sr.Hits))
			for i, h := range sr.Hits {
				ids[i] = h.DocID
			}
			docs, err := e.db.GetMany(ctx, ids)
			if err != nil {
				return err
			}
			for _, d := range docs {
				if d == nil {
					continue
				}
				raw, _, err := e.render(d, false)
				if err != nil {
					return err
				}
				if err := emit(raw, nil); err != nil {
					return err
				}
			}
		}
		if sq.Take == 0 || len(sr.Hits) < sq.Take {
			return nil
		}
		sq.Skip += len(sr.Hits) // the engine skips documents, not entries
		if left >= 0 {
			left -= len(sr.Hits)
		}
	}
}

// indexIDs is every document id the index query matches.
func (e *exec) indexIDs(ctx context.Context) ([]string, error) {
	sr, err := e.idx.Search(ctx, index.SearchQuery{Where: e.where(), Params: e.params, OrderBy: e.orderBy(), Take: -1})
	if err != nil {
		return nil, e.searchError(err)
	}
	e.res.TotalResults = sr.TotalResults
	out := make([]string, 0, len(sr.Hits))
	for _, h := range sr.Hits {
		if h.DocID != "" {
			out = append(out, h.DocID)
		}
	}
	return out, nil
}

func (e *exec) searchError(err error) error {
	if dberr.Is(err, dberr.BadRequest) {
		return &InvalidQueryError{Query: e.req.Query, Err: err}
	}
	return err
}

// where is the where clause in the index's field names (a grouped query's
// select aliases become the reduce outputs they name).
func (e *exec) where() rql.Expr {
	if len(e.rename) == 0 {
		return withoutTrue(e.q.Where)
	}
	return withoutTrue(renameExpr(e.q.Where, e.renamePath))
}

// trueExpr marks a subtree that matches everything while withoutTrue folds.
type trueExpr struct{ rql.True }

// withoutTrue folds the `true` the clients write ("true and not (…)",
// "where true") away, so the index sees only real conditions: true and X
// is X, true or X is everything (nil), not true matches nothing.
func withoutTrue(x rql.Expr) rql.Expr {
	r := foldTrue(x)
	if _, ok := r.(trueExpr); ok {
		return nil
	}
	return r
}

func foldTrue(x rql.Expr) rql.Expr {
	switch v := x.(type) {
	case rql.True:
		return trueExpr{}
	case rql.And:
		l, r := foldTrue(v.L), foldTrue(v.R)
		if _, ok := l.(trueExpr); ok {
			return r
		}
		if _, ok := r.(trueExpr); ok {
			return l
		}
		return rql.And{L: l, R: r}
	case rql.Or:
		l, r := foldTrue(v.L), foldTrue(v.R)
		if _, ok := l.(trueExpr); ok {
			return l
		}
		if _, ok := r.(trueExpr); ok {
			return r
		}
		return rql.Or{L: l, R: r}
	case rql.Not:
		inner := foldTrue(v.E)
		if _, ok := inner.(trueExpr); ok {
			// Nothing matches: an id() no document has.
			return rql.Compare{Field: rql.Path{ID: true}, Op: "=", Value: rql.Value{Literal: "\x00no document has this id"}}
		}
		return rql.Not{E: inner}
	}
	return x
}

func (e *exec) renamePath(p rql.Path) rql.Path {
	if to, ok := e.rename[p.String()]; ok && !p.ID {
		return rql.Path{Segments: strings.Split(to, ".")}
	}
	return p
}

func (e *exec) orderBy() []rql.Order {
	var out []rql.Order
	for _, o := range e.q.OrderBy {
		if o.Score {
			continue // no scores: index order
		}
		if len(e.rename) > 0 {
			o.Field = e.renamePath(o.Field)
		}
		out = append(out, o)
	}
	return out
}

func renameExpr(e rql.Expr, fn func(rql.Path) rql.Path) rql.Expr {
	switch x := e.(type) {
	case rql.And:
		return rql.And{L: renameExpr(x.L, fn), R: renameExpr(x.R, fn)}
	case rql.Or:
		return rql.Or{L: renameExpr(x.L, fn), R: renameExpr(x.R, fn)}
	case rql.Not:
		return rql.Not{E: renameExpr(x.E, fn)}
	case rql.Compare:
		x.Field = fn(x.Field)
		return x
	case rql.Between:
		x.Field = fn(x.Field)
		return x
	case rql.In:
		x.Field = fn(x.Field)
		return x
	case rql.Call:
		x.Field = fn(x.Field)
		return x
	case rql.Exists:
		x.Field = fn(x.Field)
		return x
	}
	return e
}

// includes loads the documents the include paths name.
func (e *exec) includes(ctx context.Context, bodies []map[string]any) error {
	seen := map[string]bool{}
	var want []string
	for _, b := range bodies {
		if b == nil {
			continue
		}
		for _, p := range e.q.Include {
			for _, v := range p.Values(rql.Doc{Body: b}) {
				id, ok := v.(string)
				if !ok || id == "" || seen[storage.LowerID(id)] {
					continue
				}
				seen[storage.LowerID(id)] = true
				want = append(want, id)
			}
		}
	}
	if len(want) == 0 {
		return nil
	}
	docs, err := e.db.GetMany(ctx, want)
	if err != nil {
		return err
	}
	for _, d := range docs {
		if d != nil {
			e.res.Includes = append(e.res.Includes, Included{ID: d.ID, Doc: d.AppendJSON(nil)})
		}
	}
	return nil
}

// render writes one document as a result: whole, metadata only, or
// projected. body is the decoded document when wanted (includes).
func (e *exec) render(d *storage.Document, wantBody bool) (json.RawMessage, map[string]any, error) {
	if e.q.Counters != nil && !e.streaming {
		e.counterIDs = append(e.counterIDs, d.ID)
	}
	var body map[string]any
	if wantBody || len(e.q.Select) > 0 {
		dec := json.NewDecoder(bytes.NewReader(d.Body))
		dec.UseNumber()
		if err := dec.Decode(&body); err != nil {
			return nil, nil, fmt.Errorf("document %s: %w", d.ID, err)
		}
	}
	switch {
	case e.req.MetadataOnly:
		return metadataOnly(d), body, nil
	case len(e.q.Select) > 0:
		out := map[string]any{}
		if len(e.counterNames) > 0 {
			if err := e.projectCounters(context.Background(), d.ID, out); err != nil {
				return nil, nil, err
			}
		}
		for _, pr := range e.q.Select {
			if pr.Func != "" {
				continue
			}
			name := projectionName(pr)
			vs := pr.Field.Values(rql.Doc{ID: d.ID, Body: body})
			switch {
			case len(vs) == 0:
				out[name] = nil
			case len(vs) == 1 && !strings.Contains(pr.Field.String(), "[]"):
				out[name] = vs[0]
			default:
				out[name] = vs
			}
		}
		src := d
		if e.q.Distinct {
			src = nil // a distinct row stands for several documents
		}
		raw, err := marshalProjection(e.q.Select, out, src)
		return raw, body, err
	}
	// A document with counters is served with @counters (storage/counters.go).
	if err := e.db.AddCounterNames(context.Background(), []*storage.Document{d}); err != nil {
		return nil, nil, err
	}
	return d.AppendJSON(nil), body, nil
}

func projectionName(pr rql.Projection) string {
	if pr.As != "" {
		return pr.As
	}
	switch {
	case pr.Func == "count":
		return "Count"
	case isCounterProjection(pr):
		name, _ := pr.Counter.Literal.(string) // counterProjections made it the name
		return name
	case pr.Field.ID:
		return "Id"
	}
	segs := pr.Field.Segments
	if len(segs) == 0 {
		return ""
	}
	return strings.TrimSuffix(segs[len(segs)-1], "[]")
}

// marshalProjection writes the selected fields in select order, then
// @metadata with @projection: true and, for a document, its identity.
func marshalProjection(sel []rql.Projection, out map[string]any, d *storage.Document) (json.RawMessage, error) {
	buf := []byte{'{'}
	done := map[string]bool{}
	n := 0
	write := func(name string, v any) error {
		if done[name] {
			return nil
		}
		done[name] = true
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if n > 0 {
			buf = append(buf, ',')
		}
		n++
		kb, _ := json.Marshal(name)
		buf = append(buf, kb...)
		buf = append(buf, ':')
		buf = append(buf, b...)
		return nil
	}
	for _, pr := range sel {
		if pr.Func == "key" {
			continue
		}
		name := projectionName(pr)
		if v, ok := out[name]; ok {
			if err := write(name, v); err != nil {
				return nil, err
			}
		}
	}
	// key() and whatever else the row has (grouped results).
	rest := make([]string, 0, len(out))
	for k := range out {
		if !done[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		if err := write(k, out[k]); err != nil {
			return nil, err
		}
	}
	if n > 0 {
		buf = append(buf, ',')
	}
	buf = append(buf, `"@metadata":{"@projection":true`...)
	if d != nil {
		buf = append(buf, `,"@id":`...)
		b, _ := json.Marshal(d.ID)
		buf = append(buf, b...)
		buf = append(buf, `,"@change-vector":`...)
		b, _ = json.Marshal(d.ChangeVector)
		buf = append(buf, b...)
		buf = append(buf, `,"@last-modified":"`...)
		buf = d.LastModified.UTC().AppendFormat(buf, "2006-01-02T15:04:05.0000000Z")
		buf = append(buf, '"')
	}
	buf = append(buf, '}', '}')
	return buf, nil
}

// renderRow writes one reduced row of a grouped query: key() as the
// group-by fields, count() and sum() under their names.
func (e *exec) renderRow(stored json.RawMessage) (json.RawMessage, map[string]any, error) {
	var row map[string]any
	dec := json.NewDecoder(bytes.NewReader(stored))
	dec.UseNumber()
	if err := dec.Decode(&row); err != nil {
		return nil, nil, fmt.Errorf("a reduced row: %w", err)
	}
	if e.req.MetadataOnly {
		return json.RawMessage(`{"@metadata":{}}`), row, nil
	}
	if len(e.q.Select) == 0 {
		raw, err := marshalProjection(nil, row, nil)
		return raw, row, err
	}
	out := map[string]any{}
	for _, pr := range e.q.Select {
		switch pr.Func {
		case "key":
			for _, g := range e.q.GroupBy {
				out[g.String()] = row[g.String()]
			}
		case "count":
			out[projectionName(pr)] = row["Count"]
		case "sum":
			out[projectionName(pr)] = row[pr.Field.String()]
		default:
			vs := pr.Field.Values(rql.Doc{Body: row})
			if len(vs) == 0 {
				vs = []any{row[pr.Field.String()]}
			}
			out[projectionName(pr)] = vs[0]
		}
	}
	raw, err := marshalProjection(e.q.Select, out, nil)
	return raw, row, err
}

// metadataOnly writes {"@metadata": {...}} of a document.
func metadataOnly(d *storage.Document) json.RawMessage {
	full := d.AppendJSON(nil)
	var m struct {
		Meta json.RawMessage `json:"@metadata"`
	}
	if err := json.Unmarshal(full, &m); err != nil || m.Meta == nil {
		return json.RawMessage(`{"@metadata":{}}`)
	}
	return append(append([]byte(`{"@metadata":`), m.Meta...), '}')
}

// FormatETag is the ETag header value of a result ("<n>", quoted).
func FormatETag(r *Result) string { return `"` + strconv.FormatInt(r.ResultEtag, 10) + `"` }
