package store

import (
	"runtime"
	"testing"
	"time"
)

// threadCPU counts the calling thread's CPU time: its spinning, not its
// sleeping.
func TestThreadCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, ok := threadCPU()
	if !ok {
		t.Skipf("%s does not report a thread's CPU time", runtime.GOOS)
	}
	time.Sleep(20 * time.Millisecond)
	c1, _ := threadCPU()
	if slept := c1 - c0; slept > 10*time.Millisecond {
		t.Errorf("20 ms asleep counted %v", slept)
	}
	// Spinning counts: 20 ms of it within 5 s, however busy the machine.
	start := time.Now()
	for {
		c, _ := threadCPU()
		if c-c1 >= 20*time.Millisecond {
			if wall := time.Since(start); wall < 20*time.Millisecond {
				t.Errorf("%v of CPU counted in %v", c-c1, wall)
			}
			return
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("5 s of spinning counted %v", c-c1)
		}
	}
}
