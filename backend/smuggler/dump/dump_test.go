package dump

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

type read struct {
	section, kind string
	json          string
	bin           string
}

func readAll(t testing.TB, b []byte, lim Limits) ([]read, Compression, error) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(b), lim)
	if err != nil {
		return nil, "", err
	}
	defer r.Close()
	var out []read
	for {
		it, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, r.Compression(), nil
		}
		if err != nil {
			return out, r.Compression(), err
		}
		out = append(out, read{it.Section, it.Kind, string(it.JSON), string(it.Binary)})
	}
}

// sample writes a dump with every kind of item: properties, documents
// with an attachment stream (raw bytes full of JSON punctuation) before
// its owner, an empty section, identities.
func sample(t testing.TB, c Compression) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, c)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Property("BuildVersion", []byte("60000")))
	must(w.Property("DatabaseRecord", []byte(`{"DatabaseName":"shop"}`)))
	must(w.Begin("Docs"))
	bin := `]},"{[\"` + strings.Repeat("\x00\xff", 10)
	must(w.Attachment("aGFzaA==", "users/1|d|a.txt|aGFzaA==|text/plain", int64(len(bin)), strings.NewReader(bin)))
	must(w.Item([]byte(`{"Name":"Ann \"quoted\" \\","@metadata":{"@collection":"Users","@id":"users/1","@attachments":[{"Name":"a.txt","Hash":"aGFzaA=="}]}}`)))
	must(w.Item([]byte(`{"Max":32,"@metadata":{"@collection":"@hilo","@id":"Raven/Hilo/users"}}`)))
	must(w.End())
	must(w.Begin("Conflicts"))
	must(w.End())
	must(w.Begin("Identities"))
	must(w.Item([]byte(`{"Key":"orders|","Value":"42"}`)))
	must(w.End())
	must(w.Close())
	return buf.Bytes()
}

func TestRoundTripEveryCompression(t *testing.T) {
	for _, c := range []Compression{Gzip, Zstd, None} {
		t.Run(string(c), func(t *testing.T) {
			b := sample(t, c)
			got, comp, err := readAll(t, b, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if comp != c {
				t.Errorf("detected %s, wrote %s", comp, c)
			}
			want := []read{
				{"BuildVersion", KindValue, "60000", ""},
				{"DatabaseRecord", KindValue, `{"DatabaseName":"shop"}`, ""},
				{"Docs", KindAttachment, `{"@metadata":{"@export-type":"Attachment"},"Hash":"aGFzaA==","Size":28,"Tag":"users/1|d|a.txt|aGFzaA==|text/plain"}`, `]},"{[\"` + strings.Repeat("\x00\xff", 10)},
				{"Docs", KindItem, `{"Name":"Ann \"quoted\" \\","@metadata":{"@collection":"Users","@id":"users/1","@attachments":[{"Name":"a.txt","Hash":"aGFzaA=="}]}}`, ""},
				{"Docs", KindItem, `{"Max":32,"@metadata":{"@collection":"@hilo","@id":"Raven/Hilo/users"}}`, ""},
				{"Identities", KindItem, `{"Key":"orders|","Value":"42"}`, ""},
			}
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
				t.Fatalf("read\n%q\nwant\n%q", got, want)
			}
		})
	}
}

// A RavenDB 6.x time-series segment: a header with @size, then raw bytes.
func TestTimeSeriesSegment(t *testing.T) {
	seg := "\x01\x02]}\x03"
	dump := `{"BuildVersion":60016,"TimeSeries":[{"@document":{"DocId":"users/1","Name":"hr"},"@size":5}` + seg + `,{"@document":{"DocId":"users/2","Name":"hr"},"@size":0}]}`
	got, _, err := readAll(t, []byte(dump), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1].kind != KindTimeSeries || got[1].bin != seg || got[2].bin != "" {
		t.Fatalf("%q", got)
	}
}

