package main

// A secured 3-node cluster started as the README says: `studio setup`
// writes the certificates and prints one `studio serve` line per node, and
// each line runs as its own process (with a free Raft port added). The
// tests then go through Rookery's Go client with certificates: replication,
// subscriptions over TCP+TLS, identities through a leader kill, and the
// refusals of missing, unknown and read-only certificates.

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookerydb/rookery/client"
)

// securedCluster is a running secured cluster and its certificates.
type securedCluster struct {
	*testCluster
	workDir  string // the processes' working directory (./data1 …)
	certDir  string
	caPEM    string
	adminPEM string
	adminTP  string
	admin    *http.Client // presents admin.pem
	urls     []string
}

// tlsHTTPClient is an HTTPS client trusting caPEM and presenting certPEM
// (none when "").
func tlsHTTPClient(t *testing.T, caPEM, certPEM string, timeout time.Duration) *http.Client {
	t.Helper()
	cas, err := client.LoadTrustedCAs(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: cas, MinVersion: tls.VersionTLS12}
	if certPEM != "" {
		cert, err := client.LoadCertificate(certPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: nil, TLSClientConfig: cfg}}
}

// startSecuredCluster runs `studio setup` for three free loopback ports,
// then starts the printed command of each node, in order, each in its own
// process, and waits until the three agree on a leader.
func startSecuredCluster(t *testing.T) *securedCluster {
	t.Helper()
	work := t.TempDir()
	sc := &securedCluster{workDir: work, certDir: filepath.Join(work, "certs")}
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	out, err := exec.Command(binary, "setup", "--hosts", strings.Join(addrs, ","), "--san", "localhost", "--out", sc.certDir).CombinedOutput()
	if err != nil {
		t.Fatalf("studio setup: %v\n%s", err, out)
	}
	sc.adminTP = oneLine(t, string(out), "admin thumbprint: ")
	sc.caPEM, sc.adminPEM = filepath.Join(sc.certDir, "ca.pem"), filepath.Join(sc.certDir, "admin.pem")
	sc.admin = tlsHTTPClient(t, sc.caPEM, sc.adminPEM, 5*time.Second)
	var nodes []*cnode
	for i, tag := range []string{"A", "B", "C"} {
		args := splitShell(t, oneLine(t, string(out), fmt.Sprintf("node %d: ", i+1)))
		if len(args) < 2 || args[0] != "studio" || args[1] != "serve" {
			t.Fatalf("node %d: printed %q", i+1, args)
		}
		f := flagPairs(t, args[2:])
		if f["--http"] != addrs[i] || f["--tls-cert"] == "" || f["--well-known-admin-certs"] != sc.adminTP {
			t.Fatalf("node %d: printed flags %v", i+1, f)
		}
		n := &cnode{
			name:     tag, // the first bootstraps as A; the leader names the others in join order
			url:      "https://" + addrs[i],
			raftAddr: freeAddr(t),
			dataDir:  filepath.Join(work, f["--data-dir"]),
			logs:     &syncBuf{},
			dir:      work,
			client:   sc.admin,
		}
		// The printed line, plus a free Raft port (its default, the HTTP
		// port + 1000, may be taken on a test machine).
		n.args = append(args[1:], "--raft-addr", n.raftAddr)
		nodes = append(nodes, n)
		sc.urls = append(sc.urls, n.url)
	}
	sc.testCluster = startNodes(t, nodes...)
	return sc
}

// conventions present certPEM ("" for none) and trust the cluster's CA.
func (sc *securedCluster) conventions(t *testing.T, certPEM string) *client.Conventions {
	t.Helper()
	conv := client.DefaultConventions()
	cas, err := client.LoadTrustedCAs(sc.caPEM)
	if err != nil {
		t.Fatal(err)
	}
	conv.TrustedCAs = cas
	if certPEM != "" {
		if conv.Certificate, err = client.LoadCertificate(certPEM); err != nil {
			t.Fatal(err)
		}
	}
	conv.RequestTimeout = 10 * time.Second
	return conv
}

