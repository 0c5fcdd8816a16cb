// Package metrics holds the engine's Prometheus collectors. Each node has its
// own set, so that several nodes in one process (as in tests) keep separate
// figures; the web layer registers them and serves /metrics.
package metrics

import "github.com/prometheus/client_golang/prometheus"

// Engine is one node's engine collectors.
type Engine struct {
	// DocumentsWritten counts document puts and deletes, by database and operation.
	DocumentsWritten *prometheus.CounterVec
	// TxMergeSize observes how many write requests one SQLite transaction merged.
	TxMergeSize prometheus.Histogram
	// TxCommitSeconds observes the duration of merged transactions.
	TxCommitSeconds prometheus.Histogram
	// Transactions counts merged transactions by outcome.
	Transactions *prometheus.CounterVec
	// HiLoCalls counts hilo/next and hilo/return calls.
	HiLoCalls *prometheus.CounterVec
	// IdentityCalls counts identity values taken and seeds.
	IdentityCalls *prometheus.CounterVec
	// IdentityProbes counts existence probes made while skipping taken identity values.
	IdentityProbes prometheus.Counter
}

// New makes a set of engine collectors.
func New() *Engine {
	return &Engine{
		DocumentsWritten: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_documents_written_total",
			Help: "Documents written (put or delete) by committed transactions.",
		}, []string{"database", "op"}),
		TxMergeSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "rookery_tx_merged_requests",
			Help:    "Write requests merged into one SQLite transaction (group commit).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
		}),
		TxCommitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "rookery_tx_seconds",
			Help:    "Time from BEGIN to durable COMMIT of a merged transaction.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		Transactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_transactions_total",
			Help: "Merged SQLite transactions, by outcome: committed; rolled_back (a request alone in its transaction failed); failed (BEGIN or COMMIT failed).",
		}, []string{"outcome"}),
		HiLoCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_hilo_calls_total",
			Help: "HiLo range requests, by operation (next, return).",
		}, []string{"op"}),
		IdentityCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rookery_identity_calls_total",
			Help: "Identity operations, by operation (next, seed).",
		}, []string{"op"}),
		IdentityProbes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rookery_identity_probes_total",
			Help: "Document-existence probes made to find a free identity value.",
		}),
	}
}

// Register adds the collectors to r.
func (m *Engine) Register(r prometheus.Registerer) {
	r.MustRegister(m.DocumentsWritten, m.TxMergeSize, m.TxCommitSeconds, m.Transactions, m.HiLoCalls, m.IdentityCalls, m.IdentityProbes)
}
