package handlers

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/subscriptions"
)

// registerSubscriptions adds the subscription definition endpoints the npm
// client uses (protocol reference §7.1–7.2). Workers come later.
func (a *API) registerSubscriptions(g *echo.Group) {
	g.PUT("/subscriptions", a.createSubscription)
	g.GET("/subscriptions", a.listSubscriptions)
	g.GET("/subscriptions/state", a.subscriptionState)
	g.DELETE("/subscriptions", a.deleteSubscription)
	g.POST("/subscriptions/drop", a.dropSubscriptionConnections)
	g.POST("/subscriptions/update", a.updateSubscription)
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
	raw, _ := json.Marshal(def)
	res, err := a.Cluster.CreateSubscription(c.Request().Context(), db.Name(), strings.TrimSpace(o.Name), raw)
	if err != nil {
		return err
	}
	name := strings.TrimSpace(o.Name)
	if name == "" {
		name = strconv.FormatInt(res.Value, 10)
	}
	return writeJSON(c, http.StatusCreated, map[string]any{"Name": name, "RaftCommandIndex": res.Index})
}

// findSubscription finds a subscription by name, or by id when the name is
// empty and id is given (updates may name it either way).
func (a *API) findSubscription(db, name string, id *int64) (cluster.Subscription, subscriptions.Definition, error) {
	for _, s := range a.Cluster.Subscriptions(db) {
		if (name != "" && strings.EqualFold(s.Name, name)) || (name == "" && id != nil && *id == s.ID) {
			d, err := subscriptions.Parse(s.Data)
			return s, d, err
		}
	}
	return cluster.Subscription{}, subscriptions.Definition{}, dberr.New(dberr.NotFound, "Subscription '%s' does not exist", name)
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
		out = append(out, subscriptions.StateOf(s.ID, s.Name, d))
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Results": out})
}

func (a *API) subscriptionState(c echo.Context) error {
	db, name, err := a.dbParam(c, "name")
	if err != nil {
		return err
	}
	s, d, err := a.findSubscription(db.Name(), name, nil)
	if dberr.Is(err, dberr.NotFound) {
		return c.NoContent(http.StatusNotFound) // as RavenDB: an empty 404
	}
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, subscriptions.StateOf(s.ID, s.Name, d))
}

func (a *API) deleteSubscription(c echo.Context) error {
	db, name, err := a.dbParam(c, "taskName")
	if err != nil {
		return err
	}
	s, _, err := a.findSubscription(db.Name(), name, nil)
	if err != nil {
		return err
	}
	if _, err := a.Cluster.DeleteSubscription(c.Request().Context(), db.Name(), s.Name); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// dropSubscriptionConnections answers for an existing subscription; until
// workers arrive there are no connections to drop.
func (a *API) dropSubscriptionConnections(c echo.Context) error {
	db, name, err := a.dbParam(c, "name")
	if err != nil {
		return err
	}
	if _, _, err := a.findSubscription(db.Name(), name, nil); err != nil {
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
	found, d, err := a.findSubscription(db.Name(), o.Name, o.ID)
	if err != nil {
		return err
	}
	if d, err = d.Update(o); err != nil {
		return err
	}
	raw, _ := json.Marshal(d)
	res, err := a.Cluster.UpdateSubscription(c.Request().Context(), db.Name(), found.Name, raw)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Name": found.Name, "RaftCommandIndex": res.Index})
}
