package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/handlers/httpx"
)

// topologyEtag tells a client whose topology is older than the cluster's to
// fetch it again (Refresh-Topology), as RavenDB does.
func (a *API) topologyEtag(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if h := c.Request().Header.Get("Topology-Etag"); h != "" {
			if n, err := strconv.ParseInt(unquote(h), 10, 64); err == nil && n < a.Cluster.TopologyEtag() {
				c.Response().Header().Set("Refresh-Topology", "true")
			}
		}
		return next(c)
	}
}

func (a *API) clusterStatus(c echo.Context) error {
	st := a.Cluster.Status()
	type node struct{ Tag, Url, RaftAddr, Suffrage string }
	urls := map[string]string{}
	for _, n := range a.Cluster.Nodes() {
		urls[n.Tag] = n.URL
	}
	var nodes []node
	for _, s := range st.Servers {
		nodes = append(nodes, node{Tag: s.Tag, Url: urls[s.Tag], RaftAddr: s.Address, Suffrage: s.Suffrage})
	}
	var lastContact any
	if !st.LastContact.IsZero() {
		lastContact = st.LastContact.UTC().Format(time.RFC3339Nano)
	}
	return writeJSON(c, http.StatusOK, map[string]any{
		"NodeTag": st.Tag, "State": st.State, "Term": st.Term, "LastIndex": st.LastIndex,
		"CommitIndex": st.CommitIndex, "AppliedIndex": st.Applied, "LastContact": lastContact,
		"Leader": st.LeaderTag, "Nodes": nodes,
	})
}

// nextTag proposes the tag for a node that joins without one.
func (a *API) nextTag(c echo.Context) error {
	taken := map[string]bool{}
	for _, n := range a.Cluster.Nodes() {
		taken[n.Tag] = true
	}
	for _, s := range a.Cluster.Status().Servers {
		taken[s.Tag] = true
	}
	a.proposedMu.Lock()
	defer a.proposedMu.Unlock()
	if a.proposed == nil {
		a.proposed = map[string]time.Time{}
	}
	for tag, at := range a.proposed {
		if time.Since(at) < time.Minute {
			taken[tag] = true
		} else {
			delete(a.proposed, tag)
		}
	}
	for ch := 'A'; ch <= 'Z'; ch++ {
		if !taken[string(ch)] {
			a.proposed[string(ch)] = time.Now()
			return writeJSON(c, http.StatusOK, map[string]string{"Tag": string(ch)})
		}
	}
	return dberr.New(dberr.InvalidOperation, "no free node tag A-Z left")
}

