package auth

import (
	"crypto/subtle"
	"crypto/x509"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/pki"
)

// Registry is where registered certificates are looked up (the cluster
// state).
type Registry interface {
	Certificate(thumbprint string) (Certificate, bool)
	// Renewed finds a registration with this public-key pinning hash and
	// issuer (a renewal of a registered certificate).
	Renewed(pin, issuer string) (Certificate, bool)
}

// Authenticator turns the certificate a caller presented into an identity.
type Authenticator struct {
	// Registry holds the registered certificates; nil until the cluster
	// state is open (only the rules below apply meanwhile).
	Registry Registry
	// Self is the thumbprint of this node's own certificate: a peer
	// presenting it is a node of this cluster (RavenDB's nodes typically
	// share one certificate).
	Self string
	// WellKnownAdmins are thumbprints that are ClusterAdmin without being
	// registered (--well-known-admin-certs).
	WellKnownAdmins map[string]bool
	// CA, when set, is the cluster's CA (--tls-ca): a certificate it issued
	// that carries the cluster-node mark (pki.NodeURI) is a node.
	CA *x509.CertPool
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// ErrNoCertificate is the refusal of a caller without a certificate.
var ErrNoCertificate = dberr.New(dberr.Forbidden, "This server requires client certificate for authentication, but none was provided by the client. Did you forget to install the certificate?")

func (a *Authenticator) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Identify authenticates the certificate chain a TLS client presented
// (chain[0] is the client's own certificate). The rules, in order: no
// certificate; outside its validity; this node's own certificate; a
// well-known admin; a registered certificate (or a renewal of one: same
// issuer and public key); a node certificate the cluster CA issued.
func (a *Authenticator) Identify(chain []*x509.Certificate) (*Identity, error) {
	if len(chain) == 0 {
		return nil, ErrNoCertificate
	}
	c := chain[0]
	tp := pki.Thumbprint(c.Raw)
	now := a.now()
	if now.Before(c.NotBefore) || now.After(c.NotAfter) {
		return nil, dberr.New(dberr.Forbidden, "The supplied client certificate '%s' (%s) is not valid now: it is valid from %s to %s.",
			c.Subject.CommonName, tp, c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))
	}
	if a.Self != "" && subtle.ConstantTimeCompare([]byte(tp), []byte(a.Self)) == 1 {
		return &Identity{Name: "node (" + c.Subject.CommonName + ")", Thumbprint: tp, Clearance: ClusterNode, NotAfter: c.NotAfter}, nil
	}
	if a.WellKnownAdmins[tp] {
		return &Identity{Name: c.Subject.CommonName, Thumbprint: tp, Clearance: ClusterAdmin, NotAfter: c.NotAfter}, nil
	}
	if a.Registry != nil {
		if reg, ok := a.Registry.Certificate(tp); ok {
			return reg.identity(c), nil
		}
		// A renewed certificate: same issuer and same public key as a
		// registered one (RavenDB accepts those too).
		if reg, ok := a.Registry.Renewed(pki.PinningHash(c), c.Issuer.String()); ok {
			return reg.identity(c), nil
		}
	}
	if a.CA != nil && pki.IsNodeCert(c) {
		inter := x509.NewCertPool()
		for _, ic := range chain[1:] {
			inter.AddCert(ic)
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: a.CA, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
			return &Identity{Name: "node (" + c.Subject.CommonName + ")", Thumbprint: tp, Clearance: ClusterNode, NotAfter: c.NotAfter}, nil
		}
	}
	return nil, dberr.New(dberr.Forbidden, "The supplied client certificate '%s' (%s) is unknown to the server. Register it with PUT /admin/certificates (or on the studio's Certificates page) using a ClusterAdmin or Operator certificate.",
		c.Subject.CommonName, tp)
}

// identity is the registration's identity. Its permissions are lower-cased
// already (Validate) and never modified in place, so they are shared.
func (r Certificate) identity(c *x509.Certificate) *Identity {
	return &Identity{Name: r.Name, Thumbprint: r.Thumbprint, Clearance: r.SecurityClearance, Permissions: r.Permissions, NotAfter: c.NotAfter}
}

// IdentifyNode authenticates a peer that claims to be a node: it must
// identify as ClusterNode.
func (a *Authenticator) IdentifyNode(chain []*x509.Certificate) (*Identity, error) {
	id, err := a.Identify(chain)
	if err != nil {
		return nil, err
	}
	if id.Clearance != ClusterNode {
		return nil, dberr.New(dberr.Forbidden, "Certificate %s (%s, clearance %s) is not a cluster node's", id.Name, id.Thumbprint, id.Clearance)
	}
	return id, nil
}

// ParseChain parses the raw certificates of a TLS handshake.
func ParseChain(raw [][]byte) ([]*x509.Certificate, error) {
	out := make([]*x509.Certificate, 0, len(raw))
	for _, b := range raw {
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
