package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/rookerydb/rookery/backend/pki"
	"github.com/rookerydb/rookery/web"
)

// The tls section measures what TLS costs, each figure against the same
// thing without TLS in the same run:
//
//   - HTTP bulk insert (the bulk section's documents and 4 clients) on a
//     secured node and on an unsecured one, in interleaved rounds whose
//     order alternates, with connection reuse on both sides (one
//     http.Transport setup, only TLSClientConfig differs); the ratio is per
//     round, so a slow spell of the shared machine hits both;
//   - replication lag on a secured and an unsecured 3-node cluster (both
//     running, measured in alternating rounds);
//   - new connections per second: plain TCP, a full TLS handshake with a
//     client certificate, a resumed one, each carrying one small request,
//     against the same request on a kept-alive connection.
//
// The certificates are what `studio setup` makes (backend/pki.Setup): the
// node's ECDSA P-256, the admin client's RSA-2048, the admin well known.

// tlsCerts are the certificates of the secured nodes and their client. A
// nil *tlsCerts is "unsecured" for the helpers below.
type tlsCerts struct {
	setup  *pki.SetupResult
	admin  tls.Certificate
	caPool *x509.CertPool
}

func makeTLSCerts(dir string) (*tlsCerts, error) {
	res, err := pki.Setup(dir, pki.SetupOptions{Hosts: []string{"127.0.0.1", "localhost"}})
	if err != nil {
		return nil, err
	}
	admin, err := tls.LoadX509KeyPair(res.Admin.PEM, res.Admin.PEM)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(res.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s holds no certificate", res.CA)
	}
	return &tlsCerts{setup: res, admin: admin, caPool: pool}, nil
}

// secure adds the node certificate, the CA and the well-known admin to cfg.
func (t *tlsCerts) secure(cfg web.Config) web.Config {
	if t != nil {
		cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = t.setup.NodeCert, t.setup.NodeKey, t.setup.CA
		cfg.WellKnownAdminCerts = []string{t.setup.Admin.Thumbprint}
	}
	return cfg
}

func (t *tlsCerts) scheme() string {
	if t == nil {
		return "http"
	}
	return "https"
}

// clientConfig presents the admin certificate and trusts the cluster's CA
// (the node certificate names 127.0.0.1, so the host name is checked too).
func (t *tlsCerts) clientConfig() *tls.Config {
	if t == nil {
		return nil
	}
	return &tls.Config{Certificates: []tls.Certificate{t.admin}, RootCAs: t.caPool, MinVersion: tls.VersionTLS12}
}

// benchClient is an HTTP client that counts the connections it opens.
type benchClient struct {
	hc    *http.Client
	tr    *http.Transport
	dials atomic.Int64
}

// newBenchClient makes the client of both sides of a comparison: the same
// transport (HTTP/1.1, keep-alive, 64 idle connections per host) with or
// without TLS. tune, when not nil, changes the transport further.
func newBenchClient(tlsCfg *tls.Config, tune func(*http.Transport)) *benchClient {
	bc := &benchClient{}
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	bc.tr = &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			bc.dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	if tune != nil {
		tune(bc.tr)
	}
	bc.hc = &http.Client{Transport: bc.tr}
	return bc
}

// startNode starts a single in-process node, secured when certs is not nil.
func startNode(dir string, certs *tlsCerts) (*benchNode, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv, err := web.New(certs.secure(web.Config{HTTPAddr: l.Addr().String(), RaftAddr: "127.0.0.1:0", DataDir: dir, NodeTag: "A",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 100 * time.Millisecond}))
	if err != nil {
		l.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() { _ = srv.Serve(l); close(done) }()
	return &benchNode{srv: srv, url: certs.scheme() + "://" + l.Addr().String(), stop: func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}}, nil
}

// tlsSection runs the whole tls section.
func tlsSection(out io.Writer, c config) error {
	dir := filepath.Join(c.dir, "tls")
	certs, err := makeTLSCerts(filepath.Join(dir, "certs"))
	if err != nil {
		return err
	}
	plainNode, err := startNode(filepath.Join(dir, "plain"), nil)
	if err != nil {
		return err
	}
	defer plainNode.stop()
	tlsNode, err := startNode(filepath.Join(dir, "secured"), certs)
	if err != nil {
		return err
	}
	defer tlsNode.stop()
	if err := describeTLS(out, certs, tlsNode.url); err != nil {
		return err
	}
	if c.tlsDocs > 0 && c.tlsRounds > 0 {
		if err := tlsBulk(out, c, certs, plainNode, tlsNode); err != nil {
			return err
		}
	}
	if c.handshakes > 0 {
		if err := tlsConnections(out, c.handshakes, certs, plainNode, tlsNode); err != nil {
			return err
		}
	}
	if c.lagRate > 0 && c.lagFor > 0 {
		if err := tlsLag(out, c, certs, dir); err != nil {
			return err
		}
	}
	return nil
}

