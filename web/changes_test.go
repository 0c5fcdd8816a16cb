package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// changesConn is a test's Changes socket: it reads frames (JSON arrays of
// messages) into msgs.
type changesConn struct {
	t      *testing.T
	conn   *websocket.Conn
	msgs   chan map[string]any
	err    chan error
	frames atomic.Int64
}

func dialChanges(t *testing.T, ctx context.Context, url string, opts *websocket.DialOptions, read bool) *changesConn {
	t.Helper()
	conn, _, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadLimit(16 << 20)
	t.Cleanup(func() { conn.CloseNow() })
	c := &changesConn{t: t, conn: conn, msgs: make(chan map[string]any, 100000), err: make(chan error, 1)}
	if read {
		go c.readLoop(ctx)
	}
	return c
}

func (c *changesConn) readLoop(ctx context.Context) {
	for {
		_, data, err := c.conn.Read(ctx)
		if err != nil {
			c.err <- err
			return
		}
		var frame []map[string]any
		if err := json.Unmarshal(data, &frame); err != nil {
			c.err <- fmt.Errorf("frame %s: %w", data, err)
			return
		}
		c.frames.Add(1)
		for _, m := range frame {
			c.msgs <- m
		}
	}
}

func (c *changesConn) send(id int, command string, param any) {
	c.t.Helper()
	b, _ := json.Marshal(map[string]any{"CommandId": id, "Command": command, "Param": param})
	if err := c.conn.Write(context.Background(), websocket.MessageText, b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *changesConn) next() map[string]any {
	c.t.Helper()
	select {
	case m := <-c.msgs:
		return m
	case err := <-c.err:
		// The reader queues a frame's messages before its end: they come
		// first.
		select {
		case m := <-c.msgs:
			c.err <- err
			return m
		default:
		}
		c.t.Fatalf("socket ended: %v", err)
	case <-time.After(10 * time.Second):
		c.t.Fatal("no message within 10 s")
	}
	return nil
}

func wsURL(base, db string) string {
	return "ws" + strings.TrimPrefix(base, "http") + "/databases/" + db + "/changes"
}

// The npm client's conversation: the supported features first, a Confirm
// per command by its id, then a put and a delete in RavenDB's shapes; an
// unwatched socket hears nothing more.
func TestChangesPutDeleteAndConfirmations(t *testing.T) {
	_, base := startNode(t)
	createDB(t, base, "shop")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := dialChanges(t, ctx, wsURL(base, "shop"), nil, true)
	if m := c.next(); m["TopologyChange"] != true {
		t.Fatalf("first message %v", m)
	}
	c.send(1, "watch-doc", "users/1")
	if m := c.next(); m["Type"] != "Confirm" || m["CommandId"] != float64(1) {
		t.Fatalf("confirmation %v", m)
	}
	c.send(2, "watch-collection", "Orders")
	if m := c.next(); m["Type"] != "Confirm" || m["CommandId"] != float64(2) {
		t.Fatalf("confirmation %v", m)
	}
	post(t, base+"/databases/shop/bulk_docs", `{"Commands":[
		{"Id":"users/2","Type":"PUT","Document":{"@metadata":{"@collection":"Users"}}},
		{"Id":"users/1","Type":"PUT","Document":{"@metadata":{"@collection":"Users"}}},
		{"Id":"orders/1","Type":"PUT","Document":{"@metadata":{"@collection":"Orders"}}}]}`)
	m := c.next()
	v, _ := m["Value"].(map[string]any)
	if m["Type"] != "DocumentChange" || v["Type"] != "Put" || v["Id"] != "users/1" || v["CollectionName"] != "Users" || !strings.HasPrefix(fmt.Sprint(v["ChangeVector"]), "A:") {
		t.Fatalf("put %v", m)
	}
	if m := c.next(); m["Value"].(map[string]any)["Id"] != "orders/1" {
		t.Fatalf("collection %v", m)
	}
	req, _ := http.NewRequest("DELETE", base+"/databases/shop/docs?id=users/1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("delete: %v %v", err, resp)
	}
	resp.Body.Close()
	m = c.next()
	if v := m["Value"].(map[string]any); v["Type"] != "Delete" || v["Id"] != "users/1" {
		t.Fatalf("delete %v", m)
	}
	c.send(3, "unwatch-doc", "users/1")
	c.send(4, "unwatch-collection", "Orders")
	c.next()
	c.next()
	post(t, base+"/databases/shop/bulk_docs", `{"Commands":[{"Id":"users/1","Type":"PUT","Document":{}},{"Id":"orders/2","Type":"PUT","Document":{"@metadata":{"@collection":"Orders"}}}]}`)
	select {
	case m := <-c.msgs:
		t.Fatalf("unwatched, yet got %v", m)
	case <-time.After(300 * time.Millisecond):
	}
}

// A client that subscribes and then never reads is dropped with a reason
// once its queue passes --changes-max-pending, while every write keeps its
// latency and a reading subscriber gets every change.
func TestChangesSlowConsumerDroppedWritesUnaffected(t *testing.T) {
	srv, base := startNodeWith(t, Config{ChangesMaxPending: 300})
	createDB(t, base, "shop")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	good := dialChanges(t, ctx, wsURL(base, "shop"), nil, true)
	good.next()
	good.send(1, "watch-docs", nil)
	good.next()
	// The slow one reads its first two frames (features, confirmation)
	// itself, then nothing.
	slow := dialChanges(t, ctx, wsURL(base, "shop"), nil, false)
	slow.send(1, "watch-docs", nil)
	for seen := 0; seen < 2; {
		_, data, err := slow.conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var frame []map[string]any
		json.Unmarshal(data, &frame)
		seen += len(frame)
	}
	pad := strings.Repeat("x", 400)
	written, worst := 0, time.Duration(0)
	for srv.changes.Stats().DroppedSlow == 0 {
		if written >= 200000 {
			t.Fatalf("not dropped after %d documents", written)
		}
		var b strings.Builder
		b.WriteString(`{"Commands":[`)
		for i := range 200 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"Id":"items/%s/%d","Type":"PUT","Document":{"@metadata":{"@collection":"Items"}}}`, pad, written+i)
		}
		b.WriteString(`]}`)
		start := time.Now()
		post(t, base+"/databases/shop/bulk_docs", b.String())
		worst = max(worst, time.Since(start))
		written += 200
	}
	t.Logf("dropped after %d documents; slowest write %v", written, worst)
	// A write that waited for the stalled socket would take the write
	// deadline (30 s); the bound is loose for busy machines and the race
	// detector.
	if limit := time.Duration(1+4*(scale-1)/7) * time.Second; worst > limit {
		t.Errorf("a write took %v (limit %v)", worst, limit)
	}
	// Reading again: what was in flight, then the close with the reason.
	var err error
	for err == nil {
		_, _, err = slow.conn.Read(ctx)
	}
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || !strings.HasPrefix(ce.Reason, "too slow: ") || !strings.HasSuffix(ce.Reason, " notifications pending") {
		t.Fatalf("closed with %v", err)
	}
	for got := 0; got < written; {
		m := good.next()
		if m["Type"] == "DocumentChange" {
			got++
		}
	}
	if st := srv.changes.Stats(); st.Connections != 1 || st.DroppedSlow != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A Changes socket is re-identified at most once a second: revoking its
// certificate closes it with 1008 "no longer allowed". Reading needs Read
// access to the database.
func TestChangesRevokedCertificateClosed(t *testing.T) {
	c := makeCerts(t)
	n := serveNode(t, c.secured())
	admin := c.client(t, c.setup.Admin.PEM)
	mkdb(t, admin, n.url, "shop")
	mkdb(t, admin, n.url, "other")
	reader := c.issue(t, "reader")
	must(t, 204, admin, "PUT", n.url+"/admin/certificates", fmt.Sprintf(`{"Name":"reader","Certificate":%q,"SecurityClearance":"ValidUser","Permissions":{"shop":"Read"}}`, reader.CertificateBase64))
	rc := c.client(t, reader.PEM)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, resp, err := websocket.Dial(ctx, wsURL(n.url, "other"), &websocket.DialOptions{HTTPClient: rc}); err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("another database: %v %v", err, resp)
	}
	ws := dialChanges(t, ctx, wsURL(n.url, "shop"), &websocket.DialOptions{HTTPClient: rc}, true)
	ws.next()
	ws.send(1, "watch-docs", nil)
	ws.next()
	must(t, 201, admin, "PUT", n.url+"/databases/shop/docs?id=a/1", `{}`)
	if m := ws.next(); m["Type"] != "DocumentChange" {
		t.Fatalf("got %v", m)
	}
	must(t, 204, admin, "DELETE", n.url+"/admin/certificates?thumbprint="+reader.Thumbprint, "")
	start := time.Now()
	select {
	case err := <-ws.err:
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || ce.Reason != "no longer allowed" {
			t.Fatalf("closed with %v", err)
		}
	case m := <-ws.msgs:
		t.Fatalf("got %v after the revocation", m)
	case <-time.After(10 * time.Second):
		t.Fatal("still open 10 s after the revocation")
	}
	t.Logf("closed %v after the revocation", time.Since(start))
}

// Deleting the database closes its sockets (going away); a socket of a
// database that does not exist is refused before the upgrade.
func TestChangesDatabaseDeleted(t *testing.T) {
	_, base := startNode(t)
	createDB(t, base, "gone")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := dialChanges(t, ctx, wsURL(base, "gone"), nil, true)
	c.next()
	req, _ := http.NewRequest("DELETE", base+"/admin/databases", strings.NewReader(`{"DatabaseNames":["gone"],"HardDelete":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("delete: %v %v", err, resp)
	}
	resp.Body.Close()
	select {
	case err := <-c.err:
		if websocket.CloseStatus(err) != websocket.StatusGoingAway {
			t.Fatalf("closed with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still open")
	}
	if _, resp, err := websocket.Dial(ctx, wsURL(base, "gone"), nil); err == nil || resp == nil || resp.StatusCode < 400 {
		t.Fatalf("a deleted database's socket: %v %v", err, resp)
	}
}

