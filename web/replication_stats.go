package web

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rookerydb/rookery/backend/replication"
	"github.com/rookerydb/rookery/handlers/studio"
)

// replicationCollector reports every sender's figures at scrape time, so a
// destination that is removed disappears from /metrics with its sender.
type replicationCollector struct{ s *Server }

func replDesc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc("rookery_replication_"+name, help, append([]string{"database", "destination"}, extra...), nil)
}

var (
	descReplState     = replDesc("state", "Connection state of an outgoing replication destination: 1 for the current state, 0 for the others.", "state")
	descReplSent      = replDesc("last_sent_etag", "Last local etag sent to the destination.")
	descReplAcked     = replDesc("last_acknowledged_etag", "Last local etag the destination acknowledged.")
	descReplBehind    = replDesc("items_behind", "Local documents, tombstones and conflict versions the destination has not acknowledged.")
	descReplSeconds   = replDesc("seconds_behind", "Age of the oldest change the destination has not acknowledged (0 when none).")
	descReplBeat      = replDesc("last_heartbeat_timestamp_seconds", "When the destination last answered a heartbeat (0 for never).")
	descReplBatchRate = replDesc("batches_per_second", "Acknowledged batches per second over the last few seconds.")
	descReplDocRate   = replDesc("docs_per_second", "Items sent per second over the last few seconds.")
	descReplBatches   = replDesc("batches_total", "Batches the destination acknowledged since the sender started.")
	descReplDocs      = replDesc("docs_total", "Items sent in acknowledged batches since the sender started.")
	descReplErrors    = replDesc("errors_total", "Replication connections that failed or broke since the sender started.")
	descReplErrorAt   = replDesc("last_error_timestamp_seconds", "When the last connection error happened (0 for never).")
	descReplRetryAt   = replDesc("next_retry_timestamp_seconds", "When the sender next tries to connect (0 unless waiting to retry).")
)

var replicationStates = []string{replication.StateConnected, replication.StateConnecting, replication.StateWaiting}

func (c replicationCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descReplState, descReplSent, descReplAcked, descReplBehind, descReplSeconds, descReplBeat,
		descReplBatchRate, descReplDocRate, descReplBatches, descReplDocs, descReplErrors, descReplErrorAt, descReplRetryAt} {
		ch <- d
	}
}

func (c replicationCollector) Collect(ch chan<- prometheus.Metric) {
	type one struct {
		db  string
		snd *replication.Sender
	}
	r := &c.s.repl
	r.mu.Lock()
	var all []one
	for _, rs := range r.senders {
		all = append(all, one{rs.handle.Name(), rs.s})
	}
	r.mu.Unlock()
	for _, o := range all {
		st := o.snd.Stats()
		labels := []string{o.db, st.Tag}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
		}
		counter := func(d *prometheus.Desc, v int64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
		}
		for _, state := range replicationStates {
			v := 0.0
			if st.State == state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descReplState, prometheus.GaugeValue, v, o.db, st.Tag, state)
		}
		gauge(descReplSent, float64(st.LastSentEtag))
		gauge(descReplAcked, float64(st.LastAckEtag))
		gauge(descReplBehind, float64(st.ItemsBehind))
		gauge(descReplSeconds, st.SecondsBehind)
		gauge(descReplBeat, unixSeconds(st.LastBeat.UnixNano(), st.LastBeat.IsZero()))
		gauge(descReplBatchRate, st.BatchesPerSec)
		gauge(descReplDocRate, st.DocsPerSec)
		counter(descReplBatches, st.Batches)
		counter(descReplDocs, st.Docs)
		counter(descReplErrors, st.Errors)
		gauge(descReplErrorAt, unixSeconds(st.LastErrorAt.UnixNano(), st.LastErrorAt.IsZero()))
		gauge(descReplRetryAt, unixSeconds(st.NextRetry.UnixNano(), st.NextRetry.IsZero()))
	}
}

func unixSeconds(nanos int64, zero bool) float64 {
	if zero {
		return 0
	}
	return float64(nanos) / 1e9
}

// studioReplication gives the studio the senders' figures.
type studioReplication struct{ s *Server }

func (r studioReplication) ReplicationEnabled() bool { return r.s.cfg.Replication }

func (r studioReplication) Destinations(db string) []studio.ReplicationDestination {
	var out []studio.ReplicationDestination
	for _, snd := range r.s.sendersOf(db) {
		out = append(out, studio.ReplicationDestination{Stats: snd.Stats(), Behind: snd.BehindSeries()})
	}
	return out
}
