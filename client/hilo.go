package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// lastRangeAtFormat is how the client writes lastRangeAt back to the server.
const lastRangeAtFormat = "2006-01-02T15:04:05.0000000Z"

// hiloEpoch is lastRangeAt before the first range.
const hiloEpoch = "1970-01-01T00:00:00.0000000Z"

// hiloRequest is what the client tells the server when it asks for a range.
type hiloRequest struct {
	Tag           string
	Separator     string
	LastBatchSize int64
	LastRangeAt   string // lastRangeAtFormat
	LastMax       int64
}

// hiloResult is the server's answer (GET hilo/next, 201).
type hiloResult struct {
	Prefix      string `json:"Prefix"`
	Low         int64  `json:"Low"`
	High        int64  `json:"High"`
	LastSize    int64  `json:"LastSize"`
	ServerTag   string `json:"ServerTag"`
	LastRangeAt string `json:"LastRangeAt"`
}

// rangeFetcher asks the server for the next range.
type rangeFetcher func(ctx context.Context, req hiloRequest) (hiloResult, error)

// hiloRange is one reserved range [low, high]; next is the last number
// handed out (low-1 before the first).
type hiloRange struct {
	next   atomic.Int64
	low    int64
	high   int64
	prefix string
	suffix string // "-" + server tag
	size   int64
	at     string // LastRangeAt of this range, in lastRangeAtFormat
}

// hiloGenerator hands out ids for one tag. The fast path is one atomic load
// and one atomic add; an exhausted range is replaced by exactly one fetch,
// which every caller that needs it waits for.
type hiloGenerator struct {
	tag   string
	sep   string
	fetch rangeFetcher

	cur atomic.Pointer[hiloRange]

	mu     sync.Mutex
	flight *hiloFlight // the fetch in progress, if any
}

type hiloFlight struct {
	done chan struct{}
	err  error
}

func newHiLoGenerator(tag, sep string, fetch rangeFetcher) *hiloGenerator {
	return &hiloGenerator{tag: tag, sep: sep, fetch: fetch}
}

// nextID returns the next id, "prefix + n + '-' + serverTag".
func (g *hiloGenerator) nextID(ctx context.Context) (string, error) {
	if r := g.cur.Load(); r != nil {
		if n := r.next.Add(1); n <= r.high {
			return r.format(n), nil
		}
	}
	n, r, err := g.slow(ctx)
	if err != nil {
		return "", err
	}
	return r.format(n), nil
}

// format builds prefix + n + suffix with a single allocation.
func (r *hiloRange) format(n int64) string {
	var buf [96]byte
	b := buf[:0]
	if len(r.prefix)+len(r.suffix)+20 > len(buf) {
		b = make([]byte, 0, len(r.prefix)+len(r.suffix)+20)
	}
	b = append(b, r.prefix...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, r.suffix...)
	return string(b)
}

// next returns the next number and the range it belongs to.
func (g *hiloGenerator) next(ctx context.Context) (int64, *hiloRange, error) {
	if r := g.cur.Load(); r != nil {
		if n := r.next.Add(1); n <= r.high {
			return n, r, nil
		}
	}
	return g.slow(ctx)
}

func (g *hiloGenerator) slow(ctx context.Context) (int64, *hiloRange, error) {
	for {
		r := g.cur.Load()
		if r != nil {
			if n := r.next.Add(1); n <= r.high {
				return n, r, nil
			}
		}
		g.mu.Lock()
		if g.cur.Load() != r {
			// Someone installed a new range meanwhile.
			g.mu.Unlock()
			continue
		}
		if f := g.flight; f != nil {
			g.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return 0, nil, ctx.Err()
			}
			if f.err != nil {
				return 0, nil, f.err
			}
			continue
		}
		f := &hiloFlight{done: make(chan struct{})}
		g.flight = f
		g.mu.Unlock()

		nr, err := g.fetchNext(ctx, r)

		g.mu.Lock()
		if err == nil {
			g.cur.Store(nr)
		}
		f.err = err
		g.flight = nil
		g.mu.Unlock()
		close(f.done)
		if err != nil {
			return 0, nil, err
		}
	}
}

