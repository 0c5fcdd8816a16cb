// Package names validates the names users and peers choose: databases, node
// tags, subscriptions. The API, the studio and the cluster's state machine
// all apply the same rules, so a name that one entry point would refuse can
// never reach the state through another (a raw cluster command, a forwarded
// request).
package names

import (
	"net"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rookerydb/rookery/backend/dberr"
)

var database = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// Database checks a database name: 1 to 128 letters, digits, '_', '-' or
// '.', and not "." or "..". Names are case-insensitive.
func Database(name string) error {
	if !database.MatchString(name) || name == "." || name == ".." {
		return dberr.New(dberr.BadRequest, "Database name '%s' is not valid: use 1 to 128 letters, digits, '_', '-' or '.'", clip(name))
	}
	return nil
}

// NodeTag checks a node tag: 1 to 4 upper-case letters.
func NodeTag(tag string) error {
	if len(tag) < 1 || len(tag) > 4 {
		return dberr.New(dberr.BadRequest, "node tag %q: use 1 to 4 upper-case letters", clip(tag))
	}
	for _, r := range tag {
		if r < 'A' || r > 'Z' {
			return dberr.New(dberr.BadRequest, "node tag %q: use 1 to 4 upper-case letters", clip(tag))
		}
	}
	return nil
}

// MaxSubscriptionName is the longest subscription name, in bytes.
const MaxSubscriptionName = 256

// Subscription checks a subscription name: valid UTF-8, at most 256 bytes,
// printable characters only (no control characters, no NUL), no '\', no
// leading or trailing space, and, since a name may hold '/' ("team/a"), no
// empty, "." or ".." part between slashes.
func Subscription(name string) error {
	bad := func(why string) error {
		return dberr.New(dberr.BadRequest, "Subscription name '%s' is not valid: %s", clip(name), why)
	}
	switch {
	case name == "":
		return bad("it is empty")
	case len(name) > MaxSubscriptionName:
		return bad("it is longer than 256 bytes")
	case !utf8.ValidString(name):
		return bad("it is not valid UTF-8")
	case strings.TrimSpace(name) != name:
		return bad("it starts or ends with a space")
	case strings.Contains(name, `\`):
		return bad("it contains '\\'")
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return bad("it has an empty, '.' or '..' part between slashes")
		}
	}
	for _, r := range name {
		if !unicode.IsPrint(r) && r != ' ' {
			return bad("it contains a control or non-printable character")
		}
	}
	return nil
}

// NodeURL checks a node's HTTP(S) base URL.
func NodeURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return dberr.New(dberr.BadRequest, "node URL %q is not valid: use http(s)://host:port", clip(s))
	}
	return nil
}

// HostPort checks a host:port address (the Raft address of a node).
func HostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || port == "" || len(s) > 300 {
		return dberr.New(dberr.BadRequest, "address %q is not valid: use host:port", clip(s))
	}
	return nil
}

// Clip shortens what a caller sent for an error message (a 100 KB name is
// not echoed back whole), to at most max bytes of valid UTF-8.
func Clip(s string, max int) string {
	if len(s) <= max {
		return strings.ToValidUTF8(s, "?")
	}
	return strings.ToValidUTF8(s[:max], "?") + "…"
}

func clip(s string) string { return Clip(s, 80) }

// Separator checks an identity parts separator: "/" when empty, otherwise
// one character other than '|'; it returns the separator to use.
func Separator(sep string) (string, error) {
	if sep == "" {
		return "/", nil
	}
	if utf8.RuneCountInString(sep) != 1 || sep == "|" {
		return "", dberr.New(dberr.BadRequest, "The identity parts separator must be one character other than '|', not %q", clip(sep))
	}
	return sep, nil
}

// MaxIndex is the longest index name, in bytes.
const MaxIndex = 256

// Index checks an index name: valid UTF-8, 1 to 256 bytes, no control or
// non-printable characters, no leading or trailing space. Index names hold
// '/', '(', ')', '.', '[]' and the like ("Auto/Orders/ByLines[].Price"), so
// they are never used as file names as they are (see index.FileName).
func Index(name string) error {
	bad := func(why string) error {
		return dberr.New(dberr.BadRequest, "Index name '%s' is not valid: %s", clip(name), why)
	}
	switch {
	case name == "":
		return bad("it is empty")
	case len(name) > MaxIndex:
		return bad("it is longer than 256 bytes")
	case !utf8.ValidString(name):
		return bad("it is not valid UTF-8")
	case strings.TrimSpace(name) != name:
		return bad("it starts or ends with a space")
	}
	for _, r := range name {
		if !unicode.IsPrint(r) && r != ' ' {
			return bad("it contains a control or non-printable character")
		}
	}
	return nil
}
