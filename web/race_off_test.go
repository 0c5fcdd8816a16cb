//go:build !race

package web

// scale: see race_on_test.go.
const scale = 1
