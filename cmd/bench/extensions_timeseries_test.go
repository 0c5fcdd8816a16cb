package main

import (
	"bytes"
	"strings"
	"testing"
)

// The time-series part of the extensions section runs end to end at a tiny
// size and reports both sides of each comparison.
func TestBenchTimeSeriesSmoke(t *testing.T) {
	extensionSizes(t, 4000, 2, 0, 0)
	var out bytes.Buffer
	if err := timeseriesBench(&out, t.TempDir()); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"appends, engine (tx.TimeSeries)", "appends, raw SQLite (same rows, table)", "range read of 1 hour", "raw SQLite p50"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
	t.Log("\n" + out.String())
}
