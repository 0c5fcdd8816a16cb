package web

import (
	"context"
	"errors"
	"html/template"
	"net"
	"net/http"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/audit"
	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/handlers/httpx"
	"github.com/rookerydb/rookery/views"
)

// rule is what a route requires of its caller, and whether the route is an
// administrative action that goes to the audit log.
type rule struct {
	level auth.Level
	// db says where the route's database name is: "param:db",
	// "query:name", "query:database", "query:db". An optional one
	// ("query:db?") lowers a database level to Authenticated when absent
	// (the live hub serves pages with and without a database).
	db string
	// audit names the action in the audit log ("" for none); target says
	// where its object is ("query:x", "form:x"), besides what the handler
	// adds (httpx.AuditTargetKey).
	audit, target string
}

var (
	public     = rule{level: auth.Public}
	anyone     = rule{level: auth.Authenticated}
	operator   = rule{level: auth.OperatorOnly}
	clusterAdm = rule{level: auth.ClusterAdminOnly}
	nodeOnly   = rule{level: auth.NodeOnly}
	dbRead     = rule{level: auth.DatabaseRead, db: "param:db"}
	dbWrite    = rule{level: auth.DatabaseReadWrite, db: "param:db"}
	dbAdmin    = rule{level: auth.DatabaseAdmin, db: "param:db"}
)

func (r rule) audited(action, target string) rule {
	r.audit, r.target = action, target
	return r
}

// need is the level a route of this rule asks of its caller for database
// db: an optional database lowers a database level when absent.
func (r rule) need(db string) auth.Level {
	if r.level.Database() && db == "" && strings.HasSuffix(r.db, "?") {
		return auth.Authenticated
	}
	return r.level
}

func on(level auth.Level, db string) rule { return rule{level: level, db: db} }

