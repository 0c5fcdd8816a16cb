package dump

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// DamagedError says a compressed dump failed its own check: gzip's CRC-32
// and length, a zstd frame's checksum, or coding that does not decode.
type DamagedError struct {
	Compression Compression
	FileOffset  int64 // bytes of the file read when the damage showed
	Decoded     int64 // bytes decoded before it
	Err         error
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("the %s stream is damaged (%v), seen at byte %d of the file after %d decoded bytes: nothing was imported, because a compressed stream is checked only at its end and what was decoded before may be damaged too",
		strings.ToLower(string(e.Compression)), e.Err, e.FileOffset, e.Decoded)
}

func (e *DamagedError) Unwrap() error { return e.Err }

// sourceReader counts what it read and keeps the source's own error, so
// that a failing source (a client gone) is not taken for damage.
type sourceReader struct {
	r   io.Reader
	n   int64
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.n += int64(n)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// sinkWriter keeps the error of the writer decoded bytes go to (a full
// disk is not damage).
type sinkWriter struct {
	ctx context.Context
	w   io.Writer
	err error
}

func (s *sinkWriter) Write(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		s.err = err
		return 0, err
	}
	n, err := s.w.Write(p)
	if err != nil {
		s.err = err
	}
	return n, err
}

// Verify reads all of r and checks what its compression can check. A
// compressed stream says it is damaged only at its end (gzip) or at the
// end of a frame (zstd): the bytes decoded before that may already be
// wrong, and may still be valid JSON (a document under an id it never
// had). So an import verifies the whole dump first and reads nothing of a
// damaged one (*DamagedError). A stream that merely ends early is not
// damaged: what came before its end is intact, and the import reads it and
// says where it ends. Plain JSON has nothing to check; it is read through
// (a caller spooling r through a tee gets all of it). An error of r itself
// is returned as it is.
// It stops with ctx's error once ctx is done (a stream that decodes to far
// more than it weighs is only CPU time, and the import can be killed).
func Verify(ctx context.Context, r io.Reader) error { return VerifyTo(ctx, r, io.Discard) }

// VerifyTo is Verify that also writes the decoded stream to w (the dump as
// plain JSON). After a *DamagedError, what w got must not be used.
func VerifyTo(ctx context.Context, r io.Reader, w io.Writer) error {
	src := &sourceReader{r: r}
	sink := &sinkWriter{ctx: ctx, w: w}
	in := bufio.NewReaderSize(src, 64<<10)
	head, err := in.Peek(4)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	buf := make([]byte, 64<<10)
	var dec io.Reader
	comp := None
	switch {
	case len(head) >= 4 && head[0] == 0x28 && head[1] == 0xB5 && head[2] == 0x2F && head[3] == 0xFD:
		zr, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(64<<20))
		if err != nil {
			return &DamagedError{Compression: Zstd, Err: err}
		}
		defer zr.Close()
		dec, comp = zr, Zstd
	case len(head) >= 2 && head[0] == 0x1F && head[1] == 0x8B:
		gr, err := gzip.NewReader(in)
		if err != nil {
			if src.err != nil {
				return src.err
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil // truncated in its header: the import says so
			}
			return &DamagedError{Compression: Gzip, Err: err}
		}
		dec, comp = gr, Gzip
	default:
		_, err := io.CopyBuffer(sink, in, buf)
		return err
	}
	decoded, err := io.CopyBuffer(sink, dec, buf)
	switch {
	case src.err != nil:
		return src.err
	case sink.err != nil:
		return sink.err
	case err == nil, errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		// Complete and checked, or truncated. Read the rest (a tee spools
		// it all).
		_, err := io.CopyBuffer(io.Discard, in, buf)
		return err
	}
	return &DamagedError{Compression: comp, FileOffset: src.n - int64(in.Buffered()), Decoded: decoded, Err: err}
}
