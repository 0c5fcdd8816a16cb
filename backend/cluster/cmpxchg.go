package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/names"
)

// Compare-exchange values and cluster-wide transactions (see DESIGN.md,
// "Compare-exchange and cluster transactions"). A value's index is the log
// index of the entry that last wrote it; a write names the index it
// expects (0: the key must not exist) and fails when the key moved on. A
// cluster transaction is one entry: its compare-exchange writes and the
// atomic guards of its documents are checked together when it is applied,
// and either all of it happens or none of it.
const (
	opCmpXchgPut    = "cmpxchg_put"
	opCmpXchgDelete = "cmpxchg_delete"
	opCmpXchgImport = "cmpxchg_import"
	opClusterTx     = "cluster_tx"

	// MaxCmpXchgKeyBytes bounds a compare-exchange key.
	MaxCmpXchgKeyBytes = 512
	// maxTxOps bounds the values and documents of one cluster transaction.
	maxTxOps = 10_000
	// AtomicGuardPrefix starts the keys of the guards RavenDB-style cluster
	// transactions keep for the documents they write.
	AtomicGuardPrefix = "rvn-atomic/"
	// maxPendingTxs and maxPendingTxBytes bound the cluster transactions a
	// database keeps in the state for its copies to apply (older ones reach
	// a lagging copy through replication instead).
	maxPendingTxs     = 256
	maxPendingTxBytes = 8 << 20
	// maxRequests is how many raft-request-ids the state remembers, so a
	// retry gets the first answer instead of applying twice.
	maxRequests = 1024
)

// CmpXchgValue is a compare-exchange value: the key as first written, the
// index of its last write, and the stored JSON ({"Object": …,
// "@metadata": …}). A guard of a document deleted by a cluster
// transaction is kept, marked Deleted, so a stale session cannot bring the
// document back.
type CmpXchgValue struct {
	Key     string
	Index   uint64
	Value   json.RawMessage `json:",omitempty"`
	Deleted bool            `json:",omitempty"`
}

// CmpXchgOp is one compare-exchange write: put Value, or delete, if the
// key's index is Index (0: the key must not exist, for a put).
type CmpXchgOp struct {
	Key    string
	Index  uint64          `json:",omitempty"`
	Value  json.RawMessage `json:",omitempty"`
	Delete bool            `json:",omitempty"`
}

// TxDoc is a document written by a cluster transaction, in its stored form.
// Guard is the index of the document's atomic guard the writer saw (the
// RAFT entry of the change vector it loaded; 0 for a new document).
type TxDoc struct {
	ID         string
	Delete     bool   `json:",omitempty"`
	Collection string `json:",omitempty"`
	Body       []byte `json:",omitempty"`
	Guard      uint64 `json:",omitempty"`
}

// CmpXchgCommand is the content of the compare-exchange commands.
type CmpXchgCommand struct {
	// RequestID is the client's raft-request-id: a retry with the same id
	// gets the first answer.
	RequestID string      `json:",omitempty"`
	Ops       []CmpXchgOp `json:",omitempty"`
	Docs      []TxDoc     `json:",omitempty"`
	// Time is when the transaction was made; every copy stamps its
	// documents with it.
	Time time.Time `json:",omitempty"`
	// NoGuards disables the atomic guards (disableAtomicDocumentWrites).
	NoGuards bool `json:",omitempty"`
}

// CmpXchgResult is what a compare-exchange command did: whether it
// succeeded, the key's index afterwards (or, when it failed, its current
// index) and its value.
type CmpXchgResult struct {
	Successful bool
	Index      uint64
	Value      json.RawMessage `json:",omitempty"`
}

// ClusterTx is a committed cluster transaction's documents, kept for the
// database's copies to write in log order.
type ClusterTx struct {
	Index uint64
	Time  time.Time
	Docs  []TxDoc
	Size  int `json:",omitempty"`
}

// CmpXchgState is the compare-exchange part of the cluster state.
type CmpXchgState struct {
	// Values by "db/key", both lower-cased.
	Values map[string]*CmpXchgValue `json:",omitempty"`
	// Txs are the recent cluster transactions with documents, by
	// lower-cased database.
	Txs map[string][]ClusterTx `json:",omitempty"`
	// Requests are the results of recent commands by raft-request-id;
	// RequestOrder is their order, oldest first.
	Requests     map[string]Result `json:",omitempty"`
	RequestOrder []string          `json:",omitempty"`
}

