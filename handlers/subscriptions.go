package handlers

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
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
	if err := json.NewDecoder(io.LimitReader(c.Request().Body, 1<<20)).Decode(&o); err != nil {
		return o, dberr.New(dberr.BadRequest, "Invalid subscription options: %v", err)
	}
	return o, nil
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
	def, err := subscriptions.FromOptions(o, time.Now())
	if err != nil {
		return err
	}
	if def.Start, err = resolveStart(c.Request().Context(), db, def); err != nil {
		return err
	}
	raw, _ := json.Marshal(def)
	res, err := a.Cluster.CreateSubscription(c.Request().Context(), db.Name(), strings.TrimSpace(o.Name), raw)
	if err == nil && def.Start != subscriptions.BeginningOfTime {
		// The starting point is the first progress.
		_, err = a.Cluster.SubscriptionProgress(c.Request().Context(), db.Name(), nameOr(o.Name, res.Value), nil, subscriptions.InitialProgress(def.Start, 0).Raw())
	}
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusCreated, map[string]any{"Name": nameOr(o.Name, res.Value), "RaftCommandIndex": res.Index})
}

// nameOr is a subscription's name: the one given, or its id.
func nameOr(name string, id int64) string {
	if name = strings.TrimSpace(name); name != "" {
		return name
	}
	return strconv.FormatInt(id, 10)
}

// resolveStart turns LastDocument into the change vector of the
// collection's newest document on this copy (the subscription starts after
// it); a literal change vector must parse.
func resolveStart(ctx context.Context, db *storage.DB, def subscriptions.Definition) (string, error) {
	switch def.Start {
	case subscriptions.BeginningOfTime:
		return def.Start, nil
	case subscriptions.LastDocument:
		last, err := db.CollectionLastEtag(ctx, def.Collection)
		if err != nil {
			return "", err
		}
		return subscriptions.Progress{}.Advanced(db.NodeTag(), db.DatabaseID(), last).Vector, nil
	}
	if _, err := changevector.Parse(def.Start); err != nil {
		return "", dberr.New(dberr.BadRequest, "ChangeVector must be BeginningOfTime, LastDocument, DoNotChange or a change vector: %v", err)
	}
	return def.Start, nil
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
	found, d, err := a.Subscriptions.Find(db.Name(), o.Name, o.ID)
	if err != nil {
		return err
	}
	if d, err = d.Update(o); err != nil {
		return err
	}
	var progress json.RawMessage
	if o.ChangeVector != nil && *o.ChangeVector != "" && *o.ChangeVector != subscriptions.DoNotChange {
		// A new starting point: the progress starts over from it.
		if d.Start, err = resolveStart(c.Request().Context(), db, d); err != nil {
			return err
		}
		old := subscriptions.ParseProgress(found.Progress)
		next := subscriptions.InitialProgress(d.Start, old.Rewinds)
		if next.Etag(db.DatabaseID()) < old.Etag(db.DatabaseID()) {
			next.Rewinds++ // moved back: the monitor shows it
		}
		progress = next.Raw()
	}
	raw, _ := json.Marshal(d)
	res, err := a.Cluster.UpdateSubscription(c.Request().Context(), db.Name(), found.Name, raw, progress)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Name": found.Name, "RaftCommandIndex": res.Index})
}