// fetchNext asks for the range after prev (nil before the first).
func (g *hiloGenerator) fetchNext(ctx context.Context, prev *hiloRange) (*hiloRange, error) {
	req := hiloRequest{Tag: g.tag, Separator: g.sep, LastRangeAt: hiloEpoch}
	if prev != nil {
		req.LastBatchSize = prev.size
		req.LastRangeAt = prev.at
		req.LastMax = prev.high
	}
	res, err := g.fetch(ctx, req)
	if err != nil {
		return nil, err
	}
	if res.High < res.Low || res.Low <= 0 {
		return nil, fmt.Errorf("rookery: hilo/next for %q returned an empty range [%d, %d]", g.tag, res.Low, res.High)
	}
	nr := &hiloRange{
		low:    res.Low,
		high:   res.High,
		prefix: res.Prefix,
		suffix: "-" + res.ServerTag,
		size:   res.LastSize,
		at:     formatRangeAt(res.LastRangeAt),
	}
	if nr.prefix == "" {
		nr.prefix = g.tag + g.sep
	}
	if nr.size <= 0 {
		nr.size = res.High - res.Low + 1
	}
	nr.next.Store(res.Low - 1)
	return nr, nil
}

// returnInfo reports the current range's top and the last number used, for
// hilo/return. ok is false when no range was ever fetched.
func (g *hiloGenerator) returnInfo() (end, last int64, ok bool) {
	r := g.cur.Load()
	if r == nil {
		return 0, 0, false
	}
	last = r.next.Load()
	if last > r.high {
		last = r.high
	}
	return r.high, last, true
}

// formatRangeAt re-serialises the server's LastRangeAt; unparseable values
// are sent back as they came.
func formatRangeAt(s string) string {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.9999999", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC().Format(lastRangeAtFormat)
		}
	}
	if s == "" {
		return hiloEpoch
	}
	return s
}

// hiloQuery builds the query string of GET hilo/next.
func hiloQuery(r hiloRequest) string {
	sep := r.Separator
	if sep != "/" {
		sep = url.QueryEscape(sep)
	}
	return "lastBatchSize=" + strconv.FormatInt(r.LastBatchSize, 10) +
		"&tag=" + url.QueryEscape(r.Tag) +
		"&lastRangeAt=" + url.QueryEscape(r.LastRangeAt) +
		"&identityPartsSeparator=" + sep +
		"&lastMax=" + strconv.FormatInt(r.LastMax, 10)
}

// hiloIDs holds the generators of one store, one per tag.
type hiloIDs struct {
	sep   string
	fetch rangeFetcher
	gens  sync.Map // tag → *hiloGenerator
}

func (h *hiloIDs) generator(tag string) *hiloGenerator {
	if g, ok := h.gens.Load(tag); ok {
		return g.(*hiloGenerator)
	}
	g, _ := h.gens.LoadOrStore(tag, newHiLoGenerator(tag, h.sep, h.fetch))
	return g.(*hiloGenerator)
}

// serverRangeFetcher returns a fetcher that asks the database over HTTP and
// counts its requests.
func serverRangeFetcher(ex *RequestExecutor, counter *atomic.Int64) rangeFetcher {
	return func(ctx context.Context, hr hiloRequest) (hiloResult, error) {
		counter.Add(1)
		resp, err := ex.execute(ctx, &request{
			method: http.MethodGet, path: "/hilo/next", query: hiloQuery(hr), dbScoped: true,
		})
		if err != nil {
			return hiloResult{}, err
		}
		if resp.status < 200 || resp.status >= 300 {
			return hiloResult{}, fmt.Errorf("rookery: hilo/next for %q: unexpected status %d", hr.Tag, resp.status)
		}
		var res hiloResult
		if err := json.Unmarshal(resp.body, &res); err != nil {
			return hiloResult{}, fmt.Errorf("rookery: hilo/next for %q: %w", hr.Tag, err)
		}
		return res, nil
	}
}
