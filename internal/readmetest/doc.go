// Package readmetest holds the test that runs README.md's examples as
// printed: every fenced code block of the README is either run by
// TestReadmeExamples or marked as not runnable, with a reason, by an HTML
// comment on the line right before its opening fence:
//
//	<!-- readme-test: NAME (a note for the reader) -->
//	<!-- readme-test: skip (the reason it is not run) -->
//
// NAME is one of the runners in examples_test.go. A block without a marker,
// a marker naming no runner, a runner whose block is gone, or a skip
// without a reason fails TestReadmeBlocksAreMarked, so a new example cannot
// slip in untested.
//
// The examples run in a copy of the repository (tracked and untracked,
// not ignored files), one after the other as a newcomer would run them:
// shell lines in bash with set -e, the npm snippet with node and the ravendb
// package of compat/node_modules, the Go snippet compiled against the client
// package. Servers on the README's fixed ports are started only when those
// ports are free, awaited on /readyz, checked, and stopped with their whole
// process group.
package readmetest
