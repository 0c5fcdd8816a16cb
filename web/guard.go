package web

import (
	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/names"
	"github.com/rookerydb/rookery/handlers/httpx"
)

// The guards run before routing, on every request.

// guard refuses, before anything else runs:
//   - a Host header that is not one of this node's names (DNS rebinding: a
//     page on evil.example whose name now resolves to 127.0.0.1). Requests
//     from other nodes are exempt: they authenticate, and may come through
//     a proxy (--replication-peers);
//   - unsecured, a caller outside the ranges --unsecured-access-allowed
//     names;
//   - a state-changing request from another origin (CSRF): Sec-Fetch-Site
//     must say same-origin, or Origin must match this node's scheme, host
//     and port exactly.
func (s *Server) guard(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		// Identify the caller once; authorize (after routing) uses it.
		id, idErr := s.sec.identify(r)
		c.Set(callerKey, caller{id, idErr})
		node := id != nil && id.Clearance == auth.ClusterNode
		if !node && !s.sec.hostAllowed(r.Host, r.TLS != nil) {
			return dberr.New(dberr.BadRequest, "This node does not answer to the host name %q (DNS rebinding protection). Use its own address, or add the name with --allowed-hosts.", clipHost(r.Host))
		}
		if err := s.sec.checkCaller(r.RemoteAddr); err != nil {
			return err
		}
		if err := httpx.CheckOrigin(r); err != nil {
			return dberr.New(dberr.Forbidden, "%s", err.Error())
		}
		return next(c)
	}
}

// callerKey is where guard leaves the caller's identity for authorize.
const callerKey = "rookery.caller"

// caller is who guard found the caller to be: an identity, or the reason a
// presented certificate or secret was not accepted (both nil: anonymous).
type caller struct {
	id  *auth.Identity
	err error
}

func clipHost(h string) string { return names.Clip(h, 100) }

// studioHeaders are the browser protections of every response: no framing
// (clickjacking), no MIME sniffing, and a content security policy that lets
// pages run only the studio's own scripts and styles.
func studioHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		return next(c)
	}
}
