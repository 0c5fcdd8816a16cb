package web

import (
	"errors"
	"io"
	"strings"
	"testing"
)

type msg struct {
	Type string
	N    int
}

// The worker reader cuts concatenated JSON objects out of the stream
// (strings may hold braces and escaped quotes; whitespace and heartbeats
// between them are skipped), and refuses a message past its size or depth
// limit at the byte where it passes it, holding no more than the limit.
func TestWorkerReader(t *testing.T) {
	r := newWorkerReader(strings.NewReader(" {\"Type\":\"a}{\\\"\",\"N\":1}\r\n{\"Type\":\"b\",\"X\":[[{}]]}{\"N\":3}\n"), 64, 4)
	var got []msg
	for {
		var m msg
		err := r.next(&m)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	if len(got) != 3 || got[0].Type != `a}{"` || got[0].N != 1 || got[1].Type != "b" || got[2].N != 3 {
		t.Fatalf("messages %+v", got)
	}
	for _, c := range []struct {
		name, in, want string
	}{
		{"too long", `{"Info":"` + strings.Repeat("x", 100) + `"}`, "longer than 64 bytes at byte 64 (the limit is set by --max-worker-message)"},
		{"too deep", `{"a":[[[[[[[[1]]]]]]]]}`, "nested deeper than 4 levels at byte 8 (the limit is set by --max-json-depth)"},
		{"not an object", ` [1]`, "expected a JSON object at byte 1"},
		{"bad JSON", `{"N":"x"}`, "bad worker message ending at byte 9"},
	} {
		err := newWorkerReader(strings.NewReader(c.in), 64, 4).next(&msg{})
		if !errors.Is(err, errWorkerMessage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want …%s", c.name, err, c.want)
		}
	}
	if err := newWorkerReader(strings.NewReader(`{"Type":"a"`), 64, 4).next(&msg{}); err != io.ErrUnexpectedEOF {
		t.Fatalf("a cut message: %v", err)
	}
}
