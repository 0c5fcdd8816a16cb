// Package web assembles the Rookery node: the Echo router, middleware, error
// mapping and the lifecycle of the databases behind it.
package web

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rookerydb/rookery/backend/activity"
	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/audit"
	"github.com/rookerydb/rookery/backend/catalog"
	"github.com/rookerydb/rookery/backend/changes"
	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/clustertx"
	"github.com/rookerydb/rookery/backend/conflicts"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/history"
	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/indexes"
	"github.com/rookerydb/rookery/backend/metrics"
	"github.com/rookerydb/rookery/backend/names"
	"github.com/rookerydb/rookery/backend/operations"
	"github.com/rookerydb/rookery/backend/query"
	"github.com/rookerydb/rookery/backend/rql"
	"github.com/rookerydb/rookery/backend/smuggler"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/backend/subscriptions"
	"github.com/rookerydb/rookery/handlers/api"
	"github.com/rookerydb/rookery/handlers/studio"
	"github.com/rookerydb/rookery/static"
)

// Config is everything a node needs to start.
type Config struct {
	// HTTPAddr is the listen address, e.g. 127.0.0.1:8080.
	HTTPAddr string
	// DataDir holds one directory per database.
	DataDir string
	// NodeTag is this node's tag (A, B, ...).
	NodeTag string
	// PublicURL is the URL clients are told to use for this node. When empty
	// it is derived from the listener address.
	PublicURL string
	// Logger receives structured logs; slog.Default() when nil.
	Logger *slog.Logger
	// RaftAddr is the Raft transport's address; the HTTP host with port+1000
	// when empty (a random loopback port when the HTTP port is 0 or unset).
	RaftAddr string
	// Join is the URL of a member of an existing cluster to join. Without it
	// a node with no Raft state bootstraps a one-node cluster.
	Join string
	// ElectionTimeout tunes Raft's heartbeat and election timeouts (tests
	// use short ones); 500 ms when zero.
	ElectionTimeout time.Duration
	// Replication turns on document replication between the members of a
	// database (the binary turns it on unless told otherwise).
	Replication bool
	// ReplicationPeers overrides the URL replication dials for a node tag
	// (a proxy, a NAT address, a fault-injection proxy in tests).
	ReplicationPeers map[string]string

	// TLSCert and TLSKey (PEM files) secure the node: HTTPS on its port,
	// client certificates as identities, mutual TLS between nodes. Without
	// them the node is unsecured (see UnsecuredAccessAllowed).
	TLSCert, TLSKey string
	// TLSCA (PEM) is the cluster's CA: a certificate it issued with the
	// cluster-node mark authenticates as a node.
	TLSCA string
	// WellKnownAdminCerts are thumbprints that are ClusterAdmin without
	// being registered.
	WellKnownAdminCerts []string
	// UnsecuredAccessAllowed is None, Local (the default), PrivateNetwork or
	// PublicNetwork, or a comma-separated combination: the addresses an
	// unsecured node may listen on and be called from.
	UnsecuredAccessAllowed string
	// AllowedHosts are Host names (host or host:port) the node answers to
	// besides its own URL and listener address.
	AllowedHosts []string
	// IntegrityCheck is the check each database file gets when it is
	// opened: "quick" (the default when empty), "full" or "off".
	IntegrityCheck string
	// Parser limits (the --max-… flags); zero takes each default. The
	// query, JSON and change-vector limits are process-wide: New sets
	// them, so the last node started in a process sets them for all.
	//
	// MaxQueryLength bounds an RQL query's text, in bytes
	// (rql.DefaultMaxLength).
	MaxQueryLength int
	// MaxQueryDepth bounds the nesting of an RQL where clause
	// (rql.DefaultMaxDepth).
	MaxQueryDepth int
	// MaxJSONDepth bounds the nesting of documents and of worker messages
	// (document.DefaultMaxDepth, at most document.HardMaxDepth).
	MaxJSONDepth int
	// MaxChangeVectorLength and MaxChangeVectorEntries bound change
	// vectors from clients and peers (changevector.DefaultMaxLength,
	// changevector.DefaultMaxEntries).
	MaxChangeVectorLength, MaxChangeVectorEntries int
	// MaxWorkerMessage bounds one message of a subscription worker, in
	// bytes (DefaultMaxWorkerMessage).
	MaxWorkerMessage int
	// Limits (README "Limits"). Zero means the default; a negative value
	// turns a limit off.

	// MaxConnections caps the open connections on the HTTP port: HTTP,
	// websockets and subscription workers together. DefaultMaxConnections().
	MaxConnections int
	// MaxRequestBody is the largest request body, in bytes.
	// DefaultMaxRequestBody.
	MaxRequestBody int64
	// MaxDocumentSize is the largest document a client may store, in bytes
	// of its JSON. DefaultMaxDocumentSize.
	MaxDocumentSize int64
	// MaxCmpXchgValueSize bounds a compare-exchange value (1 MiB when 0).
	MaxCmpXchgValueSize int64
	// MaxImportSize is the largest dump an import request may send (POST
	// …/smuggler/import; those requests are not held to MaxRequestBody).
	// DefaultMaxImportSize.
	MaxImportSize int64
	// MaxAttachmentSize is the largest attachment a client may store (PUT
	// …/attachments is held to it instead of MaxRequestBody).
	// api.DefaultMaxAttachmentSize; negative: no limit.
	MaxAttachmentSize int64
	// MinDataRate is the slowest average rate, in bytes/s, at which a
	// request body may arrive and a response be taken once MinDataRateGrace
	// has passed. DefaultMinDataRate and DefaultMinDataRateGrace.
	MinDataRate      int
	MinDataRateGrace time.Duration
	// MaxLivePages caps the studio pages kept live (one websocket each).
	// DefaultMaxLivePages.
	MaxLivePages int
	// MaxDocReferences is how many distinct strings of a document the
	// studio's document page checks for being ids of other documents
	// (studio.DefaultMaxDocReferences when zero; none when negative).
	MaxDocReferences int
	// PatchTimeLimit is the time the JavaScript patch scripts of one request
	// share (patch.DefaultTimeLimit when zero); MaxMultiGet bounds the inner
	// requests of one multi_get (api.DefaultMaxMultiGet when zero).
	PatchTimeLimit time.Duration
	// ConflictScriptTimeLimit bounds one run of a conflict resolution
	// script (conflicts.DefaultTimeLimit when zero).
	ConflictScriptTimeLimit time.Duration
	MaxMultiGet             int
	// IndexCleanupInterval is how often the leader applies the auto-index
	// cleanup rules. DefaultIndexCleanupInterval.
	IndexCleanupInterval time.Duration
	// DumpDir is the only directory server-side imports and exports read
	// and write (several databases at once, an import from a file on the
	// server); <DataDir>/dumps when empty.
	DumpDir string
	// HistoryRetention, HistoryInterval and HistoryMaxSeries size the
	// studio's chart history (history.Options; zero takes each default).
	HistoryRetention, HistoryInterval time.Duration
	HistoryMaxSeries                  int

	// Alert thresholds (web/alerts.go; zero takes each default).
	// AlertNodeUnreachable: a member silent this long is unreachable.
	AlertNodeUnreachable time.Duration
	// AlertReplicationError: a destination disconnected with an error this
	// long while its node answers.
	AlertReplicationError time.Duration
	// AlertReplicationLag: a connected destination's oldest unacknowledged
	// change is this old.
	AlertReplicationLag time.Duration
	// AlertIndexStale: an index stale this long without a break.
	AlertIndexStale time.Duration
	// AlertLeaderWindow: a leader-change alert clears after this long
	// without another change or election.
	AlertLeaderWindow time.Duration
	// AlertElections: this many changes or elections in a row make the
	// leader alert a warning.
	AlertElections int
	// AlertCertificateDays: certificates expiring within this many days
	// are flagged.
	AlertCertificateDays int
	// MaxAlerts bounds the alerts the node keeps (DefaultMaxAlerts).
	MaxAlerts int
	// Now is the alerts' clock (time.Now when nil); tests move it.
	Now func() time.Time
	// ChangesMaxPending, ChangesFrameInterval and ChangesFrameBudget tune
	// the Changes API (web/changes.go; zero takes changes.DefaultMaxPending,
	// changes.DefaultFrameInterval and changes.DefaultFrameBudget).
	ChangesMaxPending    int
	ChangesFrameInterval time.Duration
	ChangesFrameBudget   int
	// AttachmentsCollectAfter is how long content released through
	// replication (a replicated delete, or a version without the
	// attachment) stays before it is deleted if nothing refers to it
	// (DefaultAttachmentsCollectAfter when zero).
	AttachmentsCollectAfter time.Duration
}