func cmpXchgKey(db, key string) string { return strings.ToLower(db) + "/" + strings.ToLower(key) }

// ClusterTxDBID is the database id of the RAFT entry in the change vectors
// of documents written by cluster transactions: derived from the database
// name, so every copy writes the same vector.
func ClusterTxDBID(db string) string {
	sum := sha256.Sum256([]byte("rookery cluster transactions/" + strings.ToLower(db)))
	return base64.RawStdEncoding.EncodeToString(sum[:16])
}

// ClusterTxTag is the node tag of that entry.
const ClusterTxTag = "RAFT"

func (st *state) cmpxchg() *CmpXchgState {
	if st.CmpXchg == nil {
		st.CmpXchg = &CmpXchgState{}
	}
	s := st.CmpXchg
	if s.Values == nil {
		s.Values = map[string]*CmpXchgValue{}
	}
	if s.Txs == nil {
		s.Txs = map[string][]ClusterTx{}
	}
	if s.Requests == nil {
		s.Requests = map[string]Result{}
	}
	return s
}

func dropCmpXchg(st *state, db string) {
	if st.CmpXchg == nil {
		return
	}
	prefix := strings.ToLower(db) + "/"
	for k := range st.CmpXchg.Values {
		if strings.HasPrefix(k, prefix) {
			delete(st.CmpXchg.Values, k)
		}
	}
	delete(st.CmpXchg.Txs, strings.ToLower(db))
}

// ValidCmpXchgKey checks a compare-exchange key.
func ValidCmpXchgKey(key string) error {
	if key == "" || len(key) > MaxCmpXchgKeyBytes || !utf8.ValidString(key) {
		return dberr.New(dberr.BadRequest, "a compare exchange key is 1 to %d bytes of UTF-8, not %q", MaxCmpXchgKeyBytes, names.Clip(key, 80))
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return dberr.New(dberr.BadRequest, "a compare exchange key has no control characters: %q", names.Clip(key, 80))
		}
	}
	return nil
}

func validCmpXchgValue(v json.RawMessage) error {
	if len(v) == 0 || v[0] != '{' || len(v) > maxCommandBytes || !json.Valid(v) {
		return dberr.New(dberr.BadRequest, "a compare exchange value is a JSON object")
	}
	return nil
}

func init() {
	check := func(c *Command) error {
		if err := names.Database(c.Name); err != nil {
			return err
		}
		x := c.CmpXchg
		if x == nil {
			return dberr.New(dberr.BadRequest, "invalid cluster command %q: no content", c.Op)
		}
		if len(x.RequestID) > 128 {
			return dberr.New(dberr.BadRequest, "a raft-request-id is at most 128 bytes")
		}
		if len(x.Ops)+len(x.Docs) > maxTxOps {
			return dberr.New(dberr.BadRequest, "a cluster transaction has at most %d commands", maxTxOps)
		}
		switch c.Op {
		case opCmpXchgPut, opCmpXchgDelete:
			if len(x.Ops) != 1 || len(x.Docs) != 0 {
				return dberr.New(dberr.BadRequest, "invalid cluster command %q: one value", c.Op)
			}
		case opCmpXchgImport:
			if len(x.Docs) != 0 {
				return dberr.New(dberr.BadRequest, "invalid cluster command %q: values only", c.Op)
			}
		}
		seen := map[string]bool{}
		for _, op := range x.Ops {
			if err := ValidCmpXchgKey(op.Key); err != nil {
				return err
			}
			k := strings.ToLower(op.Key)
			if seen[k] {
				return dberr.New(dberr.BadRequest, "compare exchange key '%s' appears twice in one transaction", names.Clip(op.Key, 80))
			}
			seen[k] = true
			if (c.Op == opCmpXchgPut || c.Op == opCmpXchgDelete) && op.Delete != (c.Op == opCmpXchgDelete) {
				return dberr.New(dberr.BadRequest, "invalid cluster command %q: put or delete", c.Op)
			}
			if !op.Delete {
				if err := validCmpXchgValue(op.Value); err != nil {
					return err
				}
			}
		}
		docs := map[string]bool{}
		for _, d := range x.Docs {
			if d.ID == "" || len(d.ID) > 2048 || !utf8.ValidString(d.ID) {
				return dberr.New(dberr.BadRequest, "a cluster transaction's document needs a complete id")
			}
			k := strings.ToLower(d.ID)
			if docs[k] {
				return dberr.New(dberr.BadRequest, "document '%s' appears twice in one cluster transaction", names.Clip(d.ID, 80))
			}
			docs[k] = true
			if !d.Delete && len(d.Body) == 0 {
				return dberr.New(dberr.BadRequest, "document '%s' has no body", names.Clip(d.ID, 80))
			}
		}
		return nil
	}
	for _, op := range []string{opCmpXchgPut, opCmpXchgDelete, opCmpXchgImport, opClusterTx} {
		validators[op] = check
	}
	appliers[opCmpXchgPut] = applyCmpXchg
	appliers[opCmpXchgDelete] = applyCmpXchg
	appliers[opCmpXchgImport] = applyCmpXchg
	appliers[opClusterTx] = applyCmpXchg
}

