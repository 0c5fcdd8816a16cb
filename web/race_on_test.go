//go:build race

package web

// scale divides the sizes of the large-body tests under the race detector,
// where parsing runs many times slower; the limits they test shrink with
// them.
const scale = 8
