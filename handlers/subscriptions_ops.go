package handlers

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/rql"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/backend/subscriptions"
)

// remoteTaskTCP tells a subscription worker where to connect
// (GET /info/remote-task/tcp?database=&remote-task=&tag=&verify-database=).
// Workers speak the TCP protocol on the HTTP port: the server tells the two
// apart by their first byte (web/DESIGN.md).
func (a *API) remoteTaskTCP(c echo.Context) error {
	if dbName := c.QueryParam("database"); dbName != "" && c.QueryParam("verify-database") != "false" {
		if _, err := a.Catalog.Get(dbName); err != nil {
			return err
		}
	}
	tag, base := a.NodeTag, a.URL()
	if task := c.QueryParam("remote-task"); task != "" {
		// A subscription with a mentor node is served there.
		if _, d, ok := a.Subscriptions.Find(c.QueryParam("database"), task); ok && d.MentorNode != "" {
			for _, n := range a.Cluster.Nodes() {
				if n.Tag == d.MentorNode && n.URL != "" {
					tag, base = n.Tag, n.URL
				}
			}
		}
	}
	return writeJSON(c, http.StatusOK, tcpInfo(tag, base))
}

// tcpInfo is RavenDB's TcpConnectionInfo for a node's base URL.
func tcpInfo(tag, base string) map[string]any {
	u, err := url.Parse(base)
	host := base
	if err == nil {
		host = u.Host
		if u.Port() == "" {
			if u.Scheme == "https" {
				host += ":443"
			} else {
				host += ":80"
			}
		}
	}
	tcp := "tcp://" + host
	return map[string]any{"Url": tcp, "Urls": []string{tcp}, "Certificate": nil, "NodeTag": tag, "ServerId": nil}
}

// legacyTCPInfo is the older GET /databases/{db}/info/tcp.
func (a *API) legacyTCPInfo(c echo.Context) error {
	if _, err := a.db(c); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, tcpInfo(a.NodeTag, a.URL()))
}

// subscriptionConnectionDetails lists the connected workers.
func (a *API) subscriptionConnectionDetails(c echo.Context) error {
	db, name, err := a.dbParam(c, "name")
	if err != nil {
		return err
	}
	s, _, err := a.findSubscription(db.Name(), name, nil)
	if err != nil {
		return err
	}
	r := a.Subscriptions.Report(c.Request().Context(), db.Name())
	results := []map[string]any{}
	for _, st := range r.Subscriptions {
		if st.Name == s.Name {
			for _, w := range st.Workers {
				results = append(results, map[string]any{"ClientUri": w.Addr, "WorkerId": nil, "Strategy": w.Strategy})
			}
		}
	}
	mode := "None"
	if len(results) > 0 {
		mode = "Single"
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Results": results, "SubscriptionMode": mode})
}

// trySubscription runs a query the way a subscription would and returns the
// first matching documents, creating nothing (POST /subscriptions/try with
// {"Query":…,"PageSize":n}).
func (a *API) trySubscription(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	var body struct {
		Query    string
		PageSize int
	}
	if err := json.NewDecoder(io.LimitReader(c.Request().Body, 1<<20)).Decode(&body); err != nil {
		return dberr.New(dberr.BadRequest, "Invalid body: %v", err)
	}
	if s := c.QueryParam("pageSize"); s != "" && body.PageSize == 0 {
		body.PageSize, _ = strconv.Atoi(s)
	}
	docs, scanned, err := TryQuery(c, db, body.Query, body.PageSize)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Results": docs, "Scanned": scanned})
}

// TryQuery returns up to pageSize (default 10, at most 1024) documents
// matching query, in etag order, reading at most 100,000 documents.
func TryQuery(c echo.Context, db *storage.DB, query string, pageSize int) ([]json.RawMessage, int, error) {
	if _, err := subscriptions.Check(query); err != nil {
		return nil, 0, err
	}
	q, _ := rql.Parse(query)
	if pageSize <= 0 {
		pageSize = 10
	}
	pageSize = min(pageSize, 1024)
	out := []json.RawMessage{}
	scanned := 0
	done := dberr.New(dberr.Internal, "done")
	err := db.ScanCollection(c.Request().Context(), q.Collection, 0, 100_000, func(d *storage.Document) error {
		scanned++
		doc := rql.Doc{ID: d.ID}
		if q.Where != nil || len(q.Select) > 0 {
			if json.Unmarshal(d.Body, &doc.Body) != nil {
				return nil
			}
		}
		ok, err := q.Match(doc, nil)
		if err != nil {
			return dberr.New(dberr.BadRequest, "Query: %v", err)
		}
		if !ok {
			return nil
		}
		if p := q.Project(doc); p != nil {
			p["@metadata"] = map[string]any{"@id": d.ID, "@projection": true}
			b, _ := json.Marshal(p)
			out = append(out, b)
		} else {
			out = append(out, d.AppendJSON(nil))
		}
		if len(out) >= pageSize {
			return done
		}
		return nil
	})
	if err != nil && err != done {
		return nil, 0, err
	}
	return out, scanned, nil
}

func (a *API) enableSubscription(c echo.Context) error  { return a.setDisabled(c, false) }
func (a *API) disableSubscription(c echo.Context) error { return a.setDisabled(c, true) }

func (a *API) setDisabled(c echo.Context, disabled bool) error {
	db, name, err := a.dbParam(c, "name")
	if err != nil {
		return err
	}
	if err := SetSubscriptionDisabled(c.Request().Context(), a.Cluster, db.Name(), name, nil, disabled); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// SetSubscriptionDisabled disables or enables a subscription (by name, or
// by id when name is empty); connected workers are closed.
func SetSubscriptionDisabled(ctx context.Context, cl *cluster.Cluster, db, name string, id *int64, disabled bool) error {
	_, err := setSubscriptionDisabled(ctx, cl, db, name, id, disabled)
	return err
}

// setSubscriptionDisabled also tells whether the subscription changed (it
// was not already in that state).
func setSubscriptionDisabled(ctx context.Context, cl *cluster.Cluster, db, name string, id *int64, disabled bool) (bool, error) {
	s, d, err := findSubscription(cl, db, name, id)
	if err != nil || d.Disabled == disabled {
		return false, err
	}
	d.Disabled = disabled
	raw, _ := json.Marshal(d)
	_, err = cl.UpdateSubscription(ctx, db, s.Name, raw, nil)
	return err == nil, err
}

// toggleTask is RavenDB's ongoing-task toggle
// (POST /admin/tasks/state?key=<id>&type=Subscription&disable=<bool>[&taskName=]).
func (a *API) toggleTask(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	if t := c.QueryParam("type"); !strings.EqualFold(t, "Subscription") {
		return dberr.New(dberr.BadRequest, "Only subscription tasks can be toggled here, not '%s'", t)
	}
	disable, err := strconv.ParseBool(c.QueryParam("disable"))
	if err != nil {
		return dberr.New(dberr.BadRequest, "disable must be true or false")
	}
	// The npm client's enable(name)/disable(name) send key=undefined with
	// taskName; a name wins over a key.
	name := c.QueryParam("taskName")
	var id *int64
	if k := c.QueryParam("key"); k != "" && name == "" {
		n, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			return dberr.New(dberr.BadRequest, "key must be a task id")
		}
		id = &n
	}
	if name == "" && id == nil {
		return dberr.New(dberr.BadRequest, "Give key or taskName")
	}
	if err := SetSubscriptionDisabled(c.Request().Context(), a.Cluster, db.Name(), name, id, disable); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"TaskId": id, "RaftCommandIndex": 0})
}

