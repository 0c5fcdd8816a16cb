package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rookerydb/rookery/backend/auth"
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
// minInterval, so a burst of 100k writes costs a handful of messages; a
// connection is sent only the regions whose rendered bytes changed since
// its previous message, and nothing when none did; and a browser that
// does not read within writeTimeout is dropped.
type Hub struct {
	log          *slog.Logger
	render       Renderer
	minInterval  time.Duration
	writeTimeout time.Duration
	// maxClients caps the live pages (0: no cap); a page over it gets 503
	// and stays a static page until its script reconnects.
	maxClients int
	// maxMessage bounds one message (all of a page's fragments, encoded);
	// a fragment that does not fit is left out, and the page keeps what it
	// shows there until the next render that fits or a reload.
	maxMessage int
	// renders bounds how many pages render at once, so a wake-up of every
	// page holds at most cap(renders) renders in memory.
	renders chan struct{}

	// resendUnchanged sends every region in every message, changed or not
	// (what the hub did before it compared): only the bench sets it, for
	// its baseline.
	resendUnchanged atomic.Bool
	// seed hashes rendered regions for the per-connection comparison.
	seed maphash.Seed

	// reauthorize, when set, checks the page's caller again before each
	// update and gives the context to render with (its identity now).
	reauthorize func(ctx context.Context, r *http.Request) (context.Context, error)

	mu      sync.Mutex
	clients map[*liveClient]struct{}
	slots   int            // clients plus upgrades in progress
	keys    map[string]int // live pages by key (page and query)
	// gen counts wake-ups (Notify, Tick); a render that started at gen g
	// shows everything notified up to g.
	gen atomic.Uint64
	// shared is the latest render of each key: pages showing the same
	// thing share one render and one message instead of a copy each.
	shared map[string]*liveRender

	connected prometheus.Gauge
	sent      prometheus.Counter
	dropped   prometheus.Counter
	refused   prometheus.Counter
	oversized prometheus.Counter
}

// DefaultMaxLivePages is the default cap on live studio pages: far more
// than people keep open, while the worst case (every page stalled with a
// full message in flight) stays near defaultMaxLiveMessage × 512 = 512 MiB.
const DefaultMaxLivePages = 512

// defaultMaxLiveMessage bounds one live message: the largest regions (a
// 50-row grid of 60-character cells, the databases table) render to tens
// of kilobytes.
const defaultMaxLiveMessage = 1 << 20

// liveRender is one render of a key, shared by every page of that key
// woken no later than gen. Each page builds its own message from it: the
// items whose hash differs from what that page was last sent.
type liveRender struct {
	gen   uint64
	done  chan struct{}
	items []liveItem
	err   error
}

// liveItem is one rendered region, JSON-encoded as it goes on the wire,
// and the hash of those bytes.
type liveItem struct {
	id   string
	hash uint64
	json []byte
}

type liveClient struct {
	key   string
	page  string
	db    string // lower-cased; "" for server-wide pages
	q     url.Values
	ticks bool
	dirty chan struct{}
	// sent is the hash of each region as this page was last sent it; only
	// Serve's loop touches it. Empty on connect: the first message carries
	// every region.
	sent map[string]uint64
}

// NewHub makes a hub; its metrics are registered on reg.
func NewHub(log *slog.Logger, r Renderer, reg prometheus.Registerer) *Hub {
	h := &Hub{
		log: log, render: r, minInterval: 250 * time.Millisecond, writeTimeout: 5 * time.Second,
		maxClients: DefaultMaxLivePages, maxMessage: defaultMaxLiveMessage,
		renders: make(chan struct{}, max(2, runtime.GOMAXPROCS(0))), seed: maphash.MakeSeed(),
		clients: map[*liveClient]struct{}{}, keys: map[string]int{}, shared: map[string]*liveRender{},
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rookery_studio_live_connections", Help: "Open studio live-update websockets.",
		}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_studio_live_messages_total", Help: "Live-update messages sent to studio pages.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_studio_live_dropped_total", Help: "Studio pages dropped because they did not keep up or failed.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_studio_live_refused_total", Help: "Studio pages refused a live connection because --max-live-pages were open.",
		}),
		oversized: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_studio_live_oversized_total", Help: "Live fragments left out of a message because they did not fit its size bound.",
		}),
	}
	reg.MustRegister(h.connected, h.sent, h.dropped, h.refused, h.oversized)
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
	h.gen.Add(1)
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
	h.gen.Add(1)
	h.mu.Lock()
	for c := range h.clients {
		if c.ticks && (c.db == "" || c.db == db) {
			c.wake()
		}
	}
	h.mu.Unlock()
}

