package main

import "testing"

// extensionSizes sets the extensions section's flag-held sizes for one test
// and puts the previous values back when it ends, so the smoke tests do not
// depend on the order they run in: tsPoints and attachmentMB at 0 skip their
// parts.
func extensionSizes(t *testing.T, points, reads, attachMB, attachRounds int) {
	t.Helper()
	p, r, mb, ar := *tsPoints, *tsReads, *attachmentMB, *attachmentRounds
	t.Cleanup(func() { *tsPoints, *tsReads, *attachmentMB, *attachmentRounds = p, r, mb, ar })
	*tsPoints, *tsReads, *attachmentMB, *attachmentRounds = points, reads, attachMB, attachRounds
}
