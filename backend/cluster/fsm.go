package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/backend/auth"
)

// Node is a member of the cluster.
type Node struct {
	Tag      string
	URL      string // HTTP base URL clients use
	RaftAddr string
	// Certificate is the node's TLS certificate (base64 DER) on a secured
	// cluster: subscription workers sent to the node check it.
	Certificate string `json:",omitempty"`
}

// Database is a database record: where the database lives and its settings.
type Database struct {
	Name              string
	Members           []string // node tags
	Separator         string
	ReplicationFactor int
	Created           time.Time
	// Settings are per-database configurations owned by other packages
	// (e.g. "conflicts"), kept opaque here: the owner validates and reads
	// them.
	Settings map[string]json.RawMessage `json:",omitempty"`
}

// state is everything the cluster agrees on. It is small and changes only
// through the log.
type state struct {
	Nodes      map[string]*Node     // by tag
	Databases  map[string]*Database // by lower-cased name
	Identities map[string]int64     // "db/prefix|", both lower-cased
	// Subscriptions by "db/name", both lower-cased.
	Subscriptions map[string]*Subscription `json:",omitempty"`
	// Certificates are the registered client and node certificates, by
	// thumbprint.
	Certificates map[string]*auth.Certificate `json:",omitempty"`
	// JoinNonces are the nonces of nodes that joined as non-voters and
	// are not promoted yet, by tag (see Cluster.AddNonvoter).
	JoinNonces map[string]string `json:",omitempty"`
	// Indexes are the databases' index definitions, by "db/name", both
	// lower-cased; IndexLog their cleanup decisions, by database.
	Indexes  map[string]*IndexRecord    `json:",omitempty"`
	IndexLog map[string][]IndexDecision `json:",omitempty"`
	// CmpXchg holds compare-exchange values and cluster transactions (cmpxchg.go).
	CmpXchg *CmpXchgState `json:",omitempty"`
	// TopologyEtag moves whenever nodes or database membership change.
	TopologyEtag int64
	// AppliedIndex is the log index the state reflects (kept in snapshots,
	// so a restored state knows it).
	AppliedIndex uint64 `json:",omitempty"`
}

func newState() *state {
	return &state{Nodes: map[string]*Node{}, Databases: map[string]*Database{}, Identities: map[string]int64{}, Subscriptions: map[string]*Subscription{}}
}

// Subscription is a data subscription's record: its id (the log index that
// created it), its name, and its definition and progress, kept opaque here
// (the subscriptions package owns their shape).
type Subscription struct {
	Database string
	Name     string
	ID       int64
	Data     json.RawMessage
	// Progress is where delivery stands, written by acknowledgements with
	// a compare-and-set so two nodes or workers cannot both move it.
	Progress json.RawMessage `json:",omitempty"`
}

func subscriptionKey(db, name string) string {
	return strings.ToLower(db) + "/" + strings.ToLower(name)
}

// Operations of the log.
const (
	opAddNode        = "add_node"
	opRemoveNode     = "remove_node"
	opCreateDatabase = "create_database"
	opDeleteDatabase = "delete_database"
	opIdentityNext   = "identity_next"
	opIdentityClaim  = "identity_claim"
	opIdentitySeed   = "identity_seed"
	opAddMember      = "add_member"
	opSetSetting     = "set_setting"
	opSubCreate      = "subscription_create"
	opSubUpdate      = "subscription_update"
	opSubDelete      = "subscription_delete"
	opSubProgress    = "subscription_progress"
)

