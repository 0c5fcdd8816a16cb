package web

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
)

// DefaultMaxWorkerMessage bounds one message a subscription worker sends
// (the connection header, the worker options, each Acknowledge): those are
// a few hundred bytes, so 64 KiB is ample and a worker can never make the
// server hold more than that per connection.
const DefaultMaxWorkerMessage = 64 << 10

// errWorkerMessage is a worker message past a limit or not a JSON object.
var errWorkerMessage = errors.New("bad worker message")

// workerReader reads a worker's messages, concatenated JSON objects, one
// at a time: each is cut out of the stream by a scan that tracks strings
// and nesting, refused as soon as it passes maxBytes or maxDepth, and only
// then decoded. Nothing past the message is read, and nothing larger than
// maxBytes is ever held.
type workerReader struct {
	r        *bufio.Reader
	maxBytes int
	maxDepth int
	offset   int64 // bytes consumed from the connection
	buf      []byte
}

func newWorkerReader(r io.Reader, maxBytes, maxDepth int) *workerReader {
	return &workerReader{r: bufio.NewReaderSize(r, 4096), maxBytes: maxBytes, maxDepth: maxDepth}
}

// next reads one message into v. Whitespace between messages is skipped;
// io.EOF means the worker closed the connection between messages.
func (w *workerReader) next(v any) error {
	b, err := w.message()
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w ending at byte %d: %v", errWorkerMessage, w.offset, err)
	}
	return nil
}

func (w *workerReader) message() ([]byte, error) {
	var c byte
	var err error
	for {
		if c, err = w.r.ReadByte(); err != nil {
			return nil, err
		}
		w.offset++
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			break
		}
	}
	start := w.offset - 1
	if c != '{' {
		return nil, fmt.Errorf("%w: expected a JSON object at byte %d, found %q", errWorkerMessage, start, c)
	}
	w.buf = append(w.buf[:0], c)
	depth, inString, escaped := 1, false, false
	for depth > 0 {
		if c, err = w.r.ReadByte(); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		w.offset++
		if len(w.buf) == w.maxBytes {
			return nil, fmt.Errorf("%w: the message starting at byte %d is longer than %d bytes at byte %d (the limit is set by --max-worker-message)", errWorkerMessage, start, w.maxBytes, w.offset-1)
		}
		w.buf = append(w.buf, c)
		switch {
		case inString:
			if escaped {
				escaped = false
			} else if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > w.maxDepth {
				return nil, fmt.Errorf("%w: nested deeper than %d levels at byte %d (the limit is set by --max-json-depth)", errWorkerMessage, w.maxDepth, w.offset-1)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return w.buf, nil
}

// logWorkerError logs why a worker's connection ends: a message over a
// limit or not JSON at Info (someone should know), anything else (the
// worker left) at Debug.
func logWorkerError(log *slog.Logger, msg string, err error) {
	if errors.Is(err, errWorkerMessage) {
		log.Info(msg, "error", err)
		return
	}
	log.Debug(msg, "error", err)
}