// toLeader re-sends a request to the leader when this node does not lead.
func (a *API) toLeader(c echo.Context, body []byte) (bool, error) {
	if a.Cluster.IsLeader() {
		return false, nil
	}
	_, url := a.Cluster.Leader()
	if url == "" {
		return true, cluster.ErrNoQuorum
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), forwardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, c.Request().Method, url+c.Request().URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return true, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.nodes().Do(req)
	if err != nil {
		return true, &dberr.Error{Kind: dberr.Unavailable, Msg: "the leader did not answer: " + err.Error()}
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return true, c.Blob(resp.StatusCode, echo.MIMEApplicationJSONCharsetUTF8, out)
}

// forwardTimeout bounds a request forwarded to the leader (adding a node
// waits for the configuration change to commit).
const forwardTimeout = 15 * time.Second

// joinRequest is what a joining node sends: its tag, URL, Raft address
// and, on a secured cluster, its certificate.
type joinRequest struct{ Tag, Url, RaftAddr, Certificate string }

// clusterJoin adds a node as a non-voting member: {"Tag","Url","RaftAddr"}.
// It answers the log index the node must apply before it asks to be
// promoted (POST /admin/cluster/promote), and, on an unsecured cluster, the
// cluster's secret that its Raft port and node-to-node requests need.
func (a *API) clusterJoin(c echo.Context) error {
	body, err := readBody(c, 1<<16, "Invalid join request")
	if err != nil {
		return err
	}
	if done, err := a.toLeader(c, body); done {
		return err
	}
	var n joinRequest
	if err := json.Unmarshal(body, &n); err != nil {
		return dberr.New(dberr.BadRequest, "Invalid body: expected {\"Tag\",\"Url\",\"RaftAddr\"}: %v", err)
	}
	// AddNonvoter validates the node as the state machine will.
	index, err := a.Cluster.AddNonvoter(c.Request().Context(), cluster.Node{Tag: n.Tag, URL: strings.TrimRight(n.Url, "/"), RaftAddr: n.RaftAddr, Certificate: n.Certificate})
	if err != nil {
		return err
	}
	// A new node holds every database that lives on all nodes.
	for _, d := range a.Cluster.Databases() {
		if d.ReplicationFactor == 0 {
			if _, err := a.Cluster.AddMember(c.Request().Context(), d.Name, n.Tag); err != nil {
				return err
			}
		}
	}
	out := map[string]any{"Tag": n.Tag, "Index": index}
	if a.ClusterSecret != nil {
		if s := a.ClusterSecret(); s != "" {
			out["ClusterSecret"] = s
		}
	}
	return writeJSON(c, http.StatusOK, out)
}

// clusterPromote makes a non-voting member a voter once it caught up:
// POST /admin/cluster/promote?tag= with {"Nonce"}, the nonce the leader
// recorded when the node joined, which the node read from its own state.
func (a *API) clusterPromote(c echo.Context) error {
	body, err := readBody(c, 1<<10, "promote")
	if err != nil {
		return err
	}
	if done, err := a.toLeader(c, body); done {
		return err
	}
	tag, err := requiredParam(c, "tag")
	if err != nil {
		return err
	}
	var req struct{ Nonce string }
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return dberr.New(dberr.BadRequest, "Invalid body: expected {\"Nonce\"}: %v", err)
		}
	}
	if err := a.Cluster.Promote(c.Request().Context(), tag, req.Nonce); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]string{"Promoted": tag})
}

func (a *API) clusterRemove(c echo.Context) error {
	if done, err := a.toLeader(c, nil); done {
		return err
	}
	tag, err := requiredParam(c, "tag")
	if err != nil {
		return err
	}
	if err := a.Cluster.RemoveNode(c.Request().Context(), tag); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]string{"Removed": tag})
}

func (a *API) clusterStepDown(c echo.Context) error {
	if done, err := a.toLeader(c, nil); done {
		return err
	}
	if err := a.Cluster.StepDown(); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]string{"SteppedDown": a.NodeTag})
}

// clusterApply is the leader's side of forwarding: a follower sends the
// encoded command, the leader commits it and answers the Result.
func (a *API) clusterApply(c echo.Context) error {
	body, err := readBody(c, 16<<20, "Invalid forwarded command") // the largest body that becomes a command (a solver script) fits
	if err != nil {
		return err
	}
	r, err := a.Cluster.ApplyEncoded(body)
	if err != nil && r.Err == "" {
		return err // refused before the log (invalid, no longer the leader)
	}
	// Errors of the command itself travel inside the Result.
	b, _ := json.Marshal(r)
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSONCharsetUTF8, b)
}

// Forward is the cluster's forwarder: it posts an encoded command to the
// leader's /internal/cluster/apply with this node's credentials.
func Forward(nodes httpx.NodeClient) func(ctx context.Context, leaderURL string, cmd []byte) ([]byte, error) {
	return func(ctx context.Context, leaderURL string, cmd []byte) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, leaderURL+"/internal/cluster/apply", bytes.NewReader(cmd))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := nodes.Do(req)
		if err != nil {
			return nil, &dberr.Error{Kind: dberr.Unavailable, Msg: "the leader did not answer: " + err.Error()}
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return nil, &dberr.Error{Kind: dberr.Unavailable, Msg: err.Error()}
		}
		if resp.StatusCode == http.StatusBadRequest {
			var env struct{ Message string }
			_ = json.Unmarshal(body, &env)
			return nil, dberr.New(dberr.BadRequest, "%s", env.Message)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, &dberr.Error{Kind: dberr.Unavailable, Msg: fmt.Sprintf("the leader answered %d: %.200s", resp.StatusCode, body)}
		}
		return body, nil
	}
}

// membersFor picks the nodes of a new database: all of them by default,
// or rf of them starting with this node.
func (a *API) membersFor(rf int) []string { return a.Cluster.MembersFor(a.NodeTag, rf) }
