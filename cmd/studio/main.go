// Command studio runs a Rookery node: the RavenDB-compatible API and the
// management studio, over one SQLite file per database.
//
//	studio [serve] [--http ADDR] [--data-dir DIR] [--node-tag TAG] [--public-url URL] [--log-level LEVEL] [--log-format text|json]
//	studio setup --hosts HOST[:PORT],... --out DIR     (certificates of a secured cluster; see setup.go)
//	studio setup client --dir DIR --name NAME          (one more client certificate from that CA)
//
// Every flag is mirrored by an environment variable: --http is ROOKERY_HTTP,
// --data-dir is ROOKERY_DATA_DIR, and so on. A flag given on the command line
// wins over the environment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rookerydb/rookery/backend/changes"
	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/conflicts"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/history"
	"github.com/rookerydb/rookery/backend/patch"
	"github.com/rookerydb/rookery/backend/rql"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/handlers/api"
	"github.com/rookerydb/rookery/handlers/studio"
	"github.com/rookerydb/rookery/web"
)

func main() {
	followGoRun()
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "studio:", err)
		os.Exit(1)
	}
}

type options struct {
	httpAddr, dataDir, nodeTag, publicURL, logLevel, logFormat string
	raftAddr, join, replicationPeers, integrityCheck, dumpDir  string
	replication                                                bool
	shutdownTimeout                                            time.Duration
	// Security.
	tlsCert, tlsKey, tlsCA, wellKnownAdmins, unsecuredAccess, allowedHosts string
	// Parser limits (web.Config's Max… fields).
	maxQueryLength, maxQueryDepth, maxJSONDepth                     int
	maxChangeVectorLength, maxChangeVectorEntries, maxWorkerMessage int
	// Limits (README "Limits"); see web.Config.
	maxConnections, minDataRate, maxLivePages  int
	maxRequestBody, maxDocumentSize, maxImport byteSize
	maxAttachment                              byteSize
	maxCmpXchgValue                            byteSize
	minDataRateGrace                           time.Duration
	indexCleanupInterval                       time.Duration
	attachmentsCollectAfter                    time.Duration
	// The studio's chart history (web.Config's History… fields).
	historyRetention, historyInterval time.Duration
	historyMaxSeries                  int
	// Alert thresholds (web.Config's Alert… fields).
	alertNodeUnreachable, alertReplicationError, alertReplicationLag time.Duration
	alertIndexStale, alertLeaderWindow                               time.Duration
	alertElections, alertCertificateDays, maxAlerts                  int
	maxDocReferences                                                 int
	patchTimeLimit                                                   time.Duration
	conflictScriptTimeLimit                                          time.Duration
	maxMultiGet                                                      int
	// The Changes API (web.Config's Changes… fields).
	changesMaxPending    int
	changesFrameBudget   int
	changesFrameInterval time.Duration
	// tagSet: --node-tag (or ROOKERY_NODE_TAG) was given explicitly.
	tagSet bool
}

