package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/pki"
)

func TestClearancesAndAccess(t *testing.T) {
	reader := &auth.Identity{Name: "r", Clearance: auth.ValidUser, Permissions: map[string]auth.Access{"shop": auth.Read, "crm": auth.ReadWrite, "ops": auth.Admin}}
	op := &auth.Identity{Name: "o", Clearance: auth.Operator}
	admin := &auth.Identity{Name: "a", Clearance: auth.ClusterAdmin}
	node := auth.Node("n", "")
	var anon *auth.Identity
	cases := []struct {
		id    *auth.Identity
		level auth.Level
		db    string
		want  bool
	}{
		{anon, auth.Public, "", true},
		{anon, auth.Authenticated, "", false},
		{anon, auth.DatabaseRead, "shop", false},
		{reader, auth.Authenticated, "", true},
		{reader, auth.DatabaseRead, "shop", true},
		{reader, auth.DatabaseRead, "SHOP", true}, // names are case-insensitive
		{reader, auth.DatabaseReadWrite, "shop", false},
		{reader, auth.DatabaseReadWrite, "crm", true},
		{reader, auth.DatabaseAdmin, "crm", false},
		{reader, auth.DatabaseAdmin, "ops", true},
		{reader, auth.DatabaseRead, "other", false},
		{reader, auth.OperatorOnly, "", false},
		{op, auth.DatabaseAdmin, "anything", true},
		{op, auth.OperatorOnly, "", true},
		{op, auth.ClusterAdminOnly, "", false},
		{admin, auth.ClusterAdminOnly, "", true},
		{admin, auth.NodeOnly, "", false}, // node-to-node routes are for nodes only
		{auth.UnsecuredAdmin, auth.NodeOnly, "", false},
		{auth.UnsecuredAdmin, auth.ClusterAdminOnly, "", true},
		{node, auth.NodeOnly, "", true},
		{node, auth.DatabaseReadWrite, "shop", true},
	}
	for _, c := range cases {
		if got := c.id.Allows(c.level, c.db); got != c.want {
			name := "anonymous"
			if c.id != nil {
				name = c.id.Name + "/" + string(c.id.Clearance)
			}
			t.Errorf("%s Allows(%s, %q) = %v, want %v", name, c.level, c.db, got, c.want)
		}
	}
	if err := reader.Refusal(auth.DatabaseReadWrite, "shop"); !dberr.Is(err, dberr.Forbidden) {
		t.Fatalf("refusal: %v", err)
	}
	for _, c := range []struct {
		id     *auth.Identity
		target auth.Clearance
		want   bool
	}{
		{op, auth.ValidUser, true}, {op, auth.Operator, true}, {op, auth.ClusterAdmin, false}, {op, auth.ClusterNode, false},
		{admin, auth.ClusterAdmin, true}, {reader, auth.ValidUser, false}, {anon, auth.ValidUser, false},
	} {
		if got := c.id.CanManage(c.target); got != c.want {
			t.Errorf("CanManage(%s) = %v, want %v", c.target, got, c.want)
		}
	}
}

// registry is a registration map (the cluster state holds the real one).
type registry map[string]auth.Certificate

