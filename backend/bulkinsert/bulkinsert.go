// Package bulkinsert runs a bulk insert: a stream of commands (the body of
// POST /bulk_insert, a JSON array) read incrementally and stored in large
// transactions through the storage writer.
//
// The stream is `[` command (`,` command)* `]`, each command an object:
// {"Id":…,"Type":"PUT","Document":{…,"@metadata":{…}}}, or
// {"Type":"HeartBeat"} (the client's keep-alive, ignored). Counters,
// time series and attachments commands are refused with a clear error.
//
// Documents are parsed one at a time (document.ReadMax: the size and depth
// limits of every write) and collected into batches; a full batch is handed
// to the writer while the next one is read, so parsing and committing
// overlap. Each batch is a transaction of its own (storage's SubmitAlone):
// never merged with other requests, it runs without a savepoint, whose page
// copies took 13-17% of the writer's CPU. A bad command fails the bulk
// insert: the documents before it are committed first (whole batches, and
// the partial batch it interrupted), the bad one and everything after it
// are not.
package bulkinsert

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

// Defaults for Options.
const (
	// DefaultBatchDocs is how many documents one transaction carries at
	// most.
	DefaultBatchDocs = 8192
	// DefaultBatchBytes bounds one transaction's documents, in bytes of
	// their stored form.
	DefaultBatchBytes = 16 << 20
	// inFlight is how many batches may wait for the writer while the next
	// one is read.
	inFlight = 2
)

// Options configure Run.
type Options struct {
	// MaxDocumentSize is the largest document, in bytes of its JSON; no
	// limit when <= 0.
	MaxDocumentSize int64
	// BatchDocs and BatchBytes bound one transaction (defaults above).
	BatchDocs  int
	BatchBytes int64
	// SkipOverwriteIfUnchanged leaves an existing document alone when the
	// new one is the same JSON (same collection): no new etag, no change.
	SkipOverwriteIfUnchanged bool
}

// Progress is what the operation reports (the client's BulkInsertProgress).
type Progress struct {
	Total                int64  // documents read from the stream so far
	Processed            int64  // documents committed (skipped ones included)
	BatchCount           int64  // transactions committed
	LastProcessedId      string // the last document of the last committed batch (RavenDB's spelling)
	DocumentsProcessed   int64  // = Processed
	AttachmentsProcessed int64
	CountersProcessed    int64
	TimeSeriesProcessed  int64
	Skipped              int64 // unchanged documents left alone (SkipOverwriteIfUnchanged)
}

type pending struct {
	items []storage.PutItem
	bytes int64
	done  <-chan error
	skip  *int64
}