// routeRules is every route's access rule, keyed "METHOD path" with Echo's
// path pattern. Every registered route must be here (TestEveryRouteHasAnAccessRule
// walks the router); a route missing from it is refused to everyone.
var routeRules = map[string]rule{
	// Echo's catch-alls of the groups (they answer 404s after the group's
	// middleware): an unknown path is for known callers only.
	"ANY /databases/:db":   anyone,
	"ANY /databases/:db/*": anyone,
	"ANY /studio":          anyone,
	"ANY /studio/*":        anyone,
	"ANY /studio/db/:db":   anyone,
	"ANY /studio/db/:db/*": anyone,

	// Health, static files, redirects, who am I.
	"GET /livez":                public,
	"GET /readyz":               public,
	"GET /static/*":             public,
	"GET /favicon.ico":          public,
	"GET /":                     public,
	"GET /studio":               public,
	"GET /certificates/whoami":  public,
	"GET /metrics":              operator,
	"GET /build/version":        anyone,
	"GET /cluster/topology":     anyone,
	"GET /cluster/node-info":    anyone,
	"GET /databases":            anyone, // lists only the databases the caller may read
	"GET /topology":             on(auth.DatabaseRead, "query:name"),
	"GET /info/remote-task/tcp": on(auth.DatabaseRead, "query:database"),

	// Server administration.
	"PUT /admin/databases":                     operator.audited("database.create", "query:name"),
	"DELETE /admin/databases":                  operator.audited("database.delete", ""),
	"POST /admin/databases/reseed":             operator.audited("database.reseed", "query:name"),
	"GET /admin/databases":                     on(auth.DatabaseAdmin, "query:name"),
	"POST /admin/replication/conflicts/solver": on(auth.DatabaseAdmin, "query:name").audited("conflicts.solver", ""),
	"GET /admin/certificates":                  operator,
	"PUT /admin/certificates":                  operator.audited("certificate.put", ""),
	"POST /admin/certificates/edit":            operator.audited("certificate.edit", ""),
	"DELETE /admin/certificates":               operator.audited("certificate.delete", "query:thumbprint"),
	"GET /admin/audit":                         operator,
	// The notification center: anyone sees (and acts on) the alerts they
	// may see; the handlers filter by database access and clearance.
	"GET /admin/notifications":            anyone,
	"POST /admin/notifications/dismiss":   anyone,
	"POST /admin/notifications/postpone":  anyone,
	"POST /admin/notifications/restore":   anyone,
	"GET /internal/notifications":         nodeOnly,
	"POST /internal/notifications/action": nodeOnly,

	// The cluster.
	"GET /admin/cluster/status":    operator,
	"GET /admin/cluster/next-tag":  clusterAdm,
	"POST /admin/cluster/join":     clusterAdm.audited("cluster.join", ""),
	"POST /admin/cluster/promote":  clusterAdm.audited("cluster.promote", "query:tag"),
	"POST /admin/cluster/remove":   clusterAdm.audited("cluster.remove", "query:tag"),
	"POST /admin/cluster/stepdown": clusterAdm.audited("cluster.stepdown", ""),
	"POST /internal/cluster/apply": nodeOnly,
	// A node's subscription monitor, for another node's Subscriptions page.
	"GET /internal/subscriptions/monitor": nodeOnly,

	// One database: documents, ids, statistics.
	"GET /databases/:db/docs":             dbRead,
	"POST /databases/:db/docs":            dbRead, // loads many ids
	"HEAD /databases/:db/docs":            dbRead,
	"PUT /databases/:db/docs":             dbWrite,
	"GET /databases/:db/counters":         dbRead,
	"POST /databases/:db/counters":        dbWrite,
	"DELETE /databases/:db/docs":          dbWrite,
	"POST /databases/:db/bulk_docs":       dbWrite,
	"PUT /databases/:db/attachments":      dbWrite,
	"DELETE /databases/:db/attachments":   dbWrite,
	"GET /databases/:db/attachments":      dbRead,
	"HEAD /databases/:db/attachments":     dbRead,
	"POST /databases/:db/attachments":     dbRead, // GetAttachmentOperation with a type
	"POST /databases/:db/bulk_insert":     dbWrite,
	"GET /databases/:db/cmpxchg":          dbRead,
	"PUT /databases/:db/cmpxchg":          dbWrite,
	"DELETE /databases/:db/cmpxchg":       dbWrite,
	"GET /databases/:db/hilo/next":        dbWrite,
	"PUT /databases/:db/hilo/return":      dbWrite,
	"POST /databases/:db/identity/next":   dbWrite,
	"POST /databases/:db/identity/seed":   dbAdmin.audited("identity.seed", "query:name"),
	"GET /databases/:db/debug/identities": dbRead,
	"GET /databases/:db/stats":            dbRead,

	// Patches, lazy operations (each inner request of a multi_get is
	// checked again by its own rule) and the detailed statistics.
	"PATCH /databases/:db/docs":         dbWrite,
	"POST /databases/:db/multi_get":     dbRead,
	"GET /databases/:db/stats/detailed": dbRead,
	// Time series (handlers/api/timeseries.go).
	"GET /databases/:db/timeseries":        dbRead,
	"POST /databases/:db/timeseries":       dbWrite,
	"GET /databases/:db/timeseries/ranges": dbRead,
	"GET /databases/:db/timeseries/stats":  dbRead,

	// Import and export (issue 13): an export reads, an import writes
	// (documents, index definitions, identities, subscriptions), as in
	// RavenDB, where both need only the database access.
	"POST /databases/:db/smuggler/export":           dbRead.audited("smuggler.export", ""),
	"POST /databases/:db/smuggler/import":           dbWrite.audited("smuggler.import", ""),
	"POST /databases/:db/smuggler/validate-options": dbRead,
	// Server-side files, below --dump-dir only: a dump on the server into
	// one database, and several databases at once (which may create them).
	"GET /databases/:db/admin/smuggler/import": dbAdmin.audited("smuggler.import-file", "query:file"),
	"POST /admin/smuggler/export-dir":          operator.audited("smuggler.export-dir", ""),
	"POST /admin/smuggler/import-dir":          operator.audited("smuggler.import-dir", ""),

	// Queries and indexes (issue 11). A dynamic query may create an auto
	// index: that is part of querying, as in RavenDB.
	"POST /databases/:db/queries":                     dbRead,
	"GET /databases/:db/queries":                      dbRead,
	"PATCH /databases/:db/queries":                    dbWrite.audited("query.patch", ""),
	"DELETE /databases/:db/queries":                   dbWrite.audited("query.delete", ""),
	"POST /databases/:db/streams/queries":             dbRead,
	"GET /databases/:db/streams/queries":              dbRead,
	"GET /databases/:db/streams/docs":                 dbRead,
	"PUT /databases/:db/indexes":                      dbAdmin.audited("index.put", ""),
	"PUT /databases/:db/admin/indexes":                dbAdmin.audited("index.put", ""),
	"GET /databases/:db/indexes":                      dbRead,
	"DELETE /databases/:db/indexes":                   dbAdmin.audited("index.delete", "query:name"),
	"RESET /databases/:db/indexes":                    dbAdmin.audited("index.reset", "query:name"),
	"GET /databases/:db/indexes/stats":                dbRead,
	"GET /databases/:db/indexes/errors":               dbRead,
	"DELETE /databases/:db/indexes/errors":            dbAdmin,
	"GET /databases/:db/indexes/status":               dbRead,
	"GET /databases/:db/indexes/staleness":            dbRead,
	"POST /databases/:db/indexes/has-changed":         dbRead,
	"POST /databases/:db/indexes/set-lock":            dbAdmin.audited("index.lock", ""),
	"POST /databases/:db/indexes/set-priority":        dbAdmin.audited("index.priority", ""),
	"POST /databases/:db/admin/indexes/enable":        dbAdmin.audited("index.enable", "query:name"),
	"POST /databases/:db/admin/indexes/disable":       dbAdmin.audited("index.disable", "query:name"),
	"POST /databases/:db/admin/indexes/start":         dbAdmin.audited("index.resume", "query:name"),
	"POST /databases/:db/admin/indexes/stop":          dbAdmin.audited("index.pause", "query:name"),
	"GET /databases/:db/operations/next-operation-id": dbRead,
	"GET /databases/:db/operations/state":             dbRead,
	"POST /databases/:db/operations/kill":             dbWrite,
	"GET /databases/:db/operations":                   dbRead,
	"GET /operations/state":                           operator,
	"GET /admin/operations/next-operation-id":         operator,
	"POST /admin/operations/kill":                     operator,
	"GET /internal/indexes/usage":                     nodeOnly,
	"GET /internal/conflicts/log":                     nodeOnly,
	"GET /internal/history":                           nodeOnly,
	"GET /databases/:db/collections/stats":            dbRead,
	"GET /databases/:db/configuration/client":         dbRead,
	"GET /databases/:db/healthcheck":                  dbRead,
	"GET /databases/:db/info/tcp":                     dbRead,

	// Revisions.
	"POST /databases/:db/admin/revisions/config": dbAdmin.audited("revisions.config", ""),
	"GET /databases/:db/revisions/config":        dbRead,
	"GET /databases/:db/revisions":               dbRead,
	"GET /databases/:db/revisions/count":         dbRead,
	"GET /databases/:db/revisions/bin":           dbRead,
	"POST /databases/:db/revisions/revert":       dbAdmin.audited("revisions.revert", ""),
	"POST /databases/:db/revisions/revert/docs":  dbWrite.audited("revisions.revert-docs", ""),

	// Replication and conflicts.
	"GET /databases/:db/replication":                              nodeOnly,
	"GET /databases/:db/replication/stats":                        dbRead,
	"GET /databases/:db/changes":                                  dbRead, // the Changes API websocket
	"GET /databases/:db/replication/conflicts":                    dbRead,
	"GET /databases/:db/replication/conflicts/solver":             dbRead,
	"GET /databases/:db/studio-tasks/suggest-conflict-resolution": dbRead,
	"GET /databases/:db/conflicts/log":                            dbRead,
	"POST /databases/:db/conflicts/log/:seq/restore":              dbWrite.audited("conflicts.restore", ""),
	"POST /databases/:db/conflicts/preview":                       dbRead,
	"GET /databases/:db/conflicts/operations":                     dbRead,
	"POST /databases/:db/conflicts/operations":                    dbWrite.audited("conflicts.resolve", ""),
	"GET /databases/:db/conflicts/operations/:op":                 dbRead,
	"POST /databases/:db/conflicts/operations/:op/cancel":         dbWrite,
	"POST /databases/:db/conflicts/operations/:op/resume":         dbWrite.audited("conflicts.resume", ""),

	// Subscriptions.
	"PUT /databases/:db/subscriptions":                    dbWrite,
	"GET /databases/:db/subscriptions":                    dbRead,
	"GET /databases/:db/subscriptions/state":              dbRead,
	"DELETE /databases/:db/subscriptions":                 dbWrite.audited("subscription.delete", "query:taskName"),
	"POST /databases/:db/subscriptions/drop":              dbWrite,
	"POST /databases/:db/subscriptions/update":            dbWrite,
	"GET /databases/:db/subscriptions/connection-details": dbRead,
	"POST /databases/:db/subscriptions/try":               dbRead,
	"POST /databases/:db/subscriptions/enable":            dbAdmin.audited("subscription.enable", "query:name"),
	"POST /databases/:db/subscriptions/disable":           dbAdmin.audited("subscription.disable", "query:name"),
	"POST /databases/:db/subscriptions/disable-flagged":   dbAdmin.audited("subscription.disable-flagged", "query:rule"),
	"GET /databases/:db/subscriptions/monitor":            dbRead,
	"GET /databases/:db/subscriptions/monitor/thresholds": dbRead,
	"PUT /databases/:db/subscriptions/monitor/thresholds": dbAdmin.audited("subscription.thresholds", ""),
	"POST /databases/:db/admin/tasks/state":               dbAdmin.audited("subscription.state", "query:taskName"),

	// The studio: pages need read access, actions what their API twin needs.
	"GET /studio/":                  anyone,
	"GET /studio/databases":         anyone,
	"POST /studio/databases":        operator.audited("database.create", "form:name"),
	"POST /studio/databases/delete": operator.audited("database.delete", "form:name"),
	"POST /studio/databases/reseed": operator.audited("database.reseed", "form:name"),
	"GET /studio/alerts":            anyone,
	"POST /studio/alerts/dismiss":   anyone,
	"POST /studio/alerts/postpone":  anyone,
	"POST /studio/alerts/restore":   anyone,
	"GET /studio/cluster":           anyone,
	"POST /studio/cluster/add":      clusterAdm.audited("cluster.join", "form:tag"),
	"POST /studio/cluster/remove":   clusterAdm.audited("cluster.remove", "form:tag"),
	"POST /studio/cluster/stepdown": clusterAdm.audited("cluster.stepdown", ""),
	"GET /studio/live":              on(auth.DatabaseRead, "query:db?"),
	"GET /studio/history":           anyone, // only the series of databases the caller may read
	// Certificates: an Operator manages Operator and ValidUser
	// certificates, only a ClusterAdmin the others (the handlers check).
	"GET /studio/certificates":         operator,
	"POST /studio/certificates":        operator.audited("certificate.put", ""),
	"POST /studio/certificates/revoke": operator.audited("certificate.delete", "form:thumbprint"),
	"GET /studio/audit":                operator,
	// Import and export: the server page (several databases, files below
	// --dump-dir) is an Operator's, as its API twins are.
	"GET /studio/smuggler":         operator,
	"POST /studio/smuggler/export": operator.audited("smuggler.export-dir", "form:dir"),
	"POST /studio/smuggler/import": operator.audited("smuggler.import-dir", "form:dir"),
	"POST /studio/smuggler/cancel": operator,

	"GET /studio/db/:db/documents":                    dbRead,
	"GET /studio/db/:db/doc":                          dbRead,
	"POST /studio/db/:db/doc":                         dbWrite,
	"POST /studio/db/:db/doc/delete":                  dbWrite,
	"GET /studio/db/:db/doc/attachment":               dbRead,
	"POST /studio/db/:db/doc/attachments":             dbWrite,
	"POST /studio/db/:db/doc/attachments/delete":      dbWrite,
	"POST /studio/db/:db/doc/counters/increment":      dbWrite,
	"POST /studio/db/:db/doc/counters/delete":         dbWrite,
	"GET /studio/db/:db/doc/new":                      dbRead,
	"POST /studio/db/:db/doc/new":                     dbWrite,
	"GET /studio/db/:db/hilo":                         dbRead,
	"GET /studio/db/:db/timeseries":                   dbRead,
	"GET /studio/db/:db/timeseries/points":            dbRead,
	"GET /studio/db/:db/identities":                   dbRead,
	"GET /studio/db/:db/cmpxchg":                      dbRead,
	"POST /studio/db/:db/cmpxchg/put":                 dbWrite.audited("cmpxchg.put", "form:key"),
	"POST /studio/db/:db/cmpxchg/delete":              dbWrite.audited("cmpxchg.delete", "form:key"),
	"POST /studio/db/:db/identities/seed":             dbAdmin.audited("identity.seed", "form:prefix"),
	"GET /studio/db/:db/stats":                        dbRead,
	"GET /studio/db/:db/replication":                  dbRead,
	"GET /studio/db/:db/revisions":                    dbRead,
	"POST /studio/db/:db/revisions/revert":            dbWrite.audited("revisions.revert", ""),
	"GET /studio/db/:db/conflicts":                    dbRead,
	"POST /studio/db/:db/conflicts/preview":           dbRead,
	"GET /studio/db/:db/conflicts/preview":            dbRead,
	"POST /studio/db/:db/conflicts/apply":             dbWrite.audited("conflicts.resolve", ""),
	"POST /studio/db/:db/conflicts/operations/cancel": dbWrite,
	"POST /studio/db/:db/conflicts/operations/resume": dbWrite.audited("conflicts.resume", ""),
	"GET /studio/db/:db/conflicts/doc":                dbRead,
	"POST /studio/db/:db/conflicts/doc/keep":          dbWrite,
	"POST /studio/db/:db/conflicts/doc/resolve":       dbWrite,
	"GET /studio/db/:db/conflicts/log":                dbRead,
	"POST /studio/db/:db/conflicts/log/restore":       dbWrite.audited("conflicts.restore", ""),
	"GET /studio/db/:db/conflicts/settings":           dbRead,
	"POST /studio/db/:db/conflicts/settings":          dbAdmin.audited("conflicts.solver", ""),
	"GET /studio/db/:db/conflicts/*":                  dbRead,
	"GET /studio/db/:db/subscriptions":                dbRead,
	"POST /studio/db/:db/subscriptions":               dbAdmin.audited("subscription.action", "form:action"),
	"GET /studio/db/:db/subscriptions/*":              dbRead,
	// A database's Import/Export page: readable by who may read the
	// database (an export is a read); the import goes to the API, which
	// asks for write access; cancelling an operation is a write.
	"GET /studio/db/:db/smuggler":         dbRead,
	"POST /studio/db/:db/smuggler/cancel": dbWrite,

	// Studio: queries and indexes. Running a query is a read that may
	// create an auto index, as POST /queries does; changing an index is
	// an administrator's.
	"GET /studio/db/:db/query":          dbRead,
	"POST /studio/db/:db/query":         dbRead,
	"GET /studio/db/:db/indexes":        dbRead,
	"GET /studio/db/:db/index":          dbRead,
	"POST /studio/db/:db/index/reset":   dbAdmin.audited("index.reset", "form:name"),
	"POST /studio/db/:db/index/delete":  dbAdmin.audited("index.delete", "form:name"),
	"POST /studio/db/:db/index/disable": dbAdmin.audited("index.disable", "form:name"),
	"POST /studio/db/:db/index/enable":  dbAdmin.audited("index.enable", "form:name"),
	"POST /studio/db/:db/index/resume":  dbAdmin.audited("index.resume", "form:name"),
}

