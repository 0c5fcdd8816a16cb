// Package views holds the studio's templ components. Every value that comes
// from documents is untrusted: templ escapes it, and no component here
// bypasses that (no templ.Raw of data).
package views

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/dustin/go-humanize"

	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/auth"
)

// Fragment is a live region of a page: the element with this id is replaced
// by the component's HTML when the hub pushes an update.
type Fragment struct {
	ID string
	C  templ.Component
}

// Nav keys; every page sets one as active.
const (
	NavDashboard      = "dashboard"
	NavDatabases      = "databases"
	NavCluster        = "cluster"
	NavDocuments      = "documents"
	NavHiLo           = "hilo"
	NavIdentities     = "identities"
	NavStats          = "stats"
	NavReplication    = "replication"
	NavConflicts      = "conflicts"
	NavSubscriptions  = "subscriptions"
	NavQuery          = "query"
	NavIndexes        = "indexes"
	NavCertificates   = "certificates"
	NavAudit          = "audit"
	NavSmuggler       = "smuggler"
	NavServerSmuggler = "server-smuggler"
)

// Chrome is what the layout needs around a page.
type Chrome struct {
	Title    string
	Database string // the database in context, "" on server-wide pages
	Active   string // nav key
	// Live is the page's live-update name; with Query it forms the
	// websocket URL. Empty for pages without live regions.
	Live    string
	Query   url.Values
	NodeTag string
	Alerts  []alerts.Alert
	// Flash is a one-line message after an action (e.g. "Saved").
	Flash      string
	FlashError bool
	// Conflicts is the number of conflicted documents in Database.
	Conflicts int
	// NodeURL is the URL of the node the page reads (NodeTag's).
	NodeURL string
	// NodeRole is that node's Raft role ("leader", "follower",
	// "candidate"; "" without a cluster) and LeaderTag the leader it knows
	// of ("" when none): the header says which node a page reads.
	NodeRole  string
	LeaderTag string
	// Who is the viewer's identity (nil when anonymous); Unsecured names
	// who may call an unsecured node (--unsecured-access-allowed: "Local",
	// ...), "" on a secured node.
	Who       *auth.Identity
	Unsecured string
	// Now is when the page was rendered (expiry badges).
	Now time.Time
	// Ops are the running operations the viewer may see (the header's
	// notification area).
	Ops []RunningOp
}

// LiveURL is the websocket path the page's script connects to.
func (c Chrome) LiveURL() string {
	if c.Live == "" {
		return ""
	}
	q := url.Values{}
	for k, v := range c.Query {
		q[k] = v
	}
	q.Del("flash")
	q.Del("error")
	q.Set("page", c.Live)
	if c.Database != "" {
		q.Set("db", c.Database)
	}
	return "/studio/live?" + q.Encode()
}

// DBURL builds a studio URL inside a database: DBURL("shop", "documents").
func DBURL(db, page string) templ.SafeURL {
	return templ.SafeURL("/studio/db/" + url.PathEscape(db) + "/" + page)
}

// DBURLQ is DBURL with a query string.
func DBURLQ(db, page string, q url.Values) templ.SafeURL {
	return templ.SafeURL("/studio/db/" + url.PathEscape(db) + "/" + page + "?" + q.Encode())
}

// DocURL links to one document's page.
func DocURL(db, id string) templ.SafeURL {
	return templ.SafeURL("/studio/db/" + url.PathEscape(db) + "/doc?id=" + url.QueryEscape(id))
}

// Num formats an integer with thousands separators.
func Num(n int64) string { return humanize.Comma(n) }

// Rate formats a per-second rate.
func Rate(r float64) string {
	if r >= 100 || r == 0 {
		return humanize.Comma(int64(math.Round(r)))
	}
	return strconv.FormatFloat(r, 'f', 1, 64)
}

// Bytes formats a size.
func Bytes(n int64) string { return humanize.IBytes(uint64(max(n, 0))) }

// Ago formats a time relative to now; "never" for the zero time.
func Ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := time.Since(t)
	switch {
	case d < 2*time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.UTC().Format("2006-01-02 15:04")
}

// Stamp formats a time exactly (UTC).
func Stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

// Sparkline returns the points of an SVG polyline for values in a w×h box.
func Sparkline(values []float64, w, h int) string {
	if len(values) == 0 {
		return ""
	}
	top := 0.0
	for _, v := range values {
		top = max(top, v)
	}
	if top == 0 {
		top = 1
	}
	var b strings.Builder
	step := float64(w)
	if len(values) > 1 {
		step = float64(w) / float64(len(values)-1)
	}
	for i, v := range values {
		x := float64(i) * step
		y := float64(h) - v/top*float64(h-2) - 1
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", x, y)
	}
	return b.String()
}

// MaxOf is the largest value (0 for none).
func MaxOf(values []float64) float64 {
	m := 0.0
	for _, v := range values {
		m = max(m, v)
	}
	return m
}

func navClass(active, key string) string {
	if active == key {
		return "nav-link active"
	}
	return "nav-link"
}

func ariaCurrent(active, key string) string {
	if active == key {
		return "page"
	}
	return "false"
}
