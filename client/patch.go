package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// PatchRequest is a JavaScript patch (RavenDB's PatchRequest): the script
// sees the document as `this` and Values as `args`, and may use load(id),
// put(id, doc), del(id), id(doc), getMetadata(doc) and output(...).
type PatchRequest struct {
	Script string         `json:"Script"`
	Values map[string]any `json:"Values,omitempty"`
}

// PatchOptions tune DocumentStore.Patch.
type PatchOptions struct {
	// ChangeVector, when set, is the change vector the document must have
	// (a mismatch is a *ConcurrencyError, or the NotModified status with
	// SkipPatchIfChangeVectorMismatch).
	ChangeVector                    string
	SkipPatchIfChangeVectorMismatch bool
	// PatchIfMissing runs against a new, empty document when the id does
	// not exist (the script sets this['@metadata']['@collection']).
	PatchIfMissing *PatchRequest
	// Debug returns the script's output() lines and actions, and the
	// original document.
	Debug bool
}

// Patch statuses.
const (
	PatchStatusPatched              = "Patched"
	PatchStatusNotModified          = "NotModified"
	PatchStatusCreated              = "Created"
	PatchStatusDocumentDoesNotExist = "DocumentDoesNotExist"
)

// PatchResult is the outcome of DocumentStore.Patch. A patch skipped for a
// mismatching change vector reports NotModified, as RavenDB's clients do.
type PatchResult struct {
	Status           string          `json:"Status"`
	ModifiedDocument json.RawMessage `json:"ModifiedDocument"`
	OriginalDocument json.RawMessage `json:"OriginalDocument"`
	Debug            *PatchDebug     `json:"Debug"`
	ChangeVector     string          `json:"ChangeVector"`
	Collection       string          `json:"Collection"`
	LastModified     string          `json:"LastModified"`
}

// PatchDebug is a patch's debug output.
type PatchDebug struct {
	Info    []string            `json:"Info"`
	Actions map[string][]string `json:"Actions"`
}

// Patch runs a JavaScript patch on one document (PATCH /docs, RavenDB's
// PatchOperation), at once and outside any session.
func (s *DocumentStore) Patch(ctx context.Context, id string, patch PatchRequest, opts *PatchOptions) (*PatchResult, error) {
	if strings.TrimSpace(patch.Script) == "" {
		return nil, fmt.Errorf("rookery: Patch: the script is empty")
	}
	if opts == nil {
		opts = &PatchOptions{}
	}
	q := "id=" + url.QueryEscape(id)
	if opts.SkipPatchIfChangeVectorMismatch {
		q += "&skipPatchIfChangeVectorMismatch=true"
	}
	if opts.Debug {
		q += "&debug=true"
	}
	body, err := json.Marshal(map[string]any{"Patch": patch, "PatchIfMissing": opts.PatchIfMissing})
	if err != nil {
		return nil, err
	}
	if err := s.init(); err != nil {
		return nil, err
	}
	r := &request{method: http.MethodPatch, path: "/docs", query: q, body: body, dbScoped: true}
	if opts.ChangeVector != "" {
		cv := opts.ChangeVector
		r.ifMatch = &cv
	}
	resp, err := s.executor.execute(ctx, r)
	if err != nil {
		return nil, err
	}
	switch resp.status {
	case http.StatusNotFound:
		return &PatchResult{Status: PatchStatusDocumentDoesNotExist}, nil
	case http.StatusNotModified:
		return &PatchResult{Status: PatchStatusNotModified}, nil
	}
	var out PatchResult
	if err := json.Unmarshal(resp.body, &out); err != nil {
		return nil, fmt.Errorf("rookery: PATCH /docs: %w (status %d)", err, resp.status)
	}
	return &out, nil
}

// DetailedDatabaseStatistics is GET /stats/detailed: the statistics and
// the counts of identities and compare-exchange values.
type DetailedDatabaseStatistics struct {
	DatabaseStatistics
	CountOfIdentities                int64 `json:"CountOfIdentities"`
	CountOfCompareExchange           int64 `json:"CountOfCompareExchange"`
	CountOfCompareExchangeTombstones int64 `json:"CountOfCompareExchangeTombstones"`
	CountOfTimeSeriesDeletedRanges   int64 `json:"CountOfTimeSeriesDeletedRanges"`
}

