package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/catalog"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/replication"
	"github.com/rookerydb/rookery/backend/storage"
)

// A damaged database (backend/catalog, DESIGN.md there) is never served:
// every request to it gets the catalog's 503, /readyz names it, /metrics
// has rookery_database_damaged{database,reason}, the studio shows it with
// an alert, and POST /admin/databases/reseed replaces it with a fresh copy
// that replication fills.

// readyz answers 200 "ready" once the node serves and no database is
// damaged; 503 while starting or stopping, or naming each damaged database
// (the others are served all the same).
func (s *Server) readyz(c echo.Context) error {
	if !s.ready.Load() {
		return c.String(http.StatusServiceUnavailable, "starting")
	}
	damaged := s.catalog.Damaged()
	if len(damaged) == 0 {
		return c.String(http.StatusOK, "ready")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "damaged: %d database(s) on this node are not served (the others are):\n", len(damaged))
	for _, d := range damaged {
		fmt.Fprintf(&b, "%s: %s: %s (detected %s)\n", d.Name, d.Reason, d.Detail, d.Detected.Format(time.RFC3339))
	}
	b.WriteString("re-seed each from a healthy member: POST /admin/databases/reseed?name=<database>\n")
	return c.String(http.StatusServiceUnavailable, b.String())
}

var descDamaged = prometheus.NewDesc("rookery_database_damaged",
	"1 for each database copy on this node that is damaged and not served, with the reason (unreadable, integrity, etag-regression, database-id, peer-regression, missing-file).",
	[]string{"database", "reason"}, nil)

// damageCollector reports the damaged databases at scrape time.
type damageCollector struct{ s *Server }

func (c damageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descDamaged }

func (c damageCollector) Collect(ch chan<- prometheus.Metric) {
	for _, d := range c.s.catalog.Damaged() {
		ch <- prometheus.MustNewConstMetric(descDamaged, prometheus.GaugeValue, 1, d.Name, d.Reason)
	}
}

func damageAlertKey(name string) string { return "damaged/" + strings.ToLower(name) }

func (s *Server) raiseDamage(d catalog.Damage) {
	s.alerts.Raise(alerts.Alert{Key: damageAlertKey(d.Name), Level: alerts.Error, Database: d.Name, Link: "/studio/databases",
		Title: "Database " + d.Name + " is damaged and not served",
		Message: d.Reason + ": " + d.Detail + ". Its files are in " + d.Dir +
			". Re-seed it from a healthy member (Databases page, or POST /admin/databases/reseed?name=" + d.Name + ")."})
}

// watchDamage raises an alert for each database found damaged at start and
// for each found damaged later, takes the latter out of replication, and
// clears the alert when a database is re-seeded or deleted.
func (s *Server) watchDamage() {
	s.reg.MustRegister(damageCollector{s})
	for _, d := range s.catalog.Damaged() {
		s.raiseDamage(d)
	}
	s.catalog.OnChange(func(ev catalog.Event) {
		switch ev.Type {
		case "damaged":
			if d, ok := s.catalog.DamageOf(ev.Name); ok {
				s.raiseDamage(d)
			}
			s.forgetClosed()
			select { // the reconciler stops its senders
			case s.recon <- struct{}{}:
			default:
			}
		case "created":
			s.alerts.Clear(damageAlertKey(ev.Name))
		}
	})
}

// lostWrites is a sender's report that a peer has writes of this copy that
// the copy no longer has: the copy is taken out of service at once.
func (s *Server) lostWrites(db *storage.DB, l replication.LostWritesError) {
	s.catalog.MarkDamaged(db, storage.ReasonPeerRegression, l.Error())
}

// Reseed replaces this node's damaged copy of a database with a new, empty
// one (a new database id) and lets replication from the other members fill
// it. It refuses when nothing could fill it.
func (s *Server) Reseed(ctx context.Context, name string) (string, error) {
	d, ok := s.catalog.DamageOf(name)
	if !ok {
		if _, err := s.catalog.Get(name); err != nil {
			return "", err
		}
		return "", dberr.New(dberr.InvalidOperation, "Database '%s' is not damaged on this node; there is nothing to re-seed", name)
	}
	rec, ok := s.cluster.Database(name)
	if !ok {
		return "", dberr.New(dberr.InvalidOperation, "Database '%s' is not in the cluster's records, so no other member holds a copy to re-seed it from; restore it from a backup", d.Name)
	}
	var others []string
	for _, m := range rec.Members {
		if m != s.cfg.NodeTag {
			others = append(others, m)
		}
	}
	if len(others) == 0 {
		return "", dberr.New(dberr.InvalidOperation, "Database '%s' has no other member (its only copy is this damaged one), so there is nothing to re-seed it from; restore it from a backup (its files are in %s)", d.Name, d.Dir)
	}
	if !s.cfg.Replication {
		return "", dberr.New(dberr.InvalidOperation, "Replication is off on this node (--replication=false), so a re-seeded copy would stay empty; start the node with replication on to re-seed '%s'", d.Name)
	}
	res, err := s.catalog.Reseed(rec.Name, catalog.Options{Separator: rec.Separator})
	if err != nil {
		return "", err
	}
	select {
	case s.recon <- struct{}{}:
	default:
	}
	return fmt.Sprintf("Database '%s' re-seeded: a new, empty copy with database id %s; replication from %s fills it. The damaged copy's files were moved to %s.",
		rec.Name, res.DB.DatabaseID(), strings.Join(others, ", "), res.Kept), nil
}