// disableFlaggedSubscriptions disables every subscription the runaway rules
// flag (optionally only those of one rule: ?rule=burst).
func (a *API) disableFlaggedSubscriptions(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	names, err := DisableFlagged(c.Request().Context(), a.Cluster, a.Subscriptions, db.Name(), c.QueryParam("rule"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Disabled": names})
}

// DisableFlagged disables the flagged subscriptions that are enabled and
// returns their names.
func DisableFlagged(ctx context.Context, cl *cluster.Cluster, m *subscriptions.Manager, db, rule string) ([]string, error) {
	r := m.Report(ctx, db)
	names := []string{}
	for _, st := range r.Subscriptions {
		if st.Disabled || len(st.Flags) == 0 {
			continue
		}
		match := rule == ""
		for _, f := range st.Flags {
			match = match || f.Rule == rule
		}
		if !match {
			continue
		}
		// The report is up to a second old: one disabled or deleted since
		// is not counted.
		changed, err := setSubscriptionDisabled(ctx, cl, db, st.Name, nil, true)
		if err != nil && !dberr.Is(err, dberr.NotFound) {
			return names, err
		}
		if changed {
			names = append(names, st.Name)
		}
	}
	return names, nil
}

// subscriptionMonitor is every subscription's live figures, status and
// runaway flags (GET /subscriptions/monitor[?name=]).
func (a *API) subscriptionMonitor(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	r := a.Subscriptions.Report(c.Request().Context(), db.Name())
	if name := c.QueryParam("name"); name != "" {
		for _, st := range r.Subscriptions {
			if strings.EqualFold(st.Name, name) {
				return writeJSON(c, http.StatusOK, st)
			}
		}
		return dberr.New(dberr.NotFound, "Subscription '%s' does not exist", name)
	}
	return writeJSON(c, http.StatusOK, r)
}

func (a *API) subscriptionThresholds(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, a.Subscriptions.Thresholds(db.Name()))
}

// setSubscriptionThresholds stores the monitor's thresholds (unset or zero
// fields take the defaults).
func (a *API) setSubscriptionThresholds(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	var t subscriptions.Thresholds
	dec := json.NewDecoder(io.LimitReader(c.Request().Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return dberr.New(dberr.BadRequest, "Invalid thresholds: %v", err)
	}
	if err := SetSubscriptionThresholds(c.Request().Context(), a.Cluster, db.Name(), t); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, a.Subscriptions.Thresholds(db.Name()))
}

// SetSubscriptionThresholds stores a database's monitor thresholds (unset
// or zero fields take the defaults).
func SetSubscriptionThresholds(ctx context.Context, cl *cluster.Cluster, db string, t subscriptions.Thresholds) error {
	if t.ScanShare < 0 || t.ScanShare > 1 {
		return dberr.New(dberr.BadRequest, "ScanShare is a fraction between 0 and 1")
	}
	raw, _ := json.Marshal(t)
	_, err := cl.SetSetting(ctx, db, subscriptions.SettingKey, raw)
	return err
}
