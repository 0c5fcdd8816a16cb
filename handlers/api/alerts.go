package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/dberr"
)

// The notification center's API: every node's alerts, merged by key, as
// the caller may see them (a database's alerts need read access to it, the
// certificates' the Operator clearance), and the actions on them, applied
// on every node that raised the key.
//
//	GET  /admin/notifications[?hidden=true]
//	POST /admin/notifications/dismiss?key=
//	POST /admin/notifications/postpone?key=&for=1h   (a duration, or days: 1d)
//	POST /admin/notifications/restore?key=
func (a *API) registerAlerts(e *echo.Echo) {
	e.GET("/admin/notifications", a.notifications)
	e.POST("/admin/notifications/dismiss", a.notificationAction(alerts.Dismiss))
	e.POST("/admin/notifications/postpone", a.notificationAction(alerts.Postpone))
	e.POST("/admin/notifications/restore", a.notificationAction(alerts.Restore))
}

// notificationsAnswer is GET /admin/notifications.
type notificationsAnswer struct {
	At time.Time
	// Shown counts the alerts neither dismissed nor postponed.
	Shown  int
	Alerts []alerts.Entry
	// Nodes says whose alerts are in: a node that did not answer is
	// marked, its alerts missing.
	Nodes []alerts.NodeState
}

func (a *API) center() (alerts.Center, error) {
	if a.Alerts == nil {
		return nil, dberr.New(dberr.Unavailable, "This node has no notification center")
	}
	return a.Alerts, nil
}

func (a *API) notifications(c echo.Context) error {
	center, err := a.center()
	if err != nil {
		return err
	}
	hidden := false
	if v := c.QueryParam("hidden"); v != "" {
		if hidden, err = strconv.ParseBool(v); err != nil {
			return dberr.New(dberr.BadRequest, "hidden must be true or false, not %q", v)
		}
	}
	g := center.Gathered(c.Request().Context()).For(auth.FromContext(c.Request().Context()), hidden)
	return c.JSON(http.StatusOK, notificationsAnswer{At: g.At, Shown: g.Shown(), Alerts: g.Entries, Nodes: g.Nodes})
}

func (a *API) notificationAction(action string) echo.HandlerFunc {
	return func(c echo.Context) error {
		center, err := a.center()
		if err != nil {
			return err
		}
		ctx := c.Request().Context()
		key := c.QueryParam("key")
		if key == "" {
			return dberr.New(dberr.BadRequest, "key is required: the Key of an alert of GET /admin/notifications")
		}
		var until time.Time
		if action == alerts.Postpone {
			d, err := alerts.ParsePostpone(c.QueryParam("for"))
			if err != nil {
				return dberr.New(dberr.BadRequest, "for: %v", err)
			}
			until = time.Now().Add(d)
		}
		// Only an alert the caller may see can be acted on.
		if _, ok := center.Gathered(ctx).For(auth.FromContext(ctx), true).Find(key); !ok {
			return dberr.New(dberr.NotFound, "There is no alert %q that you may see", key)
		}
		err = center.Act(ctx, key, action, until)
		if errors.Is(err, alerts.ErrNotFound) {
			return dberr.New(dberr.NotFound, "No node holds the alert %q any more (its condition cleared)", key)
		}
		if err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
}
