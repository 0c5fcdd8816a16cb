package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/indexes"
	"github.com/rookerydb/rookery/handlers/httpx"
)

// DefaultIndexCleanupInterval is how often the leader runs the auto-index
// cleanup (RavenDB's Indexing.CleanupIntervalInMin, 10).
const DefaultIndexCleanupInterval = 10 * time.Minute

// indexUsage is GET /internal/indexes/usage?db=: this node's record of
// when the database's indexes and collections were last queried, for the
// leader's cleanup.
func (s *Server) indexUsage(c echo.Context) error {
	db := c.QueryParam("db")
	if db == "" {
		return echo.NewHTTPError(http.StatusBadRequest, "db is required")
	}
	return c.JSON(http.StatusOK, s.idx.Usage(db))
}

// maybeCleanupIndexes starts a cleanup pass on the leader when the
// interval has passed since the last one (called by the ticker).
func (s *Server) maybeCleanupIndexes(now time.Time) {
	if !s.cluster.IsLeader() {
		return
	}
	// A superseded auto index is retired soon after the wider one caught
	// up (its grace is seconds), not at the next full interval.
	due := now.Sub(s.lastCleanup) >= s.cfg.IndexCleanupInterval
	if !due && now.Sub(s.lastCleanup) >= supersededCheck {
		due = s.anySuperseded()
	}
	if !due {
		return
	}
	if !s.cleaning.CompareAndSwap(false, true) {
		return
	}
	s.lastCleanup = now
	s.backgroundPass(&s.cleaning, s.cleanupIndexes)
}

// backgroundPass runs one pass of a ticker's job in its own goroutine, with
// at most a minute and cancelled when the server stops; busy, already set
// by the caller, is cleared when the pass ends.
func (s *Server) backgroundPass(busy *atomic.Bool, pass func(context.Context)) {
	go func() {
		defer busy.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		go func() {
			select {
			case <-s.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		pass(ctx)
	}()
}

// cleanupIndexes applies the cleanup rules to every database, with the
// usage every member node reports. A database whose members cannot all
// be asked is left for the next pass: an index is never judged unused on
// the word of some nodes only.
func (s *Server) cleanupIndexes(ctx context.Context) {
	urls := map[string]string{}
	for _, n := range s.cluster.Nodes() {
		urls[n.Tag] = n.URL
	}
	for _, d := range s.cluster.Databases() {
		if len(s.cluster.Indexes(d.Name)) == 0 {
			continue
		}
		var reports []indexes.Report
		complete := true
		for _, m := range d.Members {
			if m == s.cfg.NodeTag {
				reports = append(reports, s.idx.Usage(d.Name))
				continue
			}
			r, err := s.fetchUsage(ctx, urls[m], d.Name)
			if err != nil {
				s.log.Info("index cleanup skips a database: a member did not report its usage", "database", d.Name, "node", m, "error", err)
				complete = false
				break
			}
			reports = append(reports, r)
		}
		if !complete {
			continue
		}
		decisions, err := s.idx.Cleanup(ctx, d.Name, reports)
		if err != nil {
			s.log.Warn("index cleanup failed", "database", d.Name, "error", err)
			continue
		}
		for _, dec := range decisions {
			if dec.Action != indexes.ActionKeep {
				s.log.Info("index cleanup", "database", d.Name, "index", dec.Index, "action", dec.Action, "reason", dec.Reason)
			}
		}
	}
}

func (s *Server) fetchUsage(ctx context.Context, base, db string) (indexes.Report, error) {
	var r indexes.Report
	if base == "" {
		return r, fmt.Errorf("no URL")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := httpx.GetJSON(ctx, s.nodes, strings.TrimRight(base, "/")+"/internal/indexes/usage?db="+url.QueryEscape(db), 4<<20, &r)
	return r, err
}

// supersededCheck is how often the leader looks for superseded auto
// indexes to retire between full cleanup passes.
const supersededCheck = 5 * time.Second

func (s *Server) anySuperseded() bool {
	for _, d := range s.cluster.Databases() {
		for _, r := range s.cluster.Indexes(d.Name) {
			if r.Superseded != "" {
				return true
			}
		}
	}
	return false
}
