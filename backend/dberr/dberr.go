// Package dberr holds the error kinds the engine reports. The web layer maps
// each kind to an HTTP status and a RavenDB exception type; the engine never
// speaks HTTP.
package dberr

import (
	"errors"
	"fmt"
)

// Kind classifies an engine error.
type Kind int

const (
	// Internal is an unexpected failure (500).
	Internal Kind = iota
	// BadRequest is malformed or invalid input (400).
	BadRequest
	// Concurrency is an optimistic-concurrency violation (409).
	Concurrency
	// NotFound is a missing resource (404).
	NotFound
	// DatabaseMissing is an unknown database (503 with Database-Missing).
	DatabaseMissing
	// InvalidOperation is a valid request the current state refuses (400).
	InvalidOperation
	// Unavailable means the node cannot serve now, e.g. it is shutting down (503).
	Unavailable
	// DocumentConflict is a document whose versions conflict (409).
	DocumentConflict
	// UnknownDatabase is a database an administrative request names that
	// does not exist (404; DatabaseMissing is the 503 a client's request to
	// a database gets, which RavenDB's clients route on).
	UnknownDatabase
	// Forbidden is a caller without the clearance a request needs (403).
	Forbidden
	// TooLarge is input over a configured size limit (413); the message
	// names the limit and its flag.
	TooLarge
)

// Error is an engine error with a kind and a readable message.
type Error struct {
	Kind     Kind
	Msg      string
	Database string // set for DatabaseMissing
	DocID    string // set for DocumentConflict
	Err      error  // optional cause
}

func (e *Error) Error() string {
	if e.Err != nil && e.Msg == "" {
		return e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// New builds an error of kind k.
func New(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// KindOf returns the kind of err, Internal when it carries none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

// Is reports whether err is an engine error of kind k.
func Is(err error, k Kind) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == k
}
