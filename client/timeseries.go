package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Time series of a document (store-level operations, sent at once; the npm
// client's session defers them into SaveChanges instead). Timestamps have
// millisecond precision; an entry holds 1 to 32 values and an optional tag.

// TimeSeriesEntry is one entry of a series.
type TimeSeriesEntry struct {
	Timestamp time.Time
	Values    []float64
	Tag       string // "" for none
}

// TimeSeriesRange is the answer of a range read: its entries in time order
// and how many entries the whole range holds (TotalResults, whatever the
// page).
type TimeSeriesRange struct {
	Name         string
	From, To     time.Time
	Entries      []TimeSeriesEntry
	TotalResults int64
}

func tsFormat(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.0000000Z") }

type tsWireAppend struct {
	Timestamp string
	Values    []float64
	Tag       *string `json:",omitempty"`
}

type tsWireDelete struct {
	From, To *string
}

type tsWireOp struct {
	Name    string
	Appends []tsWireAppend `json:",omitempty"`
	Deletes []tsWireDelete `json:",omitempty"`
}

func (s *DocumentStore) tsBatch(ctx context.Context, docID string, op tsWireOp) error {
	resp, err := s.dbRequest(ctx, http.MethodPost, "/timeseries", "docId="+url.QueryEscape(docID), op)
	if err != nil {
		return err
	}
	if resp.status == http.StatusNotFound {
		return &ServerError{StatusCode: resp.status, URL: "/timeseries", Message: "not found"}
	}
	return nil
}

// TimeSeriesAppend appends entries to a series of an existing document
// (POST /timeseries, RavenDB's TimeSeriesBatchOperation): one transaction;
// an entry at an existing timestamp replaces it.
func (s *DocumentStore) TimeSeriesAppend(ctx context.Context, docID, name string, entries ...TimeSeriesEntry) error {
	op := tsWireOp{Name: name}
	for _, e := range entries {
		a := tsWireAppend{Timestamp: tsFormat(e.Timestamp), Values: e.Values}
		if e.Tag != "" {
			tag := e.Tag
			a.Tag = &tag
		}
		op.Appends = append(op.Appends, a)
	}
	return s.tsBatch(ctx, docID, op)
}

// TimeSeriesDelete deletes the entries of a series in [from, to]; a zero
// time is an open end.
func (s *DocumentStore) TimeSeriesDelete(ctx context.Context, docID, name string, from, to time.Time) error {
	var d tsWireDelete
	if !from.IsZero() {
		f := tsFormat(from)
		d.From = &f
	}
	if !to.IsZero() {
		t := tsFormat(to)
		d.To = &t
	}
	return s.tsBatch(ctx, docID, tsWireOp{Name: name, Deletes: []tsWireDelete{d}})
}

// TimeSeriesGet reads the entries of a series in [from, to] (zero times are
// open ends), skipping start and returning at most pageSize (all when
// pageSize <= 0). It returns nil, nil when the document or the series does
// not exist.
func (s *DocumentStore) TimeSeriesGet(ctx context.Context, docID, name string, from, to time.Time, start, pageSize int) (*TimeSeriesRange, error) {
	q := url.Values{"docId": {docID}, "name": {name}}
	if !from.IsZero() {
		q.Set("from", tsFormat(from))
	}
	if !to.IsZero() {
		q.Set("to", tsFormat(to))
	}
	if start > 0 {
		q.Set("start", strconv.Itoa(start))
	}
	if pageSize > 0 {
		q.Set("pageSize", strconv.Itoa(pageSize))
	}
	resp, err := s.dbRequest(ctx, http.MethodGet, "/timeseries", q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	if resp.status == http.StatusNotFound {
		return nil, nil
	}
	var wire struct {
		Name         string
		From, To     string
		TotalResults int64
		Entries      []struct {
			Timestamp string
			Tag       *string
			Values    []float64
		}
	}
	if err := json.Unmarshal(resp.body, &wire); err != nil {
		return nil, err
	}
	out := &TimeSeriesRange{Name: wire.Name, TotalResults: wire.TotalResults, Entries: make([]TimeSeriesEntry, 0, len(wire.Entries))}
	out.From, _ = time.Parse(time.RFC3339Nano, wire.From)
	out.To, _ = time.Parse(time.RFC3339Nano, wire.To)
	for _, e := range wire.Entries {
		ts, err := time.Parse(time.RFC3339Nano, e.Timestamp)
		if err != nil {
			return nil, err
		}
		entry := TimeSeriesEntry{Timestamp: ts, Values: e.Values}
		if e.Tag != nil {
			entry.Tag = *e.Tag
		}
		out.Entries = append(out.Entries, entry)
	}
	return out, nil
}
