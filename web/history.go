package web

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/history"
)

// maybeSampleHistory records one sample of the studio's chart series once
// per history interval (the ticker calls it every second): writes/s of
// every open database (from its Writes counter), items and seconds behind
// of every outgoing replication link, and the backlog of every
// subscription as this node's monitor sees it.
func (s *Server) maybeSampleHistory(now time.Time) {
	iv := s.history.Options().Interval
	if !s.historyLast.IsZero() && !now.Truncate(iv).After(s.historyLast.Truncate(iv)) {
		return
	}
	s.historyLast = now
	s.history.Record(now, s.historyPoints(now))
}

func (s *Server) historyPoints(now time.Time) []history.Point {
	self := s.cfg.NodeTag
	var pts []history.Point
	for _, db := range s.catalog.All() {
		if rate, ok := s.rates.Rate(strings.ToLower(db.Name()), db.Writes(), now); ok {
			pts = append(pts, history.Point{Key: history.Key{Kind: history.KindWrites, Database: db.Name(), Node: self}, Value: rate})
		}
	}
	s.rates.EndRound()
	s.repl.mu.Lock()
	var senders []*runningSender
	for _, rs := range s.repl.senders {
		senders = append(senders, rs)
	}
	s.repl.mu.Unlock()
	for _, rs := range senders {
		st := rs.s.Stats()
		db := rs.handle.Name()
		pts = append(pts,
			history.Point{Key: history.Key{Kind: history.KindReplItems, Database: db, Node: self, Peer: st.Tag}, Value: float64(st.ItemsBehind)},
			history.Point{Key: history.Key{Kind: history.KindReplSeconds, Database: db, Node: self, Peer: st.Tag}, Value: st.SecondsBehind})
	}
	for _, name := range s.catalog.Names() {
		r := s.subs.Report(context.Background(), name)
		for _, sub := range r.Subscriptions {
			if sub.Disabled {
				continue
			}
			pts = append(pts, history.Point{Key: history.Key{Kind: history.KindSubBacklog, Database: r.Database, Node: self, Name: sub.Name}, Value: float64(sub.Backlog)})
		}
	}
	return pts
}

// internalHistory serves GET /internal/history?since=&kind= to the other
// nodes: this node's series (the studio of another node shows them with
// its own, filtered for its viewer).
func (s *Server) internalHistory(c echo.Context) error {
	since, match, err := history.ParseQuery(c.QueryParam("since"), c.QueryParam("kind"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.history.Window(since, match))
}
