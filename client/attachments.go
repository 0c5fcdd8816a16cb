package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Attachments: the store-level operations of RavenDB's
// PutAttachmentOperation, GetAttachmentOperation, DeleteAttachmentOperation
// and HEAD /attachments (PUT, GET, HEAD and DELETE
// /databases/{db}/attachments?id=&name=). Uploads and downloads stream: the
// content never sits whole in the client's memory.

// AttachmentName is one entry of a document's @metadata.@attachments.
type AttachmentName struct {
	Name        string `json:"Name"`
	Hash        string `json:"Hash"` // base64 SHA-256 of the content
	ContentType string `json:"ContentType"`
	Size        int64  `json:"Size"`
}

// AttachmentDetails describes a stored attachment: its name, hash, content
// type and size, the document it belongs to and the change vector of the
// document version that lists it.
type AttachmentDetails struct {
	AttachmentName
	DocumentID   string `json:"DocumentId"`
	ChangeVector string `json:"ChangeVector"`
}

// AttachmentResult is a downloaded attachment: Data streams the content
// from the server and must be closed; Details come from the response
// headers (DocumentID is the id that was asked for).
type AttachmentResult struct {
	Data    io.ReadCloser
	Details AttachmentDetails
}

// Close closes Data.
func (r *AttachmentResult) Close() error { return r.Data.Close() }

// Limits the server enforces on what PutAttachment sends (checked before
// any byte of the content is read).
const (
	maxAttachmentNameBytes = 512
	maxContentTypeBytes    = 1024
)

// checkAttachmentArgs refuses an empty document id or attachment name, as
// the server would.
func checkAttachmentArgs(op, docID, name string) error {
	if strings.TrimSpace(docID) == "" {
		return fmt.Errorf("rookery: %s: the document id is empty", op)
	}
	if strings.TrimSpace(name) == "" {
		return fmt.Errorf("rookery: %s: the attachment name is empty", op)
	}
	return nil
}

// checkAttachmentPut applies the server's rules for a new attachment's
// name, content type and size.
func checkAttachmentPut(docID, name, contentType string, size int64) error {
	const op = "put attachment"
	if err := checkAttachmentArgs(op, docID, name); err != nil {
		return err
	}
	switch {
	case len(name) > maxAttachmentNameBytes:
		return fmt.Errorf("rookery: %s: the attachment name is %d bytes long; the limit is %d UTF-8 bytes", op, len(name), maxAttachmentNameBytes)
	case !utf8.ValidString(name):
		return fmt.Errorf("rookery: %s: the attachment name is not valid UTF-8", op)
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("rookery: %s: the attachment name %q contains a control character", op, name)
	case len(contentType) > maxContentTypeBytes || !utf8.ValidString(contentType):
		return fmt.Errorf("rookery: %s: the content type is not valid UTF-8 or longer than %d bytes", op, maxContentTypeBytes)
	case size < -1:
		return fmt.Errorf("rookery: %s: size %d is invalid (-1 for unknown)", op, size)
	}
	return nil
}

func attachmentQuery(docID, name string) string {
	return "id=" + url.QueryEscape(docID) + "&name=" + url.QueryEscape(name)
}

