package dump

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/klauspost/compress/gzip"
	"io"

	"github.com/klauspost/compress/zstd"
)

// BuildVersion is what Rookery writes as a dump's BuildVersion: a 6.x
// number, so RavenDB reads the dump with its current rules (identities as
// strings, auto index definitions in their persisted form).
const BuildVersion = 60000

// Writer writes a dump: properties and sections in the order they are
// given, items one at a time, through the compressor. It holds one item at
// a time.
type Writer struct {
	comp    io.WriteCloser
	bw      *bufio.Writer
	props   int  // properties written
	open    bool // inside a section's array
	items   int  // items in the open section
	section string
	err     error
}

// NewWriter starts a dump on w, compressed with c (Gzip when empty).
func NewWriter(w io.Writer, c Compression) (*Writer, error) {
	var comp io.WriteCloser
	switch c {
	case Gzip, "":
		gw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
		if err != nil {
			return nil, err
		}
		comp = gw
	case Zstd:
		zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		comp = zw
	case None:
		comp = nopCloser{w}
	default:
		return nil, fmt.Errorf("unknown compression %q (Gzip or Zstd)", c)
	}
	wr := &Writer{comp: comp, bw: bufio.NewWriterSize(comp, 64<<10)}
	wr.bw.WriteByte('{')
	return wr, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func (w *Writer) name(name string) {
	if w.props > 0 {
		w.bw.WriteByte(',')
	}
	w.props++
	b, _ := json.Marshal(name)
	w.bw.Write(b)
	w.bw.WriteByte(':')
}

// Property writes a top-level property that is not a section of items
// ("BuildVersion", "DatabaseRecord"); value must be valid JSON.
func (w *Writer) Property(name string, value []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.open {
		return errors.New("dump: a property inside a section")
	}
	w.name(name)
	_, w.err = w.bw.Write(value)
	return w.err
}

// Begin opens a section of items ("Docs", "Indexes", …).
func (w *Writer) Begin(section string) error {
	if w.err != nil {
		return w.err
	}
	if w.open {
		return errors.New("dump: a section inside a section")
	}
	w.name(section)
	w.bw.WriteByte('[')
	w.open, w.items, w.section = true, 0, section
	return nil
}

// Item writes one item of the open section; raw must be valid JSON.
func (w *Writer) Item(raw []byte) error {
	if w.err != nil {
		return w.err
	}
	if !w.open {
		return errors.New("dump: an item outside a section")
	}
	if w.items > 0 {
		w.bw.WriteByte(',')
	}
	w.items++
	_, w.err = w.bw.Write(raw)
	return w.err
}

// Attachment writes an attachment stream into the open document section:
// its header, then size raw bytes from data, as RavenDB lays it out just
// before the document that owns it.
func (w *Writer) Attachment(hash, tag string, size int64, data io.Reader) error {
	var h AttachmentHeader
	h.Metadata.ExportType = "Attachment"
	h.Hash, h.Size, h.Tag = hash, size, tag
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := w.Item(b); err != nil {
		return err
	}
	n, err := io.CopyN(w.bw, data, size)
	if err != nil {
		w.err = fmt.Errorf("dump: attachment %s: %d of %d bytes: %w", hash, n, size, err)
	}
	return w.err
}

// End closes the open section.
func (w *Writer) End() error {
	if w.err != nil {
		return w.err
	}
	if !w.open {
		return errors.New("dump: no section to end")
	}
	w.open = false
	return w.bw.WriteByte(']')
}

// Close ends the dump and flushes the compressor (it does not close the
// underlying writer).
func (w *Writer) Close() error {
	if w.err != nil {
		_ = w.comp.Close()
		return w.err
	}
	if w.open {
		if err := w.End(); err != nil {
			return err
		}
	}
	w.bw.WriteByte('}')
	if err := w.bw.Flush(); err != nil {
		_ = w.comp.Close()
		return err
	}
	return w.comp.Close()
}

// Flush pushes what was written so far through the compressor (a client
// streaming the export sees progress).
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if err := w.bw.Flush(); err != nil {
		return err
	}
	if f, ok := w.comp.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return nil
}
