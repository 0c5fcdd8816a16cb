package studio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/conflicts"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/views"
)

// Conflicts pages: the list of conflicted ids with bulk resolution
// (preview, then apply pinned to the preview) and the operations' progress;
// one id's versions side by side with its resolution actions; the
// resolution log with restore; the configuration with a test run. Every
// resolution goes through the storage API with the fingerprint of the
// versions the person saw, so a conflict that changed meanwhile is refused.

const (
	conflictsPageSize = 50
	// previewPageSize is how many of a preview's decisions one page shows
	// (the preview itself decides the whole scope, and apply resolves all
	// of it).
	previewPageSize  = 500
	conflictOpsShown = 10
	diffCellRunes    = 120
	// studioBy is who studio resolutions are logged as.
	studioBy = "studio"
)

// registerConflicts adds the conflicts pages. One id's page is
// /conflicts/doc?id=… (ids hold slashes and may be "log" or "settings");
// /conflicts/{id...} serves it too.
func (s *Studio) registerConflicts(g *echo.Group) {
	g.GET("/conflicts", s.conflictsPage)
	g.POST("/conflicts/preview", s.conflictsPreview)
	g.GET("/conflicts/preview", s.conflictsPreviewPage)
	g.POST("/conflicts/apply", s.conflictsApply)
	g.POST("/conflicts/operations/cancel", s.conflictsCancel)
	g.POST("/conflicts/operations/resume", s.conflictsResume)
	g.GET("/conflicts/doc", s.conflictDocPage)
	g.POST("/conflicts/doc/keep", s.conflictKeep)
	g.POST("/conflicts/doc/resolve", s.conflictResolve)
	g.GET("/conflicts/log", s.conflictLog)
	g.POST("/conflicts/log/restore", s.conflictRestore)
	g.GET("/conflicts/settings", s.conflictSettings)
	g.POST("/conflicts/settings", s.conflictSettingsPost)
	g.GET("/conflicts/*", s.conflictDocByPath)
	s.addLive("conflicts", s.conflictsLive, false)
	s.addLive("conflicts-preview", s.conflictsPreviewLive, false)
}

// conflictsQuery is the list's filter and keyset cursor.
type conflictsQuery struct {
	collection string
	prefix     string
	after      string // lower-cased id the page starts after
}

func parseConflictsQuery(q url.Values) conflictsQuery {
	return conflictsQuery{collection: strings.TrimSpace(q.Get("collection")), prefix: q.Get("prefix"), after: q.Get("after")}
}

func (cq conflictsQuery) base() url.Values {
	q := url.Values{}
	if cq.collection != "" {
		q.Set("collection", cq.collection)
	}
	if cq.prefix != "" {
		q.Set("prefix", cq.prefix)
	}
	return q
}

// conflictsList reads one page of conflicted ids in natural id order
// (carts/2 before carts/10), keyset-paged by the last id shown, and the
// totals.
func conflictsList(ctx context.Context, db *storage.DB, cq conflictsQuery) (views.ConflictsList, error) {
	l := views.ConflictsList{DB: db.Name(), Collection: cq.collection, Prefix: cq.prefix, Paged: cq.after != ""}
	all, err := conflicts.List(ctx, db, storage.ConflictFilter{Collection: cq.collection, Prefix: cq.prefix})
	if err != nil {
		return l, err
	}
	rows, more := conflicts.PageAfter(all, storage.LowerID(cq.after), conflictsPageSize)
	l.Total = len(all)
	if l.All, err = db.ConflictCount(ctx); err != nil {
		return l, err
	}
	for _, r := range rows {
		l.Rows = append(l.Rows, views.ConflictRow{ID: r.ID, Collection: r.Collection, Versions: r.Versions, LastModified: r.LastModified})
	}
	if l.Paged {
		l.First = views.DBURLQ(db.Name(), "conflicts", cq.base())
	}
	if more {
		next := cq.base()
		next.Set("after", storage.LowerID(rows[len(rows)-1].ID))
		l.Next = views.DBURLQ(db.Name(), "conflicts", next)
	}
	return l, nil
}

