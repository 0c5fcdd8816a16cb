package studio

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/audit"
	"github.com/rookerydb/rookery/handlers/httpx"
	"github.com/rookerydb/rookery/views"
)

// The Audit page: the audit logs of every node of the cluster, merged
// newest first. Each node records the actions it was asked to do, so the
// page asks every node (this one from memory, the others at their
// GET /admin/audit with this node's credentials) and says which answered.

const (
	// auditPeerTimeout bounds how long the page waits for the other
	// nodes; they are asked concurrently.
	auditPeerTimeout = 2 * time.Second
	// auditPageSize is the page's default size; auditMaxPageSize the
	// largest a query may ask for.
	auditPageSize    = 50
	auditMaxPageSize = 500
	// auditMaxDepth bounds how deep the merged list can be paged (each
	// node sends at most this many of its newest matching entries).
	auditMaxDepth = 5000
	// auditMaxBody bounds a node's answer.
	auditMaxBody = 16 << 20
)

func (s *Studio) registerAudit(g *echo.Group) {
	g.GET("/audit", s.auditPage)
}

// nodeAudit is one node's GET /admin/audit answer.
type nodeAudit struct {
	NodeTag      string
	TotalResults int
	Results      []audit.Entry
}

func (s *Studio) fetchAudit(ctx context.Context, base string, f audit.Filter, n int) (nodeAudit, error) {
	var out nodeAudit
	ctx, cancel := context.WithTimeout(ctx, auditPeerTimeout)
	defer cancel()
	q := url.Values{"start": {"0"}, "pageSize": {strconv.Itoa(n)}}
	if f.Action != "" {
		q.Set("action", f.Action)
	}
	if f.Who != "" {
		q.Set("who", f.Who)
	}
	if f.Database != "" {
		q.Set("database", f.Database)
	}
	if err := httpx.GetJSON(ctx, s.peers(), strings.TrimRight(base, "/")+"/admin/audit?"+q.Encode(), auditMaxBody, &out); err != nil {
		return out, err
	}
	return out, nil
}

// auditData gathers one page of the merged log.
func (s *Studio) auditData(ctx context.Context, q url.Values) views.AuditData {
	d := views.AuditData{
		Actions:  s.AuditActions,
		Filter:   views.AuditFilter{Action: strings.TrimSpace(q.Get("action")), Who: strings.TrimSpace(q.Get("who")), Database: strings.TrimSpace(q.Get("database"))},
		PageSize: auditPageSize, Now: time.Now(),
	}
	if n, err := strconv.Atoi(q.Get("pageSize")); err == nil && n > 0 {
		d.PageSize = min(n, auditMaxPageSize)
	}
	if n, err := strconv.Atoi(q.Get("start")); err == nil && n > 0 {
		d.Start = min(n, auditMaxDepth)
	}
	f := audit.Filter{Action: d.Filter.Action, Who: d.Filter.Who, Database: d.Filter.Database}
	depth := min(d.Start+d.PageSize, auditMaxDepth)

	type node struct{ tag, url string }
	nodes := []node{{tag: s.NodeTag}}
	if s.Cluster != nil {
		for _, n := range s.Cluster.Nodes() {
			if n.Tag != s.NodeTag {
				nodes = append(nodes, node{n.Tag, n.URL})
			}
		}
	}
	sort.Slice(nodes[1:], func(i, j int) bool { return nodes[1+i].tag < nodes[1+j].tag })
	d.Nodes = make([]views.AuditNode, len(nodes))
	results := make([][]audit.Entry, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		an := &d.Nodes[i]
		an.Tag, an.Self = n.tag, n.tag == s.NodeTag
		if an.Self {
			if s.Audit == nil {
				an.Problem = "this node keeps no audit log"
				continue
			}
			results[i], an.Total = s.Audit.List(f, 0, depth)
			an.Answered = true
			continue
		}
		if n.url == "" {
			an.Problem = "no URL known yet"
			continue
		}
		wg.Add(1)
		go func(i int, base string) {
			defer wg.Done()
			got, err := s.fetchAudit(ctx, base, f, depth)
			if err != nil {
				d.Nodes[i].Problem = err.Error()
				return
			}
			d.Nodes[i].Answered, d.Nodes[i].Total = true, got.TotalResults
			results[i] = got.Results
			if len(results[i]) > depth {
				results[i] = results[i][:depth]
			}
		}(i, n.url)
	}
	wg.Wait()
	var all []views.AuditRow
	for i, list := range results {
		d.Total += d.Nodes[i].Total
		for _, e := range list {
			if e.Node == "" {
				e.Node = nodes[i].tag
			}
			all = append(all, views.AuditRow{Entry: e, From: nodes[i].tag})
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		if !all[i].Time.Equal(all[j].Time) {
			return all[i].Time.After(all[j].Time)
		}
		return all[i].From < all[j].From
	})
	if d.Start < len(all) {
		d.Rows = all[d.Start:min(len(all), d.Start+d.PageSize)]
	}
	d.More = d.Start+len(d.Rows) < min(d.Total, auditMaxDepth) && len(d.Rows) == d.PageSize
	d.Depth = auditMaxDepth
	return d
}

func (s *Studio) auditPage(c echo.Context) error {
	d := s.auditData(c.Request().Context(), c.QueryParams())
	return render(c, http.StatusOK, s.chrome(c, "Audit log", "", views.NavAudit, "audit"), views.AuditPage(d))
}
