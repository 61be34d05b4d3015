package replay_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
	"github.com/dlqdash/dlqdash/replay"
)

// stopEnv is a queue "orders" whose DLQ holds n messages (msg-<i>),
// cataloged.
func stopEnv(t *testing.T, n int) *env {
	t.Helper()
	e := newEnv(t, func(ns *broker.Namespace) {
		if _, err := ns.CreateQueue("orders", broker.QueueProperties{LockDuration: 30 * time.Second}); err != nil {
			t.Fatal(err)
		}
		emulatortest.FillDLQ(t, ns, "orders", n, 256, nil)
	}, envOptions{})
	waitFor(t, fmt.Sprintf("%d cataloged dead letters", n), time.Minute, func() bool {
		c, err := e.st.PresentCount(t.Context(), "orders", dlq.SubQueueDeadLetter)
		if err != nil {
			t.Fatal(err)
		}
		return c == int64(n)
	})
	return e
}

// stopSnapshot is what a job has done, as the store and the broker see it.
type stopSnapshot struct {
	counts replay.Counts
	copies int // copies in the queue
	left   int // originals in the DLQ
}

func (e *env) snapshot(t *testing.T, id int64) stopSnapshot {
	t.Helper()
	j, err := e.st.Job(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return stopSnapshot{counts: j.Counts, copies: len(brokerOriginals(t, e.ns, "orders", true)),
		left: len(brokerOriginals(t, e.ns, "orders/$DeadLetterQueue", false))}
}

// Pause and cancel stop a job at once, paced or not: once the call has
// answered, no send and no complete starts (what was in flight finishes:
// at most one send of one bucketful or one batch), so within a second the
// job's counts and the broker stop moving.
func TestPauseAndCancelStopAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       int
		rate    float64
		after   int           // completed before the stop
		latency time.Duration // on every frame the emulator sends, so that an unpaced job is still running
		cancel  bool
	}{
		{"paced/pause", 200, 50, 60, 0, false},
		{"paced/cancel", 200, 50, 60, 0, true},
		{"unpaced/pause", 5000, 0, 250, 10 * time.Millisecond, false},
		{"unpaced/cancel", 5000, 0, 250, 10 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := stopEnv(t, tc.n)
			e.srv.SetLatency(tc.latency)
			_, job := e.submit(replay.Request{Action: replay.ActionReplay, RatePerSecond: tc.rate,
				Selection: replay.Selection{Filter: &dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}}})
			waitFor(t, "some progress", time.Minute, func() bool {
				j, _ := e.st.Job(t.Context(), job.ID)
				return j.Counts.Completed >= tc.after
			})
			ctx := audit.WithActor(t.Context(), "tester")
			var at replay.Job
			var err error
			if tc.cancel {
				at, err = e.engine.Cancel(ctx, job.ID)
			} else {
				at, err = e.engine.Pause(ctx, job.ID)
			}
			if err != nil {
				t.Fatal(err)
			}
			answered := time.Now()
			// The bound is one second; under the race detector
			// (CI runs -race on two cores) the batch in flight at the
			// answer (its send and the completes of its sent copies)
			// takes several times longer, so the bound is scaled.
			grace := time.Second
			if raceDetector {
				grace = 3 * time.Second
			}
			time.Sleep(time.Until(answered.Add(grace)))
			one := e.snapshot(t, job.ID)
			time.Sleep(2 * time.Second)
			three := e.snapshot(t, job.ID)
			e.srv.SetLatency(0)
			t.Logf("at the answer %+v; after %s %+v; 2 s later %+v", at.Counts, grace, one, three)
			if one != three {
				t.Errorf("still moving %s after the answer: %+v, then %+v", grace, one, three)
			}
			// What was in flight at the answer: one send of a bucketful
			// (paced) or one batch (unpaced).
			inFlight := replay.DefaultBatch
			if tc.rate > 0 {
				inFlight = int(tc.rate)
			}
			if moved := one.counts.Progress() - at.Counts.Progress(); moved > inFlight {
				t.Errorf("%d more copies sent after the answer, want at most %d", moved, inFlight)
			}
			if one.copies != one.counts.Progress() {
				t.Errorf("%d copies in the queue, %d counted sent", one.copies, one.counts.Progress())
			}
			if tc.cancel {
				j := e.finished(job.ID, 30*time.Second)
				if j.Status != replay.StatusCancelled || j.Counts.Completed+j.Counts.Cancelled != tc.n || j.Counts.Cancelled == 0 ||
					j.Counts.Progress() >= tc.n {
					t.Fatalf("cancelled job %+v", j)
				}
				end := e.snapshot(t, job.ID)
				if end.copies != j.Counts.Completed || end.left != j.Counts.Cancelled {
					t.Errorf("cancelled job %+v: %d copies and %d left in the DLQ", j.Counts, end.copies, end.left)
				}
				return
			}
			if j, _ := e.st.Job(t.Context(), job.ID); j.Status != replay.StatusPaused {
				t.Fatalf("job %+v, want paused", j)
			}
			// Resumed, it finishes: each message once.
			if _, err := e.engine.Resume(ctx, job.ID); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the resumed job", 2*time.Minute, func() bool {
				j, _ := e.st.Job(t.Context(), job.ID)
				return j.Status == replay.StatusCompleted
			})
			all := msgIDs(tc.n, func(int) bool { return true })
			checkSet(t, "copies in orders", brokerOriginals(t, e.ns, "orders", true), all)
			if left := brokerOriginals(t, e.ns, "orders/$DeadLetterQueue", false); len(left) != 0 {
				t.Errorf("%d messages left in the DLQ", len(left))
			}
		})
	}
}