// conflictsSummary is the per-collection summary under the configured
// strategies (cached by the manager while the conflicts stay the same).
func (s *Studio) conflictsSummary(ctx context.Context, db *storage.DB) views.ConflictsSummary {
	out := views.ConflictsSummary{DB: db.Name()}
	if s.Conflicts == nil {
		out.Error = errNoBulk.Error()
		return out
	}
	sum, err := s.Conflicts.Summary(ctx, db)
	if err != nil {
		out.Error = "The summary could not be computed: " + err.Error()
		return out
	}
	out.Total, out.At = sum.Total, sum.At
	for _, c := range sum.Collections {
		out.Rows = append(out.Rows, views.SummaryRow{
			Collection: c.Collection, Count: c.Count, Strategy: c.Strategy, VersionKind: conflicts.VersionKind(c.Strategy),
			ToVersion: c.ToVersion, ToDeletion: c.ToDeletion, Merged: c.Merged, Declined: c.Declined, Errors: c.Errors, LastError: c.LastError,
			Filter: views.DBURLQ(db.Name(), "conflicts", url.Values{"collection": {c.Collection}}),
		})
	}
	return out
}

// bulkOptions are the strategies a bulk resolution offers.
func (s *Studio) bulkOptions(db string) []views.StrategyOption {
	opts := []views.StrategyOption{
		{Value: conflicts.Latest, Label: "Latest version (newest last-modified)"},
		{Value: conflicts.Local, Label: "This node's version (" + s.NodeTag + ")"},
	}
	for _, tag := range s.members(db) {
		if tag != s.NodeTag {
			opts = append(opts, views.StrategyOption{Value: conflicts.Node + ":" + tag, Label: "Node " + tag + "'s version"})
		}
	}
	return append(opts,
		views.StrategyOption{Value: conflicts.Script, Label: "Script (below)"},
		views.StrategyOption{Value: conflicts.Configured, Label: "Each collection's configured strategy"},
	)
}

func (s *Studio) opViews(db string) []views.OpView {
	if s.Conflicts == nil {
		return nil
	}
	var out []views.OpView
	for _, p := range s.Conflicts.List(db) {
		if len(out) == conflictOpsShown {
			break
		}
		if p.Kind == conflicts.KindPreview {
			continue // a preview shows its progress on its own page
		}
		out = append(out, opView(p))
	}
	return out
}

func opView(p conflicts.Progress) views.OpView {
	return views.OpView{
		ID: p.ID, State: p.State, Strategy: p.Spec.Strategy, Scope: scopeText(p.Spec), Total: p.Total, Done: p.Done,
		Resolved: p.Resolved, Skipped: p.Skipped, Errors: p.Errors, LastError: p.LastError, By: p.Spec.By, Started: p.Started, Ended: p.Ended,
	}
}

func scopeText(spec conflicts.Spec) string {
	var parts []string
	if spec.Expected != nil {
		parts = append(parts, strconv.Itoa(len(spec.Expected))+" previewed ids")
	} else if len(spec.Scope.IDs) > 0 {
		parts = append(parts, strconv.Itoa(len(spec.Scope.IDs))+" chosen ids")
	}
	if spec.Scope.Collection != "" {
		parts = append(parts, "collection "+spec.Scope.Collection)
	}
	if spec.Scope.Prefix != "" {
		parts = append(parts, "ids starting with "+spec.Scope.Prefix)
	}
	if len(parts) == 0 {
		return "every conflict"
	}
	return strings.Join(parts, ", ")
}

// conflictsPage serves GET /studio/db/{db}/conflicts.
func (s *Studio) conflictsPage(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	cq := parseConflictsQuery(c.QueryParams())
	form := views.BulkForm{Strategy: conflicts.Latest, Scope: "selected"}
	return s.renderConflicts(c, db, cq, form, http.StatusOK)
}

func (s *Studio) renderConflicts(c echo.Context, db *storage.DB, cq conflictsQuery, form views.BulkForm, status int) error {
	list, err := conflictsList(c.Request().Context(), db, cq)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	form.DB, form.Options, form.Collection, form.Prefix = db.Name(), s.bulkOptions(db.Name()), cq.collection, cq.prefix
	form.Matching, form.All = list.Total, list.All
	ch := s.chrome(c, "Conflicts · "+db.Name(), db.Name(), views.NavConflicts, "conflicts")
	// The live URL carries the list's query, not the form that was posted.
	ch.Query = cq.base()
	if cq.after != "" {
		ch.Query.Set("after", cq.after)
	}
	sum := s.conflictsSummary(c.Request().Context(), db)
	return render(c, status, ch, views.ConflictsPage(views.ConflictsPageData{Summary: sum, List: list, Form: form, Ops: s.opViews(db.Name())}))
}

