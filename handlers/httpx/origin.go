package httpx

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/rookerydb/rookery/backend/names"
)

// crossOrigin is Go's cross-origin protection: Sec-Fetch-Site, then Origin
// against Host, for every state-changing method.
var crossOrigin = http.NewCrossOriginProtection()

// CheckOrigin refuses a state-changing request from another origin (CSRF):
// a browser's Sec-Fetch-Site must say same-origin (or none: typed by the
// user), and an Origin header must match this request's scheme, host and
// port exactly (Go's check compares hosts only). Requests with neither
// header are not from a browser and carry no ambient credentials.
func CheckOrigin(r *http.Request) error {
	if err := crossOrigin.Check(r); err != nil {
		return fmt.Errorf("Cross-origin request refused: %v", err)
	}
	o := r.Header.Get("Origin")
	if o == "" || r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions {
		return nil
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	u, err := url.Parse(o)
	if err != nil || u.Scheme != scheme || !strings.EqualFold(HostWithPort(u.Host, u.Scheme), HostWithPort(r.Host, scheme)) {
		return fmt.Errorf("Cross-origin request refused: Origin %q is not %s://%s", clip(o, 100), scheme, clip(r.Host, 100))
	}
	return nil
}

// HostWithPort adds the scheme's default port to a host without one, and
// normalises IP literals (an IPv4-mapped IPv6 address is its IPv4 one).
func HostWithPort(host, scheme string) string {
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		h, p = strings.Trim(host, "[]"), "80"
		if scheme == "https" {
			p = "443"
		}
	}
	if a, err := netip.ParseAddr(h); err == nil {
		h = a.Unmap().String()
	}
	return net.JoinHostPort(h, p)
}

func clip(s string, n int) string { return names.Clip(s, n) }
