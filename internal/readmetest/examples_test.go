package readmetest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runner runs one README block, named by its marker.
type runner struct {
	lang   string
	within string // run by this other runner (it needs that block's server), not on its own
	run    func(t *testing.T, e *env, b block)
}

// runners, by marker name (set in init: runTwoCommands refers back to
// them). Keep README.md's markers in step.
var runners map[string]runner

func init() {
	runners = map[string]runner{
		"two-commands":       {lang: "sh", run: runTwoCommands},
		"run-a-node":         {lang: "sh", run: runNodeLines},
		"cluster":            {lang: "sh", run: runNodeLines},
		"secured-cluster":    {lang: "sh", run: runSecuredCluster},
		"secured-npm-client": {lang: "js", within: "secured-cluster", run: runSecuredNpmClient},
		"secured-go-client":  {lang: "go", within: "secured-cluster", run: runSecuredGoClient},
		"npm-client":         {lang: "js", within: "two-commands", run: runNpmClient},
		"go-client":          {lang: "go", within: "two-commands", run: runGoClient},
		"import-export":      {lang: "sh", within: "two-commands", run: runImportExport},
		"bench":              {lang: "sh", run: runBench},
	}
}

// The README's examples run as printed, in the README's order, in one copy
// of the repository, as a newcomer would run them one after the other.
func TestReadmeExamples(t *testing.T) {
	blocks := readmeBlocks(t)
	if testing.Short() {
		t.Skip("NOT RUN in -short mode: README.md's examples start servers and compile the studio")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		notRun(t, "README.md's shell examples need bash, which is not installed")
	}
	start := time.Now()
	e := newEnv(t, blocks)
	for _, b := range blocks {
		if b.Name == "skip" {
			t.Logf("%s not run: %s", b, b.Note)
			continue
		}
		r := runners[b.Name]
		if r.within != "" {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			began := time.Now()
			r.run(t, e, b)
			t.Logf("%s (%s) took %s", b.Name, b, time.Since(began).Round(100*time.Millisecond))
		})
	}
	t.Logf("README examples took %s", time.Since(start).Round(100*time.Millisecond))
}

// runNested runs a block that needs the server of the block running it.
func runNested(t *testing.T, e *env, name string) {
	b, ok := e.blocks[name]
	if !ok {
		t.Errorf("no block named %q in README.md", name)
		return
	}
	t.Run(name, func(t *testing.T) { runners[name].run(t, e, b) })
}

var (
	commentRe  = regexp.MustCompile(`\s+#.*$`)
	httpFlagRe = regexp.MustCompile(`--http[ =](\S+)`)
	raftFlagRe = regexp.MustCompile(`--raft-addr[ =](\S+)`)
	dataFlagRe = regexp.MustCompile(`--data-dir[ =](\S+)`)
	tagFlagRe  = regexp.MustCompile(`--node-tag[ =](\S+)`)
	tagNoteRe  = regexp.MustCompile(`\btag ([A-Z]{1,4})\b`)
)

// nodeLine is one line of the README that starts a node in the foreground.
type nodeLine struct {
	text      string // as printed, comment included
	addr      string // --http, or the default 127.0.0.1:8080
	httpPort  int
	raftPort  int
	dataDir   string // --data-dir, or the default ./data
	wantTag   string // --node-tag, or the "tag X" of the line's comment
	proc      *proc
	baseURL   string
	shortName string
}