// conflictsLive refreshes the operations always, and the list on its first
// page (a later page keeps its rows until the user pages).
func (s *Studio) conflictsLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	db, err := s.Catalog.Get(q.Get("db"))
	if err != nil {
		return nil, nil
	}
	frags := []views.Fragment{
		{ID: "conflict-ops", C: views.ConflictOps(db.Name(), s.opViews(db.Name()))},
		{ID: "conflicts-summary", C: views.ConflictsSummaryView(s.conflictsSummary(ctx, db))},
	}
	cq := parseConflictsQuery(q)
	if cq.after == "" {
		list, err := conflictsList(ctx, db, cq)
		if err != nil {
			return frags, err
		}
		frags = append(frags, views.Fragment{ID: "conflicts-list", C: views.ConflictsListView(list)})
	}
	return frags, nil
}

// bulkFormFrom reads the bulk form as posted.
func bulkFormFrom(c echo.Context) (views.BulkForm, conflictsQuery) {
	f := c.Request().PostForm
	form := views.BulkForm{Strategy: strings.TrimSpace(f.Get("strategy")), Script: f.Get("script"), Scope: f.Get("scope")}
	for _, id := range f["ids"] {
		if id != "" {
			form.Selected = append(form.Selected, id)
		}
	}
	return form, conflictsQuery{collection: strings.TrimSpace(f.Get("collection")), prefix: f.Get("prefix")}
}

// bulkSpec turns the form into an operation's spec.
func bulkSpec(form views.BulkForm, cq conflictsQuery) (conflicts.Spec, error) {
	spec := conflicts.Spec{Strategy: form.Strategy, Script: form.Script, By: studioBy}
	switch form.Scope {
	case "selected", "":
		if len(form.Selected) == 0 {
			return spec, dberr.New(dberr.BadRequest, "Tick at least one conflict in the list, or choose another scope. Nothing was previewed.")
		}
		spec.Scope.IDs = form.Selected
	case "filter":
		spec.Scope.Collection, spec.Scope.Prefix = cq.collection, cq.prefix
	case "all":
	default:
		return spec, dberr.New(dberr.BadRequest, "Unknown scope %q: choose the ticked ids, the filter, or every conflict.", form.Scope)
	}
	return spec, nil
}

func (s *Studio) readForm(c echo.Context, db string) error {
	if err := c.Request().ParseForm(); err != nil {
		return s.studioError(c, db, dberr.New(dberr.BadRequest, "The form could not be read (%v); nothing was changed.", err))
	}
	return nil
}

var errNoBulk = dberr.New(dberr.Unavailable, "Bulk resolution is not available on this node.")

// conflictsPreview serves POST /studio/db/{db}/conflicts/preview: starts
// a preview operation that decides every id in the scope (no cap), nothing
// written, and sends the browser to its page, which shows its progress and
// then its decisions with the apply form.
func (s *Studio) conflictsPreview(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	if err := s.readForm(c, db.Name()); err != nil {
		return err
	}
	form, cq := bulkFormFrom(c)
	if s.Conflicts == nil {
		return s.studioError(c, db.Name(), errNoBulk)
	}
	spec, err := bulkSpec(form, cq)
	var op *conflicts.Operation
	if err == nil {
		op, err = s.Conflicts.StartPreview(db, spec)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		if k := dberr.KindOf(err); k != dberr.BadRequest && k != dberr.InvalidOperation {
			return s.studioError(c, db.Name(), err)
		}
		form.Error = err.Error()
		return s.renderConflicts(c, db, cq, form, http.StatusBadRequest)
	}
	// A small scope is usually decided before the page loads.
	wait, cancel := context.WithTimeout(c.Request().Context(), 500*time.Millisecond)
	defer cancel()
	_ = op.Wait(wait)
	return c.Redirect(http.StatusSeeOther, string(views.DBURLQ(db.Name(), "conflicts/preview", url.Values{"op": {strconv.FormatInt(op.Progress().ID, 10)}})))
}

