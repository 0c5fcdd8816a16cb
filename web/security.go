package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/pki"
	"github.com/rookerydb/rookery/handlers/httpx"
)

// The node's security: secured (TLS, client certificates as identities) or
// unsecured (no authentication, every caller a ClusterAdmin, allowed only on
// the addresses --unsecured-access-allowed names). See web/DESIGN.md
// "Security".

// Unsecured access ranges (RavenDB's Security.UnsecuredAccessAllowed).
const (
	accessLocal   = 1 << iota // loopback
	accessPrivate             // 10/8, 172.16/12, 192.168/16, fc00::/7
	accessPublic              // anything
)

// parseUnsecuredAccess reads None, Local, PrivateNetwork, PublicNetwork or
// a comma-separated combination.
func parseUnsecuredAccess(v string) (int, error) {
	if strings.TrimSpace(v) == "" {
		return accessLocal, nil
	}
	flags := 0
	for _, part := range strings.Split(v, ",") {
		switch strings.ToLower(strings.TrimSpace(part)) {
		case "none":
		case "local":
			flags |= accessLocal
		case "privatenetwork":
			flags |= accessPrivate
		case "publicnetwork":
			flags |= accessPublic
		default:
			return 0, fmt.Errorf("--unsecured-access-allowed: %q is not None, Local, PrivateNetwork or PublicNetwork", part)
		}
	}
	return flags, nil
}

func unsecuredAllows(flags int, a netip.Addr) bool {
	a = a.Unmap()
	switch {
	case flags&accessPublic != 0:
		return true
	case a.IsLoopback():
		return flags&accessLocal != 0
	case a.IsPrivate():
		return flags&accessPrivate != 0
	}
	return false
}

func accessName(flags int) string {
	var parts []string
	if flags&accessLocal != 0 {
		parts = append(parts, "Local")
	}
	if flags&accessPrivate != 0 {
		parts = append(parts, "PrivateNetwork")
	}
	if flags&accessPublic != 0 {
		parts = append(parts, "PublicNetwork")
	}
	if len(parts) == 0 {
		return "None"
	}
	return strings.Join(parts, ", ")
}

// checkCaller refuses, on an unsecured node, a caller (host:port) outside
// the ranges --unsecured-access-allowed names; a secured node lets the
// certificate decide.
func (sec *security) checkCaller(remote string) error {
	if sec.secured {
		return nil
	}
	if ap, err := netip.ParseAddrPort(remote); err == nil && !unsecuredAllows(sec.access, ap.Addr()) {
		return dberr.New(dberr.Forbidden, "This node runs without authentication and accepts only %s callers (--unsecured-access-allowed); %s is outside that.", accessName(sec.access), ap.Addr())
	}
	return nil
}

// checkUnsecuredBind refuses to listen unsecured on an address outside the
// allowed ranges: an unspecified address (0.0.0.0, ::) is every network.
func checkUnsecuredBind(flag, addr string, flags int) error {
	if addr == "" {
		return nil // not listening (tests that drive the handler directly)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: %v", flag, addr, err)
	}
	var addrs []netip.Addr
	if host == "" {
		addrs = []netip.Addr{netip.IPv4Unspecified()}
	} else if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		ips, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", host)
		if err != nil || len(ips) == 0 {
			return fmt.Errorf("%s %q: cannot resolve %s to check it: %v", flag, addr, host, err)
		}
		addrs = ips
	}
	for _, a := range addrs {
		ok := unsecuredAllows(flags, a)
		if a.IsUnspecified() {
			ok = flags&accessPublic != 0
		}
		if !ok {
			return fmt.Errorf("refusing to serve without TLS on %s %s: %s is outside what --unsecured-access-allowed=%s permits. "+
				"Without TLS anyone who can reach the address is a cluster admin. Set up certificates (studio setup --hosts ... --out DIR, then --tls-cert/--tls-key), "+
				"or bind a loopback address, or widen --unsecured-access-allowed (PrivateNetwork, PublicNetwork) if that network is trusted",
				flag, addr, a, accessName(flags))
		}
	}
	return nil
}

