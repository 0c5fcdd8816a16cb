package client

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// BulkInsertOptions tune a bulk insert.
type BulkInsertOptions struct {
	// Compress sends the stream gzip-compressed.
	Compress bool
	// SkipOverwriteIfUnchanged leaves an existing document alone when the
	// stored one is the same JSON.
	SkipOverwriteIfUnchanged bool
}

// BulkInsert is a streaming bulk insert (RavenDB's BulkInsertOperation):
// every Store writes one document into a single long POST /bulk_insert,
// which the server commits in large transactions as it reads. Finish ends
// the stream and waits until the last document is committed.
//
//	bi, err := store.BulkInsert(ctx)
//	for _, o := range orders {
//		if err := bi.Store(o); err != nil { ... } // o.ID is set (HiLo) when empty
//	}
//	err = bi.Finish()
//
// A BulkInsert is not safe for concurrent use. When the server refuses a
// document the stream stops: the documents before it are stored, Store or
// Finish returns the server's error (a *ServerError), and nothing after it
// is stored.
type BulkInsert struct {
	ctx   context.Context
	store *DocumentStore
	sess  *Session
	opID  int64

	pw    *io.PipeWriter
	buf   *bufio.Writer
	gz    *gzip.Writer
	first bool

	once   sync.Once
	done   chan struct{}
	result error // the server's answer, once done is closed
	closed bool
	err    error
}

// BulkInsert starts a bulk insert into the store's database: it takes an
// operation id and opens the stream.
func (s *DocumentStore) BulkInsert(ctx context.Context, opts ...BulkInsertOptions) (*BulkInsert, error) {
	var o BulkInsertOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	m := &Smuggler{store: s}
	base, e, err := m.node(ctx)
	if err != nil {
		return nil, err
	}
	id, err := m.nextOperationID(ctx)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	b := &BulkInsert{ctx: ctx, store: s, sess: s.OpenSession(), opID: id, pw: pw, first: true, done: make(chan struct{})}
	var w io.Writer = pw
	if o.Compress {
		b.gz = gzip.NewWriter(pw)
		w = b.gz
	}
	b.buf = bufio.NewWriterSize(w, 256<<10)
	b.buf.WriteByte('[')
	url := base + "/bulk_insert?id=" + strconv.FormatInt(id, 10) + "&skipOverwriteIfUnchanged=" + strconv.FormatBool(o.SkipOverwriteIfUnchanged)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, pr)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Raven-Client-Version", ClientVersion)
	if o.Compress {
		req.Header.Set("Content-Encoding", "gzip")
	}
	go func() {
		defer close(b.done)
		resp, err := e.http.Do(req)
		if err != nil {
			b.result = fmt.Errorf("rookery: bulk insert: %w", err)
			pr.CloseWithError(b.result)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode >= 300 {
			b.result = errorFromResponse(s.database, http.MethodPost, url, resp.StatusCode, resp.Header, body)
		}
		// The server answered: whatever is still written goes nowhere.
		pr.CloseWithError(errBulkInsertAnswered)
	}()
	return b, nil
}

var errBulkInsertAnswered = errors.New("rookery: the server already answered the bulk insert")

// OperationID is the server operation of this bulk insert (readable with
// GET /operations/state while it runs and after it ended).
func (b *BulkInsert) OperationID() int64 { return b.opID }

// Store writes an entity. Its id comes from its id field; an empty one gets
// a HiLo id at once (written to the field), as Session.Store does.
func (b *BulkInsert) Store(entity any) error { return b.StoreWithID(entity, "") }

// StoreWithID writes an entity under id (used as given; "" takes the
// entity's id or a HiLo id).
func (b *BulkInsert) StoreWithID(entity any, id string) error {
	if b.err != nil {
		return b.err
	}
	if b.closed {
		return errors.New("rookery: the bulk insert is finished")
	}
	v, ti, _, err := b.sess.entityRef(entity)
	if err != nil {
		return err
	}
	if id == "" {
		id = getEntityID(v, ti)
		if id == "" && ti.idField != nil && ti.tag != "" {
			if id, err = b.store.hilo.generator(ti.tag).nextID(b.ctx); err != nil {
				return fmt.Errorf("rookery: bulk insert could not take an id for a %s: %w", ti.tag, err)
			}
		}
		if id == "" {
			return fmt.Errorf("rookery: bulk insert needs an id for a %T (an id field, a collection, or StoreWithID)", entity)
		}
	}
	if b.sess.isServerSideID(id) {
		return fmt.Errorf("rookery: bulk insert takes complete ids, not %q", id)
	}
	setEntityID(v, ti, id)
	body, err := b.sess.serialize(&docInfo{id: id, entity: entity, ptr: v, ti: ti, metadata: b.sess.newMetadata(v, ti)})
	if err != nil {
		return err
	}
	idJSON, _ := json.Marshal(id)
	if !b.first {
		b.buf.WriteByte(',')
	}
	b.first = false
	b.buf.WriteString(`{"Id":`)
	b.buf.Write(idJSON)
	b.buf.WriteString(`,"Type":"PUT","Document":`)
	b.buf.Write(body)
	if _, err := b.buf.WriteString("}"); err != nil {
		return b.fail(err)
	}
	return nil
}

// fail turns a broken stream into the server's error when it has one.
func (b *BulkInsert) fail(err error) error {
	<-b.done
	if b.result != nil {
		err = b.result
	}
	b.err = err
	return err
}

// Finish ends the stream and waits until the server committed the last
// document; it returns the server's error if it stopped the bulk insert.
func (b *BulkInsert) Finish() error {
	if b.closed {
		return b.err
	}
	b.closed = true
	if b.err != nil {
		return b.err
	}
	b.buf.WriteByte(']')
	err := b.buf.Flush()
	if err == nil && b.gz != nil {
		err = b.gz.Close()
	}
	if err != nil {
		return b.fail(err)
	}
	_ = b.pw.Close()
	select {
	case <-b.done:
	case <-b.ctx.Done():
		b.pw.CloseWithError(b.ctx.Err())
		<-b.done
	}
	b.err = b.result
	return b.err
}

// Close is Finish.
func (b *BulkInsert) Close() error { return b.Finish() }
