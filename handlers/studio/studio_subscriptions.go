package studio

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/backend/subscriptions"
	"github.com/rookerydb/rookery/views"
)

// Subscriptions pages: every subscription of a database with the monitor's
// figures, status and runaway flags and the operator's actions, a test
// query that creates nothing, the monitor's thresholds; and one
// subscription's page with its connections and batches. Both refresh live
// (the manager notifies on connections, batches and acks; the figures move
// with the second's tick). The actions are POSTs to the list's URL with an
// action field, so no name a subscription may have collides with a route.

const (
	subTryDefault = 10
	subTryMax     = 100
	// subMaxBulk bounds the names one confirmed bulk action may carry.
	subMaxBulk = 10000
)

var errNoSubscriptions = dberr.New(dberr.Unavailable, "Subscriptions are not available on this node.")

// registerSubscriptions adds the subscriptions pages. One subscription's
// page is /subscriptions/{name} (a name may hold slashes, sent as %2F).
func (s *Studio) registerSubscriptions(g *echo.Group) {
	g.GET("/subscriptions", s.subscriptionsPage)
	g.POST("/subscriptions", s.subscriptionsAction)
	g.GET("/subscriptions/*", s.subscriptionPage)
	s.addLive("subscriptions", s.subscriptionsLive, true)
	s.addLive("subscription", s.subscriptionLive, true)
}

// subscriptionsData is the cluster-wide list (studio_subscriptions_cluster.go)
// through the view v.
func (s *Studio) subscriptionsData(ctx context.Context, db string, v views.SubView) views.SubscriptionsData {
	d := views.SubscriptionsData{DB: db, View: v}
	if s.Subscriptions == nil {
		return d
	}
	reports := s.subReports(ctx, db, "")
	d.Enabled, d.Report = true, reports[0].r
	for _, nr := range reports {
		d.Nodes = append(d.Nodes, nr.node)
	}
	d.Rows = mergeSubscriptions(reports)
	d.Shown = applySubView(d.Rows, v)
	return d
}

// subMaxFilter bounds the filter text.
const subMaxFilter = 200

// subViewFrom reads the list's view from query parameters (prefix "" on
// the page, "view-" in an action's form). An unknown sort is by name.
func subViewFrom(q url.Values, prefix string) views.SubView {
	v := views.SubView{Filter: strings.TrimSpace(q.Get(prefix + "filter")), HideDisabled: q.Get(prefix+"hideDisabled") != ""}
	if len(v.Filter) > subMaxFilter {
		v.Filter = v.Filter[:subMaxFilter]
	}
	for _, o := range views.SubSorts {
		if q.Get(prefix+"sort") == o.Key && o.Key != "name" {
			v.Sort = o.Key
		}
	}
	return v
}

// subStateRank orders rows for sort=state: problems first (unreachable,
// stalled, stopped, rewound, slow), then the healthy, the disabled last.
func subStateRank(r views.SubRow) int {
	switch {
	case r.Unreachable:
		return 0
	case r.Disabled:
		return 7
	}
	switch r.Status {
	case subscriptions.Stalled:
		return 1
	case subscriptions.Stopped:
		return 2
	case subscriptions.Rewound:
		return 3
	case subscriptions.Slow:
		return 4
	}
	if len(r.Workers) == 0 {
		return 6
	}
	return 5
}

// applySubView filters and sorts rows (ties by name).
func applySubView(rows []views.SubRow, v views.SubView) []views.SubRow {
	out := make([]views.SubRow, 0, len(rows))
	f := strings.ToLower(v.Filter)
	for _, r := range rows {
		if v.HideDisabled && r.Disabled {
			continue
		}
		if f != "" && !strings.Contains(strings.ToLower(r.Name), f) {
			continue
		}
		out = append(out, r)
	}
	byName := func(a, b views.SubRow) int {
		return cmp.Or(cmp.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)), cmp.Compare(a.Name, b.Name))
	}
	slices.SortStableFunc(out, func(a, b views.SubRow) int {
		switch v.Sort {
		case "state":
			return cmp.Or(cmp.Compare(subStateRank(a), subStateRank(b)), byName(a, b))
		case "backlog":
			// Unknown figures (unreachable) last.
			return cmp.Or(cmp.Compare(b2i(a.Unreachable), b2i(b.Unreachable)), cmp.Compare(b.Backlog, a.Backlog), byName(a, b))
		case "activity":
			return cmp.Or(b.LastActivity().Compare(a.LastActivity()), byName(a, b))
		}
		return byName(a, b)
	})
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// subscriptionDetail is one subscription with the responsible node's
// figures (its connections and batches too).
func (s *Studio) subscriptionDetail(ctx context.Context, db, name string) views.SubscriptionDetail {
	d := views.SubscriptionDetail{DB: db, Name: name}
	if s.Subscriptions == nil {
		return d
	}
	reports := s.subReports(ctx, db, name)
	for _, nr := range reports {
		d.Nodes = append(d.Nodes, nr.node)
	}
	for _, r := range mergeSubscriptions(reports) {
		if strings.EqualFold(r.Name, name) {
			d.Found, d.Name, d.Row = true, r.Name, r
		}
	}
	return d
}

