// Package cluster is the cluster-wide state of Rookery on hashicorp/raft:
// which nodes exist, which databases live on which nodes, and every
// identity counter. Documents are not in Raft; see DESIGN.md.
package cluster

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/rookerydb/rookery/backend/dberr"
)

// Config starts a node's Raft.
type Config struct {
	NodeTag  string
	RaftAddr string // host:port the Raft transport binds and advertises
	URL      string // this node's HTTP URL, for the node list
	// Certificate is this node's certificate (base64 DER) on a secured
	// cluster, for the node list.
	Certificate string
	Dir         string // log store and snapshots
	// Bootstrap makes a one-node cluster when there is no existing state.
	// A node that joins another one starts without it.
	Bootstrap bool
	Logger    *slog.Logger
	// ApplyTimeout bounds how long a write waits for a quorum (2 s when 0).
	ApplyTimeout time.Duration
	// Forward sends a command to the leader's HTTP endpoint when this node
	// is not the leader; it returns the encoded Result.
	Forward func(ctx context.Context, leaderURL string, cmd []byte) ([]byte, error)
	// Timing, for tests; zero picks the defaults documented in DESIGN.md.
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout time.Duration
	// Security authenticates the Raft port's peers (mutual TLS, or the
	// cluster's secret). Without it the port refuses every connection,
	// which suits a one-node cluster and nothing else.
	Security Security
}

// Cluster is this node's view of the cluster.
type Cluster struct {
	cfg       Config
	log       *slog.Logger
	raft      *raft.Raft
	fsm       *fsm
	transport *raft.NetworkTransport
	store     *raftboltdb.BoltStore

	hooksMu sync.Mutex
	hooks   []func()

	existing bool
}

// HadState tells whether the node started from existing Raft state (a
// restart) rather than fresh.
func (c *Cluster) HadState() bool { return c.existing }

// Open starts Raft on this node.
func Open(cfg Config) (*Cluster, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ApplyTimeout == 0 {
		cfg.ApplyTimeout = 2 * time.Second
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger}
	c.fsm = &fsm{st: newState(), onChange: c.changed}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeTag)
	// Loopback and LAN timings: a dead leader is replaced in 1–2 s.
	rc.HeartbeatTimeout = orDefault(cfg.HeartbeatTimeout, 500*time.Millisecond)
	rc.ElectionTimeout = orDefault(cfg.ElectionTimeout, 500*time.Millisecond)
	rc.LeaderLeaseTimeout = orDefault(cfg.LeaderLeaseTimeout, 250*time.Millisecond)
	rc.CommitTimeout = 20 * time.Millisecond
	rc.SnapshotThreshold = 4096
	rc.SnapshotInterval = 30 * time.Second
	rc.TrailingLogs = 2048
	// Raft logs routine catch-up of a new follower as warnings; errors only.
	rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Error, Output: os.Stderr})

	addr, err := net.ResolveTCPAddr("tcp", cfg.RaftAddr)
	if err != nil {
		return nil, fmt.Errorf("raft address %q: %w", cfg.RaftAddr, err)
	}
	var advertise net.Addr = addr
	if addr.Port == 0 {
		advertise = nil // the listener's real port (tests)
	}
	stream, err := newStreamLayer(cfg.RaftAddr, advertise, cfg.Security, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("raft transport on %s: %w", cfg.RaftAddr, err)
	}
	c.transport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 4, Timeout: 5 * time.Second,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "raft-net", Level: hclog.Error, Output: io.Discard}),
	})
	c.store, err = openLogStore(filepath.Join(cfg.Dir, "raft.db"))
	if err != nil {
		c.transport.Close()
		return nil, err
	}
	snaps, err := raft.NewFileSnapshotStore(cfg.Dir, 2, io.Discard)
	if err != nil {
		c.closeStores()
		return nil, err
	}
	existing, err := raft.HasExistingState(c.store, c.store, snaps)
	if err != nil {
		c.closeStores()
		return nil, err
	}
	c.existing = existing
	c.raft, err = raft.NewRaft(rc, c.fsm, c.store, c.store, snaps, c.transport)
	if err != nil {
		c.closeStores()
		return nil, err
	}
	if !existing && cfg.Bootstrap {
		conf := raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: c.transport.LocalAddr()}}}
		if err := c.raft.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			c.Shutdown()
			return nil, err
		}
	}
	return c, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func (c *Cluster) closeStores() {
	if c.store != nil {
		c.store.Close()
	}
	if c.transport != nil {
		c.transport.Close()
	}
}

