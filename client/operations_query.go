package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// QueryOperationOptions tune PatchByQuery and DeleteByQuery.
type QueryOperationOptions struct {
	// AllowStale lets the operation run over a stale index; otherwise it
	// waits up to StaleTimeout for the index and fails if still stale.
	AllowStale   bool
	StaleTimeout time.Duration
	// MaxOpsPerSecond limits the rate (0: no limit).
	MaxOpsPerSecond int
	// RetrieveDetails asks for one entry per processed document in the
	// result.
	RetrieveDetails bool
}

func (o QueryOperationOptions) query() string {
	q := "allowStale=" + strconv.FormatBool(o.AllowStale) + "&details=" + strconv.FormatBool(o.RetrieveDetails)
	if o.MaxOpsPerSecond > 0 {
		q += "&maxOpsPerSec=" + strconv.Itoa(o.MaxOpsPerSecond)
	}
	if o.StaleTimeout > 0 {
		q += "&staleTimeout=" + strconv.FormatInt(o.StaleTimeout.Milliseconds(), 10)
	}
	return q
}

// Operation is a long-running server operation (patch or delete by query).
type Operation struct {
	ID      int64
	NodeTag string
	store   *DocumentStore
	// PollInterval is the wait between two state requests (500 ms, as the
	// npm client).
	PollInterval time.Duration
}

// ErrOperationCanceled: the operation was killed before it completed.
var ErrOperationCanceled = errors.New("rookery: the operation was canceled")

// OperationState is the answer of GET /operations/state.
type OperationState struct {
	Status   string          `json:"Status"` // InProgress, Completed, Faulted or Canceled
	Progress json.RawMessage `json:"Progress"`
	Result   json.RawMessage `json:"Result"`
}

// BulkOperationResult is the result of a completed patch or delete by query.
type BulkOperationResult struct {
	Total              int64             `json:"Total"`
	DocumentsProcessed int64             `json:"DocumentsProcessed"`
	Message            string            `json:"Message"`
	Query              string            `json:"Query"`
	Details            []json.RawMessage `json:"Details"`
}

// PatchByQuery runs the patch of an RQL query with an update clause
// ("from Orders update { this.Total *= 2 }") over every match, as a
// long-running operation (PATCH /queries).
func (s *DocumentStore) PatchByQuery(ctx context.Context, q IndexQuery, opts QueryOperationOptions) (*Operation, error) {
	if q.QueryParameters == nil {
		q.QueryParameters = map[string]any{}
	}
	return s.startOperation(ctx, http.MethodPatch, opts, map[string]any{"Query": q})
}

// DeleteByQuery deletes every document the query matches, as a
// long-running operation (DELETE /queries).
func (s *DocumentStore) DeleteByQuery(ctx context.Context, q IndexQuery, opts QueryOperationOptions) (*Operation, error) {
	if q.QueryParameters == nil {
		q.QueryParameters = map[string]any{}
	}
	return s.startOperation(ctx, http.MethodDelete, opts, q)
}

func (s *DocumentStore) startOperation(ctx context.Context, method string, opts QueryOperationOptions, body any) (*Operation, error) {
	resp, err := s.dbRequest(ctx, method, "/queries", opts.query(), body)
	if err != nil {
		return nil, err
	}
	var out struct {
		OperationID      int64  `json:"OperationId"`
		OperationNodeTag string `json:"OperationNodeTag"`
	}
	if err := decodeResponse(resp, method+" /queries", &out); err != nil {
		return nil, err
	}
	return &Operation{ID: out.OperationID, NodeTag: out.OperationNodeTag, store: s, PollInterval: 500 * time.Millisecond}, nil
}

// State asks the server for the operation's state once.
func (op *Operation) State(ctx context.Context) (*OperationState, error) {
	q := "id=" + strconv.FormatInt(op.ID, 10)
	if op.NodeTag != "" {
		q += "&nodeTag=" + url.QueryEscape(op.NodeTag)
	}
	resp, err := op.store.dbRequest(ctx, http.MethodGet, "/operations/state", q, nil)
	if err != nil {
		return nil, err
	}
	var st OperationState
	if err := decodeResponse(resp, "/operations/state", &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// WaitForCompletion polls the operation's state until it completes, and
// returns its result. A faulted operation returns the server's error (a
// *ServerError with its Type and Message); a killed one
// ErrOperationCanceled.
func (op *Operation) WaitForCompletion(ctx context.Context) (*BulkOperationResult, error) {
	interval := op.PollInterval
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	for {
		st, err := op.State(ctx)
		if err != nil {
			return nil, err
		}
		switch st.Status {
		case "Completed":
			var res BulkOperationResult
			if len(st.Result) > 0 && string(st.Result) != "null" {
				if err := json.Unmarshal(st.Result, &res); err != nil {
					return nil, fmt.Errorf("rookery: operation %d result: %w", op.ID, err)
				}
			}
			return &res, nil
		case "Canceled":
			return nil, ErrOperationCanceled
		case "Faulted":
			var fe struct {
				Type, Message, Error string
				StatusCode           int
			}
			_ = json.Unmarshal(st.Result, &fe)
			return nil, &ServerError{StatusCode: fe.StatusCode, Method: http.MethodGet, URL: "/operations/state", Type: fe.Type, Message: orDefault(fe.Message, "the operation faulted"), Detail: fe.Error}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(interval):
		}
	}
}
