package conflicts

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/storage"
)

// Decision is a strategy's answer for one conflicted id.
type Decision struct {
	Resolution storage.Resolution
	// Winner is the index of the chosen version among those given, or -1
	// when a script merged them.
	Winner int
	// Declined: the strategy left the conflict for a person (manual, or a
	// script that returned null).
	Declined bool
}

// Decide applies a strategy to the versions of one conflicted id. nodeTag
// is the node deciding (for local). It fails only on script errors.
func (r *Engine) Decide(ctx context.Context, strategy, script, nodeTag string, versions []storage.Version) (Decision, error) {
	if len(versions) == 0 {
		return Decision{Declined: true}, nil
	}
	switch {
	case strategy == Manual:
		return Decision{Declined: true, Winner: -1}, nil
	case strategy == Local:
		return pick(versions, preferNode(versions, nodeTag), Local), nil
	case strings.HasPrefix(strategy, Node+":"):
		return pick(versions, preferNode(versions, strategy[len(Node)+1:]), strategy), nil
	case strategy == Script:
		return r.runScript(ctx, script, versions)
	}
	return pick(versions, latest(versions, all(len(versions))), Latest), nil
}

func pick(versions []storage.Version, i int, strategy string) Decision {
	v := versions[i]
	return Decision{Winner: i, Resolution: storage.Resolution{
		Tombstone: v.Tombstone, Body: v.Body, LastModified: v.LastModified, Strategy: strategy,
	}}
}

func all(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// latest picks, among the candidate indexes, the version with the greatest
// last-modified time. Ties go to the smallest change vector string, so that
// every copy picks the same version whatever order it holds them in.
func latest(versions []storage.Version, candidates []int) int {
	sorted := append([]int(nil), candidates...)
	sort.SliceStable(sorted, func(a, b int) bool {
		return versions[sorted[a]].ChangeVector < versions[sorted[b]].ChangeVector
	})
	best := sorted[0]
	for _, i := range sorted[1:] {
		if versions[i].LastModified.After(versions[best].LastModified) {
			best = i
		}
	}
	return best
}

// preferNode picks the version that carries the named node's most recent
// write: the highest etag among its change vector's entries for that tag.
// Versions that tie (or when no version has seen the node) are decided by
// latest. The answer depends only on the versions, so every copy agrees.
func preferNode(versions []storage.Version, tag string) int {
	var best int64 = -1
	var cands []int
	for i, v := range versions {
		var e int64
		cv, _ := changevector.ParseStored(v.ChangeVector)
		for _, en := range cv {
			if en.Tag == tag && en.Etag > e {
				e = en.Etag
			}
		}
		switch {
		case e > best:
			best, cands = e, []int{i}
		case e == best:
			cands = append(cands, i)
		}
	}
	return latest(versions, cands)
}

// maxModified is the newest last-modified among the versions: a merged
// result's time, the same on every copy.
func maxModified(versions []storage.Version) time.Time {
	var t time.Time
	for _, v := range versions {
		if v.LastModified.After(t) {
			t = v.LastModified
		}
	}
	return t
}
