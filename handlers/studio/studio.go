// Package studio holds the Echo handlers of the management studio's pages
// under /studio/ (templ views, live regions, POST forms behind a
// same-origin check). It calls the engine (backend/...) directly, never an
// API handler: handlers/api (the RavenDB-compatible wire protocol) and this
// package do not import each other. What both need lives in the backend
// packages, or, when it is purely HTTP, in handlers/httpx.
package studio

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/activity"
	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/audit"
	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/catalog"
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/conflicts"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/history"
	"github.com/rookerydb/rookery/backend/ids"
	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/indexes"
	"github.com/rookerydb/rookery/backend/operations"
	"github.com/rookerydb/rookery/backend/query"
	"github.com/rookerydb/rookery/backend/smuggler"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/backend/subscriptions"
	"github.com/rookerydb/rookery/handlers/httpx"
	"github.com/rookerydb/rookery/views"
)

// LiveFunc renders a page's live regions for a connected browser. q holds
// the page's query (db included).
type LiveFunc func(ctx context.Context, q url.Values) ([]views.Fragment, error)

// Studio serves the management studio's pages under /studio/.
type Studio struct {
	// AuditActions are the actions the audit log records (from the
	// server's access rules), for the Audit page's filter.
	AuditActions []string

	Catalog  *catalog.Catalog
	Activity *activity.Tracker
	Alerts   *alerts.Store
	// Notifications is the cluster's notification center (every node's
	// alerts, the actions on them); nil shows this node's alerts only.
	Notifications alerts.Center
	// CertificateWarning is how close to its end a certificate raises an
	// alert (--alert-certificate-days); 30 days when zero.
	CertificateWarning time.Duration
	// Now is the Alerts page's clock (time.Now when nil).
	Now     func() time.Time
	NodeTag string
	URL     func() string
	// Cluster is the node's Raft view; nil until the cluster is wired.
	Cluster *cluster.Cluster
	// MaxCmpXchgValueSize bounds a compare-exchange value (studio_cmpxchg.go).
	MaxCmpXchgValueSize int64
	// Conflicts runs bulk conflict resolutions (and its engine the settings
	// page's test runs); nil leaves those actions unavailable.
	Conflicts *conflicts.Manager
	// Replication reads the node's replication senders; nil when the node
	// has none.
	Replication ReplicationSource
	// Subscriptions runs the subscription workers and their monitor; nil
	// leaves the Subscriptions pages empty.
	Subscriptions *subscriptions.Manager
	// Nodes sends this node's requests to other nodes (their status, the
	// actions forwarded to the leader), with its credentials.
	Nodes httpx.NodeClient
	// Reseed replaces a damaged copy (see API.Reseed); nil hides the action.
	Reseed func(ctx context.Context, name string) (string, error)
	// MaxDocumentSize is the largest document the editor may save; no
	// limit when zero.
	MaxDocumentSize int64
	// MaxDocReferences is how many distinct strings of a document its page
	// checks for being ids of other documents (DefaultMaxDocReferences
	// when zero, none when negative: --max-doc-references).
	MaxDocReferences int
	// ServerCertificate is this node's certificate, base64 DER ("" when
	// unsecured), and WellKnownAdmins are --well-known-admin-certs: the
	// Certificates page shows them.
	ServerCertificate string
	WellKnownAdmins   []string
	// Audit is the node's audit log, for the Audit page; nil leaves this
	// node's column empty.
	Audit *audit.Log
	// UnsecuredAccess is --unsecured-access-allowed on an unsecured node
	// ("Local", ...), for the layout's warning; "" when secured.
	UnsecuredAccess string
	// Indexes are this node's open indexes (their figures, reset); nil
	// leaves the Indexes pages without figures.
	Indexes *index.Manager
	// Queries runs the Query page's queries on this node, as POST /queries
	// does; nil leaves the page unable to run them.
	Queries *query.Runner
	// IndexUsage, when set, is this node's record of when each index and
	// collection of a database was last queried (what this node reports
	// to the leader's cleanup); nil uses this node's open indexes.
	IndexUsage func(db string) indexes.Report
	// IndexConfig, when set, is a database's cleanup configuration; nil
	// reads the Indexing.* settings of its record (defaults when absent).
	IndexConfig func(db string) indexes.Config
	// OnQuery, when set, is told of every query the Query page ran (the
	// cleanup's record of usage, as for a client's query).
	OnQuery func(db string, res *query.Result)

	// History is the node's chart series (GET /studio/history); nil
	// leaves the charts empty. Reach is what this node saw of the others
	// when it last asked them (the dashboard's node states); Tick asks.
	History *history.Store
	Reach   *history.Reachability

	// Operations are the node's long jobs (imports and exports among
	// them: the Import/Export pages and the header's running operations);
	// Smuggler is what a dump carries beside documents (identities, index
	// definitions, subscriptions); DumpDir is --dump-dir, the only
	// directory the server page reads and writes. Nil Operations leaves
	// the pages without operations.
	Operations *operations.Registry
	Smuggler   smuggler.Services
	DumpDir    string

	certCheck certCheck
	// probing is set while a round of reachability checks runs.
	probing atomic.Bool
	// subPeers caches the other nodes' subscription reports for a second
	// (studio_subscriptions_cluster.go).
	subPeers subPeerCache

	live  map[string]LiveFunc
	ticks map[string]bool
}