// describeTLS says what was negotiated: version, cipher suite, key
// exchange, and the key types of both certificates.
func describeTLS(out io.Writer, certs *tlsCerts, url string) error {
	bc := newBenchClient(certs.clientConfig(), nil)
	resp, err := bc.hc.Get(url + "/certificates/whoami")
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		return fmt.Errorf("whoami over TLS: %d %.200s", resp.StatusCode, body)
	}
	var who struct{ Name, SecurityClearance string }
	if err := json.Unmarshal(body, &who); err != nil || who.SecurityClearance != "ClusterAdmin" {
		return fmt.Errorf("whoami over TLS: the admin certificate is not a ClusterAdmin: %.200s", body)
	}
	st := resp.TLS
	adminLeaf, err := x509.ParseCertificate(certs.admin.Certificate[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "negotiated: %s, %s, %s, key exchange %s; node certificate %s, client certificate %s (identified as %s, %s)\n",
		resp.Proto, tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite), st.CurveID, keyType(st.PeerCertificates[0].PublicKey), keyType(adminLeaf.PublicKey),
		who.Name, who.SecurityClearance)
	return nil
}

func keyType(k any) string {
	switch k := k.(type) {
	case *ecdsa.PublicKey:
		return "ECDSA " + k.Curve.Params().Name
	case *rsa.PublicKey:
		return fmt.Sprintf("RSA-%d", k.N.BitLen())
	}
	return fmt.Sprintf("%T", k)
}

