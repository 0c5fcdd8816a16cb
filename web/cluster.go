package web

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/rookerydb/rookery/backend/catalog"
	"github.com/rookerydb/rookery/backend/cluster"
)

// startCluster brings the node into its cluster: a fresh node that was
// given a member's URL joins it; a bootstrapped node waits to lead. Then
// the node makes sure the cluster knows its URL, and adopts databases that
// exist on disk but not in the cluster state (a data directory from before
// the cluster existed).
func (s *Server) startCluster() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.cfg.Join != "" && !s.cluster.HadState() {
		if err := s.join(ctx); err != nil {
			return err
		}
	} else if s.cfg.Join != "" {
		s.log.Info("this data directory already belongs to a cluster: --join is ignored (use a fresh --data-dir to join another one)", "join", s.cfg.Join, "data_dir", s.cfg.DataDir)
	}
	if err := s.cluster.WaitLeader(ctx); err != nil {
		// A restarted node of a cluster that has no quorum yet: serve
		// anyway (HiLo and documents work); cluster writes fail fast.
		s.log.Warn("no cluster leader yet; serving without one", "error", err)
		return nil
	}
	// The log replays asynchronously after a restart: act on the state
	// only once it is current, or a database deleted just before a crash
	// would be created again from an old state.
	caughtUp := true
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	if err := s.cluster.CatchUp(cctx); err != nil {
		caughtUp = false
		s.log.Warn("could not catch up with the cluster's log; databases on disk are kept until it does", "error", err)
	}
	if err := s.cluster.RegisterSelf(ctx); err != nil {
		s.log.Warn("could not register this node's URL in the cluster", "error", err)
	}
	// Databases on disk with no record are adopted into a cluster that is
	// new (a data directory from before the cluster existed). In a cluster
	// that existed, the record was deleted (the node stopped before it
	// removed the files): they are removed, once the state is current.
	if s.cluster.IsLeader() && !s.cluster.HadState() {
		for _, db := range s.catalog.All() {
			if _, ok := s.cluster.Database(db.Name()); !ok {
				_, err := s.cluster.CreateDatabase(ctx, cluster.Database{Name: db.Name(), Members: []string{s.cfg.NodeTag}, Separator: db.Separator(), Created: time.Now().UTC()})
				if err != nil {
					s.log.Warn("could not adopt a local database into the cluster", "database", db.Name(), "error", err)
				}
			}
		}
	}
	// Apply what the state says before serving.
	known := map[string]bool{}
	if caughtUp && s.cluster.HadState() {
		for _, name := range s.catalog.Names() {
			known[strings.ToLower(name)] = true
		}
	}
	s.reconcileWith(known)
	s.syncReplication()
	s.idx.SyncAll()
	return nil
}

// reconcileWith applies the records. Databases that were seen before, or
// are in known, and have no record any more are removed; what it saw is
// remembered for the next pass, so a database created on an old state and
// deleted by a later entry is removed then.
func (s *Server) reconcileWith(known map[string]bool) {
	s.reconMu.Lock()
	defer s.reconMu.Unlock()
	if s.reconKnown == nil {
		s.reconKnown = map[string]bool{}
	}
	for k := range known {
		s.reconKnown[k] = true
	}
	s.reconKnown = s.applyRecords(s.reconKnown)
}

