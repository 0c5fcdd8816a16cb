package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the changes section re-run the test binary as its
// subscriber child, as it re-runs the bench binary.
func TestMain(m *testing.M) {
	if spec := os.Getenv(changesChildEnv); spec != "" {
		if err := changesChild(spec, os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString("bench changes child: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The changes section runs end to end at tiny sizes, and every
// notification reaches every subscriber (a count, not a time).
func TestBenchChangesSmoke(t *testing.T) {
	var out bytes.Buffer
	c := config{changesSubs: 5, changesRate: 100, changesFor: 500 * time.Millisecond, changesRounds: 2,
		only: map[string]bool{"changes": true}, dir: t.TempDir()}
	if err := run(c, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"fan-out latency", "document write p99", "0 subscriptions dropped", "(target <= 1.2x)"} {
		if !strings.Contains(s, want) {
			t.Fatalf("report lacks %q:\n%s", want, s)
		}
	}
	if !strings.Contains(s, "250 of 250 notifications,") {
		t.Fatalf("not every notification arrived:\n%s", s)
	}
	t.Log("\n" + s)
}
