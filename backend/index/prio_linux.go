package index

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// lowPriorityThread pins the calling goroutine (an index's writer) to its
// own OS thread and lowers that thread's scheduling priority (nice 19), so
// that on a busy machine the kernel runs the database's writer, its fsync
// completions and the request handlers first: indexing gets the CPU the
// writes leave. The thread is never unlocked, so it ends with the
// goroutine and its priority cannot leak to other goroutines.
func lowPriorityThread() {
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19)
}