// applyLimits checks the parser limits of cfg, fills in the defaults, and
// sets the process-wide ones.
func applyLimits(cfg *Config) error {
	if cfg.MaxWorkerMessage < 0 {
		return fmt.Errorf("--max-worker-message must not be negative (%d)", cfg.MaxWorkerMessage)
	}
	if cfg.MaxWorkerMessage == 0 {
		cfg.MaxWorkerMessage = DefaultMaxWorkerMessage
	}
	if err := rql.SetLimits(rql.Limits{MaxLength: cfg.MaxQueryLength, MaxDepth: cfg.MaxQueryDepth}); err != nil {
		return fmt.Errorf("--max-query-length/--max-query-depth: %w", err)
	}
	if err := document.SetMaxDepth(cfg.MaxJSONDepth); err != nil {
		return fmt.Errorf("--max-json-depth: %w", err)
	}
	if err := changevector.SetLimits(cfg.MaxChangeVectorLength, cfg.MaxChangeVectorEntries); err != nil {
		return fmt.Errorf("--max-change-vector-length/--max-change-vector-entries: %w", err)
	}
	return nil
}

// withDefaults fills in the limits left at zero and turns the negative
// ("off") ones to zero.
func (c Config) withDefaults() Config {
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections()
	}
	if c.MaxRequestBody == 0 {
		c.MaxRequestBody = DefaultMaxRequestBody
	}
	if c.MaxDocumentSize == 0 {
		c.MaxDocumentSize = DefaultMaxDocumentSize
	}
	if c.MaxImportSize == 0 {
		c.MaxImportSize = DefaultMaxImportSize
	}
	if c.MaxAttachmentSize == 0 {
		c.MaxAttachmentSize = api.DefaultMaxAttachmentSize
	}
	if c.MinDataRate == 0 {
		c.MinDataRate = DefaultMinDataRate
	}
	if c.MinDataRateGrace <= 0 {
		c.MinDataRateGrace = DefaultMinDataRateGrace
	}
	if c.MaxLivePages == 0 {
		c.MaxLivePages = DefaultMaxLivePages
	}
	if c.AttachmentsCollectAfter <= 0 {
		c.AttachmentsCollectAfter = DefaultAttachmentsCollectAfter
	}
	if c.IndexCleanupInterval <= 0 {
		c.IndexCleanupInterval = DefaultIndexCleanupInterval
	}
	orDuration := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	orDuration(&c.AlertNodeUnreachable, DefaultAlertNodeUnreachable)
	orDuration(&c.AlertReplicationError, DefaultAlertReplicationError)
	orDuration(&c.AlertReplicationLag, DefaultAlertReplicationLag)
	orDuration(&c.AlertIndexStale, DefaultAlertIndexStale)
	orDuration(&c.AlertLeaderWindow, DefaultAlertLeaderWindow)
	if c.AlertElections <= 0 {
		c.AlertElections = DefaultAlertElections
	}
	if c.AlertCertificateDays <= 0 {
		c.AlertCertificateDays = DefaultAlertCertificateDays
	}
	if c.MaxAlerts <= 0 {
		c.MaxAlerts = DefaultMaxAlerts
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.MaxConnections = max(c.MaxConnections, 0)
	c.MaxRequestBody = max(c.MaxRequestBody, 0)
	c.MaxDocumentSize = max(c.MaxDocumentSize, 0)
	c.MaxImportSize = max(c.MaxImportSize, 0)
	c.MinDataRate = max(c.MinDataRate, 0)
	c.MaxLivePages = max(c.MaxLivePages, 0)
	return c
}

