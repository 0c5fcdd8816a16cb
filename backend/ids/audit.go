package ids

import (
	"math"
	"sort"
	"strings"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
)

// Audit is what the identity audit found for one identity counter.
type Audit struct {
	Name    string // the identity, lower-cased, ending with '|' ("orders|")
	Prefix  string // the id prefix its documents use, separator included ("orders/")
	Counter int64  // the counter: the last value handed out or seeded
	Docs    int64  // documents named Prefix + N that exist
	MaxN    int64  // the highest N ever written under Prefix (0 when none)
	// Collides is true when a document above the counter exists (or
	// existed): the next values the counter hands out may already be taken.
	Collides bool
}

// Ahead is how many values above the counter the highest written id is
// (0 when the counter is at or above it).
func (a Audit) Ahead() int64 {
	if !a.Collides {
		return 0
	}
	return a.MaxN - a.Counter
}

// AuditIdentities compares every identity counter with the highest
// Prefix+N document id written (from the in-memory id figures, so it costs
// no reads): a counter below that number would hand out values whose
// documents are taken. counters is keyed by identity name as the database
// keeps it ("orders|"); sep is the database's identity parts separator;
// numbers are the database's id figures (storage.DB.IDNumbers("")). Only
// figures without a suffix count: "orders/7-A" is a HiLo id, not an
// identity one. The result is in name order.
func AuditIdentities(counters map[string]int64, sep string, numbers []storage.IDNumbers) []Audit {
	byPrefix := make(map[string]storage.IDNumbers, len(numbers))
	for _, n := range numbers {
		if n.Suffix == "" {
			byPrefix[n.Prefix] = n
		}
	}
	out := make([]Audit, 0, len(counters))
	for name, counter := range counters {
		out = append(out, auditOne(name, counter, sep, byPrefix))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// AuditIdentity is AuditIdentities for one counter; numbers may hold the
// figures of every prefix or only of this one.
func AuditIdentity(name string, counter int64, sep string, numbers []storage.IDNumbers) Audit {
	byPrefix := map[string]storage.IDNumbers{}
	for _, n := range numbers {
		if n.Suffix == "" {
			byPrefix[n.Prefix] = n
		}
	}
	return auditOne(name, counter, sep, byPrefix)
}

func auditOne(name string, counter int64, sep string, byPrefix map[string]storage.IDNumbers) Audit {
	name = IdentityName(name)
	prefix := strings.ToLower(strings.TrimSuffix(name, "|") + sep)
	a := Audit{Name: name, Prefix: prefix, Counter: counter}
	if n, ok := byPrefix[prefix]; ok {
		a.Docs, a.MaxN = n.Docs, n.MaxN
		a.Collides = n.MaxN > counter
	}
	return a
}

// NextIdentityValue is the value the next document of an identity would get
// (never an existing document's): counter+1 when that is free, otherwise
// the free value the server's probe finds. exists tells whether the
// document of a value exists. It also returns the probes made.
func NextIdentityValue(counter int64, exists func(int64) (bool, error)) (int64, int, error) {
	if counter == math.MaxInt64 {
		return 0, 0, dberr.New(dberr.InvalidOperation, "identity space exhausted at %d", counter)
	}
	v := counter + 1
	taken, err := exists(v)
	if err != nil || !taken {
		return v, 1, err
	}
	free, probes, err := NextFree(v, exists)
	return free, probes + 1, err
}
