package conflicts

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rookerydb/rookery/backend/natural"
	"github.com/rookerydb/rookery/backend/storage"
)

// List returns every conflicted id matching f, in natural id order
// (carts/2 before carts/10; case ignored). It reads one summary row per id
// (no bodies), so a page of the list costs a scan of the conflicted ids.
func List(ctx context.Context, st Store, f storage.ConflictFilter) ([]storage.ConflictSummary, error) {
	f.AfterKey = ""
	list, _, err := st.ConflictList(ctx, f, -1)
	if err != nil {
		return nil, err
	}
	SortNatural(list)
	return list, nil
}

// SortNatural sorts conflicted ids in natural order of their lower-cased
// ids.
func SortNatural(list []storage.ConflictSummary) {
	slices.SortFunc(list, func(a, b storage.ConflictSummary) int {
		return natural.Compare(storage.LowerID(a.ID), storage.LowerID(b.ID))
	})
}

// PageAfter returns up to n entries of a naturally sorted list that come
// after the lower-cased id after ("" from the start), and whether more
// follow.
func PageAfter(list []storage.ConflictSummary, after string, n int) ([]storage.ConflictSummary, bool) {
	start := 0
	if after != "" {
		start = sort.Search(len(list), func(i int) bool { return natural.Compare(storage.LowerID(list[i].ID), after) > 0 })
	}
	end := min(len(list), start+n)
	return list[start:end], end < len(list)
}

// CollectionSummary is what the configured strategy would do to one
// collection's conflicts.
type CollectionSummary struct {
	Collection string
	Count      int
	Strategy   string // the configured strategy (latest, manual, node:B, script)
	// Outcomes, as PreviewItem.Outcome: resolved to one of the versions as
	// it is, to a deletion, merged by a script, left for a person, failed.
	ToVersion  int
	ToDeletion int
	Merged     int
	Declined   int
	Errors     int
	LastError  string `json:",omitempty"`
}

// VersionKind says which version the strategy keeps when it keeps one as
// it is ("the newest version", "node B's version", "a script's pick").
func VersionKind(strategy string) string {
	switch {
	case strategy == Latest:
		return "the newest version"
	case strings.HasPrefix(strategy, Node+":"):
		return "node " + strategy[len(Node)+1:] + "'s version"
	case strategy == Local:
		return "this node's version"
	case strategy == Script:
		return "a version the script picked"
	}
	return "one of the versions"
}

// Summary is the per-collection summary of a database's conflicts under
// its configured strategies.
type Summary struct {
	Collections []CollectionSummary // in natural order of their names
	Total       int
	At          time.Time // when it was computed
}

type cachedSummary struct {
	state string
	at    time.Time
	sum   Summary
}

// SummaryMaxAge is how long a summary is reused while the conflicts keep
// changing: under a stream of new conflicts it is recomputed at most this
// often (it decides every conflict, scripts included).
const SummaryMaxAge = 2 * time.Second

// Summary tells, per collection, how many conflicted ids there are and
// what each collection's configured strategy would do with them. It
// decides every conflict (reading its versions chunk by chunk) and writes
// nothing. The answer is cached per database: reused as long as the
// conflicts and the configuration are the same, and for SummaryMaxAge
// while they change.
func (m *Manager) Summary(ctx context.Context, st Store) (Summary, error) {
	list, err := List(ctx, st, storage.ConflictFilter{})
	if err != nil {
		return Summary{}, err
	}
	state := m.summaryState(st.Name(), list)
	m.sumMu.Lock()
	c := m.summaries[strings.ToLower(st.Name())]
	m.sumMu.Unlock()
	if c != nil && (c.state == state || time.Since(c.at) < SummaryMaxAge) {
		return c.sum, nil
	}
	sum, err := m.summarize(ctx, st, list)
	if err != nil {
		return Summary{}, err
	}
	m.sumMu.Lock()
	if m.summaries == nil {
		m.summaries = map[string]*cachedSummary{}
	}
	m.summaries[strings.ToLower(st.Name())] = &cachedSummary{state: state, at: time.Now(), sum: sum}
	m.sumMu.Unlock()
	return sum, nil
}

// summaryState identifies the conflicts (each id with its newest etag and
// version count) and the configuration a summary was computed from.
func (m *Manager) summaryState(db string, list []storage.ConflictSummary) string {
	h := sha256.New()
	if m.Auto != nil {
		b, _ := json.Marshal(m.Auto.Config(db))
		h.Write(b)
	}
	var n [16]byte
	for _, c := range list {
		h.Write([]byte(c.ID))
		binary.LittleEndian.PutUint64(n[:8], uint64(c.LargestEtag))
		binary.LittleEndian.PutUint64(n[8:], uint64(c.Versions))
		h.Write(n[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

func (m *Manager) summarize(ctx context.Context, st Store, list []storage.ConflictSummary) (Summary, error) {
	chunk := m.Chunk
	if chunk <= 0 {
		chunk = 256
	}
	spec := Spec{Strategy: Configured}
	by := map[string]*CollectionSummary{}
	sum := Summary{At: time.Now().UTC()}
	for start := 0; start < len(list); start += chunk {
		part := list[start:min(len(list), start+chunk)]
		ids := make([]string, len(part))
		for i, c := range part {
			ids[i] = c.ID
		}
		versions, err := st.ConflictVersions(ctx, ids)
		if err != nil {
			return Summary{}, err
		}
		for _, id := range ids {
			vs := versions[storage.LowerID(id)]
			if len(vs) == 0 {
				continue // resolved meanwhile
			}
			strategy, d, err := m.decide(ctx, st, spec, vs)
			if err != nil && ctx.Err() != nil {
				return Summary{}, ctx.Err()
			}
			key := strings.ToLower(vs[0].Collection)
			cs := by[key]
			if cs == nil {
				cs = &CollectionSummary{Collection: vs[0].Collection, Strategy: strategy}
				by[key] = cs
			}
			cs.Count++
			sum.Total++
			it := PreviewItem{Winner: d.Winner, Declined: d.Declined}
			if err != nil {
				it.Error = err.Error()
			} else if !d.Declined {
				it.Result = &d.Resolution
			}
			switch it.Outcome() {
			case OutcomeError:
				cs.Errors++
				cs.LastError = vs[0].ID + ": " + it.Error
			case OutcomeDeclined:
				cs.Declined++
			case OutcomeDeletion:
				cs.ToDeletion++
			case OutcomeMerged:
				cs.Merged++
			default:
				cs.ToVersion++
			}
		}
	}
	for _, cs := range by {
		sum.Collections = append(sum.Collections, *cs)
	}
	slices.SortFunc(sum.Collections, func(a, b CollectionSummary) int {
		return natural.Compare(strings.ToLower(a.Collection), strings.ToLower(b.Collection))
	})
	return sum, nil
}
