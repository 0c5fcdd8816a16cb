package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"software.sslmate.com/src/go-pkcs12"
)

// The files of a secured cluster, as written by Setup into its directory.
const (
	CAFile      = "ca.pem"
	CAKeyFile   = "ca-key.pem"
	NodeFile    = "node.pem"
	NodeKeyFile = "node-key.pem"
	// AdminName is the base name of the admin client certificate's files
	// (admin.pem, admin.crt, admin.pfx, admin.pfx.password).
	AdminName = "admin"
)

const (
	// DefaultDays is the default validity of node and client certificates:
	// 825 days is the longest a TLS server certificate may live for Apple's
	// platforms (Safari, and Chrome on macOS), private CAs included.
	DefaultDays = 825
	// CADays is the CA's validity, about ten years; a node or client
	// certificate may not outlive it.
	CADays = 3650
	// maxHosts bounds --hosts.
	maxHosts = 100
	// backdate is how far NotBefore is set in the past, for clock skew
	// between the machine running setup and the nodes.
	backdate = time.Hour
)

// SetupOptions are the inputs of Setup.
type SetupOptions struct {
	// Hosts are the names and IP addresses the node certificate is valid
	// for (DNS and IP subject alternative names). At least one.
	Hosts []string
	// Days is the validity of the node and admin certificates (DefaultDays
	// when 0).
	Days int
	// AdminName is the admin certificate's common name ("admin" when empty).
	AdminName string
	// PFXPassword protects admin.pfx; when empty a random one is generated
	// (and written to admin.pfx.password).
	PFXPassword string
	// Force overwrites existing files; without it Setup refuses to start
	// when any of its files exists.
	Force bool
}

// ClientOptions are the inputs of IssueClient.
type ClientOptions struct {
	// Name is the base name of the files and the certificate's common name;
	// see ValidateClientName.
	Name        string
	Days        int
	PFXPassword string
	Force       bool
}

// SetupResult tells what Setup wrote. Paths are absolute.
type SetupResult struct {
	Dir                          string
	CA, CAKey, NodeCert, NodeKey string
	// CACommonName is the CA's subject common name.
	CACommonName string
	// DNSNames and IPs are the node certificate's subject alternative names.
	DNSNames     []string
	IPs          []net.IP
	NodeNotAfter time.Time
	Admin        *ClientResult
}

// ClientResult tells what IssueClient (or Setup, for the admin) wrote.
type ClientResult struct {
	// Name is the base name of the files; CommonName the certificate's.
	Name, CommonName string
	// PEM holds the certificate followed by its PKCS#1 RSA key; CRT the
	// certificate alone; PFX the PKCS#12 bundle (certificate, key, CA).
	PEM, CRT, PFX string
	// PasswordFile is where a generated PFX password was written; empty
	// when the password was given.
	PasswordFile string
	PFXPassword  string
	// Thumbprint is the certificate's RavenDB thumbprint (upper-case SHA-1).
	Thumbprint string
	// CertificateBase64 is the certificate's DER in base64, the form
	// PUT /admin/certificates takes.
	CertificateBase64 string
	NotAfter          time.Time
}

var clientNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidateClientName checks a client certificate's name: it names files in
// the setup directory, so it is 1 to 64 letters, digits, '.', '_' or '-',
// starting with a letter or digit, and not one of the cluster's own files
// (ca, ca-key, node, node-key).
func ValidateClientName(name string) error {
	if !clientNameRE.MatchString(name) {
		return fmt.Errorf("client name %q: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	switch strings.ToLower(name) {
	case "ca", "ca-key", "node", "node-key":
		return fmt.Errorf("client name %q would overwrite the cluster's %s.pem", name, strings.ToLower(name))
	}
	return nil
}

// validateCommonName checks a subject common name given by the operator.
func validateCommonName(cn string) error {
	if cn == "" || len(cn) > 64 {
		return fmt.Errorf("common name %q: 1 to 64 characters", cn)
	}
	for _, r := range cn {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("common name %q: unprintable character %U", cn, r)
		}
	}
	return nil
}

// NodeAddr is one node of --hosts: the host it is reached by and its port.
type NodeAddr struct {
	Host string
	Port int
}

// HostPort is host:port, the IPv6 form bracketed.
func (n NodeAddr) HostPort() string { return net.JoinHostPort(n.Host, strconv.Itoa(n.Port)) }