// Run reads the command stream from r and stores its documents in db. It
// returns the final progress, and the error that stopped it (the documents
// committed before it stay). report, when not nil, is called after every
// committed batch.
func Run(ctx context.Context, db *storage.DB, r io.Reader, opts Options, report func(Progress)) (Progress, error) {
	if opts.BatchDocs <= 0 {
		opts.BatchDocs = DefaultBatchDocs
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = DefaultBatchBytes
	}
	var p Progress
	var queue []*pending
	var failed atomic.Bool
	var storeErr error // the first batch the writer refused
	// wait takes the oldest submitted batch's outcome.
	wait := func() error {
		b := queue[0]
		queue = queue[1:]
		if err := <-b.done; err != nil {
			if storeErr == nil {
				storeErr = err
			}
			return err
		}
		p.Processed += int64(len(b.items))
		p.DocumentsProcessed = p.Processed
		p.Skipped += *b.skip
		p.BatchCount++
		p.LastProcessedId = b.items[len(b.items)-1].ID
		if report != nil {
			report(p)
		}
		return nil
	}
	drain := func() error {
		var first error
		for len(queue) > 0 {
			if err := wait(); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	cur := &pending{}
	submit := func() error {
		if len(cur.items) == 0 {
			return nil
		}
		for len(queue) >= inFlight {
			if err := wait(); err != nil {
				return err
			}
		}
		b := cur
		cur = &pending{}
		b.skip = new(int64)
		b.done = db.SubmitAlone(ctx, func(tx *storage.Tx) error {
			// Batches run in order on the writer goroutine: once one
			// failed, the ones queued behind it store nothing.
			if failed.Load() {
				return errAfterFailure
			}
			err := store(tx, b, opts.SkipOverwriteIfUnchanged)
			if err != nil {
				failed.Store(true)
			}
			return err
		})
		queue = append(queue, b)
		return nil
	}

	g := &guard{r: r, max: opts.MaxDocumentSize, start: -1}
	dec := jsontext.NewDecoder(g)
	readErr := func() error {
		if k := dec.PeekKind(); k != '[' {
			if k == jsontext.KindInvalid {
				_, err := dec.ReadToken()
				if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
					return dberr.New(dberr.BadRequest, "Bulk insert: the body is empty; it must be a JSON array of commands")
				}
				return bad(dec, err)
			}
			return dberr.New(dberr.BadRequest, "Bulk insert: the body must be a JSON array of commands")
		}
		if _, err := dec.ReadToken(); err != nil {
			return bad(dec, err)
		}
		for n := 0; ; n++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			if dec.PeekKind() == ']' {
				break
			}
			c, err := readCommand(dec, n, g)
			if err != nil {
				return err
			}
			if c.typ == heartBeat {
				continue
			}
			p.Total++
			cur.items = append(cur.items, storage.PutItem{ID: c.id, Doc: c.doc})
			cur.bytes += int64(len(c.doc.Body))
			if len(cur.items) >= opts.BatchDocs || cur.bytes >= opts.BatchBytes {
				if err := submit(); err != nil {
					return err
				}
			}
		}
		// The closing bracket ends the bulk insert: the npm client never
		// ends its request body, it waits for the answer after "]".
		if _, err := dec.ReadToken(); err != nil {
			return bad(dec, err)
		}
		return nil
	}()
	// Whatever was read before the end (or before a bad command) is
	// committed, unless the operation was cancelled.
	if readErr == nil || (ctx.Err() == nil && !failed.Load()) {
		if err := submit(); err != nil && readErr == nil {
			readErr = err
		}
	}
	_ = drain()
	if storeErr != nil {
		// Every batch submitted came before anything the reader refused.
		readErr = storeErr
	}
	if readErr != nil && ctx.Err() != nil {
		return p, ctx.Err()
	}
	return p, readErr
}

var errAfterFailure = errors.New("not stored: an earlier batch of this bulk insert failed")

// store writes one batch in the transaction.
func store(tx *storage.Tx, b *pending, skipUnchanged bool) error {
	items := b.items
	if skipUnchanged {
		kept := make([]storage.PutItem, 0, len(items))
		for _, it := range items {
			if strings.TrimSpace(it.ID) != "" {
				old, err := tx.Get(it.ID)
				if err != nil {
					return err
				}
				if old != nil && strings.EqualFold(old.Collection, it.Doc.Collection) && document.JSONEqual(old.Body, it.Doc.Body) {
					*b.skip++
					continue
				}
			}
			kept = append(kept, it)
		}
		items = kept
	}
	_, err := tx.PutMany(items)
	return err
}

const (
	put       = "PUT"
	heartBeat = "HeartBeat"
)

type command struct {
	typ string
	id  string
	doc document.Parsed
}

func bad(dec *jsontext.Decoder, err error) error {
	if d := document.TooDeep(err); d != nil {
		return dberr.New(dberr.BadRequest, "Bulk insert: %v", d)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return dberr.New(dberr.BadRequest, "Bulk insert: the stream ended at byte %d before the command array was closed", dec.InputOffset())
	}
	return dberr.New(dberr.BadRequest, "Bulk insert: invalid JSON at byte %d: %v", dec.InputOffset(), err)
}

// named describes command n for an error message.
func named(n int, id string) string {
	if id != "" {
		return fmt.Sprintf("command %d (id %q)", n, id)
	}
	return fmt.Sprintf("command %d", n)
}

