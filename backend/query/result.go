package query

import (
	"encoding/json"
	"time"

	"github.com/rookerydb/rookery/backend/document"
)

// Result is a query's answer. It marshals to the response of POST /queries
// (reference §1.2), fields in RavenDB's order; Results is never null and
// Includes is {} when empty.
type Result struct {
	TotalResults   int64
	SkippedResults int64
	DurationInMs   int64
	IncludedPaths  []string // null when the query includes nothing
	IndexName      string
	Results        []json.RawMessage
	Includes       Includes
	IndexTimestamp time.Time
	LastQueryTime  time.Time
	IsStale        bool
	ResultEtag     int64
	NodeTag        string
	Timings        *Timings // only with include timings()
	// CounterIncludes and IncludedCounterNames answer include counters()
	// (counters.go); nil without it.
	CounterIncludes      json.RawMessage
	IncludedCounterNames map[string][]string
	// CompareExchangeValueIncludes answers include cmpxchg() (cmpxchg.go):
	// key → {"Key","Index","Value"}; nil without it.
	CompareExchangeValueIncludes json.RawMessage

	// Plan says how the query was served, for the studio; not on the wire.
	Plan Plan `json:"-"`
}

// Plan is which index served a query and why.
type Plan struct {
	// Index is the index (or collection/<Name>, AllDocs) that served it.
	Index string
	// Why: "collection scan", "id lookup", "used <index>", "created
	// <index>", "extended <old> into <new>", "static index".
	Why string
	// Superseded are the auto indexes this query's new index replaced.
	Superseded []string
	// StaleReasons are the index's reasons when the result is stale.
	StaleReasons []string
}

// Included is one included document.
type Included struct {
	ID  string
	Doc json.RawMessage
}

// Includes are the included documents, id → document, in the order they
// were found.
type Includes []Included

// MarshalJSON writes an object (never null).
func (in Includes) MarshalJSON() ([]byte, error) {
	buf := []byte{'{'}
	for i, d := range in {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = document.AppendString(buf, d.ID)
		buf = append(buf, ':')
		buf = append(buf, d.Doc...)
	}
	return append(buf, '}'), nil
}

// Timings is the answer to include timings(): a tree of durations
// ({"DurationInMs": n, "Timings": {"Stage": {...}}}).
type Timings struct {
	DurationInMs int64
	Timings      map[string]*Timings
}

type wireResult struct {
	TotalResults   int64
	SkippedResults int64
	DurationInMs   int64
	IncludedPaths  []string
	IndexName      string
	Results        []json.RawMessage
	Includes       Includes
	IndexTimestamp string
	LastQueryTime  string
	IsStale        bool
	ResultEtag     int64
	NodeTag        string
	Timings        *Timings `json:",omitempty"`

	CounterIncludes      json.RawMessage     `json:",omitempty"`
	IncludedCounterNames map[string][]string `json:",omitempty"`

	CompareExchangeValueIncludes json.RawMessage `json:",omitempty"`
}

// MarshalJSON writes the wire shape: dates in RavenDB's format (7
// fractional digits, Z), Results [] rather than null.
func (r *Result) MarshalJSON() ([]byte, error) {
	w := wireResult{
		TotalResults: r.TotalResults, SkippedResults: r.SkippedResults, DurationInMs: r.DurationInMs,
		IncludedPaths: r.IncludedPaths, IndexName: r.IndexName, Results: r.Results, Includes: r.Includes,
		IndexTimestamp: document.FormatTime(r.IndexTimestamp), LastQueryTime: document.FormatTime(r.LastQueryTime),
		IsStale: r.IsStale, ResultEtag: r.ResultEtag, NodeTag: r.NodeTag, Timings: r.Timings,
		CounterIncludes: r.CounterIncludes, IncludedCounterNames: r.IncludedCounterNames,
		CompareExchangeValueIncludes: r.CompareExchangeValueIncludes,
	}
	if w.Results == nil {
		w.Results = []json.RawMessage{}
	}
	return json.Marshal(w)
}
