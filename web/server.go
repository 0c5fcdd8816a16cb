// Package web assembles the Rookery node: the Echo router, middleware, error
// mapping and the lifecycle of the databases behind it.
package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rookerydb/rookery/backend/activity"
	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/catalog"
	"github.com/rookerydb/rookery/backend/metrics"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/handlers"
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
}

// Server is one Rookery node.
type Server struct {
	cfg     Config
	echo    *echo.Echo
	http    *http.Server
	log     *slog.Logger
	catalog *catalog.Catalog
	url     atomic.Pointer[string]
	ready   atomic.Bool
	reg     *prometheus.Registry

	activity *activity.Tracker
	alerts   *alerts.Store
	studio   *handlers.Studio
	hub      *Hub
	stop     chan struct{}
	stopped  chan struct{}
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
	engineMetrics := metrics.New()
	cat, err := catalog.Open(cfg.DataDir, cfg.NodeTag, cfg.Logger, engineMetrics)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, catalog: cat}
	initial := cfg.PublicURL
	if initial == "" && cfg.HTTPAddr != "" {
		initial = "http://" + cfg.HTTPAddr
	}
	s.url.Store(&initial)

	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	engineMetrics.Register(s.reg)
	httpMetrics := newHTTPMetrics(s.reg)

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.errorHandler
	e.Use(httpMetrics.observe(s.log), serverHeaders, s.recoverMiddleware)
	e.GET("/livez", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	e.GET("/readyz", func(c echo.Context) error {
		if !s.ready.Load() {
			return c.String(http.StatusServiceUnavailable, "starting")
		}
		return c.String(http.StatusOK, "ready")
	})
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})))
	s.activity = activity.New()
	s.alerts = alerts.New()
	api := &handlers.API{Catalog: cat, NodeTag: cfg.NodeTag, URL: s.URL, Activity: s.activity}
	api.Register(e)
	s.studio = &handlers.Studio{Catalog: cat, Activity: s.activity, Alerts: s.alerts, NodeTag: cfg.NodeTag, URL: s.URL}
	s.studio.Register(e)
	s.hub = NewHub(cfg.Logger, s.studio, s.reg)
	e.GET("/studio/live", s.hub.Serve)
	e.GET("/static/*", echo.WrapHandler(http.StripPrefix("/static/", http.FileServer(http.FS(static.Files)))))
	s.watch()
	s.echo = e
	s.http = &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	return s, nil
}

func validTag(tag string) error {
	if len(tag) < 1 || len(tag) > 4 {
		return fmt.Errorf("node tag %q: use 1 to 4 upper-case letters", tag)
	}
	for _, r := range tag {
		if r < 'A' || r > 'Z' {
			return fmt.Errorf("node tag %q: use 1 to 4 upper-case letters", tag)
		}
	}
	return nil
}

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
		if ev.Type == "deleted" {
			s.activity.Forget(ev.Name)
			s.alerts.ClearDatabase(ev.Name)
		}
		s.hub.Notify("")
	})
	s.alerts.OnChange(func() { s.hub.Notify("") })
	s.activity.OnHiLo(s.hub.Notify)
	s.stop, s.stopped = make(chan struct{}), make(chan struct{})
	go s.tick()
}

func (s *Server) watchDB(db *storage.DB) {
	name := db.Name()
	db.OnCommit(func([]storage.Change) { s.hub.Notify(name) })
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
		for _, db := range s.catalog.All() {
			s.activity.Sample(db.Name(), db.Writes())
			s.hub.Tick(db.Name())
		}
		s.studio.Tick(context.Background())
	}
}

// Handler is the node's HTTP handler (for tests that drive it directly).
func (s *Server) Handler() http.Handler { return s.echo }

// Catalog is the node's databases.
func (s *Server) Catalog() *catalog.Catalog { return s.catalog }

// Serve accepts connections on l until Shutdown.
func (s *Server) Serve(l net.Listener) error {
	if s.cfg.PublicURL == "" {
		u := "http://" + l.Addr().String()
		s.url.Store(&u)
	}
	s.ready.Store(true)
	s.log.Info("rookery node serving", "url", s.URL(), "node_tag", s.cfg.NodeTag, "data_dir", s.cfg.DataDir)
	err := s.http.Serve(l)
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
	err := s.http.Shutdown(ctx)
	s.stopTicker()
	return errors.Join(err, s.catalog.Close())
}

func (s *Server) stopTicker() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
		<-s.stopped
	}
}

// Close releases the databases without serving (for a server that never
// served).
func (s *Server) Close() error {
	s.stopTicker()
	return s.catalog.Close()
}
