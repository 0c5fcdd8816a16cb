package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net/url"
	"regexp"
	"testing"
	"time"
)

func selfSigned(t *testing.T, node bool) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "t"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	if node {
		u, _ := url.Parse(NodeURI)
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestThumbprintAndParse(t *testing.T) {
	c := selfSigned(t, false)
	tp := Thumbprint(c.Raw)
	if !regexp.MustCompile(`^[0-9A-F]{40}$`).MatchString(tp) {
		t.Fatalf("thumbprint %q is not 40 upper-case hex digits", tp)
	}
	pemText := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	for name, in := range map[string][]byte{
		"pem":    append([]byte("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"), pemText...),
		"base64": []byte(base64.StdEncoding.EncodeToString(c.Raw)),
		"der":    c.Raw,
	} {
		got, err := ParseCertificate(in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if Thumbprint(got.Raw) != tp {
			t.Fatalf("%s: thumbprint changed", name)
		}
	}
	if _, err := ParseCertificate([]byte("hello")); err == nil {
		t.Fatal("garbage parsed as a certificate")
	}
	if _, err := ParseCertificate(make([]byte, 100<<10)); err == nil {
		t.Fatal("a 100 KB input was accepted")
	}
	if IsNodeCert(c) || !IsNodeCert(selfSigned(t, true)) {
		t.Fatal("node mark misread")
	}
	if PinningHash(c) == PinningHash(selfSigned(t, false)) {
		t.Fatal("two keys share a pinning hash")
	}
}
