package client

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
)

// maxPEMFileSize bounds what LoadCertificate and LoadTrustedCAs read: a
// certificate with its key, or a bundle of CAs, is a few kilobytes.
const maxPEMFileSize = 1 << 20

// LoadCertificate reads a client certificate and its private key from one
// PEM file holding both, such as the admin.pem `studio setup` writes (the
// certificate, then its key, in any order; further certificates in the file
// are sent as the chain). Set the result as Conventions.Certificate. For a
// certificate and a key in two files, use tls.LoadX509KeyPair.
func LoadCertificate(pemFile string) (*tls.Certificate, error) {
	b, err := readPEMFile(pemFile)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(b, b)
	if err != nil {
		return nil, fmt.Errorf("rookery: %s: %w (the file must hold the certificate and its private key, PEM-encoded)", pemFile, err)
	}
	return &cert, nil // X509KeyPair fills in Leaf
}

// LoadTrustedCAs reads the PEM certificates of the authorities the nodes'
// certificates are checked against, such as the ca.pem `studio setup`
// writes. Set the result as Conventions.TrustedCAs.
func LoadTrustedCAs(pemFile string) (*x509.CertPool, error) {
	b, err := readPEMFile(pemFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("rookery: %s holds no PEM certificate", pemFile)
	}
	return pool, nil
}

func readPEMFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("rookery: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPEMFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("rookery: reading %s: %w", name, err)
	}
	if len(b) > maxPEMFileSize {
		return nil, fmt.Errorf("rookery: %s is larger than %d bytes: not a certificate file", name, maxPEMFileSize)
	}
	return b, nil
}

// httpsTLSConfig is the TLS configuration of the store's HTTPS requests:
// the client certificate, presented whatever the server asks for (a node
// identifies its callers by their certificate, not by a CA list), and the
// trusted authorities (the system's when TrustedCAs is nil).
func httpsTLSConfig(conv *Conventions) *tls.Config {
	cfg := &tls.Config{RootCAs: conv.TrustedCAs, MinVersion: tls.VersionTLS12}
	if cert := conv.Certificate; cert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return cfg
}

// workerTLSConfig is the TLS configuration of a subscription worker's
// connection to a node that announced its certificate (base64 DER) in
// GET /info/remote-task/tcp: the node must present exactly that
// certificate, as RavenDB's clients require, and, when TrustedCAs is set,
// it must also chain to one of them. With no announced certificate the
// node's certificate is verified as for HTTPS, against the host name the
// dialer connects to.
func workerTLSConfig(conv *Conventions, announced string) (*tls.Config, error) {
	cfg := httpsTLSConfig(conv)
	if announced == "" {
		return cfg, nil
	}
	want, err := base64.StdEncoding.DecodeString(announced)
	if err != nil || len(want) == 0 {
		return nil, fmt.Errorf("rookery: the server announced an unreadable certificate for the subscription connection")
	}
	// The pin replaces the host name check (the address of the TCP
	// endpoint need not be a name in the certificate); the chain is still
	// verified against TrustedCAs when the application gave them.
	cfg.InsecureSkipVerify = true
	cfg.VerifyPeerCertificate = pinVerifier(want, conv.TrustedCAs)
	return cfg, nil
}

// errServerCertificate says a node presented another certificate than the
// one it announced.
var errServerCertificate = errors.New("rookery: the node presented a different certificate than the one it announced for subscriptions")

// pinVerifier accepts a handshake only if the server's leaf certificate is
// exactly want and, when roots is non-nil, chains to roots.
func pinVerifier(want []byte, roots *x509.CertPool) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 || !bytes.Equal(raw[0], want) {
			return errServerCertificate
		}
		if roots == nil {
			return nil
		}
		leaf, err := x509.ParseCertificate(raw[0])
		if err != nil {
			return err
		}
		inter := x509.NewCertPool()
		for _, r := range raw[1:] {
			if c, err := x509.ParseCertificate(r); err == nil {
				inter.AddCert(c)
			}
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return fmt.Errorf("rookery: the node's certificate is not trusted (Conventions.TrustedCAs): %w", err)
		}
		return nil
	}
}