// previewOp finds a preview operation of this database by its number.
func (s *Studio) previewOp(db *storage.DB, raw string) (*conflicts.Operation, error) {
	if s.Conflicts == nil {
		return nil, errNoBulk
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return nil, dberr.New(dberr.BadRequest, "Which preview? %q is not a preview number.", raw)
	}
	op, ok := s.Conflicts.Get(db.Name(), id)
	if !ok || op.Progress().Kind != conflicts.KindPreview {
		return nil, dberr.New(dberr.NotFound, "There is no preview %d for %s on this node (previews live in memory: after a restart, preview again).", id, db.Name())
	}
	return op, nil
}

// previewData is one page of a preview's decisions (from is the index of
// the first row shown).
func (s *Studio) previewData(db *storage.DB, op *conflicts.Operation, from int) views.PreviewPageData {
	p := op.Progress()
	d := views.PreviewPageData{DB: db.Name(), Op: opView(p), Total: p.Total, Resolvable: p.Resolved, Declined: p.Skipped, Errors: p.Errors, Expired: p.Expired}
	d.Form = views.BulkForm{DB: db.Name(), Options: s.bulkOptions(db.Name()), Strategy: p.Spec.Strategy, Script: p.Spec.Script,
		Collection: p.Spec.Scope.Collection, Prefix: p.Spec.Scope.Prefix, Selected: p.Spec.Scope.IDs, Hidden: true, Scope: "all"}
	switch {
	case len(p.Spec.Scope.IDs) > 0:
		d.Form.Scope = "selected"
	case p.Spec.Scope.Collection != "" || p.Spec.Scope.Prefix != "":
		d.Form.Scope = "filter"
	}
	for _, o := range s.Conflicts.List(db.Name()) {
		if o.Kind == conflicts.KindResolve && o.Spec.By == previewBy(p.ID) {
			d.Applied = o.ID
			break
		}
	}
	items := op.Items()
	from = max(0, min(from, len(items)))
	end := min(len(items), from+previewPageSize)
	d.Shown = from
	for _, it := range items[from:end] {
		r := views.PreviewRow{ID: it.ID, Collection: it.Collection, Fingerprint: it.Fingerprint, Strategy: it.Strategy,
			Versions: versionViews(it.Versions), Winner: it.Winner, Declined: it.Declined, Error: it.Error}
		if it.Resolves() {
			r.Resolves, r.Tombstone = true, it.Result.Tombstone
			if it.Winner >= 0 {
				r.WinnerFrom = strings.Join(cvNodes(it.Versions[it.Winner].ChangeVector), " ")
			}
		} else {
			r.Winner = -1
		}
		d.Rows = append(d.Rows, r)
	}
	q := url.Values{"op": {strconv.FormatInt(p.ID, 10)}}
	if from > 0 {
		d.First = views.DBURLQ(db.Name(), "conflicts/preview", q)
	}
	if end < len(items) {
		next := url.Values{"op": q["op"], "from": {strconv.Itoa(end)}}
		d.Next = views.DBURLQ(db.Name(), "conflicts/preview", next)
	}
	return d
}

// previewBy is who an operation applying a preview is logged as.
func previewBy(id int64) string { return studioBy + ", preview " + strconv.FormatInt(id, 10) }

// conflictsPreviewPage serves GET /studio/db/{db}/conflicts/preview?op=N:
// the preview's progress (live), then every decision, page by page, in
// natural id order, with the apply form.
func (s *Studio) conflictsPreviewPage(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	op, err := s.previewOp(db, c.QueryParam("op"))
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	from, _ := strconv.Atoi(c.QueryParam("from"))
	d := s.previewData(db, op, from)
	ch := s.chrome(c, "Preview · Conflicts", db.Name(), views.NavConflicts, "conflicts-preview")
	return render(c, http.StatusOK, ch, views.PreviewPage(d))
}

// conflictsPreviewLive refreshes the preview's body while it runs and
// once when it ends.
func (s *Studio) conflictsPreviewLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	db, err := s.Catalog.Get(q.Get("db"))
	if err != nil {
		return nil, nil
	}
	op, err := s.previewOp(db, q.Get("op"))
	if err != nil {
		return nil, nil
	}
	from, _ := strconv.Atoi(q.Get("from"))
	return []views.Fragment{{ID: "preview-body", C: views.PreviewBody(s.previewData(db, op, from))}}, nil
}

