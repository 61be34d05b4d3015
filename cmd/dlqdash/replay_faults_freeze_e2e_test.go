package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// emulatorProcess is `dlqdash emulator` in its own OS process (the test
// binary runs dlqdash itself: TestMain), so that a test can stop it with
// SIGSTOP: a frozen broker, its sockets open and nothing answering.
type emulatorProcess struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	exited         chan struct{}
	conn           string
	adminAddr      string
}

// startEmulatorProcess starts the emulator process with the entities of
// configFile on free loopback ports; it is stopped (and continued first,
// if stopped) when the test ends.
func startEmulatorProcess(t *testing.T, configFile string) *emulatorProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "emulator", "--amqp-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
		"--config", configFile, "--log-format", "json")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	p := &emulatorProcess{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("emulator process log (last 4,000 bytes):\n%s", tail(p.stderr.String(), 4000))
		}
	})
	waitForWithin(t, 30*time.Second, "the emulator process's connection string and admin address", func() bool {
		select {
		case <-p.exited:
			t.Fatalf("the emulator process exited early:\n%s", p.stderr.String())
		default:
		}
		p.adminAddr = logAddr(p.stderr.String(), "emulator admin listening")
		return strings.Contains(p.stdout.String(), "\n") && p.adminAddr != ""
	})
	p.conn = strings.TrimSpace(p.stdout.String())
	return p
}

// newFaultRigProcess is the fault rig on an emulator process.
func newFaultRigProcess(t *testing.T) (*faultRig, *emulatorProcess) {
	t.Helper()
	emu := startEmulatorProcess(t, faultConfig(t))
	return faultRigOn(t, emu.conn, emu.adminAddr), emu
}

// signal sends sig to the emulator process.
func (p *emulatorProcess) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%v to the emulator process: %v", sig, err)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// catalogStatus is GET /api/v1/status (docs/api.md).
type catalogStatus struct {
	Healthy    bool    `json:"healthy"`
	Error      *string `json:"error"`
	ErrorSince *string `json:"error_since"`
}

func (r *faultRig) status() catalogStatus {
	r.t.Helper()
	var st catalogStatus
	if code := r.api("GET", "/api/v1/status", nil, &st); code != http.StatusOK {
		r.t.Fatalf("GET /api/v1/status = %d", code)
	}
	return st
}

