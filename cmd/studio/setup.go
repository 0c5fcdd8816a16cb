package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/rookerydb/rookery/backend/pki"
)

// The setup command writes the certificates of a secured cluster and prints
// the flags each node runs with:
//
//	studio setup --hosts h1[:port][,h2...] --out DIR [--san h,...] [--port 8080] [--days 825] [--admin-name admin] [--pfx-password P] [--force]
//	studio setup client --dir DIR --name NAME [--days 825] [--pfx-password P] [--force]
//
// It is not a server, so its flags have no ROOKERY_* variables.

const setupUsage = `Usage:
  studio setup --hosts HOST[:PORT][,HOST[:PORT]...] --out DIR [flags]
      Writes a cluster CA, one node certificate for all the nodes and an admin
      client certificate into DIR, and prints the command that starts each node.
      One node per --hosts entry; the node certificate is valid for every host.

  studio setup client --dir DIR --name NAME [flags]
      Issues another client certificate from the CA in DIR (for an application
      or a read-only user) and prints how to register it with the cluster.

`

// runSetup runs `studio setup ...` (args are what follows "setup").
func runSetup(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "client" {
		return runSetupClient(args[1:], stdout, stderr)
	}
	var (
		hosts, sans, out, adminName, password string
		port, days                            int
		force                                 bool
	)
	fs := flag.NewFlagSet("studio setup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&hosts, "hosts", "", "the nodes, comma-separated: host name or IP address, with :PORT when not --port (required)")
	fs.StringVar(&sans, "san", "", "more host names or IP addresses the node certificate is valid for, comma-separated, with no node of their own (a load balancer's name, localhost)")
	fs.StringVar(&out, "out", "", "directory to write the certificates into, created 0700 (required)")
	fs.IntVar(&port, "port", 8080, "HTTPS port of the --hosts entries that give none")
	fs.IntVar(&days, "days", pki.DefaultDays, "validity of the node and admin certificates in days (825 is the most Apple's platforms accept for a TLS server certificate)")
	fs.StringVar(&adminName, "admin-name", pki.AdminName, "common name of the admin client certificate")
	fs.StringVar(&password, "pfx-password", "", "password of admin.pfx (default: a random one, printed and written to admin.pfx.password)")
	fs.BoolVar(&force, "force", false, "overwrite certificates already in --out")
	fs.Usage = func() {
		fmt.Fprint(stderr, setupUsage, "Flags of studio setup:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("setup: unexpected arguments %v (the subcommand is: client)", fs.Args())
	}
	if hosts == "" || out == "" {
		fs.Usage()
		return errors.New("setup: --hosts and --out are required")
	}
	nodes, err := pki.ParseNodes(hosts, port)
	if err != nil {
		return fmt.Errorf("setup: --hosts: %w", err)
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Host
	}
	names = append(names, splitList(sans)...)
	res, err := pki.Setup(out, pki.SetupOptions{Hosts: names, Days: days, AdminName: adminName, PFXPassword: password, Force: force})
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	printSetup(stdout, res, nodes)
	return nil
}

func runSetupClient(args []string, stdout, stderr io.Writer) error {
	var (
		dir, name, password string
		days                int
		force               bool
	)
	fs := flag.NewFlagSet("studio setup client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&dir, "dir", "", "the directory `studio setup` wrote (it needs ca.pem and ca-key.pem) (required)")
	fs.StringVar(&name, "name", "", "name of the certificate: its common name and the base of its files (letters, digits, '.', '_', '-') (required)")
	fs.IntVar(&days, "days", pki.DefaultDays, "validity in days")
	fs.StringVar(&password, "pfx-password", "", "password of NAME.pfx (default: a random one, printed and written to NAME.pfx.password)")
	fs.BoolVar(&force, "force", false, "overwrite this name's files")
	fs.Usage = func() {
		fmt.Fprint(stderr, setupUsage, "Flags of studio setup client:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("setup client: unexpected arguments %v", fs.Args())
	}
	if dir == "" || name == "" {
		fs.Usage()
		return errors.New("setup client: --dir and --name are required")
	}
	res, err := pki.IssueClient(dir, pki.ClientOptions{Name: name, Days: days, PFXPassword: password, Force: force})
	if err != nil {
		return fmt.Errorf("setup client: %w", err)
	}
	abs, _ := filepath.Abs(dir)
	printClient(stdout, abs, res)
	return nil
}

// nodeURL is the https URL of a node.
func nodeURL(n pki.NodeAddr) string { return "https://" + n.HostPort() }

// nodeCommand is the command line that starts node i (0-based) of nodes.
// When some nodes share a host, each gets its own --data-dir.
func nodeCommand(res *pki.SetupResult, nodes []pki.NodeAddr, i int) string {
	hostCount := map[string]int{}
	for _, n := range nodes {
		hostCount[n.Host]++
	}
	args := []string{"studio", "serve", "--http", shellQuote(nodes[i].HostPort())}
	if hostCount[nodes[i].Host] > 1 {
		args = append(args, "--data-dir", fmt.Sprintf("./data%d", i+1))
	}
	args = append(args,
		"--tls-cert", shellQuote(res.NodeCert),
		"--tls-key", shellQuote(res.NodeKey),
		"--tls-ca", shellQuote(res.CA),
		"--well-known-admin-certs", res.Admin.Thumbprint)
	if i > 0 {
		args = append(args, "--join", shellQuote(nodeURL(nodes[0])))
	}
	return strings.Join(args, " ")
}

// printSetup writes what setup did and how to use it. The lines a script
// may read are stable:
//
//	admin thumbprint: <40 upper-case hex>
//	admin pfx password: <password>
//	node <N>: studio serve --http ... (one line per node, N from 1)
func printSetup(w io.Writer, res *pki.SetupResult, nodes []pki.NodeAddr) {
	a := res.Admin
	var sans []string
	sans = append(sans, res.DNSNames...)
	for _, ip := range res.IPs {
		sans = append(sans, ip.String())
	}
	fmt.Fprintf(w, "Wrote the certificates of a secured cluster into %s:\n", res.Dir)
	fmt.Fprintf(w, "  %-20s the cluster CA (%s): clients trust the nodes through it\n", pki.CAFile, res.CACommonName)
	fmt.Fprintf(w, "  %-20s the CA's private key: keep it secret (offline once you have issued what you need); `studio setup client` uses it\n", pki.CAKeyFile)
	fmt.Fprintf(w, "  %-20s the node certificate, shared by every node; valid for %s until %s\n", pki.NodeFile, strings.Join(sans, ", "), res.NodeNotAfter.Format("2006-01-02"))
	fmt.Fprintf(w, "  %-20s the node certificate's private key\n", pki.NodeKeyFile)
	printClientFiles(w, a)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "admin thumbprint: %s\n", a.Thumbprint)
	fmt.Fprintf(w, "admin pfx password: %s\n", a.PFXPassword)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Start the nodes, each on its host (the first one bootstraps the cluster, the others join it):")
	for i := range nodes {
		fmt.Fprintf(w, "node %d: %s\n", i+1, nodeCommand(res, nodes, i))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The admin certificate is ClusterAdmin through --well-known-admin-certs; other client certificates")
	fmt.Fprintln(w, "must be registered (see `studio setup client`). Copy ca.pem, node.pem and node-key.pem to every node;")
	fmt.Fprintln(w, "the printed paths are where they are now.")
	fmt.Fprintln(w)
	first := nodeURL(nodes[0])
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = strconv.Quote(nodeURL(n))
	}
	fmt.Fprintln(w, "Check with curl (admin.pem holds the certificate and its key):")
	fmt.Fprintf(w, "  curl --cacert %s --cert %s %s\n", shellQuote(res.CA), shellQuote(a.PEM), shellQuote(first+"/certificates/whoami"))
	fmt.Fprintln(w)
	fmt.Fprintln(w, "With the npm ravendb client:")
	fmt.Fprintln(w, `  const fs = require("fs");`)
	fmt.Fprintln(w, `  const { DocumentStore } = require("ravendb");`)
	fmt.Fprintf(w, "  const store = new DocumentStore([%s], \"db\", {\n", strings.Join(urls, ", "))
	fmt.Fprintf(w, "    type: \"pem\", certificate: fs.readFileSync(%s), ca: fs.readFileSync(%s) });\n", strconv.Quote(a.PEM), strconv.Quote(res.CA))
	fmt.Fprintln(w, "  store.initialize();")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "In a browser: import admin.pfx (password above) as your certificate, and ca.pem as a trusted authority:")
	fmt.Fprintln(w, "  Chrome, Edge: Settings > Privacy and security > Security > Manage certificates (Your certificates: admin.pfx; Authorities: ca.pem)")
	fmt.Fprintln(w, "  Firefox:      Settings > Privacy & Security > Certificates > View Certificates (Your Certificates: admin.pfx; Authorities: ca.pem, trust for websites)")
	fmt.Fprintln(w, "  macOS:        double-click admin.pfx and ca.pem (Keychain Access), then mark the CA \"Always Trust\" for SSL")
	fmt.Fprintf(w, "then open %s and choose the %q certificate when the browser asks.\n", first, a.CommonName)
}

// printClient writes what `setup client` did and how to register the
// certificate. Stable lines: "<name> thumbprint: <hex>" and
// "<name> pfx password: <password>".
func printClient(w io.Writer, dir string, c *pki.ClientResult) {
	fmt.Fprintf(w, "Wrote a client certificate into %s:\n", dir)
	printClientFiles(w, c)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%s thumbprint: %s\n", c.Name, c.Thumbprint)
	fmt.Fprintf(w, "%s pfx password: %s\n", c.Name, c.PFXPassword)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "It has no rights until an admin registers it. With the admin certificate (replace NODE by a node's host:port;")
	fmt.Fprintln(w, `SecurityClearance is ValidUser, Operator or ClusterAdmin; Permissions maps each database to Read, ReadWrite or Admin):`)
	body := fmt.Sprintf(`{"Name":%q,"Certificate":%q,"SecurityClearance":"ValidUser","Permissions":{"db":"Read"}}`, c.Name, c.CertificateBase64)
	fmt.Fprintf(w, "  curl --cacert %s --cert %s -X PUT https://NODE/admin/certificates -H 'Content-Type: application/json' --data '%s'\n",
		shellQuote(filepath.Join(dir, pki.CAFile)), shellQuote(filepath.Join(dir, pki.AdminName+".pem")), body)
}

func printClientFiles(w io.Writer, c *pki.ClientResult) {
	fmt.Fprintf(w, "  %-20s the %s client certificate (CN %q) and its RSA key (PKCS#1): for curl --cert, the npm client, Go\n", filepath.Base(c.PEM), c.Name, c.CommonName)
	fmt.Fprintf(w, "  %-20s the certificate alone (to register it, or to look at)\n", filepath.Base(c.CRT))
	fmt.Fprintf(w, "  %-20s certificate, key and CA as PKCS#12, for browsers\n", filepath.Base(c.PFX))
	if c.PasswordFile != "" {
		fmt.Fprintf(w, "  %-20s the PFX's generated password\n", filepath.Base(c.PasswordFile))
	}
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:@%+=,-]+$`)

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