// tlsBulk compares bulk inserts over TLS and plain HTTP, round by round.
func tlsBulk(out io.Writer, c config, certs *tlsCerts, plainNode, tlsNode *benchNode) error {
	const clients = 4
	docs := makeDocs(c.tlsDocs)
	bodies := bulkBodies(docs, c.batch)
	fmt.Fprintf(out, "bulk insert: %d documents of ~%d bytes per round and side, %d per request, %d clients, %d interleaved rounds (order alternates)\n", len(docs), len(docs[0].body), c.batch, clients, c.tlsRounds)
	plainClient := newBenchClient(nil, nil)
	tlsClient := newBenchClient(certs.clientConfig(), nil)
	type side struct {
		name   string
		node   *benchNode
		client *benchClient
		rates  []float64
		cpu    []float64 // µs of CPU (client and node: one process) per document
	}
	plain := &side{name: "plain", node: plainNode, client: plainClient}
	secured := &side{name: "TLS", node: tlsNode, client: tlsClient}
	// Open the connections first (a TLS handshake costs milliseconds of
	// CPU): the rounds measure requests, not handshakes.
	for _, s := range []*side{plain, secured} {
		if err := warm(s.client.hc, s.node.url, clients); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	warmDials := map[*side]int64{plain: plainClient.dials.Load(), secured: tlsClient.dials.Load()}
	var ratios, cpuRatios []float64
	for r := 0; r < c.tlsRounds; r++ {
		order := []*side{plain, secured}
		if r%2 == 1 {
			order = []*side{secured, plain}
		}
		for _, s := range order {
			db := fmt.Sprintf("tlsbulk%d", r)
			if err := createDBWith(s.client.hc, s.node.url, db); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			cpu0 := cpuTime()
			rate, err := postBodies(s.client.hc, s.node.url, db, bodies, clients, len(docs))
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			s.cpu = append(s.cpu, float64((cpuTime()-cpu0).Microseconds())/float64(len(docs)))
			s.rates = append(s.rates, rate)
		}
		ratio := secured.rates[r] / plain.rates[r]
		cpuRatio := secured.cpu[r] / plain.cpu[r]
		ratios, cpuRatios = append(ratios, ratio), append(cpuRatios, cpuRatio)
		fmt.Fprintf(out, "round %d (%s first): plain %6.0f, TLS %6.0f docs/s (%.2fx); CPU per document plain %.1f µs, TLS %.1f µs\n",
			r+1, order[0].name, plain.rates[r], secured.rates[r], ratio, plain.cpu[r], secured.cpu[r])
	}
	for _, s := range []*side{plain, secured} {
		fmt.Fprintf(out, "HTTP bulk_docs, %d clients, %-6s %8.0f docs/s (median; rounds %.0f-%.0f); connections opened: %d before the rounds, %d during them\n",
			clients, s.name+":", median(s.rates), minOf(s.rates), maxOf(s.rates), warmDials[s], s.client.dials.Load()-warmDials[s])
	}
	fmt.Fprintf(out, "TLS / plain throughput: %.2fx (median; rounds %.2f-%.2f; target >= 0.85x)\n", median(ratios), minOf(ratios), maxOf(ratios))
	fmt.Fprintf(out, "TLS / plain CPU per document (client and node, one process): %.2fx (median; rounds %.2f-%.2f)\n", median(cpuRatios), minOf(cpuRatios), maxOf(cpuRatios))
	return nil
}

// tlsConnections measures new connections per second, each carrying one
// GET /build/version, from 4 goroutines: plain TCP, a full TLS handshake
// with the client certificate (no session cache), a resumed TLS session
// (session tickets), and, as the baselines, the same request on kept-alive
// TLS and plain connections. The kinds take turns in connSlices slices
// (the order rotating), so the machine's other load hits them alike.
func tlsConnections(out io.Writer, n int, certs *tlsCerts, plainNode, tlsNode *benchNode) error {
	const workers, connSlices = 4, 5
	noKeepAlive := func(tr *http.Transport) { tr.DisableKeepAlives = true }
	resumable := certs.clientConfig()
	resumable.ClientSessionCache = tls.NewLRUClientSessionCache(64)
	type kind struct {
		name    string
		url     string
		client  *benchClient
		resume  bool
		reqs    int
		elapsed time.Duration
		cpu     time.Duration
		dials   int64
		resumed atomic.Int64
	}
	kinds := []*kind{
		{name: "kept-alive plain connection", url: plainNode.url, client: newBenchClient(nil, nil)},
		{name: "kept-alive TLS connection", url: tlsNode.url, client: newBenchClient(certs.clientConfig(), nil)},
		{name: "new plain TCP connection each", url: plainNode.url, client: newBenchClient(nil, noKeepAlive)},
		{name: "new TLS connection, full handshake", url: tlsNode.url, client: newBenchClient(certs.clientConfig(), noKeepAlive)},
		{name: "new TLS connection, resumed session", url: tlsNode.url, client: newBenchClient(resumable, noKeepAlive), resume: true},
	}
	for _, k := range kinds {
		// Uncounted: the kept-alive kinds open their connections, the
		// resumed kind gets a ticket to resume.
		if err := warm(k.client.hc, k.url, workers); err != nil {
			return fmt.Errorf("%s: %w", k.name, err)
		}
	}
	fmt.Fprintf(out, "connections: %d requests (GET /build/version) per line from %d goroutines, the lines taking turns in %d slices; CPU is the whole process (client and node)\n", n, workers, connSlices)
	for slice := 0; slice < connSlices; slice++ {
		per := n/connSlices + boolInt(slice < n%connSlices)
		for i := range kinds {
			k := kinds[(i+slice)%len(kinds)]
			dials0, cpu0 := k.client.dials.Load(), cpuTime()
			var next atomic.Int64
			elapsed, err := parallel(workers, func() error {
				for next.Add(1) <= int64(per) {
					if err := getOK(k.client.hc, k.url+"/build/version", &k.resumed); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s: %w", k.name, err)
			}
			k.cpu += cpuTime() - cpu0
			k.elapsed += elapsed
			k.dials += k.client.dials.Load() - dials0
			k.reqs += per
		}
	}
	cpu := func(k *kind) float64 { return float64(k.cpu.Microseconds()) / float64(k.reqs) }
	for _, k := range kinds {
		extra := ""
		if k.resume {
			extra = fmt.Sprintf(", %d of %d resumed", k.resumed.Load(), k.reqs)
		}
		fmt.Fprintf(out, "%-40s %8.0f requests/s  %6.0f µs CPU each  (%d connections opened%s)\n", k.name+":", float64(k.reqs)/k.elapsed.Seconds(), cpu(k), k.dials, extra)
	}
	plainKept, tlsKept, full, resumed := kinds[0], kinds[1], kinds[3], kinds[4]
	fmt.Fprintf(out, "a new TLS connection costs ~%.0f µs of CPU (client and node) with a full handshake, ~%.0f µs resumed, over a request on a kept-alive TLS connection; a small request on a kept-alive connection: TLS / plain %.2fx requests/s, %.2fx CPU\n",
		cpu(full)-cpu(tlsKept), cpu(resumed)-cpu(tlsKept), plainKept.elapsed.Seconds()/tlsKept.elapsed.Seconds(), cpu(tlsKept)/cpu(plainKept))
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// warm sends 4*workers small requests from `workers` goroutines, which
// leaves a kept-alive client with at least as many open connections as
// goroutines.
func warm(hc *http.Client, url string, workers int) error {
	var next atomic.Int64
	_, err := parallel(workers, func() error {
		for next.Add(1) <= int64(4*workers) {
			if err := getOK(hc, url+"/build/version", nil); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}

// getOK GETs url and checks the 200; resumed counts TLS sessions that were
// resumed.
func getOK(hc *http.Client, url string, resumed *atomic.Int64) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	if resumed != nil && resp.TLS != nil && resp.TLS.DidResume {
		resumed.Add(1)
	}
	return nil
}

// tlsLag measures replication lag on a secured and an unsecured cluster,
// alternating rounds between them.
func tlsLag(out io.Writer, c config, certs *tlsCerts, dir string) error {
	plain, err := startLagCluster(filepath.Join(dir, "lag-plain"), nil)
	if err != nil {
		return err
	}
	defer plain.stop()
	secured, err := startLagCluster(filepath.Join(dir, "lag-tls"), certs)
	if err != nil {
		return err
	}
	defer secured.stop()
	fmt.Fprintf(out, "replication lag: 3 nodes, single-document PUTs at %d/s for %s per round, %d rounds alternating between a plain and a TLS cluster (both running)\n", c.lagRate, c.lagFor, c.rounds)
	type side struct {
		name       string
		lc         *lagCluster
		acks, lags []time.Duration
		p99        []time.Duration
		achieved   []float64
		cpu        []float64
		dials      int64
	}
	sides := []*side{{name: "plain", lc: plain}, {name: "TLS", lc: secured}}
	var p99Ratios []float64
	for r := 0; r < c.rounds; r++ {
		order := []*side{sides[0], sides[1]}
		if r%2 == 1 {
			order = []*side{sides[1], sides[0]}
		}
		for _, s := range order {
			res, err := s.lc.measure(fmt.Sprintf("lag/%d/", r), c.lagRate, c.lagFor)
			if err != nil {
				return fmt.Errorf("%s cluster: %w", s.name, err)
			}
			s.acks, s.lags = append(s.acks, res.acks...), append(s.lags, res.lags...)
			s.p99 = append(s.p99, percentile(res.lags, 0.99))
			s.achieved = append(s.achieved, res.achieved)
			s.cpu = append(s.cpu, res.cpuPerOp)
			s.dials += res.dials
		}
		ratio := float64(sides[1].p99[r]) / float64(max(sides[0].p99[r], 1))
		p99Ratios = append(p99Ratios, ratio)
		fmt.Fprintf(out, "round %d (%s first): lag p99 plain %s, TLS %s (%.2fx); writes issued plain %.0f/s, TLS %.0f/s; CPU per write plain %.0f µs, TLS %.0f µs\n",
			r+1, order[0].name, ms(sides[0].p99[r]), ms(sides[1].p99[r]), ratio, sides[0].achieved[r], sides[1].achieved[r], sides[0].cpu[r], sides[1].cpu[r])
	}
	for _, s := range sides {
		sortDurations(s.acks)
		sortDurations(s.lags)
		fmt.Fprintf(out, "%-5s cluster: write ack p50 %s  p99 %s; replication lag p50 %s  p99 %s  max %s; CPU per write %.0f µs (3 nodes and the client; median of rounds); %d connections opened during the rounds\n",
			s.name, ms(percentile(s.acks, 0.5)), ms(percentile(s.acks, 0.99)), ms(percentile(s.lags, 0.5)), ms(percentile(s.lags, 0.99)), ms(s.lags[len(s.lags)-1]), median(s.cpu), s.dials)
	}
	pl, tl := sides[0], sides[1]
	ratio := func(t, p time.Duration) float64 { return float64(t) / float64(max(p, 1)) }
	fmt.Fprintf(out, "TLS / plain replication lag: p50 %.2fx, p99 %.2fx (all rounds pooled; per-round p99 ratio %.2f-%.2f); write ack p50 %.2fx, p99 %.2fx\n",
		ratio(percentile(tl.lags, 0.5), percentile(pl.lags, 0.5)), ratio(percentile(tl.lags, 0.99), percentile(pl.lags, 0.99)), minOf(p99Ratios), maxOf(p99Ratios),
		ratio(percentile(tl.acks, 0.5), percentile(pl.acks, 0.5)), ratio(percentile(tl.acks, 0.99), percentile(pl.acks, 0.99)))
	return nil
}
