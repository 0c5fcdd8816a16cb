package subscriptions

import (
	"slices"
	"time"
)

// Kept per subscription for the monitor.
const (
	keepConnections = 100
	keepBatches     = 50
	keepLatencies   = 512
	keepSamples     = 300 // seconds of history
)

type connRecord struct {
	Addr, Strategy string
	Since, Ended   time.Time
	Docs, Acks     int64
}

type batchRecord struct {
	At                  time.Time
	Docs, Scanned       int
	FirstEtag, LastEtag int64
	AckedAt             time.Time
	Redelivered         int
	Worker              string
}

type sample struct {
	At        time.Time
	Position  int64
	Backlog   int64
	Acked     int64 // cumulative acknowledged documents
	Batches   int64 // cumulative acknowledged batches
	Read      int64 // cumulative documents read
	Connected bool
}

// stats is one subscription's runtime figures; guarded by Manager.mu.
type stats struct {
	lastConnect  time.Time
	conns        []*connRecord
	batches      []*batchRecord
	inflight     *batchRecord
	docsRead     int64
	docsSent     int64
	docsAcked    int64
	batchesAcked int64
	redeliveries int64
	errors       int64
	lastError    string
	lastErrorAt  time.Time
	// recoveredAt is the first acknowledged batch after lastErrorAt (zero
	// while the error is current).
	recoveredAt time.Time
	// health smooths the status (hysteresis for OK and SLOW).
	health     health
	ackLatency []time.Duration
	maxSent    int64
	samples    []sample
}

func trim[T any](s []T, n int) []T {
	if len(s) > n {
		return slices.Delete(s, 0, len(s)-n)
	}
	return s
}

func (st *stats) connected(o ConnectOptions, now time.Time) *connRecord {
	c := &connRecord{Addr: o.ClientAddr, Strategy: o.Strategy, Since: now}
	st.lastConnect = now
	st.conns = trim(append(st.conns, c), keepConnections)
	return c
}

func (st *stats) disconnected(c *connRecord, now time.Time) {
	if c != nil && c.Ended.IsZero() {
		c.Ended = now
	}
	st.inflight = nil
}

// sent records a batch handed to a worker and returns how many of its
// documents were sent before without being acknowledged.
func (st *stats) sent(c *connRecord, b *Batch, now time.Time) int {
	re := 0
	for _, d := range b.Docs {
		if d.Etag <= st.maxSent {
			re++
		}
	}
	if n := len(b.Docs); n > 0 && b.Docs[n-1].Etag > st.maxSent {
		st.maxSent = b.Docs[n-1].Etag
	}
	st.docsRead += int64(b.Scanned)
	st.docsSent += int64(len(b.Docs))
	st.redeliveries += int64(re)
	r := &batchRecord{At: now, Docs: len(b.Docs), Scanned: b.Scanned, Redelivered: re}
	if c != nil {
		r.Worker = c.Addr
	}
	if n := len(b.Docs); n > 0 {
		r.FirstEtag, r.LastEtag = b.Docs[0].Etag, b.Docs[n-1].Etag
	}
	st.inflight = r
	st.batches = trim(append(st.batches, r), keepBatches)
	return re
}

func (st *stats) skipped(scanned int) { st.docsRead += int64(scanned) }

func (st *stats) acked(c *connRecord, b *Batch, now time.Time) {
	st.docsAcked += int64(len(b.Docs))
	st.batchesAcked++
	if c != nil {
		c.Docs += int64(len(b.Docs))
		c.Acks++
	}
	if !st.lastErrorAt.IsZero() && st.recoveredAt.IsZero() {
		st.recoveredAt = now
	}
	if st.inflight != nil {
		st.inflight.AckedAt = now
		st.ackLatency = trim(append(st.ackLatency, now.Sub(st.inflight.At)), keepLatencies)
	}
	st.inflight = nil
}

func (st *stats) failed(err error, now time.Time) {
	st.errors++
	st.lastError = err.Error()
	st.lastErrorAt = now
	st.recoveredAt = time.Time{}
}

// percentile of the kept acknowledgement latencies, in milliseconds.
func (st *stats) percentile(p float64) float64 {
	if len(st.ackLatency) == 0 {
		return 0
	}
	s := slices.Clone(st.ackLatency)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return float64(s[i]) / float64(time.Millisecond)
}