// conflictsApply serves POST /studio/db/{db}/conflicts/apply: starts the
// operation that resolves what a preview showed (preview=N): every id it
// would resolve, each only while its versions are those previewed. The
// older form (pin/fp pairs) is still understood.
func (s *Studio) conflictsApply(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	if err := s.readForm(c, db.Name()); err != nil {
		return err
	}
	if s.Conflicts == nil {
		return s.studioError(c, db.Name(), errNoBulk)
	}
	form, cq := bulkFormFrom(c)
	back := string(views.DBURLQ(db.Name(), "conflicts", cq.base()))
	var op *conflicts.Operation
	var count int
	if raw := c.FormValue("preview"); raw != "" {
		pv, err := s.previewOp(db, raw)
		if err == nil {
			// Back to the list as the preview's scope filtered it.
			scope := pv.Progress().Spec.Scope
			back = string(views.DBURLQ(db.Name(), "conflicts", conflictsQuery{collection: scope.Collection, prefix: scope.Prefix}.base()))
			op, err = s.Conflicts.ApplyPreview(db, pv, previewBy(pv.Progress().ID))
		}
		if err != nil {
			return redirectFlash(c, back, "Not started: "+err.Error(), true)
		}
		count = op.Progress().Total
	} else {
		pins, fps := c.Request().PostForm["pin"], c.Request().PostForm["fp"]
		if len(pins) == 0 || len(pins) != len(fps) {
			return redirectFlash(c, back, "Nothing to apply: preview first, then apply the preview. Nothing was changed.", true)
		}
		spec := conflicts.Spec{Strategy: form.Strategy, Script: form.Script, By: studioBy, Expected: map[string]string{}}
		for i, id := range pins {
			spec.Expected[id] = fps[i]
		}
		if op, err = s.Conflicts.Start(db, spec); err != nil {
			return redirectFlash(c, back, "Not started: "+err.Error(), true)
		}
		count = len(pins)
	}
	p := op.Progress()
	msg := fmt.Sprintf("Operation %d started: %s on %d previewed conflicts.", p.ID, p.Spec.Strategy, count)
	return redirectFlash(c, back+"#op-"+strconv.FormatInt(p.ID, 10), msg, false)
}

// conflictOp finds a posted operation of this database.
func (s *Studio) conflictOp(c echo.Context, db *storage.DB) (*conflicts.Operation, error) {
	if s.Conflicts == nil {
		return nil, errNoBulk
	}
	id, err := strconv.ParseInt(c.FormValue("op"), 10, 64)
	if err != nil {
		return nil, dberr.New(dberr.BadRequest, "Which operation? %q is not an operation number.", c.FormValue("op"))
	}
	op, ok := s.Conflicts.Get(db.Name(), id)
	if !ok {
		return nil, dberr.New(dberr.NotFound, "There is no operation %d for %s on this node.", id, db.Name())
	}
	return op, nil
}

func (s *Studio) conflictsCancel(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	back := string(views.DBURL(db.Name(), "conflicts"))
	op, err := s.conflictOp(c, db)
	if err != nil {
		return redirectFlash(c, back, err.Error(), true)
	}
	op.Cancel()
	_ = op.Wait(c.Request().Context())
	p := op.Progress()
	return redirectFlash(c, back+"#op-"+strconv.FormatInt(p.ID, 10),
		fmt.Sprintf("Operation %d is %s after %d of %d (%d resolved); Resume continues it.", p.ID, p.State, p.Done, p.Total, p.Resolved), false)
}

func (s *Studio) conflictsResume(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	back := string(views.DBURL(db.Name(), "conflicts"))
	op, err := s.conflictOp(c, db)
	if err == nil {
		err = op.Resume()
	}
	if err != nil {
		return redirectFlash(c, back, err.Error(), true)
	}
	id := op.Progress().ID
	return redirectFlash(c, back+"#op-"+strconv.FormatInt(id, 10), fmt.Sprintf("Operation %d resumed.", id), false)
}

// cvNodes lists a change vector's entries as "TAG:ETAG".
func cvNodes(cv string) []string {
	v, err := changevector.ParseStored(cv)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(v))
	for _, e := range v {
		out = append(out, e.Tag+":"+strconv.FormatInt(e.Etag, 10))
	}
	return out
}

