// Package web assembles the Rookery node: the Echo router, middleware, error
// mapping and the lifecycle of the databases behind it.
package web

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// Config is everything a node needs to start.
type Config struct {
	// HTTPAddr is the listen address, e.g. 127.0.0.1:8080.
	HTTPAddr string
	// DataDir holds one SQLite file per database.
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
	cfg  Config
	echo *echo.Echo
	http *http.Server
	log  *slog.Logger
	url  string
}

// New prepares a node. It opens nothing on the network until Serve.
func New(cfg Config) (*Server, error) {
	if cfg.NodeTag == "" {
		cfg.NodeTag = "A"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	s.echo = e
	s.http = &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	return s, nil
}

// Serve accepts connections on l until Shutdown.
func (s *Server) Serve(l net.Listener) error {
	if s.cfg.PublicURL == "" {
		s.url = "http://" + l.Addr().String()
	} else {
		s.url = s.cfg.PublicURL
	}
	err := s.http.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// URL is the base URL clients use for this node.
func (s *Server) URL() string { return s.url }

// Shutdown stops accepting requests, lets in-flight ones finish and closes
// the databases.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.http.Shutdown(ctx)
}
