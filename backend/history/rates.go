package history

import "time"

// Rates turns counters (a database's writes since it was opened) into
// per-second rates between two readings. A counter that went down (the
// database was closed and opened again) starts over: no rate for that
// reading rather than a negative one.
type Rates struct {
	last  map[string]reading
	round int
}

type reading struct {
	count int64
	at    time.Time
	round int
}

// Rate records a reading of counter key and returns the rate since the
// previous reading; ok is false for the first reading, after a reset, and
// when no time passed.
func (r *Rates) Rate(key string, count int64, at time.Time) (rate float64, ok bool) {
	if r.last == nil {
		r.last = map[string]reading{}
	}
	prev, seen := r.last[key]
	r.last[key] = reading{count: count, at: at, round: r.round}
	if !seen || count < prev.count || !at.After(prev.at) {
		return 0, false
	}
	return float64(count-prev.count) / at.Sub(prev.at).Seconds(), true
}

// EndRound forgets the counters that were not read since the previous
// EndRound (databases that went away); call it after each sample.
func (r *Rates) EndRound() {
	for k, v := range r.last {
		if v.round < r.round {
			delete(r.last, k)
		}
	}
	r.round++
}

// Len is how many counters are remembered.
func (r *Rates) Len() int { return len(r.last) }