// security is the node's authentication setup.
type security struct {
	secured bool
	// unsecured: the allowed ranges and the cluster's shared secret.
	access     int
	secret     atomic.Pointer[[]byte]
	secretPath string
	// secured: this node's certificate and TLS configurations.
	cert      tls.Certificate
	serverTLS *tls.Config
	clientTLS *tls.Config
	auth      *auth.Authenticator
	registry  registryRef
	// hosts are the Host header values this node answers to.
	hosts atomic.Pointer[map[string]bool]
	extra []string // --allowed-hosts
}

// registryRef is the cluster's certificate registry, set once the cluster
// state is open (Raft handshakes may come before).
type registryRef struct {
	c atomic.Pointer[cluster.Cluster]
}

func (r *registryRef) Certificate(tp string) (auth.Certificate, bool) {
	if c := r.c.Load(); c != nil {
		return c.Certificate(tp)
	}
	return auth.Certificate{}, false
}

func (r *registryRef) Renewed(pin, issuer string) (auth.Certificate, bool) {
	if c := r.c.Load(); c != nil {
		return c.Renewed(pin, issuer)
	}
	return auth.Certificate{}, false
}

func newSecurity(cfg *Config) (*security, error) {
	sec := &security{extra: cfg.AllowedHosts}
	access, err := parseUnsecuredAccess(cfg.UnsecuredAccessAllowed)
	if err != nil {
		return nil, err
	}
	sec.access = access
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if cfg.TLSCert == "" {
		if cfg.TLSCA != "" || len(cfg.WellKnownAdminCerts) > 0 {
			return nil, errors.New("--tls-ca and --well-known-admin-certs need TLS: give --tls-cert and --tls-key")
		}
		if strings.HasPrefix(cfg.PublicURL, "https:") {
			return nil, fmt.Errorf("--public-url %s is https, but this node has no certificate (--tls-cert, --tls-key)", cfg.PublicURL)
		}
		if err := checkUnsecuredBind("--http", cfg.HTTPAddr, access); err != nil {
			return nil, err
		}
		if err := checkUnsecuredBind("--raft-addr", cfg.RaftAddr, access); err != nil {
			return nil, err
		}
		sec.secretPath = filepath.Join(cfg.DataDir, "raft", "cluster-secret")
		if b, err := os.ReadFile(sec.secretPath); err == nil {
			s, err := hex.DecodeString(strings.TrimSpace(string(b)))
			if err != nil || len(s) < 16 {
				return nil, fmt.Errorf("%s is damaged: expected the cluster's secret in hex", sec.secretPath)
			}
			sec.secret.Store(&s)
		} else if cfg.Join == "" {
			// A node that starts its own cluster makes the secret; a node
			// that joins learns it from the cluster.
			s := make([]byte, 32)
			if _, err := rand.Read(s); err != nil {
				return nil, err
			}
			if err := sec.saveSecret(s); err != nil {
				return nil, err
			}
		}
		sec.auth = &auth.Authenticator{}
		return sec, nil
	}
	sec.secured = true
	if strings.HasPrefix(cfg.PublicURL, "http:") {
		return nil, fmt.Errorf("--public-url %s is http, but this node serves TLS: use https", cfg.PublicURL)
	}
	sec.cert, err = tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	leaf, err := x509.ParseCertificate(sec.cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("--tls-cert: %w", err)
	}
	sec.cert.Leaf = leaf
	if time.Now().After(leaf.NotAfter) {
		return nil, fmt.Errorf("--tls-cert %s expired on %s", cfg.TLSCert, leaf.NotAfter.Format(time.RFC3339))
	}
	a := &auth.Authenticator{Registry: &sec.registry, Self: pki.Thumbprint(leaf.Raw), WellKnownAdmins: map[string]bool{}}
	for _, entry := range cfg.WellKnownAdminCerts {
		tp, err := wellKnownThumbprint(strings.TrimSpace(entry))
		if err != nil {
			return nil, err
		}
		if tp != "" {
			a.WellKnownAdmins[tp] = true
		}
	}
	if cfg.TLSCA != "" {
		pemBytes, err := os.ReadFile(cfg.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		a.CA = x509.NewCertPool()
		if !a.CA.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("--tls-ca %s: no certificate in it", cfg.TLSCA)
		}
	}
	sec.auth = a
	sec.serverTLS = &tls.Config{
		Certificates: []tls.Certificate{sec.cert},
		// Clients are identified by the certificate they present, checked
		// against the registrations (auth.Authenticator), not by a CA.
		ClientAuth: tls.RequestClientCert,
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
	}
	sec.clientTLS = &tls.Config{
		Certificates: []tls.Certificate{sec.cert},
		// A peer is checked as a cluster node (its certificate), not by
		// host name: nodes share one certificate or one CA.
		InsecureSkipVerify:    true,
		VerifyPeerCertificate: sec.verifyNode,
		MinVersion:            tls.VersionTLS12,
	}
	return sec, nil
}