func versionViews(vs []storage.Version) []views.VersionView {
	out := make([]views.VersionView, len(vs))
	for i, v := range vs {
		out[i] = views.VersionView{Index: i, ChangeVector: v.ChangeVector, LastModified: v.LastModified, Tombstone: v.Tombstone, Nodes: cvNodes(v.ChangeVector)}
		if !v.Tombstone {
			out[i].JSON = docPretty(v.Body)
		}
	}
	return out
}

// canonJSON is a value's canonical text (object keys sorted, numbers as
// written), to compare values regardless of spacing and key order.
func canonJSON(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(b)
}

// diffFields lines up the top-level fields of the versions (in order of
// first appearance; @metadata left out) and marks those that differ.
func diffFields(vs []storage.Version) []views.DiffField {
	var order []string
	index := map[string]int{}
	values := make([]map[string][]byte, len(vs))
	for i, v := range vs {
		values[i] = map[string][]byte{}
		if v.Tombstone {
			continue
		}
		members, _, _ := docSplitBody(v.Body, 0)
		for _, m := range members {
			if _, dup := values[i][m.name]; dup {
				continue
			}
			values[i][m.name] = m.val
			if _, ok := index[m.name]; !ok {
				index[m.name] = len(order)
				order = append(order, m.name)
			}
		}
	}
	out := make([]views.DiffField, 0, len(order))
	for _, name := range order {
		f := views.DiffField{Name: name}
		seen := map[string]bool{}
		for i := range vs {
			raw, ok := values[i][name]
			if !ok {
				f.Cells = append(f.Cells, views.DiffCell{Missing: true})
				f.Differs = true
				continue
			}
			seen[canonJSON(raw)] = true
			f.Differs = f.Differs || len(seen) > 1
			var b bytes.Buffer
			text := string(raw)
			if json.Compact(&b, raw) == nil {
				text = b.String()
			}
			cell := views.DiffCell{Text: docShorten(text, diffCellRunes)}
			if cell.Text != text {
				cell.Title = docShorten(text, titleRunes)
			}
			f.Cells = append(f.Cells, cell)
		}
		out = append(out, f)
	}
	return out
}

// conflictDocData reads one id's versions for its page; Gone when the id
// is not in conflict.
func conflictDocData(ctx context.Context, db *storage.DB, id string) (views.ConflictDocPage, []storage.Version, error) {
	p := views.ConflictDocPage{DB: db.Name(), ID: id}
	all, err := db.ConflictVersions(ctx, []string{id})
	if err != nil {
		return p, nil, err
	}
	vs := all[storage.LowerID(id)]
	if len(vs) == 0 {
		p.Gone = true
		return p, nil, nil
	}
	p.ID, p.Collection, p.Fingerprint = vs[0].ID, vs[0].Collection, storage.Fingerprint(vs)
	p.Versions, p.Fields = versionViews(vs), diffFields(vs)
	if body, fields := conflicts.Suggest(vs); body != nil {
		p.Editor, p.Conflicting = string(body), fields
	}
	return p, vs, nil
}

func (s *Studio) renderConflictDoc(c echo.Context, db *storage.DB, p views.ConflictDocPage, status int) error {
	return render(c, status, s.chrome(c, p.ID+" · Conflicts", db.Name(), views.NavConflicts, ""), views.ConflictDoc(p))
}

func (s *Studio) showConflictDoc(c echo.Context, id string) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	if id == "" {
		return s.studioError(c, db.Name(), dberr.New(dberr.BadRequest, "Which document? The address has no id."))
	}
	p, _, err := conflictDocData(c.Request().Context(), db, id)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	status := http.StatusOK
	if p.Gone {
		status = http.StatusNotFound
	}
	return s.renderConflictDoc(c, db, p, status)
}

// conflictDocPage serves GET /studio/db/{db}/conflicts/doc?id=…
func (s *Studio) conflictDocPage(c echo.Context) error {
	return s.showConflictDoc(c, c.QueryParam("id"))
}

// conflictDocByPath serves GET /studio/db/{db}/conflicts/{id...}.
func (s *Studio) conflictDocByPath(c echo.Context) error {
	return s.showConflictDoc(c, restOfPath(c))
}

const changedMeanwhile = "Not resolved: the conflict changed since you opened it (another version arrived, or someone resolved it)."

