// Package api holds the Echo handlers of the RavenDB-compatible HTTP API
// (the wire protocol) that the npm client and Rookery's Go client speak:
// documents, ids, stats, the cluster and admin endpoints, certificates,
// conflicts, subscriptions. Handlers translate HTTP to engine calls; they
// hold no SQL and no storage logic, and render no view (the studio's pages
// are handlers/studio, which does not import this package, nor this one
// it). What both need lives in the backend packages, or, when it is purely
// HTTP, in handlers/httpx.
package api

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/activity"
	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/audit"
	"github.com/rookerydb/rookery/backend/catalog"
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/clustertx"
	"github.com/rookerydb/rookery/backend/conflicts"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/ids"
	"github.com/rookerydb/rookery/backend/indexes"
	"github.com/rookerydb/rookery/backend/operations"
	"github.com/rookerydb/rookery/backend/query"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/backend/subscriptions"
	"github.com/rookerydb/rookery/handlers/httpx"
)

// ServerVersion is what Rookery reports in Raven-Server-Version: the RavenDB
// protocol generation it speaks.
const ServerVersion = "7.1.0"

// API serves the RavenDB-compatible endpoints of one node.
type API struct {
	Catalog *catalog.Catalog
	NodeTag string
	// URL returns the node's public base URL (no trailing slash).
	URL     func() string
	Cluster *cluster.Cluster
	// Activity records HiLo calls for the studio; optional.
	Activity *activity.Tracker
	// Conflicts runs bulk resolutions and previews.
	Conflicts *conflicts.Manager
	// Subscriptions runs the subscription workers and their monitor.
	Subscriptions *subscriptions.Manager
	// Nodes sends this node's requests to other nodes, with its
	// credentials (forwarding to the leader).
	Nodes httpx.NodeClient
	// ClusterSecret is the unsecured cluster's shared secret, handed to a
	// node that joins (nil or "" on a secured cluster).
	ClusterSecret func() string
	// ServerCertificate is this node's certificate, base64 DER ("" when
	// unsecured); WellKnownAdmins are --well-known-admin-certs.
	ServerCertificate string
	ServerThumbprint  string
	WellKnownAdmins   []string
	// Audit is the node's audit log.
	Audit *audit.Log
	// Reseed replaces this node's damaged copy of a database with a fresh
	// one that replication fills, and says what it did; nil leaves
	// POST /admin/databases/reseed unavailable.
	Reseed func(ctx context.Context, name string) (string, error)
	// Indexes manages the node's indexes (definitions through the cluster);
	// Queries runs RQL; Operations holds the long jobs clients poll.
	Indexes    *indexes.Service
	Queries    *query.Runner
	Operations *operations.Registry
	// Log receives what a request cannot report any more (a stream cut
	// after its status was sent); optional.
	Log *slog.Logger
	// MaxDocumentSize is the largest document (its JSON, in bytes) a client
	// may store; no limit when zero.
	MaxDocumentSize int64
	// MaxAttachmentSize is the largest attachment a client may store
	// (DefaultMaxAttachmentSize when zero; no limit when negative).
	MaxAttachmentSize int64
	// DumpDir is where server-side imports and exports read and write.
	DumpDir string
	// Alerts is the cluster's notification center; nil leaves
	// /admin/notifications unavailable.
	Alerts alerts.Center

	// PatchTimeLimit is the time the patch scripts of one request share
	// (--patch-time-limit; patch.DefaultTimeLimit when zero).
	PatchTimeLimit time.Duration
	// MaxMultiGet bounds the inner requests of one multi_get
	// (--max-multi-get; DefaultMaxMultiGet when zero).
	MaxMultiGet int
	// router dispatches multi_get's inner requests (set by Register).
	router *echo.Echo

	// proposed are the tags nextTag handed out in the last minute, so nodes
	// started together (asking before either joined) get different ones.
	// MaxCmpXchgValueSize bounds a compare-exchange value
	// (--max-cmpxchg-value-size); ClusterTx writes committed cluster
	// transactions into this node's databases (cmpxchg.go).
	MaxCmpXchgValueSize int64
	ClusterTx           *clustertx.Applier

	proposedMu sync.Mutex
	proposed   map[string]time.Time
}

func (a *API) nodes() httpx.NodeClient { return httpx.OrPlain(a.Nodes) }

// idents takes identities through the cluster's log.
func (a *API) idents() ids.Cluster { return ids.Cluster{Src: a.Cluster} }