// ParseNodes reads a comma-separated list of nodes: HOST, HOST:PORT, an
// IPv6 address (bare or in brackets) or [IPv6]:PORT; an entry without a
// port gets defPort. Hosts are checked as SplitHosts does and written in
// canonical form (lower case, no trailing dot; IPs as net.IP prints them).
// Several nodes may share a host (on one machine) but not a host and port.
// At most 100 nodes.
func ParseNodes(v string, defPort int) ([]NodeAddr, error) {
	if defPort < 1 || defPort > 65535 {
		return nil, fmt.Errorf("port %d is not a TCP port", defPort)
	}
	var nodes []NodeAddr
	seen := map[string]bool{}
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if len(nodes) == maxHosts {
			return nil, fmt.Errorf("more than %d nodes", maxHosts)
		}
		n := NodeAddr{Host: e, Port: defPort}
		if inner, ok := strings.CutPrefix(e, "["); ok && strings.HasSuffix(inner, "]") && net.ParseIP(strings.TrimSuffix(inner, "]")) != nil {
			n.Host = strings.TrimSuffix(inner, "]")
		} else if net.ParseIP(e) == nil {
			if h, p, err := net.SplitHostPort(e); err == nil {
				if strings.HasPrefix(e, "[") && net.ParseIP(h) == nil {
					return nil, fmt.Errorf("%q: brackets are for IPv6 addresses", e)
				}
				port, err := strconv.Atoi(p)
				if err != nil || port < 1 || port > 65535 {
					return nil, fmt.Errorf("%q: the port is not a number from 1 to 65535", e)
				}
				n = NodeAddr{Host: h, Port: port}
			} else if strings.ContainsAny(e, "[]") {
				return nil, fmt.Errorf("%q: %v", e, err)
			}
		}
		if _, _, err := SplitHosts([]string{n.Host}); err != nil {
			return nil, err
		}
		if ip := net.ParseIP(n.Host); ip != nil {
			n.Host = ip.String()
		} else {
			n.Host = strings.ToLower(strings.TrimSuffix(n.Host, "."))
		}
		if seen[n.HostPort()] {
			return nil, fmt.Errorf("%s is given twice: nodes on one host need different ports", n.HostPort())
		}
		seen[n.HostPort()] = true
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return nil, errors.New("no hosts")
	}
	return nodes, nil
}

var dnsLabelRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// SplitHosts sorts host names and IP addresses into the DNS and IP subject
// alternative names of a certificate, dropping duplicates. Wildcards and
// ports are refused: every entry is one host a node is reached by.
func SplitHosts(hosts []string) (dns []string, ips []net.IP, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("no hosts: give at least one host name or IP address")
	}
	if len(hosts) > maxHosts {
		return nil, nil, fmt.Errorf("%d hosts; at most %d", len(hosts), maxHosts)
	}
	seen := map[string]bool{}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !seen[ip.String()] {
				seen[ip.String()] = true
				ips = append(ips, ip)
			}
			continue
		}
		name := strings.ToLower(strings.TrimSuffix(h, "."))
		if len(name) == 0 || len(name) > 253 {
			return nil, nil, fmt.Errorf("host %q is not a host name or an IP address", h)
		}
		for _, label := range strings.Split(name, ".") {
			if !dnsLabelRE.MatchString(label) {
				return nil, nil, fmt.Errorf("host %q is not a host name or an IP address (letters, digits, '-' and '.'; no wildcards, no ports)", h)
			}
		}
		if !seen[name] {
			seen[name] = true
			dns = append(dns, name)
		}
	}
	return dns, ips, nil
}