// envName is the environment variable that mirrors a flag.
func envName(flagName string) string {
	return "ROOKERY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func parse(args []string, stderr io.Writer) (options, error) {
	if len(args) > 0 && args[0] == "serve" {
		args = args[1:]
	} else if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return options{}, fmt.Errorf("unknown command %q (the commands are: serve, setup, cluster recover)", args[0])
	}
	var o options
	fs := flag.NewFlagSet("studio serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.httpAddr, "http", "127.0.0.1:8080", "HTTP listen address for the API and the studio")
	fs.StringVar(&o.dataDir, "data-dir", "./data", "directory holding the databases")
	fs.StringVar(&o.nodeTag, "node-tag", "A", "this node's tag: 1 to 4 upper-case letters")
	fs.StringVar(&o.publicURL, "public-url", "", "URL clients should use for this node (default: http(s)://<http address>)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long in-flight requests may take to finish on SIGINT/SIGTERM")
	fs.StringVar(&o.raftAddr, "raft-addr", "", "Raft transport address (default: the --http host with port+1000)")
	fs.BoolVar(&o.replication, "replication", true, "replicate documents between the members of each database (--replication=false keeps each node's copy to itself)")
	fs.StringVar(&o.replicationPeers, "replication-peers", "", "override the URL replication dials for some nodes, as TAG=URL,TAG=URL (for NAT, proxies and fault-injection tests)")
	fs.StringVar(&o.integrityCheck, "integrity-check", "quick", "check each database file when it is opened: quick (SQLite's quick_check), full (integrity_check, also index contents; slower) or off; a damaged database is not served, the others are")
	fs.StringVar(&o.join, "join", "", "URL of a member of an existing cluster to join (without it a fresh node bootstraps a one-node cluster)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate of this node: serve HTTPS, identify clients by certificate, run Raft and replication over mutual TLS (studio setup makes one)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "PEM CA of the cluster: certificates it issued with the cluster-node mark are nodes")
	fs.StringVar(&o.wellKnownAdmins, "well-known-admin-certs", "", "comma-separated certificate thumbprints, or certificate files, that are ClusterAdmin without being registered")
	fs.StringVar(&o.unsecuredAccess, "unsecured-access-allowed", "Local", "without TLS, where the node may listen and be called from: None, Local, PrivateNetwork, PublicNetwork (comma-combined)")
	fs.StringVar(&o.allowedHosts, "allowed-hosts", "", "comma-separated extra Host names (host or host:port) the node answers to, besides its URL and listen address (DNS-rebinding protection)")
	fs.IntVar(&o.maxQueryLength, "max-query-length", rql.DefaultMaxLength, "longest RQL query accepted, in bytes (subscriptions and their test query)")
	fs.IntVar(&o.maxQueryDepth, "max-query-depth", rql.DefaultMaxDepth, "deepest nesting of an RQL where clause (parentheses, not, exact(), boost())")
	fs.IntVar(&o.maxJSONDepth, "max-json-depth", document.DefaultMaxDepth, fmt.Sprintf("deepest nesting of a document (the document is level 1) and of a subscription worker's messages, %d to %d", document.MinMaxDepth, document.HardMaxDepth))
	fs.IntVar(&o.maxChangeVectorLength, "max-change-vector-length", changevector.DefaultMaxLength, "longest change vector accepted from a client or a replication peer, in bytes")
	fs.IntVar(&o.maxChangeVectorEntries, "max-change-vector-entries", changevector.DefaultMaxEntries, "most entries of a change vector accepted from a client or a replication peer")
	fs.IntVar(&o.maxWorkerMessage, "max-worker-message", web.DefaultMaxWorkerMessage, "largest message a subscription worker may send (header, options, acknowledgements), in bytes; a larger one closes the connection")
	o.maxRequestBody, o.maxDocumentSize, o.maxImport = web.DefaultMaxRequestBody, web.DefaultMaxDocumentSize, web.DefaultMaxImportSize
	fs.IntVar(&o.maxConnections, "max-connections", 0, "most open connections on the HTTP port, HTTP, websockets and subscription workers together (0: 3/4 of the open-file limit minus 256; -1: no cap)")
	fs.Var(&o.maxRequestBody, "max-request-body", "largest request body, e.g. 128MiB (-1: no limit)")
	fs.StringVar(&o.dumpDir, "dump-dir", "", "the only directory server-side imports and exports read and write (default <data-dir>/dumps)")
	fs.Var(&o.maxImport, "max-import-size", "largest dump one import request may send, e.g. 64GiB (-1: no limit)")
	o.maxAttachment = api.DefaultMaxAttachmentSize
	fs.Var(&o.maxAttachment, "max-attachment-size", "largest attachment a client may store, e.g. 4GiB; uploads are staged to a file beside the database, never held in memory (-1: no limit)")
	fs.Var(&o.maxDocumentSize, "max-document-size", "largest document a client may store, in bytes of its JSON, e.g. 32MiB (-1: no limit)")
	o.maxCmpXchgValue = 1 << 20
	fs.Var(&o.maxCmpXchgValue, "max-cmpxchg-value-size", "largest compare-exchange value, in bytes of its JSON, e.g. 1MiB (at most 3MiB: values live in the Raft log)")
	fs.IntVar(&o.minDataRate, "min-data-rate", web.DefaultMinDataRate, "slowest average rate, in bytes/s, at which a request body may arrive or a response be read, once --min-data-rate-grace has passed (-1: off)")
	fs.DurationVar(&o.minDataRateGrace, "min-data-rate-grace", web.DefaultMinDataRateGrace, "how long a body or a response write may go before --min-data-rate applies")
	fs.IntVar(&o.maxLivePages, "max-live-pages", web.DefaultMaxLivePages, "most studio pages kept live at once, one websocket each (-1: no cap)")
	fs.DurationVar(&o.conflictScriptTimeLimit, "conflict-script-time-limit", conflicts.DefaultTimeLimit, "time one run of a conflict resolution script may take (the script strategy, on arrival and in bulk); a script still running then fails and the conflict is kept (0: the default)")
	fs.DurationVar(&o.patchTimeLimit, "patch-time-limit", patch.DefaultTimeLimit, "time the JavaScript patch scripts of one request share (PATCH /docs, the PATCH commands of a batch); a script still running then fails the request and nothing of it is written (0: the default)")
	fs.IntVar(&o.maxMultiGet, "max-multi-get", web.DefaultMaxMultiGet, "most inner requests of one multi_get (the session's lazy operations; 0: the default)")
	fs.IntVar(&o.changesMaxPending, "changes-max-pending", changes.DefaultMaxPending, "most notifications queued for one Changes API websocket; a client that lets more pile up is dropped (close 1008, \"too slow\")")
	fs.IntVar(&o.changesFrameBudget, "changes-frame-budget", changes.DefaultFrameBudget, "frames a second a database's Changes API subscribers get together while changes keep coming; with more subscribers the frames are spaced further apart than --changes-frame-interval")
	fs.DurationVar(&o.changesFrameInterval, "changes-frame-interval", changes.DefaultFrameInterval, "shortest time between two frames of a database's Changes API notifications while they keep coming (the first after a quiet spell goes at once)")
	fs.IntVar(&o.maxDocReferences, "max-doc-references", studio.DefaultMaxDocReferences, "most distinct strings of a document the studio's document page checks for being ids of other documents, to link them (-1: none)")
	fs.DurationVar(&o.attachmentsCollectAfter, "attachments-collect-after", web.DefaultAttachmentsCollectAfter, "how long attachment content released through replication (a replicated delete, or a version without it) is kept before it is deleted when nothing refers to it or sent it again")
	fs.DurationVar(&o.indexCleanupInterval, "index-cleanup-interval", web.DefaultIndexCleanupInterval, "how often the leader applies the auto-index cleanup rules (Indexing.CleanupIntervalInMin)")
	fs.DurationVar(&o.historyRetention, "history-retention", history.DefaultRetention, "how far back the studio's charts go (writes/s, replication lag, subscription backlog), kept in memory")
	fs.DurationVar(&o.historyInterval, "history-interval", history.DefaultInterval, "time between two samples of the studio's charts (at least 1s)")
	fs.IntVar(&o.historyMaxSeries, "history-max-series", history.DefaultMaxSeries, "most chart series kept in memory (one per database, replication link and subscription); more are not charted")
	fs.DurationVar(&o.alertNodeUnreachable, "alert-node-unreachable", web.DefaultAlertNodeUnreachable, "raise an alert when another node has not answered for this long (and clear it when it answers)")
	fs.DurationVar(&o.alertReplicationError, "alert-replication-error", web.DefaultAlertReplicationError, "raise an alert when replication to a node that answers has failed for this long")
	fs.DurationVar(&o.alertReplicationLag, "alert-replication-lag", web.DefaultAlertReplicationLag, "raise an alert when the oldest change a connected replication destination has not acknowledged is this old")
	fs.DurationVar(&o.alertIndexStale, "alert-index-stale", web.DefaultAlertIndexStale, "raise an alert when an index has been stale for this long without a break")
	fs.DurationVar(&o.alertLeaderWindow, "alert-leader-window", web.DefaultAlertLeaderWindow, "a leader-change alert clears after this long without another leader change or election")
	fs.IntVar(&o.alertElections, "alert-elections", web.DefaultAlertElections, "this many leader changes or elections without a quiet --alert-leader-window between them make the leader alert a warning")
	fs.IntVar(&o.alertCertificateDays, "alert-certificate-days", web.DefaultAlertCertificateDays, "raise an alert for this node's certificate and registered client certificates that expire within this many days")
	fs.IntVar(&o.maxAlerts, "max-alerts", web.DefaultMaxAlerts, "most alerts a node keeps (in <data-dir>/alerts/alerts.json); past it the alert seen longest ago is dropped, dismissed and postponed ones first")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: studio [serve] [flags]\n       studio setup ... (certificates of a secured cluster: studio setup -h)\n\nEvery flag is mirrored by an environment variable (--data-dir is ROOKERY_DATA_DIR).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	// Environment first, so the command line wins.
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if f.Name == "node-tag" {
				o.tagSet = true
			}
			if err := f.Value.Set(v); err != nil && envErr == nil {
				envErr = fmt.Errorf("%s=%q: %v", envName(f.Name), v, err)
			}
		}
	})
	if envErr != nil {
		return o, envErr
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err := checkAlertFlags(o); err != nil {
		return o, err
	}
	if err := storage.CheckIntegrityMode(o.integrityCheck); err != nil {
		return o, fmt.Errorf("--integrity-check: %v", err)
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "node-tag" {
			o.tagSet = true
		}
	})
	return o, nil
}

