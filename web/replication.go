package web

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/replication"
	"github.com/rookerydb/rookery/backend/storage"
)

// wsConn carries replication messages over a websocket, as binary
// messages (batches are binary; the JSON control messages ride the same way).
type wsConn struct{ c *websocket.Conn }

func (w wsConn) Send(ctx context.Context, msg []byte) error {
	return w.c.Write(ctx, websocket.MessageBinary, msg)
}

func (w wsConn) Recv(ctx context.Context) ([]byte, error) {
	_, b, err := w.c.Read(ctx)
	return b, err
}

func (w wsConn) Close() error { return w.c.Close(websocket.StatusNormalClosure, "") }

// maxReplicationMessage bounds one batch on the wire.
const maxReplicationMessage = 256 << 20

// dialReplication connects to a destination's replication endpoint with
// this node's credentials (the endpoint serves cluster nodes only).
func (s *Server) dialReplication(ctx context.Context, destURL, database string) (replication.Conn, error) {
	u := "ws" + strings.TrimPrefix(destURL, "http") + "/databases/" + database + "/replication"
	h := http.Header{}
	s.nodes.decorate(h)
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: s.nodes.client, HTTPHeader: h})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(maxReplicationMessage)
	return wsConn{c}, nil
}

// serveReplication accepts an incoming replication connection.
func (s *Server) serveReplication(c echo.Context) error {
	conn, err := websocket.Accept(c.Response(), c.Request(), &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return nil
	}
	conn.SetReadLimit(maxReplicationMessage)
	defer conn.CloseNow()
	// A hijacked connection outlives http.Server.Shutdown: end it when the
	// node stops replicating, or a stopped node would go on answering.
	ctx, cancel := context.WithCancel(c.Request().Context())
	defer cancel()
	defer context.AfterFunc(s.repl.stopping, cancel)()
	err = replication.Receive(ctx, wsConn{conn}, s.catalog.Get)
	if err != nil && ctx.Err() == nil {
		s.log.Debug("incoming replication ended", "database", c.Param("db"), "error", err)
	}
	return nil
}

// replicator runs one sender per (database, destination) while this node
// and the destination are both members of the database.
type replicator struct {
	// stopping ends when the node stops replicating (incoming connections
	// close with it); stopAll ends it.
	stopping context.Context
	stopAll  context.CancelFunc

	mu      sync.Mutex
	senders map[string]*runningSender // "db|tag"
	byDB    map[string][]*replication.Sender
	// commits is each open database's commit log (fed by its commit hook),
	// shared by its senders for their seconds-behind figures.
	commits map[*storage.DB]*replication.CommitLog
}

type runningSender struct {
	s      *replication.Sender
	cancel context.CancelFunc
	db     string
	handle *storage.DB // the open database it reads (a re-created one gets a new sender)
}

// syncReplication starts and stops senders to match the cluster's records.
func (s *Server) syncReplication() {
	if !s.cfg.Replication {
		return
	}
	r := &s.repl
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.senders == nil {
		r.senders = map[string]*runningSender{}
	}
	urls := map[string]string{}
	for _, n := range s.cluster.Nodes() {
		urls[n.Tag] = n.URL
		if u := s.cfg.ReplicationPeers[n.Tag]; u != "" {
			urls[n.Tag] = u
		}
	}
	want := map[string]bool{}
	for _, d := range s.cluster.Databases() {
		self := false
		for _, m := range d.Members {
			self = self || m == s.cfg.NodeTag
		}
		if !self {
			continue
		}
		db, err := s.catalog.Get(d.Name)
		if err != nil {
			continue
		}
		for _, m := range d.Members {
			if m == s.cfg.NodeTag || urls[m] == "" {
				continue
			}
			key := strings.ToLower(d.Name) + "|" + m
			want[key] = true
			if rs, ok := r.senders[key]; ok && rs.handle == db {
				continue
			} else if ok {
				rs.cancel()
			}
			snd := replication.NewSender(db, urls[m], s.dialReplication, replication.Options{Name: m, Commits: r.commits[db], Logger: s.log,
				OnLostWrites: func(l replication.LostWritesError) { s.lostWrites(db, l) }})
			ctx, cancel := context.WithCancel(context.Background())
			r.senders[key] = &runningSender{s: snd, cancel: cancel, db: strings.ToLower(d.Name), handle: db}
			go snd.Run(ctx)
		}
	}
	for key, rs := range r.senders {
		if !want[key] {
			rs.cancel()
			delete(r.senders, key)
		}
	}
	r.byDB = map[string][]*replication.Sender{}
	for _, rs := range r.senders {
		r.byDB[rs.db] = append(r.byDB[rs.db], rs.s)
	}
}

// commitLog returns the commit log of an open database, starting one (fed
// by the database's commit hook) the first time.
func (s *Server) commitLog(db *storage.DB) *replication.CommitLog {
	r := &s.repl
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.commits == nil {
		r.commits = map[*storage.DB]*replication.CommitLog{}
	}
	if l := r.commits[db]; l != nil {
		return l
	}
	l := replication.NewCommitLog(db.LastEtag())
	r.commits[db] = l
	db.OnCommit(l.Record)
	return l
}

// forgetClosed drops the commit logs of databases that are no longer open.
func (s *Server) forgetClosed() {
	open := map[*storage.DB]bool{}
	for _, db := range s.catalog.All() {
		open[db] = true
	}
	s.repl.mu.Lock()
	for db := range s.repl.commits {
		if !open[db] {
			delete(s.repl.commits, db)
		}
	}
	s.repl.mu.Unlock()
}

// wakeSenders tells a database's senders about a local commit.
func (s *Server) wakeSenders(db *storage.DB) {
	if !s.cfg.Replication {
		return
	}
	s.repl.mu.Lock()
	senders := s.repl.byDB[strings.ToLower(db.Name())]
	s.repl.mu.Unlock()
	for _, snd := range senders {
		snd.Wake()
	}
}

// sendersOf returns a database's senders.
func (s *Server) sendersOf(db string) []*replication.Sender {
	s.repl.mu.Lock()
	defer s.repl.mu.Unlock()
	return append([]*replication.Sender(nil), s.repl.byDB[strings.ToLower(db)]...)
}

// sampleReplication records every sender's items behind; the ticker calls
// it once a second.
func (s *Server) sampleReplication() {
	s.repl.mu.Lock()
	var all []*replication.Sender
	for _, rs := range s.repl.senders {
		all = append(all, rs.s)
	}
	s.repl.mu.Unlock()
	for _, snd := range all {
		snd.SampleBehind()
	}
}

func (s *Server) stopReplication() {
	s.repl.stopAll()
	s.repl.mu.Lock()
	defer s.repl.mu.Unlock()
	for key, rs := range s.repl.senders {
		rs.cancel()
		delete(s.repl.senders, key)
	}
}

// replicationStats serves GET /databases/{db}/replication/stats: every
// outgoing destination's figures.
func (s *Server) replicationStats(c echo.Context) error {
	db, err := s.catalog.Get(c.Param("db"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"Database": db.Name(), "Enabled": s.cfg.Replication, "Destinations": s.destinationStats(db.Name())})
}

// destinationStats are a database's outgoing destinations' figures, by tag.
func (s *Server) destinationStats(db string) []replication.Stats {
	out := []replication.Stats{}
	for _, snd := range s.sendersOf(db) {
		out = append(out, snd.Stats())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tag < out[j].Tag })
	return out
}
