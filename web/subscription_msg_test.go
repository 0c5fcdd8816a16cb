package web

import (
	"encoding/json"
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

// FuzzWorkerReader feeds arbitrary bytes to the worker message reader with
// small limits: it never panics, every message it returns fits the limits,
// and every failure is EOF, a cut message, or a bad worker message.
func FuzzWorkerReader(f *testing.F) {
	f.Add([]byte(`{"DatabaseName":"db","Operation":"Subscription","OperationVersion":53000}{"Type":"Acknowledge"}`))
	f.Add([]byte("\r\n{\"a\":\"}\\\"{\"}\n{}"))
	f.Add([]byte(strings.Repeat("{\"a\":", 100_000)))
	f.Add([]byte(`{"Info":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}`))
	f.Add([]byte(`{"Info":"` + strings.Repeat("x", 1<<20) + `"}`))
	f.Add([]byte(strings.Repeat(" ", 1<<20) + "{}"))
	const maxBytes, maxDepth = 256, 8
	f.Fuzz(func(t *testing.T, in []byte) {
		r := newWorkerReader(strings.NewReader(string(in)), maxBytes, maxDepth)
		for {
			var v any
			b, err := r.message()
			if err == nil {
				if len(b) > maxBytes {
					t.Fatalf("a %d-byte message with a limit of %d", len(b), maxBytes)
				}
				if err := json.Unmarshal(b, &v); err == nil && depthOf(v) > maxDepth {
					t.Fatalf("a message nested %d levels with a limit of %d", depthOf(v), maxDepth)
				}
				continue
			}
			if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, errWorkerMessage) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
	})
}

func depthOf(v any) int {
	d := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			d = max(d, depthOf(e))
		}
		return d + 1
	case []any:
		for _, e := range x {
			d = max(d, depthOf(e))
		}
		return d + 1
	}
	return 0
}
