package studio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/handlers/httpx"
	"github.com/rookerydb/rookery/views"
)

// peerStatusTimeout bounds how long the Cluster page waits for the other
// nodes' status: they are asked concurrently, so a page never waits longer.
const peerStatusTimeout = 300 * time.Millisecond

// clusterActionTimeout bounds an action forwarded to the leader (adding a
// voter waits for the new node to catch up).
const clusterActionTimeout = 15 * time.Second

// registerCluster adds the Cluster page: every node's Raft figures, live,
// and the membership actions (add, remove, step down).
func (s *Studio) registerCluster(g *echo.Group) {
	g.GET("/cluster", s.clusterPage)
	g.POST("/cluster/add", s.clusterAdd)
	g.POST("/cluster/remove", s.clusterRemove)
	g.POST("/cluster/stepdown", s.clusterStepDown)
	s.addLive("cluster", s.clusterLive, true)
}

// peerStatus is a node's GET /admin/cluster/status. LastContact and Leader
// are decoded loosely: a time or a duration, a tag or a URL.
type peerStatus struct {
	NodeTag      string
	State        string
	Term         uint64
	LastIndex    uint64
	CommitIndex  uint64
	AppliedIndex uint64
	LastContact  json.RawMessage
	Leader       json.RawMessage
}

// contactTime reads LastContact as an RFC 3339 time, a Go duration string
// ("120ms", meaning that long ago) or a number of milliseconds ago.
func contactTime(raw json.RawMessage, now time.Time) time.Time {
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		if str == "" {
			return time.Time{}
		}
		if t, err := time.Parse(time.RFC3339Nano, str); err == nil {
			if t.Year() <= 1 {
				return time.Time{}
			}
			return t
		}
		if d, err := time.ParseDuration(str); err == nil {
			return now.Add(-d)
		}
		return time.Time{}
	}
	var ms float64
	if json.Unmarshal(raw, &ms) == nil && ms > 0 {
		return now.Add(-time.Duration(ms * float64(time.Millisecond)))
	}
	return time.Time{}
}

// leaderTag reads Leader as a tag, a URL, or an object with a Tag.
func leaderTag(raw json.RawMessage, nodes []cluster.Node) string {
	var str string
	if json.Unmarshal(raw, &str) != nil {
		var obj struct{ Tag, NodeTag string }
		if json.Unmarshal(raw, &obj) != nil {
			return ""
		}
		return obj.Tag + obj.NodeTag
	}
	for _, n := range nodes {
		if str == n.URL && n.URL != "" {
			return n.Tag
		}
	}
	return str
}

func fetchPeer(ctx context.Context, nodes httpx.NodeClient, base string) (peerStatus, error) {
	var st peerStatus
	ctx, cancel := context.WithTimeout(ctx, peerStatusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/admin/cluster/status", nil)
	if err != nil {
		return st, err
	}
	resp, err := nodes.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status %d", resp.StatusCode)
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("unreadable status: %w", err)
	}
	return st, nil
}

// clusterData gathers the page: this node's Raft figures from its own Raft,
// every other node's from its status endpoint (asked concurrently, at most
// peerStatusTimeout).
func (s *Studio) clusterData(ctx context.Context) views.ClusterData {
	if s.Cluster == nil {
		return views.ClusterData{Self: s.NodeTag}
	}
	now := time.Now()
	st := s.Cluster.Status()
	nodes := s.Cluster.Nodes()
	d := views.ClusterData{Enabled: true, Self: st.Tag, LeaderTag: st.LeaderTag, SelfState: st.State}
	d.Election = st.LeaderTag == "" || st.State == "candidate"

	byTag := map[string]*views.ClusterNode{}
	var order []string
	row := func(tag string) *views.ClusterNode {
		if n, ok := byTag[tag]; ok {
			return n
		}
		n := &views.ClusterNode{Tag: tag, Self: tag == st.Tag}
		byTag[tag] = n
		order = append(order, tag)
		return n
	}
	for _, sv := range st.Servers {
		n := row(sv.Tag)
		n.RaftAddr, n.Suffrage, n.InConfig = sv.Address, sv.Suffrage, true
	}
	for _, nd := range nodes {
		n := row(nd.Tag)
		n.URL = nd.URL
		if n.RaftAddr == "" {
			n.RaftAddr = nd.RaftAddr
		}
		n.Known = true
	}
	if st.Tag != "" {
		row(st.Tag)
	}
	sort.Strings(order)

	var wg sync.WaitGroup
	for _, tag := range order {
		n := byTag[tag]
		if n.Self {
			n.Reachable = true
			n.Role, n.Term, n.LastIndex, n.Commit, n.Applied = st.State, st.Term, st.LastIndex, st.CommitIndex, st.Applied
			n.LastContact, n.SeesLeader = st.LastContact, st.LeaderTag
			if n.URL == "" && s.URL != nil {
				n.URL = s.URL()
			}
			continue
		}
		if n.URL == "" {
			n.Problem = "no HTTP URL known yet"
			continue
		}
		wg.Add(1)
		go func(n *views.ClusterNode) {
			defer wg.Done()
			ps, err := fetchPeer(ctx, s.peers(), n.URL)
			if err != nil {
				n.Problem = err.Error()
				return
			}
			n.Reachable = true
			n.Role, n.Term, n.LastIndex, n.Commit, n.Applied = strings.ToLower(ps.State), ps.Term, ps.LastIndex, ps.CommitIndex, ps.AppliedIndex
			n.LastContact = contactTime(ps.LastContact, now)
			n.SeesLeader = leaderTag(ps.Leader, nodes)
		}(n)
	}
	wg.Wait()

	for _, tag := range order {
		n := byTag[tag]
		switch {
		case !n.Reachable:
			n.State = "unreachable"
		case !n.InConfig:
			n.State = "not in configuration"
		default:
			n.State = n.Suffrage
		}
		if n.Role == "leader" {
			d.Leaders++
		}
		d.Nodes = append(d.Nodes, *n)
	}
	return d
}

