package subscriptions

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func samples(now time.Time, backlog, acked, pos []int64) []sample {
	out := make([]sample, len(backlog))
	for i := range backlog {
		out[i] = sample{At: now.Add(time.Duration(i-len(backlog)+1) * time.Second), Backlog: backlog[i], Acked: acked[i], Position: pos[i], Connected: true}
	}
	return out
}

// The statuses over a window of samples.
func TestStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	th := DefaultThresholds
	recent := now.Add(-time.Second)
	cases := []struct {
		name      string
		win       []sample
		backlog   int64
		connected bool
		lastAck   *time.Time
		connect   time.Time
		want      string
	}{
		{"caught up", samples(now, []int64{0, 0, 0}, []int64{0, 0, 0}, []int64{5, 5, 5}), 0, false, nil, recent, OK},
		{"no worker", samples(now, []int64{9, 9, 9}, []int64{0, 0, 0}, []int64{5, 5, 5}), 9, false, nil, recent, Stopped},
		{"worker not acking", samples(now, []int64{9, 9, 9}, []int64{0, 0, 0}, []int64{5, 5, 5}), 9, true, nil, now.Add(-time.Minute), Stalled},
		{"worker just connected", samples(now, []int64{9, 9, 9}, []int64{0, 0, 0}, []int64{5, 5, 5}), 9, true, nil, recent, OK},
		{"falling behind", samples(now, []int64{10, 20, 30, 40, 50}, []int64{1, 2, 3, 4, 5}, []int64{1, 2, 3, 4, 5}), 50, true, &recent, recent, Slow},
		{"keeping up", samples(now, []int64{50, 40, 30, 20, 10}, []int64{1, 2, 3, 4, 5}, []int64{1, 2, 3, 4, 5}), 10, true, &recent, recent, OK},
		{"moved back", samples(now, []int64{0, 0, 100}, []int64{5, 5, 5}, []int64{100, 100, 0}), 100, true, &recent, recent, Rewound},
	}
	for _, c := range cases {
		st := &stats{lastConnect: c.connect}
		s := &Stats{Backlog: c.backlog, LastAck: c.lastAck}
		if got := status(c.win, s, c.connected, st, now, th); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// Each runaway rule flags what it should, with a reason, and a quiet
// database has no findings.
func TestFindings(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	th := DefaultThresholds
	var stats []Stats
	for i := range 30 {
		stats = append(stats, Stats{Name: fmt.Sprintf("page-%d", i), Query: "from Orders", Collection: "Orders", Start: BeginningOfTime, Created: now.Add(-10 * time.Second)})
	}
	stats = append(stats, Stats{Name: "nightly", Query: "from Invoices where Paid = false", Collection: "Invoices", Start: BeginningOfTime, Created: now.Add(-24 * time.Hour), rewinds: 12})
	reads := map[string]int64{"nightly": 100}
	for i := range 30 {
		reads[fmt.Sprintf("page-%d", i)] = 5000
	}
	churn := map[string][2]int{"page-0": {11, 12}}
	fs := findings(stats, th, now, reads, 160_000, churn)
	rules := map[string]map[string]string{}
	for _, f := range fs {
		if rules[f.Subscription] == nil {
			rules[f.Subscription] = map[string]string{}
		}
		rules[f.Subscription][f.Rule] = f.Reason
	}
	p := rules["page-7"]
	for _, r := range []string{RuleBurst, RuleDuplicate, RuleFromStart, RuleScan, RuleChurn} {
		if p[r] == "" {
			t.Errorf("page-7 not flagged %s: %v", r, p)
		}
	}
	if !strings.Contains(p[RuleBurst], "30 subscriptions were created in the last 60s") || !strings.Contains(p[RuleScan], "94%") {
		t.Errorf("reasons: %v", p)
	}
	if n := rules["nightly"]; len(n) != 1 || !strings.Contains(n[RuleFromStart], "moved back 12 times") {
		t.Errorf("nightly: %v", n)
	}
	if fs := findings(stats[:3], th, now.Add(time.Hour), map[string]int64{}, 0, nil); len(fs) != 0 {
		t.Errorf("quiet database flagged: %v", fs)
	}
}

// The trial's healthy subscription: the raw status flips between OK and
// SLOW (7 of 20 samples SLOW, never more than 3 in a row); with the
// hysteresis it is reported OK throughout. A backlog that keeps growing is
// SLOW once the condition held for the hold time, not before; it goes back
// to OK only after the condition cleared for as long, through flickers;
// STALLED, STOPPED and REWOUND are reported at once.
func TestHealthHysteresis(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	hold := 10 * time.Second
	var h health
	i := 0
	feed := func(raw string) string {
		got := h.next(raw, start.Add(time.Duration(i)*time.Second), hold)
		i++
		return got
	}
	flicker := "OSOOSSOOOSOOSSOOOSOO" // 7 S of 20
	if n := strings.Count(flicker, "S"); n != 7 {
		t.Fatalf("the sequence has %d SLOW samples", n)
	}
	for j, c := range flicker {
		raw := OK
		if c == 'S' {
			raw = Slow
		}
		if got := feed(raw); got != OK {
			t.Fatalf("flicker sample %d (%s): reported %s", j, raw, got)
		}
	}
	// Growing for real: OK for the first 10 samples (0..9 s), SLOW at 10 s.
	for j := 0; j < 10; j++ {
		if got := feed(Slow); got != OK {
			t.Fatalf("SLOW reported after %d s, before the hold", j)
		}
	}
	if got := feed(Slow); got != Slow {
		t.Fatalf("SLOW held for 10 s: reported %s", got)
	}
	// Recovering with flickers: a SLOW sample restarts the count.
	for j, raw := range []string{OK, OK, OK, OK, OK, Slow, OK, OK, OK, OK, OK, OK, OK, OK, OK, OK} {
		if got := feed(raw); got != Slow {
			t.Fatalf("recovery sample %d (%s): reported %s before OK held for 10 s", j, raw, got)
		}
	}
	if got := feed(OK); got != OK {
		t.Fatalf("OK held for 10 s: reported %s", got)
	}
	// Facts of the moment pass at once, from any status.
	for _, raw := range []string{Stalled, Stopped, Rewound, OK} {
		if got := feed(raw); got != raw {
			t.Fatalf("%s reported as %s", raw, got)
		}
	}
	feed(Slow)
	if got := feed(Stalled); got != Stalled {
		t.Fatalf("STALLED during a SLOW run reported as %s", got)
	}
}

// The raw status of a subscription keeping up while writes go on: its
// backlog is a sawtooth (a few documents arrive, the next batch takes
// them), so the window's last sample is often above its first. That is not
// SLOW; a backlog whose floor rises is.
func TestStatusSawtoothIsNotSlow(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	recent := now.Add(-time.Second)
	var backlog, acked, pos []int64
	for i := range 30 {
		backlog = append(backlog, int64([]int{0, 3, 7, 1, 0, 5}[i%6]))
		acked = append(acked, int64(10*i))
		pos = append(pos, int64(10*i))
	}
	backlog[0], backlog[29] = 0, 6 // the last sample above the first
	st := &stats{lastConnect: recent}
	s := &Stats{Backlog: 6, LastAck: &recent}
	if got := status(samples(now, backlog, acked, pos), s, true, st, now, DefaultThresholds); got != OK {
		t.Fatalf("sawtooth backlog: %s, want OK", got)
	}
	for i := range backlog {
		backlog[i] = int64(5 * i) // the floor rises
	}
	s.Backlog = backlog[29]
	if got := status(samples(now, backlog, acked, pos), s, true, st, now, DefaultThresholds); got != Slow {
		t.Fatalf("growing backlog: %s, want SLOW", got)
	}
}