// wellKnown are the thumbprints --well-known-admin-certs resolved to
// (its entries may be certificate files), sorted.
func (sec *security) wellKnown() []string {
	if sec.auth == nil {
		return nil
	}
	out := make([]string, 0, len(sec.auth.WellKnownAdmins))
	for tp := range sec.auth.WellKnownAdmins {
		out = append(out, tp)
	}
	sort.Strings(out)
	return out
}

// wellKnownThumbprint reads an entry of --well-known-admin-certs: a
// thumbprint (40 hex digits), or the path of a certificate file (PEM or
// DER), whose thumbprint is taken.
func wellKnownThumbprint(entry string) (string, error) {
	if entry == "" {
		return "", nil
	}
	if tp := strings.ToUpper(entry); len(tp) == 40 && strings.Trim(tp, "0123456789ABCDEF") == "" {
		return tp, nil
	}
	b, err := os.ReadFile(entry)
	if err != nil {
		return "", fmt.Errorf("--well-known-admin-certs: %q is neither a certificate thumbprint (40 hex digits) nor a readable certificate file: %v", entry, err)
	}
	c, err := pki.ParseCertificate(b)
	if err != nil {
		return "", fmt.Errorf("--well-known-admin-certs %s: %v", entry, err)
	}
	return pki.Thumbprint(c.Raw), nil
}

func (sec *security) saveSecret(s []byte) error {
	if err := os.MkdirAll(filepath.Dir(sec.secretPath), 0o700); err != nil {
		return err
	}
	tmp := sec.secretPath + ".tmp"
	if err := os.WriteFile(tmp, []byte(hex.EncodeToString(s)+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, sec.secretPath); err != nil {
		return err
	}
	sec.secret.Store(&s)
	return nil
}

// token is the cluster's shared secret (unsecured mode; nil until known).
func (sec *security) token() []byte {
	if p := sec.secret.Load(); p != nil {
		return *p
	}
	return nil
}

// tokenHex is what node-to-node HTTP requests carry (unsecured mode).
func (sec *security) tokenHex() string { return hex.EncodeToString(sec.token()) }

// verifyNode checks certificates a peer presented as a cluster node's.
func (sec *security) verifyNode(raw [][]byte, _ [][]*x509.Certificate) error {
	chain, err := auth.ParseChain(raw)
	if err != nil {
		return err
	}
	_, err = sec.auth.IdentifyNode(chain)
	return err
}

func (sec *security) raft() cluster.Security {
	if sec.secured {
		return cluster.Security{TLS: sec.clientTLS, VerifyNode: func(raw [][]byte) error { return sec.verifyNode(raw, nil) }}
	}
	return cluster.Security{Token: sec.token}
}

// nodeAuthHeader carries the cluster's secret on node-to-node HTTP requests
// of an unsecured cluster.
const nodeAuthHeader = "Rookery-Cluster-Secret"

// identify returns the caller's identity: a node (its certificate, or the
// cluster's secret), a client certificate's registration, or, unsecured,
// the unsecured admin. A nil identity with a nil error is an anonymous
// caller of a secured node; an error is a certificate or secret that was
// presented and is not accepted.
func (sec *security) identify(r *http.Request) (*auth.Identity, error) {
	if !sec.secured {
		if h := r.Header.Get(nodeAuthHeader); h != "" {
			want := sec.tokenHex()
			if want == "" || subtle.ConstantTimeCompare([]byte(h), []byte(want)) != 1 {
				return nil, &authError{msg: "The cluster secret this request carries is wrong."}
			}
			return auth.Node("node", ""), nil
		}
		return auth.UnsecuredAdmin, nil
	}
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, nil
	}
	id, err := sec.auth.Identify(r.TLS.PeerCertificates)
	if err != nil {
		return nil, err
	}
	return id, nil
}

