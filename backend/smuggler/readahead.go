package smuggler

import (
	"context"
	"errors"
	"sync"

	"github.com/rookerydb/rookery/backend/smuggler/dump"
)

// An import runs in three stages on their own goroutines: the dump is
// decompressed and cut into items (aheadReader), each item is parsed and
// batched (Import's loop), and the batches are committed by the database's
// writer (one in flight). Reading ahead keeps the decompressor and the JSON
// scanner off the parsing goroutine.

// aheadChunk is what the read-ahead goroutine hands over at a time.
const (
	aheadItems = 256     // items per chunk
	aheadBytes = 1 << 20 // JSON bytes per chunk
	aheadDepth = 4       // chunks waiting
)

type aheadChunk struct {
	items []dump.Item
	err   error // after the items: what ended the reading (io.EOF at the end)
	// release, when set, is closed by the consumer once it is done with the
	// chunk's one item: an item with raw bytes (an attachment, a
	// time-series segment) is handed over without a copy, and the reader
	// waits before it reads on over them, so memory stays one such item.
	release chan struct{}
}

type aheadReader struct {
	ch   chan *aheadChunk
	quit chan struct{}
	done sync.WaitGroup

	cur     *aheadChunk
	pos     int
	pending chan struct{} // the release of the item last returned
}

// readAhead starts reading dr on its own goroutine, which closes dr when it
// ends: after the end of the dump or an error, or after stop once its read
// in progress returns (a read blocked on a client that stopped sending ends
// when the request does, which stop does not wait for).
func readAhead(dr *dump.Reader) *aheadReader {
	a := &aheadReader{ch: make(chan *aheadChunk, aheadDepth), quit: make(chan struct{})}
	a.done.Add(1)
	go a.run(dr)
	return a
}

func (a *aheadReader) send(c *aheadChunk) bool {
	select {
	case a.ch <- c:
		return true
	case <-a.quit:
		return false
	}
}

func (a *aheadReader) run(dr *dump.Reader) {
	defer a.done.Done()
	defer dr.Close()
	defer close(a.ch)
	c := &aheadChunk{}
	size := 0
	for {
		it, err := dr.Next()
		if err != nil {
			c.err = err
			a.send(c)
			return
		}
		if len(it.Binary) > 0 {
			// Hand over what is gathered, then this item alone, as it is.
			if len(c.items) > 0 {
				if !a.send(c) {
					return
				}
				c, size = &aheadChunk{}, 0
			}
			one := &aheadChunk{items: []dump.Item{*it}, release: make(chan struct{})}
			if !a.send(one) {
				return
			}
			select {
			case <-one.release:
			case <-a.quit:
				return
			}
			continue
		}
		item := *it
		item.JSON = append([]byte(nil), it.JSON...)
		c.items = append(c.items, item)
		size += len(item.JSON)
		if len(c.items) >= aheadItems || size >= aheadBytes {
			if !a.send(c) {
				return
			}
			c, size = &aheadChunk{}, 0
		}
	}
}

// next returns the next item, in the dump's order, or the error that ended
// the reading once every item before it was returned. It returns ctx's
// error when ctx ends while it waits (a cancelled import whose client
// stopped sending).
func (a *aheadReader) next(ctx context.Context) (*dump.Item, error) {
	if a.pending != nil {
		close(a.pending)
		a.pending = nil
	}
	for a.cur == nil || a.pos >= len(a.cur.items) {
		if a.cur != nil && a.cur.err != nil {
			return nil, a.cur.err
		}
		var c *aheadChunk
		ok := false
		select {
		case c, ok = <-a.ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if !ok {
			// Only after stop; a chunk with an error always comes first.
			return nil, errStopped
		}
		a.cur, a.pos = c, 0
	}
	it := &a.cur.items[a.pos]
	a.pos++
	if a.cur.release != nil {
		a.pending = a.cur.release
	}
	return it, nil
}

// stop tells the read-ahead goroutine to end; it does not wait for a read
// in progress.
func (a *aheadReader) stop() {
	close(a.quit)
}

// errStopped is next after stop; Import never sees it.
var errStopped = errors.New("the dump reader was stopped")
