package ids

import (
	"context"
	"math"
	"strconv"
	"strings"

	"github.com/rookerydb/rookery/backend/dberr"
)

// IdentityName normalises an identity name: lower-cased, ending with '|'.
func IdentityName(name string) string {
	name = strings.ToLower(name)
	if !strings.HasSuffix(name, "|") {
		name += "|"
	}
	return name
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

// Source hands out identity values cluster-wide (the Raft log): every value
// it returns is returned once.
type Source interface {
	// NextIdentities increments each prefix's counter (in one step) and
	// returns the new values, one per entry.
	NextIdentities(ctx context.Context, db string, prefixes []string) ([]int64, error)
	// ClaimIdentity moves the counter to max(counter+1, atLeast) and
	// returns it.
	ClaimIdentity(ctx context.Context, db, prefix string, atLeast int64) (int64, error)
}

// maxClaims bounds the claim rounds of one value (each is a log entry).
const maxClaims = 64

// TakeFree takes one value per prefix (each ending with '|', in the case the
// final id keeps) such that no document prefix+sep+value exists here. The
// values come from src in one step; a value whose document exists is skipped
// by probing (NextFree) and the counter is moved past it through src, so the
// values stay unique cluster-wide. exists reads this node's documents. It
// returns the values and the number of existence probes made.
func TakeFree(ctx context.Context, src Source, db, sep string, exists func(id string) (bool, error), prefixes []string) ([]int64, int, error) {
	values, err := src.NextIdentities(ctx, db, prefixes)
	if err != nil {
		return nil, 0, err
	}
	probes := 0
	for i, prefix := range prefixes {
		taken := func(n int64) (bool, error) { return exists(IdentityID(prefix, sep, n)) }
		v := values[i]
		for round := 0; ; round++ {
			busy, err := taken(v)
			probes++
			if err != nil {
				return nil, probes, err
			}
			if !busy {
				break
			}
			if round == maxClaims {
				return nil, probes, dberr.New(dberr.Unavailable, "could not find a free value for identity %s after %d rounds", prefix, maxClaims)
			}
			free, more, err := NextFree(v, taken)
			probes += more
			if err != nil {
				return nil, probes, err
			}
			// Claim it through the log: another writer may have taken it
			// meanwhile, in which case the claim returns a newer value to
			// check.
			if v, err = src.ClaimIdentity(ctx, db, prefix, free); err != nil {
				return nil, probes, err
			}
		}
		values[i] = v
	}
	return values, probes, nil
}