// refuseChanged re-renders the id's page after a refused resolution: the
// versions as stored now, and the user's text kept in the editor.
func (s *Studio) refuseChanged(c echo.Context, db *storage.DB, id, text string) error {
	p, _, err := conflictDocData(c.Request().Context(), db, id)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	p.Error, p.Changed = changedMeanwhile, true
	if p.Gone {
		p.Error = "Not resolved: " + id + " is no longer in conflict; someone resolved it since you opened it."
	}
	if text != "" {
		p.Editor = text
	}
	return s.renderConflictDoc(c, db, p, http.StatusConflict)
}

// resolveConflict writes a resolution of id pinned to fingerprint; false
// when the versions are no longer those.
func resolveConflict(ctx context.Context, db *storage.DB, id, fingerprint string, res storage.Resolution) (bool, storage.Info, error) {
	var ok bool
	var info storage.Info
	err := db.Write(ctx, func(tx *storage.Tx) error {
		var err error
		ok, info, err = tx.ResolveConflict(id, fingerprint, res, studioBy)
		return err
	})
	return ok, info, err
}

// conflictKeep serves POST /studio/db/{db}/conflicts/doc/keep: one of the
// versions, as it is, becomes the document.
func (s *Studio) conflictKeep(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	if err := s.readForm(c, db.Name()); err != nil {
		return err
	}
	id, fp, cv := c.FormValue("id"), c.FormValue("fingerprint"), c.FormValue("cv")
	if id == "" || fp == "" || cv == "" {
		return s.studioError(c, db.Name(), dberr.New(dberr.BadRequest, "The form does not say which version of which conflict to keep; reload the conflict and choose again."))
	}
	ctx := c.Request().Context()
	all, err := db.ConflictVersions(ctx, []string{id})
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	vs := all[storage.LowerID(id)]
	if len(vs) == 0 || storage.Fingerprint(vs) != fp {
		return s.refuseChanged(c, db, id, "")
	}
	chosen := -1
	for i, v := range vs {
		if v.ChangeVector == cv {
			chosen = i
		}
	}
	if chosen < 0 {
		return s.refuseChanged(c, db, id, "")
	}
	v := vs[chosen]
	ok, info, err := resolveConflict(ctx, db, id, fp, storage.Resolution{Tombstone: v.Tombstone, Body: v.Body, LastModified: v.LastModified, Strategy: conflicts.Manual})
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	if !ok {
		return s.refuseChanged(c, db, id, "")
	}
	msg := fmt.Sprintf("Resolved %s: kept version %d.", info.ID, chosen+1)
	if v.Tombstone {
		return redirectFlash(c, string(views.DBURL(db.Name(), "conflicts")), msg+" The document is deleted.", false)
	}
	return redirectFlash(c, string(views.DocURL(db.Name(), info.ID)), msg, false)
}

// conflictResolve serves POST /studio/db/{db}/conflicts/doc/resolve: the
// editor's text becomes the document. Refused (text kept) when it is not a
// valid document, changes the collection, or the conflict changed.
func (s *Studio) conflictResolve(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	if err := s.readForm(c, db.Name()); err != nil {
		return err
	}
	id, fp, text := c.FormValue("id"), c.FormValue("fingerprint"), c.FormValue("json")
	if id == "" || fp == "" {
		return s.studioError(c, db.Name(), dberr.New(dberr.BadRequest, "The form does not say which conflict it resolves; reload the conflict and try again."))
	}
	ctx := c.Request().Context()
	p, vs, err := conflictDocData(ctx, db, id)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	if p.Gone || p.Fingerprint != fp {
		return s.refuseChanged(c, db, id, text)
	}
	parsed, err := s.parseDocText(text, id)
	if err == nil && !strings.EqualFold(parsed.Collection, vs[0].Collection) {
		err = dberr.New(dberr.BadRequest, "Not resolved: the document must stay in collection %s (its @metadata.@collection says %s).", vs[0].Collection, parsed.Collection)
	}
	if err != nil {
		p.Error, p.Editor = err.Error(), text
		return s.renderConflictDoc(c, db, p, http.StatusBadRequest)
	}
	ok, info, err := resolveConflict(ctx, db, id, fp, storage.Resolution{Body: parsed.Body, Strategy: conflicts.Manual})
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	if !ok {
		return s.refuseChanged(c, db, id, text)
	}
	return redirectFlash(c, string(views.DocURL(db.Name(), info.ID)), "Resolved "+info.ID+" with your version.", false)
}
