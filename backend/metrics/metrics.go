// Package metrics holds the engine's Prometheus collectors. The web layer
// registers them next to its own HTTP metrics and serves /metrics.
package metrics

import "github.com/prometheus/client_golang/prometheus"

var (
	// DocumentsWritten counts document puts and deletes, by database and operation.
	DocumentsWritten = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rookery_documents_written_total",
		Help: "Documents written (put or delete) by committed transactions.",
	}, []string{"database", "op"})
	// TxMergeSize observes how many write requests one SQLite transaction merged.
	TxMergeSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "rookery_tx_merged_requests",
		Help:    "Write requests merged into one SQLite transaction (group commit).",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
	})
	// TxCommitSeconds observes the duration of merged transactions.
	TxCommitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "rookery_tx_seconds",
		Help:    "Time from BEGIN to durable COMMIT of a merged transaction.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	// Transactions counts merged transactions by outcome.
	Transactions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rookery_transactions_total",
		Help: "Merged SQLite transactions, by outcome.",
	}, []string{"outcome"})
	// HiLoCalls counts hilo/next and hilo/return calls.
	HiLoCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rookery_hilo_calls_total",
		Help: "HiLo range requests, by operation (next, return).",
	}, []string{"op"})
	// IdentityCalls counts identity values taken and seeds.
	IdentityCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rookery_identity_calls_total",
		Help: "Identity operations, by operation (next, seed).",
	}, []string{"op"})
	// IdentityProbes counts existence probes made while skipping taken identity values.
	IdentityProbes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rookery_identity_probes_total",
		Help: "Document-existence probes made to find a free identity value.",
	})
)

// Register adds the engine collectors to r.
func Register(r prometheus.Registerer) {
	r.MustRegister(DocumentsWritten, TxMergeSize, TxCommitSeconds, Transactions, HiLoCalls, IdentityCalls, IdentityProbes)
}
