package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/storage"
)

// alertClock is the watchers' clock in these tests: it runs with real time
// plus whatever the test adds, so thresholds pass without waiting.
type alertClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *alertClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *alertClock) Add(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// aNode is a real node of these tests, restartable with its data.
type aNode struct {
	tag, dir, addr, raft, url, join string
	mod                             func(*Config)
	srv                             *Server
	done                            chan struct{}
}

func (n *aNode) start(t *testing.T, clk *alertClock) {
	t.Helper()
	l, err := net.Listen("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{HTTPAddr: n.addr, RaftAddr: n.raft, DataDir: n.dir, NodeTag: n.tag, Join: n.join, Replication: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ElectionTimeout: 150 * time.Millisecond, Now: clk.Now}
	if n.mod != nil {
		n.mod(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	n.srv, n.done = srv, make(chan struct{})
	go func() { srv.Serve(l); close(n.done) }()
}

func (n *aNode) stop() {
	if n.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n.srv.Shutdown(ctx)
	<-n.done
	n.srv = nil
}

// startAlertNodes starts a cluster of the given tags (the first
// bootstraps, the others join it) sharing one clock.
func startAlertNodes(t *testing.T, clk *alertClock, mod func(tag string, c *Config), tags ...string) []*aNode {
	t.Helper()
	base := t.TempDir()
	var nodes []*aNode
	for i, tag := range tags {
		addr := freePort(t)
		n := &aNode{tag: tag, dir: filepath.Join(base, tag), addr: addr, raft: freePort(t), url: "http://" + addr}
		if mod != nil {
			n.mod = func(c *Config) { mod(tag, c) }
		}
		if i > 0 {
			n.join = nodes[0].url
		}
		n.start(t, clk)
		nodes = append(nodes, n)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.stop()
		}
	})
	waitFor(t, "every node in the cluster with a leader", 20*time.Second, func() bool {
		for _, n := range nodes {
			tag, _ := n.srv.cluster.Leader()
			urls := 0
			for _, nd := range n.srv.cluster.Nodes() {
				if nd.URL != "" {
					urls++
				}
			}
			if tag == "" || urls != len(nodes) {
				return false
			}
		}
		return true
	})
	return nodes
}

// createAlertDB creates a database, retrying while a young cluster has
// no quorum yet (503).
func createAlertDB(t *testing.T, n *aNode, name string) {
	t.Helper()
	waitFor(t, "create "+name, 20*time.Second, func() bool {
		status, _ := acall(t, "PUT", n.url+"/admin/databases?name="+name, `{"DatabaseName":"`+name+`"}`)
		return status == 201
	})
	waitFor(t, name+" open", 10*time.Second, func() bool { _, err := n.srv.catalog.Get(name); return err == nil })
}

func waitFor(t *testing.T, what string, within time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// waitAlert waits until node n holds (or, with want false, no longer
// holds) the alert key, and returns it.
func waitAlert(t *testing.T, n *aNode, key string, want bool, within time.Duration) alerts.Alert {
	t.Helper()
	var a alerts.Alert
	waitFor(t, fmt.Sprintf("%s holds %s = %v", n.tag, key, want), within, func() bool {
		var ok bool
		a, ok = n.srv.alerts.Get(key)
		return ok == want
	})
	return a
}

func acall(t *testing.T, method, u, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

type notificationsJSON struct {
	Shown  int
	Alerts []alerts.Entry
	Nodes  []alerts.NodeState
}

func notifications(t *testing.T, n *aNode, hidden bool) notificationsJSON {
	t.Helper()
	status, b := acall(t, "GET", n.url+"/admin/notifications?hidden="+fmt.Sprint(hidden), "")
	if status != 200 {
		t.Fatalf("GET /admin/notifications: %d %s", status, b)
	}
	var out notificationsJSON
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func findEntry(list []alerts.Entry, key string) (alerts.Entry, bool) {
	for _, e := range list {
		if e.Key == key {
			return e, true
		}
	}
	return alerts.Entry{}, false
}

// conflictOn stores a version of id that is concurrent with the local one,
// as replication from another copy would deliver it.
func conflictOn(t *testing.T, n *aNode, db, id string, etag int) {
	t.Helper()
	d, err := n.srv.catalog.Get(db)
	if err != nil {
		t.Fatal(err)
	}
	status, b := acall(t, "PUT", n.url+"/databases/"+db+"/docs?id="+url.QueryEscape(id), `{"v":"local","@metadata":{"@collection":"Orders"}}`)
	if status != 201 {
		t.Fatalf("put %s: %d %s", id, status, b)
	}
	err = d.Write(context.Background(), func(tx *storage.Tx) error {
		_, err := tx.ApplyReplicated(storage.Item{Type: "Put", ID: id, Collection: "Orders", ChangeVector: fmt.Sprintf("Z:%d-Qfo6Xn1dQEeVq0mZ1W2yXg", etag),
			LastModified: time.Now().Add(time.Hour), Body: []byte(`{"v":"remote","@metadata":{"@collection":"Orders"}}`)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Conflicts raise one alert per database with the count, updated as the
// count moves and cleared once every conflict is resolved. Through the
// API: dismissed, it stays hidden while conflicts remain and comes back as
// a new alert after they were all resolved and new ones arrive; postponed
// for an hour, it shows again an hour later. The list, its dismissals and
// postponements survive a restart of the node.
func TestAlertConflicts(t *testing.T) {
	clk := &alertClock{}
	n := startAlertNodes(t, clk, nil, "A")[0]
	createAlertDB(t, n, "shop")
	post(t, n.url+"/admin/replication/conflicts/solver?name=shop", `{"ResolveToLatest":false}`)
	key := keyConflicts + "shop"

	conflictOn(t, n, "shop", "orders/1", 1)
	a := waitAlert(t, n, key, true, 5*time.Second)
	if a.Level != alerts.Warning || a.Title != "1 conflicted document in shop" || a.Link != "/studio/db/shop/conflicts" || a.Database != "shop" || a.Node != "A" {
		t.Fatalf("alert %+v", a)
	}
	conflictOn(t, n, "shop", "orders/2", 2)
	conflictOn(t, n, "shop", "orders/3", 3)
	waitFor(t, "the count moves to 3", 5*time.Second, func() bool {
		a, _ = n.srv.alerts.Get(key)
		return a.Title == "3 conflicted documents in shop"
	})
	if !strings.Contains(a.Message, "2 new since the last count (1)") || a.Count < 2 {
		t.Fatalf("updated alert %+v", a)
	}

	// The API lists it with its node; dismiss hides it while conflicts remain.
	list := notifications(t, n, false)
	e, ok := findEntry(list.Alerts, key)
	if !ok || strings.Join(e.Nodes, ",") != "A" || list.Shown < 1 || len(list.Nodes) != 1 || !list.Nodes[0].Reachable {
		t.Fatalf("GET /admin/notifications: %+v", list)
	}
	if status, b := acall(t, "POST", n.url+"/admin/notifications/dismiss?key="+url.QueryEscape(key), ""); status != 204 {
		t.Fatalf("dismiss: %d %s", status, b)
	}
	if _, ok := findEntry(notifications(t, n, false).Alerts, key); ok {
		t.Fatal("a dismissed alert is listed")
	}
	if e, ok := findEntry(notifications(t, n, true).Alerts, key); !ok || !e.Hidden || !e.Dismissed {
		t.Fatalf("with hidden=true: %+v", e)
	}
	// Bad input gets the envelope.
	for _, c := range []struct{ path, want string }{
		{"/admin/notifications/dismiss?key=nope", "no alert"},
		{"/admin/notifications/dismiss", "key is required"},
		{"/admin/notifications/postpone?key=" + url.QueryEscape(key) + "&for=forever", "not a duration"},
		{"/admin/notifications/postpone?key=" + url.QueryEscape(key) + "&for=400d", "at most 365 days"},
	} {
		status, b := acall(t, "POST", n.url+c.path, "")
		if (status != 400 && status != 404) || !strings.Contains(string(b), c.want) || !strings.Contains(string(b), `"Type"`) {
			t.Fatalf("%s: %d %s", c.path, status, b)
		}
	}

	// A real restart: the dismissed alert is still there, still hidden,
	// first seen when it was.
	before, _ := n.srv.alerts.Get(key)
	n.stop()
	n.start(t, clk)
	after, ok := n.srv.alerts.Get(key)
	if !ok || !after.Dismissed || !after.FirstSeen.Equal(before.FirstSeen) || after.Title != before.Title {
		t.Fatalf("after a restart: %+v (before %+v)", after, before)
	}

	// All resolved (a write resolves a conflict): cleared; new conflicts
	// raise a new, shown alert.
	for _, id := range []string{"orders/1", "orders/2", "orders/3"} {
		if status, b := acall(t, "PUT", n.url+"/databases/shop/docs?id="+id, `{"v":"fixed","@metadata":{"@collection":"Orders"}}`); status != 201 {
			t.Fatalf("resolve %s: %d %s", id, status, b)
		}
	}
	waitAlert(t, n, key, false, 5*time.Second)
	conflictOn(t, n, "shop", "orders/9", 9)
	a = waitAlert(t, n, key, true, 5*time.Second)
	if a.Dismissed || n.srv.alerts.Count() < 1 {
		t.Fatalf("a new conflict after the clear is hidden: %+v", a)
	}

	// Postponed for an hour: hidden, then shown again an hour later.
	if status, b := acall(t, "POST", n.url+"/admin/notifications/postpone?key="+url.QueryEscape(key)+"&for=1h", ""); status != 204 {
		t.Fatalf("postpone: %d %s", status, b)
	}
	if e, ok := findEntry(notifications(t, n, true).Alerts, key); !ok || !e.Hidden || e.Dismissed || e.PostponedUntil.IsZero() {
		t.Fatalf("postponed: %+v", e)
	}
	clk.Add(61 * time.Minute)
	waitFor(t, "shown again after the hour", 5*time.Second, func() bool {
		_, ok := findEntry(notifications(t, n, false).Alerts, key)
		return ok
	})
	// Restore after a dismissal.
	acall(t, "POST", n.url+"/admin/notifications/dismiss?key="+url.QueryEscape(key), "")
	if status, _ := acall(t, "POST", n.url+"/admin/notifications/restore?key="+url.QueryEscape(key), ""); status != 204 {
		t.Fatal("restore")
	}
	if _, ok := findEntry(notifications(t, n, false).Alerts, key); !ok {
		t.Fatal("restored alert not shown")
	}
	// A deleted database takes its alerts along.
	acall(t, "DELETE", n.url+"/admin/databases", `{"DatabaseNames":["shop"],"HardDelete":true}`)
	waitAlert(t, n, key, false, 5*time.Second)
}

// A three-node cluster: a node that stops answering raises "unreachable"
// on the others once the threshold has passed (not before), listed once
// with both observers; it clears when the node is back. A leader change
// raises an alert on every node, which clears after the window. An action
// on the list reaches every node that holds the alert.
func TestAlertNodesAndLeader(t *testing.T) {
	clk := &alertClock{}
	nodes := startAlertNodes(t, clk, nil, "A", "B", "C")
	a, b, c := nodes[0], nodes[1], nodes[2]

	// The leader steps down (once every node's watcher knows it): every
	// node sees the change.
	waitFor(t, "every watcher knows the leader", 10*time.Second, func() bool {
		for _, n := range nodes {
			n.srv.watchers.mu.Lock()
			known := n.srv.watchers.leaderKnown
			n.srv.watchers.mu.Unlock()
			if !known {
				return false
			}
		}
		return true
	})
	var leader *aNode
	for _, n := range nodes {
		if n.srv.cluster.IsLeader() {
			leader = n
		}
	}
	if err := leader.srv.cluster.StepDown(); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		var al alerts.Alert
		waitFor(t, n.tag+" sees the leader change", 10*time.Second, func() bool {
			al, _ = n.srv.alerts.Get(keyLeaderMoves)
			return strings.HasPrefix(al.Title, "Leader changed: node ")
		})
		if al.Link != "/studio/cluster" || strings.Contains(al.Title, leader.tag+" leads") || al.Level != alerts.Info || !strings.Contains(al.Message, "before it, node "+leader.tag) {
			t.Fatalf("%s: %+v", n.tag, al)
		}
	}
	g := a.srv.watchers.Gathered(context.Background())
	waitFor(t, "A gathers the others' leader alerts", 10*time.Second, func() bool {
		g = a.srv.watchers.Gathered(context.Background())
		e, ok := g.Find(keyLeaderMoves)
		return ok && strings.Join(e.Nodes, ",") == "A,B,C"
	})

	// C stops answering: no alert before the threshold, then one on A and B.
	c.stop()
	waitFor(t, "A's probe of C fails", 10*time.Second, func() bool {
		a.srv.watchers.mu.Lock()
		defer a.srv.watchers.mu.Unlock()
		p := a.srv.watchers.probes["C"]
		return p != nil && !p.failingSince.IsZero()
	})
	time.Sleep(1500 * time.Millisecond) // a tick or two
	if _, ok := a.srv.alerts.Get(keyNode + "C"); ok {
		t.Fatal("unreachable before the threshold")
	}
	clk.Add(DefaultAlertNodeUnreachable)
	for _, n := range []*aNode{a, b} {
		al := waitAlert(t, n, keyNode+"C", true, 10*time.Second)
		if al.Level != alerts.Error || al.Title != "Node C is unreachable" || !strings.Contains(al.Message, c.url) {
			t.Fatalf("%s: %+v", n.tag, al)
		}
	}
	// The replication senders to C fail too, but the node alert speaks for them.
	clk.Add(DefaultAlertReplicationError)
	time.Sleep(1500 * time.Millisecond)
	for _, al := range a.srv.alerts.All() {
		if strings.HasPrefix(al.Key, keyReplError) {
			t.Fatalf("a replication error beside the unreachable node: %+v", al)
		}
	}
	waitFor(t, "merged on A with both observers, C marked missing", 10*time.Second, func() bool {
		g = a.srv.watchers.Gathered(context.Background())
		e, ok := g.Find(keyNode + "C")
		missing := false
		for _, ns := range g.Nodes {
			missing = missing || (ns.Tag == "C" && !ns.Reachable && ns.Error != "")
		}
		return ok && strings.Join(e.Nodes, ",") == "A,B" && missing
	})

	// Dismiss on A reaches B too.
	if status, body := acall(t, "POST", a.url+"/admin/notifications/dismiss?key="+url.QueryEscape(keyNode+"C"), ""); status != 204 {
		t.Fatalf("dismiss: %d %s", status, body)
	}
	for _, n := range []*aNode{a, b} {
		if al, _ := n.srv.alerts.Get(keyNode + "C"); !al.Dismissed {
			t.Fatalf("not dismissed on %s", n.tag)
		}
	}

	// C is back: cleared on both.
	c.start(t, clk)
	for _, n := range []*aNode{a, b} {
		waitAlert(t, n, keyNode+"C", false, 15*time.Second)
	}

	// The leader alert clears after the window without another change.
	clk.Add(DefaultAlertLeaderWindow)
	for _, n := range nodes {
		waitAlert(t, n, keyLeaderMoves, false, 10*time.Second)
	}
}

// With two of three nodes down, the last one sees no leader and says the
// cluster has no quorum; the alert clears when a leader is back.
func TestAlertNoLeader(t *testing.T) {
	clk := &alertClock{}
	nodes := startAlertNodes(t, clk, nil, "A", "B", "C")
	a := nodes[0]
	nodes[1].stop()
	nodes[2].stop()
	waitFor(t, "A sees no leader", 20*time.Second, func() bool { tag, _ := a.srv.cluster.Leader(); return tag == "" })
	time.Sleep(1200 * time.Millisecond)
	clk.Add(DefaultAlertNodeUnreachable)
	al := waitAlert(t, a, keyNoLeader, true, 10*time.Second)
	if al.Level != alerts.Error || !strings.Contains(al.Title, "no quorum") {
		t.Fatalf("%+v", al)
	}
	nodes[1].start(t, clk)
	waitAlert(t, a, keyNoLeader, false, 20*time.Second)
}

// Replication to a node that answers but cannot be replicated to (its
// replication address is wrong) raises an error once the threshold has
// passed, naming the database and both nodes.
func TestAlertReplicationError(t *testing.T) {
	clk := &alertClock{}
	dead := freePort(t) // nothing listens there
	nodes := startAlertNodes(t, clk, func(tag string, c *Config) {
		if tag == "A" {
			c.ReplicationPeers = map[string]string{"B": "http://" + dead}
		}
	}, "A", "B")
	a := nodes[0]
	createAlertDB(t, a, "rep")
	waitFor(t, "A's sender to B fails", 20*time.Second, func() bool {
		for _, s := range a.srv.allSenders() {
			if s.db == "rep" && s.st.Tag == "B" && s.st.LastError != "" {
				return true
			}
		}
		return false
	})
	key := keyReplError + "rep/A>B"
	time.Sleep(1200 * time.Millisecond)
	if _, ok := a.srv.alerts.Get(key); ok {
		t.Fatal("raised before the threshold")
	}
	clk.Add(DefaultAlertReplicationError)
	al := waitAlert(t, a, key, true, 10*time.Second)
	if al.Level != alerts.Error || al.Database != "rep" || al.Link != "/studio/db/rep/replication" || !strings.Contains(al.Message, dead) {
		t.Fatalf("%+v", al)
	}
	if _, ok := a.srv.alerts.Get(keyNode + "B"); ok {
		t.Fatal("B answers: it is not unreachable")
	}
	// The database goes away: so do its senders and the alert.
	acall(t, "DELETE", a.url+"/admin/databases", `{"DatabaseNames":["rep"],"HardDelete":true}`)
	waitAlert(t, a, key, false, 10*time.Second)
}

// An index whose map throws raises an errors alert linking to its page (an
// error once it failed and stopped); an index stale for longer than the
// threshold raises a stale alert; a deleted index takes its alerts along.
func TestAlertIndexes(t *testing.T) {
	clk := &alertClock{}
	n := startAlertNodes(t, clk, nil, "A")[0]
	createAlertDB(t, n, "ix")
	write := func(from, to int) {
		var cmds []string
		for i := from; i < to; i++ {
			cmds = append(cmds, fmt.Sprintf(`{"Id":"items/%d","Type":"PUT","Document":{"N":%d,"@metadata":{"@collection":"Items"}}}`, i, i))
		}
		post(t, n.url+"/databases/ix/bulk_docs", `{"Commands":[`+strings.Join(cmds, ",")+`]}`)
	}
	write(0, 150)
	status, body := acall(t, "PUT", n.url+"/databases/ix/indexes", `{"Indexes":[{"Name":"Items/Boom","Type":"JavaScriptMap","Maps":["map('Items', d => { throw new Error('boom ' + d.N); })"]}]}`)
	if status != 201 && status != 200 {
		t.Fatalf("put index: %d %s", status, body)
	}
	key := keyIndexErrors + "ix/items/boom"
	var al alerts.Alert
	waitFor(t, "the index fails and stops", 20*time.Second, func() bool {
		al, _ = n.srv.alerts.Get(key)
		return al.Level == alerts.Error
	})
	if al.Database != "ix" || !strings.Contains(al.Link, "/studio/db/ix/index?name=Items%2FBoom") || !strings.Contains(al.Message, "boom") ||
		al.Title != "Index Items/Boom in ix failed and stopped" {
		t.Fatalf("%+v", al)
	}
	// Stopped, it falls behind the new documents: stale, and after the
	// threshold an alert says so.
	write(150, 160)
	ix, _ := n.srv.indexes.Get("ix", "Items/Boom")
	waitFor(t, "the index is stale", 10*time.Second, func() bool { stale, _ := ix.Stale(context.Background()); return stale })
	staleKey := keyIndexStale + "ix/items/boom"
	clk.Add(indexCheckEvery)
	time.Sleep(1500 * time.Millisecond)
	if _, ok := n.srv.alerts.Get(staleKey); ok {
		t.Fatal("stale alert before the threshold")
	}
	clk.Add(DefaultAlertIndexStale + indexCheckEvery)
	st := waitAlert(t, n, staleKey, true, 15*time.Second)
	if st.Level != alerts.Warning || !strings.Contains(st.Message, "stale since") {
		t.Fatalf("%+v", st)
	}
	// Deleted: its alerts go.
	if status, body := acall(t, "DELETE", n.url+"/databases/ix/indexes?name=Items/Boom", ""); status/100 != 2 {
		t.Fatalf("delete index: %d %s", status, body)
	}
	clk.Add(indexCheckEvery)
	waitAlert(t, n, key, false, 15*time.Second)
	waitAlert(t, n, staleKey, false, 15*time.Second)
}

// A burst of subscriptions over the database's runaway threshold raises
// one alert for the database naming them; deleting them clears it.
func TestAlertRunawaySubscriptions(t *testing.T) {
	clk := &alertClock{}
	n := startAlertNodes(t, clk, nil, "A")[0]
	createAlertDB(t, n, "subs")
	if status, b := acall(t, "PUT", n.url+"/databases/subs/subscriptions/monitor/thresholds", `{"BurstCount":3,"BurstSeconds":60}`); status/100 != 2 {
		t.Fatalf("thresholds: %d %s", status, b)
	}
	for i := 0; i < 4; i++ {
		if status, b := acall(t, "PUT", n.url+"/databases/subs/subscriptions", fmt.Sprintf(`{"Name":"burst-%d","Query":"from Orders"}`, i)); status/100 != 2 {
			t.Fatalf("create: %d %s", status, b)
		}
	}
	key := keyRunaway + "subs"
	al := waitAlert(t, n, key, true, 10*time.Second)
	if al.Title != "4 runaway subscriptions in subs" || !strings.Contains(al.Message, "burst-0") || al.Link != "/studio/db/subs/subscriptions" {
		t.Fatalf("%+v", al)
	}
	for i := 0; i < 4; i++ {
		acall(t, "DELETE", n.url+fmt.Sprintf("/databases/subs/subscriptions?taskName=burst-%d", i), "")
	}
	waitAlert(t, n, key, false, 10*time.Second)
}
