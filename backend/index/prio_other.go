//go:build !linux

package index

// lowPriorityThread is a no-op where a thread's priority cannot be set
// without privileges.
func lowPriorityThread() {}