// Shutdown stops Raft and closes its files.
func (c *Cluster) Shutdown() error {
	var err error
	if c.raft != nil {
		err = c.raft.Shutdown().Error()
	}
	c.closeStores()
	return err
}

// OnChange registers fn to run after every applied entry or restore. It
// runs on Raft's apply goroutine and must not block.
func (c *Cluster) OnChange(fn func()) {
	c.hooksMu.Lock()
	c.hooks = append(c.hooks, fn)
	c.hooksMu.Unlock()
}

func (c *Cluster) changed() {
	c.hooksMu.Lock()
	hooks := append([]func(){}, c.hooks...)
	c.hooksMu.Unlock()
	for _, h := range hooks {
		h()
	}
}

// NodeTag is this node's tag.
func (c *Cluster) NodeTag() string { return c.cfg.NodeTag }

// RaftAddr is the address of this node's Raft transport.
func (c *Cluster) RaftAddr() string { return string(c.transport.LocalAddr()) }

// IsLeader tells whether this node leads.
func (c *Cluster) IsLeader() bool { return c.raft.State() == raft.Leader }

// Role is this node's Raft state in lower case: "leader", "follower",
// "candidate" or "shutdown" (the studio's header says which node a page
// reads and what it is).
func (c *Cluster) Role() string { return strings.ToLower(c.raft.State().String()) }

// Leader returns the leader's tag and HTTP URL ("" when unknown).
func (c *Cluster) Leader() (tag, url string) {
	_, id := c.raft.LeaderWithID()
	tag = string(id)
	if tag == "" {
		return "", ""
	}
	for _, n := range c.fsm.nodes() {
		if n.Tag == tag {
			return tag, n.URL
		}
	}
	return tag, ""
}

// ErrNoQuorum is returned when the cluster cannot commit a write.
var ErrNoQuorum = &dberr.Error{Kind: dberr.Unavailable, Msg: "the cluster has no quorum (no leader can be reached); identity and topology writes are refused until a majority of nodes is up"}

// Apply commits a command through the log and returns its result. On a
// follower it is forwarded to the leader. Without a quorum it fails fast.
func (c *Cluster) Apply(ctx context.Context, cmd Command) (Result, error) {
	if err := validate(&cmd); err != nil {
		return Result{}, err
	}
	data, err := marshalExact(cmd)
	if err != nil {
		return Result{}, err
	}
	if c.raft.State() != raft.Leader {
		return c.forward(ctx, data)
	}
	return c.applyLocal(data)
}

// ApplyEncoded applies an encoded command on the leader (the forwarding
// endpoint's side). The command passes the same validation as one made
// here; a bad one is refused with a 400 before it reaches the log.
func (c *Cluster) ApplyEncoded(data []byte) (Result, error) {
	if _, err := decodeCommand(data); err != nil {
		return Result{}, err
	}
	if c.raft.State() != raft.Leader {
		return Result{}, &dberr.Error{Kind: dberr.Unavailable, Msg: "this node is not the leader"}
	}
	return c.applyLocal(data)
}

func (c *Cluster) applyLocal(data []byte) (Result, error) {
	f := c.raft.Apply(data, c.cfg.ApplyTimeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrEnqueueTimeout) {
			return Result{}, ErrNoQuorum
		}
		return Result{}, &dberr.Error{Kind: dberr.Unavailable, Msg: "cluster write failed: " + err.Error(), Err: err}
	}
	r, _ := f.Response().(Result)
	return r, resultErr(r)
}

