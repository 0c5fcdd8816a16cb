package web

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rookerydb/rookery/backend/dberr"
)

// Defaults of the request limits (see Config and README "Limits").
const (
	// DefaultMaxRequestBody is the largest request body: room for a
	// SaveChanges of ~100,000 ordinary documents, or four documents of the
	// largest size, while a request's parsed commands (held in memory until
	// they commit) stay bounded.
	DefaultMaxRequestBody = 128 << 20
	// DefaultMaxImportSize is the largest dump one import request may
	// send: a database of tens of millions of documents.
	DefaultMaxImportSize = 64 << 30
	// DefaultMaxDocumentSize is the largest document a client may store.
	DefaultMaxDocumentSize = 32 << 20
	// DefaultMinDataRate and DefaultMinDataRateGrace are Kestrel's defaults,
	// which RavenDB keeps unless Http.MinDataRateBytesPerSec and
	// Http.MinDataRateGracePeriodInSec are set: 240 bytes/s after 5 s.
	DefaultMinDataRate      = 240
	DefaultMinDataRateGrace = 5 * time.Second
)

// finalFlushBytes is what net/http may still hold in its buffers when a
// handler returns; the last flush gets the time that much data needs at the
// minimum rate.
const finalFlushBytes = 4 << 10

// writePiece is the most a response write hands net/http at once: with the
// default rate a client that stops reading is cut off about 73 s after the
// socket buffers fill, whatever the response's size.
const writePiece = 16 << 10

// requestLimits applies the request-body size limit and the minimum data
// rate of request bodies and responses to every HTTP request except
// websocket handshakes (which manage their own deadlines once hijacked).
//
// The rate is Kestrel's model: once a body starts arriving, after the grace
// period it must have averaged at least rate bytes/s since its start
// (the read deadline is start + grace + bytes/rate); a response write of n
// bytes must finish within grace + n/rate. Deadlines are moved on the
// connection only when the current one is about to run out, so a fast
// transfer sets one every few seconds, not one per Read or Write.
type requestLimits struct {
	maxBody   int64 // bytes; no limit when <= 0
	maxImport int64 // the same for dump imports
	maxAttach int64 // the same for attachment uploads (<= 0: none)
	rate      float64
	grace     time.Duration
	slow      *prometheus.CounterVec // rookery_http_slow_clients_total{direction}
	large     prometheus.Counter     // rookery_http_request_too_large_total
}

func newRequestLimits(cfg Config, reg prometheus.Registerer) *requestLimits {
	l := &requestLimits{maxBody: cfg.MaxRequestBody, maxImport: cfg.MaxImportSize, maxAttach: cfg.MaxAttachmentSize, rate: float64(cfg.MinDataRate), grace: cfg.MinDataRateGrace,
		slow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_http_slow_clients_total",
			Help: "Requests cut off because the client sent its body (read) or took the response (write) slower than --min-data-rate.",
		}, []string{"direction"}),
		large: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_http_request_too_large_total",
			Help: "Requests refused because their body is over --max-request-body.",
		}),
	}
	reg.MustRegister(l.slow, l.large)
	return l
}

func (l *requestLimits) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		raw := c.Response().Writer
		ctl := http.NewResponseController(raw)
		maxBody, flag := l.maxBody, "--max-request-body"
		if isImport(r) {
			maxBody, flag = l.maxImport, "--max-import-size"
		}
		if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/databases/") && strings.HasSuffix(r.URL.Path, "/attachments") {
			maxBody, flag = l.maxAttach, "--max-attachment-size"
		}
		if maxBody > 0 && r.ContentLength > maxBody {
			l.large.Inc()
			return l.tooLarge(r.ContentLength, maxBody, flag)
		}
		if isWebsocket(r) {
			// Hijacked: the websocket library sets its own deadlines, and
			// no body is read.
			return next(c)
		}
		var body *limitedBody
		if r.Body != nil && r.Body != http.NoBody {
			rc := r.Body
			if maxBody > 0 {
				// MaxBytesReader (on net/http's own writer) also makes the
				// server close the connection after the answer instead of
				// reading the rest.
				rc = http.MaxBytesReader(raw, rc, maxBody)
			}
			body = &limitedBody{rc: rc, ctl: ctl, l: l}
			r.Body = body
		}
		var rw *rateWriter
		if l.rate > 0 {
			rw = &rateWriter{ResponseWriter: raw, ctl: ctl, l: l}
			c.Response().Writer = rw
		}
		err := next(c)
		if rw != nil {
			c.Response().Writer = raw
			// What net/http still buffers is flushed after we return.
			_ = ctl.SetWriteDeadline(time.Now().Add(l.grace + l.forBytes(finalFlushBytes)))
		}
		if body != nil {
			switch {
			case body.tooLarge:
				l.large.Inc()
				return l.tooLarge(-1, maxBody, flag)
			case body.tooSlow:
				l.slow.WithLabelValues("read").Inc()
				return l.tooSlowError(body.n, time.Since(body.start))
			}
		}
		if rw != nil && rw.tooSlow {
			l.slow.WithLabelValues("write").Inc()
		}
		return err
	}
}

