package replication

import (
	"errors"
	"testing"
	"time"

	"github.com/rookerydb/rookery/backend/storage"
)

// A time-series item keeps its kind across the wire; a kind no receiver
// knows refuses the batch.
func TestWireCarriesTimeSeriesKind(t *testing.T) {
	var enc batchEncoder
	enc.reset()
	in := []storage.Item{
		{Type: "Put", ID: "users/1", Collection: "HeartRate", ChangeVector: "42", Etag: 9, LastModified: time.Unix(0, 1_796_601_600_000).UTC(), Body: []byte{0, 1, 2, 3, 4, 5, 6, 7, 8}, Kind: storage.KindTimeSeries},
		{Type: "Delete", ID: "users/1", Collection: "HeartRate", ChangeVector: "43", Etag: 10, LastModified: time.Unix(0, 5).UTC(), Body: []byte("9"), Kind: storage.KindTimeSeries},
		{Type: "Put", ID: "users/2", Collection: "Users", ChangeVector: "A:1-x", Etag: 11, LastModified: time.Unix(0, 7).UTC(), Body: []byte(`{"@metadata":{}}`)},
	}
	for i := range in {
		enc.add(&in[i])
	}
	enc.last = 11
	b := append([]byte(nil), enc.bytes()...)
	_, last, out, err := decodeBatch(b)
	if err != nil || last != 11 || len(out) != 3 {
		t.Fatalf("decode: %v %d %d", err, last, len(out))
	}
	for i := range in {
		if out[i].Kind != in[i].Kind || out[i].Type != in[i].Type || out[i].ChangeVector != in[i].ChangeVector || !out[i].LastModified.Equal(in[i].LastModified) || string(out[i].Body) != string(in[i].Body) {
			t.Fatalf("item %d: %+v, sent %+v", i, out[i], in[i])
		}
	}
	// Kind 5 (not defined) in the first item's kind byte.
	b[batchHeader] = byte(5) << kindShift
	if _, _, _, err := decodeBatch(b); !errors.Is(err, errBadBatch) {
		t.Fatalf("unknown kind: %v", err)
	}
}
