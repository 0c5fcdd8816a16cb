package cluster

import (
	"encoding/json"

	"regexp"
	"unicode/utf8"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/names"
)

// Bounds of what one command may carry. The state is small by design; a
// command far beyond these is not a legitimate client's.
const (
	maxCommandBytes  = 4 << 20  // one encoded command
	maxSettingBytes  = 1 << 20  // one setting, definition or progress
	maxPrefixBytes   = 512      // an identity prefix (a document id's start)
	maxPrefixes      = 10_000   // identities in one batch
	maxMembers       = 26 * 4   // members of a database
	maxSettingKeyLen = 64       // a setting's key
	maxValue         = 1 << 62  // an identity value
	minValue         = -1 << 62 // ...
)

var settingKey = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)

// validate checks a command before it enters the log and again when it is
// applied: the leader refuses a bad command with a 400, and a follower (or
// a replay of an old log) never applies one. Whatever reaches the state
// passed the same rules as the public endpoints (backend/names).
// Commands that act on an existing record (delete, update, progress) only
// need the record to exist, so a record from before a rule was added can
// still be removed.
func validate(c *Command) error {
	bad := func(format string, args ...any) error {
		return dberr.New(dberr.BadRequest, "invalid cluster command %q: "+format, append([]any{c.Op}, args...)...)
	}
	jsonOK := func(what string, v json.RawMessage, allowEmpty bool) error {
		if len(v) == 0 {
			if allowEmpty {
				return nil
			}
			return bad("%s is missing", what)
		}
		if len(v) > maxSettingBytes {
			return bad("%s is %d bytes; at most %d", what, len(v), maxSettingBytes)
		}
		if !json.Valid(v) {
			return bad("%s is not JSON", what)
		}
		return nil
	}
	db := func() error { return names.Database(c.Name) }
	switch c.Op {
	case opAddNode:
		if c.Node == nil {
			return bad("no node")
		}
		return ValidateNode(*c.Node)
	case opRemoveNode:
		return names.NodeTag(c.Tag)
	case opCreateDatabase:
		d := c.Database
		if d == nil {
			return bad("no database record")
		}
		if err := names.Database(d.Name); err != nil {
			return err
		}
		if len(d.Members) == 0 || len(d.Members) > maxMembers {
			return bad("a database needs 1 to %d members, not %d", maxMembers, len(d.Members))
		}
		for _, m := range d.Members {
			if err := names.NodeTag(m); err != nil {
				return err
			}
		}
		if d.Separator != "" {
			if _, err := names.Separator(d.Separator); err != nil {
				return err
			}
		}
		if d.ReplicationFactor < 0 || d.ReplicationFactor > maxMembers {
			return bad("replication factor %d", d.ReplicationFactor)
		}
		if len(d.Settings) > 0 {
			return bad("settings are set with set_setting")
		}
	case opDeleteDatabase:
		if c.Name == "" {
			return bad("no database name")
		}
	case opAddMember:
		if err := db(); err != nil {
			return err
		}
		return names.NodeTag(c.Tag)
	case opSetSetting:
		if err := db(); err != nil {
			return err
		}
		if !settingKey.MatchString(c.Key) {
			return bad("setting key %q", clipKey(c.Key))
		}
		return jsonOK("the setting", c.Setting, true)
	case opIdentityNext, opIdentityClaim, opIdentitySeed:
		if err := db(); err != nil {
			return err
		}
		prefixes := c.Prefixes
		if c.Op != opIdentityNext {
			prefixes = []string{c.Prefix}
		} else if len(prefixes) == 0 || len(prefixes) > maxPrefixes {
			return bad("%d prefixes; 1 to %d are allowed", len(prefixes), maxPrefixes)
		}
		for _, p := range prefixes {
			if p == "" || len(p) > maxPrefixBytes || !utf8.ValidString(p) {
				return bad("identity prefix %q: 1 to %d bytes of UTF-8", clipKey(p), maxPrefixBytes)
			}
		}
		if c.Value > maxValue || c.Value < minValue {
			return bad("identity value %d is out of range", c.Value)
		}
	case opSubCreate:
		if err := db(); err != nil {
			return err
		}
		if c.Key != "" {
			if err := names.Subscription(c.Key); err != nil {
				return err
			}
		}
		if err := jsonOK("the definition", c.Setting, false); err != nil {
			return err
		}
		return jsonOK("the progress", c.Expect, true)
	case opSubUpdate, opSubProgress:
		if c.Name == "" || c.Key == "" {
			return bad("database and subscription are required")
		}
		if err := jsonOK("the definition", c.Setting, c.Op == opSubProgress); err != nil {
			return err
		}
		return jsonOK("the progress", c.Expect, true)
	case opSubDelete:
		if c.Name == "" || c.Key == "" {
			return bad("database and subscription are required")
		}
	default:
		if v, ok := validators[c.Op]; ok {
			return v(c)
		}
		return bad("unknown operation")
	}
	return nil
}

// ValidateNode checks a node's record: its tag, HTTP URL, Raft address and
// certificate.
func ValidateNode(n Node) error {
	if err := names.NodeTag(n.Tag); err != nil {
		return err
	}
	if err := names.NodeURL(n.URL); err != nil {
		return err
	}
	if len(n.Certificate) > 64<<10 {
		return dberr.New(dberr.BadRequest, "node %s: the certificate is too large", n.Tag)
	}
	return names.HostPort(n.RaftAddr)
}

// validators are the checks of operations defined in other files.
var validators = map[string]func(*Command) error{}

func clipKey(s string) string { return names.Clip(s, 64) }

// decodeCommand reads an encoded command, bounded, and validates it.
func decodeCommand(data []byte) (Command, error) {
	var c Command
	if len(data) > maxCommandBytes {
		return c, dberr.New(dberr.BadRequest, "cluster command of %d bytes; at most %d", len(data), maxCommandBytes)
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, dberr.New(dberr.BadRequest, "undecodable cluster command: %v", err)
	}
	if err := validate(&c); err != nil {
		return c, err
	}
	return c, nil
}