// PutAttachment stores the content read from r as attachment name of the
// existing document docID, replacing an attachment of that name, and
// returns the stored attachment's details (ChangeVector is the document's
// new change vector). size is the content's length, or -1 when unknown
// (the body is then sent chunked); a reader shorter or longer than size
// fails the request. The content is streamed to the server as it is read,
// never held whole in memory; r is not closed. The upload runs under ctx;
// Conventions.RequestTimeout bounds only the wait for the server's answer
// once the content is sent.
//
// expectedChangeVector, when not nil and not empty, is the change vector
// the document must have (optimistic concurrency): another one fails with
// a *ConcurrencyError and stores nothing. A missing document fails with a
// *ServerError of status 404 (Type DocumentDoesNotExistException).
//
// Content already sent cannot be sent again, so the request fails over to
// another node only when not one byte of r was read.
func (s *DocumentStore) PutAttachment(ctx context.Context, docID, name, contentType string, r io.Reader, size int64, expectedChangeVector *string) (AttachmentDetails, error) {
	if err := checkAttachmentPut(docID, name, contentType, size); err != nil {
		return AttachmentDetails{}, err
	}
	if r == nil {
		return AttachmentDetails{}, errors.New("rookery: put attachment: nil reader")
	}
	if err := s.init(); err != nil {
		return AttachmentDetails{}, err
	}
	q := attachmentQuery(docID, name)
	if contentType != "" {
		q += "&contentType=" + url.QueryEscape(contentType)
	}
	body := &sharedBody{r: r, limit: size}
	if size == 0 {
		// net/http takes a zero ContentLength with a body for "unknown":
		// send no body, after making sure there is none.
		var one [1]byte
		if n, _ := io.ReadFull(r, one[:]); n > 0 {
			return AttachmentDetails{}, errors.New("rookery: put attachment: the reader holds more than the 0 bytes announced")
		}
		body = nil
	}
	req := &request{method: http.MethodPut, path: "/attachments", query: q, dbScoped: true, ifMatch: expectedChangeVector}
	resp, u, err := s.executor.stream(ctx, req, body, size, "application/octet-stream")
	if err != nil {
		return AttachmentDetails{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return AttachmentDetails{}, fmt.Errorf("rookery: PUT %s: reading response: %w", u, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return AttachmentDetails{}, s.executor.errorFrom(http.MethodPut, u, &response{status: resp.StatusCode, body: data, header: resp.Header})
	}
	var out AttachmentDetails
	if err := json.Unmarshal(data, &out); err != nil {
		return AttachmentDetails{}, fmt.Errorf("rookery: PUT %s: %w (status %d, body %.200s)", u, err, resp.StatusCode, data)
	}
	return out, nil
}

// GetAttachment downloads attachment name of document docID: nil (and no
// error) when the document or the attachment does not exist. The result's
// Data streams the content as the caller reads it, under ctx; close it
// when done (RequestTimeout bounds the wait for the answer's headers, not
// the reading).
func (s *DocumentStore) GetAttachment(ctx context.Context, docID, name string) (*AttachmentResult, error) {
	if err := checkAttachmentArgs("get attachment", docID, name); err != nil {
		return nil, err
	}
	if err := s.init(); err != nil {
		return nil, err
	}
	req := &request{method: http.MethodGet, path: "/attachments", query: attachmentQuery(docID, name), dbScoped: true}
	resp, u, err := s.executor.stream(ctx, req, nil, 0, "")
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotFound {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if len(data) == 0 {
			return nil, nil // no such document or attachment
		}
		// The attachment exists but its content has not reached this node.
		return nil, s.executor.errorFrom(http.MethodGet, u, &response{status: resp.StatusCode, body: data, header: resp.Header})
	}
	h := resp.Header
	d := AttachmentDetails{
		AttachmentName: AttachmentName{Name: name, Hash: h.Get("Attachment-Hash"), ContentType: h.Get("Content-Type"), Size: -1},
		DocumentID:     docID,
		ChangeVector:   strings.Trim(h.Get("ETag"), `"`),
	}
	if v := h.Get("Attachment-Size"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("rookery: GET %s: invalid Attachment-Size %q", u, v)
		}
		d.Size = n
	}
	return &AttachmentResult{Data: resp.Body, Details: d}, nil
}

// AttachmentExists tells whether document docID has attachment name (a
// HEAD request; false when the document does not exist).
func (s *DocumentStore) AttachmentExists(ctx context.Context, docID, name string) (bool, error) {
	if err := checkAttachmentArgs("attachment exists", docID, name); err != nil {
		return false, err
	}
	resp, err := s.dbRequest(ctx, http.MethodHead, "/attachments", attachmentQuery(docID, name), nil)
	if err != nil {
		return false, err
	}
	return resp.status == http.StatusOK, nil
}

// DeleteAttachment deletes attachment name of document docID, writing a
// new version of the document. Deleting an attachment (or of a document)
// that does not exist is no error. expectedChangeVector, when not nil and
// not empty, is the change vector the document must have: another one
// fails with a *ConcurrencyError.
func (s *DocumentStore) DeleteAttachment(ctx context.Context, docID, name string, expectedChangeVector *string) error {
	if err := checkAttachmentArgs("delete attachment", docID, name); err != nil {
		return err
	}
	if err := s.init(); err != nil {
		return err
	}
	req := &request{method: http.MethodDelete, path: "/attachments", query: attachmentQuery(docID, name), dbScoped: true, ifMatch: expectedChangeVector}
	resp, err := s.executor.execute(ctx, req)
	if err != nil {
		return err
	}
	if resp.status == http.StatusNotFound {
		return s.executor.errorFrom(http.MethodDelete, "/attachments?"+req.query, resp)
	}
	return nil
}

// AttachmentNames lists the attachments of document docID, by name, as its
// @metadata.@attachments holds them (empty when it has none). A missing
// document fails with a *ServerError of status 404 (Type
// DocumentDoesNotExistException), as PutAttachment does.
func (s *DocumentStore) AttachmentNames(ctx context.Context, docID string) ([]AttachmentName, error) {
	if strings.TrimSpace(docID) == "" {
		return nil, errors.New("rookery: attachment names: the document id is empty")
	}
	if err := s.init(); err != nil {
		return nil, err
	}
	q := "id=" + url.QueryEscape(docID)
	resp, err := s.executor.execute(ctx, &request{method: http.MethodGet, path: "/docs", query: q, dbScoped: true, cacheable: true})
	if err != nil {
		return nil, err
	}
	var out struct {
		Results []*struct {
			Metadata struct {
				Attachments []AttachmentName `json:"@attachments"`
			} `json:"@metadata"`
		}
	}
	if resp.status != http.StatusNotFound {
		if err := json.Unmarshal(resp.body, &out); err != nil {
			return nil, fmt.Errorf("rookery: GET /docs?%s: %w (status %d, body %.200s)", q, err, resp.status, resp.body)
		}
	}
	if len(out.Results) == 0 || out.Results[0] == nil {
		return nil, &ServerError{StatusCode: http.StatusNotFound, Method: http.MethodGet, URL: "/docs?" + q,
			Type: "Raven.Client.Exceptions.Documents.DocumentDoesNotExistException", Message: "Document " + docID + " does not exist"}
	}
	return out.Results[0].Metadata.Attachments, nil
}

// sharedBody is a request body read by one attempt at a time: a new
// attempt claims it (only while nothing was read), after which reads of an
// earlier attempt fail, so a transport still busy with a failed attempt
// cannot take bytes from the next one.
type sharedBody struct {
	mu    sync.Mutex
	r     io.Reader
	limit int64 // the announced size, -1 unknown
	read  int64
	done  bool // r is exhausted
	owner int
	eof   func() // called (once per attempt) when r is exhausted
}

// claim hands the body to attempt id; false once bytes were read.
func (b *sharedBody) claim(id int, eof func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.read > 0 {
		return false
	}
	b.owner, b.eof = id, eof
	return true
}

func (b *sharedBody) consumed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.read > 0
}

