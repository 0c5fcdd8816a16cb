package web

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rookerydb/rookery/views"
)

// Renderer renders a page's live regions.
type Renderer interface {
	LiveFragments(ctx context.Context, page string, q url.Values) ([]views.Fragment, error)
	WantsTicks(page string) bool
}

// Hub keeps one websocket per open studio page and pushes fresh fragments
// when something the page shows changes. Writers only flip a flag
// (Notify never blocks); each connection renders at most once per
// minInterval, so a burst of 100k writes costs a handful of messages; and a
// browser that does not read within writeTimeout is dropped.
type Hub struct {
	log          *slog.Logger
	render       Renderer
	minInterval  time.Duration
	writeTimeout time.Duration

	// reauthorize, when set, checks the page's caller again before each
	// update and gives the context to render with (its identity now).
	reauthorize func(ctx context.Context, r *http.Request) (context.Context, error)

	mu      sync.Mutex
	clients map[*liveClient]struct{}

	connected prometheus.Gauge
	sent      prometheus.Counter
	dropped   prometheus.Counter
}

type liveClient struct {
	page  string
	db    string // lower-cased; "" for server-wide pages
	q     url.Values
	ticks bool
	dirty chan struct{}
}

// NewHub makes a hub; its metrics are registered on reg.
func NewHub(log *slog.Logger, r Renderer, reg prometheus.Registerer) *Hub {
	h := &Hub{
		log: log, render: r, minInterval: 250 * time.Millisecond, writeTimeout: 5 * time.Second,
		clients: map[*liveClient]struct{}{},
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rookery_studio_live_connections", Help: "Open studio live-update websockets.",
		}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_studio_live_messages_total", Help: "Live-update messages sent to studio pages.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_studio_live_dropped_total", Help: "Studio pages dropped because they did not keep up or failed.",
		}),
	}
	reg.MustRegister(h.connected, h.sent, h.dropped)
	return h
}

func (c *liveClient) wake() {
	select {
	case c.dirty <- struct{}{}:
	default: // already pending: coalesced
	}
}

// Notify marks every page showing database db (and every server-wide page)
// as needing a refresh. db "" wakes every page.
func (h *Hub) Notify(db string) {
	db = strings.ToLower(db)
	h.mu.Lock()
	for c := range h.clients {
		if db == "" || c.db == "" || c.db == db {
			c.wake()
		}
	}
	h.mu.Unlock()
}

// Tick wakes the pages that show per-second figures (rates, sparklines) of
// database db, and the server-wide pages that want ticks.
func (h *Hub) Tick(db string) {
	db = strings.ToLower(db)
	h.mu.Lock()
	for c := range h.clients {
		if c.ticks && (c.db == "" || c.db == db) {
			c.wake()
		}
	}
	h.mu.Unlock()
}

// Clients is how many pages are connected.
func (h *Hub) Clients() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

type wireFragment struct {
	ID   string `json:"id"`
	HTML string `json:"html"`
}

// Serve upgrades GET /studio/live?page=…&db=…&<page query> to a websocket.
func (h *Hub) Serve(c echo.Context) error {
	q := c.QueryParams()
	page := q.Get("page")
	if page == "" {
		return echo.NewHTTPError(400, "page is required")
	}
	// coder/websocket refuses cross-origin upgrades by default.
	conn, err := websocket.Accept(c.Response(), c.Request(), nil)
	if err != nil {
		return nil // Accept has answered
	}
	defer conn.CloseNow()
	cl := &liveClient{page: page, db: strings.ToLower(q.Get("db")), q: q, ticks: h.render.WantsTicks(page), dirty: make(chan struct{}, 1)}
	h.mu.Lock()
	h.clients[cl] = struct{}{}
	h.mu.Unlock()
	h.connected.Inc()
	defer func() {
		h.mu.Lock()
		delete(h.clients, cl)
		h.mu.Unlock()
		h.connected.Dec()
	}()
	// The browser sends nothing; CloseRead handles its close and pings.
	ctx := conn.CloseRead(c.Request().Context())
	cl.wake() // the page may have changed between its render and now
	ping := time.NewTicker(30 * time.Second)
	defer ping.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ping.C:
			pctx, cancel := context.WithTimeout(ctx, h.writeTimeout)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				h.dropped.Inc()
				return nil
			}
			continue
		case <-cl.dirty:
		}
		if wait := h.minInterval - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
		// Drain a wake-up that arrived while waiting: this render covers it.
		select {
		case <-cl.dirty:
		default:
		}
		rctx := ctx
		if h.reauthorize != nil {
			if rctx, err = h.reauthorize(ctx, c.Request()); err != nil {
				// Revoked, or no longer allowed this page: no more updates.
				conn.Close(websocket.StatusPolicyViolation, "access refused")
				return nil
			}
		}
		msg, err := h.message(rctx, cl)
		if err != nil {
			h.log.Warn("live render failed", "page", cl.page, "error", err)
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, h.writeTimeout)
		err = conn.Write(wctx, websocket.MessageText, msg)
		cancel()
		if err != nil {
			h.dropped.Inc()
			conn.Close(websocket.StatusPolicyViolation, "too slow")
			return nil
		}
		h.sent.Inc()
		last = time.Now()
	}
}

func (h *Hub) message(ctx context.Context, cl *liveClient) ([]byte, error) {
	frags, err := h.render.LiveFragments(ctx, cl.page, cl.q)
	if err != nil && len(frags) == 0 {
		return nil, err
	}
	out := struct {
		Fragments []wireFragment `json:"fragments"`
	}{}
	var buf bytes.Buffer
	for _, f := range frags {
		buf.Reset()
		if err := f.C.Render(ctx, &buf); err != nil {
			return nil, err
		}
		out.Fragments = append(out.Fragments, wireFragment{ID: f.ID, HTML: buf.String()})
	}
	return json.Marshal(out)
}