// store is a Go client store presenting certPEM; on one node only (no
// topology updates) when a single URL is given.
func (sc *securedCluster) store(t *testing.T, db, certPEM string, urls ...string) *client.DocumentStore {
	t.Helper()
	conv := sc.conventions(t, certPEM)
	if len(urls) == 0 {
		urls = sc.urls
	}
	conv.DisableTopologyUpdates = len(urls) == 1
	s := client.NewDocumentStoreWithConventions(urls, db, conv)
	t.Cleanup(func() { s.Close() })
	return s
}

// issue runs `studio setup client` for name and returns the cert+key PEM
// file and the printed thumbprint.
func (sc *securedCluster) issue(t *testing.T, name string) (pemFile, thumbprint string) {
	t.Helper()
	out, err := exec.Command(binary, "setup", "client", "--dir", sc.certDir, "--name", name).CombinedOutput()
	if err != nil {
		t.Fatalf("studio setup client %s: %v\n%s", name, err, out)
	}
	return filepath.Join(sc.certDir, name+".pem"), oneLine(t, string(out), name+" thumbprint: ")
}

// waitDB waits until every node lists all three members for db.
func (sc *securedCluster) waitDB(t *testing.T, db string) {
	t.Helper()
	for _, n := range sc.nodes {
		eventually(t, 15*time.Second, "database "+db+" on "+n.name, func() (bool, string) {
			var top dbTopology
			if err := getJSONWith(sc.admin, n.url+"/topology?name="+db, &top); err != nil {
				return false, err.Error()
			}
			return checkDBTopology(top, db, sc.nodes) == "", fmt.Sprintf("%+v", top)
		})
	}
}

// Order is the document type of the secured tests (collection Orders).
type Order struct {
	ID    string
	Token string
}

func loadOrder(ctx context.Context, s *client.DocumentStore, id string) (*Order, error) {
	return client.Load[Order](s.OpenSessionWithOptions(client.SessionOptions{Context: ctx}), id)
}

func saveOrder(ctx context.Context, s *client.DocumentStore, id, token string) (*Order, error) {
	sess := s.OpenSessionWithOptions(client.SessionOptions{Context: ctx})
	o := &Order{Token: token}
	var err error
	if id == "" {
		err = sess.Store(o)
	} else {
		err = sess.StoreWithID(o, id)
	}
	if err != nil {
		return nil, err
	}
	return o, sess.SaveChanges()
}