func (c *Cluster) forward(ctx context.Context, data []byte) (Result, error) {
	deadline := time.Now().Add(c.cfg.ApplyTimeout)
	for {
		tag, url := c.Leader()
		if tag != "" && url != "" && tag != c.cfg.NodeTag && c.cfg.Forward != nil {
			fctx, cancel := context.WithDeadline(ctx, deadline.Add(time.Second))
			body, err := c.cfg.Forward(fctx, url, data)
			cancel()
			if err == nil {
				var r Result
				if err := json.Unmarshal(body, &r); err != nil {
					return Result{}, err
				}
				return r, resultErr(r)
			}
			if dberr.KindOf(err) != dberr.Unavailable {
				return Result{}, err
			}
		}
		if c.raft.State() == raft.Leader {
			return c.applyLocal(data)
		}
		if time.Now().After(deadline) {
			return Result{}, ErrNoQuorum
		}
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func resultErr(r Result) error {
	if r.Err == "" {
		return nil
	}
	switch r.Kind {
	case "exists":
		return dberr.New(dberr.Concurrency, "%s", r.Err)
	case "missing":
		return &dberr.Error{Kind: dberr.DatabaseMissing, Msg: r.Err}
	case "not_found":
		return dberr.New(dberr.NotFound, "%s", r.Err)
	case "conflict":
		return dberr.New(dberr.Concurrency, "%s", r.Err)
	}
	return dberr.New(dberr.BadRequest, "%s", r.Err)
}

// Nodes lists the members known to the state machine.
func (c *Cluster) Nodes() []Node { return c.fsm.nodes() }

// Databases lists the database records.
func (c *Cluster) Databases() []Database { return c.fsm.databases() }

// Database returns one database record.
func (c *Cluster) Database(name string) (Database, bool) { return c.fsm.database(name) }

// Identities returns a database's identity counters keyed by "prefix|".
func (c *Cluster) Identities(db string) map[string]int64 { return c.fsm.identities(db) }

// TopologyEtag changes whenever nodes or database membership change.
func (c *Cluster) TopologyEtag() int64 { return max(c.fsm.topologyEtag(), 1) }

// CatchUp waits until this node's state machine has applied what the
// cluster had committed: on the leader a Raft barrier, on a follower until
// it has applied the commit index the leader told it. A node that just
// restarted replays its log asynchronously; what it reads of the state
// before this returns may be an old state (a database not yet deleted).
func (c *Cluster) CatchUp(ctx context.Context) error {
	if c.IsLeader() {
		if err := c.raft.Barrier(c.cfg.ApplyTimeout).Error(); err != nil {
			return &dberr.Error{Kind: dberr.Unavailable, Msg: "could not catch up with the cluster's log: " + err.Error(), Err: err}
		}
		return nil
	}
	for {
		if ci := c.raft.CommitIndex(); ci > 0 && c.fsm.applied.Load() >= c.lastApplicable(ci) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ErrNoQuorum
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// lastApplicable is the last index at or below upTo whose entry reaches the
// state machine (a command or a configuration; a leader's no-op entry does
// not), or 0 when every one of them is in the snapshot.
func (c *Cluster) lastApplicable(upTo uint64) uint64 {
	first, err := c.store.FirstIndex()
	if err != nil {
		return upTo
	}
	for i := upTo; i >= first && i > 0; i-- {
		var l raft.Log
		if err := c.store.GetLog(i, &l); err != nil {
			return upTo
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			return i
		}
	}
	return 0
}

// AppliedIndex is the last log index this node's state machine applied.
func (c *Cluster) AppliedIndex() uint64 { return c.fsm.applied.Load() }

// WaitApplied waits until this node has applied everything committed before
// the call (used after a write forwarded to the leader).
func (c *Cluster) WaitApplied(ctx context.Context, index uint64) error {
	for c.fsm.applied.Load() < index {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// AddNonvoter adds a node as a non-voting member (leader only; callers
// forward), records it in the node list, and records a random join nonce
// for it. It returns the log index of that nonce: the node, once it has
// applied that index, has been reached by Raft and caught up, and reads
// the nonce from its own copy of the state to ask for its promotion to a
// voter (Promote). The nonce never leaves the cluster state, so nobody can
// promote a node that Raft does not reach (a made-up or wrong address): it
// stays a non-voter and never costs the cluster its quorum.
func (c *Cluster) AddNonvoter(ctx context.Context, n Node) (uint64, error) {
	if !c.IsLeader() {
		return 0, &dberr.Error{Kind: dberr.Unavailable, Msg: "this node is not the leader"}
	}
	cmd := Command{Op: opAddNode, Node: &n}
	if err := validate(&cmd); err != nil {
		return 0, err
	}
	for _, sv := range c.Status().Servers {
		if sv.Tag == n.Tag && sv.Address != n.RaftAddr {
			return 0, dberr.New(dberr.Concurrency, "node %s is already a member (a %s at %s); remove it before adding it at %s", n.Tag, sv.Suffrage, sv.Address, n.RaftAddr)
		}
	}
	voter := false
	for _, sv := range c.Status().Servers {
		voter = voter || (sv.Tag == n.Tag && sv.Suffrage == "voter")
	}
	if !voter {
		f := c.raft.AddNonvoter(raft.ServerID(n.Tag), raft.ServerAddress(n.RaftAddr), 0, 10*time.Second)
		if err := f.Error(); err != nil {
			return 0, &dberr.Error{Kind: dberr.Unavailable, Msg: "add node " + n.Tag + ": " + err.Error(), Err: err}
		}
	}
	if _, err := c.Apply(ctx, cmd); err != nil {
		return 0, err
	}
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return 0, err
	}
	r, err := c.Apply(ctx, Command{Op: opJoinNonce, Tag: n.Tag, Key: hex.EncodeToString(nonce)})
	return r.Index, err
}

// JoinNonce is the nonce the leader recorded for a joining node ("" when
// none): the joining node reads it from its own copy of the state.
func (c *Cluster) JoinNonce(tag string) string {
	c.fsm.mu.RLock()
	defer c.fsm.mu.RUnlock()
	return c.fsm.st.JoinNonces[tag]
}

// Promote makes a non-voting member a voter (leader only). nonce must be
// the one AddNonvoter recorded for it: proof that the node applied the log
// that far.
func (c *Cluster) Promote(ctx context.Context, tag, nonce string) error {
	if !c.IsLeader() {
		return &dberr.Error{Kind: dberr.Unavailable, Msg: "this node is not the leader"}
	}
	for _, sv := range c.Status().Servers {
		if sv.Tag != tag {
			continue
		}
		if sv.Suffrage == "voter" {
			return nil
		}
		want := c.JoinNonce(tag)
		if want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(nonce)) != 1 {
			return dberr.New(dberr.InvalidOperation, "node %s has not shown that it caught up with the cluster (its join nonce is missing or wrong); it stays a non-voting member", tag)
		}
		if err := c.raft.AddVoter(raft.ServerID(tag), raft.ServerAddress(sv.Address), 0, 10*time.Second).Error(); err != nil {
			return &dberr.Error{Kind: dberr.Unavailable, Msg: "promote node " + tag + ": " + err.Error(), Err: err}
		}
		_, err := c.Apply(ctx, Command{Op: opJoinNonce, Tag: tag})
		return err
	}
	return dberr.New(dberr.NotFound, "node %s is not a member of the cluster; join it first", tag)
}

// RemoveNode removes a node from Raft and from the state.
func (c *Cluster) RemoveNode(ctx context.Context, tag string) error {
	if !c.IsLeader() {
		return &dberr.Error{Kind: dberr.Unavailable, Msg: "this node is not the leader"}
	}
	inConfig := false
	for _, sv := range c.Status().Servers {
		inConfig = inConfig || sv.Tag == tag
	}
	// A node that is only in the node list (its Raft membership was
	// dropped by a recovery, see Recover) is only removed from the state.
	if inConfig {
		if err := c.raft.RemoveServer(raft.ServerID(tag), 0, 10*time.Second).Error(); err != nil {
			return &dberr.Error{Kind: dberr.Unavailable, Msg: "remove node " + tag + ": " + err.Error(), Err: err}
		}
	}
	_, err := c.Apply(ctx, Command{Op: opRemoveNode, Tag: tag})
	if dberr.Is(err, dberr.DatabaseMissing) {
		return nil
	}
	return err
}

// StepDown hands leadership to another voter (leader only).
func (c *Cluster) StepDown() error {
	if !c.IsLeader() {
		return &dberr.Error{Kind: dberr.InvalidOperation, Msg: "this node is not the leader"}
	}
	return c.raft.LeadershipTransfer().Error()
}

// RegisterSelf records this node in the node list when it leads and is not
// there yet (after bootstrap), or when its URL changed.
func (c *Cluster) RegisterSelf(ctx context.Context) error {
	for _, n := range c.fsm.nodes() {
		if n.Tag == c.cfg.NodeTag && n.URL == c.cfg.URL && n.RaftAddr == c.RaftAddr() && n.Certificate == c.cfg.Certificate {
			return nil
		}
	}
	_, err := c.Apply(ctx, Command{Op: opAddNode, Node: &Node{Tag: c.cfg.NodeTag, URL: c.cfg.URL, RaftAddr: c.RaftAddr(), Certificate: c.cfg.Certificate}})
	return err
}

// WaitLeader waits until some node leads.
func (c *Cluster) WaitLeader(ctx context.Context) error {
	for {
		if tag, _ := c.Leader(); tag != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ErrNoQuorum
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Status describes this node's Raft.
type Status struct {
	Tag         string
	State       string
	Term        uint64
	LastIndex   uint64
	CommitIndex uint64
	Applied     uint64
	LastContact time.Time
	LeaderTag   string
	Servers     []Server
}

// Server is an entry of the Raft configuration.
type Server struct {
	Tag      string
	Address  string
	Suffrage string // "voter", "nonvoter"
}

// Status reports this node's Raft figures and the configuration.
func (c *Cluster) Status() Status {
	s := Status{
		Tag:         c.cfg.NodeTag,
		State:       strings.ToLower(c.raft.State().String()),
		Term:        c.raft.CurrentTerm(),
		LastIndex:   c.raft.LastIndex(),
		CommitIndex: c.raft.CommitIndex(),
		Applied:     c.raft.AppliedIndex(),
		LastContact: c.raft.LastContact(),
	}
	s.LeaderTag, _ = c.Leader()
	if f := c.raft.GetConfiguration(); f.Error() == nil {
		for _, sv := range f.Configuration().Servers {
			suff := "voter"
			if sv.Suffrage != raft.Voter {
				suff = "nonvoter"
			}
			s.Servers = append(s.Servers, Server{Tag: string(sv.ID), Address: string(sv.Address), Suffrage: suff})
		}
	}
	return s
}

// NextIdentities increments the counters of a database's prefixes in one log
// entry and returns the new values.
func (c *Cluster) NextIdentities(ctx context.Context, db string, prefixes []string) ([]int64, error) {
	r, err := c.Apply(ctx, Command{Op: opIdentityNext, Name: db, Prefixes: prefixes})
	if err != nil {
		return nil, err
	}
	if len(r.Values) != len(prefixes) {
		return nil, fmt.Errorf("identity_next returned %d values for %d prefixes", len(r.Values), len(prefixes))
	}
	return r.Values, nil
}

// ClaimIdentity moves a counter to max(counter+1, atLeast) and returns it.
func (c *Cluster) ClaimIdentity(ctx context.Context, db, prefix string, atLeast int64) (int64, error) {
	r, err := c.Apply(ctx, Command{Op: opIdentityClaim, Name: db, Prefix: prefix, Value: atLeast})
	return r.Value, err
}

// SeedIdentity sets a counter: add-max, or exactly with force.
func (c *Cluster) SeedIdentity(ctx context.Context, db, prefix string, value int64, force bool) (int64, error) {
	r, err := c.Apply(ctx, Command{Op: opIdentitySeed, Name: db, Prefix: prefix, Value: value, Force: force})
	return r.Value, err
}

// MembersFor picks the nodes of a new database: every node of the cluster
// by default, or rf of them starting with self.
func (c *Cluster) MembersFor(self string, rf int) []string {
	var tags []string
	for _, n := range c.Nodes() {
		tags = append(tags, n.Tag)
	}
	if len(tags) == 0 {
		tags = []string{self}
	}
	if rf <= 0 || rf >= len(tags) {
		return tags
	}
	out := []string{self}
	for _, t := range tags {
		if len(out) == rf {
			break
		}
		if t != self {
			out = append(out, t)
		}
	}
	return out
}

// CreateDatabase records a database on the given members.
func (c *Cluster) CreateDatabase(ctx context.Context, d Database) (Result, error) {
	return c.Apply(ctx, Command{Op: opCreateDatabase, Database: &d})
}

// DeleteDatabase removes a database record (and its identities).
func (c *Cluster) DeleteDatabase(ctx context.Context, name string) (Result, error) {
	return c.Apply(ctx, Command{Op: opDeleteDatabase, Name: name})
}

// AddMember adds a node to a database's members.
func (c *Cluster) AddMember(ctx context.Context, db, tag string) (Result, error) {
	return c.Apply(ctx, Command{Op: opAddMember, Name: db, Tag: tag})
}

// applyAndWait applies a command and waits until this node has applied it
// too, so the caller reads its own write from the local state.
func (c *Cluster) applyAndWait(ctx context.Context, cmd Command) (Result, error) {
	r, err := c.Apply(ctx, cmd)
	if err != nil {
		return r, err
	}
	return r, c.WaitApplied(ctx, r.Index)
}

// SetSetting stores (or, with nil, removes) one of a database's settings,
// and returns once this node serves it.
func (c *Cluster) SetSetting(ctx context.Context, db, key string, value json.RawMessage) (Result, error) {
	return c.applyAndWait(ctx, Command{Op: opSetSetting, Name: db, Key: key, Setting: value})
}

// Setting reads one of a database's settings (nil when unset).
func (c *Cluster) Setting(db, key string) json.RawMessage {
	d, ok := c.fsm.database(db)
	if !ok {
		return nil
	}
	return d.Settings[key]
}

// CreateSubscription records a subscription (a new name, or the log index
// as its name when name is empty) with its first progress (nil: none) and
// returns its id as Value. Like the other subscription writes it returns
// once this node has applied it.
func (c *Cluster) CreateSubscription(ctx context.Context, db, name string, data, progress json.RawMessage) (Result, error) {
	return c.applyAndWait(ctx, Command{Op: opSubCreate, Name: db, Key: name, Setting: data, Expect: progress})
}

// UpdateSubscription replaces a subscription's definition. With a non-nil
// progress it also replaces the progress (a new starting point).
func (c *Cluster) UpdateSubscription(ctx context.Context, db, name string, data, progress json.RawMessage) (Result, error) {
	return c.applyAndWait(ctx, Command{Op: opSubUpdate, Name: db, Key: name, Setting: data, Force: progress != nil, Expect: progress})
}

// SubscriptionProgress moves a subscription's progress from expect to next;
// a progress that is no longer expect is a "conflict" kind error.
func (c *Cluster) SubscriptionProgress(ctx context.Context, db, name string, expect, next json.RawMessage) (Result, error) {
	return c.applyAndWait(ctx, Command{Op: opSubProgress, Name: db, Key: name, Expect: expect, Setting: next})
}

// DeleteSubscription removes a subscription.
func (c *Cluster) DeleteSubscription(ctx context.Context, db, name string) (Result, error) {
	return c.applyAndWait(ctx, Command{Op: opSubDelete, Name: db, Key: name})
}

// Subscription finds one subscription by name (case-insensitive).
func (c *Cluster) Subscription(db, name string) (Subscription, bool) {
	return c.fsm.subscription(db, name)
}

// Subscriptions lists a database's subscriptions in creation order.
func (c *Cluster) Subscriptions(db string) []Subscription { return c.fsm.subscriptions(db) }