func (r registry) Certificate(tp string) (auth.Certificate, bool) { c, ok := r[tp]; return c, ok }
func (r registry) Renewed(pin, issuer string) (auth.Certificate, bool) {
	for _, c := range r {
		if c.PublicKeyPinningHash == pin && c.Issuer == issuer {
			return c, true
		}
	}
	return auth.Certificate{}, false
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pki.ParseCertificate(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestIdentify(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	res, err := pki.Setup(dir, pki.SetupOptions{Hosts: []string{"127.0.0.1"}, PFXPassword: "x"})
	if err != nil {
		t.Fatal(err)
	}
	app, err := pki.IssueClient(dir, pki.ClientOptions{Name: "app", PFXPassword: "x"})
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := pki.IssueClient(dir, pki.ClientOptions{Name: "stranger", PFXPassword: "x"})
	if err != nil {
		t.Fatal(err)
	}
	nodeCert := readCert(t, res.NodeCert)
	adminCert := readCert(t, res.Admin.CRT)
	appCert := readCert(t, app.CRT)
	strangerCert := readCert(t, stranger.CRT)
	caPool := x509.NewCertPool()
	caPool.AddCert(readCert(t, res.CA))

	reg, err := auth.NewCertificate("app", []byte(app.CertificateBase64), auth.ValidUser, map[string]string{"Shop": "ReadWrite"}, time.Now(), "admin")
	if err != nil {
		t.Fatal(err)
	}
	if reg.Permissions["shop"] != auth.ReadWrite {
		t.Fatalf("permissions are not lower-cased: %v", reg.Permissions)
	}
	a := &auth.Authenticator{Registry: registry{reg.Thumbprint: reg}, WellKnownAdmins: map[string]bool{res.Admin.Thumbprint: true}}

	if _, err := a.Identify(nil); !dberr.Is(err, dberr.Forbidden) {
		t.Fatalf("no certificate: %v", err)
	}
	if id, err := a.Identify([]*x509.Certificate{adminCert}); err != nil || id.Clearance != auth.ClusterAdmin {
		t.Fatalf("well-known admin: %+v %v", id, err)
	}
	if id, err := a.Identify([]*x509.Certificate{appCert}); err != nil || id.Clearance != auth.ValidUser || !id.Allows(auth.DatabaseReadWrite, "shop") || id.Allows(auth.DatabaseRead, "other") {
		t.Fatalf("registered: %+v %v", id, err)
	}
	if _, err := a.Identify([]*x509.Certificate{strangerCert}); err == nil {
		t.Fatal("an unregistered certificate of the same CA was accepted")
	}
	// Node certificates: not without --tls-ca or being this node's own...
	if _, err := a.IdentifyNode([]*x509.Certificate{nodeCert}); err == nil {
		t.Fatal("a node certificate was accepted with neither the CA nor Self")
	}
	// ...then through the CA's mark, or as this node's own certificate.
	a.CA = caPool
	if id, err := a.IdentifyNode([]*x509.Certificate{nodeCert}); err != nil || id.Clearance != auth.ClusterNode {
		t.Fatalf("CA-issued node certificate: %+v %v", id, err)
	}
	if _, err := a.IdentifyNode([]*x509.Certificate{appCert}); err == nil {
		t.Fatal("a client certificate passed as a node")
	}
	a.CA = nil
	a.Self = pki.Thumbprint(nodeCert.Raw)
	if id, err := a.IdentifyNode([]*x509.Certificate{nodeCert}); err != nil || id.Clearance != auth.ClusterNode {
		t.Fatalf("own certificate: %+v %v", id, err)
	}
	// The CA's mark on a certificate another CA issued counts for nothing.
	a.Self, a.CA = "", caPool
	forged := selfSignedNode(t)
	if _, err := a.IdentifyNode([]*x509.Certificate{forged}); err == nil {
		t.Fatal("a self-signed certificate with the node mark passed as a node")
	}
	// Outside the validity window.
	a.Now = func() time.Time { return time.Now().AddDate(10, 0, 0) }
	if _, err := a.Identify([]*x509.Certificate{adminCert}); err == nil {
		t.Fatal("an expired certificate was accepted")
	}
}

// A renewed certificate (same key and issuer, new serial and dates) is
// accepted as its registration, as RavenDB does.
func TestIdentifyRenewal(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	issue := func(serial int64) *x509.Certificate {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "app"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour * time.Duration(serial))}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		return c
	}
	old, renewed := issue(1), issue(2)
	reg, err := auth.NewCertificate("app", old.Raw, auth.Operator, nil, time.Now(), "")
	if err != nil {
		t.Fatal(err)
	}
	a := &auth.Authenticator{Registry: registry{reg.Thumbprint: reg}}
	if id, err := a.Identify([]*x509.Certificate{renewed}); err != nil || id.Clearance != auth.Operator {
		t.Fatalf("renewed certificate: %+v %v", id, err)
	}
}

func selfSignedNode(t *testing.T) *x509.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(9), Subject: pkix.Name{CommonName: "evil"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		URIs: []*url.URL{pki.NodeURL()}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c
}

func TestCertificateValidation(t *testing.T) {
	c := selfSignedNode(t)
	for name, fn := range map[string]func() error{
		"unknown clearance": func() error {
			_, err := auth.ParseClearance("Root")
			return err
		},
		"bad access": func() error {
			_, err := auth.NewCertificate("x", c.Raw, auth.ValidUser, map[string]string{"db": "Everything"}, time.Now(), "")
			return err
		},
		"bad database name": func() error {
			_, err := auth.NewCertificate("x", c.Raw, auth.ValidUser, map[string]string{"../x": "Read"}, time.Now(), "")
			return err
		},
		"permissions on an operator": func() error {
			_, err := auth.NewCertificate("x", c.Raw, auth.Operator, map[string]string{"db": "Read"}, time.Now(), "")
			return err
		},
		"control characters in the name": func() error {
			_, err := auth.NewCertificate("a\x00b", c.Raw, auth.ValidUser, nil, time.Now(), "")
			return err
		},
		"not a certificate": func() error {
			_, err := auth.NewCertificate("x", []byte("hello"), auth.ValidUser, nil, time.Now(), "")
			return err
		},
		"expired": func() error {
			_, err := auth.NewCertificate("x", c.Raw, auth.ValidUser, nil, time.Now().AddDate(1, 0, 0), "")
			return err
		},
	} {
		if err := fn(); !dberr.Is(err, dberr.BadRequest) {
			t.Errorf("%s: %v, want a BadRequest", name, err)
		}
	}
}
