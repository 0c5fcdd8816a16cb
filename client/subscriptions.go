package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Subscriptions manages the data subscriptions of a store's database and
// makes workers for them. Get it from DocumentStore.Subscriptions.
type Subscriptions struct {
	store *DocumentStore
}

// Subscriptions returns the store's subscription API.
func (s *DocumentStore) Subscriptions() *Subscriptions { return &Subscriptions{store: s} }

// Starting points of a subscription (SubscriptionOptions.ChangeVector)
// other than a concrete change vector.
const (
	// BeginningOfTime starts with the collection's first document.
	BeginningOfTime = "BeginningOfTime"
	// LastDocument starts after the collection's current last document.
	LastDocument = "LastDocument"
	// DoNotChange keeps a subscription's position on Update.
	DoNotChange = "DoNotChange"
)

// SubscriptionOptions define a subscription.
type SubscriptionOptions struct {
	// Name is the subscription's name; when empty on Create the server
	// names it by its id.
	Name string
	// Query selects the documents, e.g. "from Orders where Total > 100".
	Query string
	// ChangeVector is the starting point: BeginningOfTime (or empty),
	// LastDocument, or a change vector to start after. On Update, empty
	// or DoNotChange keeps the position; anything else starts over there.
	ChangeVector string
	// MentorNode is the tag of the node that should serve the workers.
	MentorNode string
	// PinToMentorNode keeps the subscription on its mentor node.
	PinToMentorNode bool
	// Disabled creates (or, on Update, leaves) the subscription disabled.
	Disabled bool
}

// wire is the body of a create or update request: PascalCase, unset
// fields left out.
func (o SubscriptionOptions) wire() map[string]any {
	m := map[string]any{}
	if o.Name != "" {
		m["Name"] = o.Name
	}
	if o.Query != "" {
		m["Query"] = o.Query
	}
	if o.ChangeVector != "" {
		m["ChangeVector"] = o.ChangeVector
	}
	if o.MentorNode != "" {
		m["MentorNode"] = o.MentorNode
	}
	if o.PinToMentorNode {
		m["PinToMentorNode"] = true
	}
	if o.Disabled {
		m["Disabled"] = true
	}
	return m
}

// SubscriptionState is a subscription as the server reports it.
type SubscriptionState struct {
	SubscriptionID   int64 `json:"SubscriptionId"`
	SubscriptionName string
	Query            string
	// ChangeVectorForNextBatchStartingPoint is where delivery stands: the
	// next batch starts after it ("" before the first acknowledgement of a
	// subscription that starts at the beginning).
	ChangeVectorForNextBatchStartingPoint string
	Disabled                              bool
	LastClientConnectionTime              *time.Time
	LastBatchAckTime                      *time.Time
	MentorNode                            string
	PinToMentorNode                       bool
	ArchivedDataProcessingBehavior        string
}

// Create creates a subscription and returns its name.
func (c *Subscriptions) Create(ctx context.Context, o SubscriptionOptions) (string, error) {
	if o.Query == "" {
		return "", errors.New("rookery: a subscription needs a query")
	}
	var out struct{ Name string }
	if err := c.call(ctx, http.MethodPut, "/subscriptions", "raft-request-id="+newUUID(), o.wire(), &out, o.Name); err != nil {
		return "", err
	}
	return out.Name, nil
}

// Update changes the subscription named o.Name: an empty Query keeps the
// query, an empty ChangeVector (or DoNotChange) keeps the position, and
// Disabled and PinToMentorNode are set as given. Connected workers are
// closed and reconnect to the new definition. It returns the name.
func (c *Subscriptions) Update(ctx context.Context, o SubscriptionOptions) (string, error) {
	if o.Name == "" {
		return "", errors.New("rookery: Update needs the subscription's name")
	}
	body := o.wire()
	if o.ChangeVector == "" {
		body["ChangeVector"] = DoNotChange
	}
	body["Disabled"] = o.Disabled
	var out struct{ Name string }
	if err := c.call(ctx, http.MethodPost, "/subscriptions/update", "", body, &out, o.Name); err != nil {
		return "", err
	}
	return out.Name, nil
}

// Delete deletes a subscription; its connected worker ends with
// ErrSubscriptionNotFound.
func (c *Subscriptions) Delete(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, "/subscriptions", "taskName="+url.QueryEscape(name)+"&raft-request-id="+newUUID(), nil, nil, name)
}

// State returns a subscription's definition and position. An unknown name
// gives an error that is ErrSubscriptionNotFound.
func (c *Subscriptions) State(ctx context.Context, name string) (*SubscriptionState, error) {
	var out SubscriptionState
	if err := c.call(ctx, http.MethodGet, "/subscriptions/state", "name="+url.QueryEscape(name), nil, &out, name); err != nil {
		return nil, err
	}
	return &out, nil
}

