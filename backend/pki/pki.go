// Package pki holds what Rookery needs of X.509: certificate thumbprints as
// RavenDB writes them, public-key pinning hashes, the mark that makes a
// certificate a cluster node's, and (in setup.go) generating the CA, node and
// client certificates of a secured cluster. It has no HTTP and no state.
package pki

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// NodeURI is the URI subject alternative name that marks a certificate
// issued by the cluster's CA as a cluster node's certificate. A certificate
// that chains to the CA given with --tls-ca and carries it authenticates as
// ClusterNode (see backend/auth).
const NodeURI = "urn:rookery:cluster-node"

// Thumbprint is a certificate's SHA-1 over its DER bytes in upper-case hex:
// the identifier RavenDB uses for certificates.
func Thumbprint(der []byte) string {
	sum := sha1.Sum(der)
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}

// PinningHash is the base64 SHA-256 of a certificate's public key (its
// SubjectPublicKeyInfo). A renewed certificate keeps it when its key is kept.
func PinningHash(c *x509.Certificate) string {
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// IsNodeCert tells whether c carries the cluster-node mark.
func IsNodeCert(c *x509.Certificate) bool {
	for _, u := range c.URIs {
		if u.String() == NodeURI {
			return true
		}
	}
	return false
}

// NodeURL is NodeURI parsed, for certificate templates.
func NodeURL() *url.URL {
	u, _ := url.Parse(NodeURI)
	return u
}

// maxCertificateBytes bounds a certificate someone hands us (PEM or base64).
const maxCertificateBytes = 64 << 10

// ParseCertificate reads one certificate given as PEM (the first
// CERTIFICATE block is used), as base64 DER (what RavenDB's clients send in
// PUT /admin/certificates), or as raw DER.
func ParseCertificate(b []byte) (*x509.Certificate, error) {
	if len(b) > maxCertificateBytes {
		return nil, fmt.Errorf("the certificate is %d bytes; at most %d are accepted", len(b), maxCertificateBytes)
	}
	trimmed := strings.TrimSpace(string(b))
	if strings.Contains(trimmed, "-----BEGIN") {
		rest := []byte(trimmed)
		for {
			var blk *pem.Block
			blk, rest = pem.Decode(rest)
			if blk == nil {
				return nil, errors.New("no CERTIFICATE block in the PEM text")
			}
			if blk.Type == "CERTIFICATE" {
				return x509.ParseCertificate(blk.Bytes)
			}
		}
	}
	if der, err := base64.StdEncoding.DecodeString(trimmed); err == nil {
		return x509.ParseCertificate(der)
	}
	c, err := x509.ParseCertificate(b)
	if err != nil {
		return nil, errors.New("not a certificate: expected PEM, base64 DER or DER")
	}
	return c, nil
}
