package indexes

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func decide(now time.Time, u []Usage, coll map[string]time.Time) map[string]Decision {
	out := map[string]Decision{}
	for _, d := range Decide(now, DefaultConfig(), t0, u, coll) {
		out[d.Index] = d
	}
	return out
}

// The seed's rule with a controllable clock: an auto index unused for 30
// minutes goes Idle only if its collection was queried meanwhile through
// other indexes; an Idle one is deleted after 72 hours on the same
// condition; a stopped application (nothing queries the collection) loses
// nothing; an Idle index queried again is Normal; static and disabled
// indexes are never touched.
func TestCleanupRules(t *testing.T) {
	orders := Usage{Name: "Auto/Orders/ByName", Collection: "Orders", Auto: true, Created: t0, LastQueried: t0.Add(time.Minute)}
	static := Usage{Name: "Orders/Totals", Collection: "Orders", Created: t0}
	disabled := Usage{Name: "Auto/Orders/ByTotal", Collection: "Orders", Auto: true, State: "Disabled", Created: t0}
	all := []Usage{orders, static, disabled}

	// 29 minutes after its last query: nothing to decide.
	if d := decide(t0.Add(30*time.Minute), all, map[string]time.Time{"orders": t0.Add(20 * time.Minute)}); len(d) != 0 {
		t.Fatalf("decided early: %+v", d)
	}
	// 31 minutes, the collection queried through another index: Idle.
	d := decide(t0.Add(32*time.Minute), all, map[string]time.Time{"orders": t0.Add(20 * time.Minute)})
	if d[orders.Name].Action != ActionIdle || len(d) != 1 || !strings.Contains(d[orders.Name].Reason, KeyIdleAfter) {
		t.Fatalf("idle: %+v", d)
	}
	// 31 minutes, nobody queried the collection since: kept, and why.
	for _, coll := range []map[string]time.Time{{}, {"orders": t0.Add(time.Minute)}} {
		d = decide(t0.Add(32*time.Minute), all, coll)
		if d[orders.Name].Action != ActionKeep || d[orders.Name].Code != "collection-quiet" || !strings.Contains(d[orders.Name].Reason, "may not be running") {
			t.Fatalf("quiet collection %v: %+v", coll, d)
		}
	}
	// Idle: queried again within 30 minutes → Normal.
	idle := orders
	idle.State = "Idle"
	idle.LastQueried = t0.Add(10 * time.Hour)
	if d := decide(t0.Add(10*time.Hour+time.Minute), []Usage{idle}, nil); d[idle.Name].Action != ActionNormal {
		t.Fatalf("queried again: %+v", d)
	}
	// Idle and unused for 71 hours: waits.
	idle.LastQueried = t0.Add(time.Minute)
	if d := decide(t0.Add(71*time.Hour), []Usage{idle}, map[string]time.Time{"orders": t0.Add(70 * time.Hour)}); len(d) != 0 {
		t.Fatalf("deleted early: %+v", d)
	}
	// 72 hours, the collection busy through other indexes: deleted.
	d = decide(t0.Add(73*time.Hour), []Usage{idle}, map[string]time.Time{"orders": t0.Add(70 * time.Hour)})
	if d[idle.Name].Action != ActionDelete || !strings.Contains(d[idle.Name].Reason, KeyDeleteAfter) {
		t.Fatalf("delete: %+v", d)
	}
	// 72 hours, the application stopped: kept.
	d = decide(t0.Add(73*time.Hour), []Usage{idle}, map[string]time.Time{"orders": t0.Add(time.Minute)})
	if d[idle.Name].Action != ActionKeep || d[idle.Name].Code != "idle-collection-quiet" {
		t.Fatalf("stopped application: %+v", d)
	}
}