// subscriptionsPage serves GET /studio/db/{db}/subscriptions: the list in
// the view of ?filter=&sort=&hideDisabled=; with ?query= it also runs the
// query as a test (subscriptions.Try: nothing is created); with
// ?confirm=disable-flagged it asks to confirm "Disable flagged".
func (s *Studio) subscriptionsPage(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	q := c.QueryParams()
	v := subViewFrom(q, "")
	p := views.SubscriptionsPageData{Charts: s.chartsInfo(), Data: s.subscriptionsData(c.Request().Context(), db.Name(), v), Try: views.SubTry{PageSize: subTryDefault}}
	if s.Subscriptions != nil {
		p.Thresholds = s.Subscriptions.Thresholds(db.Name())
	}
	if q.Get("confirm") == "disable-flagged" && s.Subscriptions != nil {
		p.Confirm, p.ConfirmRows = true, p.Data.Flagged()
	}
	status := http.StatusOK
	if q.Has("query") {
		if err := s.tryQuery(c, db, &p.Try, q); err != nil {
			return s.studioError(c, db.Name(), err)
		}
		if p.Try.Error != "" {
			status = http.StatusBadRequest
		}
	}
	ch := s.chrome(c, "Subscriptions · "+db.Name(), db.Name(), views.NavSubscriptions, "subscriptions")
	// The live regions depend on the view only (not the test query).
	ch.Query = v.Values()
	return render(c, status, ch, views.SubscriptionsPage(p))
}

// tryQuery runs the test query into t; a query the user got wrong is
// t.Error, anything else an error.
func (s *Studio) tryQuery(c echo.Context, db *storage.DB, t *views.SubTry, q url.Values) error {
	t.Query, t.Ran = q.Get("query"), true
	if n, err := strconv.Atoi(q.Get("pageSize")); err == nil && n > 0 {
		t.PageSize = min(n, subTryMax)
	}
	docs, scanned, err := subscriptions.Try(c.Request().Context(), db, t.Query, t.PageSize)
	if err != nil {
		if errors.Is(err, context.Canceled) || dberr.KindOf(err) != dberr.BadRequest {
			return err
		}
		t.Error = err.Error()
		return nil
	}
	t.Scanned = scanned
	for _, d := range docs {
		t.Results = append(t.Results, docPretty(d))
	}
	return nil
}

// subscriptionPage serves GET /studio/db/{db}/subscriptions/{name}.
func (s *Studio) subscriptionPage(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	name := restOfPath(c)
	if name == "" {
		return c.Redirect(http.StatusFound, string(views.DBURL(db.Name(), "subscriptions")))
	}
	if s.Subscriptions == nil {
		return s.studioError(c, db.Name(), errNoSubscriptions)
	}
	d := s.subscriptionDetail(c.Request().Context(), db.Name(), name)
	if !d.Found {
		return s.studioError(c, db.Name(), dberr.New(dberr.NotFound, "Subscription '%s' does not exist in %s.", name, db.Name()))
	}
	ch := s.chrome(c, d.Name+" · Subscriptions", db.Name(), views.NavSubscriptions, "subscription")
	ch.Query = url.Values{"name": {d.Name}}
	return render(c, http.StatusOK, ch, views.SubscriptionPage(d))
}

func (s *Studio) subscriptionsLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	db, err := s.Catalog.Get(q.Get("db"))
	if err != nil {
		return nil, nil
	}
	d := s.subscriptionsData(ctx, db.Name(), subViewFrom(q, ""))
	return []views.Fragment{{ID: "subscriptions-tiles", C: views.SubscriptionsTiles(d)}, {ID: "subscriptions-body", C: views.SubscriptionsBody(d)}}, nil
}

func (s *Studio) subscriptionLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	db, err := s.Catalog.Get(q.Get("db"))
	if err != nil {
		return nil, nil
	}
	return []views.Fragment{{ID: "subscription-detail", C: views.SubscriptionDetailBody(s.subscriptionDetail(ctx, db.Name(), q.Get("name")))}}, nil
}