func (s *Studio) peers() httpx.NodeClient { return httpx.OrPlain(s.Nodes) }

// idents takes identities through the cluster's log.
func (s *Studio) idents() ids.Cluster { return ids.Cluster{Src: s.Cluster} }

// addLive registers a page's live regions; ticks asks for a refresh every
// second as well (pages with rates and sparklines).
func (s *Studio) addLive(page string, fn LiveFunc, ticks bool) {
	s.live[page] = fn
	if ticks {
		s.ticks[page] = true
	}
}

// WantsTicks tells whether a page refreshes every second.
func (s *Studio) WantsTicks(page string) bool { return s.ticks[page] }

// Tick runs the studio's once-a-second checks (the identity audit alerts).
func (s *Studio) Tick(ctx context.Context) {
	s.probeNodes(ctx)
	s.auditTick(ctx)
	s.certificateTick(time.Now())
}

// Register adds the studio routes to e. Mutating actions are POSTs behind a
// same-origin check.
func (s *Studio) Register(e *echo.Echo) {
	s.live, s.ticks = map[string]LiveFunc{}, map[string]bool{}
	if s.Reach == nil {
		s.Reach = &history.Reachability{}
	}
	e.GET("/", func(c echo.Context) error { return c.Redirect(http.StatusFound, "/studio/") })
	e.GET("/studio", func(c echo.Context) error { return c.Redirect(http.StatusFound, "/studio/") })
	g := e.Group("/studio", sameOrigin)
	g.GET("/", s.dashboard)
	g.GET("/databases", s.databases)
	g.POST("/databases", s.createDatabase)
	g.POST("/databases/delete", s.deleteDatabase)
	g.GET("/history", s.serveHistory)
	s.registerAlerts(g)
	s.registerDamage(g)
	s.registerCluster(g)
	s.registerCertificates(g)
	s.registerAudit(g)
	s.addLive("dashboard", s.dashboardLive, true)
	s.addLive("databases", s.databasesLive, true)

	db := g.Group("/db/:db")
	s.registerSmuggler(g, db)
	s.registerDocuments(db)
	s.registerDocument(db)
	s.registerTimeSeries(db)
	s.registerCounters(db)
	s.registerHiLo(db)
	s.registerIdentities(db)
	s.registerCmpXchg(db)
	s.registerStats(db)
	s.registerConflicts(db)
	s.registerRevisions(db)
	s.registerReplication(db)
	s.registerSubscriptions(db)
	s.registerQuery(db)
	s.registerIndexes(db)
}

// LiveFragments renders the live regions of a page; the notification area is
// part of every page.
func (s *Studio) LiveFragments(ctx context.Context, page string, q url.Values) ([]views.Fragment, error) {
	frags := []views.Fragment{{ID: "alerts-area", C: views.AlertsArea(s.visibleAlerts(ctx))}, {ID: "reading-node", C: views.ReadingNode(s.readingNode())},
		{ID: "ops-area", C: views.OpsArea(s.runningOps(ctx))}}
	if name := q.Get("db"); name != "" {
		if d, err := s.Catalog.Get(name); err == nil {
			n, _ := d.ConflictCount(ctx)
			frags = append(frags, views.Fragment{ID: "nav-conflicts-badge", C: views.ConflictBadge(n)})
		}
	}
	fn := s.live[page]
	if fn == nil {
		return frags, nil
	}
	more, err := fn(ctx, q)
	if err != nil {
		return frags, err
	}
	return append(frags, more...), nil
}

// sameOrigin refuses cross-site POSTs to the studio (the server refuses
// them on every route before routing too; see web/guard.go).
func sameOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := httpx.CheckOrigin(c.Request()); err != nil {
			return forbidden(c, err.Error())
		}
		return next(c)
	}
}