func (s *Studio) clusterPage(c echo.Context) error {
	d := s.clusterData(c.Request().Context())
	return render(c, http.StatusOK, s.chrome(c, "Cluster", "", views.NavCluster, "cluster"), views.ClusterPage(d))
}

func (s *Studio) clusterLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	return []views.Fragment{{ID: "cluster-body", C: views.ClusterBody(s.clusterData(ctx))}}, nil
}

const clusterPath = "/studio/cluster"

func (s *Studio) clusterAdd(c echo.Context) error {
	n := cluster.Node{
		Tag:      strings.TrimSpace(c.FormValue("tag")),
		URL:      strings.TrimRight(strings.TrimSpace(c.FormValue("url")), "/"),
		RaftAddr: strings.TrimSpace(c.FormValue("raftAddr")),
	}
	if c.FormValue("confirm") != "yes" {
		return redirectFlash(c, clusterPath, "Tick the confirmation to add node "+n.Tag+"; nothing was changed.", true)
	}
	if s.Cluster == nil {
		return redirectFlash(c, clusterPath, "This node runs without a cluster; nothing was added.", true)
	}
	if err := cluster.ValidateNode(n); err != nil {
		return redirectFlash(c, clusterPath, err.Error()+"; nothing was changed.", true)
	}
	for _, m := range s.Cluster.Status().Servers {
		if m.Tag == n.Tag {
			return redirectFlash(c, clusterPath, "Node "+n.Tag+" is already a member; nothing was changed.", true)
		}
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), clusterActionTimeout)
	defer cancel()
	var (
		index uint64
		err   error
	)
	if s.Cluster.IsLeader() {
		index, err = s.Cluster.AddNonvoter(ctx, n)
	} else {
		body, _ := json.Marshal(map[string]string{"Tag": n.Tag, "Url": n.URL, "RaftAddr": n.RaftAddr})
		var out []byte
		out, err = s.toLeaderBody(ctx, "/admin/cluster/join", body)
		var r struct{ Index uint64 }
		_ = json.Unmarshal(out, &r)
		index = r.Index
	}
	if err != nil {
		return redirectFlash(c, clusterPath, "Adding node "+n.Tag+" failed: "+err.Error(), true)
	}
	// A voter only once it answers and has caught up: a wrong address must
	// not cost the cluster its quorum.
	for {
		st, ferr := fetchPeer(ctx, s.peers(), n.URL)
		if ferr == nil && st.NodeTag == n.Tag && st.AppliedIndex >= index {
			break
		}
		select {
		case <-ctx.Done():
			return redirectFlash(c, clusterPath, "Node "+n.Tag+" was added as a non-voting member, but it has not caught up with the cluster: check that it runs with --node-tag "+n.Tag+" at "+n.URL+" and that its Raft address "+n.RaftAddr+" is reachable. It becomes a voter when it is added again once it runs; or remove it.", true)
		case <-time.After(100 * time.Millisecond):
		}
	}
	// The node answered with its tag and has applied the join: this
	// node's copy of the state holds the nonce that proves it.
	if err := s.Cluster.WaitApplied(ctx, index); err != nil {
		return redirectFlash(c, clusterPath, "Node "+n.Tag+" caught up, but this node has not applied its join yet: "+err.Error(), true)
	}
	nonce := s.Cluster.JoinNonce(n.Tag)
	if s.Cluster.IsLeader() {
		err = s.Cluster.Promote(ctx, n.Tag, nonce)
	} else {
		body, _ := json.Marshal(map[string]string{"Nonce": nonce})
		_, err = s.toLeaderBody(ctx, "/admin/cluster/promote?tag="+url.QueryEscape(n.Tag), body)
	}
	if err != nil {
		return redirectFlash(c, clusterPath, "Node "+n.Tag+" caught up, but promoting it to a voter failed: "+err.Error(), true)
	}
	return redirectFlash(c, clusterPath, "Node "+n.Tag+" added as a voter.", false)
}

