//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// followGoRun makes a server started by `go run ./cmd/studio` stop with its
// go run. Stopping go run by its process id (SIGTERM, SIGKILL) does not
// reach the program it built and started, which went on running, orphaned,
// holding its ports and data directory. Under go run (the parent process is
// the go command), the kernel is asked to send SIGTERM when the parent dies:
// the server then shuts down as on Ctrl-C. Any other parent (a shell, a
// service manager, a test) is left alone.
func followGoRun() {
	ppid := os.Getppid()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", ppid))
	if err != nil || filepath.Base(exe) != "go" {
		return
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGTERM), 0, 0, 0); err != nil {
		return
	}
	if os.Getppid() != ppid {
		// go run ended before the request took effect.
		_ = unix.Kill(os.Getpid(), unix.SIGTERM)
	}
}