// TestReplayFaultsBrokerFrozen is issue 15's frozen broker with the real
// program: `dlqdash emulator` in its own process is stopped with SIGSTOP
// for 20 s one second into a paced replay of 1,000 dead letters, then
// continued with SIGCONT. While it is frozen the job says it is retrying
// (what failed, how many attempts) instead of sitting silent in running,
// and the catalog's status turns unhealthy with the error in words; after
// SIGCONT both recover on their own, the job completes, every original
// left the DLQ and every copy is in the destination once.
func TestReplayFaultsBrokerFrozen(t *testing.T) {
	if testing.Short() {
		t.Skip("stops the broker for 20 s")
	}
	const (
		n       = 1000
		rate    = 200 // messages a second: five seconds of work unhindered
		freeze  = 20 * time.Second
		timeout = 2 * time.Second // --servicebus-timeout
	)
	// One call's deadline: the attach of a replaced link, the call, and
	// the adapter's grace (servicebus/doc.go); the longest back-off is
	// 15 s + 50 % jitter (replay/doc.go).
	callDeadline := 2*timeout + time.Second
	bound := 22500*time.Millisecond + callDeadline
	stale := 5 * time.Second // max(3 × poll, 5 s), poll 200ms

	r, emu := newFaultRigProcess(t)
	r.seed("frozen", n)
	r.serveWith(timeout.String())
	waitFor(t, "a healthy status", func() bool { return r.status().Healthy })

	created := r.replayAll(n, map[string]any{"rate_per_second": rate})
	createdAt := time.Now()

	var (
		j                       faultJob
		st                      catalogStatus
		frozenAt, thawedAt      time.Time
		atFreeze, atThaw        faultJob
		retryingAt              time.Time
		retrying                *faultJob
		unhealthyAt, healthyAt  time.Time
		unhealthyErr            string
		statuses                = map[string]map[string]int{"before": {}, "frozen": {}, "after": {}}
		lastCounts              = created.Counts
		lastChange              = time.Now()
		longestStall            time.Duration
		sawHealthyWhileFrozenAt time.Time
	)
	deadline := time.Now().Add(freeze + 90*time.Second)
	for {
		now := time.Now()
		phase := "before"
		switch {
		case frozenAt.IsZero() && now.Sub(createdAt) >= time.Second:
			atFreeze = r.job(created.ID)
			emu.signal(t, syscall.SIGSTOP)
			frozenAt = time.Now()
			t.Logf("SIGSTOP %v after the job was created: %s", frozenAt.Sub(createdAt).Round(time.Millisecond), atFreeze)
			phase = "frozen"
		case !frozenAt.IsZero() && thawedAt.IsZero() && now.Sub(frozenAt) >= freeze:
			atThaw = r.job(created.ID)
			emu.signal(t, syscall.SIGCONT)
			thawedAt = time.Now()
			t.Logf("SIGCONT after %v frozen: %s", thawedAt.Sub(frozenAt).Round(time.Millisecond), atThaw)
			phase = "after"
		case !thawedAt.IsZero():
			phase = "after"
		case !frozenAt.IsZero():
			phase = "frozen"
		}

		j = r.job(created.ID)
		st = r.status()
		statuses[phase][j.Status]++
		switch phase {
		case "frozen":
			if retrying == nil && (j.Status == "retrying" && j.LastError != nil && *j.LastError != "" ||
				j.Status == "paused" && j.PausedReason != nil && *j.PausedReason != "") {
				c := j
				retrying, retryingAt = &c, time.Now()
			}
			if !st.Healthy && unhealthyAt.IsZero() {
				unhealthyAt = time.Now()
				if st.Error != nil {
					unhealthyErr = *st.Error
				}
			}
			if st.Healthy && !unhealthyAt.IsZero() && sawHealthyWhileFrozenAt.IsZero() {
				sawHealthyWhileFrozenAt = time.Now()
			}
		case "after":
			if st.Healthy && healthyAt.IsZero() {
				healthyAt = time.Now()
			}
		}
		if j.Counts != lastCounts || j.Status != "running" {
			lastCounts, lastChange = j.Counts, time.Now()
		} else if d := time.Since(lastChange); d > longestStall {
			longestStall = d
			if d > bound {
				t.Fatalf("running without progress for %v (bound %v), saying nothing: %s", d, bound, j)
			}
		}
		if j.Status == "completed" || j.Status == "failed" || j.Status == "cancelled" ||
			j.Status == "paused" && !thawedAt.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not finished %v after the thaw: %s", time.Since(thawedAt).Round(time.Second), j)
		}
		time.Sleep(100 * time.Millisecond)
	}
	finishedAt := time.Now()
	if thawedAt.IsZero() {
		t.Fatalf("the job ended before the broker was thawed (%v after the freeze): %s", time.Since(frozenAt), j)
	}
	if atFreeze.Counts.Completed >= n {
		t.Fatalf("the job had finished before the freeze: %s", atFreeze)
	}
	t.Logf("polled statuses: before the freeze %v, frozen %v, after %v", statuses["before"], statuses["frozen"], statuses["after"])
	t.Logf("longest time running without progress %v (bound %v)", longestStall.Round(time.Millisecond), bound)

	if retrying == nil {
		t.Errorf("the job never said it was retrying (or paused with a reason) during the %v freeze", freeze)
	} else {
		t.Logf("retrying %v after the freeze: %s", retryingAt.Sub(frozenAt).Round(time.Millisecond), *retrying)
		if retrying.Status == "retrying" && retrying.RetryAttempts < 1 {
			t.Errorf("retrying without its attempts: %s", *retrying)
		}
		if d := retryingAt.Sub(frozenAt); d > bound {
			t.Errorf("retrying shown %v after the freeze, want within %v", d, bound)
		}
	}
	if unhealthyAt.IsZero() {
		t.Errorf("GET /api/v1/status never said unhealthy during the %v freeze", freeze)
	} else {
		t.Logf("status unhealthy %v after the freeze: %q", unhealthyAt.Sub(frozenAt).Round(time.Millisecond), unhealthyErr)
		if d := unhealthyAt.Sub(frozenAt); d > stale+time.Second {
			t.Errorf("status unhealthy %v after the freeze, want within %v", d, stale)
		}
		if unhealthyErr == "" {
			t.Errorf("unhealthy status without an error")
		}
		if !sawHealthyWhileFrozenAt.IsZero() {
			t.Errorf("status healthy again %v after the freeze, with the broker still frozen", sawHealthyWhileFrozenAt.Sub(frozenAt))
		}
	}
	if healthyAt.IsZero() {
		waitForWithin(t, 20*time.Second, "a healthy status after the thaw", func() bool { return r.status().Healthy })
		healthyAt = time.Now()
	}
	t.Logf("status healthy %v after the thaw; job %s %v after the thaw (%v after it was created): %s",
		healthyAt.Sub(thawedAt).Round(time.Millisecond), j.Status, finishedAt.Sub(thawedAt).Round(time.Millisecond),
		finishedAt.Sub(createdAt).Round(time.Millisecond), j)
	if st := r.status(); !st.Healthy || st.Error != nil {
		t.Errorf("status after the thaw: healthy %v, error %v", st.Healthy, st.Error)
	}

	if j.Status != "completed" || j.Counts.Completed != n || j.Counts.Failed != 0 || j.Counts.Pending != 0 {
		t.Fatalf("want completed with %d completed: %s", n, j)
	}
	all := r.peekAll("target", mainQueue)
	copies := originals(all)
	if left := r.peekAll("orders", azservicebus.SubQueueDeadLetter); len(left) != 0 {
		t.Errorf("a completed job left %d of %d originals in the DLQ", len(left), n)
	}
	if len(all) != n || len(copies) != n {
		t.Errorf("%d messages in the destination, copies of %d distinct originals; want %d each", len(all), len(copies), n)
	}
	for i := range n {
		if id := fmt.Sprintf("frozen-%d", i); copies[id] != 1 {
			t.Errorf("%d copies of %s in the destination, want 1", copies[id], id)
		}
	}
}