// RaftAddrFor derives the default Raft address from the HTTP address.
func RaftAddrFor(httpAddr string) string {
	host, port, err := net.SplitHostPort(httpAddr)
	if err != nil {
		return "127.0.0.1:0"
	}
	n, err := strconv.Atoi(port)
	if err != nil || n == 0 || n+1000 > 65535 {
		return net.JoinHostPort(host, "0")
	}
	return net.JoinHostPort(host, strconv.Itoa(n+1000))
}

// Server is one Rookery node.
type Server struct {
	clusterTx *clustertx.Applier // cmpxchg.go

	cfg     Config
	echo    *echo.Echo
	http    *http.Server
	log     *slog.Logger
	catalog *catalog.Catalog
	url     atomic.Pointer[string]
	ready   atomic.Bool
	reg     *prometheus.Registry

	activity   *activity.Tracker
	alerts     *alerts.Store
	watchers   *watchers
	cluster    *cluster.Cluster
	recon      chan struct{}
	studio     *studio.Studio
	hub        *Hub
	stop       chan struct{}
	stopped    chan struct{}
	reconciled chan struct{}
	repl       replicator
	resolver   *conflicts.Auto
	bulk       *conflicts.Manager
	subs       *subscriptions.Manager
	subStop    context.Context
	subCancel  context.CancelFunc
	subConns   subscriptionConns
	subRecon   chan struct{}

	// indexes: this node's index engine, the service that keeps it in line
	// with the cluster's definitions, the query runner, and the long jobs.
	indexes    *index.Manager
	idx        *indexes.Service
	queries    *query.Runner
	operations *operations.Registry
	changes    *changes.Hub
	// lastCleanup is when the ticker last started the auto-index cleanup;
	// cleaning is set while a pass runs.
	lastCleanup time.Time
	cleaning    atomic.Bool
	// lastCollect is when the ticker last started collecting released
	// attachment content; collecting is set while a pass runs.
	lastCollect time.Time
	collecting  atomic.Bool

	// reconKnown are the database records the reconciler saw last.
	reconMu    sync.Mutex
	reconKnown map[string]bool

	sec        *security
	nodes      *nodeClient
	audit      *audit.Log
	acceptErrs *prometheus.CounterVec
	limits     *requestLimits

	// history is the studio's chart series, sampled by the ticker every
	// history interval (history.go); reach is what this node saw of the
	// others when it last asked them.
	history     *history.Store
	historyLast time.Time
	rates       history.Rates
	reach       *history.Reachability
}