// A restart does not make indexes look unused: time counts from the
// latest start of the reporting nodes when that is later.
func TestCleanupCountsFromStart(t *testing.T) {
	u := Usage{Name: "Auto/Orders/ByName", Collection: "Orders", Auto: true, Created: t0}
	restart := t0.Add(5 * time.Hour)
	got := Decide(restart.Add(20*time.Minute), DefaultConfig(), restart, []Usage{u}, map[string]time.Time{"orders": restart.Add(10 * time.Minute)})
	if len(got) != 0 {
		t.Fatalf("decided 20 minutes after a restart: %+v", got)
	}
	got = Decide(restart.Add(31*time.Minute), DefaultConfig(), restart, []Usage{u}, map[string]time.Time{"orders": restart.Add(10 * time.Minute)})
	if len(got) != 1 || got[0].Action != ActionIdle {
		t.Fatalf("after 31 minutes: %+v", got)
	}
}

// A superseded auto index is deleted once the wider one has been caught
// up for the grace period, and kept (with the reason) until then.
func TestCleanupSuperseded(t *testing.T) {
	narrow := Usage{Name: "Auto/Orders/ByName", Collection: "Orders", Auto: true, Created: t0, Superseded: "Auto/Orders/ByNameAndTotal"}
	wide := Usage{Name: "Auto/Orders/ByNameAndTotal", Collection: "Orders", Auto: true, Created: t0.Add(time.Minute), LastQueried: t0.Add(time.Minute)}
	now := t0.Add(2 * time.Minute)
	if d := decide(now, []Usage{narrow, wide}, nil); d[narrow.Name].Code != "superseded-waiting" {
		t.Fatalf("waiting: %+v", d)
	}
	wide.CaughtUpAt = now.Add(-10 * time.Second)
	if d := decide(now, []Usage{narrow, wide}, nil); d[narrow.Name].Code != "superseded-grace" {
		t.Fatalf("grace: %+v", d)
	}
	wide.CaughtUpAt = now.Add(-16 * time.Second)
	if d := decide(now, []Usage{narrow, wide}, nil); d[narrow.Name].Action != ActionDelete || d[narrow.Name].Code != "superseded" {
		t.Fatalf("delete superseded: %+v", d)
	}
}

// The per-database keys are read with RavenDB's units; bad values are
// refused with the key's name.
func TestParseConfig(t *testing.T) {
	c, err := ParseConfig(map[string]string{KeyIdleAfter: "1", KeyDeleteAfter: "0.5", KeySupersededGrace: "2", "Other": "x"})
	if err != nil || c.IdleAfter != time.Minute || c.DeleteAfter != 30*time.Minute || c.SupersededGrace != 2*time.Second {
		t.Fatalf("%+v %v", c, err)
	}
	if c, _ := ParseConfig(nil); c != DefaultConfig() {
		t.Fatalf("defaults %+v", c)
	}
	if _, err := ParseConfig(map[string]string{KeyIdleAfter: "soon"}); err == nil || !strings.Contains(err.Error(), KeyIdleAfter) {
		t.Fatalf("bad value: %v", err)
	}
}

// The tracker records index and collection query times per database; the
// merge of node reports keeps the latest of each and the latest start.
func TestTrackerMerge(t *testing.T) {
	a := NewTracker(t0)
	a.Queried("Shop", "Auto/Orders/ByName", "Orders", t0.Add(time.Minute))
	a.Queried("Shop", "", "Orders", t0.Add(3*time.Minute))
	a.Queried("Other", "X", "Y", t0.Add(time.Hour))
	b := NewTracker(t0.Add(30 * time.Second))
	b.Queried("shop", "auto/orders/byname", "orders", t0.Add(2*time.Minute))
	m := Merge(a.Report("shop"), b.Report("SHOP"))
	if !m.Started.Equal(t0.Add(30*time.Second)) || !m.Indexes["auto/orders/byname"].Equal(t0.Add(2*time.Minute)) ||
		!m.Collections["orders"].Equal(t0.Add(3*time.Minute)) || len(m.Indexes) != 1 {
		t.Fatalf("merge %+v", m)
	}
	a.Forget("shop")
	if r := a.Report("shop"); len(r.Indexes)+len(r.Collections) != 0 || len(a.Report("other").Indexes) != 1 {
		t.Fatalf("forget: %+v", r)
	}
}
