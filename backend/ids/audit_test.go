package ids_test

import (
	"math"
	"testing"

	"github.com/rookerydb/rookery/backend/ids"
	"github.com/rookerydb/rookery/backend/storage"
)

func TestAuditIdentities(t *testing.T) {
	numbers := []storage.IDNumbers{
		{Prefix: "orders/", Docs: 12, MaxN: 12},
		{Prefix: "orders/", Suffix: "-A", Docs: 500, MaxN: 900}, // HiLo ids: not the identity's
		{Prefix: "companies/", Docs: 3, MaxN: 3},
		{Prefix: "dash-", Docs: 1, MaxN: 40},
	}
	cases := []struct {
		name     string
		counters map[string]int64
		sep      string
		want     map[string]ids.Audit
	}{
		{
			name:     "below an existing document",
			counters: map[string]int64{"orders|": 5},
			sep:      "/",
			want:     map[string]ids.Audit{"orders|": {Name: "orders|", Prefix: "orders/", Counter: 5, Docs: 12, MaxN: 12, Collides: true}},
		},
		{
			name:     "at the highest document",
			counters: map[string]int64{"companies|": 3},
			sep:      "/",
			want:     map[string]ids.Audit{"companies|": {Name: "companies|", Prefix: "companies/", Counter: 3, Docs: 3, MaxN: 3}},
		},
		{
			name:     "above the highest document",
			counters: map[string]int64{"companies|": 100},
			sep:      "/",
			want:     map[string]ids.Audit{"companies|": {Name: "companies|", Prefix: "companies/", Counter: 100, Docs: 3, MaxN: 3}},
		},
		{
			name:     "no documents; HiLo-shaped ids do not count",
			counters: map[string]int64{"users|": 0, "orders|": 20},
			sep:      "/",
			want: map[string]ids.Audit{
				"users|":  {Name: "users|", Prefix: "users/", Counter: 0},
				"orders|": {Name: "orders|", Prefix: "orders/", Counter: 20, Docs: 12, MaxN: 12},
			},
		},
		{
			name:     "custom separator",
			counters: map[string]int64{"dash|": 39},
			sep:      "-",
			want:     map[string]ids.Audit{"dash|": {Name: "dash|", Prefix: "dash-", Counter: 39, Docs: 1, MaxN: 40, Collides: true}},
		},
		{
			name:     "separator mismatch finds nothing",
			counters: map[string]int64{"orders|": 1},
			sep:      "-",
			want:     map[string]ids.Audit{"orders|": {Name: "orders|", Prefix: "orders-", Counter: 1}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ids.AuditIdentities(c.counters, c.sep, numbers)
			if len(got) != len(c.want) {
				t.Fatalf("got %d audits, want %d: %+v", len(got), len(c.want), got)
			}
			for i, a := range got {
				if i > 0 && got[i-1].Name >= a.Name {
					t.Fatalf("not in name order: %+v", got)
				}
				if w := c.want[a.Name]; a != w {
					t.Fatalf("%s: got %+v, want %+v", a.Name, a, w)
				}
				one := ids.AuditIdentity(a.Name, a.Counter, c.sep, numbers)
				if one != a {
					t.Fatalf("AuditIdentity %+v, AuditIdentities %+v", one, a)
				}
			}
		})
	}
	if a := ids.AuditIdentity("Orders", 2, "/", numbers); !a.Collides || a.Name != "orders|" || a.Ahead() != 10 {
		t.Fatalf("unnormalised name: %+v ahead %d", a, a.Ahead())
	}
	if a := ids.AuditIdentity("orders|", 50, "/", numbers); a.Ahead() != 0 {
		t.Fatalf("ahead of a safe counter: %d", a.Ahead())
	}
}

func TestNextIdentityValue(t *testing.T) {
	takenUpTo := func(top int64, gaps ...int64) func(int64) (bool, error) {
		return func(n int64) (bool, error) {
			for _, g := range gaps {
				if n == g {
					return false, nil
				}
			}
			return n <= top, nil
		}
	}
	cases := []struct {
		name    string
		counter int64
		exists  func(int64) (bool, error)
		want    int64
	}{
		{"free right away", 5, takenUpTo(5), 6},
		{"nothing exists", 0, takenUpTo(0), 1},
		{"taken run", 5, takenUpTo(12), 13},
		{"long taken run", 0, takenUpTo(1000), 1001},
		{"next is a gap", 5, takenUpTo(12, 6), 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, probes, err := ids.NextIdentityValue(c.counter, c.exists)
			if err != nil || got != c.want {
				t.Fatalf("got %d (%v), want %d", got, err, c.want)
			}
			if taken, _ := c.exists(got); taken {
				t.Fatalf("%d is taken", got)
			}
			if probes < 1 || probes > 40 {
				t.Fatalf("%d probes", probes)
			}
		})
	}
	if _, _, err := ids.NextIdentityValue(math.MaxInt64, takenUpTo(0)); err == nil {
		t.Fatal("no error at the top of the identity space")
	}
}