// GetDetailedStatistics returns the detailed database statistics.
func (s *DocumentStore) GetDetailedStatistics(ctx context.Context) (*DetailedDatabaseStatistics, error) {
	var out DetailedDatabaseStatistics
	if err := s.dbCall(ctx, http.MethodGet, "/stats/detailed", "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

type pendingPatch struct {
	id    string
	patch PatchRequest
}

// patchPath is what Patch and Increment accept as a path: a property or a
// dotted chain of them (it is written into the script).
var patchPath = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*(\.[A-Za-z_$][A-Za-z0-9_$]*)*$`)

// Patch sets a property of a document on SaveChanges, on the server, by a
// PATCH command in the same transaction as the session's other changes
// (RavenDB's session.advanced.patch). path is a property name or a dotted
// chain ("Address.City"). A tracked entity with that id is updated from
// the patched document when SaveChanges returns.
func (s *Session) Patch(id, path string, value any) error {
	return s.deferPatch(id, path, value, "this.%s = %s;")
}

// Increment adds delta to a numeric property of a document on SaveChanges
// (a missing property starts from 0), like Patch.
func (s *Session) Increment(id, path string, delta any) error {
	return s.deferPatch(id, path, delta, "this.%[1]s = this.%[1]s ? this.%[1]s + %[2]s : %[2]s;")
}

// PatchScript defers a whole patch script for a document to SaveChanges.
func (s *Session) PatchScript(id string, patch PatchRequest) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if strings.TrimSpace(id) == "" || strings.TrimSpace(patch.Script) == "" {
		return fmt.Errorf("rookery: PatchScript needs an id and a script")
	}
	s.patches = append(s.patches, pendingPatch{id: id, patch: patch})
	return nil
}

func (s *Session) deferPatch(id, path string, value any, format string) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if strings.TrimSpace(id) == "" {
		return fmt.Errorf("rookery: Patch needs a document id")
	}
	if !patchPath.MatchString(path) {
		return fmt.Errorf("rookery: %q is not a property path (names joined by dots)", path)
	}
	// Patches of one document are merged into one command, as RavenDB's
	// session does.
	for i := range s.patches {
		p := &s.patches[i]
		if strings.EqualFold(p.id, id) && p.patch.Values != nil {
			arg := "val_" + strconv.Itoa(len(p.patch.Values))
			if _, taken := p.patch.Values[arg]; !taken {
				p.patch.Script += "\n" + fmt.Sprintf(format, path, "args."+arg)
				p.patch.Values[arg] = value
				return nil
			}
		}
	}
	s.patches = append(s.patches, pendingPatch{id: id, patch: PatchRequest{
		Script: fmt.Sprintf(format, path, "args.val_0"), Values: map[string]any{"val_0": value},
	}})
	return nil
}

func (s *Session) patchCommands() []batchCommand {
	cmds := make([]batchCommand, 0, len(s.patches))
	for i := range s.patches {
		id := s.patches[i].id
		cmds = append(cmds, batchCommand{Type: "PATCH", ID: &id, Patch: &s.patches[i].patch, ReturnDocument: s.IsLoaded(id)})
	}
	return cmds
}

// applyPatchResults updates tracked entities from the patched documents.
func (s *Session) applyPatchResults(results []map[string]any) {
	s.patches = nil
	for _, res := range results {
		id, _ := res["Id"].(string)
		doc, ok := res["ModifiedDocument"].(map[string]any)
		info := s.byID[strings.ToLower(id)]
		if !ok || info == nil || info.removed {
			continue
		}
		raw, err := json.Marshal(doc)
		if err != nil {
			continue
		}
		if !info.ti.isMap {
			// Fields the patch removed must not keep their old values.
			info.ptr.Elem().SetZero()
		}
		if err := unmarshalInto(raw, info.ptr); err != nil {
			continue
		}
		if info.ti.isMap {
			info.ptr.SetMapIndex(reflect.ValueOf("@metadata").Convert(info.ptr.Type().Key()), reflect.Value{})
		} else {
			setEntityID(info.ptr, info.ti, info.id)
		}
		if md, ok := doc["@metadata"].(map[string]any); ok {
			info.metadata = md
		}
		if cv, ok := res["ChangeVector"].(string); ok {
			info.changeVector = cv
		}
		if snap, err := s.serialize(info); err == nil {
			info.snapshot = snap
		}
	}
}
