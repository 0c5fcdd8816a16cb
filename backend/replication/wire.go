package replication

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
)

// A batch is the one message that carries bulk: it travels in a binary form
// instead of JSON, so a body is copied once into the message and sliced
// out of it on the other side, never escaped, validated or re-encoded.
//
//	0x01 'C'                       marker (a JSON message starts with '{'; 'B' was
//	                               the format without After, refused now)
//	uint64 After, little-endian: the position the batch was read after (the
//	       previous batch's LastEtag, or the handshake's position)
//	uint64 LastEtag, little-endian
//	uint32 item count, little-endian
//	per item:
//	  byte     kind: bit 0 Delete (else Put), bit 1 Unordered (see storage.Item),
//	           bits 2-4 the item's storage.ItemKind (0 document, 1 attachment chunk, 2 revision,
//	           3 counters, 4 time series; see storage.KindTimeSeries for what the fields
//	           then carry)
//	  uvarint  etag
//	  varint   last modified, unix nanoseconds
//	  uvarint length + bytes: id, collection, change vector
//	  uvarint  revision flags (storage.RevisionFlags), only for a revision
//	  uvarint length + bytes: body
const batchMarker0, batchMarker1 = 0x01, 'C'

const batchHeader = 2 + 8 + 8 + 4

// minItemBytes is the smallest encoded item: the kind byte, two one-byte
// varints and four empty lengths.
const minItemBytes = 1 + 1 + 1 + 4

// MaxBatchItems bounds the items of one batch, sent or received (a sender's
// BatchSize is clamped to it).
const MaxBatchItems = 1 << 16

// Item kind bits.
const (
	kindDelete    = 1
	kindUnordered = 2
	kindShift     = 2    // storage.ItemKind in bits 2-4
	kindMask      = 0x1c // bits 2-4
)

// knownKind tells whether a receiver can apply items of kind k.
func knownKind(k storage.ItemKind) bool {
	switch k {
	case storage.KindDocument, storage.KindAttachment, storage.KindRevision, storage.KindCounters, storage.KindTimeSeries:
		return true
	}
	return false
}

var errBadBatch = errors.New("bad replication batch")

func isBatch(b []byte) bool { return len(b) >= 2 && b[0] == batchMarker0 && b[1] == batchMarker1 }

// batchEncoder builds one batch message in a reusable buffer.
type batchEncoder struct {
	buf   []byte
	count int
	after int64
	last  int64
}

// reset starts a new batch; set last before bytes.
func (e *batchEncoder) reset() {
	e.buf = append(e.buf[:0], make([]byte, batchHeader)...)
	e.count, e.after, e.last = 0, 0, 0
}

func (e *batchEncoder) add(it *storage.Item) {
	kind := byte(0)
	if it.Type == "Delete" {
		kind |= kindDelete
	}
	if it.Unordered {
		kind |= kindUnordered
	}
	kind |= byte(it.Kind) << kindShift & kindMask
	e.buf = append(e.buf, kind)
	e.buf = binary.AppendUvarint(e.buf, uint64(it.Etag))
	e.buf = binary.AppendVarint(e.buf, it.LastModified.UnixNano())
	for _, s := range []string{it.ID, it.Collection, it.ChangeVector} {
		e.buf = binary.AppendUvarint(e.buf, uint64(len(s)))
		e.buf = append(e.buf, s...)
	}
	if it.Kind == storage.KindRevision {
		e.buf = binary.AppendUvarint(e.buf, uint64(it.RevisionFlags))
	}
	e.buf = binary.AppendUvarint(e.buf, uint64(len(it.Body)))
	e.buf = append(e.buf, it.Body...)
	e.count++
}

// bytes returns the finished message, valid until the next reset.
func (e *batchEncoder) bytes() []byte {
	e.buf[0], e.buf[1] = batchMarker0, batchMarker1
	binary.LittleEndian.PutUint64(e.buf[2:], uint64(e.after))
	binary.LittleEndian.PutUint64(e.buf[10:], uint64(e.last))
	binary.LittleEndian.PutUint32(e.buf[18:], uint32(e.count))
	return e.buf
}

// decodeBatch reads a batch message. Bodies are slices of b.
func decodeBatch(b []byte) (after, lastEtag int64, items []storage.Item, err error) {
	if !isBatch(b) || len(b) < batchHeader {
		return 0, 0, nil, errBadBatch
	}
	after = int64(binary.LittleEndian.Uint64(b[2:]))
	lastEtag = int64(binary.LittleEndian.Uint64(b[10:]))
	count := uint64(binary.LittleEndian.Uint32(b[18:]))
	b = b[batchHeader:]
	uv := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			err = errBadBatch
			return 0
		}
		b = b[n:]
		return v
	}
	bytesOf := func() []byte {
		n := uv()
		if err != nil || n > uint64(len(b)) {
			err = errBadBatch
			return nil
		}
		s := b[:n:n]
		b = b[n:]
		return s
	}
	// Every item takes at least minItemBytes: a count the message cannot
	// hold, or above MaxBatchItems, is refused before anything is allocated.
	if count > uint64(len(b)/minItemBytes) || count > MaxBatchItems {
		return 0, 0, nil, errBadBatch
	}
	items = make([]storage.Item, 0, count)
	for i := uint64(0); i < count && err == nil; i++ {
		if len(b) == 0 {
			return 0, 0, nil, errBadBatch
		}
		var it storage.Item
		it.Type = "Put"
		if b[0]&kindDelete != 0 {
			it.Type = "Delete"
		}
		it.Unordered = b[0]&kindUnordered != 0
		it.Kind = storage.ItemKind(b[0] & kindMask >> kindShift)
		if !knownKind(it.Kind) || b[0]&^(kindDelete|kindUnordered|kindMask) != 0 {
			return 0, 0, nil, errBadBatch
		}
		b = b[1:]
		it.Etag = int64(uv())
		lm, n := binary.Varint(b)
		if n <= 0 {
			return 0, 0, nil, errBadBatch
		}
		b = b[n:]
		it.LastModified = time.Unix(0, lm).UTC()
		it.ID = string(bytesOf())
		it.Collection = string(bytesOf())
		it.ChangeVector = string(bytesOf())
		if it.Kind == storage.KindRevision {
			f := uv()
			if f > 1<<16 {
				return 0, 0, nil, errBadBatch
			}
			it.RevisionFlags = storage.RevisionFlags(f)
		}
		it.Body = bytesOf()
		if len(it.Body) == 0 {
			it.Body = nil
		}
		items = append(items, it)
	}
	if err != nil || len(b) != 0 {
		return 0, 0, nil, errBadBatch
	}
	return after, lastEtag, items, nil
}
