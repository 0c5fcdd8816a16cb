// Package history keeps a node's recent time series in memory, for the
// studio's charts: writes per second per database, replication lag per
// destination, subscription backlog per subscription. Nothing is written to
// disk; a restarted node starts with empty charts.
//
// A Store holds one ring of sample times shared by every series and, per
// series, a ring of values aligned with it (NaN where a series had no value
// at a sample). Memory is bounded: at most MaxSeries series of
// Retention/Interval+1 float64 each, whatever is reported. See DESIGN.md.
package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Kinds of series, with the unit their values are in.
const (
	KindWrites      = "writes"       // writes/s of a database on a node
	KindReplItems   = "repl_items"   // items a destination has not acknowledged
	KindReplSeconds = "repl_seconds" // age of the oldest of them, seconds
	KindSubBacklog  = "sub_backlog"  // documents a subscription has not acknowledged
)

// Unit is the unit of a kind's values, as the charts label their axes.
func Unit(kind string) string {
	switch kind {
	case KindWrites:
		return "writes/s"
	case KindReplItems:
		return "items"
	case KindReplSeconds:
		return "s"
	case KindSubBacklog:
		return "docs"
	}
	return ""
}

// Defaults of the flags that size a Store.
const (
	DefaultRetention = time.Hour
	DefaultInterval  = 5 * time.Second
	DefaultMaxSeries = 1000
	// MaxSlots bounds Retention/Interval: a year of minutes is already more
	// than a chart can show.
	MaxSlots = 100_000
)

// Options size a Store; zero fields take the defaults.
type Options struct {
	// Retention is how far back series are kept.
	Retention time.Duration
	// Interval is the time between samples; sample times are truncated
	// to it, so nodes with the same interval sample at the same times.
	Interval time.Duration
	// MaxSeries caps the series kept; a new series over it is not kept
	// (Dropped counts them) until an old one expires.
	MaxSeries int
}

// WithDefaults fills in the zero fields and checks the result.
func (o Options) WithDefaults() (Options, error) {
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.MaxSeries == 0 {
		o.MaxSeries = DefaultMaxSeries
	}
	switch {
	case o.Interval < time.Second:
		return o, fmt.Errorf("--history-interval must be at least 1s (%s)", o.Interval)
	case o.Retention < o.Interval:
		return o, fmt.Errorf("--history-retention (%s) must be at least --history-interval (%s)", o.Retention, o.Interval)
	case o.Retention/o.Interval > MaxSlots:
		return o, fmt.Errorf("--history-retention / --history-interval is %d samples, over %d", o.Retention/o.Interval, MaxSlots)
	case o.MaxSeries < 0:
		return o, errors.New("--history-max-series must not be negative")
	}
	return o, nil
}

// Key names a series. Node is the node the figure was measured on (the
// source of a replication link); Peer the destination of a link; Name a
// subscription.
type Key struct {
	Kind     string
	Database string `json:",omitempty"`
	Node     string `json:",omitempty"`
	Peer     string `json:",omitempty"`
	Name     string `json:",omitempty"`
}

// Point is one series' value at a sample.
type Point struct {
	Key   Key
	Value float64
}

type series struct {
	values []float64 // ring aligned with Store.times
	// last is the sample count when the series last had a value.
	last int
}

// Store is a node's time series.
type Store struct {
	opts  Options
	slots int

	mu      sync.Mutex
	times   []int64 // ring of sample times, unix seconds
	count   int     // samples recorded
	series  map[Key]*series
	dropped int64
}

// New makes an empty store; opts must have passed WithDefaults (New fills
// in the defaults again and panics on options WithDefaults refuses).
func New(opts Options) *Store {
	o, err := opts.WithDefaults()
	if err != nil {
		panic(err)
	}
	slots := int(o.Retention/o.Interval) + 1
	return &Store{opts: o, slots: slots, times: make([]int64, slots), series: map[Key]*series{}}
}

// Options are the store's options, defaults filled in.
func (s *Store) Options() Options { return s.opts }

// Record adds one sample taken at at: each point's series gets its value
// there, every other series none (a gap). A sample at or before the last
// one's (truncated) time replaces that sample's values for the points
// given. A series that has had no value for the whole retention is
// forgotten.
func (s *Store) Record(at time.Time, points []Point) {
	t := at.Truncate(s.opts.Interval).Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.count == 0 || t > s.times[(s.count-1)%s.slots] {
		slot := s.count % s.slots
		s.times[slot] = t
		s.count++
		for k, sr := range s.series {
			if s.count-sr.last >= s.slots {
				delete(s.series, k)
				continue
			}
			sr.values[slot] = math.NaN()
		}
	}
	slot := (s.count - 1) % s.slots
	for _, p := range points {
		sr := s.series[p.Key]
		if sr == nil {
			if len(s.series) >= s.opts.MaxSeries {
				s.dropped++
				continue
			}
			sr = &series{values: make([]float64, s.slots)}
			for i := range sr.values {
				sr.values[i] = math.NaN()
			}
			s.series[p.Key] = sr
		}
		sr.values[slot] = p.Value
		sr.last = s.count
	}
}