// parseNodeLine reads a `go run ./cmd/studio [serve] ...` line; ok is
// false for any other line.
func parseNodeLine(line string) (n nodeLine, ok bool, err error) {
	cmd := strings.TrimSpace(commentRe.ReplaceAllString(line, ""))
	rest, found := strings.CutPrefix(cmd, "go run ./cmd/studio")
	if !found || (rest != "" && rest[0] != ' ') {
		return n, false, nil
	}
	if f := strings.Fields(rest); len(f) > 0 && !strings.HasPrefix(f[0], "-") && f[0] != "serve" {
		return n, false, nil // another subcommand (setup, cluster)
	}
	n = nodeLine{text: strings.TrimSpace(line), addr: "127.0.0.1:8080", dataDir: "./data"}
	if m := httpFlagRe.FindStringSubmatch(cmd); m != nil {
		n.addr = m[1]
	}
	host, port, err := net.SplitHostPort(n.addr)
	if err != nil || host != "127.0.0.1" {
		return n, true, fmt.Errorf("%q: the test runs nodes on 127.0.0.1 only (--http %s)", line, n.addr)
	}
	n.httpPort, _ = strconv.Atoi(port)
	n.raftPort = n.httpPort + 1000
	if m := raftFlagRe.FindStringSubmatch(cmd); m != nil {
		_, rp, err := net.SplitHostPort(m[1])
		if err != nil {
			return n, true, fmt.Errorf("%q: --raft-addr %s: %v", line, m[1], err)
		}
		n.raftPort, _ = strconv.Atoi(rp)
	}
	if m := dataFlagRe.FindStringSubmatch(cmd); m != nil {
		n.dataDir = m[1]
	}
	if m := tagFlagRe.FindStringSubmatch(cmd); m != nil {
		n.wantTag = m[1]
	} else if m := tagNoteRe.FindStringSubmatch(commentRe.FindString(line)); m != nil {
		n.wantTag = m[1]
	}
	n.baseURL = "http://" + n.addr
	n.shortName = fmt.Sprintf("node-%d", n.httpPort)
	return n, true, nil
}

// startNodes starts every node line, one after the other, each when the
// one before it is ready (as a newcomer does in separate terminals), and
// checks each node's tag and data directory. It skips when a port is taken.
func startNodes(t *testing.T, e *env, lines []nodeLine) {
	t.Helper()
	var ports []int
	for _, n := range lines {
		ports = append(ports, n.httpPort, n.raftPort)
	}
	needPorts(t, ports...)
	for i := range lines {
		n := &lines[i]
		n.proc = e.start(t, n.shortName, n.text)
		// The first `go run` compiles the studio in the copy: minutes on a
		// busy two-core machine.
		waitReady(t, n.proc, http.DefaultClient, n.baseURL, 4*time.Minute)
		var info struct{ NodeTag string }
		getJSON(t, http.DefaultClient, n.baseURL+"/cluster/node-info", &info)
		if n.wantTag != "" && info.NodeTag != n.wantTag {
			t.Errorf("%q: the node's tag is %q, the README says %q", n.text, info.NodeTag, n.wantTag)
		}
		if fi, err := os.Stat(filepath.Join(e.dir, n.dataDir)); err != nil || !fi.IsDir() {
			t.Errorf("%q: no data directory %s after the start (%v)", n.text, n.dataDir, err)
		}
	}
}

// stopNodes stops the nodes and waits for their ports.
func stopNodes(t *testing.T, lines []nodeLine) {
	t.Helper()
	var ports []int
	for _, n := range lines {
		n.proc.stop(t)
		ports = append(ports, n.httpPort, n.raftPort)
	}
	waitPortsFree(t, ports...)
}

// nodeLines splits a block into node lines and the rest (blank and
// comment-only lines dropped).
func nodeLines(t *testing.T, b block) (nodes []nodeLine, other []string) {
	t.Helper()
	for _, line := range b.Lines {
		if s := strings.TrimSpace(line); s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		n, ok, err := parseNodeLine(line)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if ok {
			nodes = append(nodes, n)
		} else {
			other = append(other, strings.TrimSpace(line))
		}
	}
	return nodes, other
}