func forbidden(c echo.Context, msg string) error {
	return c.String(http.StatusForbidden, msg)
}

// chrome builds the layout data of a page.
func (s *Studio) chrome(c echo.Context, title, db, active, live string) views.Chrome {
	q := url.Values{}
	for k, v := range c.QueryParams() {
		q[k] = v
	}
	ctx := c.Request().Context()
	ch := views.Chrome{Title: title, Database: db, Active: active, Live: live, Query: q, NodeTag: s.NodeTag, Alerts: s.visibleAlerts(ctx),
		Who: auth.FromContext(ctx), Unsecured: s.UnsecuredAccess, Now: time.Now(), Ops: s.runningOps(ctx)}
	rn := s.readingNode()
	ch.NodeURL, ch.NodeRole, ch.LeaderTag = rn.NodeURL, rn.NodeRole, rn.LeaderTag
	if db != "" {
		if d, err := s.Catalog.Get(db); err == nil {
			ch.Conflicts, _ = d.ConflictCount(c.Request().Context())
		}
	}
	if m := c.QueryParam("flash"); m != "" {
		ch.Flash = m
	}
	if m := c.QueryParam("error"); m != "" {
		ch.Flash, ch.FlashError = m, true
	}
	return ch
}

// readingNode is what the header says of the node a page reads: its tag,
// URL, Raft role and the leader it knows of.
func (s *Studio) readingNode() views.Chrome {
	ch := views.Chrome{NodeTag: s.NodeTag}
	if s.URL != nil {
		ch.NodeURL = s.URL()
	}
	if s.Cluster != nil {
		ch.NodeRole = s.Cluster.Role()
		ch.LeaderTag, _ = s.Cluster.Leader()
	}
	return ch
}

// render writes a full page.
func render(c echo.Context, status int, ch views.Chrome, body templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().WriteHeader(status)
	return views.Layout(ch, body).Render(c.Request().Context(), c.Response())
}