// applyCmpXchg applies the four commands; a known request id returns the
// first answer.
func applyCmpXchg(st *state, c *Command, index uint64) Result {
	s := st.cmpxchg()
	x := c.CmpXchg
	if x.RequestID != "" {
		if r, ok := s.Requests[x.RequestID]; ok {
			return retried(s, c, r)
		}
	}
	r := applyCmpXchgOnce(st, s, c, index)
	if x.RequestID != "" {
		// Kept without the value (up to a megabyte each): a retry gets it
		// back from its own request or the current state.
		kept := r
		if r.CmpXchg != nil {
			cx := *r.CmpXchg
			cx.Value = nil
			kept.CmpXchg = &cx
		}
		kept.Index = index
		s.Requests[x.RequestID] = kept
		s.RequestOrder = append(s.RequestOrder, x.RequestID)
		for len(s.RequestOrder) > maxRequests {
			delete(s.Requests, s.RequestOrder[0])
			s.RequestOrder = s.RequestOrder[1:]
		}
	}
	return r
}

// retried is the first answer to a request id again: a successful put's
// value is the request's own, any other value the key's current one.
func retried(s *CmpXchgState, c *Command, r Result) Result {
	if r.CmpXchg == nil || len(c.CmpXchg.Ops) != 1 || c.Op == opClusterTx {
		return r
	}
	cx := *r.CmpXchg
	op := c.CmpXchg.Ops[0]
	if cx.Successful && !op.Delete {
		cx.Value = op.Value
	} else if cur, ok := s.Values[cmpXchgKey(c.Name, op.Key)]; ok && !cur.Deleted {
		cx.Value = cur.Value
	}
	r.CmpXchg = &cx
	return r
}

