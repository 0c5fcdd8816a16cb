package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrStoreClosed is returned by operations on a closed DocumentStore.
var ErrStoreClosed = errors.New("rookery: document store is closed")

// ErrNotTracked is returned when an entity passed to a session method is not
// known to that session.
var ErrNotTracked = errors.New("rookery: entity is not tracked by this session")

// ErrNonUniqueObject is returned when a second entity is stored under an id
// the session already tracks for another entity.
var ErrNonUniqueObject = errors.New("rookery: another entity with the same id is already tracked by this session")

// ErrDeleted is returned when an entity is stored under an id the session has
// been asked to delete.
var ErrDeleted = errors.New("rookery: the document was deleted in this session")

// ServerError is an error reported by the server in its error envelope
// ({"Type","Message","Error"}), or an unexpected status without one.
type ServerError struct {
	StatusCode int
	Method     string
	URL        string
	Type       string // the server's exception type, e.g. "Raven.Client.Exceptions.InvalidQueryException"
	Message    string
	Detail     string // the envelope's "Error" field (message + stack)
}

func (e *ServerError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = firstLine(e.Detail)
	}
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	if t := e.ShortType(); t != "" {
		return fmt.Sprintf("rookery: %s %s: %d %s: %s", e.Method, e.URL, e.StatusCode, t, msg)
	}
	return fmt.Sprintf("rookery: %s %s: %d: %s", e.Method, e.URL, e.StatusCode, msg)
}

// ShortType is the last dot-separated part of Type
// ("InvalidQueryException").
func (e *ServerError) ShortType() string {
	if i := strings.LastIndexByte(e.Type, '.'); i >= 0 {
		return e.Type[i+1:]
	}
	return e.Type
}

// ConcurrencyError is an optimistic-concurrency violation (HTTP 409): a
// change vector did not match, a document that had to be new exists, or a
// database being created exists already.
type ConcurrencyError struct {
	ServerError
}

func (e *ConcurrencyError) Error() string { return e.ServerError.Error() }

// Unwrap exposes the underlying ServerError to errors.As.
func (e *ConcurrencyError) Unwrap() error { return &e.ServerError }

// ErrAuthorization is what every refusal of the client's identity matches
// with errors.Is: an *AuthorizationError (HTTP 401 or 403, RavenDB's
// InvalidAuth), and a subscription worker refused with AuthorizationFailed
// (a *SubscriptionError). The same certificate is refused by every node, so
// the request executor does not try the other nodes.
var ErrAuthorization = errors.New("rookery: not authorized")

// AuthorizationError is a request the server refused because of who the
// client is (HTTP 401 or 403): no certificate, a certificate the cluster
// does not know, or one without the access the request needs (a read-only
// certificate saving, a database it has no permission on).
type AuthorizationError struct {
	ServerError
	// NoCertificate is set when the store presented no certificate to an
	// https node (Conventions.Certificate is nil, and no HTTPClient of the
	// application's own could have presented one).
	NoCertificate bool
}

func (e *AuthorizationError) Error() string {
	msg := e.ServerError.Error()
	if e.NoCertificate {
		msg += " (this store presents no client certificate: set Conventions.Certificate, see LoadCertificate)"
	}
	return msg
}

// Unwrap exposes the underlying ServerError to errors.As.
func (e *AuthorizationError) Unwrap() error { return &e.ServerError }

// Is matches ErrAuthorization.
func (e *AuthorizationError) Is(target error) bool { return target == ErrAuthorization }

// DatabaseDoesNotExistError says the database is missing on every node the
// store could reach.
type DatabaseDoesNotExistError struct {
	Database string
	Message  string
}

func (e *DatabaseDoesNotExistError) Error() string {
	if e.Message != "" && e.Message != e.Database {
		return fmt.Sprintf("rookery: database %q does not exist: %s", e.Database, e.Message)
	}
	return fmt.Sprintf("rookery: database %q does not exist", e.Database)
}

// AllNodesFailedError is returned when no node answered a request; Errors
// holds the failure of each node tried, in order.
type AllNodesFailedError struct {
	Method string
	Path   string
	Errors []error
}

func (e *AllNodesFailedError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, err := range e.Errors {
		parts[i] = err.Error()
	}
	return fmt.Sprintf("rookery: %s %s failed on every node: %s", e.Method, e.Path, strings.Join(parts, "; "))
}

// Unwrap returns the per-node errors, so errors.Is/As look into them.
func (e *AllNodesFailedError) Unwrap() []error { return e.Errors }

// errorEnvelope is the JSON body of a server error.
type errorEnvelope struct {
	URL     string `json:"Url"`
	Type    string `json:"Type"`
	Message string `json:"Message"`
	Error   string `json:"Error"`
}

// errorFromResponse maps a failed response to a Go error.
func errorFromResponse(database, method, url string, status int, header http.Header, body []byte) error {
	var env errorEnvelope
	_ = json.Unmarshal(body, &env)
	se := ServerError{StatusCode: status, Method: method, URL: url, Type: env.Type, Message: env.Message, Detail: env.Error}
	if se.Message == "" && se.Detail == "" && len(body) > 0 && env.Type == "" {
		se.Message = strings.TrimSpace(string(truncate(body, 512)))
	}
	if missing := header.Get("Database-Missing"); missing != "" {
		return &DatabaseDoesNotExistError{Database: orDefault(database, missing), Message: missing}
	}
	if strings.HasSuffix(env.Type, "DatabaseDoesNotExistException") {
		return &DatabaseDoesNotExistError{Database: database, Message: orDefault(env.Message, firstLine(env.Error))}
	}
	if strings.HasSuffix(env.Type, "DocumentConflictException") {
		var c struct{ DocId string }
		_ = json.Unmarshal(body, &c)
		return &DocumentConflictError{ServerError: se, DocID: c.DocId}
	}
	if status == http.StatusUnauthorized || status == http.StatusForbidden || env.Type == "InvalidAuth" || strings.HasSuffix(env.Type, "AuthorizationException") {
		return &AuthorizationError{ServerError: se}
	}
	if status == http.StatusConflict || strings.HasSuffix(env.Type, "ConcurrencyException") {
		return &ConcurrencyError{ServerError: se}
	}
	return &se
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return strings.TrimSpace(s)
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