// ResendUnchanged makes every message carry every region of its page,
// changed or not, as the hub did before it compared. For the bench's
// baseline only; call it before pages connect.
func (h *Hub) ResendUnchanged(on bool) { h.resendUnchanged.Store(on) }

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
	h.mu.Lock()
	if h.maxClients > 0 && h.slots >= h.maxClients {
		h.mu.Unlock()
		h.refused.Inc()
		return echo.NewHTTPError(http.StatusServiceUnavailable, fmt.Sprintf("%d studio pages are already live (--max-live-pages); this one stays static", h.maxClients))
	}
	h.slots++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.slots--
		h.mu.Unlock()
	}()
	// coder/websocket refuses cross-origin upgrades by default.
	conn, err := websocket.Accept(c.Response(), c.Request(), nil)
	if err != nil {
		return nil // Accept has answered
	}
	defer conn.CloseNow()
	// Pages share a render only when they show the same thing to the same
	// caller: what a page offers depends on who looks at it.
	cl := &liveClient{key: q.Encode() + "|" + viewerKey(c.Request()), page: page, db: strings.ToLower(q.Get("db")), q: q, ticks: h.render.WantsTicks(page), dirty: make(chan struct{}, 1), sent: map[string]uint64{}}
	h.mu.Lock()
	h.clients[cl] = struct{}{}
	h.keys[cl.key]++
	h.mu.Unlock()
	h.connected.Inc()
	defer func() {
		h.mu.Lock()
		delete(h.clients, cl)
		if h.keys[cl.key]--; h.keys[cl.key] == 0 {
			delete(h.keys, cl.key)
			delete(h.shared, cl.key)
		}
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
		items, err := h.sharedRender(rctx, cl)
		last = time.Now()
		if err != nil {
			h.log.Warn("live render failed", "page", cl.page, "error", err)
			continue
		}
		msg, changed := h.diff(cl, items)
		if msg == nil {
			continue // nothing this page shows changed: no message at all
		}
		wctx, cancel := context.WithTimeout(ctx, h.writeTimeout)
		err = conn.Write(wctx, websocket.MessageText, msg)
		cancel()
		if err != nil {
			h.dropped.Inc()
			conn.Close(websocket.StatusPolicyViolation, "too slow")
			return nil
		}
		for _, it := range changed {
			cl.sent[it.id] = it.hash
		}
		h.sent.Inc()
	}
}

// diff builds the page's message from a render: the regions whose bytes
// differ from what the page was last sent (all of them with
// resendUnchanged), or nil when there are none. The render's items fit
// maxMessage together, so any subset does.
func (h *Hub) diff(cl *liveClient, items []liveItem) ([]byte, []liveItem) {
	var changed []liveItem
	size := 0
	all := h.resendUnchanged.Load()
	for _, it := range items {
		if sent, ok := cl.sent[it.id]; all || !ok || sent != it.hash {
			changed = append(changed, it)
			size += len(it.json) + 1
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	out := make([]byte, 0, size+len(`{"fragments":[]}`))
	out = append(out, `{"fragments":[`...)
	for i, it := range changed {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, it.json...)
	}
	return append(out, "]}"...), changed
}

// errFragmentFull stops rendering a fragment that outgrew the message.
var errFragmentFull = errors.New("live fragment over the message size bound")

// boundedBuffer is a bytes.Buffer that refuses to grow past max.
type boundedBuffer struct {
	bytes.Buffer
	max int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, errFragmentFull
	}
	return b.Buffer.Write(p)
}

// sharedRender is the page's render: the render of its key that started
// after the page's last wake-up, if one did (another page of the same key
// is rendering it or has), else a new one.
func (h *Hub) sharedRender(ctx context.Context, cl *liveClient) ([]liveItem, error) {
	g := h.gen.Load()
	h.mu.Lock()
	r := h.shared[cl.key]
	lead := r == nil || r.gen < g
	if lead {
		r = &liveRender{gen: g, done: make(chan struct{})}
		if h.keys[cl.key] > 0 {
			h.shared[cl.key] = r
		}
	}
	h.mu.Unlock()
	if lead {
		// Not the page's own context: the pages sharing this render must
		// get it even if the page that started it goes away.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		r.items, r.err = h.render1(rctx, cl)
		cancel()
		close(r.done)
	}
	select {
	case <-r.done:
		return r.items, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// render1 renders a page's fragments, each encoded as it goes on the wire;
// together they fit one message of at most maxMessage bytes. At most
// cap(renders) pages render at once.
func (h *Hub) render1(ctx context.Context, cl *liveClient) ([]liveItem, error) {
	select {
	case h.renders <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-h.renders }()
	frags, err := h.render.LiveFragments(ctx, cl.page, cl.q)
	if err != nil && len(frags) == 0 {
		return nil, err
	}
	limit := h.maxMessage
	if limit <= 0 {
		limit = math.MaxInt
	}
	used := len(`{"fragments":[]}`)
	items := make([]liveItem, 0, len(frags))
	html := &boundedBuffer{}
	var enc bytes.Buffer
	e := json.NewEncoder(&enc)
	e.SetEscapeHTML(false) // markup stays markup: \u003c would triple it
	for _, f := range frags {
		// What is left for this fragment's markup; JSON escaping only
		// adds to it, which the check after encoding catches.
		html.Reset()
		html.max = limit - used - len(f.ID) - 32
		if html.max <= 0 {
			h.oversize(cl, f.ID)
			continue
		}
		if err := f.C.Render(ctx, html); err != nil {
			if errors.Is(err, errFragmentFull) {
				h.oversize(cl, f.ID)
				continue
			}
			return nil, err
		}
		enc.Reset()
		if err := e.Encode(wireFragment{ID: f.ID, HTML: html.String()}); err != nil {
			return nil, err
		}
		item := bytes.TrimRight(enc.Bytes(), "\n")
		if used+len(item)+1 > limit {
			h.oversize(cl, f.ID)
			continue
		}
		used += len(item) + 1
		items = append(items, liveItem{id: f.ID, hash: maphash.Bytes(h.seed, item), json: bytes.Clone(item)})
	}
	return items, nil
}

func (h *Hub) oversize(cl *liveClient, id string) {
	h.oversized.Inc()
	h.log.Debug("live fragment left out: over the message size bound", "page", cl.page, "fragment", id, "bound", h.maxMessage)
}

// viewerKey names who a live page is rendered for (its certificate, or
// the unsecured admin every caller of an unsecured node is).
func viewerKey(r *http.Request) string {
	id := auth.FromContext(r.Context())
	if id == nil {
		return "-"
	}
	return id.Thumbprint + "/" + string(id.Clearance) + "/" + id.Name
}