// A command the server cannot have gets RavenDB's Error message, then the
// close (1008), every time: the reader's end must not cut the writer short.
func TestChangesBadCommandErrorThenClose(t *testing.T) {
	_, base := startNode(t)
	createDB(t, base, "shop")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 10 {
		c := dialChanges(t, ctx, wsURL(base, "shop"), nil, true)
		c.next()
		c.send(1, []string{"frobnicate", "watch-operation", "watch-doc"}[i%3], "x y")
		if i%3 == 2 {
			c.send(2, "watch-doc", nil) // no Param
		}
		var m map[string]any
		for m == nil || m["Type"] == "Confirm" {
			m = c.next()
		}
		if m["Type"] != "Error" || m["Exception"] == "" {
			t.Fatalf("round %d: got %v", i, m)
		}
		select {
		case err := <-c.err:
			if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
				t.Fatalf("round %d: closed with %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: still open", i)
		}
	}
}

// Notifications are batched: a commit of 3,000 documents reaches a
// subscriber in a few frames (JSON arrays of at most about 1 MiB), not
// 3,000.
func TestChangesBatchesFrames(t *testing.T) {
	_, base := startNode(t)
	createDB(t, base, "shop")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := dialChanges(t, ctx, wsURL(base, "shop"), nil, true)
	c.next()
	c.send(1, "watch-docs", nil)
	c.next()
	before := c.frames.Load()
	var b strings.Builder
	b.WriteString(`{"Commands":[`)
	for i := range 3000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"Id":"items/%d","Type":"PUT","Document":{"@metadata":{"@collection":"Items"}}}`, i)
	}
	b.WriteString(`]}`)
	post(t, base+"/databases/shop/bulk_docs", b.String())
	for i := range 3000 {
		if m := c.next(); m["Value"].(map[string]any)["Id"] != fmt.Sprintf("items/%d", i) {
			t.Fatalf("notification %d: %v", i, m)
		}
	}
	if n := c.frames.Load() - before; n > 3 {
		t.Fatalf("3000 notifications of one commit came in %d frames", n)
	}
}

// Counters and time series written through the HTTP API reach the sockets
// that watch them, in RavenDB's shapes: a counter of a document by name
// (Params [id, name]), every counter, and the series of a document.
func TestChangesCountersAndTimeSeries(t *testing.T) {
	srv, base := startNode(t)
	createDB(t, base, "shop")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := dialChanges(t, ctx, wsURL(base, "shop"), nil, true)
	c.next() // the supported features
	raw := func(id int, command string, params []string) {
		b, _ := json.Marshal(map[string]any{"CommandId": id, "Command": command, "Param": nil, "Params": params})
		if err := c.conn.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
		if m := c.next(); m["Type"] != "Confirm" || m["CommandId"] != float64(id) {
			t.Fatalf("confirmation %v", m)
		}
	}
	raw(1, "watch-document-counter", []string{"users/1", "likes"})
	c.send(2, "watch-all-document-timeseries", "USERS/1")
	if m := c.next(); m["Type"] != "Confirm" {
		t.Fatalf("confirmation %v", m)
	}
	all := dialChanges(t, ctx, wsURL(base, "shop"), nil, true)
	all.next()
	all.send(1, "watch-counters", nil)
	all.next()

	post(t, base+"/databases/shop/bulk_docs", `{"Commands":[{"Id":"Users/1","Type":"PUT","Document":{"@metadata":{"@collection":"Users"}}}]}`)
	db, err := srv.Catalog().Get("shop")
	if err != nil {
		t.Fatal(err)
	}
	dbid := db.DatabaseID()
	counters := func(body string) int64 {
		req, _ := http.NewRequest("POST", base+"/databases/shop/counters", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("counters: %v %v", err, resp)
		}
		defer resp.Body.Close()
		var out struct{ Counters []struct{ Etag int64 } }
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Counters) != 1 {
			t.Fatalf("counters reply %+v %v", out, err)
		}
		return out.Counters[0].Etag
	}
	// Another counter of the document: only the socket of every counter
	// hears it.
	views := counters(`{"Documents":[{"DocumentId":"users/1","Operations":[{"Type":"Increment","CounterName":"Views","Delta":3}]}]}`)
	etag := counters(`{"Documents":[{"DocumentId":"users/1","Operations":[{"Type":"Increment","CounterName":"Likes","Delta":5}]}]}`)
	counterMsg := func(name string, value, etag int64, typ string) string {
		return fmt.Sprintf(`{"Type":"CounterChange","Value":{"Name":%q,"Value":%d,"DocumentId":"Users/1","CollectionName":"Users","ChangeVector":"A:%d-%s","Type":%q}}`,
			name, value, etag, dbid, typ)
	}
	exact := func(c *changesConn, want string) {
		t.Helper()
		got, _ := json.Marshal(c.next())
		// json.Marshal of a map sorts the keys: compare in that form.
		var w map[string]any
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			t.Fatal(err)
		}
		wb, _ := json.Marshal(w)
		if string(got) != string(wb) {
			t.Fatalf("got  %s\nwant %s", got, wb)
		}
	}
	exact(c, counterMsg("Likes", 5, etag, "Put"))
	exact(all, counterMsg("Views", 3, views, "Put"))
	exact(all, counterMsg("Likes", 5, etag, "Put"))
	etag = counters(`{"Documents":[{"DocumentId":"users/1","Operations":[{"Type":"Increment","CounterName":"likes","Delta":-2}]}]}`)
	exact(c, counterMsg("Likes", 3, etag, "Increment"))
	exact(all, counterMsg("Likes", 3, etag, "Increment"))

	post(t, base+"/databases/shop/timeseries?docId=users/1", `{"Name":"HeartRate","Appends":[
		{"Timestamp":"2024-05-01T10:00:00.0000000Z","Values":[70]},{"Timestamp":"2024-05-01T10:00:30.5000000Z","Values":[72]}]}`)
	// The series appeared: the document was put after the entries.
	exact(c, fmt.Sprintf(`{"Type":"TimeSeriesChange","Value":{"Name":"HeartRate","DocumentId":"Users/1","CollectionName":"Users","ChangeVector":"A:%d-%s",`+
		`"From":"2024-05-01T10:00:00.0000000Z","To":"2024-05-01T10:00:30.5000000Z","Type":"Put"}}`, db.LastEtag()-1, dbid))
	post(t, base+"/databases/shop/timeseries?docId=users/1", `{"Name":"HeartRate","Deletes":[{"From":"2024-05-01T09:00:00Z","To":null}]}`)
	exact(c, fmt.Sprintf(`{"Type":"TimeSeriesChange","Value":{"Name":"HeartRate","DocumentId":"Users/1","CollectionName":"Users","ChangeVector":"A:%d-%s",`+
		`"From":"2024-05-01T09:00:00.0000000Z","To":"9999-12-31T23:59:59.9999999Z","Type":"Delete"}}`, db.LastEtag()-1, dbid))

	// Unwatched: nothing more.
	raw(3, "unwatch-document-counter", []string{"USERS/1", "LIKES"})
	counters(`{"Documents":[{"DocumentId":"users/1","Operations":[{"Type":"Increment","CounterName":"Likes"}]}]}`)
	if m := all.next(); m["Type"] != "CounterChange" {
		t.Fatalf("the other socket: %v", m)
	}
	select {
	case m := <-c.msgs:
		t.Fatalf("unwatched, yet got %v", m)
	case <-time.After(300 * time.Millisecond):
	}
}