// Setup writes the certificates of a secured cluster into dir (created 0700
// when missing): the CA (ca.pem, ca-key.pem), one node certificate shared by
// every node (node.pem, node-key.pem) and the admin client certificate
// (admin.pem, admin.crt, admin.pfx and, when the password was generated,
// admin.pfx.password). Keys are written 0600. Without Force it writes
// nothing when any of those files exists.
func Setup(dir string, o SetupOptions) (*SetupResult, error) {
	days, err := checkDays(o.Days)
	if err != nil {
		return nil, err
	}
	dnsNames, ips, err := SplitHosts(o.Hosts)
	if err != nil {
		return nil, err
	}
	adminCN := o.AdminName
	if adminCN == "" {
		adminCN = AdminName
	}
	if err := validateCommonName(adminCN); err != nil {
		return nil, fmt.Errorf("admin name: %w", err)
	}
	abs, err := prepareDir(dir)
	if err != nil {
		return nil, err
	}
	files := []string{CAFile, CAKeyFile, NodeFile, NodeKeyFile}
	files = append(files, clientFiles(AdminName)...)
	if !o.Force {
		if err := refuseExisting(abs, files); err != nil {
			return nil, err
		}
	}

	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	id := make([]byte, 4)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "Rookery cluster CA " + hex.EncodeToString(id), Organization: []string{"Rookery"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.AddDate(0, 0, CADays),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	ca, err := sign(caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating the CA: %w", err)
	}

	nodeKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	cn := o.Hosts[0]
	if len(cn) > 64 {
		cn = "Rookery cluster node"
	}
	nodeTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"Rookery"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.AddDate(0, 0, days),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		DNSNames:              dnsNames,
		IPAddresses:           ips,
		URIs:                  []*url.URL{NodeURL()},
	}
	node, err := sign(nodeTmpl, ca, &nodeKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("creating the node certificate: %w", err)
	}
	admin, adminFiles, err := newClient(abs, AdminName, adminCN, days, o.PFXPassword, ca, caKey, now)
	if err != nil {
		return nil, err
	}

	caKeyPEM, err := pkcs8PEM(caKey)
	if err != nil {
		return nil, err
	}
	nodeKeyPEM, err := pkcs8PEM(nodeKey)
	if err != nil {
		return nil, err
	}
	out := []outFile{
		{CAFile, certPEM(ca), 0o644},
		{CAKeyFile, caKeyPEM, 0o600},
		{NodeFile, certPEM(node), 0o644},
		{NodeKeyFile, nodeKeyPEM, 0o600},
	}
	out = append(out, adminFiles...)
	if err := writeFiles(abs, out, o.Force); err != nil {
		return nil, err
	}
	if err := removeStalePassword(admin); err != nil {
		return nil, err
	}
	return &SetupResult{
		Dir:          abs,
		CA:           filepath.Join(abs, CAFile),
		CAKey:        filepath.Join(abs, CAKeyFile),
		NodeCert:     filepath.Join(abs, NodeFile),
		NodeKey:      filepath.Join(abs, NodeKeyFile),
		CACommonName: ca.Subject.CommonName,
		DNSNames:     dnsNames,
		IPs:          ips,
		NodeNotAfter: node.NotAfter,
		Admin:        admin,
	}, nil
}

// IssueClient issues one more client certificate from the CA in dir
// (ca.pem and ca-key.pem, as Setup wrote them): NAME.pem (certificate and
// PKCS#1 key), NAME.crt, NAME.pfx and, when the password was generated,
// NAME.pfx.password. The certificate carries no clearance: that is given
// when it is registered with the cluster.
func IssueClient(dir string, o ClientOptions) (*ClientResult, error) {
	if err := ValidateClientName(o.Name); err != nil {
		return nil, err
	}
	days, err := checkDays(o.Days)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	ca, caKey, err := LoadCA(abs)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if now.AddDate(0, 0, days).After(ca.NotAfter) {
		return nil, fmt.Errorf("%d days would outlive the CA (it expires %s); use fewer --days", days, ca.NotAfter.Format(time.DateOnly))
	}
	if !o.Force {
		if err := refuseExisting(abs, clientFiles(o.Name)); err != nil {
			return nil, err
		}
	}
	res, files, err := newClient(abs, o.Name, o.Name, days, o.PFXPassword, ca, caKey, now)
	if err != nil {
		return nil, err
	}
	if err := writeFiles(abs, files, o.Force); err != nil {
		return nil, err
	}
	if err := removeStalePassword(res); err != nil {
		return nil, err
	}
	return res, nil
}

// LoadCA reads the CA certificate and its key from dir.
func LoadCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	certPEMBytes, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CA (run `studio setup` first): %w", err)
	}
	ca, err := ParseCertificate(certPEMBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", CAFile, err)
	}
	if !ca.IsCA {
		return nil, nil, fmt.Errorf("%s is not a CA certificate", CAFile)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CA key: %w", err)
	}
	blk, _ := pem.Decode(keyPEM)
	if blk == nil {
		return nil, nil, fmt.Errorf("%s holds no PEM block", CAKeyFile)
	}
	var key any
	switch blk.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(blk.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	default:
		err = fmt.Errorf("unexpected PEM block %q", blk.Type)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", CAKeyFile, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("%s: not a signing key", CAKeyFile)
	}
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(ca.PublicKey) {
		return nil, nil, fmt.Errorf("%s does not belong to %s", CAKeyFile, CAFile)
	}
	return ca, signer, nil
}