// Register adds the API routes to e.
func (a *API) Register(e *echo.Echo) {
	e.GET("/topology", a.topology)
	e.GET("/cluster/topology", a.clusterTopology)
	e.GET("/cluster/node-info", a.nodeInfo)
	e.GET("/build/version", a.buildVersion)
	e.GET("/databases", a.listDatabases)
	e.PUT("/admin/databases", a.createDatabase)
	e.DELETE("/admin/databases", a.deleteDatabases)
	e.GET("/admin/databases", a.databaseRecord)
	e.POST("/admin/databases/reseed", a.reseed)

	e.GET("/admin/cluster/status", a.clusterStatus)
	e.GET("/admin/cluster/next-tag", a.nextTag)
	e.POST("/admin/cluster/join", a.clusterJoin)
	e.POST("/admin/cluster/promote", a.clusterPromote)
	e.POST("/admin/cluster/remove", a.clusterRemove)
	e.POST("/admin/cluster/stepdown", a.clusterStepDown)
	e.POST("/internal/cluster/apply", a.clusterApply)
	e.GET("/internal/subscriptions/monitor", a.internalSubscriptionMonitor)

	g := e.Group("/databases/:db", a.topologyEtag)
	g.GET("/docs", a.getDocs)
	g.POST("/docs", a.postDocs)
	g.HEAD("/docs", a.headDoc)
	g.PUT("/docs", a.putDoc)
	g.DELETE("/docs", a.deleteDoc)
	a.registerPatch(e, g)
	g.POST("/bulk_docs", a.bulkDocs)
	a.registerBulkInsert(g)
	g.GET("/cmpxchg", a.getCmpXchg)
	g.PUT("/cmpxchg", a.putCmpXchg)
	g.DELETE("/cmpxchg", a.deleteCmpXchg)
	a.registerTimeSeries(g)
	a.registerCounters(g)
	g.GET("/hilo/next", a.hiloNext)
	g.PUT("/hilo/return", a.hiloReturn)
	g.POST("/identity/next", a.identityNext)
	g.POST("/identity/seed", a.identitySeed)
	g.GET("/debug/identities", a.identities)
	g.GET("/stats", a.stats)
	g.GET("/collections/stats", a.collectionStats)
	g.GET("/configuration/client", a.clientConfiguration)
	g.GET("/healthcheck", a.healthcheck)
	a.registerConflicts(e, g)
	a.registerAttachments(g)
	a.registerRevisions(g)
	a.registerSubscriptions(g)
	a.registerQueries(g)
	a.registerIndexes(e, g)
	a.registerOperations(e, g)
	a.registerSmuggler(g)
	a.registerSmugglerAdmin(e, g)
	e.GET("/info/remote-task/tcp", a.remoteTaskTCP)
	a.registerCertificates(e)
	a.registerAlerts(e)
	g.GET("/info/tcp", a.legacyTCPInfo)
}

// db resolves the :db path parameter.
func (a *API) db(c echo.Context) (*storage.DB, error) {
	return a.Catalog.Get(c.Param("db"))
}

// dbParam resolves the :db path parameter and a required query parameter.
func (a *API) dbParam(c echo.Context, name string) (*storage.DB, string, error) {
	db, err := a.db(c)
	if err != nil {
		return nil, "", err
	}
	v, err := requiredParam(c, name)
	return db, v, err
}

// writeJSON sends v as JSON with status.
func writeJSON(c echo.Context, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.Blob(status, echo.MIMEApplicationJSONCharsetUTF8, b)
}

func badParam(name, value string) error {
	return dberr.New(dberr.BadRequest, "Query string parameter '%s' has an invalid value '%s'", name, value)
}

func requiredParam(c echo.Context, name string) (string, error) {
	v := c.QueryParam(name)
	if v == "" {
		return "", dberr.New(dberr.BadRequest, "Query string parameter '%s' is required", name)
	}
	return v, nil
}

func intParam(c echo.Context, name string, def int64) (int64, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, badParam(name, v)
	}
	return n, nil
}

func boolParam(c echo.Context, name string) (bool, error) {
	v := c.QueryParam(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badParam(name, v)
	}
	return b, nil
}

// unquote strips the quotes of an ETag-style header value.
func unquote(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// etagOf is the cache validator of a set of documents: it changes whenever
// any of them is written, appears or disappears.
func etagOf(docs []*storage.Document, extra []*storage.Document) string {
	h := fnv.New64a()
	var buf [20]byte
	for _, set := range [][]*storage.Document{docs, extra} {
		for _, d := range set {
			if d == nil {
				h.Write([]byte{'-'})
				continue
			}
			h.Write(strconv.AppendInt(buf[:0], d.Etag, 10))
			h.Write(strconv.AppendInt(append(buf[:0], '/'), d.Flags, 10)) // served flags (HasRevisions) change without an etag on a replica
			if d.CountersEtag > 0 {
				h.Write(strconv.AppendInt(append(buf[:0], 'c'), d.CountersEtag, 10))
			}
			h.Write([]byte{','})
		}
		h.Write([]byte{'|'})
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

// etagWith folds more of an answer into an etag of etagOf.
func etagWith(etag string, more []byte) string {
	h := fnv.New64a()
	h.Write([]byte(etag))
	h.Write([]byte{'|'})
	h.Write(more)
	return strconv.FormatUint(h.Sum64(), 16)
}

func notModified(c echo.Context, etag string) bool {
	inm := c.Request().Header.Get("If-None-Match")
	return inm != "" && unquote(inm) == etag
}

func (a *API) healthcheck(c echo.Context) error {
	if _, err := a.db(c); err != nil {
		return err
	}
	return c.NoContent(http.StatusOK)
}

// clientConfiguration serves the database's client configuration: the
// identity parts separator when the database does not use "/".
func (a *API) clientConfiguration(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	if db.Separator() == "/" {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSONCharsetUTF8, []byte(`{"Etag":0,"Configuration":null}`))
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Etag": 1, "Configuration": map[string]any{
		"Disabled": false, "IdentityPartsSeparator": db.Separator(),
	}})
}
