package rql

import (
	"fmt"
	"sync/atomic"
)

// Limits bound the queries Parse accepts.
type Limits struct {
	// MaxLength is the longest query text, in bytes.
	MaxLength int
	// MaxDepth is the deepest nesting of the where clause: each
	// parenthesis, not, exact() and boost() opens a level.
	MaxDepth int
}

// Defaults. A query a client builds is a few hundred bytes (values travel as
// $parameters) and nests a handful of levels; 64 KiB and 128 levels leave
// ample room for hand-written queries with long literal lists while keeping
// the token list and the parser's recursion small.
const (
	DefaultMaxLength = 64 << 10
	DefaultMaxDepth  = 128
)

// DefaultLimits are the limits in force until SetLimits.
func DefaultLimits() Limits { return Limits{MaxLength: DefaultMaxLength, MaxDepth: DefaultMaxDepth} }

var limits atomic.Pointer[Limits]

// SetLimits sets the limits of every later Parse (the server sets them once
// at start from its flags); a zero field takes its default.
func SetLimits(l Limits) error {
	if l.MaxLength < 0 || l.MaxDepth < 0 {
		return fmt.Errorf("rql: negative limits %+v", l)
	}
	if l.MaxLength == 0 {
		l.MaxLength = DefaultMaxLength
	}
	if l.MaxDepth == 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	limits.Store(&l)
	return nil
}

// CurrentLimits returns the limits Parse applies.
func CurrentLimits() Limits {
	if l := limits.Load(); l != nil {
		return *l
	}
	return DefaultLimits()
}