// runTwoCommands: `go run ./cmd/studio` is started as printed and checked
// (tag A, ./data, ready on 8080); the npm and Go client snippets run
// against it. `./scripts/test.sh` is the command this test runs under, so
// it is only checked to exist and be executable.
func runTwoCommands(t *testing.T, e *env, b block) {
	nodes, other := nodeLines(t, b)
	if len(nodes) != 1 {
		t.Fatalf("%s: want one node line, have %d", b, len(nodes))
	}
	for _, line := range other {
		cmd := strings.TrimSpace(commentRe.ReplaceAllString(line, ""))
		if cmd != "./scripts/test.sh" {
			t.Fatalf("%s: the runner does not know how to run %q; teach runTwoCommands or mark the block", b, line)
		}
		fi, err := os.Stat(filepath.Join(e.dir, "scripts", "test.sh"))
		if err != nil || fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("%q: not an executable file (%v)", line, err)
		}
		t.Logf("%q not run: it is the command that runs this test", line)
	}
	startNodes(t, e, nodes)
	if nodes[0].addr != "127.0.0.1:8080" {
		t.Fatalf("the npm and Go snippets use http://127.0.0.1:8080, the first command listens on %s", nodes[0].addr)
	}
	runNested(t, e, "npm-client")
	runNested(t, e, "go-client")
	runNested(t, e, "import-export")
	stopNodes(t, nodes)
	if fi, err := os.Stat(filepath.Join(e.dir, "data", "databases", "shop")); err != nil || !fi.IsDir() {
		t.Errorf("no ./data/databases/shop after the client snippets (%v)", err)
	}
}