// resolutionFailed raises an alert when an automatic resolution (a script)
// fails: the conflict stays stored and someone has to look at it.
func (s *Server) resolutionFailed(database, id string, err error) {
	s.log.Warn("automatic conflict resolution failed", "database", database, "id", id, "error", err)
	s.alerts.Raise(alerts.Alert{Key: "conflict-script/" + strings.ToLower(database), Level: alerts.Warning, Database: database, Link: dbPath(database, "conflicts"),
		Title: "Conflict script failed", Message: "Resolving " + id + ": " + err.Error() + ". The conflict is kept; see the Conflicts page."})
}

// New opens the databases and prepares the router. It opens nothing on the
// network until Serve.
func New(cfg Config) (*Server, error) {
	if cfg.NodeTag == "" {
		cfg.NodeTag = "A"
	}
	if err := validTag(cfg.NodeTag); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "data"
	}
	if cfg.DumpDir == "" {
		cfg.DumpDir = filepath.Join(cfg.DataDir, "dumps")
	}
	if cfg.RaftAddr == "" {
		cfg.RaftAddr = RaftAddrFor(cfg.HTTPAddr)
	}
	cfg = cfg.withDefaults()
	if err := applyLimits(&cfg); err != nil {
		return nil, err
	}
	histOpts, err := history.Options{Retention: cfg.HistoryRetention, Interval: cfg.HistoryInterval, MaxSeries: cfg.HistoryMaxSeries}.WithDefaults()
	if err != nil {
		return nil, err
	}
	sec, err := newSecurity(&cfg)
	if err != nil {
		return nil, err
	}
	auditLog, err := audit.Open(filepath.Join(cfg.DataDir, "audit", "audit.log"), audit.Options{})
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	engineMetrics := metrics.New()
	cat, err := catalog.OpenWith(catalog.Config{DataDir: cfg.DataDir, NodeTag: cfg.NodeTag, Integrity: cfg.IntegrityCheck, Logger: cfg.Logger, Metrics: engineMetrics})
	if err != nil {
		auditLog.Close()
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, catalog: cat, recon: make(chan struct{}, 1), sec: sec, audit: auditLog,
		history: history.New(histOpts), reach: &history.Reachability{}}
	s.nodes = newNodeClient(sec)
	s.repl.stopping, s.repl.stopAll = context.WithCancel(context.Background())
	initial := cfg.PublicURL
	if initial == "" && cfg.HTTPAddr != "" {
		initial = s.scheme() + "://" + cfg.HTTPAddr
	}
	s.url.Store(&initial)
	nodeCert := ""
	if sec.secured {
		nodeCert = base64.StdEncoding.EncodeToString(sec.cert.Leaf.Raw)
	}
	s.cluster, err = cluster.Open(cluster.Config{
		NodeTag: cfg.NodeTag, RaftAddr: cfg.RaftAddr, URL: initial, Certificate: nodeCert, Dir: filepath.Join(cfg.DataDir, "raft"),
		Bootstrap: cfg.Join == "", Logger: cfg.Logger, Forward: api.Forward(s.nodes), Security: sec.raft(),
		HeartbeatTimeout: cfg.ElectionTimeout, ElectionTimeout: cfg.ElectionTimeout, LeaderLeaseTimeout: cfg.ElectionTimeout / 2,
	})
	if err != nil {
		cat.Close()
		auditLog.Close()
		return nil, err
	}
	sec.registry.c.Store(s.cluster)
	s.cluster.OnChange(func() {
		select {
		case s.recon <- struct{}{}:
		default:
		}
	})

	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	engineMetrics.Register(s.reg)
	s.reg.MustRegister(replicationCollector{s})
	httpMetrics := newHTTPMetrics(s.reg)
	limits := newRequestLimits(cfg, s.reg)
	s.limits = limits
	s.acceptErrs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rookery_http_accept_errors_total",
		Help: "Failed accepts on the HTTP port, by reason (emfile, enfile, econnaborted, nomem, other); the port keeps accepting after a short backoff.",
	}, []string{"reason"})
	s.reg.MustRegister(s.acceptErrs)
	maxConns := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rookery_http_max_connections", Help: "The cap on open connections on the HTTP port (--max-connections; 0 = none).",
	})
	maxConns.Set(float64(cfg.MaxConnections))
	s.reg.MustRegister(maxConns)

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.errorHandler
	e.Pre(s.guard)
	e.Use(httpMetrics.observe(s.log), serverHeaders, studioHeaders, s.recoverMiddleware, s.authorize, limits.middleware)
	e.GET("/livez", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})))
	s.activity = activity.New()
	s.alerts, err = alerts.Open(alerts.Options{Node: cfg.NodeTag, Path: filepath.Join(cfg.DataDir, "alerts", "alerts.json"), Max: cfg.MaxAlerts, Now: cfg.Now, Log: cfg.Logger})
	if err != nil {
		s.cluster.Shutdown()
		cat.Close()
		auditLog.Close()
		return nil, fmt.Errorf("alerts: %w", err)
	}
	s.watchers = newWatchers(s, cfg.Now)
	s.watchDamage()
	engine := conflicts.NewEngine(cfg.Logger)
	if cfg.ConflictScriptTimeLimit > 0 {
		engine.TimeLimit = cfg.ConflictScriptTimeLimit
	}
	s.resolver = &conflicts.Auto{Engine: engine, Settings: s.cluster, NodeTag: cfg.NodeTag, OnError: s.resolutionFailed}
	s.bulk = conflicts.NewManager(engine, s.resolver)
	s.subs = subscriptions.NewManager(s.cluster, func(name string) (subscriptions.DB, error) {
		db, err := cat.Get(name)
		if err != nil {
			return nil, err
		}
		return db, nil
	}, cfg.NodeTag, cfg.Logger)
	s.subStop, s.subCancel = context.WithCancel(context.Background())
	s.subRecon = make(chan struct{}, 1)
	s.reg.MustRegister(subscriptionCollector{s})
	s.changes = changes.New(changes.Options{MaxPending: cfg.ChangesMaxPending, FrameInterval: cfg.ChangesFrameInterval, FrameBudget: cfg.ChangesFrameBudget})
	s.reg.MustRegister(changesCollector{s.changes})
	s.indexes = index.NewManager(index.Options{Logger: cfg.Logger, OnChange: s.changesIndexEvent})
	s.idx = &indexes.Service{Cluster: s.cluster, Catalog: cat, Manager: s.indexes, Tracker: indexes.NewTracker(time.Now()), NodeTag: cfg.NodeTag, Log: cfg.Logger}
	s.queries = query.NewRunner(s.idx, query.IndexLookup(s.indexes.Get), query.Options{Logger: cfg.Logger, CmpXchg: s.queryCmpXchg})
	s.operations = operations.New(operations.Options{Describe: describeError, OnChange: func(info operations.Info) { s.hub.Notify(""); s.changesOperation(info) }})
	s.bulk.Operations = s.operations
	wire := &api.API{Catalog: cat, NodeTag: cfg.NodeTag, URL: s.URL, Activity: s.activity, Cluster: s.cluster, Conflicts: s.bulk, Subscriptions: s.subs,
		Nodes: s.nodes, Audit: auditLog, ClusterSecret: sec.secretForJoiners, ServerCertificate: nodeCert, WellKnownAdmins: sec.wellKnown(), Reseed: s.Reseed, MaxDocumentSize: cfg.MaxDocumentSize, MaxAttachmentSize: cfg.MaxAttachmentSize,
		Indexes: s.idx, Queries: s.queries, Operations: s.operations, Log: cfg.Logger, DumpDir: cfg.DumpDir, Alerts: s.watchers,
		PatchTimeLimit: cfg.PatchTimeLimit, MaxMultiGet: cfg.MaxMultiGet,
		MaxCmpXchgValueSize: cfg.MaxCmpXchgValueSize, ClusterTx: s.clusterTxApplier()}
	if sec.secured {
		wire.ServerThumbprint = sec.auth.Self
	}
	wire.Register(e)
	s.studio = &studio.Studio{Catalog: cat, Activity: s.activity, Alerts: s.alerts, NodeTag: cfg.NodeTag, URL: s.URL, Cluster: s.cluster, Conflicts: s.bulk, Replication: studioReplication{s}, Subscriptions: s.subs,
		Nodes: s.nodes, Reseed: s.Reseed, MaxDocumentSize: cfg.MaxDocumentSize, MaxDocReferences: cfg.MaxDocReferences, MaxCmpXchgValueSize: cfg.MaxCmpXchgValueSize,
		ServerCertificate: wire.ServerCertificate, WellKnownAdmins: wire.WellKnownAdmins, Audit: wire.Audit,
		Indexes: s.indexes, Queries: s.queries, IndexUsage: s.idx.Usage, IndexConfig: s.idx.Config, OnQuery: s.idx.Queried,
		History: s.history, Reach: s.reach,
		Notifications: s.watchers, CertificateWarning: time.Duration(cfg.AlertCertificateDays) * 24 * time.Hour, Now: cfg.Now,
		Operations: s.operations, Smuggler: smuggler.ClusterServices{Cluster: s.cluster, Indexes: s.idx, Subs: s.subs}, DumpDir: cfg.DumpDir}

	if !sec.secured {
		s.studio.UnsecuredAccess = accessName(sec.access)
	}
	s.studio.AuditActions = auditActions()
	s.studio.Register(e)
	s.hub = NewHub(cfg.Logger, s.studio, s.reg)
	s.hub.maxClients = cfg.MaxLivePages
	s.hub.reauthorize = s.reauthorize
	s.bulk.OnChange = s.hub.Notify
	s.subs.OnChange = s.hub.Notify
	e.GET("/studio/live", s.hub.Serve)
	e.GET("/databases/:db/replication", s.serveReplication)
	e.GET("/databases/:db/changes", s.serveChanges)
	e.GET("/databases/:db/replication/stats", s.replicationStats)
	e.GET("/internal/indexes/usage", s.indexUsage)
	e.GET("/internal/history", s.internalHistory)
	e.GET("/internal/notifications", s.internalAlerts)
	e.POST("/internal/notifications/action", s.internalAlertAction)
	e.GET("/static/*", echo.WrapHandler(http.StripPrefix("/static/", http.FileServer(http.FS(static.Files)))))
	e.GET("/favicon.ico", serveFavicon)
	s.echo = e
	s.watch()
	if err := s.startCluster(); err != nil {
		s.Close()
		return nil, err
	}
	s.http = &http.Server{Handler: withTLSState(e), ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: 2 * time.Minute,
		ConnContext: connContext}
	return s, nil
}