func TestTruncatedStreamsSayWhere(t *testing.T) {
	full := sample(t, None)
	for _, cut := range []int{1, 40, len(full) / 2, len(full) - 1} {
		_, _, err := readAll(t, full[:cut], Limits{})
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("cut at %d: %v, want a *FormatError", cut, err)
		}
		if fe.Offset > int64(cut) {
			t.Errorf("cut at %d: error at offset %d, past the end", cut, fe.Offset)
		}
	}
	// Truncated gzip: the error names a section and an item.
	gz := sample(t, Gzip)
	_, _, err := readAll(t, gz[:len(gz)-30], Limits{})
	var fe *FormatError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("truncated gzip: %v", err)
	}
	// A damaged gzip body: flip bytes in the middle.
	bad := append([]byte{}, gz...)
	for i := len(bad) / 2; i < len(bad)/2+8; i++ {
		bad[i] ^= 0x5a
	}
	if _, _, err := readAll(t, bad, Limits{}); err == nil {
		t.Fatal("a damaged gzip stream read without error")
	}
}

func TestBadItemsArePositioned(t *testing.T) {
	cases := map[string]struct{ dump, want string }{
		"not json":      {`{"Docs":[{"a":1},{"b":tru}]}`, "section Docs, item 2"},
		"unbalanced":    {`{"Docs":[{"a":1]}]}`, "section Docs, item 1"},
		"garbage after": {`{"Docs":[]} x`, "after the end"},
		"no brace":      {`["Docs"]`, "starts with '{'"},
		"empty":         {``, "empty"},
		"missing comma": {`{"Docs":[{"a":1} {"b":2}]}`, "item 2"},
	}
	for name, c := range cases {
		_, _, err := readAll(t, []byte(c.dump), Limits{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, c.want)
		}
	}
}

func TestLimits(t *testing.T) {
	deep := `{"Docs":[` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `]}`
	if _, _, err := readAll(t, []byte(deep), Limits{}); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("deep: %v", err)
	}
	huge := `{"Docs":[{"a":"` + strings.Repeat("x", 2<<20) + `"}]}`
	if _, _, err := readAll(t, []byte(huge), Limits{MaxItem: 1 << 20}); err == nil || !strings.Contains(err.Error(), "over 1048576 bytes") {
		t.Fatalf("huge: %v", err)
	}
	bigAtt := `{"Docs":[{"@metadata":{"@export-type":"Attachment"},"Hash":"h","Size":999999999999}]}`
	if _, _, err := readAll(t, []byte(bigAtt), Limits{}); err == nil || !strings.Contains(err.Error(), "attachment of 999999999999 bytes") {
		t.Fatalf("big attachment: %v", err)
	}
}

// A gzip bomb's items still go one at a time: reading stops at the item
// limit, not at the end of memory.
func TestHugeDecompressedItemStopsAtTheLimit(t *testing.T) {
	var buf bytes.Buffer
	gw := gzip.NewWriter(&buf)
	io.WriteString(gw, `{"Docs":["`)
	chunk := bytes.Repeat([]byte("A"), 1<<20)
	for i := 0; i < 200; i++ { // 200 MB of one string
		gw.Write(chunk)
	}
	io.WriteString(gw, `"]}`)
	gw.Close()
	_, _, err := readAll(t, buf.Bytes(), Limits{MaxItem: 4 << 20})
	if err == nil || !strings.Contains(err.Error(), "over 4194304 bytes") {
		t.Fatalf("%v", err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add(sample(f, None))
	f.Add(sample(f, Gzip))
	f.Add(sample(f, Zstd))
	f.Add([]byte(`{"Docs":[` + strings.Repeat("[", 100_000) + `]}`))
	f.Add([]byte(`{"Docs":["` + strings.Repeat("\\", 1<<20) + `"]}`))
	f.Add([]byte(`{"TimeSeries":[{"@size":3}abc]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, _, err := readAll(t, b, Limits{MaxItem: 1 << 20, MaxDepth: 64, MaxBinary: 1 << 20})
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("an error without a position: %v", err)
			}
			return
		}
		for _, it := range got {
			if len(it.json) > 1<<20 {
				t.Fatalf("an item of %d bytes passed the limit", len(it.json))
			}
		}
	})
}
