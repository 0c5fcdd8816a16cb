// Package conflicts decides document conflicts: the strategies (latest,
// a named node, a JavaScript merge script), the per-database and
// per-collection configuration kept in the cluster state, the automatic
// resolver replication calls, and bulk operations that apply a strategy to
// the conflicts already stored, with a preview. See DESIGN.md.
package conflicts

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
)

// SettingKey is the key of the configuration among a database record's
// settings in the cluster state.
const SettingKey = "conflicts"

// Strategy names.
const (
	Latest = "latest" // the newest version wins (deterministic on every copy)
	Manual = "manual" // store the conflict for a person or a bulk operation
	Script = "script" // a JavaScript merge function
	// Node is written "node:B": the version carrying node B's latest write
	// wins. "Prefer local" in the studio is node:<this node>.
	Node = "node"
	// Local is for bulk operations only: node:<the node running it>.
	Local = "local"
)

// Config is a database's conflict configuration. The zero value resolves
// every conflict to the latest version, as RavenDB does by default.
type Config struct {
	// Default is the strategy for collections without their own: latest
	// (when empty), manual, node:TAG or script.
	Default string `json:",omitempty"`
	// Script is the default strategy's script, when Default is script.
	Script string `json:",omitempty"`
	// Collections holds per-collection strategies, by collection name
	// (matched without regard to case).
	Collections map[string]CollectionConfig `json:",omitempty"`
}

// CollectionConfig is one collection's strategy.
type CollectionConfig struct {
	Strategy string
	Script   string `json:",omitempty"`
}

// For returns the strategy and script that apply to a collection.
func (c Config) For(collection string) (strategy, script string) {
	for name, cc := range c.Collections {
		if strings.EqualFold(name, collection) {
			return cc.Strategy, cc.Script
		}
	}
	if c.Default == "" {
		return Latest, ""
	}
	return c.Default, c.Script
}

// CollectionNames lists the configured collections in order.
func (c Config) CollectionNames() []string {
	out := make([]string, 0, len(c.Collections))
	for n := range c.Collections {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ParseConfig reads a stored configuration; nil or empty is the default.
func ParseConfig(raw json.RawMessage) (Config, error) {
	var c Config
	if len(raw) == 0 || string(raw) == "null" {
		return c, nil
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, dberr.New(dberr.BadRequest, "conflict configuration: %v", err)
	}
	return c, nil
}

// Validate checks every strategy and compiles every script, so that a bad
// configuration is refused before it reaches the cluster state.
func (c *Config) Validate() error {
	norm, err := checkStrategy(c.Default, c.Script, false)
	if err != nil {
		return dberr.New(dberr.BadRequest, "default strategy: %v", err)
	}
	c.Default = norm
	if c.Default != Script {
		c.Script = ""
	}
	for name, cc := range c.Collections {
		if strings.TrimSpace(name) == "" {
			return dberr.New(dberr.BadRequest, "a collection strategy needs a collection name")
		}
		norm, err := checkStrategy(cc.Strategy, cc.Script, false)
		if err != nil {
			return dberr.New(dberr.BadRequest, "collection %s: %v", name, err)
		}
		if norm == "" {
			norm = Latest
		}
		cc.Strategy = norm
		if norm != Script {
			cc.Script = ""
		}
		c.Collections[name] = cc
	}
	return nil
}

// checkStrategy normalises a strategy name and checks its script. Local is
// only allowed for bulk operations: as an automatic strategy every copy
// would keep its own version, and the copies would never agree.
func checkStrategy(s, script string, bulk bool) (string, error) {
	s = strings.TrimSpace(s)
	low := strings.ToLower(s)
	switch {
	case low == "" || low == Latest:
		if low == "" {
			return "", nil
		}
		return Latest, nil
	case low == Manual:
		return Manual, nil
	case low == Local:
		if !bulk {
			return "", fmt.Errorf("%q is only for bulk resolution: as an automatic strategy each node would keep its own version and the copies would diverge; use node:<tag> to prefer one node's version everywhere", s)
		}
		return Local, nil
	case strings.HasPrefix(low, Node+":"):
		tag := strings.ToUpper(strings.TrimSpace(s[len(Node)+1:]))
		if tag == "" || len(tag) > 4 || strings.Trim(tag, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
			return "", fmt.Errorf("%q: a node tag is 1 to 4 letters (node:B)", s)
		}
		return Node + ":" + tag, nil
	case low == Script:
		if strings.TrimSpace(script) == "" {
			return "", fmt.Errorf("the script strategy needs a script")
		}
		if _, err := compile(script); err != nil {
			return "", err
		}
		return Script, nil
	}
	return "", fmt.Errorf("unknown strategy %q (latest, manual, node:<tag> or script)", s)
}

// SaveConfig validates a database's configuration (cfg is normalised in
// place) and stores it in the cluster state; the node serves the new
// configuration from the moment it returns, with the Raft index of the
// change. The API's solver endpoint and the studio's settings page both
// save through it.
func SaveConfig(ctx context.Context, cl *cluster.Cluster, db string, cfg *Config) (uint64, error) {
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return 0, err
	}
	res, err := cl.SetSetting(ctx, db, SettingKey, raw)
	return res.Index, err
}