func newLogger(o options, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %v", err)
	}
	hopts := &slog.HandlerOptions{Level: level}
	switch o.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, hopts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, hopts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, not %q", o.logFormat)
}

func run(args []string, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "setup" {
		return runSetup(args[1:], os.Stdout, stderr)
	}
	if len(args) > 0 && args[0] == "cluster" {
		return runCluster(args[1:], os.Stdout, stderr)
	}
	if len(args) > 0 && (args[0] == "export" || args[0] == "import") {
		return runSmuggle(args[0], args[1:], os.Stdout, stderr)
	}
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log, err := newLogger(o, stderr)
	if err != nil {
		return err
	}
	slog.SetDefault(log)
	peers, err := parsePeers(o.replicationPeers)
	if err != nil {
		return err
	}
	cfg := web.Config{HTTPAddr: o.httpAddr, DataDir: o.dataDir, NodeTag: o.nodeTag, PublicURL: o.publicURL, Logger: log, RaftAddr: o.raftAddr, Join: o.join, Replication: o.replication, ReplicationPeers: peers,
		TLSCert: o.tlsCert, TLSKey: o.tlsKey, TLSCA: o.tlsCA, WellKnownAdminCerts: splitList(o.wellKnownAdmins), UnsecuredAccessAllowed: o.unsecuredAccess, AllowedHosts: splitList(o.allowedHosts),
		IntegrityCheck: o.integrityCheck,
		MaxQueryLength: o.maxQueryLength, MaxQueryDepth: o.maxQueryDepth, MaxJSONDepth: o.maxJSONDepth,
		MaxChangeVectorLength: o.maxChangeVectorLength, MaxChangeVectorEntries: o.maxChangeVectorEntries, MaxWorkerMessage: o.maxWorkerMessage,
		MaxConnections: o.maxConnections, MaxRequestBody: int64(o.maxRequestBody), MaxDocumentSize: int64(o.maxDocumentSize), MaxImportSize: int64(o.maxImport), MaxAttachmentSize: int64(o.maxAttachment),
		MinDataRate: o.minDataRate, MinDataRateGrace: o.minDataRateGrace, MaxLivePages: o.maxLivePages, MaxDocReferences: o.maxDocReferences,
		PatchTimeLimit: o.patchTimeLimit, ConflictScriptTimeLimit: o.conflictScriptTimeLimit, MaxMultiGet: o.maxMultiGet,
		IndexCleanupInterval: o.indexCleanupInterval, AttachmentsCollectAfter: o.attachmentsCollectAfter, DumpDir: o.dumpDir, MaxCmpXchgValueSize: int64(o.maxCmpXchgValue),
		HistoryRetention: o.historyRetention, HistoryInterval: o.historyInterval, HistoryMaxSeries: o.historyMaxSeries,
		AlertNodeUnreachable: o.alertNodeUnreachable, AlertReplicationError: o.alertReplicationError, AlertReplicationLag: o.alertReplicationLag,
		AlertIndexStale: o.alertIndexStale, AlertLeaderWindow: o.alertLeaderWindow, AlertElections: o.alertElections,
		AlertCertificateDays: o.alertCertificateDays, MaxAlerts: o.maxAlerts,
		ChangesMaxPending: o.changesMaxPending, ChangesFrameInterval: o.changesFrameInterval, ChangesFrameBudget: o.changesFrameBudget}
	if err := resolveTag(&o, &cfg, log); err != nil {
		return err
	}
	srv, err := web.New(cfg)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", o.httpAddr)
	if err != nil {
		_ = srv.Close()
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(l) }()
	select {
	case err := <-serveErr:
		_ = srv.Close()
		return err
	case <-ctx.Done():
	}
	stop()
	log.Info("shutting down: finishing in-flight requests", "timeout", o.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-serveErr
	if err != nil {
		return err
	}
	log.Info("shut down cleanly")
	return nil
}

// resolveTag settles the node tag: an explicit --node-tag wins; otherwise
// the tag this data directory had before; otherwise, when joining, the one
// the cluster proposes; otherwise A. The tag is remembered in the data
// directory, since it names the node in the cluster for good; cfg gets it.
func resolveTag(o *options, cfg *web.Config, log *slog.Logger) error {
	file := tagFile(o.dataDir)
	saved, _ := savedTag(o.dataDir)
	switch {
	case o.tagSet:
		if saved != "" && saved != o.nodeTag {
			return fmt.Errorf("this data directory belongs to node %s; --node-tag %s does not match (use a fresh --data-dir for a new node)", saved, o.nodeTag)
		}
	case saved != "":
		o.nodeTag = saved
	case o.join != "":
		tag, err := web.ProposedTag(*cfg)
		if err != nil {
			return fmt.Errorf("asking %s for a node tag: %w", o.join, err)
		}
		o.nodeTag = tag
		log.Info("node tag assigned by the cluster", "node_tag", tag)
	}
	cfg.NodeTag = o.nodeTag
	if err := os.MkdirAll(o.dataDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, []byte(o.nodeTag+"\n"), 0o644)
}

// tagFile is where a data directory remembers its node's tag.
func tagFile(dataDir string) string { return filepath.Join(dataDir, "node-tag") }

// savedTag reads the tag a data directory belongs to.
func savedTag(dataDir string) (string, error) {
	b, err := os.ReadFile(tagFile(dataDir))
	return strings.TrimSpace(string(b)), err
}

// splitList reads a comma-separated flag.
func splitList(v string) []string {
	var out []string
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// parsePeers reads --replication-peers: TAG=URL pairs separated by commas.
func parsePeers(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		tag, u, ok := strings.Cut(part, "=")
		if !ok || tag == "" || !strings.HasPrefix(u, "http") {
			return nil, fmt.Errorf("--replication-peers: %q is not TAG=http://host:port", part)
		}
		out[strings.ToUpper(tag)] = strings.TrimRight(u, "/")
	}
	return out, nil
}

// byteSize is a flag holding a number of bytes, written as a plain number
// or with a unit: 512KiB, 32MiB, 1GiB (also KB, MB, GB as powers of 1000,
// and K, M, G as powers of 1024). -1 means no limit.
type byteSize int64

func (b *byteSize) String() string {
	n := int64(*b)
	switch {
	case n > 0 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "GiB"
	case n > 0 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	case n > 0 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10)
}

func (b *byteSize) Set(v string) error {
	s := strings.TrimSpace(v)
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if len(s) > len(u.suffix) && strings.EqualFold(s[len(s)-len(u.suffix):], u.suffix) {
			s, mult = strings.TrimSpace(s[:len(s)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < -1 || (n > 0 && n > (1<<62)/mult) {
		return fmt.Errorf("%q is not a size (use bytes or a unit: 512KiB, 32MiB, 1GiB; -1 for no limit)", v)
	}
	if n == -1 {
		*b = -1
		return nil
	}
	*b = byteSize(n * mult)
	return nil
}

// checkAlertFlags refuses alert thresholds that cannot mean anything.
func checkAlertFlags(o options) error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"alert-node-unreachable", o.alertNodeUnreachable}, {"alert-replication-error", o.alertReplicationError},
		{"alert-replication-lag", o.alertReplicationLag}, {"alert-index-stale", o.alertIndexStale}, {"alert-leader-window", o.alertLeaderWindow}} {
		if d.v <= 0 {
			return fmt.Errorf("--%s must be more than 0 (%s)", d.name, d.v)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"alert-elections", o.alertElections}, {"alert-certificate-days", o.alertCertificateDays}, {"max-alerts", o.maxAlerts}} {
		if n.v <= 0 {
			return fmt.Errorf("--%s must be more than 0 (%d)", n.name, n.v)
		}
	}
	return nil
}
