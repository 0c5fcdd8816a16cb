package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// CompareExchangeValue is a compare-exchange value as the server keeps it:
// Index is the Raft log index of its last write; Value is the Object the
// writer stored (raw JSON) and Metadata its @metadata, if any.
type CompareExchangeValue struct {
	Key      string
	Index    int64
	Value    json.RawMessage
	Metadata map[string]any
}

// CompareExchangeResult is the answer to a put or delete: whether it
// happened, the key's index (the new one, or the current one when it did
// not) and the value.
type CompareExchangeResult struct {
	Successful bool
	Index      int64
	Value      json.RawMessage
}

type cmpxchgWire struct {
	Key   string
	Index int64
	Value *struct {
		Object   json.RawMessage `json:"Object"`
		Metadata map[string]any  `json:"@metadata"`
	}
}

func (w cmpxchgWire) value() CompareExchangeValue {
	v := CompareExchangeValue{Key: w.Key, Index: w.Index}
	if w.Value != nil {
		v.Value, v.Metadata = w.Value.Object, w.Value.Metadata
	}
	return v
}

func cmpxchgResult(resp *response, path string) (CompareExchangeResult, error) {
	var out struct {
		Successful bool
		Index      int64
		Value      *struct {
			Object json.RawMessage `json:"Object"`
		}
	}
	if err := decodeResponse(resp, path, &out); err != nil {
		return CompareExchangeResult{}, err
	}
	r := CompareExchangeResult{Successful: out.Successful, Index: out.Index}
	if out.Value != nil {
		r.Value = out.Value.Object
	}
	return r, nil
}

// PutCompareExchangeValue stores value under key if the key's index is
// index (0: the key must not exist yet). A failed comparison is not an
// error: the result says Successful false, with the current index.
func (s *DocumentStore) PutCompareExchangeValue(ctx context.Context, key string, value any, index int64) (CompareExchangeResult, error) {
	q := "key=" + url.QueryEscape(key) + "&index=" + strconv.FormatInt(index, 10)
	resp, err := s.dbRequest(ctx, http.MethodPut, "/cmpxchg", q, map[string]any{"Object": value})
	if err != nil {
		return CompareExchangeResult{}, err
	}
	return cmpxchgResult(resp, "/cmpxchg")
}

// DeleteCompareExchangeValue deletes key if its index is index.
func (s *DocumentStore) DeleteCompareExchangeValue(ctx context.Context, key string, index int64) (CompareExchangeResult, error) {
	q := "key=" + url.QueryEscape(key) + "&index=" + strconv.FormatInt(index, 10)
	resp, err := s.dbRequest(ctx, http.MethodDelete, "/cmpxchg", q, nil)
	if err != nil {
		return CompareExchangeResult{}, err
	}
	return cmpxchgResult(resp, "/cmpxchg")
}

// GetCompareExchangeValue reads one value; nil when the key does not exist.
func (s *DocumentStore) GetCompareExchangeValue(ctx context.Context, key string) (*CompareExchangeValue, error) {
	var out struct{ Results []cmpxchgWire }
	if err := s.dbCall(ctx, http.MethodGet, "/cmpxchg", "key="+url.QueryEscape(key), &out); err != nil {
		return nil, err
	}
	if len(out.Results) == 0 {
		return nil, nil
	}
	v := out.Results[0].value()
	return &v, nil
}

// GetCompareExchangeValues lists the values whose keys start with prefix,
// sorted by key, paged.
func (s *DocumentStore) GetCompareExchangeValues(ctx context.Context, prefix string, start, pageSize int) ([]CompareExchangeValue, error) {
	q := "startsWith=" + url.QueryEscape(prefix) + "&start=" + strconv.Itoa(start)
	if pageSize > 0 {
		q += "&pageSize=" + strconv.Itoa(pageSize)
	}
	var out struct{ Results []cmpxchgWire }
	if err := s.dbCall(ctx, http.MethodGet, "/cmpxchg", q, &out); err != nil {
		return nil, err
	}
	vs := make([]CompareExchangeValue, len(out.Results))
	for i, w := range out.Results {
		vs[i] = w.value()
	}
	return vs, nil
}