// newClient makes a client certificate and the files holding it; nothing
// is written yet.
func newClient(dir, base, cn string, days int, password string, ca *x509.Certificate, caKey crypto.Signer, now time.Time) (*ClientResult, []outFile, error) {
	if err := validateCommonName(cn); err != nil {
		return nil, nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.AddDate(0, 0, days),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	cert, err := sign(tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the %s certificate: %w", base, err)
	}
	generated := password == ""
	if generated {
		password, err = randomPassword()
		if err != nil {
			return nil, nil, err
		}
	}
	pfx, err := EncodePFX(key, cert, ca, password)
	if err != nil {
		return nil, nil, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	crt := certPEM(cert)
	res := &ClientResult{
		Name:              base,
		CommonName:        cn,
		PEM:               filepath.Join(dir, base+".pem"),
		CRT:               filepath.Join(dir, base+".crt"),
		PFX:               filepath.Join(dir, base+".pfx"),
		PFXPassword:       password,
		Thumbprint:        Thumbprint(cert.Raw),
		CertificateBase64: base64.StdEncoding.EncodeToString(cert.Raw),
		NotAfter:          cert.NotAfter,
	}
	files := []outFile{
		{base + ".pem", append(append([]byte{}, crt...), keyPEM...), 0o600},
		{base + ".crt", crt, 0o644},
		{base + ".pfx", pfx, 0o600},
	}
	if generated {
		res.PasswordFile = filepath.Join(dir, base+".pfx.password")
		files = append(files, outFile{base + ".pfx.password", []byte(password + "\n"), 0o600})
	}
	return res, files, nil
}

// EncodePFX bundles a client certificate, its key and the CA as PKCS#12.
// It uses the legacy encoding (3DES, SHA-1 MAC): macOS's keychain, through
// which Safari and Chrome on macOS import certificates, rejects the modern
// one (AES-256, SHA-256 MAC) with a "wrong password" error, while Windows,
// NSS (Firefox, Chrome on Linux) and OpenSSL 3 (Node) read both. The
// password is random (128 bits) unless the operator chose one, and the
// file is 0600.
func EncodePFX(key crypto.PrivateKey, cert, ca *x509.Certificate, password string) ([]byte, error) {
	pfx, err := pkcs12.LegacyDES.Encode(key, cert, []*x509.Certificate{ca}, password)
	if err != nil {
		return nil, fmt.Errorf("encoding the PFX: %w", err)
	}
	return pfx, nil
}

// removeStalePassword removes the NAME.pfx.password an earlier run left
// (only --force gets this far with one) when this run's password was given
// rather than generated: it would no longer open NAME.pfx.
func removeStalePassword(r *ClientResult) error {
	if r.PasswordFile != "" {
		return nil
	}
	err := os.Remove(strings.TrimSuffix(r.PFX, ".pfx") + ".pfx.password")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func randomPassword() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func checkDays(days int) (int, error) {
	if days == 0 {
		return DefaultDays, nil
	}
	if days < 1 || days > CADays {
		return 0, fmt.Errorf("--days %d: between 1 and %d (the CA's lifetime)", days, CADays)
	}
	return days, nil
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, key crypto.Signer) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial.Add(serial, big.NewInt(1))
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func pkcs8PEM(key any) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func clientFiles(base string) []string {
	return []string{base + ".pem", base + ".crt", base + ".pfx", base + ".pfx.password"}
}

type outFile struct {
	name string
	data []byte
	mode os.FileMode
}

// prepareDir makes dir (0700) when missing and returns its absolute path.
func prepareDir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("no output directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s is not a directory", abs)
	}
	return abs, nil
}

func refuseExisting(dir string, names []string) error {
	var found []string
	for _, n := range names {
		if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
			found = append(found, n)
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("%s already holds %s; refusing to overwrite (use --force to replace them)", dir, strings.Join(found, ", "))
	}
	return nil
}

// writeFiles writes each file with its mode. Without force a file is
// created exclusively (an existing one is an error); with force it is
// written to a temporary file and renamed over the old one, so the mode is
// the new one even when the old file was more open.
func writeFiles(dir string, files []outFile, force bool) error {
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := writeFile(path, f.data, f.mode, force); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

func writeFile(path string, data []byte, mode os.FileMode, force bool) error {
	if !force {
		fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return err
		}
		if _, err := fh.Write(data); err != nil {
			fh.Close()
			return err
		}
		return fh.Close()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
