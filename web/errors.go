package web

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/operations"
)

// envelope is RavenDB's error body: the client picks its exception class
// from Type, and its message from Message (409) or Error (other statuses).
type envelope struct {
	Url     string
	Type    string
	Message string
	Error   string
	DocId   string `json:",omitempty"` // DocumentConflictException
}

// ravenError maps an error to its status and RavenDB exception type.
func ravenError(err error) (status int, typ, msg string) {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg = http.StatusText(he.Code)
		if m, ok := he.Message.(string); ok {
			msg = m
		}
		switch he.Code {
		case http.StatusNotFound, http.StatusMethodNotAllowed:
			return http.StatusBadRequest, "Raven.Client.Exceptions.Routing.RouteNotFoundException", "There is no handler for this path and method"
		case http.StatusRequestEntityTooLarge:
			return http.StatusRequestEntityTooLarge, "Raven.Client.Exceptions.BadRequestException", msg
		}
		if he.Code >= 400 && he.Code < 500 {
			return he.Code, "Raven.Client.Exceptions.BadRequestException", msg
		}
		return he.Code, "Raven.Client.Exceptions.RavenException", msg
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		// A body that ended before its Content-Length (or a chunked body
		// cut short): the client's input, not the server, is broken.
		return http.StatusBadRequest, "Raven.Client.Exceptions.BadRequestException", "The request body ended early: " + err.Error()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return http.StatusRequestTimeout, "System.TimeoutException", "The request was cancelled or timed out: " + err.Error()
	}
	// An error that names the client's exception type (a query on a
	// missing index, an invalid query, a timeout, an index that does not
	// compile) keeps its type; its status comes from the kind it unwraps
	// to.
	// A timeout is a 500 with its type, not a 408: the clients take a 408
	// for a node that is down and try the next one.
	var typed interface {
		error
		RavenType() string
	}
	if errors.As(err, &typed) {
		status := http.StatusInternalServerError
		if inner := errors.Unwrap(typed); inner != nil {
			status, _, _ = ravenError(inner)
		}
		return status, typed.RavenType(), typed.Error()
	}
	var de *dberr.Error
	if !errors.As(err, &de) {
		return http.StatusInternalServerError, "Raven.Client.Exceptions.RavenException", err.Error()
	}
	switch de.Kind {
	case dberr.BadRequest:
		return http.StatusBadRequest, "Raven.Client.Exceptions.BadRequestException", de.Error()
	case dberr.Concurrency:
		return http.StatusConflict, "Raven.Client.Exceptions.ConcurrencyException", de.Error()
	case dberr.NotFound:
		return http.StatusNotFound, "Raven.Client.Exceptions.Documents.DocumentDoesNotExistException", de.Error()
	case dberr.DatabaseMissing:
		return http.StatusServiceUnavailable, "Raven.Client.Exceptions.Database.DatabaseDoesNotExistException", de.Error()
	case dberr.InvalidOperation:
		return http.StatusBadRequest, "System.InvalidOperationException", de.Error()
	case dberr.DocumentConflict:
		return http.StatusConflict, "Raven.Client.Exceptions.Documents.DocumentConflictException", de.Error()
	case dberr.TooLarge:
		return http.StatusRequestEntityTooLarge, "Raven.Client.Exceptions.BadRequestException", de.Error()
	case dberr.Unavailable:
		return http.StatusServiceUnavailable, "Raven.Client.Exceptions.Database.DatabaseDisabledException", de.Error()
	case dberr.UnknownDatabase:
		return http.StatusNotFound, "Raven.Client.Exceptions.Database.DatabaseDoesNotExistException", de.Error()
	case dberr.Forbidden:
		return http.StatusForbidden, "InvalidAuth", de.Error()
	}
	return http.StatusInternalServerError, "Raven.Client.Exceptions.RavenException", de.Error()
}

// errorHandler writes every error as a RavenDB envelope.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if strings.HasPrefix(c.Request().URL.Path, "/studio/") {
		// People read these: a page, not a JSON envelope.
		var he *echo.HTTPError
		if errors.As(err, &he) && (he.Code == http.StatusNotFound || he.Code == http.StatusMethodNotAllowed) {
			_ = s.studio.NotFound(c)
			return
		}
	}
	status, typ, msg := ravenError(err)
	var de *dberr.Error
	if errors.As(err, &de) && de.Kind == dberr.DatabaseMissing {
		c.Response().Header().Set("Database-Missing", de.Database)
	}
	if status >= 500 && status != http.StatusServiceUnavailable {
		s.log.Error("request failed", "method", c.Request().Method, "url", c.Request().URL.String(), "error", err)
	}
	if c.Request().ContentLength != 0 {
		// A refused request may not have read its body: do not let net/http
		// read the rest before answering (a trickled body would hold the
		// answer and the connection); close the connection after it.
		c.Response().Header().Set(echo.HeaderConnection, "close")
	}
	env := envelope{Url: c.Request().URL.RequestURI(), Type: typ, Message: msg, Error: msg}
	if de != nil {
		env.DocId = de.DocID
	}
	body, _ := json.Marshal(env)
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	_ = c.Blob(status, echo.MIMEApplicationJSONCharsetUTF8, body)
}

// describeError is a failed operation's result in the clients' shape.
func describeError(err error) operations.ExceptionResult {
	status, typ, msg := ravenError(err)
	return operations.ExceptionResult{Type: typ, Message: msg, Error: msg, StatusCode: status}
}
