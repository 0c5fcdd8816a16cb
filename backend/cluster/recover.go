package cluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Recover rewrites a stopped node's Raft configuration to the given voters
// (tag → Raft address), for a cluster that lost its quorum for good: the
// other voters are gone, or a node that never existed was made a voter.
// It is hashicorp/raft's peers.json recovery: the node's log and snapshots
// are replayed into a fresh state machine, and a new configuration is
// written as a snapshot and a log entry. Run it on the survivors while they
// are stopped (each with the same voters); started again, they elect a
// leader among themselves. Nodes left out stay in the node list until they
// are removed (POST /admin/cluster/remove?tag=), which then needs no quorum
// of the old configuration.
func Recover(dir, selfTag string, voters map[string]string) error {
	if len(voters) == 0 {
		return errors.New("no voters given")
	}
	if _, ok := voters[selfTag]; !ok {
		return fmt.Errorf("the voters must include this node (%s)", selfTag)
	}
	path := filepath.Join(dir, "raft.db")
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no Raft state at %s: %w", path, err)
	}
	store, err := openLogStore(path)
	if err != nil {
		return err
	}
	defer store.Close()
	snaps, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
	if err != nil {
		return err
	}
	var conf raft.Configuration
	tags := make([]string, 0, len(voters))
	for t := range voters {
		tags = append(tags, t)
	}
	sort.Strings(tags)
	for _, t := range tags {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(t), Address: raft.ServerAddress(voters[t])})
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(selfTag)
	rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Error, Output: io.Discard})
	_, trans := raft.NewInmemTransport(raft.ServerAddress(voters[selfTag]))
	f := &fsm{st: newState()}
	return raft.RecoverCluster(rc, f, store, store, snaps, trans, conf)
}

// CurrentVoters reads a stopped node's last known Raft configuration (for
// the recover command's default: this node alone).
func CurrentVoters(dir string) (map[string]string, error) {
	store, err := openLogStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		return nil, err
	}
	defer store.Close()
	snaps, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	// The newest configuration entry in the log wins over the snapshot's.
	if metas, err := snaps.List(); err == nil && len(metas) > 0 {
		for _, s := range metas[0].Configuration.Servers {
			if s.Suffrage == raft.Voter {
				out[string(s.ID)] = string(s.Address)
			}
		}
	}
	first, _ := store.FirstIndex()
	last, _ := store.LastIndex()
	for i := last; i >= first && i > 0; i-- {
		var l raft.Log
		if err := store.GetLog(i, &l); err != nil {
			continue
		}
		if l.Type == raft.LogConfiguration {
			c := raft.DecodeConfiguration(l.Data)
			out = map[string]string{}
			for _, s := range c.Servers {
				if s.Suffrage == raft.Voter {
					out[string(s.ID)] = string(s.Address)
				}
			}
			break
		}
	}
	return out, nil
}
