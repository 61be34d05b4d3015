//go:build !linux

package store

import "time"

// threadCPU is not reported on this system: callers use wall time.
func threadCPU() (time.Duration, bool) { return 0, false }
