package query

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
)

// Request is one query: the body of POST /queries (reference §1.1) plus the
// flags the URL carries.
type Request struct {
	Query                         string
	QueryParameters               map[string]any
	WaitForNonStaleResults        bool
	WaitForNonStaleResultsTimeout Duration
	DisableCaching                bool
	SkipDuplicateChecking         bool
	// ProjectionBehavior is Default (""), FromIndex, FromIndexOrThrow,
	// FromDocument or FromDocumentOrThrow. Projections always read the
	// document here (auto indexes store no fields), which is what every
	// value but FromIndexOrThrow gives; that one is refused.
	ProjectionBehavior string

	// From the URL (?metadataOnly=true, ?disableAutoIndexCreation=true).
	MetadataOnly             bool `json:"-"`
	DisableAutoIndexCreation bool `json:"-"`
}

// Duration is a timeout on the wire: an integer number of milliseconds (the
// npm client) or a .NET TimeSpan string "[d.]hh:mm:ss[.fffffff]".
type Duration time.Duration

// UnmarshalJSON accepts a number of milliseconds, a TimeSpan string or null.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*d = 0
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := ParseTimeSpan(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	ms, err := strconv.ParseFloat(string(b), 64)
	if err != nil || ms < 0 || ms > float64(maxTimeout/time.Millisecond) {
		return dberr.New(dberr.BadRequest, "a timeout is a number of milliseconds between 0 and %d or a TimeSpan string (hh:mm:ss), not %s", maxTimeout/time.Millisecond, b)
	}
	*d = Duration(time.Duration(ms * float64(time.Millisecond)))
	return nil
}

// MarshalJSON writes milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, time.Duration(d).Milliseconds(), 10), nil
}

// maxTimeout bounds any timeout a request gives (a day).
const maxTimeout = 24 * time.Hour

// ParseTimeSpan reads a .NET TimeSpan "[-][d.]hh:mm:ss[.fffffff]" (or a plain
// number of milliseconds, as some clients send it in query strings). It is
// refused when negative or over a day.
func ParseTimeSpan(s string) (time.Duration, error) {
	bad := func() (time.Duration, error) {
		return 0, dberr.New(dberr.BadRequest, "a timeout is a TimeSpan (hh:mm:ss, d.hh:mm:ss.fffffff) or a number of milliseconds, not %q", s)
	}
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 64 {
		return bad()
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 || ms > int64(maxTimeout/time.Millisecond) {
			return bad()
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	var days int64
	rest := s
	if i := strings.IndexByte(rest, ':'); i >= 0 {
		if j := strings.IndexByte(rest[:i], '.'); j >= 0 {
			n, err := strconv.ParseInt(rest[:j], 10, 64)
			if err != nil {
				return bad()
			}
			days, rest = n, rest[j+1:]
		}
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 3 {
		return bad()
	}
	h, err1 := strconv.ParseInt(parts[0], 10, 64)
	m, err2 := strconv.ParseInt(parts[1], 10, 64)
	secText, frac, _ := strings.Cut(parts[2], ".")
	sec, err3 := strconv.ParseInt(secText, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || h < 0 || h > 23 || m < 0 || m > 59 || sec < 0 || sec > 59 || days < 0 || days > 1 || len(frac) > 7 {
		return bad()
	}
	var fracNanos int64
	if frac != "" {
		f, err := strconv.ParseInt(frac+strings.Repeat("0", 7-len(frac)), 10, 64)
		if err != nil || f < 0 {
			return bad()
		}
		fracNanos = f * 100
	}
	d := time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second + time.Duration(fracNanos)
	if d > maxTimeout {
		return bad()
	}
	return d, nil
}

// ParseRequest decodes a POST /queries body. Unknown fields are ignored (the
// clients send more than the server reads).
func ParseRequest(body []byte) (Request, error) {
	var r Request
	if err := json.Unmarshal(body, &r); err != nil {
		var de *dberr.Error
		if asDB(err, &de) {
			return r, de
		}
		return r, dberr.New(dberr.BadRequest, "the query body is not valid: %v", err)
	}
	return r, nil
}

func asDB(err error, target **dberr.Error) bool {
	for err != nil {
		if e, ok := err.(*dberr.Error); ok {
			*target = e
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// TypedError is an error with the RavenDB exception type the client
// dispatches on (the "Type" of the error envelope).
type TypedError interface {
	error
	RavenType() string
}

// IndexDoesNotExistError is a query on an index that does not exist: 404
// with Type IndexDoesNotExistException.
type IndexDoesNotExistError struct{ Name string }

func (e *IndexDoesNotExistError) Error() string {
	return fmt.Sprintf("Index '%s' does not exist.", e.Name)
}

// RavenType is the client's exception type.
func (e *IndexDoesNotExistError) RavenType() string {
	return "Raven.Client.Exceptions.Documents.Indexes.IndexDoesNotExistException"
}

// Unwrap makes the error a dberr.NotFound (404).
func (e *IndexDoesNotExistError) Unwrap() error { return dberr.New(dberr.NotFound, "%s", e.Error()) }

// InvalidQueryError is a query that does not parse or cannot run: 400 with
// Type InvalidQueryException.
type InvalidQueryError struct {
	Query string
	Err   error
}

func (e *InvalidQueryError) Error() string { return e.Err.Error() + "\nQuery: " + e.Query }

// RavenType is the client's exception type.
func (e *InvalidQueryError) RavenType() string {
	return "Raven.Client.Exceptions.InvalidQueryException"
}

// Unwrap makes the error a dberr.BadRequest (400).
func (e *InvalidQueryError) Unwrap() error { return dberr.New(dberr.BadRequest, "%s", e.Error()) }

// TimeoutError is WaitForNonStaleResults running out of time: RavenDB
// answers it with a TimeoutException (the HTTP layer maps it; RavenDB uses
// 408 Request Timeout).
type TimeoutError struct {
	Index   string
	Timeout time.Duration
	Reasons []string
}

func (e *TimeoutError) Error() string {
	msg := fmt.Sprintf("Waited for %v for the query to return non stale result on index '%s'.", e.Timeout, e.Index)
	if len(e.Reasons) > 0 {
		msg += " " + strings.Join(e.Reasons, "; ")
	}
	return msg
}

// RavenType is the client's exception type.
func (e *TimeoutError) RavenType() string { return "System.TimeoutException" }