func readCommand(dec *jsontext.Decoder, n int, g *guard) (command, error) {
	var c command
	if k := dec.PeekKind(); k != '{' {
		if k == jsontext.KindInvalid {
			_, err := dec.ReadToken()
			return c, bad(dec, err)
		}
		return c, dberr.New(dberr.BadRequest, "Bulk insert: command %d must be a JSON object", n)
	}
	if _, err := dec.ReadToken(); err != nil {
		return c, bad(dec, err)
	}
	hasDoc := false
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return c, bad(dec, err)
		}
		switch name.String() {
		case "Type", "Id":
			field := name.String()
			v, err := dec.ReadToken()
			if err != nil {
				return c, bad(dec, err)
			}
			if v.Kind() != '"' {
				if v.Kind() == '{' || v.Kind() == '[' {
					return c, dberr.New(dberr.BadRequest, "Bulk insert: %s: %s must be a string", named(n, c.id), field)
				}
				if v.Kind() == 'n' {
					continue
				}
				return c, dberr.New(dberr.BadRequest, "Bulk insert: %s: %s must be a string, got %s", named(n, c.id), field, v.String())
			}
			if field == "Type" {
				c.typ = v.String()
				if c.typ != put && c.typ != heartBeat {
					return c, unsupported(n, c.id, c.typ)
				}
			} else {
				c.id = v.String()
			}
		case "Document":
			if dec.PeekKind() == 'n' {
				if _, err := dec.ReadToken(); err != nil {
					return c, bad(dec, err)
				}
				continue
			}
			g.start = dec.InputOffset()
			doc, err := document.ReadMax(dec, g.max)
			g.start = -1
			var se *document.SizeError
			if g.tripped > 0 {
				se = &document.SizeError{Size: g.tripped, Max: g.max}
			}
			if se != nil || errors.As(err, &se) {
				return c, &dberr.Error{Kind: dberr.TooLarge, Err: se, Msg: fmt.Sprintf("Bulk insert: %s: the document is larger than %s, the largest document this server accepts (--max-document-size)", named(n, c.id), document.FormatBytes(se.Max))}
			}
			if err != nil {
				return c, dberr.New(dberr.BadRequest, "Bulk insert: %s: %v", named(n, c.id), err)
			}
			c.doc = doc
			hasDoc = true
		default:
			if err := dec.SkipValue(); err != nil {
				return c, bad(dec, err)
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return c, bad(dec, err)
	}
	switch c.typ {
	case heartBeat:
		return c, nil
	case "":
		return c, dberr.New(dberr.BadRequest, "Bulk insert: %s has no Type", named(n, c.id))
	}
	if !hasDoc {
		return c, dberr.New(dberr.BadRequest, "Bulk insert: %s: PUT requires a Document", named(n, c.id))
	}
	if strings.TrimSpace(c.id) == "" {
		return c, dberr.New(dberr.BadRequest, "Bulk insert: %s: PUT requires an Id", named(n, c.id))
	}
	if strings.HasSuffix(c.id, "|") {
		return c, dberr.New(dberr.BadRequest, "Bulk insert: %s: identity ids (ending in '|') are not supported by bulk insert", named(n, c.id))
	}
	if err := storage.ValidateID(c.id); err != nil {
		return c, dberr.New(dberr.BadRequest, "Bulk insert: %s: %v", named(n, shortID(c.id)), err)
	}
	return c, nil
}

func shortID(id string) string {
	if len(id) > 64 {
		return id[:64] + "…"
	}
	return id
}

func unsupported(n int, id, typ string) error {
	what := typ
	switch typ {
	case "Counters":
		what = "counters (countersFor)"
	case "TimeSeriesBulkInsert":
		what = "time series (timeSeriesFor)"
	case "AttachmentPUT":
		what = "attachments (attachmentsFor)"
	}
	return dberr.New(dberr.BadRequest, "Bulk insert: %s: the command type '%s' is not supported: this server's bulk insert stores documents only (no %s yet)", named(n, id), typ, what)
}

// guard stops reading as soon as the document being read is known to be
// over the size limit (see batch.docGuard): the decoder asks for more input
// only to finish the current value.
type guard struct {
	r       io.Reader
	read    int64
	max     int64
	start   int64
	tripped int64
}

var errTooLarge = errors.New("document over the size limit")

func (g *guard) Read(p []byte) (int, error) {
	if g.max > 0 && g.start >= 0 && g.read-g.start > g.max {
		g.tripped = g.read - g.start
		return 0, errTooLarge
	}
	n, err := g.r.Read(p)
	g.read += int64(n)
	return n, err
}
