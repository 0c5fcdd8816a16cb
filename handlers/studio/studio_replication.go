package studio

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/replication"
	"github.com/rookerydb/rookery/handlers/httpx"
	"github.com/rookerydb/rookery/views"
)

// matrixPeerTimeout bounds how long the replication matrix waits for
// another node's outgoing links: they are asked concurrently, and a node
// this node already knows to be unreachable is not asked.
const matrixPeerTimeout = 500 * time.Millisecond

// ReplicationSource is what the Replication page reads from the node's
// replication senders.
type ReplicationSource interface {
	// ReplicationEnabled tells whether this node replicates at all.
	ReplicationEnabled() bool
	// Destinations are a database's outgoing destinations.
	Destinations(db string) []ReplicationDestination
}

// ReplicationDestination is one destination's figures and its items-behind
// samples (one a second, oldest first).
type ReplicationDestination struct {
	replication.Stats
	Behind []float64
}

// registerReplication adds the Replication page: the cluster's matrix of
// source → destination lag, this node's destinations with their sender's
// figures (both refreshed every second), and the lag charts.
func (s *Studio) registerReplication(g *echo.Group) {
	g.GET("/replication", s.replicationPage)
	s.addLive("replication", s.replicationLive, true)
}

// peerLinks is another node's GET /databases/{db}/replication/stats.
type peerLinks struct {
	Enabled      bool
	Destinations []replication.Stats
}

// replicationMatrix gathers every member's outgoing links of a database:
// this node's from its senders, the others' from their replication stats
// endpoint (asked concurrently). A member that does not answer is a
// source marked unreachable: its links are unknown, never zero.
func (s *Studio) replicationMatrix(ctx context.Context, db string, local []views.ReplicationRow) views.ReplicationMatrix {
	members := s.members(db)
	sort.Strings(members)
	m := views.ReplicationMatrix{Members: members, Self: s.NodeTag}
	urls := map[string]string{}
	if s.Cluster != nil {
		for _, n := range s.Cluster.Nodes() {
			urls[n.Tag] = n.URL
		}
	}
	sources := make([]views.MatrixSource, len(members))
	var wg sync.WaitGroup
	for i, tag := range members {
		src := &sources[i]
		src.Tag = tag
		if tag == s.NodeTag {
			src.Reachable, src.Links = true, map[string]views.ReplicationRow{}
			for _, r := range local {
				src.Links[r.Tag] = r
			}
			continue
		}
		if st := s.reach().State(tag); st.Checked && !st.Reachable {
			src.Problem, src.Since = st.Problem, st.Since
			continue
		}
		if urls[tag] == "" {
			src.Problem = "no HTTP URL known yet"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var pl peerLinks
			cctx, cancel := context.WithTimeout(ctx, matrixPeerTimeout)
			defer cancel()
			err := httpx.GetJSON(cctx, s.peers(), strings.TrimRight(urls[src.Tag], "/")+"/databases/"+url.PathEscape(db)+"/replication/stats", 4<<20, &pl)
			if err != nil {
				src.Problem = err.Error()
				if st := s.reach().State(src.Tag); st.Checked && !st.Reachable {
					src.Since = st.Since
				}
				return
			}
			src.Reachable, src.Enabled, src.Links = true, pl.Enabled, map[string]views.ReplicationRow{}
			for _, x := range pl.Destinations {
				src.Links[x.Tag] = rowOf(x, nil)
			}
		}()
	}
	wg.Wait()
	m.Sources = sources
	return m
}

func rowOf(x replication.Stats, behind []float64) views.ReplicationRow {
	return views.ReplicationRow{
		Tag: x.Tag, URL: x.Destination, State: x.State, ConnectedSince: x.ConnectedSince,
		LastSentEtag: x.LastSentEtag, LastAckEtag: x.LastAckEtag, ItemsBehind: x.ItemsBehind, SecondsBehind: x.SecondsBehind,
		LastBeat: x.LastBeat, BatchesPerSec: x.BatchesPerSec, DocsPerSec: x.DocsPerSec, Batches: x.Batches, Docs: x.Docs,
		LastError: x.LastError, LastErrorAt: x.LastErrorAt, NextRetry: x.NextRetry, Behind: behind,
	}
}

func (s *Studio) replicationData(ctx context.Context, name string) (views.ReplicationData, error) {
	db, err := s.Catalog.Get(name)
	if err != nil {
		return views.ReplicationData{}, err
	}
	d := views.ReplicationData{Database: db.Name(), Self: s.NodeTag, LastEtag: db.LastEtag()}
	if s.Replication == nil || !s.Replication.ReplicationEnabled() {
		return d, nil
	}
	d.Enabled = true
	for _, x := range s.Replication.Destinations(db.Name()) {
		d.Rows = append(d.Rows, rowOf(x.Stats, x.Behind))
	}
	sort.Slice(d.Rows, func(i, j int) bool { return d.Rows[i].Tag < d.Rows[j].Tag })
	d.Matrix = s.replicationMatrix(ctx, db.Name(), d.Rows)
	return d, nil
}

func (s *Studio) replicationPage(c echo.Context) error {
	d, err := s.replicationData(c.Request().Context(), c.Param("db"))
	if err != nil {
		return s.studioError(c, "", err)
	}
	return render(c, http.StatusOK, s.chrome(c, "Replication · "+d.Database, d.Database, views.NavReplication, "replication"), views.ReplicationPage(d, s.chartsInfo()))
}

func (s *Studio) replicationLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	d, err := s.replicationData(ctx, q.Get("db"))
	if err != nil {
		return nil, err
	}
	return []views.Fragment{{ID: "replication-matrix", C: views.ReplicationMatrixView(d)}, {ID: "replication-body", C: views.ReplicationBody(d)}}, nil
}
