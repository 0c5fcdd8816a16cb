package storage

import "testing"

// TestCounterCVText pins counterCV's text: parts in the given order (no
// sorting), ", " between them, "" for none.
func TestCounterCVText(t *testing.T) {
	if got := counterCV(nil); got != "" {
		t.Fatalf("counterCV(nil) = %q, want \"\"", got)
	}
	parts := []CounterPart{
		{DB: "zzzzzzzzzzzzzzzzzzzzzz", Tag: "B", Etag: 7},
		{DB: "AAAAAAAAAAAAAAAAAAAAAA", Tag: "A", Etag: 12, Deleted: true},
	}
	want := "B:7-zzzzzzzzzzzzzzzzzzzzzz, A:12-AAAAAAAAAAAAAAAAAAAAAA"
	if got := counterCV(parts); got != want {
		t.Fatalf("counterCV = %q, want %q", got, want)
	}
}
