package studio

import (
	"context"
	"net/http"
	"net/url"
	"sort"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/replication"
	"github.com/rookerydb/rookery/views"
)

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

// registerReplication adds the Replication page: one row per destination
// with its sender's lag figures, refreshed every second.
func (s *Studio) registerReplication(g *echo.Group) {
	g.GET("/replication", s.replicationPage)
	s.addLive("replication", s.replicationLive, true)
}

func (s *Studio) replicationData(name string) (views.ReplicationData, error) {
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
		d.Rows = append(d.Rows, views.ReplicationRow{
			Tag: x.Tag, URL: x.Destination, State: x.State, ConnectedSince: x.ConnectedSince,
			LastSentEtag: x.LastSentEtag, LastAckEtag: x.LastAckEtag, ItemsBehind: x.ItemsBehind, SecondsBehind: x.SecondsBehind,
			LastBeat: x.LastBeat, BatchesPerSec: x.BatchesPerSec, DocsPerSec: x.DocsPerSec, Batches: x.Batches, Docs: x.Docs,
			LastError: x.LastError, LastErrorAt: x.LastErrorAt, NextRetry: x.NextRetry, Behind: x.Behind,
		})
	}
	sort.Slice(d.Rows, func(i, j int) bool { return d.Rows[i].Tag < d.Rows[j].Tag })
	return d, nil
}

func (s *Studio) replicationPage(c echo.Context) error {
	d, err := s.replicationData(c.Param("db"))
	if err != nil {
		return s.studioError(c, "", err)
	}
	return render(c, http.StatusOK, s.chrome(c, "Replication · "+d.Database, d.Database, views.NavReplication, "replication"), views.ReplicationPage(d))
}

func (s *Studio) replicationLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	d, err := s.replicationData(q.Get("db"))
	if err != nil {
		return nil, err
	}
	return []views.Fragment{{ID: "replication-body", C: views.ReplicationBody(d)}}, nil
}
