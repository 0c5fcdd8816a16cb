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

	"github.com/rookerydb/rookery/backend/catalog"
	"github.com/rookerydb/rookery/backend/metrics"
	"github.com/rookerydb/rookery/handlers"
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
	api := &handlers.API{Catalog: cat, NodeTag: cfg.NodeTag, URL: s.URL}
	api.Register(e)
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
	return errors.Join(err, s.catalog.Close())
}

// Close releases the databases without serving (for a server that never
// served).
func (s *Server) Close() error { return s.catalog.Close() }
