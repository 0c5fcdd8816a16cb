package studio

import (
	"context"
	"errors"
	"net/http"
	"net/url"
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

// subscriptionsData is the monitor's report (current definitions, figures
// sampled about once a second).
func (s *Studio) subscriptionsData(ctx context.Context, db string) views.SubscriptionsData {
	d := views.SubscriptionsData{DB: db}
	if s.Subscriptions != nil {
		d.Enabled, d.Report = true, s.Subscriptions.Report(ctx, db)
	}
	return d
}

// subscriptionDetail finds one subscription in the monitor's report.
func (s *Studio) subscriptionDetail(ctx context.Context, db, name string) views.SubscriptionDetail {
	d := views.SubscriptionDetail{DB: db, Name: name}
	for _, st := range s.subscriptionsData(ctx, db).Report.Subscriptions {
		if strings.EqualFold(st.Name, name) {
			d.Found, d.Name, d.Stats = true, st.Name, st
		}
	}
	return d
}

// subscriptionsPage serves GET /studio/db/{db}/subscriptions; with
// ?query= it also runs the query as a test (subscriptions.Try: nothing is created).
func (s *Studio) subscriptionsPage(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	p := views.SubscriptionsPageData{Data: s.subscriptionsData(c.Request().Context(), db.Name()), Try: views.SubTry{PageSize: subTryDefault}}
	if s.Subscriptions != nil {
		p.Thresholds = s.Subscriptions.Thresholds(db.Name())
	}
	status := http.StatusOK
	if q := c.QueryParams(); q.Has("query") {
		if err := s.tryQuery(c, db, &p.Try, q); err != nil {
			return s.studioError(c, db.Name(), err)
		}
		if p.Try.Error != "" {
			status = http.StatusBadRequest
		}
	}
	ch := s.chrome(c, "Subscriptions · "+db.Name(), db.Name(), views.NavSubscriptions, "subscriptions")
	// The live regions do not depend on the test query.
	ch.Query = url.Values{}
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
	return []views.Fragment{{ID: "subscriptions-body", C: views.SubscriptionsBody(s.subscriptionsData(ctx, db.Name()))}}, nil
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
	back := string(views.DBURL(db.Name(), "subscriptions"))
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
			msg = "No worker was connected to " + name + "."
		} else {
			msg = "Dropped the worker of " + name + "; it is told not to reconnect."
		}
	case "delete":
		err = s.Subscriptions.Delete(ctx, db.Name(), name)
		msg = "Subscription " + name + " deleted."
	case "disable-flagged":
		var names []string
		names, err = s.Subscriptions.DisableFlagged(ctx, db.Name(), "")
		msg = "No enabled subscription is flagged; nothing was disabled."
		if len(names) > 0 {
			msg = "Disabled " + strconv.Itoa(len(names)) + " flagged: " + strings.Join(names, ", ") + "."
		}
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
		{"ChurnCount", &t.ChurnCount}, {"ChurnSeconds", &t.ChurnSeconds},
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
