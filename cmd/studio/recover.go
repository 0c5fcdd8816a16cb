package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/names"
)

// runCluster runs `studio cluster <command>`: today only recover.
func runCluster(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "recover" {
		fmt.Fprintln(stderr, "Usage: studio cluster recover --data-dir DIR [--voters TAG=host:port,...]")
		return errors.New("the cluster command is: recover")
	}
	fs := flag.NewFlagSet("studio cluster recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "./data", "the stopped node's data directory")
	votersFlag := fs.String("voters", "", "the voters of the recovered cluster, TAG=raft-host:port,... (default: this node alone, at the Raft address it had)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: studio cluster recover --data-dir DIR [--voters TAG=host:port,...]

Recovers a cluster that lost its quorum for good (voters that are gone, or a
voter that never existed), as hashicorp/raft's peers.json recovery does: with
the node STOPPED, its Raft configuration is rewritten to the given voters.
Run it on every survivor with the same --voters, then start them again; they
elect a leader among themselves. Remove the nodes left out afterwards with
POST /admin/cluster/remove?tag=TAG (or the studio's Cluster page).

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	self, err := savedTag(*dataDir)
	if err != nil {
		return fmt.Errorf("%s holds no node (no node-tag file): %w", *dataDir, err)
	}
	raftDir := filepath.Join(*dataDir, "raft")
	voters := map[string]string{}
	if *votersFlag == "" {
		current, err := cluster.CurrentVoters(raftDir)
		if err != nil {
			return err
		}
		addr := current[self]
		if addr == "" {
			return fmt.Errorf("node %s is not a voter in its last configuration (%v): give --voters %s=<its raft host:port>", self, current, self)
		}
		voters[self] = addr
	} else {
		for _, part := range strings.Split(*votersFlag, ",") {
			tag, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
			if !ok {
				return fmt.Errorf("--voters: %q is not TAG=host:port", part)
			}
			if err := names.NodeTag(tag); err != nil {
				return err
			}
			if err := names.HostPort(addr); err != nil {
				return err
			}
			voters[tag] = addr
		}
	}
	if err := cluster.Recover(raftDir, self, voters); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	var list []string
	for t, a := range voters {
		list = append(list, t+"="+a)
	}
	sort.Strings(list)
	fmt.Fprintf(stdout, "Node %s: the Raft configuration is now %s.\nStart the node(s) again; then remove the nodes left out with POST /admin/cluster/remove?tag=TAG.\n", self, strings.Join(list, ", "))
	return nil
}