func applyCmpXchgOnce(st *state, s *CmpXchgState, c *Command, index uint64) Result {
	if _, ok := st.Databases[strings.ToLower(c.Name)]; !ok {
		return Result{Err: "Database '" + c.Name + "' does not exist.", Kind: "missing"}
	}
	x := c.CmpXchg
	switch c.Op {
	case opCmpXchgPut, opCmpXchgDelete:
		op := x.Ops[0]
		k := cmpXchgKey(c.Name, op.Key)
		cur := s.Values[k]
		if cur != nil && cur.Deleted {
			cur = nil
		}
		switch {
		case !op.Delete && (cur == nil && op.Index == 0 || cur != nil && cur.Index == op.Index):
			key := op.Key
			if cur != nil {
				key = cur.Key
			}
			s.Values[k] = &CmpXchgValue{Key: key, Index: index, Value: append(json.RawMessage(nil), op.Value...)}
			return Result{CmpXchg: &CmpXchgResult{Successful: true, Index: index, Value: op.Value}}
		case op.Delete && cur != nil && cur.Index == op.Index:
			delete(s.Values, k)
			return Result{CmpXchg: &CmpXchgResult{Successful: true, Index: index, Value: cur.Value}}
		case cur != nil:
			return Result{CmpXchg: &CmpXchgResult{Index: cur.Index, Value: cur.Value}}
		}
		// Missing: the index the key would need is 0; the answer names
		// this entry's (clients refuse an index of 0).
		return Result{CmpXchg: &CmpXchgResult{Index: index}}
	case opCmpXchgImport:
		for _, op := range x.Ops {
			k := cmpXchgKey(c.Name, op.Key)
			if op.Delete {
				delete(s.Values, k)
				continue
			}
			s.Values[k] = &CmpXchgValue{Key: op.Key, Index: index, Value: append(json.RawMessage(nil), op.Value...)}
		}
		return Result{Value: int64(len(x.Ops))}
	}
	// A cluster transaction: check everything, then apply everything.
	var problems []string
	for _, op := range x.Ops {
		cur := s.Values[cmpXchgKey(c.Name, op.Key)]
		if cur != nil && cur.Deleted {
			cur = nil
		}
		switch {
		case op.Delete && cur == nil:
			problems = append(problems, fmt.Sprintf("Could not delete compare exchange value '%s': it does not exist", op.Key))
		case op.Delete && cur.Index != op.Index:
			problems = append(problems, fmt.Sprintf("Could not delete compare exchange value '%s': its index is %d, the request expected %d", op.Key, cur.Index, op.Index))
		case !op.Delete && cur == nil && op.Index != 0:
			problems = append(problems, fmt.Sprintf("Could not update compare exchange value '%s': it does not exist (the request expected index %d)", op.Key, op.Index))
		case !op.Delete && cur != nil && cur.Index != op.Index:
			problems = append(problems, fmt.Sprintf("Could not put compare exchange value '%s': its index is %d, the request expected %d", op.Key, cur.Index, op.Index))
		}
	}
	if !x.NoGuards {
		for _, d := range x.Docs {
			g := s.Values[cmpXchgKey(c.Name, AtomicGuardPrefix+d.ID)]
			// A delete that names no version is unconditional, as outside
			// cluster transactions.
			if g != nil && !(d.Delete && d.Guard == 0) && !guardPasses(g, d.Guard) {
				problems = append(problems, fmt.Sprintf("Guard compare exchange value '%s%s' has index %d, but the document was written with index %d", AtomicGuardPrefix, strings.ToLower(d.ID), g.Index, d.Guard))
			}
		}
	}
	if len(problems) > 0 {
		return Result{Err: "Failed to execute cluster transaction due to the following issues: " + strings.Join(problems, "; "), Kind: "conflict"}
	}
	for _, op := range x.Ops {
		k := cmpXchgKey(c.Name, op.Key)
		if op.Delete {
			delete(s.Values, k)
			continue
		}
		key := op.Key
		if cur := s.Values[k]; cur != nil && !cur.Deleted {
			key = cur.Key
		}
		s.Values[k] = &CmpXchgValue{Key: key, Index: index, Value: append(json.RawMessage(nil), op.Value...)}
	}
	if !x.NoGuards {
		for _, d := range x.Docs {
			key := AtomicGuardPrefix + strings.ToLower(d.ID)
			v := &CmpXchgValue{Key: key, Index: index, Value: json.RawMessage(`{"Object":{"Id":` + jsonString(d.ID) + `}}`)}
			if d.Delete {
				v.Value, v.Deleted = nil, true
			}
			s.Values[cmpXchgKey(c.Name, key)] = v
		}
	}
	if len(x.Docs) > 0 {
		db := strings.ToLower(c.Name)
		size := 0
		docs := make([]TxDoc, len(x.Docs))
		for i, d := range x.Docs {
			docs[i] = d
			docs[i].Body = append([]byte(nil), d.Body...)
			size += len(d.Body) + len(d.ID) + 64
		}
		txs := append(s.Txs[db], ClusterTx{Index: index, Time: x.Time, Docs: docs, Size: size})
		total := 0
		for _, t := range txs {
			total += t.Size
		}
		for len(txs) > 1 && (len(txs) > maxPendingTxs || total > maxPendingTxBytes) {
			total -= txs[0].Size
			txs = txs[1:]
		}
		s.Txs[db] = txs
	}
	return Result{Value: int64(index), CmpXchg: &CmpXchgResult{Successful: true, Index: index}}
}

// guardPasses tells whether a write that saw guard index seen may pass the
// document's guard g: a live guard needs the writer to have seen its
// index (a new document, seen 0, fails: the document exists); the guard of
// a deleted document lets a new document through, and a writer that saw
// the deletion or later.
func guardPasses(g *CmpXchgValue, seen uint64) bool {
	if g.Deleted {
		return seen == 0 || seen >= g.Index
	}
	return seen > 0 && seen >= g.Index
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// views

func (f *fsm) cmpXchgGet(db, key string) (CmpXchgValue, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.st.CmpXchg == nil {
		return CmpXchgValue{}, false
	}
	v, ok := f.st.CmpXchg.Values[cmpXchgKey(db, key)]
	if !ok || v.Deleted {
		return CmpXchgValue{}, false
	}
	return *v, true
}

func (f *fsm) cmpXchgList(db, prefix string, guards bool) []CmpXchgValue {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.st.CmpXchg == nil {
		return nil
	}
	p := cmpXchgKey(db, prefix)
	var out []CmpXchgValue
	for k, v := range f.st.CmpXchg.Values {
		if !strings.HasPrefix(k, p) || v.Deleted {
			continue
		}
		if !guards && strings.HasPrefix(strings.ToLower(v.Key), AtomicGuardPrefix) {
			continue
		}
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i].Key) < strings.ToLower(out[j].Key) })
	return out
}