// join asks a member to add this node: first as a non-voting member, then,
// once this node has applied the configuration change (so the leader
// reaches its Raft port, with the secret or certificate it needs), as a
// voter. A node that never catches up never counts toward the quorum.
func (s *Server) join(ctx context.Context) error {
	cert := ""
	if s.sec.secured {
		cert = base64.StdEncoding.EncodeToString(s.sec.cert.Leaf.Raw)
	}
	body, _ := json.Marshal(map[string]string{"Tag": s.cfg.NodeTag, "Url": s.URL(), "RaftAddr": s.cluster.RaftAddr(), "Certificate": cert})
	base := strings.TrimRight(s.cfg.Join, "/")
	var answer struct {
		Tag           string
		Index         uint64
		ClusterSecret string
	}
	if err := s.postToMember(ctx, base+"/admin/cluster/join", body, &answer); err != nil {
		return err
	}
	if !s.sec.secured {
		secret, err := hex.DecodeString(answer.ClusterSecret)
		if err != nil || len(secret) < 16 {
			return fmt.Errorf("join via %s: the cluster sent no usable secret", s.cfg.Join)
		}
		if err := s.sec.saveSecret(secret); err != nil {
			return err
		}
	}
	if err := s.cluster.WaitApplied(ctx, answer.Index); err != nil {
		return fmt.Errorf("joined %s as a non-voting member, but the leader never reached this node's Raft address %s: is it reachable from the other nodes?", s.cfg.Join, s.cluster.RaftAddr())
	}
	// The nonce the leader recorded for this node is in this node's copy
	// of the state now: it proves this node is reached by Raft.
	promote, _ := json.Marshal(map[string]string{"Nonce": s.cluster.JoinNonce(s.cfg.NodeTag)})
	if err := s.postToMember(ctx, base+"/admin/cluster/promote?tag="+s.cfg.NodeTag, promote, nil); err != nil {
		return err
	}
	s.log.Info("joined the cluster", "via", s.cfg.Join, "node_tag", s.cfg.NodeTag)
	return nil
}

// postToMember POSTs to another member with this node's credentials,
// retrying while it is unreachable or has no leader; a 4xx is final.
func (s *Server) postToMember(ctx context.Context, url string, body []byte, out any) error {
	var last error
	for attempt := 0; ctx.Err() == nil; attempt++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.nodes.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if out != nil {
					return json.Unmarshal(b, out)
				}
				return nil
			}
			last = fmt.Errorf("%s: %d %s", url, resp.StatusCode, b)
			if resp.StatusCode >= 400 && resp.StatusCode < 500 {
				return last
			}
		} else {
			last = err
		}
		time.Sleep(time.Duration(min(attempt+1, 10)) * 100 * time.Millisecond)
	}
	return fmt.Errorf("could not join the cluster: %w", last)
}

// reconcile keeps the local database files in line with the cluster's
// database records. The state machine only changes memory; this goroutine
// does the file work.
func (s *Server) reconcile() {
	defer close(s.reconciled)
	for {
		select {
		case <-s.stop:
			return
		case <-s.recon:
		}
		s.reconcileWith(map[string]bool{})
		s.syncReplication()
		s.idx.SyncAll()
	}
}

// applyRecords opens databases this node is a member of and removes those
// whose record was deleted since known was taken. It returns the records it
// saw.
func (s *Server) applyRecords(known map[string]bool) map[string]bool {
	seen := map[string]bool{}
	for _, d := range s.cluster.Databases() {
		key := strings.ToLower(d.Name)
		seen[key] = true
		member := false
		for _, m := range d.Members {
			member = member || m == s.cfg.NodeTag
		}
		if !member {
			continue
		}
		if !s.catalog.Has(d.Name) { // a damaged copy stays as it is until re-seeded
			if _, err := s.catalog.Create(d.Name, catalog.Options{Separator: d.Separator}); err != nil {
				s.log.Error("could not open a database the cluster placed here", "database", d.Name, "error", err)
			}
		}
	}
	for key := range known {
		if seen[key] {
			continue
		}
		if s.catalog.Has(key) {
			if err := s.catalog.Delete(key); err != nil {
				s.log.Error("could not delete a database removed from the cluster", "database", key, "error", err)
			}
		}
	}
	return seen
}

// ProposedTag asks cfg.Join's cluster which tag a new node should take,
// with the node's credentials (before the node starts).
func ProposedTag(cfg Config) (string, error) {
	if cfg.RaftAddr == "" {
		cfg.RaftAddr = RaftAddrFor(cfg.HTTPAddr)
	}
	sec, err := newSecurity(&cfg)
	if err != nil {
		return "", err
	}
	nodes := newNodeClient(sec)
	var last error
	for i := 0; i < 50; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(cfg.Join, "/")+"/admin/cluster/next-tag", nil)
		resp, err := nodes.Do(req)
		if err == nil {
			var v struct{ Tag string }
			err = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&v)
			resp.Body.Close()
			if err == nil && v.Tag != "" {
				cancel()
				return v.Tag, nil
			}
			if err == nil {
				err = fmt.Errorf("%s answered %d", cfg.Join, resp.StatusCode)
			}
		}
		cancel()
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return "", last
}