// isWebsocket is a websocket handshake: a GET with no body (a request
// that only claims to upgrade does not escape the body limits).
func isWebsocket(r *http.Request) bool {
	return r.Method == http.MethodGet && (r.Body == nil || r.Body == http.NoBody) &&
		strings.EqualFold(r.Header.Get("Upgrade"), "websocket") && strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade")
}

// forBytes is how long n bytes take at the minimum rate.
func (l *requestLimits) forBytes(n int64) time.Duration {
	return time.Duration(float64(n) / l.rate * float64(time.Second))
}

func (l *requestLimits) tooLarge(size, limit int64, flag string) error {
	if size > 0 {
		return dberr.New(dberr.TooLarge, "The request body is %s; the largest request body this server accepts is %s (%s). Nothing was stored.", formatBytes(size), formatBytes(limit), flag)
	}
	return dberr.New(dberr.TooLarge, "The request body is larger than %s, the largest request body this server accepts (%s). Nothing was stored.", formatBytes(limit), flag)
}

// isImport is a dump import (POST /databases/{db}/smuggler/import) or a
// bulk insert (…/bulk_insert, a stream of documents), whose body is held to
// --max-import-size instead of --max-request-body.
func isImport(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/databases/") &&
		(strings.HasSuffix(r.URL.Path, "/smuggler/import") || strings.HasSuffix(r.URL.Path, "/bulk_insert"))
}

func (l *requestLimits) tooSlowError(n int64, took time.Duration) error {
	return echo.NewHTTPError(http.StatusRequestTimeout, fmt.Sprintf("The request body arrived too slowly: %d bytes in %.1f s, below the minimum of %.0f bytes/s after %s (--min-data-rate, --min-data-rate-grace). Nothing was stored.",
		n, took.Seconds(), l.rate, l.grace))
}

// formatBytes writes a size the way the flags take it (32MiB, 1.5GiB).
func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// limitedBody is a request body under the size limit and the minimum rate.
type limitedBody struct {
	rc       io.ReadCloser
	ctl      *http.ResponseController
	l        *requestLimits
	start    time.Time // first Read
	deadline time.Time // the read deadline set on the connection
	n        int64
	done     bool
	tooLarge bool
	tooSlow  bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.done {
		return b.rc.Read(p)
	}
	rate := b.l.rate > 0
	if rate && b.start.IsZero() {
		// The grace period starts when the handler first reads.
		b.start = time.Now()
		b.setDeadline(b.start.Add(b.l.grace))
	}
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if err != nil {
		b.done = true
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			b.tooLarge = true
		case isTimeout(err):
			b.tooSlow = rate
		}
		if rate && err == io.EOF {
			// The whole body is in. net/http now reads in the background
			// to notice a client that goes away; our deadline must not
			// cut that read (it would cancel the request's context).
			b.setDeadline(time.Time{})
		}
		return n, err
	}
	if rate {
		now := time.Now()
		if b.deadline.Sub(now) < b.l.grace/2 {
			// Running out: move the deadline to what the bytes so far
			// have earned, if that is later by a useful step.
			target := b.start.Add(b.l.grace + b.l.forBytes(b.n))
			if target.Sub(b.deadline) >= min(time.Second, b.l.grace/2) {
				b.setDeadline(target)
			}
		}
	}
	return n, err
}

func (b *limitedBody) setDeadline(t time.Time) {
	b.deadline = t
	_ = b.ctl.SetReadDeadline(t)
}

func (b *limitedBody) Close() error { return b.rc.Close() }

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// rateWriter gives each response Write the time its bytes need at the
// minimum rate, plus the grace period.
type rateWriter struct {
	http.ResponseWriter
	ctl      *http.ResponseController
	l        *requestLimits
	deadline time.Time
	tooSlow  bool
}

func (w *rateWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		// A large write goes out in pieces, each with its own time, so a
		// client that stops reading is noticed within grace +
		// writePiece/rate instead of grace + len(p)/rate.
		piece := p[:min(len(p), writePiece)]
		now := time.Now()
		need := now.Add(w.l.grace + w.l.forBytes(int64(len(piece))))
		// Keep the current deadline while it leaves at least half the
		// grace beyond what this piece needs.
		if w.deadline.Before(need.Add(-w.l.grace / 2)) {
			w.deadline = need
			_ = w.ctl.SetWriteDeadline(need)
		}
		n, err := w.ResponseWriter.Write(piece)
		written += n
		if err != nil {
			if isTimeout(err) {
				w.tooSlow = true
			}
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// Unwrap lets http.ResponseController (Flush, deadlines) reach net/http's
// writer.
func (w *rateWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