func (f *fsm) clusterTxsAfter(db string, after uint64) []ClusterTx {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.st.CmpXchg == nil {
		return nil
	}
	var out []ClusterTx
	for _, t := range f.st.CmpXchg.Txs[strings.ToLower(db)] {
		if t.Index > after {
			out = append(out, t)
		}
	}
	return out
}

// CmpXchg reads a compare-exchange value of a database from this node's
// state.
func (c *Cluster) CmpXchg(db, key string) (CmpXchgValue, bool) { return c.fsm.cmpXchgGet(db, key) }

// CmpXchgList lists a database's compare-exchange values whose keys start
// with prefix (case-insensitive), sorted by key. Atomic guards are listed
// only when the prefix names them.
func (c *Cluster) CmpXchgList(db, prefix string) []CmpXchgValue {
	return c.fsm.cmpXchgList(db, prefix, strings.HasPrefix(strings.ToLower(prefix), AtomicGuardPrefix))
}

// CmpXchgAll lists every value of a database, atomic guards included (for
// an export).
func (c *Cluster) CmpXchgAll(db string) []CmpXchgValue { return c.fsm.cmpXchgList(db, "", true) }

// ClusterTxsAfter returns the database's kept cluster transactions after a
// log index, in log order.
func (c *Cluster) ClusterTxsAfter(db string, after uint64) []ClusterTx {
	return c.fsm.clusterTxsAfter(db, after)
}

// PutCmpXchg writes a compare-exchange value if the key's index is index
// (0: the key must not exist). A failed comparison is not an error: the
// result says Successful false and carries the current index and value.
func (c *Cluster) PutCmpXchg(ctx context.Context, db, key string, index uint64, value json.RawMessage, requestID string) (CmpXchgResult, error) {
	return c.cmpXchgOne(ctx, opCmpXchgPut, db, CmpXchgOp{Key: key, Index: index, Value: value}, requestID)
}

// DeleteCmpXchg deletes a compare-exchange value if its index is index.
func (c *Cluster) DeleteCmpXchg(ctx context.Context, db, key string, index uint64, requestID string) (CmpXchgResult, error) {
	return c.cmpXchgOne(ctx, opCmpXchgDelete, db, CmpXchgOp{Key: key, Index: index, Delete: true}, requestID)
}

func (c *Cluster) cmpXchgOne(ctx context.Context, op, db string, o CmpXchgOp, requestID string) (CmpXchgResult, error) {
	r, err := c.applyAndWait(ctx, Command{Op: op, Name: db, CmpXchg: &CmpXchgCommand{RequestID: requestID, Ops: []CmpXchgOp{o}}})
	if err != nil {
		return CmpXchgResult{}, err
	}
	if r.CmpXchg == nil {
		return CmpXchgResult{}, dberr.New(dberr.Internal, "compare exchange: no result")
	}
	return *r.CmpXchg, nil
}

// ImportCmpXchg sets values without comparing (an import); a value with
// Delete removes the key.
func (c *Cluster) ImportCmpXchg(ctx context.Context, db string, ops []CmpXchgOp) error {
	for len(ops) > 0 {
		n := min(len(ops), 512)
		if _, err := c.applyAndWait(ctx, Command{Op: opCmpXchgImport, Name: db, CmpXchg: &CmpXchgCommand{Ops: ops[:n]}}); err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}

// ClusterTransaction commits a cluster transaction. On success the result's
// Index is its log index (the documents' RAFT entry); a failed comparison
// is a dberr.Concurrency error and nothing was written.
func (c *Cluster) ClusterTransaction(ctx context.Context, db string, tx CmpXchgCommand) (Result, error) {
	return c.applyAndWait(ctx, Command{Op: opClusterTx, Name: db, CmpXchg: &tx})
}