type authError struct{ msg string }

func (e *authError) Error() string { return e.msg }

// nodeClient is how this node calls other nodes: with its certificate
// (secured) or the cluster's secret (unsecured). Timeouts come from each
// request's context.
type nodeClient struct {
	sec    *security
	client *http.Client
}

func newNodeClient(sec *security) *nodeClient {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		TLSClientConfig:     sec.clientTLS,
	}
	return &nodeClient{sec: sec, client: &http.Client{Transport: tr}}
}

// Do sends req with this node's credentials.
func (n *nodeClient) Do(req *http.Request) (*http.Response, error) {
	n.decorate(req.Header)
	return n.client.Do(req)
}

func (n *nodeClient) decorate(h http.Header) {
	if !n.sec.secured {
		if t := n.sec.tokenHex(); t != "" {
			h.Set(nodeAuthHeader, t)
		}
	}
}

// setHosts records the Host values this node answers to: its public URL's,
// its listener's (with localhost names for a loopback listener, and every
// interface's address for an unspecified one), and --allowed-hosts.
func (sec *security) setHosts(publicURL string, l net.Addr) {
	hosts := map[string]bool{}
	add := func(h string) { hosts[strings.ToLower(h)] = true }
	if u, err := url.Parse(publicURL); err == nil && u.Host != "" {
		add(httpx.HostWithPort(u.Host, u.Scheme))
	}
	if ta, ok := l.(*net.TCPAddr); ok {
		port := fmt.Sprint(ta.Port)
		ip, _ := netip.AddrFromSlice(ta.IP)
		ip = ip.Unmap()
		add(net.JoinHostPort(ip.String(), port))
		if ip.IsLoopback() || ip.IsUnspecified() {
			for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
				add(net.JoinHostPort(h, port))
			}
		}
		if ip.IsUnspecified() {
			if addrs, err := net.InterfaceAddrs(); err == nil {
				for _, a := range addrs {
					if pfx, err := netip.ParsePrefix(a.String()); err == nil {
						add(net.JoinHostPort(pfx.Addr().Unmap().String(), port))
					}
				}
			}
			if h, err := os.Hostname(); err == nil {
				add(net.JoinHostPort(h, port))
			}
		}
	}
	for _, h := range sec.extra {
		if h = strings.TrimSpace(h); h != "" {
			add(h)
		}
	}
	sec.hosts.Store(&hosts)
}

// hostAllowed tells whether a request's Host names this node. An entry of
// --allowed-hosts without a port allows that host on any port.
func (sec *security) hostAllowed(host string, tls bool) bool {
	p := sec.hosts.Load()
	if p == nil {
		return true
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	h := strings.ToLower(httpx.HostWithPort(host, scheme))
	if (*p)[h] {
		return true
	}
	if name, _, err := net.SplitHostPort(h); err == nil && (*p)[name] {
		return true
	}
	return false
}

// secretForJoiners is what a joining node is handed (unsecured clusters).
func (sec *security) secretForJoiners() string {
	if sec.secured {
		return ""
	}
	return sec.tokenHex()
}

type tlsStateKey struct{}

// connContext remembers a connection's TLS state (the handshake is done by
// then: the listener read the first byte). The HTTP server gets connections
// through the sniffing listener, so it cannot see that they are TLS itself.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if st := tlsState(c); st != nil {
		return context.WithValue(ctx, tlsStateKey{}, st)
	}
	return ctx
}

// tlsState unwraps a connection down to its *tls.Conn, if it has one.
func tlsState(c net.Conn) *tls.ConnectionState {
	for c != nil {
		if tc, ok := c.(*tls.Conn); ok {
			st := tc.ConnectionState()
			return &st
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

// withTLSState puts the connection's TLS state where handlers look for it.
func withTLSState(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			if st, ok := r.Context().Value(tlsStateKey{}).(*tls.ConnectionState); ok {
				r.TLS = st
			}
		}
		h.ServeHTTP(w, r)
	})
}