// permitFor is what the studio's pages may offer id: the same rules as
// authorize applies, so an action is shown exactly when it would be
// allowed (views.Can).
func permitFor(id *auth.Identity) views.Permit {
	return func(method, route, db string) bool {
		r, ok := routeRules[method+" "+route]
		return ok && id.Allows(r.need(db), db)
	}
}

// reauthorize identifies a live page's caller again before each update
// (web/live.go): a certificate revoked since the page connected gets
// nothing more, and one whose clearance or permissions changed gets what
// it may see now. It returns ctx carrying the identity and its permit.
func (s *Server) reauthorize(ctx context.Context, r *http.Request) (context.Context, error) {
	id, err := s.sec.identify(r)
	if err == nil && id == nil {
		err = auth.ErrNoCertificate
	}
	if err != nil {
		return nil, err
	}
	db := r.URL.Query().Get("db")
	if need := routeRules["GET /studio/live"].need(db); !id.Allows(need, db) {
		return nil, id.Refusal(need, db)
	}
	return views.WithPermit(auth.WithIdentity(ctx, id), permitFor(id)), nil
}

// auditActions are the actions routeRules audits, with their prefixes
// ("database" for database.create and database.delete), sorted.
func auditActions() []string {
	seen := map[string]bool{}
	for _, r := range routeRules {
		if r.audit == "" {
			continue
		}
		seen[r.audit] = true
		if prefix, _, ok := strings.Cut(r.audit, "."); ok {
			seen[prefix] = true
		}
	}
	out := make([]string, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// ruleFor finds the rule of the route a request matched ("ANY" rules
// cover every method).
func ruleFor(c echo.Context) (rule, bool) {
	if r, ok := routeRules[c.Request().Method+" "+c.Path()]; ok {
		return r, true
	}
	r, ok := routeRules["ANY "+c.Path()]
	return r, ok
}

// databaseOf reads the route's database name from where its rule says.
func databaseOf(c echo.Context, where string) string {
	where = strings.TrimSuffix(where, "?")
	kind, name, _ := strings.Cut(where, ":")
	switch kind {
	case "param":
		return c.Param(name)
	case "query":
		return c.QueryParam(name)
	case "form":
		return c.FormValue(name)
	}
	return ""
}

// authorize identifies the caller, checks the route's rule, and records
// audited actions once they ran.
func (s *Server) authorize(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r, ok := ruleFor(c)
		if !ok {
			if c.Path() == "" || c.Path() == "/*" || c.Path() == c.Request().URL.Path {
				// No route matched: any known caller hears RouteNotFound,
				// an unknown one that it must authenticate first.
				r = anyone
			} else {
				s.log.Error("route has no access rule; refusing it", "method", c.Request().Method, "route", c.Path())
				return dberr.New(dberr.Forbidden, "The route %s %s has no access rule; it is refused to everyone.", c.Request().Method, c.Path())
			}
		}
		req := c.Request()
		who, _ := c.Get(callerKey).(caller) // the guard identified the caller
		id, idErr := who.id, who.err
		if id != nil {
			ctx := auth.WithIdentity(req.Context(), id)
			c.SetRequest(req.WithContext(views.WithPermit(ctx, permitFor(id))))
		}
		if r.level != auth.Public {
			db := ""
			if r.level.Database() {
				db = databaseOf(c, r.db)
			}
			level := r.need(db)
			if idErr != nil || id == nil || !id.Allows(level, db) {
				err := idErr
				if err == nil && id == nil {
					err = auth.ErrNoCertificate
				}
				if err == nil {
					err = id.Refusal(level, db)
				}
				if _, ok := err.(*dberr.Error); !ok {
					err = dberr.New(dberr.Forbidden, "%s", err.Error())
				}
				return s.refuse(c, err)
			}
		}
		err := next(c)
		if r.audit != "" && s.audit != nil && (id == nil || id.Clearance != auth.ClusterNode) {
			// A node forwarding an action (to the leader) is not its author:
			// the node that took the request recorded who asked.
			s.record(c, r, id, err)
		}
		return err
	}
}

// record writes an audited action to the audit log.
func (s *Server) record(c echo.Context, r rule, id *auth.Identity, err error) {
	status := c.Response().Status
	if err != nil {
		status, _, _ = ravenError(err)
	}
	e := audit.Entry{Node: s.cfg.NodeTag, Action: r.audit, Method: c.Request().Method, Path: c.Request().URL.RequestURI(), Status: status, Remote: c.RealIP()}
	if id != nil {
		e.Who, e.Thumbprint, e.Clearance = id.Name, id.Thumbprint, string(id.Clearance)
	}
	if r.db != "" {
		e.Database = databaseOf(c, r.db)
	}
	if r.target != "" {
		e.Target = databaseOf(c, r.target)
	}
	if t, ok := c.Get(httpx.AuditTargetKey).(string); ok && t != "" {
		if e.Target != "" {
			e.Target += " "
		}
		e.Target += t
	}
	if len(e.Path) > 2048 {
		e.Path = e.Path[:2048]
	}
	if aerr := s.audit.Append(e); aerr != nil {
		s.log.Error("could not write the audit log", "error", aerr, "action", e.Action)
	}
}

var refusedPage = template.Must(template.New("refused").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Access refused · Rookery</title>
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/static/studio.css"></head>
<body><main class="refused" data-testid="auth-refused"><h1>Access refused</h1>
<p data-testid="auth-refused-reason">{{.}}</p>
<p>This Rookery node identifies its users by client certificate. Install your certificate (the <code>.pfx</code>
that <code>studio setup</code> wrote, or one an administrator registered for you) in your browser, then reopen this page
(browsers remember the certificate they chose; a new private window asks again).</p></main></body></html>`))

// refuse answers a caller who may not go on: RavenDB's 403 with its
// InvalidAuth error for clients, a page for people.
func (s *Server) refuse(c echo.Context, err error) error {
	var de *dberr.Error
	if !errors.As(err, &de) {
		de = dberr.New(dberr.Forbidden, "%s", err.Error())
	}
	if wantsHTML(c.Request()) {
		c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
		c.Response().Header().Set("Cache-Control", "no-store")
		c.Response().WriteHeader(http.StatusForbidden)
		return refusedPage.Execute(c.Response(), de.Msg)
	}
	return de
}

// wantsHTML tells a browser's page request from a client's.
func wantsHTML(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/html")
}

// authorizeWorker checks a subscription worker's connection: its
// certificate (secured) or its address (unsecured) must allow reading db
// (RavenDB lets Read access act as a subscription worker).
func (s *Server) authorizeWorker(c net.Conn, db string) error {
	if !s.sec.secured {
		return s.sec.checkCaller(c.RemoteAddr().String())
	}
	st := tlsState(c)
	if st == nil {
		return errors.New("this node requires TLS")
	}
	id, err := s.sec.auth.Identify(st.PeerCertificates)
	if err != nil {
		return err
	}
	if !id.Allows(auth.DatabaseRead, db) {
		return id.Refusal(auth.DatabaseRead, db)
	}
	return nil
}