// subscriptionsAction serves POST /studio/db/{db}/subscriptions: action
// disable, enable, drop, delete (with name), disable-flagged or
// thresholds. It goes back to the page it came from with what happened.
func (s *Studio) subscriptionsAction(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	if err := s.readForm(c, db.Name()); err != nil {
		return err
	}
	if s.Subscriptions == nil {
		return s.studioError(c, db.Name(), errNoSubscriptions)
	}
	ctx := c.Request().Context()
	action, name := c.FormValue("action"), c.FormValue("name")
	v := subViewFrom(c.Request().PostForm, "view-")
	back := string(views.SubListURL(db.Name(), v, nil))
	if c.FormValue("from") == "detail" && name != "" && action != "delete" {
		back = string(views.SubURL(db.Name(), name))
	}
	var msg string
	switch action {
	case "disable", "enable":
		_, err = s.Subscriptions.SetDisabled(ctx, db.Name(), name, nil, action == "disable")
		msg = "Subscription " + name + " " + action + "d."
		if action == "disable" {
			msg += " Its worker was disconnected and is told not to reconnect."
		}
	case "drop":
		var dropped bool
		if dropped, err = s.Subscriptions.Drop(db.Name(), name); !dropped {
			msg = "No worker was connected to " + name + " on this node."
		} else {
			msg = "Dropped the worker of " + name + "; it is told not to reconnect."
		}
	case "delete":
		err = s.Subscriptions.Delete(ctx, db.Name(), name)
		msg = "Subscription " + name + " deleted."
	case "disable-flagged":
		// A bulk action is confirmed first: without the confirmation (and
		// the names it showed) nothing changes and the page asks.
		names := c.Request().PostForm["name"]
		if c.FormValue("confirmed") != "1" || len(names) == 0 {
			return c.Redirect(http.StatusSeeOther, string(views.SubListURL(db.Name(), v, url.Values{"confirm": {"disable-flagged"}})))
		}
		if len(names) > subMaxBulk {
			err = dberr.New(dberr.BadRequest, "At most %d subscriptions can be disabled at once; nothing was changed.", subMaxBulk)
			break
		}
		msg, err = s.disableConfirmed(ctx, db.Name(), names)
	case "thresholds":
		var t subscriptions.Thresholds
		if t, err = thresholdsForm(c.Request().PostForm); err == nil {
			err = s.Subscriptions.SetThresholds(ctx, db.Name(), t)
		}
		back += "#thresholds"
		msg = "Thresholds saved."
	default:
		err = dberr.New(dberr.BadRequest, "Unknown action %q; nothing was changed.", action)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		return redirectFlash(c, back, err.Error(), true)
	}
	return redirectFlash(c, back, msg, false)
}

// disableConfirmed disables exactly the subscriptions the operator
// confirmed (those already disabled or deleted since are said so).
func (s *Studio) disableConfirmed(ctx context.Context, db string, names []string) (string, error) {
	var done, already, gone []string
	for _, n := range names {
		changed, err := s.Subscriptions.SetDisabled(ctx, db, n, nil, true)
		switch {
		case dberr.Is(err, dberr.NotFound):
			gone = append(gone, n)
		case err != nil:
			return "", fmt.Errorf("disabled %d (%s), then: %w", len(done), strings.Join(done, ", "), err)
		case changed:
			done = append(done, n)
		default:
			already = append(already, n)
		}
	}
	msg := "Disabled " + strconv.Itoa(len(done)) + " subscription"
	if len(done) != 1 {
		msg += "s"
	}
	if len(done) > 0 {
		msg += ": " + strings.Join(done, ", ")
	}
	msg += "."
	if len(already) > 0 {
		msg += " Already disabled: " + strings.Join(already, ", ") + "."
	}
	if len(gone) > 0 {
		msg += " No longer exist: " + strings.Join(gone, ", ") + "."
	}
	return msg, nil
}

// thresholdsForm reads the thresholds form; an empty field is 0 (the
// default).
func thresholdsForm(f url.Values) (subscriptions.Thresholds, error) {
	var t subscriptions.Thresholds
	ints := []struct {
		name string
		v    *int
	}{
		{"WindowSeconds", &t.WindowSeconds}, {"StallSeconds", &t.StallSeconds}, {"BurstCount", &t.BurstCount},
		{"BurstSeconds", &t.BurstSeconds}, {"DuplicateCount", &t.DuplicateCount}, {"FromStartCount", &t.FromStartCount},
		{"ChurnCount", &t.ChurnCount}, {"ChurnSeconds", &t.ChurnSeconds}, {"SlowSeconds", &t.SlowSeconds},
	}
	bad := func(name string) error {
		return dberr.New(dberr.BadRequest, "%s must be a whole number of at least 0; the thresholds were not changed.", name)
	}
	for _, x := range ints {
		if v := strings.TrimSpace(f.Get(x.name)); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return t, bad(x.name)
			}
			*x.v = n
		}
	}
	if v := strings.TrimSpace(f.Get("ScanMinDocs")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return t, bad("ScanMinDocs")
		}
		t.ScanMinDocs = n
	}
	if v := strings.TrimSpace(f.Get("ScanShare")); v != "" {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || x < 0 || x > 1 {
			return t, dberr.New(dberr.BadRequest, "ScanShare is a fraction between 0 and 1; the thresholds were not changed.")
		}
		t.ScanShare = x
	}
	return t, nil
}
