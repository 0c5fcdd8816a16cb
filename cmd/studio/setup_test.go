package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/backend/pki"
)

// splitShell splits a printed command line as a POSIX shell would for the
// quoting shellQuote produces (single quotes, backslash outside them).
func splitShell(t *testing.T, line string) []string {
	t.Helper()
	var args []string
	var cur strings.Builder
	inWord, inQuote := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case inQuote:
			if c == '\'' {
				inQuote = false
			} else {
				cur.WriteByte(c)
			}
		case c == '\'':
			inQuote, inWord = true, true
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inQuote {
		t.Fatalf("unterminated quote in %q", line)
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args
}

// linesWith returns the lines of out that start with prefix, prefix cut.
func linesWith(out, prefix string) []string {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), prefix); ok {
			got = append(got, rest)
		}
	}
	return got
}

func oneLine(t *testing.T, out, prefix string) string {
	t.Helper()
	got := linesWith(out, prefix)
	if len(got) != 1 {
		t.Fatalf("%d lines start with %q in:\n%s", len(got), prefix, out)
	}
	return got[0]
}

// flagPairs reads "--name value" pairs; every flag the printed commands use
// takes a value.
func flagPairs(t *testing.T, args []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for i := 0; i < len(args); i += 2 {
		if !strings.HasPrefix(args[i], "--") || i+1 >= len(args) {
			t.Fatalf("not a --flag value pair at %d: %q", i, args)
		}
		if _, dup := m[args[i]]; dup {
			t.Fatalf("%s given twice: %q", args[i], args)
		}
		m[args[i]] = args[i+1]
	}
	return m
}

func TestSetupCommandPrintsRunnableFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my certs") // a space: the printed paths must be quoted
	var stdout, stderr bytes.Buffer
	err := runSetup([]string{"--hosts", "127.0.0.1:18080, 127.0.0.1:18081,127.0.0.1:18082", "--san", "localhost", "--out", dir, "--days", "90", "--admin-name", "Ops admin"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	out := stdout.String()

	adminCrt, err := os.ReadFile(filepath.Join(dir, "admin.crt"))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pki.ParseCertificate(adminCrt)
	if err != nil {
		t.Fatal(err)
	}
	thumb := oneLine(t, out, "admin thumbprint: ")
	if thumb != pki.Thumbprint(admin.Raw) {
		t.Fatalf("printed thumbprint %s, admin.crt's is %s", thumb, pki.Thumbprint(admin.Raw))
	}
	pw, _ := os.ReadFile(filepath.Join(dir, "admin.pfx.password"))
	if got := oneLine(t, out, "admin pfx password: "); got != strings.TrimSpace(string(pw)) || got == "" {
		t.Fatalf("printed password %q, file %q", got, pw)
	}

	for i, want := range []struct{ http, dataDir, join string }{
		{"127.0.0.1:18080", "./data1", ""},
		{"127.0.0.1:18081", "./data2", "https://127.0.0.1:18080"},
		{"127.0.0.1:18082", "./data3", "https://127.0.0.1:18080"},
	} {
		line := oneLine(t, out, "node "+string(rune('1'+i))+": ")
		args := splitShell(t, line)
		if len(args) < 2 || args[0] != "studio" || args[1] != "serve" {
			t.Fatalf("node %d: %q", i+1, line)
		}
		f := flagPairs(t, args[2:])
		if f["--http"] != want.http || f["--data-dir"] != want.dataDir || f["--join"] != want.join || f["--well-known-admin-certs"] != thumb {
			t.Fatalf("node %d flags %v", i+1, f)
		}
		for _, k := range []string{"--tls-cert", "--tls-key", "--tls-ca"} {
			if !filepath.IsAbs(f[k]) || filepath.Dir(f[k]) != dir {
				t.Fatalf("node %d: %s %q is not an absolute path in %s", i+1, k, f[k], dir)
			}
		}
		if _, err := tls.LoadX509KeyPair(f["--tls-cert"], f["--tls-key"]); err != nil {
			t.Fatalf("node %d key pair: %v", i+1, err)
		}
		caPEM, _ := os.ReadFile(f["--tls-ca"])
		ca, err := pki.ParseCertificate(caPEM)
		if err != nil || !ca.IsCA {
			t.Fatalf("node %d --tls-ca: %v", i+1, err)
		}
		nodePEM, _ := os.ReadFile(f["--tls-cert"])
		nodeCert, _ := pki.ParseCertificate(nodePEM)
		roots := x509.NewCertPool()
		roots.AddCert(ca)
		for _, host := range []string{"127.0.0.1", "localhost"} {
			if _, err := nodeCert.Verify(x509.VerifyOptions{Roots: roots, DNSName: host}); err != nil {
				t.Fatalf("node certificate for %s: %v", host, err)
			}
		}
		if _, err := admin.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Fatalf("admin certificate against --tls-ca: %v", err)
		}
		// The rest of the line is what `studio serve` takes today.
		var serve []string
		for _, k := range []string{"--http", "--data-dir", "--join"} {
			if f[k] != "" {
				serve = append(serve, k, f[k])
			}
		}
		o, err := parse(append([]string{"serve"}, serve...), io.Discard)
		if err != nil || o.httpAddr != want.http || o.dataDir != want.dataDir || o.join != want.join {
			t.Fatalf("node %d: studio serve %q: %+v %v", i+1, serve, o, err)
		}
	}
	if got := linesWith(out, "node 4: "); len(got) != 0 {
		t.Fatalf("--san made a node: %q", got)
	}

	curl := splitShell(t, oneLine(t, out, "curl "))
	if !reflect.DeepEqual(curl, []string{"--cacert", filepath.Join(dir, "ca.pem"), "--cert", filepath.Join(dir, "admin.pem"), "https://127.0.0.1:18080/certificates/whoami"}) {
		t.Fatalf("curl line %q", curl)
	}
	for _, want := range []string{`type: "pem", certificate: fs.readFileSync("` + filepath.Join(dir, "admin.pem") + `")`, `new DocumentStore(["https://127.0.0.1:18080", "https://127.0.0.1:18081", "https://127.0.0.1:18082"]`, "admin.pfx", `choose the "Ops admin" certificate`} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSetupCommandHostsOnSeparateMachines(t *testing.T) {
	dir := t.TempDir()
	var stdout bytes.Buffer
	if err := runSetup([]string{"--hosts", "a.example.com,b.example.com,[::1]:9000", "--out", dir}, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	for i, want := range []struct{ http, join string }{
		{"a.example.com:8080", ""},
		{"b.example.com:8080", "https://a.example.com:8080"},
		{"[::1]:9000", "https://a.example.com:8080"},
	} {
		f := flagPairs(t, splitShell(t, oneLine(t, out, "node "+string(rune('1'+i))+": "))[2:])
		if f["--http"] != want.http || f["--join"] != want.join {
			t.Fatalf("node %d: %v", i+1, f)
		}
		if _, ok := f["--data-dir"]; ok {
			t.Fatalf("node %d: a --data-dir though every node has its own host", i+1)
		}
	}
}

func TestSetupClientCommand(t *testing.T) {
	dir := t.TempDir()
	if err := runSetup([]string{"--hosts", "localhost", "--out", dir}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	if err := runSetup([]string{"client", "--dir", dir, "--name", "app1", "--pfx-password", "s3cret"}, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	crt, _ := os.ReadFile(filepath.Join(dir, "app1.crt"))
	cert, err := pki.ParseCertificate(crt)
	if err != nil {
		t.Fatal(err)
	}
	if got := oneLine(t, out, "app1 thumbprint: "); got != pki.Thumbprint(cert.Raw) {
		t.Fatalf("printed %s, app1.crt is %s", got, pki.Thumbprint(cert.Raw))
	}
	if got := oneLine(t, out, "app1 pfx password: "); got != "s3cret" {
		t.Fatalf("printed password %q", got)
	}
	args := splitShell(t, oneLine(t, out, "curl "))
	f := map[string]string{}
	for i := 0; i+1 < len(args); i++ {
		if strings.HasPrefix(args[i], "-") {
			f[args[i]] = args[i+1]
		}
	}
	if f["--cert"] != filepath.Join(dir, "admin.pem") || f["--cacert"] != filepath.Join(dir, "ca.pem") || f["-X"] != "PUT" || args[len(args)-1] == "" {
		t.Fatalf("curl %q", args)
	}
	var body struct {
		Name, Certificate, SecurityClearance string
		Permissions                          map[string]string
	}
	if err := json.Unmarshal([]byte(f["--data"]), &body); err != nil {
		t.Fatalf("--data %q: %v", f["--data"], err)
	}
	der, _ := base64.StdEncoding.DecodeString(body.Certificate)
	if body.Name != "app1" || !bytes.Equal(der, cert.Raw) || body.SecurityClearance != "ValidUser" || body.Permissions["db"] != "Read" {
		t.Fatalf("body %+v", body)
	}
	if !strings.Contains(strings.Join(args, " "), "https://NODE/admin/certificates") {
		t.Fatalf("no PUT /admin/certificates URL in %q", args)
	}

	for _, bad := range [][]string{
		{"client", "--dir", dir, "--name", "../evil"},
		{"client", "--dir", dir},
		{"client", "--dir", dir, "--name", "app1"}, // exists
		{"client", "--dir", dir, "--name", "x", "extra"},
		{"--out", dir},                      // no --hosts
		{"--hosts", "h", "--out", dir, "x"}, // stray argument
	} {
		if err := runSetup(bad, io.Discard, io.Discard); err == nil {
			t.Errorf("setup %q succeeded", bad)
		}
	}
}

func TestSetupBinary(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	out, err := exec.Command(binary, "setup", "--hosts", "localhost", "--out", dir).Output()
	if err != nil {
		t.Fatalf("studio setup: %v", err)
	}
	if len(linesWith(string(out), "node 1: studio serve --http localhost:8080 ")) != 1 {
		t.Fatalf("output:\n%s", out)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(binary, "setup", "--hosts", "localhost", "--out", dir)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "refusing to overwrite") {
		t.Fatalf("second run: %v %s", err, stderr.String())
	}
	out, err = exec.Command(binary, "setup", "client", "--dir", dir, "--name", "reader").Output()
	if err != nil || len(linesWith(string(out), "reader thumbprint: ")) != 1 {
		t.Fatalf("studio setup client: %v\n%s", err, out)
	}
	help, err := exec.Command(binary, "setup", "-h").CombinedOutput()
	if err != nil || !strings.Contains(string(help), "studio setup client --dir DIR --name NAME") || !strings.Contains(string(help), "-pfx-password") {
		t.Fatalf("setup -h: %v\n%s", err, help)
	}
	msg, err := exec.Command(binary, "frobnicate").CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "serve, setup") {
		t.Fatalf("unknown command: %v %s", err, msg)
	}
}
