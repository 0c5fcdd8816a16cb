package main

import (
	"bytes"
	"testing"
)

// The counters part of the extensions section runs end to end at a tiny size.
func TestBenchCountersSmoke(t *testing.T) {
	extensionSizes(t, 0, 0, 0, 0) // counters only
	var out bytes.Buffer
	c := config{rounds: 1, counterIncs: 1000, dir: t.TempDir(), only: map[string]bool{"extensions": true}}
	if err := run(c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"counter increments/s: median", "document puts/s:      median"} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
	t.Log("\n" + out.String())
}