var errStaleAttempt = errors.New("rookery: request body taken over by another attempt")

// attemptBody is one attempt's view of a sharedBody.
type attemptBody struct {
	b  *sharedBody
	id int
}

func (a *attemptBody) Read(p []byte) (int, error) {
	b := a.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.owner != a.id {
		return 0, errStaleAttempt
	}
	if b.done {
		return 0, io.EOF
	}
	var n int
	var err error
	if b.limit < 0 || b.read < b.limit {
		if b.limit >= 0 && int64(len(p)) > b.limit-b.read {
			p = p[:b.limit-b.read]
		}
		n, err = b.r.Read(p)
		b.read += int64(n)
	}
	if err == nil && b.limit >= 0 && b.read == b.limit {
		// The announced size is read. Make sure the reader holds no more
		// before its last bytes go out: net/http finds out only after
		// sending them, and the server would have a complete body to
		// store.
		var one [1]byte
		if m, perr := io.ReadFull(b.r, one[:]); m > 0 {
			return 0, fmt.Errorf("rookery: put attachment: the reader holds more than the %d bytes announced", b.limit)
		} else if perr != io.EOF {
			return 0, perr
		}
		err = io.EOF
	}
	if err == io.EOF {
		b.done = true
		if b.eof != nil {
			b.eof()
			b.eof = nil
		}
	}
	return n, err
}

