package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// IndexDefinition is a static index. Rookery runs JavaScript indexes:
//
//	client.IndexDefinition{
//		Name: "Pets/ByOwner",
//		Maps: []string{`map('Pets', p => ({ Name: p.Name, OwnerName: load(p.OwnerId, 'People').Name }))`},
//	}
//
// A map-reduce index has a Reduce:
// `groupBy(x => x.Company).aggregate(g => ({ Company: g.key, Total: g.values.reduce((a, b) => a + b.Total, 0) }))`.
type IndexDefinition struct {
	Name   string   `json:"Name"`
	Maps   []string `json:"Maps"`
	Reduce string   `json:"Reduce,omitempty"`
	// Fields sets options per field (search, exact, stored).
	Fields        map[string]IndexFieldOptions `json:"Fields"`
	Configuration map[string]string            `json:"Configuration"`
	// AdditionalSources are JavaScript helpers available to the maps.
	AdditionalSources map[string]string `json:"AdditionalSources,omitempty"`
	LockMode          IndexLockMode     `json:"LockMode,omitempty"`
	Priority          IndexPriority     `json:"Priority,omitempty"`
	State             IndexState        `json:"State,omitempty"`
	// IndexType is what the client sends (detected from Maps and Reduce
	// when empty); Type is what the server reports.
	IndexType  string `json:"IndexType,omitempty"`
	Type       string `json:"Type,omitempty"`
	SourceType string `json:"SourceType,omitempty"`
}

// IndexFieldOptions are the options of one index field.
type IndexFieldOptions struct {
	Storage     string `json:"Storage,omitempty"`  // "Yes" or "No"
	Indexing    string `json:"Indexing,omitempty"` // "Search", "Exact", "No" or "Default"
	TermVector  string `json:"TermVector,omitempty"`
	Analyzer    string `json:"Analyzer,omitempty"`
	Suggestions bool   `json:"Suggestions,omitempty"`
}

// IndexLockMode, IndexPriority and IndexState as RavenDB spells them.
type (
	IndexLockMode string
	IndexPriority string
	IndexState    string
)

// Lock modes, priorities and states of indexes.
const (
	IndexUnlock       IndexLockMode = "Unlock"
	IndexLockedIgnore IndexLockMode = "LockedIgnore"
	IndexLockedError  IndexLockMode = "LockedError"

	IndexPriorityLow    IndexPriority = "Low"
	IndexPriorityNormal IndexPriority = "Normal"
	IndexPriorityHigh   IndexPriority = "High"

	IndexStateNormal   IndexState = "Normal"
	IndexStateDisabled IndexState = "Disabled"
	IndexStateIdle     IndexState = "Idle"
	IndexStateError    IndexState = "Error"
)

// isCSharp tells a C#/LINQ definition (as the npm client detects it).
func (d *IndexDefinition) isCSharp() bool {
	if len(d.Maps) == 0 {
		return false
	}
	m := strings.TrimSpace(d.Maps[0])
	return strings.HasPrefix(m, "from") || strings.HasPrefix(m, "docs")
}

func (d *IndexDefinition) detectType() string {
	switch {
	case d.isCSharp() && d.Reduce != "":
		return "MapReduce"
	case d.isCSharp():
		return "Map"
	case d.Reduce != "":
		return "JavaScriptMapReduce"
	}
	return "JavaScriptMap"
}

// PutIndexResult is the server's answer for one index put.
type PutIndexResult struct {
	Index            string `json:"Index"`
	RaftCommandIndex int64  `json:"RaftCommandIndex"`
}

// IndexStats are the statistics of one index (the fields applications
// usually read; the server sends more).
type IndexStats struct {
	Name                  string                          `json:"Name"`
	Type                  string                          `json:"Type"`
	State                 IndexState                      `json:"State"`
	Status                string                          `json:"Status"`
	Priority              IndexPriority                   `json:"Priority"`
	LockMode              IndexLockMode                   `json:"LockMode"`
	IsStale               bool                            `json:"IsStale"`
	EntriesCount          int64                           `json:"EntriesCount"`
	ErrorsCount           int64                           `json:"ErrorsCount"`
	MapAttempts           int64                           `json:"MapAttempts"`
	MapSuccesses          int64                           `json:"MapSuccesses"`
	MapErrors             int64                           `json:"MapErrors"`
	MapReferenceAttempts  int64                           `json:"MapReferenceAttempts"`
	MapReferenceSuccesses int64                           `json:"MapReferenceSuccesses"`
	Collections           map[string]IndexCollectionStats `json:"Collections"`
	CreatedTimestamp      string                          `json:"CreatedTimestamp"`
	LastIndexingTime      string                          `json:"LastIndexingTime"`
	LastQueryingTime      string                          `json:"LastQueryingTime"`
}

