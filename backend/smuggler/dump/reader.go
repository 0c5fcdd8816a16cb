// Package dump reads and writes RavenDB's `.ravendbdump` stream: one JSON
// object, compressed with gzip (RavenDB 4.x–5.x, and Rookery by default) or
// zstd (RavenDB 6.x and later), whose properties are sections ("Docs",
// "Indexes", "Identities", …). Inside the document sections an attachment
// is a small JSON header followed directly by its raw bytes, and inside
// "TimeSeries" a segment header is followed by its raw bytes too, so the
// stream is not JSON a decoder can read: Reader is a streaming scanner that
// hands out one item at a time and switches to "read N raw bytes" after
// such a header.
//
// Every read is bounded (item size, nesting depth, raw bytes), memory is one
// item at a time, and a malformed or truncated stream stops with a
// *FormatError naming the section, the item number and the byte offset in
// the decompressed stream.
package dump

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/klauspost/compress/gzip"
	"io"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Compression of a dump stream.
type Compression string

// Compressions. Import detects them by their first bytes.
const (
	Gzip Compression = "Gzip"
	Zstd Compression = "Zstd"
	None Compression = "None"
)

// Limits bound what one item may cost while reading.
type Limits struct {
	// MaxItem bounds one JSON item (a document, an index definition, the
	// database record) in bytes; 64 MiB when zero.
	MaxItem int
	// MaxDepth bounds the nesting of one item; 512 when zero.
	MaxDepth int
	// MaxBinary bounds the raw bytes after one attachment or time-series
	// header; 256 MiB when zero.
	MaxBinary int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxItem <= 0 {
		l.MaxItem = 64 << 20
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 512
	}
	if l.MaxBinary <= 0 {
		l.MaxBinary = 256 << 20
	}
	return l
}

// FormatError says where a dump stopped being readable.
type FormatError struct {
	Section string // "" before the first section
	Item    int    // 1-based item number in the section; 0 for the section itself
	Offset  int64  // byte offset in the decompressed stream
	Msg     string
}

func (e *FormatError) Error() string {
	where := "at the top level"
	if e.Section != "" {
		where = "in section " + e.Section
		if e.Item > 0 {
			where += fmt.Sprintf(", item %d", e.Item)
		}
	}
	return fmt.Sprintf("dump %s, byte %d of the decompressed stream: %s", where, e.Offset, e.Msg)
}

// Kinds of item.
const (
	// KindValue: a top-level property that is not an array
	// ("BuildVersion", "DatabaseRecord"); JSON is its value.
	KindValue = "value"
	// KindItem: one element of a section's array; JSON is the element.
	KindItem = "item"
	// KindAttachment: an attachment stream inside a document section;
	// JSON is its header, Binary its bytes.
	KindAttachment = "attachment"
	// KindTimeSeries: a time-series segment; JSON is its header, Binary
	// the segment's bytes.
	KindTimeSeries = "timeseries"
)

// Item is one thing read from a dump.
type Item struct {
	Section string
	Index   int    // 1-based within the section (attachments count as items)
	Kind    string // KindValue, KindItem, KindAttachment, KindTimeSeries
	JSON    []byte // valid JSON; only valid until the next call to Next
	Binary  []byte // raw bytes after an attachment or time-series header
	Offset  int64  // where the item starts in the decompressed stream
}

// AttachmentHeader is the header of an attachment stream.
type AttachmentHeader struct {
	Metadata struct {
		ExportType string `json:"@export-type"`
	} `json:"@metadata"`
	Hash string `json:"Hash"`
	Size int64  `json:"Size"`
	Tag  string `json:"Tag"`
}

// Reader reads a dump one item at a time.
type Reader struct {
	src         *countingReader
	br          *bufio.Reader
	lim         Limits
	compression Compression
	closer      func()

	state   int // 0 before '{', 1 expecting a property, 2 inside an array section, 3 done
	section string
	index   int
	first   bool // inside an array: no element read yet
	buf     []byte
	bin     []byte

	lazy map[string]bool // sections whose items are not checked as JSON here
}

// countingReader counts the decompressed bytes handed to the bufio.Reader.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// NewReader detects the compression of r by its first bytes (zstd's frame
// magic 28 B5 2F FD, gzip's 1F 8B, anything else plain JSON) and returns a
// reader of its items.
func NewReader(r io.Reader, lim Limits) (*Reader, error) {
	in := bufio.NewReaderSize(r, 64<<10)
	head, err := in.Peek(4)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	rd := &Reader{lim: lim.withDefaults(), closer: func() {}}
	var plain io.Reader
	switch {
	case len(head) >= 4 && head[0] == 0x28 && head[1] == 0xB5 && head[2] == 0x2F && head[3] == 0xFD:
		zr, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(64<<20))
		if err != nil {
			return nil, &FormatError{Msg: "not a zstd stream: " + err.Error()}
		}
		rd.compression, plain, rd.closer = Zstd, zr, zr.Close
	case len(head) >= 2 && head[0] == 0x1F && head[1] == 0x8B:
		gr, err := gzip.NewReader(in)
		if err != nil {
			return nil, &FormatError{Msg: "not a gzip stream: " + err.Error()}
		}
		rd.compression, plain = Gzip, gr
	default:
		rd.compression, plain = None, in
	}
	rd.src = &countingReader{r: plain}
	rd.br = bufio.NewReaderSize(rd.src, 64<<10)
	return rd, nil
}

