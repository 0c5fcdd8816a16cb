package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// DatabaseStatistics is the answer of GET /databases/{db}/stats (the fields
// applications usually read; the server may send more).
type DatabaseStatistics struct {
	LastDocEtag                    int64           `json:"LastDocEtag"`
	LastDatabaseEtag               int64           `json:"LastDatabaseEtag"`
	CountOfIndexes                 int64           `json:"CountOfIndexes"`
	CountOfDocuments               int64           `json:"CountOfDocuments"`
	CountOfRevisionDocuments       int64           `json:"CountOfRevisionDocuments"`
	CountOfDocumentsConflicts      int64           `json:"CountOfDocumentsConflicts"`
	CountOfTombstones              int64           `json:"CountOfTombstones"`
	CountOfConflicts               int64           `json:"CountOfConflicts"`
	CountOfAttachments             int64           `json:"CountOfAttachments"`
	CountOfCounterEntries          int64           `json:"CountOfCounterEntries"`
	CountOfTimeSeriesSegments      int64           `json:"CountOfTimeSeriesSegments"`
	DatabaseChangeVector           string          `json:"DatabaseChangeVector"`
	DatabaseID                     string          `json:"DatabaseId"`
	Is64Bit                        bool            `json:"Is64Bit"`
	Pager                          string          `json:"Pager"`
	SizeOnDisk                     *Size           `json:"SizeOnDisk"`
	Indexes                        json.RawMessage `json:"Indexes"`
	NumberOfTransactionMergerQueue int64           `json:"NumberOfTransactionMergerQueueOperations"`
}

// Size is a size on disk as the server reports it.
type Size struct {
	HumaneSize  string `json:"HumaneSize"`
	SizeInBytes int64  `json:"SizeInBytes"`
}

// CollectionStatistics is the answer of GET /databases/{db}/collections/stats.
// Collections includes the @hilo and @empty pseudo-collections.
type CollectionStatistics struct {
	CountOfDocuments  int64            `json:"CountOfDocuments"`
	CountOfConflicts  int64            `json:"CountOfConflicts"`
	CountOfTombstones int64            `json:"CountOfTombstones"`
	Collections       map[string]int64 `json:"Collections"`
}

// CreateDatabase creates a database (PUT /admin/databases). An existing
// database gives a *ConcurrencyError.
func (s *DocumentStore) CreateDatabase(ctx context.Context, name string) error {
	if err := s.init(); err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]string{"DatabaseName": name})
	_, err := s.serverCall(ctx, http.MethodPut, "/admin/databases",
		"name="+url.QueryEscape(name)+"&replicationFactor=1&raft-request-id="+newUUID(), body)
	return err
}

// DeleteDatabase deletes a database with its data (DELETE /admin/databases,
// HardDelete).
func (s *DocumentStore) DeleteDatabase(ctx context.Context, name string) error {
	return s.DeleteDatabases(ctx, []string{name}, true)
}

// DeleteDatabases deletes databases; hardDelete also removes their files.
func (s *DocumentStore) DeleteDatabases(ctx context.Context, names []string, hardDelete bool) error {
	if err := s.init(); err != nil {
		return err
	}
	body, _ := json.Marshal(struct {
		DatabaseNames []string `json:"DatabaseNames"`
		HardDelete    bool     `json:"HardDelete"`
	}{names, hardDelete})
	_, err := s.serverCall(ctx, http.MethodDelete, "/admin/databases", "raft-request-id="+newUUID(), body)
	return err
}

// GetDatabaseNames lists the databases of the server (GET /databases).
func (s *DocumentStore) GetDatabaseNames(ctx context.Context, start, pageSize int) ([]string, error) {
	if err := s.init(); err != nil {
		return nil, err
	}
	resp, err := s.serverCall(ctx, http.MethodGet, "/databases",
		"start="+strconv.Itoa(start)+"&pageSize="+strconv.Itoa(pageSize)+"&namesOnly=true", nil)
	if err != nil {
		return nil, err
	}
	var out struct {
		Databases []string `json:"Databases"`
	}
	if err := decodeResponse(resp, "databases", &out); err != nil {
		return nil, err
	}
	return out.Databases, nil
}