// Close does not close the caller's reader.
func (a *attemptBody) Close() error { return nil }

// headerDeadline cancels a request when its answer's headers do not come
// within the request timeout of start (for an upload, start is when the
// body was all sent).
type headerDeadline struct {
	mu      sync.Mutex
	d       time.Duration
	cancel  context.CancelFunc
	t       *time.Timer
	arrived bool
}

func (h *headerDeadline) start() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.arrived && h.t == nil {
		h.t = time.AfterFunc(h.d, h.cancel)
	}
}

func (h *headerDeadline) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.arrived = true
	if h.t != nil {
		h.t.Stop()
	}
}

// cancelOnClose is a response body whose Close ends its request's context.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// stream sends r with body (nil for none; size -1 when unknown) read as it
// is sent, and returns the response with its body unread (a *cancelOnClose
// the caller must close) and the URL it was sent to. It tries the nodes
// with execute's loop (tryNodes), but moves on to the next node only while
// not one byte of body was read. Statuses >= 400 other than 404 are
// returned as errors.
func (e *RequestExecutor) stream(ctx context.Context, r *request, body *sharedBody, size int64, contentType string) (*http.Response, string, error) {
	var more func() bool
	if body != nil {
		// Once the content went (partly) to a node it cannot be sent again.
		more = func() bool { return !body.consumed() }
	}
	return tryNodes(ctx, e, r, more,
		func(attempt int, u string) (*http.Response, error) {
			return e.streamAttempt(ctx, r, u, body, attempt, size, contentType)
		},
		func(hr *http.Response) int { return hr.StatusCode },
		func(hr *http.Response) *response {
			// Only an error's body is read (at most 1 MiB), never a streamed one.
			data, _ := io.ReadAll(io.LimitReader(hr.Body, 1<<20))
			hr.Body.Close()
			return &response{status: hr.StatusCode, body: data, header: hr.Header}
		})
}

// streamAttempt sends r to one URL. It returns an error only when no HTTP
// response was received.
func (e *RequestExecutor) streamAttempt(ctx context.Context, r *request, u string, body *sharedBody, attempt int, size int64, contentType string) (*http.Response, error) {
	ctx, cancel := context.WithCancel(ctx)
	dl := &headerDeadline{d: e.conv.RequestTimeout, cancel: cancel}
	var rb io.ReadCloser
	if body != nil {
		if !body.claim(attempt, dl.start) {
			cancel()
			return nil, fmt.Errorf("rookery: %s %s: the body was partly sent and cannot be sent again", r.method, u)
		}
		rb = &attemptBody{b: body, id: attempt}
	} else {
		dl.start()
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rb)
	if err != nil {
		cancel()
		return nil, err
	}
	if rb != nil {
		req.ContentLength = size // -1: chunked
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Raven-Client-Version", ClientVersion)
	if r.ifMatch != nil {
		req.Header.Set("If-Match", `"`+*r.ifMatch+`"`)
	}
	if r.dbScoped {
		etag := int64(0)
		if st := e.topo.Load(); st != nil {
			etag = st.etag
		}
		req.Header.Set("Topology-Etag", `"`+strconv.FormatInt(etag, 10)+`"`)
	}
	began := time.Now()
	e.requests.Add(1)
	hr, err := e.http.Do(req)
	dl.stop()
	if err != nil {
		cancel()
		e.observe(r.method, u, 0, false, err, began)
		return nil, fmt.Errorf("rookery: %s %s: %w", r.method, u, err)
	}
	if hr.Header.Get("Refresh-Topology") != "" && r.dbScoped {
		e.refresh.Store(true)
	}
	e.observe(r.method, u, hr.StatusCode, false, nil, began)
	hr.Body = &cancelOnClose{ReadCloser: hr.Body, cancel: cancel}
	return hr, nil
}
