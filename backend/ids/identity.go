package ids

import (
	"math"
	"strconv"
	"strings"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
)

// IdentityName normalises an identity name: lower-cased, ending with '|'.
func IdentityName(name string) string {
	name = strings.ToLower(name)
	if !strings.HasSuffix(name, "|") {
		name += "|"
	}
	return name
}

// IdentityTx is what identities need from a write transaction.
type IdentityTx interface {
	Identity(name string) (int64, error)
	SetIdentity(name string, value int64) error
	Exists(id string) (bool, error)
	Separator() string
}

// IdentityID builds the document id for value of the identity whose id
// prefix (with the '|' still on) is prefix: "companies|" → "companies/7".
// The prefix keeps its case.
func IdentityID(prefix, sep string, value int64) string {
	return strings.TrimSuffix(prefix, "|") + sep + strconv.FormatInt(value, 10)
}

// NextFree finds a value above busy (a value known to be taken) whose
// document does not exist. It probes exponentially upward from busy until it
// meets a free value, then binary-searches between the last taken and the
// first free value for the boundary, so it needs about 2·log2(n) probes when
// n values are taken. It returns the value and the number of probes made.
func NextFree(busy int64, taken func(int64) (bool, error)) (int64, int, error) {
	lastBusy := busy
	step := int64(1)
	probes := 0
	var free int64
	for {
		if lastBusy > math.MaxInt64-step {
			return 0, probes, dberr.New(dberr.InvalidOperation, "identity space exhausted above %d", busy)
		}
		candidate := lastBusy + step
		probes++
		t, err := taken(candidate)
		if err != nil {
			return 0, probes, err
		}
		if !t {
			free = candidate
			break
		}
		lastBusy = candidate
		if step < math.MaxInt64/2 {
			step *= 2
		}
	}
	// Invariant: lastBusy is taken, free is free.
	for free-lastBusy > 1 {
		mid := lastBusy + (free-lastBusy)/2
		probes++
		t, err := taken(mid)
		if err != nil {
			return 0, probes, err
		}
		if t {
			lastBusy = mid
		} else {
			free = mid
		}
	}
	return free, probes, nil
}

// Local keeps identity counters in the database file, updated in the same
// transaction as the documents that use them.
type Local struct{}

// Take reserves one value for each entry of prefixes (each ending with '|',
// in the case the caller wants in the final id; the same prefix may appear
// more than once and then gets consecutive values). A value whose document
// already exists is never returned: the counter moves past it. All of it
// happens in tx, so the values and the documents commit together.
func (Local) Take(tx *storage.Tx, prefixes []string) ([]int64, error) {
	values, probes, err := Take(tx, prefixes)
	if err == nil {
		m := tx.Metrics()
		m.IdentityProbes.Add(float64(probes))
		m.IdentityCalls.WithLabelValues("next").Add(float64(len(prefixes)))
	}
	return values, err
}

// Take is Local.Take for any transaction that offers IdentityTx; it also
// returns how many existence probes it made.
func Take(tx IdentityTx, prefixes []string) ([]int64, int, error) {
	total := 0
	out := make([]int64, len(prefixes))
	sep := tx.Separator()
	for i, prefix := range prefixes {
		name := IdentityName(prefix)
		cur, err := tx.Identity(name)
		if err != nil {
			return nil, total, err
		}
		if cur == math.MaxInt64 {
			return nil, total, dberr.New(dberr.InvalidOperation, "identity %s is exhausted", name)
		}
		v := cur + 1
		taken := func(n int64) (bool, error) { return tx.Exists(IdentityID(prefix, sep, n)) }
		exists, err := taken(v)
		total++
		if err != nil {
			return nil, total, err
		}
		if exists {
			var more int
			v, more, err = NextFree(v, taken)
			total += more
			if err != nil {
				return nil, total, err
			}
		}
		if err := tx.SetIdentity(name, v); err != nil {
			return nil, total, err
		}
		out[i] = v
	}
	return out, total, nil
}

// Seed sets an identity: without force to max(current, value) (add-max),
// with force to exactly value. It returns the resulting value.
func (Local) Seed(tx *storage.Tx, name string, value int64, force bool) (int64, error) {
	v, err := Seed(tx, name, value, force)
	if err == nil {
		tx.Metrics().IdentityCalls.WithLabelValues("seed").Inc()
	}
	return v, err
}

// Seed is Local.Seed for any transaction that offers IdentityTx.
func Seed(tx IdentityTx, name string, value int64, force bool) (int64, error) {
	name = IdentityName(name)
	cur, err := tx.Identity(name)
	if err != nil {
		return 0, err
	}
	if !force && cur >= value {
		return cur, nil
	}
	if err := tx.SetIdentity(name, value); err != nil {
		return 0, err
	}
	return value, nil
}
