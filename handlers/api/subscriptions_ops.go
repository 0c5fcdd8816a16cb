package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/dberr"
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
	tag, base, cert := a.NodeTag, a.URL(), a.ServerCertificate
	if task := c.QueryParam("remote-task"); task != "" {
		// A subscription with a mentor node is served there.
		if _, d, err := a.Subscriptions.Find(c.QueryParam("database"), task, nil); err == nil && d.MentorNode != "" {
			for _, n := range a.Cluster.Nodes() {
				if n.Tag == d.MentorNode && n.URL != "" {
					tag, base, cert = n.Tag, n.URL, n.Certificate
				}
			}
		}
	}
	return writeJSON(c, http.StatusOK, tcpInfo(tag, base, cert))
}

// tcpInfo is RavenDB's TcpConnectionInfo for a node's base URL. On a
// secured node, cert is its certificate (base64 DER): RavenDB's clients
// connect with TLS and check that the node presents exactly it.
func tcpInfo(tag, base, cert string) map[string]any {
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
	var certificate any
	if cert != "" {
		certificate = cert
	}
	return map[string]any{"Url": tcp, "Urls": []string{tcp}, "Certificate": certificate, "NodeTag": tag, "ServerId": nil}
}

// legacyTCPInfo is the older GET /databases/{db}/info/tcp.
func (a *API) legacyTCPInfo(c echo.Context) error {
	if _, err := a.db(c); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, tcpInfo(a.NodeTag, a.URL(), a.ServerCertificate))
}

// subscriptionConnectionDetails lists the connected workers.
func (a *API) subscriptionConnectionDetails(c echo.Context) error {
	db, name, err := a.dbParam(c, "name")
	if err != nil {
		return err
	}
	s, _, err := a.Subscriptions.Find(db.Name(), name, nil)
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
	if err := readJSON(c, queryBodyLimit(), &body, "Invalid body"); err != nil {
		return err
	}
	if s := c.QueryParam("pageSize"); s != "" && body.PageSize == 0 {
		body.PageSize, _ = strconv.Atoi(s)
	}
	docs, scanned, err := subscriptions.Try(c.Request().Context(), db, body.Query, body.PageSize)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Results": docs, "Scanned": scanned})
}

func (a *API) enableSubscription(c echo.Context) error  { return a.setDisabled(c, false) }
func (a *API) disableSubscription(c echo.Context) error { return a.setDisabled(c, true) }

func (a *API) setDisabled(c echo.Context, disabled bool) error {
	db, name, err := a.dbParam(c, "name")
	if err != nil {
		return err
	}
	if _, err := a.Subscriptions.SetDisabled(c.Request().Context(), db.Name(), name, nil, disabled); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
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
	if _, err := a.Subscriptions.SetDisabled(c.Request().Context(), db.Name(), name, id, disable); err != nil {
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
	names, err := a.Subscriptions.DisableFlagged(c.Request().Context(), db.Name(), c.QueryParam("rule"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Disabled": names})
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

// internalSubscriptionMonitor is this node's monitor report for another
// node's Subscriptions page (GET /internal/subscriptions/monitor?db=[&name=],
// nodes only): every subscription's figures as this node sees them (its
// workers, rates, errors, its copy's position). Without name, the
// connection and batch histories are left out (the list does not show
// them); with name, only that subscription, whole.
func (a *API) internalSubscriptionMonitor(c echo.Context) error {
	db, err := a.Catalog.Get(c.QueryParam("db"))
	if err != nil {
		return err
	}
	// The sampler computes the report every second; reuse it.
	r := a.Subscriptions.ReportWithin(c.Request().Context(), db.Name(), 3*time.Second)
	name := c.QueryParam("name")
	rows := make([]subscriptions.Stats, 0, len(r.Subscriptions))
	for _, st := range r.Subscriptions {
		switch {
		case name == "":
			st.Connections, st.History = nil, nil
		case !strings.EqualFold(st.Name, name):
			continue
		}
		rows = append(rows, st)
	}
	r.Subscriptions = rows
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
	raw, err := readBody(c, 1<<16, "Invalid thresholds")
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return dberr.New(dberr.BadRequest, "Invalid thresholds: %v", err)
	}
	if err := a.Subscriptions.SetThresholds(c.Request().Context(), db.Name(), t); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, a.Subscriptions.Thresholds(db.Name()))
}