func TestSecuredCluster(t *testing.T) {
	began := time.Now()
	sc := startSecuredCluster(t)
	t.Logf("secured cluster up in %s", time.Since(began).Round(time.Millisecond))
	ctx := context.Background()
	const db = "secured"
	admin := sc.store(t, db, sc.adminPEM)

	t.Run("AdminClient", func(t *testing.T) {
		if err := admin.CreateDatabase(ctx, db); err != nil {
			t.Fatal(err)
		}
		sc.waitDB(t, db)
		o, err := saveOrder(ctx, admin, "", "hilo")
		if err != nil {
			t.Fatal(err)
		}
		got, err := loadOrder(ctx, admin, o.ID)
		if err != nil || got == nil || got.Token != "hilo" {
			t.Fatalf("load %s: %+v %v", o.ID, got, err)
		}
		names, err := admin.GetDatabaseNames(ctx, 0, 100)
		if err != nil || !strings.Contains(strings.Join(names, ","), db) {
			t.Fatalf("databases %v %v", names, err)
		}
		for _, n := range admin.RequestExecutor().Topology().Nodes {
			if sc.byTag[n.ClusterTag] == nil || n.URL != sc.byTag[n.ClusterTag].url {
				t.Errorf("topology node %+v", n)
			}
		}
	})

	t.Run("Replication", func(t *testing.T) {
		onA := sc.store(t, db, sc.adminPEM, sc.byTag["A"].url)
		if _, err := saveOrder(ctx, onA, "orders/written-on-a", "from-a"); err != nil {
			t.Fatal(err)
		}
		for _, tag := range []string{"C", "B"} {
			on := sc.store(t, db, sc.adminPEM, sc.byTag[tag].url)
			eventually(t, 10*time.Second, "orders/written-on-a on "+tag, func() (bool, string) {
				o, err := loadOrder(ctx, on, "orders/written-on-a")
				return err == nil && o != nil && o.Token == "from-a", fmt.Sprintf("%+v %v", o, err)
			})
		}
	})

	t.Run("Subscription", func(t *testing.T) {
		name, err := admin.Subscriptions().Create(ctx, client.SubscriptionOptions{Name: "tls-orders", Query: "from Orders"})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{}
		for i := range 20 {
			o, err := saveOrder(ctx, admin, "", fmt.Sprintf("sub-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			want[o.ID] = true
		}
		got := runWorker(t, admin, name)
		for id := range want {
			if !got[id] {
				t.Errorf("the worker did not get %s", id)
			}
		}
		if !got["orders/written-on-a"] {
			t.Error("the worker did not get the document written before the subscription")
		}

		stranger, _ := sc.issue(t, "stranger")
		w := sc.store(t, db, stranger).Subscriptions().GetWorker(client.WorkerOptions{Name: name, RetryDelay: 10 * time.Millisecond})
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := w.Run(wctx, func(context.Context, *client.Batch) error { return nil }); !errors.Is(err, client.ErrAuthorization) {
			t.Fatalf("worker with an unregistered certificate: %v", err)
		}
	})

	t.Run("Refusals", func(t *testing.T) {
		// Anonymous callers: whoami answers null, everything else is
		// RavenDB's 403 with the InvalidAuth envelope.
		anon := tlsHTTPClient(t, sc.caPEM, "", 5*time.Second)
		a := sc.byTag["A"]
		if st, b, err := callWith(anon, "GET", a.url+"/certificates/whoami", ""); err != nil || st != 200 || strings.TrimSpace(string(b)) != "null" {
			t.Errorf("anonymous whoami: %d %v %s", st, err, b)
		}
		st, b, err := callWith(anon, "GET", a.url+"/databases/"+db+"/docs?id=orders/written-on-a", "")
		var env envelope
		_ = json.Unmarshal(b, &env)
		if err != nil || st != http.StatusForbidden || env.Type != "InvalidAuth" || env.Message == "" {
			t.Errorf("anonymous load: %d %v %s", st, err, b)
		}

		stranger, _ := sc.issue(t, "stranger2")
		foreignDir := filepath.Join(t.TempDir(), "foreign")
		if out, err := exec.Command(binary, "setup", "--hosts", "127.0.0.1", "--out", foreignDir).CombinedOutput(); err != nil {
			t.Fatalf("foreign setup: %v\n%s", err, out)
		}
		for _, c := range []struct{ what, pem string }{
			{"no certificate", ""},
			{"a certificate of the cluster's CA nobody registered", stranger},
			{"an admin certificate of another CA", filepath.Join(foreignDir, "admin.pem")},
		} {
			s := sc.store(t, db, c.pem)
			_, err := loadOrder(ctx, s, "orders/written-on-a")
			var ae *client.AuthorizationError
			if !errors.Is(err, client.ErrAuthorization) || !errors.As(err, &ae) || ae.StatusCode != http.StatusForbidden || ae.NoCertificate != (c.pem == "") {
				t.Errorf("%s: load gave %v", c.what, err)
			}
			if _, err := saveOrder(ctx, s, "", "refused"); !errors.Is(err, client.ErrAuthorization) {
				t.Errorf("%s: save gave %v", c.what, err)
			}
		}
	})

	t.Run("ReadOnly", func(t *testing.T) {
		readerPEM, readerTP := sc.issue(t, "reader")
		body := fmt.Sprintf(`{"Name":"reader","Certificate":%q,"SecurityClearance":"ValidUser","Permissions":{%q:"Read"}}`, readCertBase64(t, readerPEM), db)
		if st, b, err := callWith(sc.admin, "PUT", sc.byTag["B"].url+"/admin/certificates", body); err != nil || st != http.StatusNoContent {
			t.Fatalf("register reader: %d %v %s", st, err, b)
		}
		eventually(t, 10*time.Second, "A lists the reader", func() (bool, string) {
			var list struct {
				Results []struct{ Thumbprint, SecurityClearance string }
			}
			if err := getJSONWith(sc.admin, sc.byTag["A"].url+"/admin/certificates", &list); err != nil {
				return false, err.Error()
			}
			for _, c := range list.Results {
				if c.Thumbprint == readerTP {
					return c.SecurityClearance == "ValidUser", fmt.Sprintf("%+v", c)
				}
			}
			return false, fmt.Sprintf("%+v", list.Results)
		})
		// The registration is a Raft write: each node has it once it
		// applied it.
		for _, n := range sc.nodes {
			on := sc.store(t, db, readerPEM, n.url)
			eventually(t, 10*time.Second, "the reader loads on "+n.name, func() (bool, string) {
				o, err := loadOrder(ctx, on, "orders/written-on-a")
				return err == nil && o != nil && o.Token == "from-a", fmt.Sprintf("%+v %v", o, err)
			})
			if _, err := saveOrder(ctx, on, "orders/by-reader", "nope"); !errors.Is(err, client.ErrAuthorization) {
				t.Errorf("reader save on %s: %v", n.name, err)
			}
			if _, err := on.NextIdentity(ctx, "orders"); !errors.Is(err, client.ErrAuthorization) {
				t.Errorf("reader identity on %s: %v", n.name, err)
			}
		}
		reader := tlsHTTPClient(t, sc.caPEM, readerPEM, 5*time.Second)
		var who struct {
			Thumbprint, SecurityClearance string
			Permissions                   map[string]string
		}
		if err := getJSONWith(reader, sc.byTag["C"].url+"/certificates/whoami", &who); err != nil {
			t.Fatal(err)
		}
		if who.Thumbprint != readerTP || who.SecurityClearance != "ValidUser" || who.Permissions[db] != "Read" {
			t.Errorf("reader whoami %+v", who)
		}
		// Read access is enough to consume a subscription.
		got := runWorker(t, sc.store(t, db, readerPEM), "tls-orders-reader", admin)
		if !got["orders/written-on-a"] {
			t.Errorf("the reader's worker got %d documents, not orders/written-on-a", len(got))
		}
	})

	t.Run("IdentityFailover", func(t *testing.T) {
		identityFailover(t, sc, db)
	})
	t.Logf("whole secured test: %s", time.Since(began).Round(time.Millisecond))
}

// readCertBase64 is the base64 DER of the certificate in a cert+key file.
func readCertBase64(t *testing.T, pemFile string) string {
	t.Helper()
	cert, err := client.LoadCertificate(pemFile)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(cert.Certificate[0])
}

// runWorker consumes subscription name (created by creator first, from
// Orders, when given) with CloseWhenNoDocsLeft and returns the ids it got.
func runWorker(t *testing.T, s *client.DocumentStore, name string, creator ...*client.DocumentStore) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(creator) > 0 {
		if _, err := creator[0].Subscriptions().Create(ctx, client.SubscriptionOptions{Name: name, Query: "from Orders"}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	w := s.Subscriptions().GetWorker(client.WorkerOptions{Name: name, CloseWhenNoDocsLeft: true, RetryDelay: 100 * time.Millisecond})
	if err := w.Run(ctx, func(_ context.Context, b *client.Batch) error {
		for _, it := range b.Items {
			got[it.ID] = true
		}
		return nil
	}); err != nil {
		t.Fatalf("worker on %s: %v", name, err)
	}
	return got
}

// identityFailover mirrors TestClusterIdentitiesUniqueThroughLeaderKill
// over TLS, through the Go client: writers take identities (orders|) with
// a store on all three URLs while the leader is killed with SIGKILL and
// restarted. The client fails over; no identity is given twice; every
// acknowledged document is on every node afterwards, the restarted one
// included.
func identityFailover(t *testing.T, sc *securedCluster, db string) {
	store := sc.store(t, db, sc.adminPEM)
	type ack struct {
		id, token string
		afterKill bool
	}
	var (
		mu       sync.Mutex
		acks     []ack
		failures = map[string]int{}
		killed   atomic.Bool
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	const writers = 4
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for op := 0; ; op++ {
				select {
				case <-stop:
					return
				default:
				}
				after := killed.Load()
				tok := fmt.Sprintf("w%d-%d", w, op)
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				o, err := saveOrder(ctx, store, "orders|", tok)
				cancel()
				if err != nil {
					key := "unavailable"
					var se *client.ServerError
					switch {
					case errors.Is(err, client.ErrAuthorization):
						key = "authorization: " + err.Error()
					case errors.As(err, &se) && se.StatusCode < 500:
						key = fmt.Sprintf("%d %s", se.StatusCode, se.Message)
					}
					mu.Lock()
					failures[key]++
					mu.Unlock()
					time.Sleep(50 * time.Millisecond)
					continue
				}
				mu.Lock()
				acks = append(acks, ack{id: o.ID, token: tok, afterKill: after})
				mu.Unlock()
			}
		}()
	}

	time.Sleep(time.Second)
	old := sc.leader(t)
	preferred := store.RequestExecutor().Topology().Nodes[0].ClusterTag
	failoversBefore := store.RequestExecutor().FailoverCount()
	killed.Store(true)
	old.kill9()
	survivors := sc.others(old)
	killAt := time.Now()
	eventually(t, 20*time.Second, "survivors elect a new leader", func() (bool, string) {
		var leaders []string
		for _, n := range survivors {
			ct, err := n.topology()
			if err != nil {
				return false, n.name + ": " + err.Error()
			}
			leaders = append(leaders, ct.Leader)
		}
		return leaders[0] == leaders[1] && leaders[0] != "" && leaders[0] != old.name, fmt.Sprintf("leaders %v", leaders)
	})
	t.Logf("leader %s killed; a new one elected in %s", old.name, time.Since(killAt).Round(time.Millisecond))
	eventually(t, 20*time.Second, "identities acknowledged after the kill", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, a := range acks {
			if a.afterKill {
				n++
			}
		}
		return n >= 10, fmt.Sprintf("%d after the kill; failures %v", n, failures)
	})
	old.start(t)
	sc.leader(t) // the three agree again
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d identities acknowledged; failures: %v", len(acks), failures)
	for k, c := range failures {
		if k != "unavailable" {
			t.Errorf("unexpected failure (%d times): %s", c, k)
		}
	}
	seen := map[string]string{}
	afterKill := 0
	for _, a := range acks {
		if identityNumber("orders", a.id) < 0 {
			t.Errorf("acknowledged id %q is not orders/N", a.id)
		}
		if prev, dup := seen[a.id]; dup {
			t.Errorf("identity %s given twice: %s and %s", a.id, prev, a.token)
		}
		seen[a.id] = a.token
		if a.afterKill {
			afterKill++
		}
	}
	if afterKill == 0 {
		t.Fatal("no identity acknowledged after the kill")
	}
	failovers := store.RequestExecutor().FailoverCount() - failoversBefore
	t.Logf("%d identities after the kill; the writers' store preferred %s, failed over %d times", afterKill, preferred, failovers)
	if preferred == old.name && failovers == 0 {
		t.Errorf("the store was writing to %s, which was killed, yet never failed over", old.name)
	}

	// Every acknowledged document is on every node with its writer's
	// token, the restarted node included (replication over TLS caught it
	// up).
	for _, n := range sc.nodes {
		on := sc.store(t, db, sc.adminPEM, n.url)
		ids := make([]string, len(acks))
		for i, a := range acks {
			ids[i] = a.id
		}
		eventually(t, 20*time.Second, "acknowledged identities on "+n.name, func() (bool, string) {
			got, err := client.LoadMany[Order](on.OpenSession(), ids...)
			if err != nil {
				return false, err.Error()
			}
			missing, why := 0, ""
			for _, a := range acks {
				if o := got[a.id]; o == nil || o.Token != a.token {
					missing++
					why = fmt.Sprintf("%s: %+v", a.id, o)
				}
			}
			return missing == 0, fmt.Sprintf("%d of %d missing or wrong, e.g. %s", missing, len(acks), why)
		})
	}
	o, err := saveOrder(context.Background(), sc.store(t, db, sc.adminPEM, old.url), "orders|", "after-restart")
	if err != nil {
		t.Fatalf("identity through the restarted %s: %v", old.name, err)
	}
	if _, dup := seen[o.ID]; dup || identityNumber("orders", o.ID) < 0 {
		t.Fatalf("after the restart %s gave %s", old.name, o.ID)
	}
}
