package main

import (
	"bytes"
	"testing"
)

// The attachments part runs end to end at a tiny size.
func TestBenchAttachmentsSmoke(t *testing.T) {
	extensionSizes(t, 0, 0, 1, 1) // attachments only
	var out bytes.Buffer
	c := config{only: map[string]bool{"extensions": true}, dir: t.TempDir()}
	if err := run(c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"attachment in (PUT", "raw file write + fsync", "attachment out (GET"} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
	t.Log("\n" + out.String())
}
