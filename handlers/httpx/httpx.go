// Package httpx holds the few HTTP helpers that both handler packages,
// handlers/api (the RavenDB-compatible wire protocol) and handlers/studio
// (the studio's pages), and the router assembly in web/ need. It exists so
// that neither handler package imports the other: what they share in
// meaning lives in the backend domain packages; what they share here is
// purely HTTP (a client for node-to-node requests, the same-origin check,
// where a handler names the object of an audited action). Keep it that
// small: no handler, no view, no domain rule belongs here.
package httpx

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// NodeClient sends a request to another node with this node's credentials
// (its certificate, or the cluster's secret). Timeouts come from the
// request's context.
type NodeClient interface {
	Do(req *http.Request) (*http.Response, error)
}

// plainNodes is the NodeClient of a node built without one (tests that
// drive the handlers directly): no credentials.
var plainNodes NodeClient = &http.Client{}

// OrPlain is n, or a client without credentials when n is nil.
func OrPlain(n NodeClient) NodeClient {
	if n == nil {
		return plainNodes
	}
	return n
}

// AuditTargetKey is where a handler names what an audited action was
// about (web/access.go records it).
const AuditTargetKey = "audit.target"

// SetAuditTarget names the object of an audited action.
func SetAuditTarget(c echo.Context, target string) { c.Set(AuditTargetKey, target) }