// serveFavicon answers /favicon.ico, which browsers ask for on their own,
// with the studio's SVG icon: without it every page logged a 4xx.
func serveFavicon(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "public, max-age=86400")
	return c.Blob(http.StatusOK, "image/svg+xml", static.Favicon)
}

// scheme is https on a secured node, http otherwise.
func (s *Server) scheme() string {
	if s.sec.secured {
		return "https"
	}
	return "http"
}

func validTag(tag string) error { return names.NodeTag(tag) }

// watch connects the engine's events to the live hub: every commit of a
// database, databases coming and going, alerts, and a once-a-second tick
// that samples write rates.
func (s *Server) watch() {
	for _, db := range s.catalog.All() {
		s.watchDB(db)
	}
	s.catalog.OnChange(func(ev catalog.Event) {
		if ev.DB != nil {
			s.watchDB(ev.DB)
		}
		if ev.Type == "damaged" {
			s.changes.DropDatabase(ev.Name, "database damaged")
		}
		if ev.Type == "deleted" {
			if err := s.indexes.CloseDatabase(ev.Name); err != nil {
				s.log.Warn("closing a deleted database's indexes", "database", ev.Name, "error", err)
			}
			s.idx.Tracker.Forget(ev.Name)
			s.activity.Forget(ev.Name)
			s.alerts.ClearDatabase(ev.Name)
			s.changes.DropDatabase(ev.Name, "database deleted")
			s.forgetClosed()
		}
		s.hub.Notify("")
	})
	s.alerts.OnChange(func() { s.hub.Notify("") })
	s.cluster.OnChange(func() {
		s.hub.Notify("")
		select {
		case s.subRecon <- struct{}{}:
		default:
		}
	})
	s.activity.OnHiLo(s.hub.Notify)
	s.stop, s.stopped = make(chan struct{}), make(chan struct{})
	s.reconciled = make(chan struct{})
	go s.tick()
	go s.reconcile()
	go s.reconcileSubscriptions()
	go s.clusterTx.Run(s.stop)
}

