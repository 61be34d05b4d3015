package store

import (
	"syscall"
	"time"
)

// rusageThread is Linux's RUSAGE_THREAD: getrusage of the calling thread.
const rusageThread = 1

// threadCPU is the CPU time the calling OS thread has used, and whether
// the system reports it. Lock the goroutine to its thread around what it
// measures (runtime.LockOSThread).
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
