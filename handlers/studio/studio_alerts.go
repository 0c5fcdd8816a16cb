package studio

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/views"
)

// The Alerts page (/studio/alerts): every node's alerts, merged by key
// (a condition the whole cluster sees, such as a node that does not
// answer, is one row naming the nodes that raised it), as the viewer may
// see them, live; dismiss, postpone and show again go to every node that
// holds the alert. The header's badge counts the same list.

const alertsPath = "/studio/alerts"

func (s *Studio) registerAlerts(g *echo.Group) {
	g.GET("/alerts", s.alertsPage)
	g.POST("/alerts/dismiss", s.alertAction(alerts.Dismiss))
	g.POST("/alerts/postpone", s.alertAction(alerts.Postpone))
	g.POST("/alerts/restore", s.alertAction(alerts.Restore))
	s.addLive("alerts", s.alertsLive, true)
}

func (s *Studio) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// gathered is every node's alerts (this node's only without a center).
func (s *Studio) gathered(ctx context.Context) alerts.Gathered {
	if s.Notifications != nil {
		return s.Notifications.Gathered(ctx)
	}
	return alerts.Merge([]alerts.NodeList{{Node: s.NodeTag, Alerts: s.Alerts.All()}}, s.now())
}

// visibleAlerts are the shown alerts (neither dismissed nor postponed) of
// every node that the viewer may see: a database's only to those who may
// read it, the certificates' only to Operators and above.
func (s *Studio) visibleAlerts(ctx context.Context) []alerts.Alert {
	if s.Alerts == nil {
		return nil
	}
	g := s.gathered(ctx).For(auth.FromContext(ctx), false)
	out := make([]alerts.Alert, 0, len(g.Entries))
	for _, e := range g.Entries {
		out = append(out, e.Alert)
	}
	return out
}

func (s *Studio) alertsData(ctx context.Context, q url.Values) views.AlertsData {
	all := s.gathered(ctx).For(auth.FromContext(ctx), true)
	d := views.AlertsData{Self: s.NodeTag, Nodes: all.Nodes, ShowHidden: q.Get("hidden") != "", Now: s.now()}
	for _, e := range all.Entries {
		if e.Hidden {
			d.HiddenCount++
			if !d.ShowHidden {
				continue
			}
		}
		d.Entries = append(d.Entries, e)
	}
	return d
}

func (s *Studio) alertsPage(c echo.Context) error {
	ctx := c.Request().Context()
	ch := s.chrome(c, "Alerts", "", views.NavAlerts, "alerts")
	return render(c, http.StatusOK, ch, views.AlertsPage(s.alertsData(ctx, c.QueryParams())))
}

func (s *Studio) alertsLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	return []views.Fragment{{ID: "alerts-body", C: views.AlertsBody(s.alertsData(ctx, q))}}, nil
}

// alertAction dismisses, postpones or shows again the alert of the form's
// key (an older form sends its id), on every node that holds it, if the
// viewer may see it; then back to the page it came from.
func (s *Studio) alertAction(action string) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		back := c.Request().Referer()
		if u, err := url.Parse(back); err != nil || back == "" || u.Host != c.Request().Host {
			back = alertsPath
		}
		key := c.FormValue("key")
		g := s.gathered(ctx).For(auth.FromContext(ctx), true)
		if key == "" {
			if id := c.FormValue("id"); id != "" {
				for _, e := range g.Entries {
					if e.ID == id && e.Node == s.NodeTag {
						key = e.Key
					}
				}
			}
		}
		e, ok := g.Find(key)
		if key == "" || !ok {
			return redirectFlash(c, back, "That alert is gone (its condition cleared), or you may not see it.", true)
		}
		var until time.Time
		if action == alerts.Postpone {
			d, err := alerts.ParsePostpone(c.FormValue("for"))
			if err != nil {
				return redirectFlash(c, back, "Not postponed: "+err.Error(), true)
			}
			until = s.now().Add(d)
		}
		var err error
		if s.Notifications != nil {
			err = s.Notifications.Act(ctx, key, action, until)
		} else {
			switch action {
			case alerts.Dismiss:
				err = s.Alerts.DismissKey(key)
			case alerts.Postpone:
				err = s.Alerts.PostponeKey(key, until)
			default:
				err = s.Alerts.RestoreKey(key)
			}
		}
		if errors.Is(err, alerts.ErrNotFound) {
			return redirectFlash(c, back, "That alert is gone: its condition cleared.", true)
		}
		if err != nil {
			return redirectFlash(c, back, err.Error(), true)
		}
		msg := "Dismissed “" + e.Title + "”: it stays hidden until its condition clears."
		switch action {
		case alerts.Postpone:
			msg = "Postponed “" + e.Title + "” until " + until.UTC().Format("2006-01-02 15:04 UTC") + "."
		case alerts.Restore:
			msg = "“" + e.Title + "” shows again."
		}
		return redirectFlash(c, back, msg, false)
	}
}