// ParsedStrictly names sections whose items the caller parses with a strict
// JSON parser of its own (the documents, with document.Parse): their items
// are still cut at the right place, bounded in size and depth, but not
// checked as JSON a second time here. Their JSON is then only well-nested.
func (r *Reader) ParsedStrictly(sections ...string) {
	if r.lazy == nil {
		r.lazy = map[string]bool{}
	}
	for _, s := range sections {
		r.lazy[s] = true
	}
}

// Compression is the stream's compression, as detected.
func (r *Reader) Compression() Compression { return r.compression }

// Offset is how many decompressed bytes were consumed.
func (r *Reader) Offset() int64 { return r.src.n - int64(r.br.Buffered()) }

// Close releases the decompressor.
func (r *Reader) Close() { r.closer() }

func (r *Reader) fail(item int, off int64, format string, args ...any) error {
	return &FormatError{Section: r.section, Item: item, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// readErr turns an I/O error at offset off into a positioned error.
func (r *Reader) readErr(item int, err error) error {
	var fe *FormatError
	if errors.As(err, &fe) {
		return err
	}
	msg := err.Error()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		msg = "the stream ends here: the file is truncated"
	} else if r.compression != None {
		msg = "the " + strings.ToLower(string(r.compression)) + " stream is damaged: " + msg
	}
	return r.fail(item, r.Offset(), "%s", msg)
}

// skipSpace skips JSON whitespace and returns the next byte without
// consuming it.
func (r *Reader) skipSpace() (byte, error) {
	for {
		c, err := r.br.ReadByte()
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c, r.br.UnreadByte()
	}
}

// Next returns the next item, or io.EOF after the closing brace of the
// dump.
func (r *Reader) Next() (*Item, error) {
	for {
		switch r.state {
		case 0:
			c, err := r.skipSpace()
			if err != nil {
				if errors.Is(err, io.EOF) && r.Offset() == 0 {
					return nil, r.fail(0, 0, "the stream is empty")
				}
				return nil, r.readErr(0, err)
			}
			if c != '{' {
				return nil, r.fail(0, r.Offset(), "a dump starts with '{', not %q", c)
			}
			_, _ = r.br.ReadByte()
			r.state, r.first = 1, true
		case 1:
			c, err := r.skipSpace()
			if err != nil {
				return nil, r.readErr(0, err)
			}
			if c == '}' {
				_, _ = r.br.ReadByte()
				r.state, r.section = 3, ""
				continue
			}
			if !r.first {
				if c != ',' {
					return nil, r.fail(0, r.Offset(), "expected ',' or '}' after section %s, found %q", r.section, c)
				}
				_, _ = r.br.ReadByte()
				if c, err = r.skipSpace(); err != nil {
					return nil, r.readErr(0, err)
				}
			}
			if c != '"' {
				return nil, r.fail(0, r.Offset(), "expected a section name, found %q", c)
			}
			off := r.Offset()
			r.buf = r.buf[:0]
			if err := r.scanString(); err != nil {
				return nil, r.readErr(0, err)
			}
			var name string
			if err := json.Unmarshal(r.buf, &name); err != nil {
				return nil, r.fail(0, off, "a section name that is not a JSON string")
			}
			if len(name) > 256 {
				return nil, r.fail(0, off, "a section name of %d bytes", len(name))
			}
			r.first = false
			r.section, r.index = name, 0
			if c, err = r.skipSpace(); err != nil {
				return nil, r.readErr(0, err)
			}
			if c != ':' {
				return nil, r.fail(0, r.Offset(), "expected ':' after the section name, found %q", c)
			}
			_, _ = r.br.ReadByte()
			if c, err = r.skipSpace(); err != nil {
				return nil, r.readErr(0, err)
			}
			if c == '[' {
				_, _ = r.br.ReadByte()
				r.state, r.first = 2, true
				continue
			}
			off = r.Offset()
			if err := r.scanValue(1); err != nil {
				return nil, r.readErr(1, err)
			}
			r.index = 1
			return &Item{Section: name, Index: 1, Kind: KindValue, JSON: r.buf, Offset: off}, nil
		case 2:
			c, err := r.skipSpace()
			if err != nil {
				return nil, r.readErr(r.index+1, err)
			}
			if c == ']' {
				_, _ = r.br.ReadByte()
				r.state, r.first = 1, false
				continue
			}
			if !r.first {
				if c != ',' {
					return nil, r.fail(r.index+1, r.Offset(), "expected ',' or ']' after item %d, found %q", r.index, c)
				}
				_, _ = r.br.ReadByte()
				if _, err = r.skipSpace(); err != nil {
					return nil, r.readErr(r.index+1, err)
				}
			}
			r.first = false
			r.index++
			off := r.Offset()
			if err := r.scanValue(1); err != nil {
				return nil, r.readErr(r.index, err)
			}
			it := &Item{Section: r.section, Index: r.index, Kind: KindItem, JSON: r.buf, Offset: off}
			if err := r.binaryAfter(it); err != nil {
				return nil, err
			}
			return it, nil
		default:
			c, err := r.skipSpace()
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			if err != nil {
				return nil, r.readErr(0, err)
			}
			return nil, r.fail(0, r.Offset(), "data after the end of the dump: %q", c)
		}
	}
}

// binaryAfter reads the raw bytes that follow an attachment header (in a
// document section) or a time-series segment header.
func (r *Reader) binaryAfter(it *Item) error {
	var size int64
	switch {
	case bytes.Contains(it.JSON, []byte(`"@export-type"`)):
		var h AttachmentHeader
		if err := json.Unmarshal(it.JSON, &h); err != nil || h.Metadata.ExportType != "Attachment" {
			return nil
		}
		it.Kind, size = KindAttachment, h.Size
	case r.section == "TimeSeries" && bytes.Contains(it.JSON, []byte(`"@size"`)):
		var h struct {
			Size *int64 `json:"@size"`
		}
		if err := json.Unmarshal(it.JSON, &h); err != nil || h.Size == nil {
			return nil
		}
		it.Kind, size = KindTimeSeries, *h.Size
	default:
		return nil
	}
	if size < 0 || size > r.lim.MaxBinary {
		return r.fail(it.Index, it.Offset, "a %s of %d bytes (the limit is %d)", it.Kind, size, r.lim.MaxBinary)
	}
	if int64(cap(r.bin)) < size {
		r.bin = make([]byte, size)
	}
	r.bin = r.bin[:size]
	if _, err := io.ReadFull(r.br, r.bin); err != nil {
		return r.readErr(it.Index, err)
	}
	it.Binary = r.bin
	return nil
}

// scanString appends one JSON string (the opening quote is next) to buf.
func (r *Reader) scanString() error {
	c, err := r.br.ReadByte()
	if err != nil {
		return err
	}
	if c != '"' {
		return r.fail(r.index, r.Offset()-1, "expected a string, found %q", c)
	}
	r.buf = append(r.buf, c)
	for {
		// Copy runs of plain bytes at once.
		chunk, err := r.br.ReadSlice('"')
		if len(r.buf)+len(chunk) > r.lim.MaxItem {
			return r.fail(r.index, r.Offset(), "an item over %d bytes", r.lim.MaxItem)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
		r.buf = append(r.buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		// The quote ends the string unless an odd number of backslashes
		// precede it.
		n := 0
		for i := len(r.buf) - 2; i >= 0 && r.buf[i] == '\\'; i-- {
			n++
		}
		if n%2 == 0 {
			return nil
		}
	}
}

// scanValue appends one JSON value to buf (after resetting it when depth
// is 1) and checks it is valid JSON.
func (r *Reader) scanValue(depth int) error {
	if depth == 1 {
		r.buf = r.buf[:0]
	}
	start := r.Offset()
	stack := make([]byte, 0, 16)
	for {
		c, err := r.br.ReadByte()
		if err != nil {
			return err
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			r.buf = append(r.buf, c)
			continue
		case '"':
			_ = r.br.UnreadByte()
			if err := r.scanString(); err != nil {
				return err
			}
		case '{', '[':
			if len(stack)+1 > r.lim.MaxDepth {
				return r.fail(r.index, r.Offset()-1, "an item nested deeper than %d levels", r.lim.MaxDepth)
			}
			stack = append(stack, c)
			r.buf = append(r.buf, c)
		case '}', ']':
			if len(stack) == 0 || (c == '}') != (stack[len(stack)-1] == '{') {
				return r.fail(r.index, r.Offset()-1, "unbalanced %q", c)
			}
			stack = stack[:len(stack)-1]
			r.buf = append(r.buf, c)
		default:
			r.buf = append(r.buf, c)
			// A scalar outside any container ends at the next delimiter.
			if len(stack) == 0 {
				for {
					d, err := r.br.ReadByte()
					if err != nil {
						if errors.Is(err, io.EOF) {
							break
						}
						return err
					}
					if d == ',' || d == ']' || d == '}' || d == ' ' || d == '\n' || d == '\r' || d == '\t' {
						_ = r.br.UnreadByte()
						break
					}
					r.buf = append(r.buf, d)
					if len(r.buf) > 1024 {
						return r.fail(r.index, r.Offset(), "a scalar over 1024 bytes")
					}
				}
			}
		}
		if len(r.buf) > r.lim.MaxItem {
			return r.fail(r.index, r.Offset(), "an item over %d bytes", r.lim.MaxItem)
		}
		if len(stack) == 0 {
			if r.lazy[r.section] {
				return nil
			}
			if !json.Valid(r.buf) {
				return r.fail(r.index, start, "an item that is not valid JSON")
			}
			return nil
		}
	}
}