// Command is one log entry.
type Command struct {
	Op       string
	Node     *Node           `json:",omitempty"`
	Tag      string          `json:",omitempty"`
	Database *Database       `json:",omitempty"`
	Name     string          `json:",omitempty"` // database name
	Prefixes []string        `json:",omitempty"` // identity_next: one value each
	Prefix   string          `json:",omitempty"` // identity_claim / identity_seed
	Value    int64           `json:",omitempty"`
	Force    bool            `json:",omitempty"`
	Key      string          `json:",omitempty"` // set_setting
	Setting  json.RawMessage `json:",omitempty"` // set_setting; null removes
	Expect   json.RawMessage `json:",omitempty"` // subscription_progress: the progress it replaces; create/update: the new progress
	Keys     []string        `json:",omitempty"` // subscription_update: several at once
	// Certificate is certificate_put's registration.
	Certificate *auth.Certificate `json:",omitempty"`
	// IndexPut, IndexSet and Decisions are the index commands' content
	// (indexes.go); Keys names the indexes of index_delete and index_set.
	IndexPut  *IndexPut       `json:",omitempty"`
	IndexSet  *IndexSet       `json:",omitempty"`
	Decisions []IndexDecision `json:",omitempty"`
	// CmpXchg is the compare-exchange and cluster-transaction commands' content (cmpxchg.go).
	CmpXchg *CmpXchgCommand `json:",omitempty"`
}

// appliers are the operations defined in other files, by name.
var appliers = map[string]func(st *state, c *Command, index uint64) Result{}

// Result is what applying a command returned.
type Result struct {
	Values []int64 `json:",omitempty"`
	Value  int64   `json:",omitempty"`
	Err    string  `json:",omitempty"`
	// Kind classifies Err for the caller: "exists", "missing" (the
	// database), "not_found" (something in it), "invalid".
	Kind  string `json:",omitempty"`
	Index uint64 `json:",omitempty"`
	// CmpXchg is a compare-exchange command's outcome (cmpxchg.go).
	CmpXchg *CmpXchgResult `json:",omitempty"`
}

func identityKey(db, prefix string) string {
	prefix = strings.ToLower(prefix)
	if !strings.HasSuffix(prefix, "|") {
		prefix += "|"
	}
	return strings.ToLower(db) + "/" + prefix
}

// fsm applies commands to the state. Apply touches nothing but the state:
// opening or deleting database files happens outside, in whoever watches
// OnChange.
type fsm struct {
	mu       sync.RWMutex
	st       *state
	onChange func()
	// applied is the last log index this state machine has applied (Raft's
	// own AppliedIndex moves when entries are handed to the state machine,
	// a moment before they are applied).
	applied atomic.Uint64
}

func (f *fsm) Apply(l *raft.Log) any {
	c, err := decodeCommand(l.Data)
	if err != nil {
		// The leader validates before appending; this refuses what an older
		// log, or a leader without the rule, let in.
		f.applied.Store(l.Index)
		return Result{Err: err.Error(), Kind: "invalid", Index: l.Index}
	}
	f.mu.Lock()
	r := f.apply(&c, l.Index)
	f.st.AppliedIndex = l.Index
	f.mu.Unlock()
	f.applied.Store(l.Index)
	r.Index = l.Index
	if f.onChange != nil {
		f.onChange()
	}
	return r
}

// StoreConfiguration is raft.ConfigurationStore: configuration entries do
// not reach Apply, but they move what this state machine has seen.
func (f *fsm) StoreConfiguration(index uint64, _ raft.Configuration) {
	f.mu.Lock()
	f.st.AppliedIndex = max(f.st.AppliedIndex, index)
	f.mu.Unlock()
	if index > f.applied.Load() {
		f.applied.Store(index)
	}
}