// NextIdentity increments the identity name (e.g. "companies"; a trailing
// "|" is added by the server) and returns the new value.
func (s *DocumentStore) NextIdentity(ctx context.Context, name string) (int64, error) {
	var out struct {
		NewIdentityValue int64 `json:"NewIdentityValue"`
	}
	if err := s.dbCall(ctx, http.MethodPost, "/identity/next",
		"name="+url.QueryEscape(name)+"&raft-request-id="+newUUID(), &out); err != nil {
		return 0, err
	}
	return out.NewIdentityValue, nil
}

// SeedIdentity sets the identity name to at least value (exactly value when
// force is true, which can lower it) and returns the resulting value.
func (s *DocumentStore) SeedIdentity(ctx context.Context, name string, value int64, force bool) (int64, error) {
	q := "name=" + url.QueryEscape(name) + "&value=" + strconv.FormatInt(value, 10)
	if force {
		q += "&force=true"
	}
	q += "&raft-request-id=" + newUUID()
	var out struct {
		NewSeedValue int64 `json:"NewSeedValue"`
	}
	if err := s.dbCall(ctx, http.MethodPost, "/identity/seed", q, &out); err != nil {
		return 0, err
	}
	return out.NewSeedValue, nil
}

// GetIdentities returns every identity of the database, keyed by name with
// its trailing "|" (e.g. "companies|").
func (s *DocumentStore) GetIdentities(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	if err := s.dbCall(ctx, http.MethodGet, "/debug/identities", "", &out); err != nil {
		return nil, err
	}
	return out, nil
}

// GetStatistics returns the database statistics.
func (s *DocumentStore) GetStatistics(ctx context.Context) (*DatabaseStatistics, error) {
	var out DatabaseStatistics
	if err := s.dbCall(ctx, http.MethodGet, "/stats", "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetCollectionStatistics returns the number of documents per collection.
func (s *DocumentStore) GetCollectionStatistics(ctx context.Context) (*CollectionStatistics, error) {
	var out CollectionStatistics
	if err := s.dbCall(ctx, http.MethodGet, "/collections/stats", "", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// dbCall sends a request about the store's database and decodes the JSON
// answer into out.
func (s *DocumentStore) dbCall(ctx context.Context, method, path, query string, out any) error {
	resp, err := s.dbRequest(ctx, method, path, query, nil)
	if err != nil {
		return err
	}
	return decodeResponse(resp, path, out)
}

// dbRequest sends a request to the store's database through the request
// executor, with in as its JSON body when not nil.
func (s *DocumentStore) dbRequest(ctx context.Context, method, path, query string, in any) (*response, error) {
	if err := s.init(); err != nil {
		return nil, err
	}
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return nil, err
		}
	}
	return s.executor.execute(ctx, &request{method: method, path: path, query: query, body: body, dbScoped: true})
}

func (s *DocumentStore) serverCall(ctx context.Context, method, path, query string, body []byte) (*response, error) {
	resp, err := s.serverExec.execute(ctx, &request{method: method, path: path, query: query, body: body})
	if err != nil {
		return nil, err
	}
	if resp.status == http.StatusNotFound {
		return nil, &ServerError{StatusCode: resp.status, Method: method, URL: path, Message: "not found"}
	}
	return resp, nil
}

func decodeResponse(resp *response, what string, out any) error {
	if resp.status == http.StatusNotFound {
		return &ServerError{StatusCode: resp.status, URL: what, Message: "not found"}
	}
	if err := json.Unmarshal(resp.body, out); err != nil {
		return fmt.Errorf("rookery: %s: %w (status %d, body %.200s)", what, err, resp.status, resp.body)
	}
	return nil
}