// Dropped is how many points were not kept because MaxSeries series were
// already kept.
func (s *Store) Dropped() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Len is how many series are kept.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.series)
}

// Values are a series' values at a window's times; NaN (no value) is
// null in JSON.
type Values []float64

// MarshalJSON writes NaN and infinities as null.
func (v Values) MarshalJSON() ([]byte, error) {
	out := make([]byte, 0, 2+len(v)*4)
	out = append(out, '[')
	for i, x := range v {
		if i > 0 {
			out = append(out, ',')
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			out = append(out, "null"...)
			continue
		}
		out = strconv.AppendFloat(out, x, 'f', -1, 64)
	}
	return append(out, ']'), nil
}

// UnmarshalJSON reads null as NaN.
func (v *Values) UnmarshalJSON(b []byte) error {
	var raw []*float64
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make(Values, len(raw))
	for i, p := range raw {
		if p == nil {
			out[i] = math.NaN()
		} else {
			out[i] = *p
		}
	}
	*v = out
	return nil
}

// Series is one series over a window.
type Series struct {
	Key
	Unit   string
	Values Values
}

// Window is the series over a span of time, aligned on Times (unix
// seconds, ascending): Values[i] is the value at Times[i].
type Window struct {
	// Interval is the store's sample interval, in seconds.
	Interval int64
	Times    []int64
	Series   []Series
}

// Window returns the samples after since (all of them when since is zero)
// and within the retention of the newest, of the series match accepts (all
// when nil) that have a value there, sorted by key.
func (s *Store) Window(since time.Time, match func(Key) bool) Window {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := Window{Interval: int64(s.opts.Interval / time.Second), Times: []int64{}, Series: []Series{}}
	if s.count == 0 {
		return w
	}
	newest := s.times[(s.count-1)%s.slots]
	// The oldest time kept is the newest less the retention (inclusive),
	// so a full window spans the whole retention.
	oldest := newest - int64(s.opts.Retention/time.Second)
	if !since.IsZero() {
		oldest = max(oldest, since.Unix()+1)
	}
	first := max(0, s.count-s.slots)
	var slots []int
	for i := first; i < s.count; i++ {
		slot := i % s.slots
		if s.times[slot] >= oldest {
			slots = append(slots, slot)
			w.Times = append(w.Times, s.times[slot])
		}
	}
	if len(slots) == 0 {
		return w
	}
	for k, sr := range s.series {
		if match != nil && !match(k) {
			continue
		}
		vals := make(Values, len(slots))
		any := false
		for i, slot := range slots {
			vals[i] = sr.values[slot]
			any = any || !math.IsNaN(vals[i])
		}
		if any {
			w.Series = append(w.Series, Series{Key: k, Unit: Unit(k.Kind), Values: vals})
		}
	}
	SortSeries(w.Series)
	return w
}

// SortSeries orders series by kind, database, node, peer and name.
func SortSeries(ss []Series) {
	sort.Slice(ss, func(i, j int) bool { return ss[i].Key.less(ss[j].Key) })
}

func (k Key) less(o Key) bool {
	a := [5]string{k.Kind, k.Database, k.Node, k.Peer, k.Name}
	b := [5]string{o.Kind, o.Database, o.Node, o.Peer, o.Name}
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// Merge joins windows from several nodes into one aligned on the union of
// their times. Series are told apart by their keys (which name their
// node); a time two windows share keeps the later window's value where it
// has one. At most maxTimes of the newest times are kept.
func Merge(maxTimes int, ws ...Window) Window {
	out := Window{Times: []int64{}, Series: []Series{}}
	set := map[int64]bool{}
	for _, w := range ws {
		if w.Interval > out.Interval {
			out.Interval = w.Interval
		}
		for _, t := range w.Times {
			set[t] = true
		}
	}
	for t := range set {
		out.Times = append(out.Times, t)
	}
	sort.Slice(out.Times, func(i, j int) bool { return out.Times[i] < out.Times[j] })
	if maxTimes > 0 && len(out.Times) > maxTimes {
		out.Times = out.Times[len(out.Times)-maxTimes:]
	}
	at := make(map[int64]int, len(out.Times))
	for i, t := range out.Times {
		at[t] = i
	}
	byKey := map[Key]int{}
	for _, w := range ws {
		for _, sr := range w.Series {
			idx, ok := byKey[sr.Key]
			if !ok {
				vals := make(Values, len(out.Times))
				for i := range vals {
					vals[i] = math.NaN()
				}
				idx = len(out.Series)
				byKey[sr.Key] = idx
				out.Series = append(out.Series, Series{Key: sr.Key, Unit: sr.Unit, Values: vals})
			}
			dst := out.Series[idx].Values
			for i, v := range sr.Values {
				if i >= len(w.Times) || math.IsNaN(v) {
					continue
				}
				if j, ok := at[w.Times[i]]; ok {
					dst[j] = v
				}
			}
		}
	}
	SortSeries(out.Series)
	return out
}
