//go:build unix

package web

import "syscall"

// openFileLimit is the process's soft RLIMIT_NOFILE.
func openFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 1024
	}
	return uint64(r.Cur)
}