// List returns up to pageSize subscriptions from the start-th.
func (c *Subscriptions) List(ctx context.Context, start, pageSize int) ([]SubscriptionState, error) {
	var out struct{ Results []SubscriptionState }
	q := "start=" + strconv.Itoa(start) + "&pageSize=" + strconv.Itoa(pageSize)
	if err := c.call(ctx, http.MethodGet, "/subscriptions", q, nil, &out, ""); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// DropConnection disconnects the subscription's worker, which ends with
// ErrSubscriptionClosed and does not reconnect.
func (c *Subscriptions) DropConnection(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodPost, "/subscriptions/drop", "name="+url.QueryEscape(name), nil, nil, name)
}

// Enable enables a disabled subscription.
func (c *Subscriptions) Enable(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodPost, "/subscriptions/enable", "name="+url.QueryEscape(name), nil, nil, name)
}

// Disable disables a subscription: its worker ends with
// ErrSubscriptionClosed and new workers are refused until it is enabled.
func (c *Subscriptions) Disable(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodPost, "/subscriptions/disable", "name="+url.QueryEscape(name), nil, nil, name)
}

// call sends a request about the database's subscriptions through the
// store's request executor; a 404 is a *SubscriptionError (NotFound).
func (c *Subscriptions) call(ctx context.Context, method, path, query string, in, out any, name string) error {
	s := c.store
	resp, err := s.dbRequest(ctx, method, path, query, in)
	if err != nil {
		return err
	}
	if resp.status == http.StatusNotFound {
		ferr := errorFromResponse(s.database, method, path, resp.status, resp.header, resp.body)
		if _, ok := ferr.(*DatabaseDoesNotExistError); ok {
			return ferr
		}
		msg := fmt.Sprintf("subscription '%s' does not exist", name)
		var se *ServerError
		if errors.As(ferr, &se) && se.Type != "" && se.Message != "" {
			msg = se.Message
		}
		return &SubscriptionError{Name: name, Status: SubscriptionStatusNotFound, Message: msg}
	}
	if out == nil || len(resp.body) == 0 {
		return nil
	}
	if err := json.Unmarshal(resp.body, out); err != nil {
		return fmt.Errorf("rookery: %s %s: %w (status %d, body %.200s)", method, path, err, resp.status, resp.body)
	}
	return nil
}

// Connection statuses the server refuses or ends a worker's connection
// with (SubscriptionError.Status).
const (
	SubscriptionStatusNotFound    = "NotFound"
	SubscriptionStatusInUse       = "InUse"
	SubscriptionStatusClosed      = "Closed"
	SubscriptionStatusInvalid     = "Invalid"
	SubscriptionStatusRedirect    = "Redirect"
	SubscriptionStatusConcurrency = "ConcurrencyReconnect"
	// SubscriptionStatusAuthorizationFailed is the TCP handshake's refusal
	// of the worker's certificate; the error is also ErrAuthorization.
	SubscriptionStatusAuthorizationFailed = "AuthorizationFailed"
)

// Sentinels a *SubscriptionError matches with errors.Is, by its Status.
var (
	ErrSubscriptionNotFound = errors.New("rookery: subscription does not exist")
	ErrSubscriptionInUse    = errors.New("rookery: subscription is in use by another worker")
	ErrSubscriptionClosed   = errors.New("rookery: subscription was closed")
	ErrSubscriptionInvalid  = errors.New("rookery: subscription is in an invalid state")
)

// SubscriptionError is a subscription the server refused or closed: a
// ConnectionStatus other than Accepted, or a 404 from the HTTP API.
type SubscriptionError struct {
	Name         string
	Status       string // SubscriptionStatusNotFound, …, or a TCP header status (AuthorizationFailed, TcpVersionMismatch)
	Message      string
	CanReconnect bool // Closed: the worker may connect again
	NoDocsLeft   bool // Closed: CloseWhenNoDocsLeft and nothing left
}

func (e *SubscriptionError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = e.Status
	}
	if e.Name != "" {
		return fmt.Sprintf("rookery: subscription %q: %s: %s", e.Name, e.Status, msg)
	}
	return fmt.Sprintf("rookery: subscription: %s: %s", e.Status, msg)
}

// Is matches the sentinel of e's status (ErrSubscriptionNotFound, …, and
// ErrAuthorization for AuthorizationFailed).
func (e *SubscriptionError) Is(target error) bool {
	switch target {
	case ErrSubscriptionNotFound:
		return e.Status == SubscriptionStatusNotFound
	case ErrSubscriptionInUse:
		return e.Status == SubscriptionStatusInUse
	case ErrSubscriptionClosed:
		return e.Status == SubscriptionStatusClosed
	case ErrSubscriptionInvalid:
		return e.Status == SubscriptionStatusInvalid
	case ErrAuthorization:
		return e.Status == SubscriptionStatusAuthorizationFailed
	}
	return false
}

// retryable reports whether a worker should connect again after e.
func (e *SubscriptionError) retryable() bool {
	switch e.Status {
	case SubscriptionStatusConcurrency, SubscriptionStatusRedirect:
		return true
	case SubscriptionStatusClosed:
		return e.CanReconnect && !e.NoDocsLeft
	}
	return false
}
