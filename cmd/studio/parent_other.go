//go:build !linux

package main

// followGoRun does nothing outside Linux (see parent_linux.go).
func followGoRun() {}