// runNodeLines starts every line of the block as a node (a newcomer's
// separate terminals), checks tags and data directories, and, when there
// is more than one, that the first one's cluster has them all as voting
// members at the URLs the lines give.
func runNodeLines(t *testing.T, e *env, b block) {
	nodes, other := nodeLines(t, b)
	if len(other) > 0 || len(nodes) == 0 {
		t.Fatalf("%s: want only node lines, have %d and other lines %q", b, len(nodes), other)
	}
	startNodes(t, e, nodes)
	want := map[string]string{}
	for _, n := range nodes {
		if n.wantTag == "" {
			t.Fatalf("%q: the line names no tag (--node-tag or \"tag X\" in its comment)", n.text)
		}
		want[n.wantTag] = n.baseURL
	}
	var topo struct {
		Topology struct{ Members, Watchers map[string]string }
		Leader   string
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		getJSON(t, http.DefaultClient, nodes[0].baseURL+"/cluster/topology", &topo)
		if fmt.Sprint(topo.Topology.Members) == fmt.Sprint(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster of %s has members %v (watchers %v), want %v", nodes[0].baseURL, topo.Topology.Members, topo.Topology.Watchers, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("cluster members %v, leader %s", topo.Topology.Members, topo.Leader)
	stopNodes(t, nodes)
}

// runSecuredCluster runs the block as one script, as printed: it builds
// ./studio, writes ./certs, starts three TLS nodes in the background and
// curls whoami with the admin certificate. Its output must be the admin's
// ClusterAdmin identity; then the three nodes must form one cluster, and a
// caller without a certificate must be refused.
func runSecuredCluster(t *testing.T, e *env, b block) {
	if _, err := exec.LookPath("curl"); err != nil {
		notRun(t, "the secured-cluster example needs curl, which is not installed (.ci/run installs it)")
	}
	needPorts(t, 8443, 8444, 8445, 9443, 9444, 9445)
	p := e.start(t, "secured-cluster", b.Text())
	if err := p.wait(5 * time.Minute); err != nil {
		t.Fatalf("the block failed: %v\n%s", err, p.tail())
	}
	out := strings.Split(strings.TrimSpace(p.output()), "\n")
	last := out[len(out)-1]
	var who struct {
		SecurityClearance string
		Unsecured         bool
		Thumbprint        string
	}
	if err := json.Unmarshal([]byte(last), &who); err != nil || who.SecurityClearance != "ClusterAdmin" || who.Unsecured || who.Thumbprint == "" {
		t.Fatalf("curl's output is not the admin's ClusterAdmin identity (%v): %q\n%s", err, last, p.tail())
	}
	t.Logf("curl printed %s", last)

	withCert, anonymous := securedClients(t, e)
	var topo struct {
		Topology struct{ Members map[string]string }
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		getJSON(t, withCert, "https://127.0.0.1:8443/cluster/topology", &topo)
		urls := slices.Sorted(maps.Values(topo.Topology.Members))
		if slices.Equal(urls, []string{"https://127.0.0.1:8443", "https://127.0.0.1:8444", "https://127.0.0.1:8445"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the secured cluster's members are %v, want the three nodes\n%s", topo.Topology.Members, p.tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("secured cluster members %v", topo.Topology.Members)
	resp, err := anonymous.Get("https://127.0.0.1:8444/admin/certificates")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `"InvalidAuth"`) {
		t.Errorf("a caller without a certificate got %d %s, want 403 InvalidAuth", resp.StatusCode, body)
	}
	// The client examples of the Security section, against this cluster.
	runNested(t, e, "secured-npm-client")
	runNested(t, e, "secured-go-client")
	p.stop(t)
	waitPortsFree(t, 8443, 8444, 8445, 9443, 9444, 9445)
	for _, f := range []string{"studio", "certs/admin.pfx", "certs/admin.crt", "data-a", "data-b", "data-c"} {
		if _, err := os.Stat(filepath.Join(e.dir, f)); err != nil {
			t.Errorf("the block did not create ./%s: %v", f, err)
		}
	}
}

// securedClients are HTTPS clients of the secured cluster the README's
// block made: one presenting ./certs/admin.pem, one presenting nothing;
// both trust ./certs/ca.pem.
func securedClients(t *testing.T, e *env) (admin, anonymous *http.Client) {
	t.Helper()
	certs := filepath.Join(e.dir, "certs")
	caPEM, err := os.ReadFile(filepath.Join(certs, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("./certs/ca.pem holds no certificate")
	}
	kp, err := tls.LoadX509KeyPair(filepath.Join(certs, "admin.pem"), filepath.Join(certs, "admin.pem"))
	if err != nil {
		t.Fatalf("./certs/admin.pem (certificate and key in one file): %v", err)
	}
	tlsClient := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
	}
	return tlsClient(kp), tlsClient()
}

// securedDoc loads a document of the secured cluster with the admin
// certificate.
func securedDoc(t *testing.T, e *env, db, id string) map[string]any {
	t.Helper()
	admin, _ := securedClients(t, e)
	var r struct{ Results []map[string]any }
	getJSON(t, admin, "https://127.0.0.1:8443/databases/"+db+"/docs?id="+id, &r)
	if len(r.Results) != 1 || r.Results[0] == nil {
		t.Fatalf("document %s of %s: %v", id, db, r.Results)
	}
	return r.Results[0]
}

var securedDBRe = regexp.MustCompile(`"(vault)"`)

// runSecuredNpmClient runs the secured npm snippet (the npm client with
// authOptions) against the secured cluster, from the copy's directory
// where ./certs is, and checks the document it stored over TLS.
func runSecuredNpmClient(t *testing.T, e *env, b block) {
	node, err := exec.LookPath("node")
	if err != nil {
		notRun(t, "the secured npm example needs node, which is not installed (.ci/run installs it)")
	}
	modules := filepath.Join(e.root, "compat", "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "ravendb")); err != nil {
		notRun(t, "the secured npm example needs the ravendb package: run (cd compat && npm ci) (%v)", err)
	}
	idm, dbm := npmIDRe.FindStringSubmatch(b.Text()), securedDBRe.FindStringSubmatch(b.Text())
	if idm == nil || dbm == nil {
		t.Fatalf("%s: no `// id <id>` comment or database name to check", b)
	}
	writeExample(t, e, b, "secure.js")
	p := e.start(t, "secured-npm-client", node+" secure.js", "NODE_PATH="+modules)
	if err := p.wait(time.Minute); err != nil {
		t.Fatalf("the secured npm example failed: %v\n%s", err, p.tail())
	}
	if got := strings.TrimSpace(p.output()); got != idm[1] {
		t.Errorf("the secured npm example printed the id %q, the README says %q", got, idm[1])
	}
	doc := securedDoc(t, e, dbm[1], idm[1])
	if doc["name"] != "Ann" || collection(doc) != "Users" {
		t.Errorf("%s is %v, want the User Ann in Users", idm[1], doc)
	}
}

// runSecuredGoClient compiles and runs the secured Go snippet (a
// certificate in the client's conventions) against the secured cluster.
func runSecuredGoClient(t *testing.T, e *env, b block) {
	idm, dbm := goIDRe.FindStringSubmatch(b.Text()), securedDBRe.FindStringSubmatch(b.Text())
	if idm == nil || dbm == nil {
		t.Fatalf(`%s: no 'is "<id>"' comment or database name to check`, b)
	}
	writeExample(t, e, b, "secure/main.go")
	p := e.start(t, "secured-go-client", "go run ./secure")
	if err := p.wait(4 * time.Minute); err != nil {
		t.Fatalf("the secured Go example failed: %v\n%s", err, p.tail())
	}
	if got := strings.TrimSpace(p.output()); got != idm[1] {
		t.Errorf("order.ID is %q after Store, the README says %q", got, idm[1])
	}
	doc := securedDoc(t, e, dbm[1], idm[1])
	if doc["Total"] != 10.0 || collection(doc) != "Orders" {
		t.Errorf("%s is %v, want the Order with Total 10 in Orders", idm[1], doc)
	}
}

var (
	npmIDRe  = regexp.MustCompile(`// id ([a-z]+/\d+-[A-Z]+)`)
	npmVerRe = regexp.MustCompile(`require\("ravendb"\);\s*//\s*(\d+\.\d+\.\d+)`)
	goIDRe   = regexp.MustCompile(`is "([a-z]+/\d+-[A-Z]+)"`)
)

// runNpmClient runs the npm snippet with node and the ravendb package of
// compat/node_modules against the node of the two commands, then checks
// the document it stored.
func runNpmClient(t *testing.T, e *env, b block) {
	node, err := exec.LookPath("node")
	if err != nil {
		notRun(t, "the npm-client example needs node, which is not installed (.ci/run installs it)")
	}
	modules := filepath.Join(e.root, "compat", "node_modules")
	pkg, err := os.ReadFile(filepath.Join(modules, "ravendb", "package.json"))
	if err != nil {
		notRun(t, "the npm-client example needs the ravendb package: run (cd compat && npm ci) (%v)", err)
	}
	var ver struct{ Version string }
	if err := json.Unmarshal(pkg, &ver); err != nil {
		t.Fatal(err)
	}
	if m := npmVerRe.FindStringSubmatch(b.Text()); m == nil {
		t.Errorf("%s: the require line names no ravendb version", b)
	} else if m[1] != ver.Version {
		t.Errorf("%s says ravendb %s, compat/ installs %s", b, m[1], ver.Version)
	}
	idm := npmIDRe.FindStringSubmatch(b.Text())
	if idm == nil {
		t.Fatalf("%s: no `// id <id>` comment to check", b)
	}
	writeExample(t, e, b, "example.js")
	p := e.start(t, "npm-client", node+" example.js", "NODE_PATH="+modules)
	if err := p.wait(time.Minute); err != nil {
		t.Fatalf("the npm example failed: %v\n%s", err, p.tail())
	}
	if got := strings.TrimSpace(p.output()); got != idm[1] {
		t.Errorf("the npm example printed the id %q, the README says %q", got, idm[1])
	}
	doc := loadDoc(t, "http://127.0.0.1:8080", "shop", idm[1])
	if doc["name"] != "John" || collection(doc) != "Users" {
		t.Errorf("%s is %v, want the User John in Users", idm[1], doc)
	}
}

// runGoClient saves the Go example, a whole program, as printed in
// example/main.go of the copy, runs it against the node of the two
// commands, and checks the id it printed and the document it stored. It
// creates the database itself: nothing is created for it.
func runGoClient(t *testing.T, e *env, b block) {
	idm := goIDRe.FindStringSubmatch(b.Text())
	if idm == nil {
		t.Fatalf(`%s: no 'is "<id>"' comment to check`, b)
	}
	writeExample(t, e, b, "example/main.go")
	p := e.start(t, "go-client", "go run ./example")
	if err := p.wait(4 * time.Minute); err != nil {
		t.Fatalf("the Go example failed: %v\n%s", err, p.tail())
	}
	if got := strings.TrimSpace(p.output()); got != idm[1] {
		t.Errorf("order.ID is %q after Store, the README says %q", got, idm[1])
	}
	doc := loadDoc(t, "http://127.0.0.1:8080", "shop", idm[1])
	if doc["Total"] != 10.0 || collection(doc) != "Orders" {
		t.Errorf("%s is %v, want the Order with Total 10 in Orders", idm[1], doc)
	}
}

// benchTiny are sizes small enough to run every section in seconds; they
// are appended to each printed `go run ./cmd/bench` command (explicit
// sizes win over -quick's).
const benchTiny = "-docs 200 -batch 100 -rounds 1 -hilo-ids 2000 -identity-single 10 -identity-batched 100 -probe-n 100 -studio-docs 300 -conflicts 200 -lag-rate 100 -lag-for 500ms -catchup-docs 300 -subscription-docs 300 -tls-docs 400 -tls-rounds 1 -handshakes 20 -index-docs 300 -ref-docs 100 -smuggler-docs 300 -ts-points 2000 -ts-reads 2 -changes-subs 5 -changes-rate 100 -changes-for 300ms -changes-rounds 1 -cmpxchg-txs 5 -extensions-docs 200 -counter-incs 200 -attachment-mb 1 -attachment-rounds 1"

// benchHeaders are the report's section headings, by -only name.
var benchHeaders = map[string]string{
	"bulk": "## Bulk insert", "hilo": "## HiLo", "identities": "## Identities over HTTP", "cluster": "## Identities through Raft",
	"replication": "## Replication", "studio": "## Studio pages", "conflicts": "## Conflict resolution",
	"subscriptions": "## Subscription delivery", "probe": "## Next free identity", "tls": "## TLS", "indexes": "## Indexes",
	"smuggler": "## Import and export", "extensions": "## Time series", "bulkinsert": "## Streaming bulk insert", "changes": "## Changes API",
}

var onlyRe = regexp.MustCompile(`-only[ =](\S+)`)

// runBench runs each printed benchmark command at tiny sizes: the
// `go run ./cmd/bench ...` lines with benchTiny appended (their flags and
// -only sections must parse, and the report must hold exactly the chosen
// sections), the `go test -bench` line with -benchtime 1x. The full sizes
// take minutes; cmd/bench's TestBenchSmoke covers the measurements.
func runBench(t *testing.T, e *env, b block) {
	n := 0
	for _, line := range b.Lines {
		cmd := strings.TrimSpace(commentRe.ReplaceAllString(line, ""))
		if cmd == "" || strings.HasPrefix(cmd, "#") {
			continue
		}
		n++
		name := fmt.Sprintf("bench-%d", n)
		switch {
		case strings.HasPrefix(cmd, "go run ./cmd/bench"):
			p := e.start(t, name, cmd+" "+benchTiny)
			if err := p.wait(4 * time.Minute); err != nil {
				t.Fatalf("%q at tiny sizes failed: %v\n%s", cmd, err, p.tail())
			}
			out := p.output()
			want := slices.Sorted(maps.Keys(benchHeaders))
			if m := onlyRe.FindStringSubmatch(cmd); m != nil {
				want = strings.Split(m[1], ",")
			}
			for s, h := range benchHeaders {
				has := strings.Contains(out, "\n"+h)
				if slices.Contains(want, s) != has {
					t.Errorf("%q: section %s in the report: %v, want %v\n%s", cmd, s, has, !has, out)
				}
			}
		case strings.HasPrefix(cmd, "go test ") && strings.Contains(cmd, "-bench"):
			p := e.start(t, name, cmd+" -benchtime 1x")
			if err := p.wait(3 * time.Minute); err != nil {
				t.Fatalf("%q with -benchtime 1x failed: %v\n%s", cmd, err, p.tail())
			}
			out := p.output()
			pkgs := 0
			for _, f := range strings.Fields(cmd) {
				if strings.HasPrefix(f, "./") {
					pkgs++
				}
			}
			if ok := strings.Count(out, "\nok "); ok != pkgs || !strings.Contains(out, "\nBenchmark") {
				t.Errorf("%q: %d packages passed, want %d, and benchmarks ran: %v\n%s", cmd, ok, pkgs, strings.Contains(out, "\nBenchmark"), out)
			}
		default:
			t.Fatalf("%s: the runner does not know how to run %q; teach runBench or mark the block", b, line)
		}
	}
}

// getJSON GETs a URL and decodes its 200 answer.
func getJSON(t *testing.T, c *http.Client, url string, v any) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, body)
	}
}

// loadDoc loads one document over RavenDB's HTTP API.
func loadDoc(t *testing.T, base, db, id string) map[string]any {
	t.Helper()
	var r struct{ Results []map[string]any }
	getJSON(t, http.DefaultClient, base+"/databases/"+db+"/docs?id="+id, &r)
	if len(r.Results) != 1 || r.Results[0] == nil {
		t.Fatalf("document %s of %s: %v", id, db, r.Results)
	}
	return r.Results[0]
}

func collection(doc map[string]any) string {
	md, _ := doc["@metadata"].(map[string]any)
	c, _ := md["@collection"].(string)
	return c
}

// writeExample saves a README block exactly as printed (a whole program) at
// name under the copy's root, where the README tells a newcomer to save it.
func writeExample(t *testing.T, e *env, b block, name string) {
	t.Helper()
	path := filepath.Join(e.dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.Text()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runImportExport runs the import and export lines as printed, one script,
// against the node of the two commands (the client examples before it made
// the database shop), then checks what they made: a gzip dump from the CLI
// and one from curl, and shop's documents in shop-copy.
func runImportExport(t *testing.T, e *env, b block) {
	p := e.start(t, "import-export", b.Text())
	if err := p.wait(4 * time.Minute); err != nil {
		t.Fatalf("the import and export lines failed: %v\n%s", err, p.tail())
	}
	for _, f := range []string{"shop.ravendbdump", "shop-curl.ravendbdump"} {
		data, err := os.ReadFile(filepath.Join(e.dir, f))
		if err != nil || len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
			t.Errorf("./%s is not a gzip dump (%v)", f, err)
		}
	}
	var stats struct{ CountOfDocuments int }
	getJSON(t, http.DefaultClient, "http://127.0.0.1:8080/databases/shop-copy/stats", &stats)
	var src struct{ CountOfDocuments int }
	getJSON(t, http.DefaultClient, "http://127.0.0.1:8080/databases/shop/stats", &src)
	if stats.CountOfDocuments == 0 || stats.CountOfDocuments != src.CountOfDocuments {
		t.Errorf("shop-copy holds %d documents, shop %d", stats.CountOfDocuments, src.CountOfDocuments)
	}
}