func (f *fsm) apply(c *Command, index uint64) Result {
	st := f.st
	switch c.Op {
	case opAddNode:
		if c.Node == nil || c.Node.Tag == "" {
			return Result{Err: "add_node without a node", Kind: "invalid"}
		}
		n := *c.Node
		st.Nodes[n.Tag] = &n
		st.TopologyEtag = int64(index)
	case opRemoveNode:
		if _, ok := st.Nodes[c.Tag]; !ok {
			return Result{Err: "no node " + c.Tag, Kind: "missing"}
		}
		delete(st.Nodes, c.Tag)
		delete(st.JoinNonces, c.Tag)
		for _, d := range st.Databases {
			d.Members = without(d.Members, c.Tag)
		}
		st.TopologyEtag = int64(index)
	case opCreateDatabase:
		if c.Database == nil {
			return Result{Err: "create_database without a record", Kind: "invalid"}
		}
		key := strings.ToLower(c.Database.Name)
		if _, ok := st.Databases[key]; ok {
			return Result{Err: "Database '" + c.Database.Name + "' already exists!", Kind: "exists"}
		}
		d := *c.Database
		d.Members = append([]string(nil), d.Members...)
		st.Databases[key] = &d
		st.TopologyEtag = int64(index)
	case opDeleteDatabase:
		key := strings.ToLower(c.Name)
		if _, ok := st.Databases[key]; !ok {
			return Result{Err: "Database '" + c.Name + "' does not exist.", Kind: "missing"}
		}
		delete(st.Databases, key)
		prefix := key + "/"
		for k := range st.Identities {
			if strings.HasPrefix(k, prefix) {
				delete(st.Identities, k)
			}
		}
		for k := range st.Subscriptions {
			if strings.HasPrefix(k, prefix) {
				delete(st.Subscriptions, k)
			}
		}
		dropIndexes(st, c.Name)
		dropCmpXchg(st, c.Name)
		st.TopologyEtag = int64(index)
	case opAddMember:
		d, ok := st.Databases[strings.ToLower(c.Name)]
		if !ok {
			return Result{Err: "Database '" + c.Name + "' does not exist.", Kind: "missing"}
		}
		for _, m := range d.Members {
			if m == c.Tag {
				return Result{}
			}
		}
		d.Members = append(d.Members, c.Tag)
		sort.Strings(d.Members)
		st.TopologyEtag = int64(index)
	case opSetSetting:
		d, ok := st.Databases[strings.ToLower(c.Name)]
		if !ok {
			return Result{Err: "Database '" + c.Name + "' does not exist.", Kind: "missing"}
		}
		// Copy on write: readers share the old map.
		settings := map[string]json.RawMessage{}
		for k, v := range d.Settings {
			settings[k] = v
		}
		if len(c.Setting) == 0 || string(c.Setting) == "null" {
			delete(settings, c.Key)
		} else {
			settings[c.Key] = append(json.RawMessage(nil), c.Setting...)
		}
		d.Settings = settings
	case opSubCreate:
		if _, ok := st.Databases[strings.ToLower(c.Name)]; !ok {
			return Result{Err: "Database '" + c.Name + "' does not exist.", Kind: "missing"}
		}
		name := c.Key
		if name == "" {
			name = strconv.FormatUint(index, 10)
		}
		k := subscriptionKey(c.Name, name)
		if _, ok := st.Subscriptions[k]; ok {
			return Result{Err: "A subscription named '" + name + "' already exists.", Kind: "exists"}
		}
		st.Subscriptions[k] = &Subscription{Database: c.Name, Name: name, ID: int64(index), Data: append(json.RawMessage(nil), c.Setting...),
			Progress: append(json.RawMessage(nil), c.Expect...)}
		return Result{Value: int64(index)}
	case opSubUpdate:
		sub, ok := st.Subscriptions[subscriptionKey(c.Name, c.Key)]
		if !ok {
			return Result{Err: "Subscription '" + c.Key + "' does not exist.", Kind: "not_found"}
		}
		cp := *sub
		cp.Data = append(json.RawMessage(nil), c.Setting...)
		if c.Force { // a new starting point: the progress starts over
			cp.Progress = append(json.RawMessage(nil), c.Expect...)
		}
		st.Subscriptions[subscriptionKey(c.Name, c.Key)] = &cp
		return Result{Value: sub.ID}
	case opSubProgress:
		sub, ok := st.Subscriptions[subscriptionKey(c.Name, c.Key)]
		if !ok {
			return Result{Err: "Subscription '" + c.Key + "' does not exist.", Kind: "not_found"}
		}
		if !bytes.Equal(sub.Progress, c.Expect) {
			return Result{Err: "Subscription '" + c.Key + "' moved on since this batch was read.", Kind: "conflict"}
		}
		cp := *sub
		cp.Progress = append(json.RawMessage(nil), c.Setting...)
		st.Subscriptions[subscriptionKey(c.Name, c.Key)] = &cp
		return Result{Value: sub.ID}
	case opSubDelete:
		k := subscriptionKey(c.Name, c.Key)
		if _, ok := st.Subscriptions[k]; !ok {
			return Result{Err: "Subscription '" + c.Key + "' does not exist.", Kind: "not_found"}
		}
		delete(st.Subscriptions, k)
	case opIdentityNext:
		if _, ok := st.Databases[strings.ToLower(c.Name)]; !ok {
			return Result{Err: "Database '" + c.Name + "' does not exist.", Kind: "missing"}
		}
		out := make([]int64, len(c.Prefixes))
		for i, p := range c.Prefixes {
			k := identityKey(c.Name, p)
			st.Identities[k]++
			out[i] = st.Identities[k]
		}
		return Result{Values: out}
	case opIdentityClaim:
		// A fresh value that is at least Value: the caller found Value free.
		if _, ok := st.Databases[strings.ToLower(c.Name)]; !ok {
			return Result{Err: "Database '" + c.Name + "' does not exist.", Kind: "missing"}
		}
		k := identityKey(c.Name, c.Prefix)
		v := max(st.Identities[k]+1, c.Value)
		st.Identities[k] = v
		return Result{Value: v}
	case opIdentitySeed:
		if _, ok := st.Databases[strings.ToLower(c.Name)]; !ok {
			return Result{Err: "Database '" + c.Name + "' does not exist.", Kind: "missing"}
		}
		k := identityKey(c.Name, c.Prefix)
		if c.Force || c.Value > st.Identities[k] {
			st.Identities[k] = c.Value
		}
		return Result{Value: st.Identities[k]}
	default:
		if fn, ok := appliers[c.Op]; ok {
			return fn(st, c, index)
		}
		return Result{Err: "unknown operation " + c.Op, Kind: "invalid"}
	}
	return Result{}
}

