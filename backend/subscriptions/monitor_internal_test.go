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