func (s *Studio) clusterRemove(c echo.Context) error {
	tag := strings.TrimSpace(c.FormValue("tag"))
	if tag == "" || c.FormValue("confirm") != tag {
		return redirectFlash(c, clusterPath, "Type the node's tag exactly to remove it; nothing was removed.", true)
	}
	if s.Cluster == nil {
		return redirectFlash(c, clusterPath, "This node runs without a cluster; nothing was removed.", true)
	}
	found := false
	for _, m := range s.Cluster.Status().Servers {
		found = found || m.Tag == tag
	}
	for _, m := range s.Cluster.Nodes() {
		found = found || m.Tag == tag
	}
	if !found {
		return redirectFlash(c, clusterPath, "There is no node "+tag+" in the cluster; nothing was removed.", true)
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), clusterActionTimeout)
	defer cancel()
	var err error
	if s.Cluster.IsLeader() {
		err = s.Cluster.RemoveNode(ctx, tag)
	} else {
		err = s.toLeader(ctx, "/admin/cluster/remove?tag="+url.QueryEscape(tag), nil)
	}
	if err != nil {
		return redirectFlash(c, clusterPath, "Removing node "+tag+" failed: "+err.Error(), true)
	}
	return redirectFlash(c, clusterPath, "Node "+tag+" removed from the cluster.", false)
}

func (s *Studio) clusterStepDown(c echo.Context) error {
	if c.FormValue("confirm") != "yes" {
		return redirectFlash(c, clusterPath, "Tick the confirmation to step the leader down; nothing was changed.", true)
	}
	if s.Cluster == nil {
		return redirectFlash(c, clusterPath, "This node runs without a cluster; there is no leader to step down.", true)
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), clusterActionTimeout)
	defer cancel()
	from, _ := s.Cluster.Leader()
	var err error
	if s.Cluster.IsLeader() {
		err = s.Cluster.StepDown()
	} else {
		err = s.toLeader(ctx, "/admin/cluster/stepdown", nil)
	}
	if err != nil {
		return redirectFlash(c, clusterPath, "Step down failed: "+err.Error(), true)
	}
	// Show the new leader on the page the browser lands on.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if tag, _ := s.Cluster.Leader(); tag != "" && tag != from {
			return redirectFlash(c, clusterPath, "Leader "+from+" stepped down; "+tag+" leads now.", false)
		}
		select {
		case <-ctx.Done():
			deadline = time.Time{}
		case <-time.After(20 * time.Millisecond):
		}
	}
	return redirectFlash(c, clusterPath, "Leader "+from+" stepped down; an election is under way.", false)
}

// toLeader POSTs to the leader's admin endpoint (this node is a follower).
func (s *Studio) toLeader(ctx context.Context, pathAndQuery string, body []byte) error {
	_, err := s.toLeaderBody(ctx, pathAndQuery, body)
	return err
}

// toLeaderBody is toLeader returning the leader's answer.
func (s *Studio) toLeaderBody(ctx context.Context, pathAndQuery string, body []byte) ([]byte, error) {
	tag, base := s.Cluster.Leader()
	if tag == "" {
		return nil, errors.New("no leader is known right now (an election is in progress); try again in a moment")
	}
	if base == "" {
		return nil, fmt.Errorf("the leader %s has no HTTP URL in the node list yet; try again in a moment", tag)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+pathAndQuery, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.peers().Do(req)
	if err != nil {
		return nil, fmt.Errorf("the leader %s at %s did not answer: %w", tag, base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	}
	return nil, fmt.Errorf("the leader %s answered %d: %s", tag, resp.StatusCode, httpx.ErrorText(resp.Body))
}
