package web

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/replication"
	"github.com/rookerydb/rookery/backend/storage"
)

// wsConn carries replication messages over a websocket.
type wsConn struct{ c *websocket.Conn }

func (w wsConn) Send(ctx context.Context, msg []byte) error {
	return w.c.Write(ctx, websocket.MessageText, msg)
}

func (w wsConn) Recv(ctx context.Context) ([]byte, error) {
	_, b, err := w.c.Read(ctx)
	return b, err
}

func (w wsConn) Close() error { return w.c.Close(websocket.StatusNormalClosure, "") }

// maxReplicationMessage bounds one batch on the wire.
const maxReplicationMessage = 256 << 20

func dialReplication(ctx context.Context, destURL, database string) (replication.Conn, error) {
	u := "ws" + strings.TrimPrefix(destURL, "http") + "/databases/" + database + "/replication"
	c, _, err := websocket.Dial(ctx, u, nil)
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
	err = replication.Receive(c.Request().Context(), wsConn{conn}, s.catalog.Get)
	if err != nil && c.Request().Context().Err() == nil {
		s.log.Debug("incoming replication ended", "database", c.Param("db"), "error", err)
	}
	return nil
}

// replicator runs one sender per (database, destination) while this node
// and the destination are both members of the database.
type replicator struct {
	mu      sync.Mutex
	senders map[string]*runningSender // "db|tag"
	byDB    map[string][]*replication.Sender
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
			snd := replication.NewSender(db, urls[m], dialReplication, replication.Options{Logger: s.log})
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

func (s *Server) stopReplication() {
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
	s.repl.mu.Lock()
	senders := append([]*replication.Sender(nil), s.repl.byDB[strings.ToLower(db.Name())]...)
	s.repl.mu.Unlock()
	out := []replication.Stats{}
	for _, snd := range senders {
		out = append(out, snd.Stats())
	}
	return c.JSON(http.StatusOK, map[string]any{"Database": db.Name(), "Enabled": s.cfg.Replication, "Destinations": out})
}
