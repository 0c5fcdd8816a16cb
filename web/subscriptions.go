package web

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rookerydb/rookery/backend/subscriptions"
)

// reconcileSubscriptions ends the worker sessions of subscriptions that
// were deleted, disabled or changed, after each cluster change.
func (s *Server) reconcileSubscriptions() {
	for {
		select {
		case <-s.stop:
			return
		case <-s.subRecon:
		}
		s.subs.Reconcile()
	}
}

// stopSubscriptions ends every worker connection (they reconnect to another
// node or after the restart) and waits for their sessions to close.
func (s *Server) stopSubscriptions() {
	s.subCancel()
	s.subConns.closeAll()
}

// subscriptionCollector reports the monitor's last figures at scrape time.
type subscriptionCollector struct{ s *Server }

func subDesc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc("rookery_subscription_"+name, help, append([]string{"database", "subscription"}, extra...), nil)
}

var (
	descSubStatus   = subDesc("status", "Status over the sliding window: 1 for the current one (OK, SLOW, STALLED, STOPPED, REWOUND), 0 for the others.", "status")
	descSubBacklog  = subDesc("backlog_docs", "Documents matching the query not yet acknowledged (estimated from a sample for filtered queries).")
	descSubToScan   = subDesc("to_scan_docs", "Documents of the collection after the subscription's position.")
	descSubLag      = subDesc("lag_seconds", "Age of the oldest unprocessed matching change (0 when none).")
	descSubWorkers  = subDesc("workers", "Connected workers.")
	descSubInFlight = subDesc("in_flight_docs", "Documents of the batch sent and not yet acknowledged.")
	descSubRead     = subDesc("docs_read_total", "Documents read by the subscription's scans on this node.")
	descSubSent     = subDesc("docs_sent_total", "Documents sent to workers on this node.")
	descSubAcked    = subDesc("docs_acked_total", "Documents acknowledged on this node.")
	descSubRedel    = subDesc("redelivered_docs_total", "Documents sent again because an earlier batch was not acknowledged.")
	descSubErrors   = subDesc("errors_total", "Errors on the subscription's connections.")
	descSubAckP99   = subDesc("ack_latency_p99_seconds", "99th percentile of the time from sending a batch to its acknowledgement.")
	descSubRunaway  = subDesc("runaway", "1 for each runaway rule that flags the subscription (burst, duplicate, from-beginning, scan-share, churn).", "rule")
)

var subStatuses = []string{subscriptions.OK, subscriptions.Slow, subscriptions.Stalled, subscriptions.Stopped, subscriptions.Rewound}

func (c subscriptionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSubStatus, descSubBacklog, descSubToScan, descSubLag, descSubWorkers, descSubInFlight,
		descSubRead, descSubSent, descSubAcked, descSubRedel, descSubErrors, descSubAckP99, descSubRunaway} {
		ch <- d
	}
}

func (c subscriptionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, db := range c.s.catalog.Names() {
		r := c.s.subs.Report(context.Background(), db)
		for _, st := range r.Subscriptions {
			l := []string{r.Database, st.Name}
			gauge := func(d *prometheus.Desc, v float64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
			}
			counter := func(d *prometheus.Desc, v int64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
			}
			for _, s := range subStatuses {
				v := 0.0
				if st.Status == s {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(descSubStatus, prometheus.GaugeValue, v, r.Database, st.Name, s)
			}
			gauge(descSubBacklog, float64(st.Backlog))
			gauge(descSubToScan, float64(st.ToScan))
			gauge(descSubLag, st.LagSeconds)
			gauge(descSubWorkers, float64(len(st.Workers)))
			gauge(descSubInFlight, float64(st.InFlight))
			gauge(descSubAckP99, st.AckP99Ms/1000)
			counter(descSubRead, st.DocsRead)
			counter(descSubSent, st.DocsSent)
			counter(descSubAcked, st.DocsAcked)
			counter(descSubRedel, st.Redeliveries)
			counter(descSubErrors, st.Errors)
			seen := map[string]bool{}
			for _, f := range st.Flags {
				if !seen[f.Rule] {
					seen[f.Rule] = true
					ch <- prometheus.MustNewConstMetric(descSubRunaway, prometheus.GaugeValue, 1, r.Database, st.Name, f.Rule)
				}
			}
		}
	}
}
