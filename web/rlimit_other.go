//go:build !unix

package web

// openFileLimit has no descriptor limit to read here; 8192 stands in.
func openFileLimit() uint64 { return 8192 }