// IndexCollectionStats is the progress of an index over one collection.
type IndexCollectionStats struct {
	LastProcessedDocumentEtag  int64 `json:"LastProcessedDocumentEtag"`
	LastProcessedTombstoneEtag int64 `json:"LastProcessedTombstoneEtag"`
	DocumentLag                int64 `json:"DocumentLag"`
	TombstoneLag               int64 `json:"TombstoneLag"`
}

// IndexErrors are the indexing errors of one index.
type IndexErrors struct {
	Name   string          `json:"Name"`
	Errors []IndexingError `json:"Errors"`
}

// IndexingError is one document an index failed to process.
type IndexingError struct {
	Timestamp string `json:"Timestamp"`
	Document  string `json:"Document"`
	Action    string `json:"Action"`
	Error     string `json:"Error"`
}

// IndexingStatus tells whether indexing runs, overall and per index.
type IndexingStatus struct {
	Status  string        `json:"Status"` // Running, Paused or Disabled
	Indexes []IndexStatus `json:"Indexes"`
}

// IndexStatus tells whether one index runs.
type IndexStatus struct {
	Name   string `json:"Name"`
	Status string `json:"Status"` // Running, Paused, Disabled or Pending
}

// PutIndexes creates or updates static indexes (PUT /indexes; C#
// definitions go to /admin/indexes, and Rookery refuses them).
func (s *DocumentStore) PutIndexes(ctx context.Context, defs ...IndexDefinition) ([]PutIndexResult, error) {
	if len(defs) == 0 {
		return nil, errors.New("rookery: PutIndexes needs an index definition")
	}
	path := "/indexes"
	out := make([]IndexDefinition, len(defs))
	for i, d := range defs {
		if d.Name == "" {
			return nil, errors.New("rookery: an index definition needs a Name")
		}
		if len(d.Maps) == 0 {
			return nil, fmt.Errorf("rookery: index %s has no map", d.Name)
		}
		if d.isCSharp() {
			path = "/admin/indexes"
		}
		if d.IndexType == "" {
			d.IndexType = d.detectType()
		}
		d.Type = ""
		if d.Fields == nil {
			d.Fields = map[string]IndexFieldOptions{}
		}
		if d.Configuration == nil {
			d.Configuration = map[string]string{}
		}
		out[i] = d
	}
	resp, err := s.dbRequest(ctx, http.MethodPut, path, "raft-request-id="+newUUID(), map[string]any{"Indexes": out})
	if err != nil {
		return nil, err
	}
	var res struct {
		Results []PutIndexResult `json:"Results"`
	}
	if err := decodeResponse(resp, path, &res); err != nil {
		return nil, err
	}
	return res.Results, nil
}

