package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// RevisionsCollectionConfig is one collection's revisions configuration
// (RavenDB's RevisionsCollectionConfiguration).
type RevisionsCollectionConfig struct {
	Disabled bool
	// MinimumRevisionsToKeep keeps at most this many (nil: no count limit).
	MinimumRevisionsToKeep *int64 `json:",omitempty"`
	// MinimumRevisionAgeToKeep is a TimeSpan, "d.hh:mm:ss" (nil: no age limit).
	MinimumRevisionAgeToKeep *string `json:",omitempty"`
	PurgeOnDelete            bool
}

// RevisionsConfig is a database's revisions configuration: the default and
// per-collection entries. Every member applies the same one.
type RevisionsConfig struct {
	Default     *RevisionsCollectionConfig            `json:",omitempty"`
	Collections map[string]*RevisionsCollectionConfig `json:",omitempty"`
}

// ConfigureRevisions stores the database's revisions configuration in the
// cluster; nil removes it.
func (s *DocumentStore) ConfigureRevisions(ctx context.Context, cfg *RevisionsConfig) error {
	var out struct{ RaftCommandIndex uint64 }
	var in any = cfg
	if cfg == nil {
		in = json.RawMessage("null")
	}
	return s.dbCallBody(ctx, http.MethodPost, "/admin/revisions/config", in, &out)
}

// Revisions returns a document's revisions, newest first (each the JSON of
// the version, with its @metadata: @change-vector, @last-modified, @flags),
// from start, at most pageSize, and how many there are.
func (s *DocumentStore) Revisions(ctx context.Context, id string, start, pageSize int) ([]json.RawMessage, int, error) {
	var out struct {
		Results      []json.RawMessage
		TotalResults int
	}
	q := url.Values{"id": {id}, "start": {strconv.Itoa(start)}, "pageSize": {strconv.Itoa(pageSize)}}
	err := s.dbCall(ctx, http.MethodGet, "/revisions", q.Encode(), &out)
	return out.Results, out.TotalResults, err
}

// RevisionsCount is how many revisions a document has.
func (s *DocumentStore) RevisionsCount(ctx context.Context, id string) (int64, error) {
	var out struct{ RevisionsCount int64 }
	err := s.dbCall(ctx, http.MethodGet, "/revisions/count", url.Values{"id": {id}}.Encode(), &out)
	return out.RevisionsCount, err
}

// RevertToRevision makes the revision with change vector cv the document's
// current version again.
func (s *DocumentStore) RevertToRevision(ctx context.Context, id, cv string) error {
	resp, err := s.dbRequest(ctx, http.MethodPost, "/revisions/revert/docs", "", map[string]any{"IdToChangeVector": map[string]string{id: cv}})
	if err != nil {
		return err
	}
	if resp.status != http.StatusNoContent {
		return &ServerError{StatusCode: resp.status, URL: "/revisions/revert/docs", Message: string(resp.body)}
	}
	return nil
}
