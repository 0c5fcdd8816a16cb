package views

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rookerydb/rookery/backend/auth"
)

// Permit tells whether the viewer of a page may use a route: method and the
// route's Echo pattern exactly as web/access.go keys its rules
// ("POST", "/studio/db/:db/doc"), db the database the action would act on.
// The web layer builds it from its one table of access rules and puts it in
// the request's context; components show an action only when it allows it
// (the server refuses the action anyway).
type Permit func(method, route, db string) bool

type permitKey struct{}

// WithPermit returns ctx carrying p.
func WithPermit(ctx context.Context, p Permit) context.Context {
	return context.WithValue(ctx, permitKey{}, p)
}

// Can tells whether the page's viewer may use a route. Without a Permit in
// the context nothing is allowed: an action is shown only when the access
// rules say so.
func Can(ctx context.Context, method, route, db string) bool {
	p, _ := ctx.Value(permitKey{}).(Permit)
	return p != nil && p(method, route, db)
}

// ExpiryWarning is how close to its end a certificate is flagged (the
// Certificates page's badge, the notification area's alert).
const ExpiryWarning = 30 * 24 * time.Hour

// Expiry classifies a certificate's end: "expired", "expiring" (within
// ExpiryWarning) or "" (fine, or unknown).
func Expiry(notAfter, now time.Time) string {
	switch {
	case notAfter.IsZero():
		return ""
	case !now.Before(notAfter):
		return "expired"
	case notAfter.Sub(now) <= ExpiryWarning:
		return "expiring"
	}
	return ""
}

// ExpiryText says when a certificate ends, relative to now: "expired
// 3 days ago", "expires in 12 days", "expires today".
func ExpiryText(notAfter, now time.Time) string {
	if notAfter.IsZero() {
		return "no expiry known"
	}
	d := notAfter.Sub(now)
	days := int(d / (24 * time.Hour))
	switch {
	case d <= 0:
		ago := int(-d / (24 * time.Hour))
		if ago == 0 {
			return "expired today"
		}
		return "expired " + plural(ago, "1 day ago", strconv.Itoa(ago)+" days ago")
	case days == 0:
		return "expires today"
	}
	return "expires in " + plural(days, "1 day", strconv.Itoa(days)+" days")
}

// UnsecuredWarning says who is an administrator of an unsecured node,
// from --unsecured-access-allowed.
func UnsecuredWarning(access string) string {
	who := "anyone who can reach this node from this machine (loopback)"
	switch {
	case strings.Contains(access, "PublicNetwork"):
		who = "anyone who can reach this node, from any network"
	case strings.Contains(access, "PrivateNetwork"):
		who = "anyone who can reach this node from this machine or a private network"
	}
	return "this node runs without authentication, so " + who + " is a cluster administrator. Secure it with certificates (studio setup)."
}

func readsNodeTitle(ch Chrome) string {
	t := "This page reads node " + ch.NodeTag
	if ch.NodeURL != "" {
		t += " at " + ch.NodeURL
	}
	switch {
	case ch.NodeRole == "leader":
		t += ", the cluster's leader"
	case ch.NodeRole != "" && ch.LeaderTag != "":
		t += ", a " + ch.NodeRole + "; the leader is node " + ch.LeaderTag
	case ch.NodeRole != "":
		t += ", a " + ch.NodeRole + " that knows of no leader"
	}
	return t + ". Its figures are this node's own unless a page says otherwise."
}

func whoTitle(id *auth.Identity) string {
	t := "Certificate " + id.Name + " (" + id.Thumbprint + "), clearance " + string(id.Clearance)
	if p := permissionList(id.Permissions); p != "" {
		t += "; databases: " + p
	}
	if !id.NotAfter.IsZero() {
		t += "; valid until " + id.NotAfter.UTC().Format("2006-01-02")
	}
	return t
}

// permissionList is a ValidUser's databases, sorted: "orders: Read, shop: ReadWrite".
func permissionList(perms map[string]auth.Access) string {
	out := make([]string, 0, len(perms))
	for db, a := range perms {
		out = append(out, db+": "+string(a))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