// GetIndexes returns index definitions, paged.
func (s *DocumentStore) GetIndexes(ctx context.Context, start, pageSize int) ([]IndexDefinition, error) {
	var out struct {
		Results []IndexDefinition `json:"Results"`
	}
	if err := s.dbCall(ctx, http.MethodGet, "/indexes", pageQuery(start, pageSize), &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// GetIndex returns one index definition, or nil when there is no such index.
func (s *DocumentStore) GetIndex(ctx context.Context, name string) (*IndexDefinition, error) {
	resp, err := s.dbRequest(ctx, http.MethodGet, "/indexes", "name="+url.QueryEscape(name), nil)
	if err != nil {
		return nil, err
	}
	if resp.status == http.StatusNotFound {
		return nil, nil
	}
	var out struct {
		Results []IndexDefinition `json:"Results"`
	}
	if err := decodeResponse(resp, "/indexes", &out); err != nil {
		return nil, err
	}
	if len(out.Results) == 0 {
		return nil, nil
	}
	return &out.Results[0], nil
}

// GetIndexNames returns index names, paged.
func (s *DocumentStore) GetIndexNames(ctx context.Context, start, pageSize int) ([]string, error) {
	var out struct {
		Results []string `json:"Results"`
	}
	if err := s.dbCall(ctx, http.MethodGet, "/indexes", pageQuery(start, pageSize)+"&namesOnly=true", &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// GetIndexStatistics returns the statistics of one index.
func (s *DocumentStore) GetIndexStatistics(ctx context.Context, name string) (*IndexStats, error) {
	var out struct {
		Results []IndexStats `json:"Results"`
	}
	if err := s.dbCall(ctx, http.MethodGet, "/indexes/stats", "name="+url.QueryEscape(name), &out); err != nil {
		return nil, err
	}
	if len(out.Results) == 0 {
		return nil, fmt.Errorf("rookery: no statistics for index %s", name)
	}
	return &out.Results[0], nil
}

// GetIndexErrors returns the indexing errors of the named indexes (of every
// index when none is named).
func (s *DocumentStore) GetIndexErrors(ctx context.Context, names ...string) ([]IndexErrors, error) {
	var q strings.Builder
	for _, n := range names {
		q.WriteString("&name=")
		q.WriteString(url.QueryEscape(n))
	}
	var out struct {
		Results []IndexErrors `json:"Results"`
	}
	if err := s.dbCall(ctx, http.MethodGet, "/indexes/errors", q.String(), &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// GetIndexingStatus tells whether indexing runs, overall and per index.
func (s *DocumentStore) GetIndexingStatus(ctx context.Context) (*IndexingStatus, error) {
	var out IndexingStatus
	if err := s.dbCall(ctx, http.MethodGet, "/indexes/status", "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteIndex deletes an index and its data.
func (s *DocumentStore) DeleteIndex(ctx context.Context, name string) error {
	return s.voidCall(ctx, http.MethodDelete, "/indexes", "name="+url.QueryEscape(name)+"&raft-request-id="+newUUID(), nil)
}

// ResetIndex rebuilds an index from scratch (HTTP method RESET, as
// RavenDB's clients send it).
func (s *DocumentStore) ResetIndex(ctx context.Context, name string) error {
	return s.voidCall(ctx, "RESET", "/indexes", "name="+url.QueryEscape(name), nil)
}

// EnableIndex starts indexing an index disabled by DisableIndex.
func (s *DocumentStore) EnableIndex(ctx context.Context, name string) error {
	return s.voidCall(ctx, http.MethodPost, "/admin/indexes/enable", "name="+url.QueryEscape(name)+"&clusterWide=false&raft-request-id="+newUUID(), nil)
}

// DisableIndex stops an index: it keeps its data but indexes nothing new.
func (s *DocumentStore) DisableIndex(ctx context.Context, name string) error {
	return s.voidCall(ctx, http.MethodPost, "/admin/indexes/disable", "name="+url.QueryEscape(name)+"&clusterWide=false&raft-request-id="+newUUID(), nil)
}

// SetIndexPriority sets the priority of indexes.
func (s *DocumentStore) SetIndexPriority(ctx context.Context, priority IndexPriority, names ...string) error {
	return s.voidCall(ctx, http.MethodPost, "/indexes/set-priority", "raft-request-id="+newUUID(),
		map[string]any{"IndexNames": names, "Priority": priority})
}

// SetIndexLock sets the lock mode of indexes.
func (s *DocumentStore) SetIndexLock(ctx context.Context, mode IndexLockMode, names ...string) error {
	return s.voidCall(ctx, http.MethodPost, "/indexes/set-lock", "raft-request-id="+newUUID(),
		map[string]any{"IndexNames": names, "Mode": mode})
}

// voidCall sends a request whose answer has no body to read; 404 is an
// error (no such index).
func (s *DocumentStore) voidCall(ctx context.Context, method, path, query string, in any) error {
	resp, err := s.dbRequest(ctx, method, path, query, in)
	if err != nil {
		return err
	}
	if resp.status == http.StatusNotFound {
		return &ServerError{StatusCode: resp.status, Method: method, URL: path + "?" + query, Message: "not found", Detail: string(truncate(resp.body, 300))}
	}
	return nil
}

func pageQuery(start, pageSize int) string {
	return "start=" + strconv.Itoa(start) + "&pageSize=" + strconv.Itoa(pageSize)
}

// IndexWaitOptions make SaveChanges wait until indexes have processed the
// batch (Session.WaitForIndexesAfterSaveChanges).
type IndexWaitOptions struct {
	// Timeout is the longest wait (15 s when 0).
	Timeout time.Duration
	// NoThrowOnTimeout makes SaveChanges succeed when the wait times out
	// (it fails with the server's TimeoutException otherwise).
	NoThrowOnTimeout bool
	// Indexes are the indexes to wait for; all affected ones when empty.
	Indexes []string
}

// WaitForIndexesAfterSaveChanges makes this session's SaveChanges return
// only once the indexes have processed its writes, so a query made right
// after sees them.
func (s *Session) WaitForIndexesAfterSaveChanges(opts IndexWaitOptions) {
	if opts.Timeout <= 0 {
		opts.Timeout = 15 * time.Second
	}
	s.indexWait = &opts
}

// batchQuery is the query string of bulk_docs for the session's options.
func (s *Session) batchQuery() string {
	if s.indexWait == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("waitForIndexesTimeout=")
	b.WriteString(timeSpan(s.indexWait.Timeout))
	if s.indexWait.NoThrowOnTimeout {
		b.WriteString("&waitForIndexThrow=false")
	} else {
		b.WriteString("&waitForIndexThrow=true")
	}
	for _, n := range s.indexWait.Indexes {
		b.WriteString("&waitForSpecificIndex=")
		b.WriteString(url.QueryEscape(n))
	}
	return b.String()
}
