package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/changes"
	"github.com/rookerydb/rookery/backend/index"
	"github.com/rookerydb/rookery/backend/operations"
)

// The Changes API (RavenDB's GET /databases/{db}/changes websocket): the
// engine is backend/changes; this is its socket. One goroutine reads the
// client's commands (watch-…/unwatch-…) and applies them, the handler's
// goroutine writes what the engine queued, one frame (a JSON array of
// messages) per wake-up, and re-identifies the caller at most once a second.

// changesWriteTimeout bounds one frame's write. A client that stops
// reading is dropped by its queue bound (--changes-max-pending) long before
// this, with a reason; the deadline only ends a write that has started and
// never finishes (the close frame cannot follow it).
const changesWriteTimeout = 30 * time.Second

// changesMaxCommand bounds one command message of a client.
const changesMaxCommand = 64 << 10

var (
	supportedFeatures = []byte(`{"TopologyChange":true}`)
)

type changeCommand struct {
	CommandID int64    `json:"CommandId"`
	Command   string   `json:"Command"`
	Param     *string  `json:"Param"`
	Params    []string `json:"Params"`
}

// serveChanges upgrades GET /databases/:db/changes.
func (s *Server) serveChanges(c echo.Context) error {
	name := c.Param("db")
	if _, err := s.catalog.Get(name); err != nil {
		return err // RavenDB's DatabaseDoesNotExist, before the upgrade
	}
	// coder/websocket refuses cross-origin upgrades by default; the npm
	// client sends no Origin.
	conn, err := websocket.Accept(c.Response(), c.Request(), nil)
	if err != nil {
		return nil // Accept has answered
	}
	defer conn.CloseNow()
	conn.SetReadLimit(changesMaxCommand)
	sub := s.changes.Subscribe(name)
	defer sub.Close()
	// A hijacked connection outlives http.Server.Shutdown: Shutdown drops
	// every subscriber (DropAll), which closes the socket below.
	ctx, cancel := context.WithCancel(context.WithoutCancel(c.Request().Context()))
	defer cancel()
	// The reader ends with the socket (false), or after a bad command
	// (true): then the Error and the close frame are still to be written.
	readDone := make(chan bool, 1)
	go func() { readDone <- s.readChangeCommands(ctx, conn, sub) }()
	sub.Send(supportedFeatures)
	req := c.Request()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastAuth := time.Now()
	var frame bytes.Buffer
	for {
		select {
		case failed := <-readDone:
			if !failed {
				return nil
			}
			readDone = nil // Take hands out the Error, then the close
			continue
		case <-tick.C:
			if time.Since(lastAuth) >= time.Second {
				lastAuth = time.Now()
				if err := s.changesAllowed(req, name); err != nil {
					sub.Drop(changes.CodePolicy, "no longer allowed")
				}
			}
			continue
		case <-sub.Ready():
		}
		msgs, code, reason := sub.Take()
		if len(msgs) == 0 {
			if reason != "" {
				conn.Close(websocket.StatusCode(code), reason)
				return nil
			}
			continue
		}
		if time.Since(lastAuth) >= time.Second {
			lastAuth = time.Now()
			if err := s.changesAllowed(req, name); err != nil {
				sub.Drop(changes.CodePolicy, "no longer allowed")
				continue
			}
		}
		frame.Reset()
		frame.WriteByte('[')
		for i, m := range msgs {
			if i > 0 {
				frame.WriteByte(',')
			}
			frame.Write(m)
		}
		frame.WriteByte(']')
		wctx, wcancel := context.WithTimeout(ctx, changesWriteTimeout)
		err := conn.Write(wctx, websocket.MessageText, frame.Bytes())
		wcancel()
		if frame.Cap() > 64<<10 {
			frame = bytes.Buffer{} // an idle socket keeps no large buffer
		}
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				s.log.Debug("changes: write failed", "database", name, "error", err)
			}
			return nil
		}
	}
}

// readChangeCommands applies the client's commands until the socket ends:
// each is confirmed ({"CommandId":n,"Type":"Confirm"}) in order with the
// notifications; a command the server cannot have gets an Error message
// and the socket is closed, as RavenDB does.
func (s *Server) readChangeCommands(ctx context.Context, conn *websocket.Conn, sub *changes.Sub) (failed bool) {
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return false
		}
		var cmd changeCommand
		if err := json.Unmarshal(data, &cmd); err != nil {
			s.changeError(sub, "Could not parse the command: "+err.Error())
			return true
		}
		if err := sub.Apply(cmd.Command, cmd.Param, cmd.Params); err != nil {
			s.changeError(sub, err.Error())
			return true
		}
		b, _ := json.Marshal(struct {
			CommandID int64 `json:"CommandId"`
			Type      string
		}{cmd.CommandID, "Confirm"})
		sub.Send(b)
	}
}

func (s *Server) changeError(sub *changes.Sub, msg string) {
	b, _ := json.Marshal(struct{ Type, Exception string }{"Error", msg})
	sub.Fail(changes.CodePolicy, "bad command", b)
}

// changesAllowed identifies a Changes socket's caller again: a certificate
// revoked since it connected, or one that lost the database, is refused.
func (s *Server) changesAllowed(r *http.Request, db string) error {
	id, err := s.sec.identify(r)
	if err == nil && id == nil {
		err = auth.ErrNoCertificate
	}
	if err != nil {
		return err
	}
	if need := routeRules["GET /databases/:db/changes"].need(db); !id.Allows(need, db) {
		return id.Refusal(need, db)
	}
	return nil
}

// changesIndexEvent forwards the index engine's notifications.
func (s *Server) changesIndexEvent(ev index.Event) {
	s.changes.Index(ev.Database, changes.IndexChange{Type: ev.Type, Name: ev.Index, Etag: ev.Etag})
}

// changesOperation forwards an operation's new state.
func (s *Server) changesOperation(info operations.Info) {
	s.changes.Operation(info.Database, changes.OperationChange{ID: info.ID, State: info.State})
}

// changesCollector exports the engine's counters.
type changesCollector struct{ h *changes.Hub }

var (
	changesConnectionsDesc   = prometheus.NewDesc("rookery_changes_connections", "Open Changes API websockets.", nil, nil)
	changesNotificationsDesc = prometheus.NewDesc("rookery_changes_notifications_total", "Notifications queued to Changes API subscribers.", nil, nil)
	changesFramesDesc        = prometheus.NewDesc("rookery_changes_frames_total", "Frames (JSON arrays of messages) written to Changes API subscribers.", nil, nil)
	changesDroppedDesc       = prometheus.NewDesc("rookery_changes_dropped_total", "Changes API subscribers dropped, by reason: slow (their queue passed --changes-max-pending), other (access lost, database deleted, server stopping, bad command).", []string{"reason"}, nil)
)

func (c changesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- changesConnectionsDesc
	ch <- changesNotificationsDesc
	ch <- changesFramesDesc
	ch <- changesDroppedDesc
}

func (c changesCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.h.Stats()
	ch <- prometheus.MustNewConstMetric(changesConnectionsDesc, prometheus.GaugeValue, float64(st.Connections))
	ch <- prometheus.MustNewConstMetric(changesNotificationsDesc, prometheus.CounterValue, float64(st.Notifications))
	ch <- prometheus.MustNewConstMetric(changesFramesDesc, prometheus.CounterValue, float64(st.Frames))
	ch <- prometheus.MustNewConstMetric(changesDroppedDesc, prometheus.CounterValue, float64(st.DroppedSlow), "slow")
	ch <- prometheus.MustNewConstMetric(changesDroppedDesc, prometheus.CounterValue, float64(st.DroppedOther), "other")
}