func (s *Server) watchDB(db *storage.DB) {
	name := db.Name()
	db.SetResolver(s.resolver)
	db.SetRevisionsSource(func() []byte { return s.cluster.Setting(name, storage.RevisionsSettingKey) })
	s.commitLog(db)
	db.OnCommit(func(ch []storage.Change) { s.changes.Documents(name, ch) })
	db.OnItemCommit(func() bool { return s.changes.WantsItems(name) }, func(it []storage.ItemChange) { s.changes.Items(name, it) })
	db.OnCommit(func([]storage.Change) {
		s.subs.Notify(name)
		s.hub.Notify(name)
		s.wakeSenders(db)
	})
}

func (s *Server) tick() {
	defer close(s.stopped)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.sampleReplication() // before the pages that chart it are woken
		s.subs.Sample(context.Background(), s.catalog.Names())
		for _, db := range s.catalog.All() {
			s.activity.Sample(db.Name(), db.Writes())
			s.hub.Tick(db.Name())
		}
		s.hub.Tick("") // server-wide pages (dashboard, cluster) even with no databases
		s.maybeSampleHistory(time.Now())
		s.maybeCleanupIndexes(time.Now())
		s.maybeCollectAttachments(time.Now())
		s.studio.Tick(context.Background())
		s.watchers.check(context.Background())
	}
}

