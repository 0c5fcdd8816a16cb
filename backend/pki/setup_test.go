package pki

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

var testHosts = []string{"node1.example.com", "Node2.Example.com.", "10.0.0.5", "127.0.0.1", "::1", "localhost"}

func setupDir(t *testing.T, o SetupOptions) (string, *SetupResult) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	if o.Hosts == nil {
		o.Hosts = testHosts
	}
	res, err := Setup(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return dir, res
}

// pemBlocks reads every PEM block of a file.
func pemBlocks(t *testing.T, path string) []*pem.Block {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*pem.Block
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		out = append(out, blk)
	}
	if len(bytes.TrimSpace(b)) != 0 {
		t.Fatalf("%s: trailing bytes after the PEM blocks", path)
	}
	return out
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	blocks := pemBlocks(t, path)
	if len(blocks) == 0 || blocks[0].Type != "CERTIFICATE" {
		t.Fatalf("%s: first block is not a CERTIFICATE", path)
	}
	c, err := x509.ParseCertificate(blocks[0].Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pool(c *x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c)
	return p
}

func verify(c *x509.Certificate, roots *x509.CertPool, usage x509.ExtKeyUsage, host string) error {
	_, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}, DNSName: host})
	return err
}

func TestSetupWritesAVerifiableCluster(t *testing.T) {
	dir, res := setupDir(t, SetupOptions{Days: 30, AdminName: "Ops admin"})
	now := time.Now()

	// Modes: the directory and every key are the owner's alone.
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v %v, want 0700", st.Mode().Perm(), err)
	}
	modes := map[string]os.FileMode{
		CAFile: 0o644, CAKeyFile: 0o600, NodeFile: 0o644, NodeKeyFile: 0o600,
		"admin.pem": 0o600, "admin.crt": 0o644, "admin.pfx": 0o600, "admin.pfx.password": 0o600,
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(modes) {
		t.Fatalf("%d files written, want %d: %v", len(entries), len(modes), entries)
	}
	for name, want := range modes {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", name, st.Mode().Perm(), want)
		}
	}

	// The CA.
	ca := readCert(t, res.CA)
	if !ca.IsCA || !ca.BasicConstraintsValid || ca.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign {
		t.Fatalf("CA: IsCA %v, key usage %v", ca.IsCA, ca.KeyUsage)
	}
	if !strings.HasPrefix(ca.Subject.CommonName, "Rookery cluster CA ") || ca.Subject.CommonName != res.CACommonName {
		t.Fatalf("CA common name %q", ca.Subject.CommonName)
	}
	if k, ok := ca.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Fatalf("CA key %T, want ECDSA P-256", ca.PublicKey)
	}
	if d := ca.NotAfter.Sub(now); d < 3649*24*time.Hour || d > 3651*24*time.Hour {
		t.Fatalf("CA valid for %v, want about ten years", d)
	}
	if _, _, err := func() (*x509.Certificate, any, error) { c, k, err := LoadCA(dir); return c, k, err }(); err != nil {
		t.Fatalf("LoadCA: %v", err)
	}
	roots := pool(ca)

	// The node certificate: every host, both usages, the node mark.
	node := readCert(t, res.NodeCert)
	if k, ok := node.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Fatalf("node key %T, want ECDSA P-256", node.PublicKey)
	}
	if !IsNodeCert(node) || len(node.URIs) != 1 || node.URIs[0].String() != NodeURI {
		t.Fatalf("node URIs %v", node.URIs)
	}
	if node.KeyUsage != x509.KeyUsageDigitalSignature || node.IsCA {
		t.Fatalf("node key usage %v, IsCA %v", node.KeyUsage, node.IsCA)
	}
	for _, h := range testHosts {
		for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if err := verify(node, roots, u, strings.TrimSuffix(h, ".")); err != nil {
				t.Errorf("node certificate for %s, usage %v: %v", h, u, err)
			}
		}
	}
	if err := verify(node, roots, x509.ExtKeyUsageServerAuth, "node3.example.com"); err == nil {
		t.Fatal("node certificate verified for a host it was not issued for")
	}
	if len(node.DNSNames) != 3 || len(node.IPAddresses) != 3 {
		t.Fatalf("SANs %v %v, want 3 names and 3 addresses", node.DNSNames, node.IPAddresses)
	}
	if d := node.NotAfter.Sub(now); d < 29*24*time.Hour || d > 31*24*time.Hour {
		t.Fatalf("node certificate valid for %v, want 30 days", d)
	}
	if _, err := tls.LoadX509KeyPair(res.NodeCert, res.NodeKey); err != nil {
		t.Fatalf("node key pair: %v", err)
	}

	// The admin certificate: one file with the certificate and a PKCS#1 key.
	a := res.Admin
	blocks := pemBlocks(t, a.PEM)
	if len(blocks) != 2 || blocks[0].Type != "CERTIFICATE" || blocks[1].Type != "RSA PRIVATE KEY" {
		t.Fatalf("admin.pem blocks %v, want CERTIFICATE then RSA PRIVATE KEY", blockTypes(blocks))
	}
	key, err := x509.ParsePKCS1PrivateKey(blocks[1].Bytes)
	if err != nil || key.N.BitLen() != 2048 {
		t.Fatalf("admin key: %v", err)
	}
	admin := readCert(t, a.CRT)
	if !bytes.Equal(admin.Raw, blocks[0].Bytes) {
		t.Fatal("admin.crt and admin.pem hold different certificates")
	}
	if admin.Subject.CommonName != "Ops admin" || a.CommonName != "Ops admin" || a.Name != "admin" || IsNodeCert(admin) {
		t.Fatalf("admin CN %q, node mark %v", admin.Subject.CommonName, IsNodeCert(admin))
	}
	if err := verify(admin, roots, x509.ExtKeyUsageClientAuth, ""); err != nil {
		t.Fatalf("admin certificate for client auth: %v", err)
	}
	if err := verify(admin, roots, x509.ExtKeyUsageServerAuth, ""); err == nil {
		t.Fatal("admin certificate verified for server auth")
	}
	if a.Thumbprint != Thumbprint(admin.Raw) {
		t.Fatalf("thumbprint %s, want %s", a.Thumbprint, Thumbprint(admin.Raw))
	}
	if _, err := tls.LoadX509KeyPair(a.PEM, a.PEM); err != nil {
		t.Fatalf("tls.LoadX509KeyPair(admin.pem, admin.pem): %v", err)
	}
	if got, _ := ParseCertificate([]byte(a.CertificateBase64)); got == nil || !bytes.Equal(got.Raw, admin.Raw) {
		t.Fatal("CertificateBase64 is not the admin certificate")
	}

	// The PFX, with the generated password from its file.
	pw, err := os.ReadFile(a.PasswordFile)
	if err != nil || strings.TrimSpace(string(pw)) != a.PFXPassword || len(a.PFXPassword) != 32 {
		t.Fatalf("password file %q (%v), result %q", pw, err, a.PFXPassword)
	}
	checkPFX(t, a.PFX, a.PFXPassword, admin, ca)
}

