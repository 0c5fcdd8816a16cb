package dump

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

// Verify passes a whole or merely truncated dump, refuses a damaged
// compressed one (with where it showed), reads plain JSON through, and
// returns a failing source's error as it is.
func TestVerify(t *testing.T) {
	var plain bytes.Buffer
	plain.WriteString(`{"Docs":[`)
	for i := range 5000 {
		if i > 0 {
			plain.WriteByte(',')
		}
		fmt.Fprintf(&plain, `{"N":%d,"@metadata":{"@id":"items/%d"}}`, i, i)
	}
	plain.WriteString(`]}`)
	var gz bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write(plain.Bytes())
	gw.Close()
	var zs bytes.Buffer
	zw, _ := zstd.NewWriter(&zs)
	zw.Write(plain.Bytes())
	zw.Close()
	damage := func(b []byte) []byte {
		d := append([]byte{}, b...)
		for i := len(d) / 2; i < len(d)/2+32; i++ {
			d[i] ^= 0xA5
		}
		return d
	}
	for _, c := range []struct {
		name    string
		data    []byte
		damaged bool
	}{
		{"plain", plain.Bytes(), false},
		{"plain truncated", plain.Bytes()[:plain.Len()/2], false},
		{"gzip", gz.Bytes(), false},
		{"gzip truncated", gz.Bytes()[:gz.Len()/2], false},
		{"gzip truncated in its header", gz.Bytes()[:5], false},
		{"gzip damaged", damage(gz.Bytes()), true},
		{"gzip with a wrong checksum", append(append([]byte{}, gz.Bytes()[:gz.Len()-8]...), 0, 0, 0, 0, 0, 0, 0, 0), true},
		{"zstd", zs.Bytes(), false},
		{"zstd truncated", zs.Bytes()[:zs.Len()/2], false},
		{"zstd with a wrong checksum", append(append([]byte{}, zs.Bytes()[:zs.Len()-4]...), 0, 0, 0, 0), true},
	} {
		err := Verify(context.Background(), bytes.NewReader(c.data))
		var de *DamagedError
		if got := errors.As(err, &de); got != c.damaged || (!c.damaged && err != nil) {
			t.Fatalf("%s: %v, want damaged %v", c.name, err, c.damaged)
		}
		if c.damaged && (de.FileOffset <= 0 || de.FileOffset > int64(len(c.data)) || !strings.Contains(err.Error(), "nothing was imported")) {
			t.Fatalf("%s: %v (offset %d of %d)", c.name, err, de.FileOffset, len(c.data))
		}
		// Through a tee, every byte of the source is read.
		var seen bytes.Buffer
		Verify(context.Background(), io.TeeReader(bytes.NewReader(c.data), &seen))
		if !bytes.Equal(seen.Bytes(), c.data) && !c.damaged {
			t.Fatalf("%s: the tee got %d of %d bytes", c.name, seen.Len(), len(c.data))
		}
	}
	// VerifyTo hands out the dump decoded, as plain JSON.
	for name, data := range map[string][]byte{"plain": plain.Bytes(), "gzip": gz.Bytes(), "zstd": zs.Bytes()} {
		var out bytes.Buffer
		if err := VerifyTo(context.Background(), bytes.NewReader(data), &out); err != nil || !bytes.Equal(out.Bytes(), plain.Bytes()) {
			t.Fatalf("VerifyTo %s: %v, %d bytes of %d", name, err, out.Len(), plain.Len())
		}
	}
	// A done context stops the check (a stream that decodes to far more
	// than it weighs is only CPU time).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Verify(ctx, bytes.NewReader(gz.Bytes())); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled check: %v", err)
	}
	gone := errors.New("the client went away")
	if err := Verify(context.Background(), &failingReader{r: bytes.NewReader(gz.Bytes()[:gz.Len()/2]), err: gone}); err != gone {
		t.Fatalf("a failing source: %v, want its own error", err)
	}
}