func without(list []string, tag string) []string {
	out := list[:0:0]
	for _, t := range list {
		if t != tag {
			out = append(out, t)
		}
	}
	return out
}

// Snapshot serialises the state (it is small).
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, err := marshalExact(f.st)
	if err != nil {
		return nil, err
	}
	return snapshot(b), nil
}

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st := newState()
	if err := json.NewDecoder(rc).Decode(st); err != nil {
		return fmt.Errorf("restore cluster state: %w", err)
	}
	if st.Nodes == nil {
		st.Nodes = map[string]*Node{}
	}
	if st.Databases == nil {
		st.Databases = map[string]*Database{}
	}
	if st.Identities == nil {
		st.Identities = map[string]int64{}
	}
	if st.Subscriptions == nil {
		st.Subscriptions = map[string]*Subscription{}
	}
	f.mu.Lock()
	f.st = st
	f.mu.Unlock()
	f.applied.Store(st.AppliedIndex)
	if f.onChange != nil {
		f.onChange()
	}
	return nil
}

type snapshot []byte

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s snapshot) Release() {}

// views for readers

func (f *fsm) nodes() []Node {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Node, 0, len(f.st.Nodes))
	for _, n := range f.st.Nodes {
		out = append(out, *n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tag < out[j].Tag })
	return out
}

func (f *fsm) databases() []Database {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Database, 0, len(f.st.Databases))
	for _, d := range f.st.Databases {
		c := *d
		c.Members = append([]string(nil), d.Members...)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (f *fsm) database(name string) (Database, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	d, ok := f.st.Databases[strings.ToLower(name)]
	if !ok {
		return Database{}, false
	}
	c := *d
	c.Members = append([]string(nil), d.Members...)
	return c, true
}

func (f *fsm) identities(db string) map[string]int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	prefix := strings.ToLower(db) + "/"
	out := map[string]int64{}
	for k, v := range f.st.Identities {
		if strings.HasPrefix(k, prefix) {
			out[k[len(prefix):]] = v
		}
	}
	return out
}

func (f *fsm) topologyEtag() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.TopologyEtag
}

func (f *fsm) subscription(db, name string) (Subscription, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.st.Subscriptions[subscriptionKey(db, name)]
	if !ok {
		return Subscription{}, false
	}
	return *s, true
}

func (f *fsm) subscriptions(db string) []Subscription {
	f.mu.RLock()
	defer f.mu.RUnlock()
	prefix := strings.ToLower(db) + "/"
	var out []Subscription
	for k, v := range f.st.Subscriptions {
		if strings.HasPrefix(k, prefix) {
			out = append(out, *v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
