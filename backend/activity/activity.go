// Package activity keeps a node's recent, in-memory figures that the studio
// shows and no one needs after a restart: writes per second over the last
// minutes, and the recent HiLo range calls of each database.
package activity

import (
	"strings"
	"sync"
	"time"
)

// SeriesLength is how many one-second samples of writes/s are kept.
const SeriesLength = 300

// HiLoRingSize is how many HiLo calls are kept per database.
const HiLoRingSize = 256

// HiLoCall is one hilo/next or hilo/return call.
type HiLoCall struct {
	Time   time.Time
	Op     string // "next" or "return"
	Tag    string
	Low    int64 // next: the range handed out; return: last used
	High   int64 // next: range top; return: the end given back
	Size   int64 // next: the range size (capacity)
	Client string
	Node   string
	// Applied reports, for a return, whether Max moved back.
	Applied bool
}

type dbActivity struct {
	series    [SeriesLength]float64
	n         int // samples taken
	lastCount int64
	primed    bool
	hilo      []HiLoCall // ring, oldest first once full
	hiloNext  int
}

// Tracker is the node's activity.
type Tracker struct {
	mu  sync.Mutex
	dbs map[string]*dbActivity // by lower-cased database name

	onHiLo func(db string)
}

// OnHiLo registers fn to run after a HiLo call is recorded (the studio's
// HiLo page refreshes then: the range document commits before the call is
// recorded). Set it before use.
func (t *Tracker) OnHiLo(fn func(db string)) { t.onHiLo = fn }

// New makes an empty tracker.
func New() *Tracker { return &Tracker{dbs: map[string]*dbActivity{}} }

func (t *Tracker) get(db string) *dbActivity {
	key := strings.ToLower(db)
	a := t.dbs[key]
	if a == nil {
		a = &dbActivity{}
		t.dbs[key] = a
	}
	return a
}

// Sample records a database's write counter; call it once a second. It
// returns the writes/s since the previous sample.
func (t *Tracker) Sample(db string, writes int64) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.get(db)
	rate := 0.0
	if a.primed && writes >= a.lastCount {
		rate = float64(writes - a.lastCount)
	}
	a.primed = true
	a.lastCount = writes
	a.series[a.n%SeriesLength] = rate
	a.n++
	return rate
}

// Rate is the latest writes/s of a database.
func (t *Tracker) Rate(db string) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.get(db)
	if a.n == 0 {
		return 0
	}
	return a.series[(a.n-1)%SeriesLength]
}

// Series returns up to the last n writes/s samples, oldest first.
func (t *Tracker) Series(db string, n int) []float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.get(db)
	n = min(n, a.n, SeriesLength)
	out := make([]float64, n)
	for i := 0; i < n; i++ {
		out[i] = a.series[(a.n-n+i)%SeriesLength]
	}
	return out
}

// RecordHiLo adds a HiLo call to the database's ring.
func (t *Tracker) RecordHiLo(db string, c HiLoCall) {
	t.mu.Lock()
	a := t.get(db)
	if len(a.hilo) < HiLoRingSize {
		a.hilo = append(a.hilo, c)
	} else {
		a.hilo[a.hiloNext] = c
		a.hiloNext = (a.hiloNext + 1) % HiLoRingSize
	}
	t.mu.Unlock()
	if t.onHiLo != nil {
		t.onHiLo(db)
	}
}

// HiLoCalls returns the recent calls for tag ("" for every tag), newest first.
func (t *Tracker) HiLoCalls(db, tag string) []HiLoCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.get(db)
	var out []HiLoCall
	n := len(a.hilo)
	for i := 0; i < n; i++ {
		// newest first: walk backwards from the slot before hiloNext
		c := a.hilo[(a.hiloNext-1-i+2*n)%n]
		if tag == "" || strings.EqualFold(c.Tag, tag) {
			out = append(out, c)
		}
	}
	return out
}

// Forget drops a database's activity (after it is deleted).
func (t *Tracker) Forget(db string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.dbs, strings.ToLower(db))
}
