package client

import (
	"context"
	"net/http"
	"net/url"
)

// Counters: the store-level operations of RavenDB's CounterBatchOperation
// and GetCountersOperation (POST and GET /databases/{db}/counters).

// CounterDetail is one counter of a document. Values, with full details,
// holds each database copy's part keyed "TAG:ETAG-DBID".
type CounterDetail struct {
	DocumentID string           `json:"DocumentId"`
	Name       string           `json:"CounterName"`
	Total      int64            `json:"TotalValue"`
	Etag       int64            `json:"Etag"`
	Values     map[string]int64 `json:"CounterValues"`
}

// CounterOp is one counter operation: Type "Increment" (with Delta),
// "Delete" or "Get".
type CounterOp struct {
	Type        string `json:"Type"`
	CounterName string `json:"CounterName"`
	Delta       int64  `json:"Delta,omitempty"`
}

// IncrementCounter adds delta to a counter of an existing document and
// returns its new total.
func (s *DocumentStore) IncrementCounter(ctx context.Context, docID, name string, delta int64) (int64, error) {
	out, err := s.CounterBatch(ctx, docID, []CounterOp{{Type: "Increment", CounterName: name, Delta: delta}})
	if err != nil || len(out) == 0 {
		return 0, err
	}
	return out[0].Total, nil
}

// DeleteCounter deletes a counter of a document (a missing one is no error).
func (s *DocumentStore) DeleteCounter(ctx context.Context, docID, name string) error {
	_, err := s.CounterBatch(ctx, docID, []CounterOp{{Type: "Delete", CounterName: name}})
	return err
}

// CounterBatch runs counter operations on one document in one transaction
// and returns the counters they incremented or read.
func (s *DocumentStore) CounterBatch(ctx context.Context, docID string, ops []CounterOp) ([]CounterDetail, error) {
	in := map[string]any{"Documents": []any{map[string]any{"DocumentId": docID, "Operations": ops}}}
	var out struct{ Counters []CounterDetail }
	if err := s.dbCallBody(ctx, http.MethodPost, "/counters", in, &out); err != nil {
		return nil, err
	}
	return out.Counters, nil
}

// GetCounters reads counters of a document: all of them when names is
// empty, else the named ones in order (nil for a missing one). full adds
// each copy's part.
func (s *DocumentStore) GetCounters(ctx context.Context, docID string, full bool, names ...string) ([]*CounterDetail, error) {
	q := url.Values{"docId": {docID}}
	for _, n := range names {
		q.Add("counter", n)
	}
	if full {
		q.Set("full", "true")
	}
	var out struct{ Counters []*CounterDetail }
	if err := s.dbCall(ctx, http.MethodGet, "/counters", q.Encode(), &out); err != nil {
		return nil, err
	}
	return out.Counters, nil
}
