package studio

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/history"
	"github.com/rookerydb/rookery/handlers/httpx"
)

// historyPeerTimeout bounds how long a chart's request waits for another
// node's series: they are asked concurrently, so a chart never waits
// longer, and a node already known to be unreachable is not asked.
const historyPeerTimeout = time.Second

// historyPeerLimit bounds one node's answer (an hour of a few hundred
// series is about a megabyte).
const historyPeerLimit = 16 << 20

// historyMaxTimes bounds the merged window's samples (several nodes'
// times that do not line up).
const historyMaxTimes = 3 * history.MaxSlots

// chartSeries is one series as the charts get it: its figures and the
// label of its line.
type chartSeries struct {
	history.Series
	Label string
}

// chartNode says whether a node's series are in the answer.
type chartNode struct {
	Tag       string
	Self      bool `json:",omitempty"`
	Reachable bool
	Problem   string `json:",omitempty"`
}

// chartData is the answer of GET /studio/history.
type chartData struct {
	Self     string
	Interval int64
	Times    []int64
	Series   []chartSeries
	// Nodes are the nodes asked (scope=cluster) or this node alone.
	Nodes []chartNode
}

// seriesLabel names a series' line in a chart legend.
func seriesLabel(k history.Key) string {
	switch k.Kind {
	case history.KindReplItems, history.KindReplSeconds:
		return k.Node + " → " + k.Peer + " · " + k.Database
	case history.KindSubBacklog:
		return k.Name + " · " + k.Database
	}
	return k.Database + " on " + k.Node
}

// serveHistory serves GET /studio/history?kind=&since=&db=&scope=cluster:
// the chart series of this node (and, with scope=cluster, of every other
// node, asked over /internal/history), only of databases the caller may
// read. A node that does not answer is listed as unreachable and its
// series are absent, never zero.
func (s *Studio) serveHistory(c echo.Context) error {
	if s.History == nil {
		return c.JSON(http.StatusOK, chartData{Self: s.NodeTag, Times: []int64{}, Series: []chartSeries{}, Nodes: []chartNode{}})
	}
	since, match, err := history.ParseQuery(c.QueryParam("since"), c.QueryParam("kind"))
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	id := auth.FromContext(ctx)
	db := c.QueryParam("db")
	allowed := func(k history.Key) bool {
		if match != nil && !match(k) {
			return false
		}
		if db != "" && !strings.EqualFold(k.Database, db) {
			return false
		}
		return id.Allows(auth.DatabaseRead, k.Database)
	}
	windows := []history.Window{s.History.Window(since, allowed)}
	nodes := []chartNode{{Tag: s.NodeTag, Self: true, Reachable: true}}
	if c.QueryParam("scope") == "cluster" && s.Cluster != nil {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, n := range s.Cluster.Nodes() {
			if n.Tag == s.NodeTag {
				continue
			}
			cn := chartNode{Tag: n.Tag}
			if st := s.reach().State(n.Tag); st.Checked && !st.Reachable {
				cn.Problem = "unreachable since " + st.Since.UTC().Format(time.TimeOnly) + " UTC: " + st.Problem
				mu.Lock()
				nodes = append(nodes, cn)
				mu.Unlock()
				continue
			}
			if n.URL == "" {
				cn.Problem = "no HTTP URL known yet"
				mu.Lock()
				nodes = append(nodes, cn)
				mu.Unlock()
				continue
			}
			wg.Add(1)
			go func(cn chartNode, base string) {
				defer wg.Done()
				w, err := s.peerHistory(ctx, base, c.QueryParam("since"), c.QueryParam("kind"))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					cn.Problem = err.Error()
				} else {
					cn.Reachable = true
					// Keep only the series this caller may see, and only the
					// node's own figures.
					kept := w.Series[:0]
					for _, sr := range w.Series {
						if sr.Node == cn.Tag && allowed(sr.Key) {
							kept = append(kept, sr)
						}
					}
					w.Series = kept
					windows = append(windows, w)
				}
				nodes = append(nodes, cn)
			}(cn, n.URL)
		}
		wg.Wait()
	}
	w := windows[0]
	if len(windows) > 1 {
		w = history.Merge(historyMaxTimes, windows...)
	}
	out := chartData{Self: s.NodeTag, Interval: w.Interval, Times: w.Times, Series: make([]chartSeries, 0, len(w.Series)), Nodes: nodes}
	if out.Interval == 0 {
		out.Interval = int64(s.History.Options().Interval / time.Second)
	}
	for _, sr := range w.Series {
		out.Series = append(out.Series, chartSeries{Series: sr, Label: seriesLabel(sr.Key)})
	}
	sortNodes(out.Nodes)
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, out)
}

func sortNodes(ns []chartNode) {
	for i := 1; i < len(ns); i++ {
		for j := i; j > 0 && ns[j].Tag < ns[j-1].Tag; j-- {
			ns[j], ns[j-1] = ns[j-1], ns[j]
		}
	}
}

// peerHistory asks another node for its series.
func (s *Studio) peerHistory(ctx context.Context, base, since, kind string) (history.Window, error) {
	var w history.Window
	ctx, cancel := context.WithTimeout(ctx, historyPeerTimeout)
	defer cancel()
	q := url.Values{}
	if since != "" {
		q.Set("since", since)
	}
	if kind != "" {
		q.Set("kind", kind)
	}
	err := httpx.GetJSON(ctx, s.peers(), strings.TrimRight(base, "/")+"/internal/history?"+q.Encode(), historyPeerLimit, &w)
	return w, err
}

// reach is the node's record of the other nodes' reachability (Register
// makes an empty one when the studio was built without it).
func (s *Studio) reach() *history.Reachability { return s.Reach }

// probeNodes asks every other node of the cluster for its Raft status,
// concurrently, each for at most peerStatusTimeout, and records who
// answered (Studio.Tick starts it once a second; a round still running is
// not doubled).
func (s *Studio) probeNodes(ctx context.Context) {
	if s.Cluster == nil || !s.probing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.probing.Store(false)
		nodes := s.Cluster.Nodes()
		keep := map[string]bool{}
		var wg sync.WaitGroup
		for _, n := range nodes {
			keep[n.Tag] = true
			if n.Tag == s.NodeTag {
				continue
			}
			wg.Add(1)
			go func(tag, base string) {
				defer wg.Done()
				if base == "" {
					s.reach().Observe(tag, false, "", "no HTTP URL known yet", time.Now())
					return
				}
				st, err := fetchPeer(ctx, s.peers(), base)
				if err != nil {
					s.reach().Observe(tag, false, "", err.Error(), time.Now())
					return
				}
				s.reach().Observe(tag, true, strings.ToLower(st.State), "", time.Now())
			}(n.Tag, n.URL)
		}
		wg.Wait()
		if len(nodes) > 0 {
			s.reach().Forget(keep)
		}
	}()
}
