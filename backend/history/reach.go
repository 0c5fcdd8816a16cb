package history

import (
	"sort"
	"sync"
	"time"
)

// NodeState is what this node last saw of another node: whether it
// answers, since when that is so, and the role it reported.
type NodeState struct {
	Tag string
	// Checked is false until the node has been asked once.
	Checked   bool
	Reachable bool
	// Since is when the node became reachable or unreachable (the first
	// check that saw it so, after the last change).
	Since time.Time
	// LastSeen is the last time it answered (zero if never).
	LastSeen time.Time
	// Role is what it said it is (leader, follower, candidate) when it
	// last answered.
	Role string
	// Problem is why the last check failed.
	Problem string
}

// Reachability records the answers to this node's checks of the others.
type Reachability struct {
	mu    sync.Mutex
	nodes map[string]*NodeState
	// onChange, when set, is called (outside the lock) when a node
	// becomes reachable or unreachable.
	onChange func(NodeState)
}

// OnChange registers fn to run when a node's reachability changes. Set it
// before use.
func (r *Reachability) OnChange(fn func(NodeState)) { r.onChange = fn }

// Observe records one check of a node: ok when it answered, with the role
// it reported; otherwise problem says why not.
func (r *Reachability) Observe(tag string, ok bool, role, problem string, at time.Time) {
	r.mu.Lock()
	if r.nodes == nil {
		r.nodes = map[string]*NodeState{}
	}
	n := r.nodes[tag]
	if n == nil {
		n = &NodeState{Tag: tag}
		r.nodes[tag] = n
	}
	changed := !n.Checked || n.Reachable != ok
	if changed {
		n.Since = at
	}
	n.Checked, n.Reachable = true, ok
	if ok {
		n.LastSeen, n.Role, n.Problem = at, role, ""
	} else {
		n.Problem = problem
	}
	st := *n
	fn := r.onChange
	r.mu.Unlock()
	if changed && fn != nil {
		fn(st)
	}
}

// State is what is known of a node (Checked false when nothing).
func (r *Reachability) State(tag string) NodeState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.nodes[tag]; n != nil {
		return *n
	}
	return NodeState{Tag: tag}
}

// All are the nodes checked so far, by tag.
func (r *Reachability) All() []NodeState {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]NodeState, 0, len(r.nodes))
	for _, n := range r.nodes {
		out = append(out, *n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tag < out[j].Tag })
	return out
}

// Forget drops the nodes not in keep (removed from the cluster).
func (r *Reachability) Forget(keep map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for tag := range r.nodes {
		if !keep[tag] {
			delete(r.nodes, tag)
		}
	}
}