// Handler is the node's HTTP handler (for tests that drive it directly).
func (s *Server) Handler() http.Handler { return s.echo }

// Catalog is the node's databases.
func (s *Server) Catalog() *catalog.Catalog { return s.catalog }

// LiveHub is the studio's live-update hub (the bench sets its baseline
// mode through it).
func (s *Server) LiveHub() *Hub { return s.hub }

// Serve accepts connections on l until Shutdown.
func (s *Server) Serve(l net.Listener) error {
	if s.cfg.PublicURL == "" {
		u := s.scheme() + "://" + l.Addr().String()
		s.url.Store(&u)
	}
	s.sec.setHosts(s.URL(), l.Addr())
	s.ready.Store(true)
	s.log.Info("rookery node serving", "url", s.URL(), "node_tag", s.cfg.NodeTag, "data_dir", s.cfg.DataDir)
	// Subscription workers connect to the same port (their first byte is
	// '{'); on a secured node TLS comes first, so they speak TLS too.
	err := s.http.Serve(newSniffListener(l, s.serveSubscriptionConn, listenerOptions{
		maxConns: s.cfg.MaxConnections, tls: s.sec.serverTLS, firstByte: readHeaderTimeout, log: s.log, errs: s.acceptErrs}))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// URL is the base URL clients use for this node.
func (s *Server) URL() string { return *s.url.Load() }

// Shutdown stops accepting requests, lets in-flight ones (and the writes
// they queued) finish, then closes the databases.
func (s *Server) Shutdown(ctx context.Context) error {
	s.ready.Store(false)
	s.changes.DropAll("server stopping")
	s.stopReplication()
	s.stopSubscriptions()
	err := s.http.Shutdown(ctx)
	s.stopTicker()
	s.operations.Close()
	return errors.Join(err, s.indexes.Close(), s.cluster.Shutdown(), s.catalog.Close(), s.audit.Close())
}

func (s *Server) stopTicker() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
		<-s.stopped
		<-s.reconciled
		s.watchers.stop()
	}
}

// Close releases the databases without serving (for a server that never
// served).
func (s *Server) Close() error {
	s.stopReplication()
	s.stopSubscriptions()
	s.stopTicker()
	if s.operations != nil {
		s.operations.Close()
	}
	var ixErr error
	if s.indexes != nil {
		ixErr = s.indexes.Close()
	}
	return errors.Join(ixErr, s.cluster.Shutdown(), s.catalog.Close(), s.audit.Close())
}

// Cluster is the node's Raft view.
func (s *Server) Cluster() *cluster.Cluster { return s.cluster }