// studioError renders an engine error as a readable page, never a stack.
func (s *Studio) studioError(c echo.Context, db string, err error) error {
	status, title := http.StatusInternalServerError, "Something went wrong"
	switch dberr.KindOf(err) {
	case dberr.DatabaseMissing:
		status, title = http.StatusNotFound, "No such database"
	case dberr.NotFound:
		status, title = http.StatusNotFound, "Not found"
	case dberr.BadRequest, dberr.InvalidOperation:
		status, title = http.StatusBadRequest, "That did not work"
	case dberr.Concurrency:
		status, title = http.StatusConflict, "Changed by someone else"
	case dberr.Unavailable:
		status, title = http.StatusServiceUnavailable, "Not available"
	case dberr.TooLarge:
		status, title = http.StatusRequestEntityTooLarge, "Too large"
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	ch := s.chrome(c, title, db, "", "")
	return render(c, status, ch, views.Message(title, err.Error()))
}

// NotFound renders the studio's page for an unknown path.
func (s *Studio) NotFound(c echo.Context) error {
	ch := s.chrome(c, "Page not found", "", "", "")
	return render(c, http.StatusNotFound, ch, views.Message("Page not found", "There is no studio page at "+c.Request().URL.Path+"."))
}

// redirectFlash is POST-redirect-GET with a message shown on the next page.
func redirectFlash(c echo.Context, to, flash string, isError bool) error {
	u, _ := url.Parse(to)
	q := u.Query()
	if isError {
		q.Set("error", flash)
	} else {
		q.Set("flash", flash)
	}
	u.RawQuery = q.Encode()
	return c.Redirect(http.StatusSeeOther, u.String())
}

// restOfPath is the part of the path a route's * matched, unescaped: ids
// and names may hold slashes, which links send as %2F (the router then
// matches the escaped path).
func restOfPath(c echo.Context) string {
	rest := c.Param("*")
	if c.Request().URL.RawPath != "" {
		if u, err := url.PathUnescape(rest); err == nil {
			rest = u
		}
	}
	return rest
}

// studioDB resolves the :db parameter of a studio page.
func (s *Studio) studioDB(c echo.Context) (*storage.DB, error) {
	return s.Catalog.Get(c.Param("db"))
}

// databaseRows are the databases of this node the viewer may read.
func (s *Studio) databaseRows(ctx context.Context) []views.DatabaseRow {
	var rows []views.DatabaseRow
	id := auth.FromContext(ctx)
	for _, db := range s.Catalog.All() {
		if !id.Allows(auth.DatabaseRead, db.Name()) {
			continue
		}
		st := db.Stats()
		rows = append(rows, views.DatabaseRow{
			Name: db.Name(), Documents: st.Documents, Size: st.SizeOnDisk, LastWrite: st.LastWrite,
			Rate: s.Activity.Rate(db.Name()), Members: s.members(db.Name()),
		})
	}
	return append(rows, s.damagedRows(ctx)...)
}

// members are the nodes a database lives on, from the cluster's record.
func (s *Studio) members(db string) []string {
	if s.Cluster != nil {
		if rec, ok := s.Cluster.Database(db); ok {
			return rec.Members
		}
	}
	return []string{s.NodeTag}
}

// nodes are the cluster's nodes as this node last saw them: its own Raft
// state, and for every other node whether it answered the last check
// (probeNodes), since when, and the role it reported. A node that does not
// answer is unreachable, never the role it had.
func (s *Studio) nodes() []views.NodeInfo {
	if s.Cluster == nil {
		return []views.NodeInfo{{Tag: s.NodeTag, URL: s.URL(), Self: true, Checked: true, Reachable: true, Role: "standalone"}}
	}
	self := s.Cluster.Status()
	var out []views.NodeInfo
	for _, n := range s.Cluster.Nodes() {
		if n.Tag == s.NodeTag {
			out = append(out, views.NodeInfo{Tag: n.Tag, URL: n.URL, Self: true, Checked: true, Reachable: true, Role: self.State})
			continue
		}
		st := s.reach().State(n.Tag)
		out = append(out, views.NodeInfo{Tag: n.Tag, URL: n.URL, Checked: st.Checked, Reachable: st.Reachable, Role: st.Role,
			Since: st.Since, LastSeen: st.LastSeen, Problem: st.Problem})
	}
	if len(out) == 0 {
		out = []views.NodeInfo{{Tag: s.NodeTag, URL: s.URL(), Self: true, Checked: true, Reachable: true, Role: "starting"}}
	}
	return out
}

// chartsInfo is how this node samples its charts.
func (s *Studio) chartsInfo() views.ChartsInfo {
	ci := views.ChartsInfo{Self: s.NodeTag, Interval: history.DefaultInterval, Retention: history.DefaultRetention}
	if s.History != nil {
		o := s.History.Options()
		ci.Interval, ci.Retention = o.Interval, o.Retention
	}
	return ci
}

func (s *Studio) dashboard(c echo.Context) error {
	return render(c, http.StatusOK, s.chrome(c, "Dashboard", "", views.NavDashboard, "dashboard"), views.DashboardPage(s.nodes(), s.databaseRows(c.Request().Context()), s.chartsInfo()))
}

func (s *Studio) dashboardLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	return []views.Fragment{{ID: "dashboard-body", C: views.DashboardBody(s.nodes(), s.databaseRows(ctx))}}, nil
}

func (s *Studio) databases(c echo.Context) error {
	return render(c, http.StatusOK, s.chrome(c, "Databases", "", views.NavDatabases, "databases"), views.DatabasesPage(s.databaseRows(c.Request().Context())))
}

func (s *Studio) databasesLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	return []views.Fragment{{ID: "databases-table", C: views.DatabasesTable(s.databaseRows(ctx))}}, nil
}

func (s *Studio) createDatabase(c echo.Context) error {
	name := strings.TrimSpace(c.FormValue("name"))
	sep := c.FormValue("separator")
	d := cluster.Database{Name: name, Members: s.Cluster.MembersFor(s.NodeTag, 0), Separator: sep}
	if err := s.Catalog.CreateInCluster(c.Request().Context(), s.Cluster, d, s.NodeTag); err != nil {
		return redirectFlash(c, "/studio/databases", err.Error(), true)
	}
	return redirectFlash(c, "/studio/databases", "Database "+name+" created.", false)
}

func (s *Studio) deleteDatabase(c echo.Context) error {
	name, confirm := c.FormValue("name"), c.FormValue("confirm")
	if name == "" || confirm != name {
		return redirectFlash(c, "/studio/databases", "Type the database name exactly to delete it; nothing was deleted.", true)
	}
	if err := s.Catalog.DeleteInCluster(c.Request().Context(), s.Cluster, name); err != nil {
		return redirectFlash(c, "/studio/databases", err.Error(), true)
	}
	s.Activity.Forget(name)
	return redirectFlash(c, "/studio/databases", "Database "+name+" deleted.", false)
}
