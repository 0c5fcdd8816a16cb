package client

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

// plainFrame decodes a frame the way read does when the fast path declines:
// the document changes it would deliver, and whether the frame is made of
// document changes only.
func plainFrame(data []byte) (docs []DocumentChange, onlyDocs bool, err error) {
	var msgs []wireMessage
	if err := jsonv2.Unmarshal(data, &msgs); err != nil {
		return nil, false, err
	}
	onlyDocs = true
	for _, m := range msgs {
		if m.Type != "DocumentChange" {
			onlyDocs = false
			continue
		}
		var d DocumentChange
		if err := jsonv2.Unmarshal(m.Value, &d); err != nil {
			onlyDocs = false
			continue
		}
		docs = append(docs, d)
	}
	return docs, onlyDocs, nil
}

func TestFastDocumentChanges(t *testing.T) {
	for _, c := range []struct {
		name, frame string
		want        []DocumentChange // nil with ok false: declined
		ok          bool
	}{
		{name: "server form", ok: true, frame: `[{"Type":"DocumentChange","Value":{"Type":"Put","Id":"users/1","CollectionName":"Users","ChangeVector":"A:1-x"}},{"Type":"DocumentChange","Value":{"ChangeVector":null,"Id":"é/2","Type":"Delete"}}]`,
			want: []DocumentChange{{Type: "Put", ID: "users/1", CollectionName: "Users", ChangeVector: "A:1-x"}, {Type: "Delete", ID: "é/2"}}},
		{name: "empty", frame: `[]`, ok: true},
		{name: "empty value", frame: `[{"Type":"DocumentChange","Value":{}}]`, ok: true, want: []DocumentChange{{}}},
		{name: "escape", frame: `[{"Type":"DocumentChange","Value":{"Id":"a\"b"}}]`},
		{name: "whitespace", frame: `[ {"Type":"DocumentChange","Value":{"Id":"a"}}]`},
		{name: "another kind", frame: `[{"Type":"Confirm","CommandId":1}]`},
		{name: "unknown member", frame: `[{"Type":"DocumentChange","Value":{"Id":"a","Counter":1}}]`},
		{name: "duplicate member", frame: `[{"Type":"DocumentChange","Value":{"Id":"a","Id":"b"}}]`},
		{name: "number", frame: `[{"Type":"DocumentChange","Value":{"Id":5}}]`},
		{name: "invalid UTF-8", frame: "[{\"Type\":\"DocumentChange\",\"Value\":{\"Id\":\"\xff\"}}]"},
		{name: "truncated", frame: `[{"Type":"DocumentChange","Value":{"Id":"a"}}`},
		{name: "trailing", frame: `[{"Type":"DocumentChange","Value":{"Id":"a"}}]x`},
		{name: "one message, not an array", frame: `{"Type":"DocumentChange","Value":{"Id":"a"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := fastDocumentChanges([]byte(c.frame), nil, nil)
			if ok != c.ok || (ok && !reflect.DeepEqual(got, c.want)) {
				t.Fatalf("got %+v %v, want %+v %v", got, ok, c.want, c.ok)
			}
			if ok {
				plain, only, err := plainFrame([]byte(c.frame))
				if err != nil || !only || !reflect.DeepEqual(plain, got) && len(plain)+len(got) > 0 {
					t.Fatalf("the plain decoding gives %+v %v %v", plain, only, err)
				}
			}
		})
	}
}

// FuzzChangesFrame: whatever the fast path accepts, the JSON decoder
// accepts too, as document changes only, with the same values.
func FuzzChangesFrame(f *testing.F) {
	for _, s := range []string{
		`[{"Type":"DocumentChange","Value":{"Type":"Put","Id":"users/1","CollectionName":"Users","ChangeVector":"A:1-x"}}]`,
		`[{"Type":"DocumentChange","Value":{"Id":null}},{"Type":"DocumentChange","Value":{}}]`,
		`[]`,
		`[{"Type":"Confirm","CommandId":1}]`,
		`[{"Type":"DocumentChange","Value":{"Id":"a\u00e9"}}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := fastDocumentChanges(data, nil, nil)
		if !ok {
			return
		}
		plain, only, err := plainFrame(data)
		if err != nil || !only {
			t.Fatalf("%q: the fast path accepted %+v; the decoder: %v, only document changes %v", data, got, err, only)
		}
		if len(plain)+len(got) > 0 && !reflect.DeepEqual(plain, got) {
			t.Fatalf("%q: fast %+v, decoder %+v", data, got, plain)
		}
	})
}

// BenchmarkChangesFrame: a frame of 25 document changes (what each of 100
// subscribers gets every 25 ms at 1,000 writes/s), through the fast path
// and through the JSON decoder, in the same run.
func BenchmarkChangesFrame(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i := range 25 {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"Type":"DocumentChange","Value":{"Type":"Put","Id":"changes/%d","CollectionName":"Changes","ChangeVector":"A:%d-ZzT6GeIb4ECL4n7G0SwfPQ"}}`, 1765000000000000000+i, 1000+i)
	}
	buf.WriteByte(']')
	frame := buf.Bytes()
	if !strings.HasPrefix(string(frame), "[") {
		b.Fatal("frame")
	}
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		var out []DocumentChange
		var recent recentStrings
		for b.Loop() {
			var ok bool
			if out, ok = fastDocumentChanges(frame, out[:0], &recent); !ok || len(out) != 25 {
				b.Fatal(ok, len(out))
			}
		}
	})
	b.Run("decoder", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			if docs, _, err := plainFrame(frame); err != nil || len(docs) != 25 {
				b.Fatal(err, len(docs))
			}
		}
	})
}
