package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// DocumentConflictError is a load of a document that is in conflict (HTTP
// 409 DocumentConflictException): its versions must be resolved first, by
// storing a new version, deleting it, or a resolution strategy.
type DocumentConflictError struct {
	ServerError
	DocID string
}

func (e *DocumentConflictError) Error() string { return e.ServerError.Error() }

// Unwrap exposes the server error.
func (e *DocumentConflictError) Unwrap() error { return &e.ServerError }

// ConflictSummary is one conflicted document.
type ConflictSummary struct {
	ID           string `json:"Id"`
	LastModified string
	Collection   string
	Versions     int
}

// ConflictVersion is one version of a conflicted document; Doc is nil for a
// deletion.
type ConflictVersion struct {
	ChangeVector string
	LastModified string
	Doc          json.RawMessage
}

// ListConflicts lists the conflicted documents, oldest conflict first, and
// how many there are.
func (s *DocumentStore) ListConflicts(ctx context.Context, start, pageSize int) ([]ConflictSummary, int, error) {
	var out struct {
		TotalResults int
		Results      []ConflictSummary
	}
	q := "start=" + strconv.Itoa(start) + "&pageSize=" + strconv.Itoa(pageSize)
	if err := s.dbCall(ctx, http.MethodGet, "/replication/conflicts", q, &out); err != nil {
		return nil, 0, err
	}
	return out.Results, out.TotalResults, nil
}

// ConflictVersions returns the versions of a conflicted document (none when
// it is not in conflict).
func (s *DocumentStore) ConflictVersions(ctx context.Context, id string) ([]ConflictVersion, error) {
	var out struct{ Results []ConflictVersion }
	if err := s.dbCall(ctx, http.MethodGet, "/replication/conflicts", "docId="+url.QueryEscape(id), &out); err != nil {
		return nil, err
	}
	for i := range out.Results {
		if string(out.Results[i].Doc) == "null" {
			out.Results[i].Doc = nil
		}
	}
	return out.Results, nil
}

// ConflictSolver is a database's conflict configuration: the default
// strategy (latest, manual, node:<tag> or script, with Script) and
// per-collection strategies. Every node applies the same one.
type ConflictSolver struct {
	Default     string                              `json:",omitempty"`
	Script      string                              `json:",omitempty"`
	Collections map[string]CollectionConflictSolver `json:",omitempty"`
}

// CollectionConflictSolver is one collection's strategy.
type CollectionConflictSolver struct {
	Strategy string
	Script   string `json:",omitempty"`
}

// SetConflictSolver stores the database's conflict configuration in the
// cluster. It applies to conflicts detected from then on; the existing ones
// are resolved with StartConflictResolution.
func (s *DocumentStore) SetConflictSolver(ctx context.Context, cfg ConflictSolver) error {
	if err := s.init(); err != nil {
		return err
	}
	body, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	_, err = s.serverCall(ctx, http.MethodPost, "/admin/replication/conflicts/solver", "name="+url.QueryEscape(s.database), body)
	return err
}

// ConflictSolver reads the database's conflict configuration.
func (s *DocumentStore) ConflictSolver(ctx context.Context) (ConflictSolver, error) {
	var out ConflictSolver
	err := s.dbCall(ctx, http.MethodGet, "/replication/conflicts/solver", "", &out)
	return out, err
}

// ResolutionScope selects conflicts for a bulk resolution; empty is all.
type ResolutionScope struct {
	Collection string   `json:",omitempty"`
	Prefix     string   `json:",omitempty"`
	IDs        []string `json:",omitempty"`
}

// BulkResolution describes a bulk resolution: a strategy (latest, local,
// node:<tag>, script, configured) over a scope. Expected pins it to a
// preview: id → fingerprint, each id resolved only while unchanged.
type BulkResolution struct {
	Strategy string
	Script   string `json:",omitempty"`
	Scope    ResolutionScope
	Expected map[string]string `json:",omitempty"`
	By       string            `json:",omitempty"`
}

// ResolutionPreview is what a bulk resolution would do to one document.
type ResolutionPreview struct {
	ID          string `json:"Id"`
	Collection  string
	Fingerprint string
	Strategy    string
	Winner      int // index into Versions; -1 when merged or declined
	Declined    bool
	Error       string
	Result      *struct {
		Tombstone bool
		Doc       json.RawMessage
	}
	Versions []struct {
		ChangeVector string
		LastModified string
		Tombstone    bool
		Doc          json.RawMessage
	}
}

// PreviewConflictResolution shows what a bulk resolution would do to up to
// limit documents, without writing, and how many the scope holds.
func (s *DocumentStore) PreviewConflictResolution(ctx context.Context, r BulkResolution, limit int) ([]ResolutionPreview, int, error) {
	var out struct {
		Total int
		Items []ResolutionPreview
	}
	err := s.dbCallBody(ctx, http.MethodPost, "/conflicts/preview", struct {
		BulkResolution
		Limit int
	}{r, limit}, &out)
	return out.Items, out.Total, err
}

// ResolutionProgress is a bulk resolution's state: running, cancelled,
// done or failed.
type ResolutionProgress struct {
	ID        int64
	State     string
	Total     int
	Done      int
	Resolved  int
	Skipped   int
	Errors    int
	LastError string
}

// StartConflictResolution starts a bulk resolution on the node the store
// talks to and returns its first progress.
func (s *DocumentStore) StartConflictResolution(ctx context.Context, r BulkResolution) (ResolutionProgress, error) {
	var out ResolutionProgress
	err := s.dbCallBody(ctx, http.MethodPost, "/conflicts/operations", r, &out)
	return out, err
}

// ConflictResolutionProgress reads a bulk resolution's progress.
func (s *DocumentStore) ConflictResolutionProgress(ctx context.Context, id int64) (ResolutionProgress, error) {
	var out ResolutionProgress
	err := s.dbCall(ctx, http.MethodGet, "/conflicts/operations/"+strconv.FormatInt(id, 10), "", &out)
	return out, err
}

// dbCallBody is dbCall with a JSON body.
func (s *DocumentStore) dbCallBody(ctx context.Context, method, path string, in, out any) error {
	resp, err := s.dbRequest(ctx, method, path, "", in)
	if err != nil {
		return err
	}
	return decodeResponse(resp, path, out)
}
