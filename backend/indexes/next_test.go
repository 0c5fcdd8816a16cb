package indexes

import (
	"strings"
	"testing"
	"time"
)

// Next agrees with Decide on a controllable clock: before the time it
// names, Decide does nothing; at it, Decide takes the action Next named (or
// keeps the index when Next said so); static, disabled and superseded
// indexes get their fixed answers.
func TestCleanupNext(t *testing.T) {
	cfg := DefaultConfig()
	normal := Usage{Name: "Auto/Orders/ByName", Collection: "Orders", Auto: true, Created: t0, LastQueried: t0.Add(time.Minute)}
	busy := map[string]time.Time{"orders": t0.Add(20 * time.Minute)}

	act, at, why := Next(t0.Add(10*time.Minute), cfg, t0, normal, time.Time{})
	if act != ActionIdle || !at.Equal(t0.Add(31*time.Minute)) || !strings.Contains(why, KeyIdleAfter) || !strings.Contains(why, "only if collection Orders is queried") {
		t.Fatalf("normal: %s %v %q", act, at, why)
	}
	if d := Decide(at.Add(-time.Second), cfg, t0, []Usage{normal}, busy); len(d) != 0 {
		t.Fatalf("Decide acted before Next's time: %+v", d)
	}
	if d := Decide(at.Add(time.Second), cfg, t0, []Usage{normal}, busy); len(d) != 1 || d[0].Action != act {
		t.Fatalf("Decide at Next's time: %+v", d)
	}
	// Past the time with the collection queried: due at the next pass.
	act, _, why = Next(t0.Add(40*time.Minute), cfg, t0, normal, busy["orders"])
	if act != ActionIdle || !strings.Contains(why, "next pass") || !strings.Contains(why, "was queried through other indexes") {
		t.Fatalf("due: %s %q", act, why)
	}
	// Past the time with a quiet collection: kept, as Decide keeps it.
	act, _, why = Next(t0.Add(40*time.Minute), cfg, t0, normal, time.Time{})
	if act != ActionKeep || !strings.Contains(why, "may not be running") {
		t.Fatalf("quiet: %s %q", act, why)
	}
	if d := Decide(t0.Add(40*time.Minute), cfg, t0, []Usage{normal}, nil); len(d) != 1 || d[0].Action != ActionKeep {
		t.Fatalf("Decide on a quiet collection: %+v", d)
	}

	idle := normal
	idle.State = "Idle"
	act, at, why = Next(t0.Add(time.Hour), cfg, t0, idle, time.Time{})
	if act != ActionDelete || !at.Equal(t0.Add(time.Minute+72*time.Hour)) || !strings.Contains(why, KeyDeleteAfter) {
		t.Fatalf("idle: %s %v %q", act, at, why)
	}
	if d := Decide(at.Add(time.Second), cfg, t0, []Usage{idle}, map[string]time.Time{"orders": t0.Add(70 * time.Hour)}); len(d) != 1 || d[0].Action != ActionDelete {
		t.Fatalf("Decide at the idle index's time: %+v", d)
	}
	// Never queried: counted from the later of creation and the record's start.
	fresh := Usage{Name: "Auto/Pets/ByName", Collection: "Pets", Auto: true, Created: t0}
	if _, at, why = Next(t0, cfg, t0.Add(time.Hour), fresh, time.Time{}); !at.Equal(t0.Add(90*time.Minute)) || !strings.Contains(why, "never queried") {
		t.Fatalf("fresh: %v %q", at, why)
	}
	// Per-database configuration moves the time.
	short, err := ParseConfig(map[string]string{KeyIdleAfter: "5"})
	if err != nil {
		t.Fatal(err)
	}
	if _, at, _ = Next(t0, short, t0, normal, time.Time{}); !at.Equal(t0.Add(6 * time.Minute)) {
		t.Fatalf("5-minute idle: %v", at)
	}

	for _, tc := range []struct {
		u    Usage
		act  string
		like string
	}{
		{Usage{Name: "Orders/Totals", Collection: "Orders", Created: t0}, ActionNever, "static"},
		{Usage{Name: "Auto/Orders/ByTotal", Collection: "Orders", Auto: true, State: "Disabled", Created: t0}, ActionNever, "disabled"},
		{Usage{Name: "Auto/Orders/ByName", Collection: "Orders", Auto: true, Superseded: "Auto/Orders/ByNameAndTotal"}, ActionDelete, "superseded by Auto/Orders/ByNameAndTotal"},
	} {
		act, at, why := Next(t0.Add(100*time.Hour), cfg, t0, tc.u, time.Time{})
		if act != tc.act || !at.IsZero() || !strings.Contains(why, tc.like) {
			t.Fatalf("%s: %s %v %q", tc.u.Name, act, at, why)
		}
	}
}
