package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SmugglerOptions are RavenDB's DatabaseSmugglerOptions for an export or an
// import. The zero value exports or imports everything with the defaults.
type SmugglerOptions struct {
	// OperateOnTypes names the item types ("Documents", "Indexes",
	// "Identities", "Conflicts", "Subscriptions", "DatabaseRecord", …);
	// empty for the default set.
	OperateOnTypes []string `json:"-"`
	// Collections limits an export to these collections; empty for all.
	Collections []string `json:"Collections,omitempty"`
	// IncludeExpired: nil for the default (true).
	IncludeExpired *bool `json:"IncludeExpired,omitempty"`
	// TransformScript runs on each document (`this` is the document;
	// `throw 'skip'` leaves it out).
	TransformScript string `json:"TransformScript,omitempty"`
	// MaxStepsForTransformScript bounds the script per document (10000).
	MaxStepsForTransformScript int `json:"MaxStepsForTransformScript,omitempty"`
	// CompressionAlgorithm of an export: "Gzip" (default) or "Zstd".
	CompressionAlgorithm string `json:"CompressionAlgorithm,omitempty"`
}

func (o SmugglerOptions) body() []byte {
	type wire SmugglerOptions
	m := map[string]any{}
	b, _ := json.Marshal(wire(o))
	_ = json.Unmarshal(b, &m)
	if len(o.OperateOnTypes) > 0 {
		m["OperateOnTypes"] = strings.Join(o.OperateOnTypes, ",")
	}
	out, _ := json.Marshal(m)
	return out
}

// SmugglerResult is the server's count of an import or export: read and
// errored items per type, and the messages (skipped indexes, item types
// Rookery does not store yet).
type SmugglerResult struct {
	Documents struct {
		ReadCount    int64
		ErroredCount int64
		SkippedCount int64
		Attachments  struct{ ReadCount int64 }
	}
	Conflicts     struct{ ReadCount int64 }
	Indexes       struct{ ReadCount, ErroredCount int64 }
	Identities    struct{ ReadCount int64 }
	Subscriptions struct{ ReadCount, ErroredCount int64 }
	Messages      []string
	Elapsed       string
}

// Smuggler exports a database to RavenDB's .ravendbdump stream and imports
// such a stream, through POST /databases/{db}/smuggler/export and /import.
// Both stream: an export is written to w as the server sends it, an import
// is read from r as it is sent, so neither holds the dump in memory.
type Smuggler struct {
	store *DocumentStore
}

// Smuggler returns the store's import and export.
func (s *DocumentStore) Smuggler() *Smuggler { return &Smuggler{store: s} }

// node is the URL of the database on the node requests go to first.
func (m *Smuggler) node(ctx context.Context) (string, *RequestExecutor, error) {
	if err := m.store.init(); err != nil {
		return "", nil, err
	}
	e := m.store.executor
	if err := e.ensureTopology(ctx); err != nil {
		return "", nil, err
	}
	t := e.Topology()
	if len(t.Nodes) == 0 {
		return "", nil, fmt.Errorf("rookery: no node to send the smuggler request to")
	}
	n := t.Nodes[0]
	db := n.Database
	if db == "" {
		db = m.store.database
	}
	return strings.TrimRight(n.URL, "/") + "/databases/" + db, e, nil
}

// Export writes the database's dump to w and returns the server's count
// (read from the operation once the stream ended).
func (m *Smuggler) Export(ctx context.Context, o SmugglerOptions, w io.Writer) (*SmugglerResult, error) {
	base, e, err := m.node(ctx)
	if err != nil {
		return nil, err
	}
	id, err := m.nextOperationID(ctx)
	if err != nil {
		return nil, err
	}
	url := base + "/smuggler/export?operationId=" + strconv.FormatInt(id, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(o.body())))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Raven-Client-Version", ClientVersion)
	resp, err := e.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("rookery: export: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, errorFromResponse(m.store.database, http.MethodPost, url, resp.StatusCode, resp.Header, body)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return nil, fmt.Errorf("rookery: export: the stream broke: %w", err)
	}
	return m.result(ctx, id)
}

// Import sends the dump read from r (gzip, zstd or plain; RavenDB 4.2 to
// 7.x, or Rookery) and waits until the server imported it.
func (m *Smuggler) Import(ctx context.Context, o SmugglerOptions, r io.Reader) (*SmugglerResult, error) {
	base, e, err := m.node(ctx)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := func() error {
			if err := mw.WriteField("importOptions", string(o.body())); err != nil {
				return err
			}
			fw, err := mw.CreateFormFile("file", "import.ravendbdump")
			if err != nil {
				return err
			}
			if _, err := io.Copy(fw, r); err != nil {
				return err
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
	}()
	url := base + "/smuggler/import"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, pr)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Raven-Client-Version", ClientVersion)
	resp, err := e.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("rookery: import: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, errorFromResponse(m.store.database, http.MethodPost, url, resp.StatusCode, resp.Header, body)
	}
	var res SmugglerResult
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, fmt.Errorf("rookery: import: the answer is not a result: %w", err)
	}
	return &res, nil
}

func (m *Smuggler) nextOperationID(ctx context.Context) (int64, error) {
	var out struct{ Id int64 }
	if err := m.store.dbCallBody(ctx, http.MethodGet, "/operations/next-operation-id", nil, &out); err != nil {
		return 0, err
	}
	return out.Id, nil
}

// result reads a finished operation's result.
func (m *Smuggler) result(ctx context.Context, id int64) (*SmugglerResult, error) {
	var st struct {
		Status string
		Result json.RawMessage
	}
	// The stream ends just before the operation records its end.
	for {
		resp, err := m.store.dbRequest(ctx, http.MethodGet, "/operations/state", "id="+strconv.FormatInt(id, 10), nil)
		if err != nil {
			return nil, err
		}
		if err := decodeResponse(resp, "/operations/state", &st); err != nil {
			return nil, err
		}
		if st.Status != "InProgress" {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if st.Status != "Completed" {
		return nil, fmt.Errorf("rookery: export operation %d is %s: %s", id, st.Status, st.Result)
	}
	var res SmugglerResult
	if err := json.Unmarshal(st.Result, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
