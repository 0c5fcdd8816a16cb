package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/subscriptions"
)

// registerSubscriptions adds the subscription endpoints: those the npm
// client uses (protocol reference §7.1–7.2), RavenDB's task toggle, and
// Rookery's monitor, test query and bulk disable. Workers connect over TCP
// (web/subscription_tcp.go); /info/remote-task/tcp tells them where.
func (a *API) registerSubscriptions(g *echo.Group) {
	g.PUT("/subscriptions", a.createSubscription)
	g.GET("/subscriptions", a.listSubscriptions)
	g.GET("/subscriptions/state", a.subscriptionState)
	g.DELETE("/subscriptions", a.deleteSubscription)
	g.POST("/subscriptions/drop", a.dropSubscriptionConnections)
	g.POST("/subscriptions/update", a.updateSubscription)
	g.GET("/subscriptions/connection-details", a.subscriptionConnectionDetails)
	g.POST("/subscriptions/try", a.trySubscription)
	g.POST("/subscriptions/enable", a.enableSubscription)
	g.POST("/subscriptions/disable", a.disableSubscription)
	g.POST("/subscriptions/disable-flagged", a.disableFlaggedSubscriptions)
	g.GET("/subscriptions/monitor", a.subscriptionMonitor)
	g.GET("/subscriptions/monitor/thresholds", a.subscriptionThresholds)
	g.PUT("/subscriptions/monitor/thresholds", a.setSubscriptionThresholds)
	g.POST("/admin/tasks/state", a.toggleTask)
}

func readSubscriptionOptions(c echo.Context) (subscriptions.Options, error) {
	var o subscriptions.Options
	err := readJSON(c, queryBodyLimit(), &o, "Invalid subscription options")
	return o, err
}

func (a *API) createSubscription(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	o, err := readSubscriptionOptions(c)
	if err != nil {
		return err
	}
	name, index, err := a.Subscriptions.Create(c.Request().Context(), db, o)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusCreated, map[string]any{"Name": name, "RaftCommandIndex": index})
}

func (a *API) listSubscriptions(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	start, pageSize, err := paging(c)
	if err != nil {
		return err
	}
	out := []subscriptions.State{}
	for i, s := range a.Cluster.Subscriptions(db.Name()) {
		if i < start || len(out) >= pageSize {
			continue
		}
		d, err := subscriptions.Parse(s.Data)
		if err != nil {
			return err
		}
		out = append(out, a.stateOf(db.Name(), s, d))
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Results": out})
}

func (a *API) subscriptionState(c echo.Context) error {
	db, name, err := a.dbParam(c, "name")
	if err != nil {
		return err
	}
	s, d, err := a.Subscriptions.Find(db.Name(), name, nil)
	if dberr.Is(err, dberr.NotFound) {
		return c.NoContent(http.StatusNotFound) // as RavenDB: an empty 404
	}
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, a.stateOf(db.Name(), s, d))
}

func (a *API) stateOf(db string, s cluster.Subscription, d subscriptions.Definition) subscriptions.State {
	return subscriptions.StateOf(s.ID, s.Name, d, subscriptions.ParseProgress(s.Progress), a.Subscriptions.LastConnection(db, s.Name))
}

func (a *API) deleteSubscription(c echo.Context) error {
	db, name, err := a.dbParam(c, "taskName")
	if err != nil {
		return err
	}
	if err := a.Subscriptions.Delete(c.Request().Context(), db.Name(), name); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// dropSubscriptionConnections disconnects a subscription's worker; the
// worker is told it was dropped and does not reconnect.
func (a *API) dropSubscriptionConnections(c echo.Context) error {
	db, name, err := a.dbParam(c, "name")
	if err != nil {
		return err
	}
	if _, err := a.Subscriptions.Drop(db.Name(), name); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (a *API) updateSubscription(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	o, err := readSubscriptionOptions(c)
	if err != nil {
		return err
	}
	name, index, err := a.Subscriptions.Update(c.Request().Context(), db, o)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Name": name, "RaftCommandIndex": index})
}
