package web

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rookerydb/rookery/handlers/api"
)

// serverHeaders adds the headers every RavenDB response carries.
func serverHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("Raven-Server-Version", api.ServerVersion)
		return next(c)
	}
}

// recoverMiddleware turns a panic into a 500 envelope; the stack goes to the
// log, never to the client.
func (s *Server) recoverMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.log.Error("panic in handler", "path", c.Request().URL.Path, "panic", r, "stack", string(debug.Stack()))
				err = fmt.Errorf("internal error: %v", r)
			}
		}()
		return next(c)
	}
}

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(r prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_http_requests_total",
			Help: "HTTP requests, by method, route and status code.",
		}, []string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rookery_http_request_duration_seconds",
			Help:    "HTTP request duration, by method and route.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"method", "route"}),
	}
	r.MustRegister(m.requests, m.duration)
	return m
}

// observe handles a request's error once (through the error handler),
// then records its metrics and, for failures or at debug level, logs it.
func (m *httpMetrics) observe(log *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			if err := next(c); err != nil {
				c.Error(err)
			}
			elapsed := time.Since(start)
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			status := c.Response().Status
			m.requests.WithLabelValues(c.Request().Method, route, strconv.Itoa(status)).Inc()
			m.duration.WithLabelValues(c.Request().Method, route).Observe(elapsed.Seconds())
			level := slog.LevelDebug
			if status >= 500 {
				level = slog.LevelWarn
			}
			if log.Enabled(c.Request().Context(), level) {
				log.Log(c.Request().Context(), level, "request",
					"method", c.Request().Method, "path", c.Request().URL.Path, "status", status, "duration", elapsed)
			}
			return nil
		}
	}
}