func blockTypes(bs []*pem.Block) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Type)
	}
	return out
}

func checkPFX(t *testing.T, path, password string, cert, ca *x509.Certificate) {
	t.Helper()
	pfx, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	key, got, chain, err := pkcs12.DecodeChain(pfx, password)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !bytes.Equal(got.Raw, cert.Raw) || len(chain) != 1 || !bytes.Equal(chain[0].Raw, ca.Raw) {
		t.Fatalf("%s holds other certificates", path)
	}
	if rk, ok := key.(*rsa.PrivateKey); !ok || !rk.PublicKey.Equal(cert.PublicKey) {
		t.Fatalf("%s: key %T does not match the certificate", path, key)
	}
	if _, _, _, err := pkcs12.DecodeChain(pfx, password+"x"); err == nil {
		t.Fatalf("%s opened with a wrong password", path)
	}
}

func TestSetupRefusesToOverwrite(t *testing.T) {
	dir, res := setupDir(t, SetupOptions{Hosts: []string{"localhost"}})
	before, _ := os.ReadFile(res.CA)
	_, err := Setup(dir, SetupOptions{Hosts: []string{"localhost"}})
	if err == nil || !strings.Contains(err.Error(), "--force") || !strings.Contains(err.Error(), "ca.pem") {
		t.Fatalf("second run: %v", err)
	}
	if after, _ := os.ReadFile(res.CA); !bytes.Equal(before, after) {
		t.Fatal("the refused run changed ca.pem")
	}
	// Only one of the files present is enough to refuse, and nothing is written.
	dir2 := filepath.Join(t.TempDir(), "d")
	if err := os.MkdirAll(dir2, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir2, "admin.pfx"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Setup(dir2, SetupOptions{Hosts: []string{"localhost"}}); err == nil {
		t.Fatal("an existing admin.pfx was not refused")
	}
	if entries, _ := os.ReadDir(dir2); len(entries) != 1 {
		t.Fatalf("the refused run wrote files: %v", entries)
	}

	// --force replaces them, tightening a loosened mode, and drops a
	// generated password file that no longer opens the new PFX.
	if err := os.Chmod(res.Admin.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	res2, err := Setup(dir, SetupOptions{Hosts: []string{"localhost"}, Force: true, PFXPassword: "chosen"})
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(res.CA); bytes.Equal(before, after) {
		t.Fatal("--force kept the old CA")
	}
	if st, _ := os.Stat(res2.Admin.PEM); st.Mode().Perm() != 0o600 {
		t.Fatalf("admin.pem mode %v after --force", st.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(dir, "admin.pfx.password")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale admin.pfx.password kept: %v", err)
	}
	if res2.Admin.PasswordFile != "" || res2.Admin.PFXPassword != "chosen" {
		t.Fatalf("given password: %+v", res2.Admin)
	}
	checkPFX(t, res2.Admin.PFX, "chosen", readCert(t, res2.Admin.CRT), readCert(t, res2.CA))
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(leftovers) != 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}
}

func TestSetupRejectsBadInput(t *testing.T) {
	for _, c := range []struct {
		name string
		o    SetupOptions
		want string
	}{
		{"no hosts", SetupOptions{}, "no hosts"},
		{"wildcard", SetupOptions{Hosts: []string{"*.example.com"}}, "not a host name"},
		{"port", SetupOptions{Hosts: []string{"h:80"}}, "not a host name"},
		{"space", SetupOptions{Hosts: []string{"a b"}}, "not a host name"},
		{"long label", SetupOptions{Hosts: []string{strings.Repeat("a", 64) + ".com"}}, "not a host name"},
		{"too many hosts", SetupOptions{Hosts: make([]string, 101)}, "at most 100"},
		{"days", SetupOptions{Hosts: []string{"h"}, Days: -1}, "--days"},
		{"days beyond the CA", SetupOptions{Hosts: []string{"h"}, Days: 3651}, "--days"},
		{"admin name", SetupOptions{Hosts: []string{"h"}, AdminName: strings.Repeat("x", 65)}, "admin name"},
		{"admin name control", SetupOptions{Hosts: []string{"h"}, AdminName: "a\nb"}, "admin name"},
	} {
		dir := filepath.Join(t.TempDir(), "out")
		_, err := Setup(dir, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the directory was created for bad input", c.name)
		}
	}
}

func TestIssueClient(t *testing.T) {
	dir, res := setupDir(t, SetupOptions{Hosts: []string{"localhost"}})
	ca := readCert(t, res.CA)
	c, err := IssueClient(dir, ClientOptions{Name: "reports-app", Days: 10, PFXPassword: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	blocks := pemBlocks(t, c.PEM)
	if len(blocks) != 2 || blocks[0].Type != "CERTIFICATE" || blocks[1].Type != "RSA PRIVATE KEY" {
		t.Fatalf("reports-app.pem blocks %v", blockTypes(blocks))
	}
	cert := readCert(t, c.CRT)
	if err := verify(cert, pool(ca), x509.ExtKeyUsageClientAuth, ""); err != nil {
		t.Fatalf("client certificate does not chain to the setup CA: %v", err)
	}
	if cert.Subject.CommonName != "reports-app" || c.Thumbprint != Thumbprint(cert.Raw) || c.PasswordFile != "" {
		t.Fatalf("client %+v", c)
	}
	if d := time.Until(cert.NotAfter); d < 9*24*time.Hour || d > 11*24*time.Hour {
		t.Fatalf("valid for %v, want 10 days", d)
	}
	if _, err := tls.LoadX509KeyPair(c.PEM, c.PEM); err != nil {
		t.Fatal(err)
	}
	checkPFX(t, c.PFX, "pw", cert, ca)
	for name, want := range map[string]os.FileMode{"reports-app.pem": 0o600, "reports-app.crt": 0o644, "reports-app.pfx": 0o600} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Mode().Perm() != want {
			t.Fatalf("%s: %v %v", name, st, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "reports-app.pfx.password")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a password file was written for a given password")
	}
	if _, err := IssueClient(dir, ClientOptions{Name: "reports-app"}); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second issue: %v", err)
	}
	c2, err := IssueClient(dir, ClientOptions{Name: "reports-app", Force: true})
	if err != nil || c2.Thumbprint == c.Thumbprint || c2.PasswordFile == "" {
		t.Fatalf("forced issue: %+v %v", c2, err)
	}

	for _, bad := range []string{"", "../x", "a/b", ".hidden", "ca", "CA-key", "node", "node-key", "a b", strings.Repeat("n", 65), "é"} {
		if _, err := IssueClient(dir, ClientOptions{Name: bad}); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	if _, err := IssueClient(dir, ClientOptions{Name: "x", Days: 4000}); err == nil {
		t.Error("4000 days accepted")
	}
	if _, err := IssueClient(t.TempDir(), ClientOptions{Name: "x"}); err == nil || !strings.Contains(err.Error(), "studio setup") {
		t.Fatalf("no CA: %v", err)
	}
	// A CA key that is not the CA's is refused rather than used to sign.
	nodeKey, _ := os.ReadFile(res.NodeKey)
	if err := os.WriteFile(res.CAKey, nodeKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := IssueClient(dir, ClientOptions{Name: "y"}); err == nil || !strings.Contains(err.Error(), "does not belong") {
		t.Fatalf("mismatched CA key: %v", err)
	}
}

// handshakeServer serves TLS with the node certificate on a loopback port,
// requiring a client certificate that chains to the CA, and answers each
// connection with the thumbprint of the client's certificate.
func handshakeServer(t *testing.T, res *SetupResult) string {
	t.Helper()
	nodePair, err := tls.LoadX509KeyPair(res.NodeCert, res.NodeKey)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{nodePair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool(readCert(t, res.CA)),
		MinVersion:   tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				tc := c.(*tls.Conn)
				if err := tc.Handshake(); err != nil {
					return
				}
				peers := tc.ConnectionState().PeerCertificates
				fmt.Fprintf(tc, "%s\n", Thumbprint(peers[0].Raw))
			}(conn)
		}
	}()
	return l.Addr().String()
}

func dialAs(addr, serverName string, roots *x509.CertPool, certs []tls.Certificate) (string, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tls.Config{
		RootCAs: roots, ServerName: serverName, Certificates: certs, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

func TestSetupTLSHandshake(t *testing.T) {
	_, res := setupDir(t, SetupOptions{})
	addr := handshakeServer(t, res)
	roots := pool(readCert(t, res.CA))

	admin, err := tls.LoadX509KeyPair(res.Admin.PEM, res.Admin.PEM)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"127.0.0.1", "localhost", "node1.example.com"} {
		got, err := dialAs(addr, name, roots, []tls.Certificate{admin})
		if err != nil {
			t.Fatalf("admin handshake (server name %s): %v", name, err)
		}
		if got != res.Admin.Thumbprint {
			t.Fatalf("server saw %s, want the admin thumbprint %s", got, res.Admin.Thumbprint)
		}
	}
	// A node presents its certificate as a client to another node.
	node, err := tls.LoadX509KeyPair(res.NodeCert, res.NodeKey)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := dialAs(addr, "127.0.0.1", roots, []tls.Certificate{node}); err != nil || got != Thumbprint(node.Certificate[0]) {
		t.Fatalf("node-to-node handshake: %q %v", got, err)
	}
	// The server certificate does not pass for a host it was not issued for.
	if _, err := dialAs(addr, "other.example.com", roots, []tls.Certificate{admin}); err == nil {
		t.Fatal("server certificate accepted for other.example.com")
	}
	// Another cluster's admin certificate is refused, and so is no certificate.
	_, other := setupDir(t, SetupOptions{Hosts: []string{"localhost"}})
	stranger, err := tls.LoadX509KeyPair(other.Admin.PEM, other.Admin.PEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dialAs(addr, "127.0.0.1", roots, []tls.Certificate{stranger}); err == nil {
		t.Fatal("a certificate from another CA was accepted")
	}
	if _, err := dialAs(addr, "127.0.0.1", roots, nil); err == nil {
		t.Fatal("a connection without a client certificate was accepted")
	}
}

// nodeClient connects the way the npm ravendb client does with
// {certificate: admin.pem, type: "pem", ca: ca.pem}: it cuts the
// CERTIFICATE and RSA PRIVATE KEY blocks out of the one file and passes them
// to tls.connect as cert and key. Then it connects again with the PFX.
const nodeClient = `
const fs = require("fs"), tls = require("tls");
const [port, pemPath, caPath, pfxPath, pass] = process.argv.slice(1);
const text = fs.readFileSync(pemPath).toString();
function part(token) {
  const b = "-----BEGIN " + token + "-----", e = "-----END " + token + "-----";
  if (!text.includes(b) || !text.includes(e)) throw new Error("no " + token + " block");
  return text.substring(text.indexOf(b), text.indexOf(e) + e.length);
}
const ca = fs.readFileSync(caPath);
tls.createSecureContext({ pfx: fs.readFileSync(pfxPath), passphrase: pass });
function connect(opts) {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: "127.0.0.1", port: +port, ca, ...opts }, () => {});
    let data = "";
    s.on("data", d => data += d);
    s.on("end", () => resolve(data.trim()));
    s.on("error", reject);
  });
}
(async () => {
  const a = await connect({ cert: part("CERTIFICATE"), key: part("RSA PRIVATE KEY") });
  const b = await connect({ pfx: fs.readFileSync(pfxPath), passphrase: pass });
  console.log(a + " " + b);
})().catch(e => { console.error(String(e)); process.exit(1); });
`

func TestSetupNodeLoadsPEMAndPFX(t *testing.T) {
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	_, res := setupDir(t, SetupOptions{})
	addr := handshakeServer(t, res)
	_, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, nodeBin, "-e", nodeClient, port, res.Admin.PEM, res.CA, res.Admin.PFX, res.Admin.PFXPassword).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	want := res.Admin.Thumbprint + " " + res.Admin.Thumbprint
	if got := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("node saw %q, want %q", got, want)
	}
	// A wrong passphrase is refused by Node, so the PFX is really encrypted.
	out, err = exec.CommandContext(ctx, nodeBin, "-e", nodeClient, port, res.Admin.PEM, res.CA, res.Admin.PFX, "wrong").CombinedOutput()
	if err == nil {
		t.Fatalf("node opened the PFX with a wrong passphrase: %s", out)
	}
}

func TestParseNodes(t *testing.T) {
	for in, want := range map[string][]NodeAddr{
		"h1":                      {{"h1", 8080}},
		"H1.Example.com.,h2:9000": {{"h1.example.com", 8080}, {"h2", 9000}},
		"10.0.0.1:1, 10.0.0.1:2":  {{"10.0.0.1", 1}, {"10.0.0.1", 2}},
		"::1":                     {{"::1", 8080}},
		"[::1]:443,[fe80::1]":     {{"::1", 443}, {"fe80::1", 8080}},
		"0:0:0:0:0:0:0:1":         {{"::1", 8080}},
	} {
		got, err := ParseNodes(in, 8080)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", " , ", "h:0", "h:65536", "h:x", "h,h", "h:8080,h", "H,h.", "::1,[::1]:8080", "*.x", "[::1", "[h]:80", "a b", "h:80:90", strings.Repeat("h,", 101)} {
		if got, err := ParseNodes(bad, 8080); err == nil {
			t.Errorf("%q accepted: %v", bad, got)
		}
	}
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprintf("h%d", i)
	}
	if _, err := ParseNodes(strings.Join(many, ","), 8080); err == nil || !strings.Contains(err.Error(), "more than 100") {
		t.Errorf("101 nodes: %v", err)
	}
	if _, err := ParseNodes("h", 0); err == nil {
		t.Error("port 0 accepted")
	}
}

// FuzzParseNodes: whatever ParseNodes accepts is a canonical, distinct list
// of valid certificate hosts that parses back to itself.
func FuzzParseNodes(f *testing.F) {
	for _, s := range []string{"h1", "h1:9000,h2", "[::1]:443,[fe80::1]", "10.0.0.1:1, 10.0.0.1:2", "H.", "[", "a:b:c", strings.Repeat("x,", 200), strings.Repeat("[", 10000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		nodes, err := ParseNodes(in, 8080)
		if err != nil {
			return
		}
		if len(nodes) == 0 || len(nodes) > 100 {
			t.Fatalf("%q: %d nodes", in, len(nodes))
		}
		parts := make([]string, len(nodes))
		for i, n := range nodes {
			if n.Port < 1 || n.Port > 65535 {
				t.Fatalf("%q: port %d", in, n.Port)
			}
			if _, _, err := SplitHosts([]string{n.Host}); err != nil {
				t.Fatalf("%q: accepted host %q fails SplitHosts: %v", in, n.Host, err)
			}
			parts[i] = n.HostPort()
		}
		again, err := ParseNodes(strings.Join(parts, ","), 1)
		if err != nil || !reflect.DeepEqual(again, nodes) {
			t.Fatalf("%q: %v does not parse back (%v, %v)", in, nodes, again, err)
		}
	})
}
