package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// depths are the broker's counts of the rig's queues: copies in target,
// originals in orders' DLQ (locked ones too).
type depths struct{ copies, originals int64 }

func (r *faultRig) depths() depths {
	t := r.t
	t.Helper()
	ac, err := admin.NewClientFromConnectionString(r.conn, &admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: toAdmin{r.adminAddr}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	target, err := ac.GetQueueRuntimeProperties(ctx, "target", nil)
	if err != nil {
		t.Fatal(err)
	}
	orders, err := ac.GetQueueRuntimeProperties(ctx, "orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	return depths{copies: int64(target.ActiveMessageCount), originals: int64(orders.DeadLetterMessageCount)}
}

// stoppedWithin checks that the job's counts, and the broker's queues,
// stop moving within a second of answered (when pause or cancel answered
// with at): sampled every 100 ms for the 3 s after that second, nothing
// changes. A cancel is allowed two things a pause is not (docs/api.md):
// the originals of the copies already sent are still removed (sent →
// completed, the DLQ shrinking), and the messages it left unsent move from
// pending to cancelled when the store has written them (one transaction,
// after the send in flight); both are reported, not counted as moving.
// It returns the job as it was a second after the answer.
func (r *faultRig) stoppedWithin(what string, id string, at faultJob, answered time.Time, cancel bool) faultJob {
	t := r.t
	t.Helper()
	moved := func(a, b faultJob) bool {
		x, y := a.Counts, b.Counts
		if cancel {
			x.Pending, x.Cancelled, y.Pending, y.Cancelled = x.Pending+x.Cancelled, 0, y.Pending+y.Cancelled, 0
			x.Sent, x.Completed, y.Sent, y.Completed = x.Sent+x.Completed, 0, y.Sent+y.Completed, 0
		}
		return x != y
	}
	var last faultJob
	var removedAt time.Duration
	var cancelledAt time.Duration
	if at.Counts.Cancelled > 0 {
		cancelledAt = time.Since(answered)
	}
	time.Sleep(time.Until(answered.Add(time.Second)))
	first, firstAt := r.job(id), time.Now()
	if cancelledAt == 0 && first.Counts.Cancelled > 0 {
		cancelledAt = time.Since(answered)
	}
	before := r.depths()
	samples := 0
	for time.Since(firstAt) < 3*time.Second {
		time.Sleep(100 * time.Millisecond)
		j := r.job(id)
		samples++
		if moved(first, j) {
			t.Fatalf("%s: counts still moving %v after the answer: %+v, then %+v",
				what, time.Since(answered).Round(time.Millisecond), first.Counts, j.Counts)
		}
		if j.Counts.Cancelled != first.Counts.Cancelled && cancelledAt == 0 {
			cancelledAt = time.Since(answered)
		}
		if j.Counts.Completed != first.Counts.Completed && j.Counts.Completed != last.Counts.Completed {
			removedAt = time.Since(answered)
		}
		last = j
	}
	after := r.depths()
	if cancel {
		before.originals, after.originals = 0, 0
	}
	if after != before {
		t.Errorf("%s: the broker still moving after the counts stopped: %+v, then %+v", what, before, after)
	}
	progress := func(j faultJob) int { return j.Counts.Sent + j.Counts.Completed }
	t.Logf("%s: answered %+v; from 1 s to 4 s after (%d samples) %+v; after the answer %d more copies sent, %d more originals completed; broker %+v",
		what, at.Counts, samples, first.Counts, progress(first)-progress(at), first.Counts.Completed-at.Counts.Completed, after)
	if cancelledAt > 0 {
		t.Logf("%s: the unsent messages counted cancelled within %v of the answer", what, cancelledAt.Round(100*time.Millisecond))
	}
	if removedAt > 0 {
		t.Logf("%s: the last originals of copies sent before the answer removed within %v of it: %+v",
			what, removedAt.Round(100*time.Millisecond), last.Counts)
	}
	if last.ID != "" {
		return last
	}
	return first
}

// TestReplayFaultsPauseAndCancelUnpaced: an unpaced job (every AMQP frame
// delayed 20 ms, so that 5,000 messages take seconds) is paused, and its
// counts and the broker stop moving within a second: at most the batch
// whose copies were being sent (250) is counted after the answer; resumed,
// it moves again; cancelled, its counts stop within a second too, the
// unsent messages are counted cancelled and are still in the DLQ, and its
// progress is short of 100 %.
func TestReplayFaultsPauseAndCancelUnpaced(t *testing.T) {
	const n = 5000
	const batch = 250 // replay.DefaultBatch: one send's copies
	r, _ := newFaultRigProcess(t)
	r.seed("unpaced", n)
	r.serveWith("3s", "--log-level", "debug")
	r.cataloged(n)
	r.fault("/latency?d=20ms")

	created := r.replayAll(n, nil)
	var j faultJob
	waitForWithin(t, 60*time.Second, "500 completed", func() bool { j = r.job(created.ID); return j.Counts.Completed >= 500 })

	var paused faultJob
	if code := r.api("POST", "/api/v1/jobs/"+created.ID+"/pause", nil, &paused); code != http.StatusOK || paused.Status != "paused" {
		t.Fatalf("pause: %d %s", code, paused)
	}
	held := r.stoppedWithin("pause", created.ID, paused, time.Now(), false)
	if held.Status != "paused" {
		t.Errorf("status after pause: %s", held)
	}
	if moved := held.Counts.Sent + held.Counts.Completed - paused.Counts.Sent - paused.Counts.Completed; moved > batch {
		t.Errorf("%d copies sent after pause answered, want at most one batch (%d)", moved, batch)
	}
	if held.Counts.Completed+held.Counts.Sent >= n {
		t.Fatalf("the job had sent everything before it could be paused: %s", held)
	}
	if d := r.depths(); d.copies != int64(held.Counts.Sent+held.Counts.Completed) || d.originals != int64(n-held.Counts.Completed) {
		t.Errorf("paused %s: broker %+v", held, d)
	}

	var resumed faultJob
	if code := r.api("POST", "/api/v1/jobs/"+created.ID+"/resume", map[string]any{}, &resumed); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, resumed)
	}
	waitForWithin(t, 30*time.Second, "progress after resume", func() bool {
		j = r.job(created.ID)
		return j.Counts.Completed >= held.Counts.Completed+500
	})

	var cancelling faultJob
	if code := r.api("POST", "/api/v1/jobs/"+created.ID+"/cancel", nil, &cancelling); code != http.StatusOK ||
		(cancelling.Status != "cancelling" && cancelling.Status != "cancelled") {
		t.Fatalf("cancel: %d %s", code, cancelling)
	}
	held = r.stoppedWithin("cancel", created.ID, cancelling, time.Now(), true)
	if moved := held.Counts.Sent + held.Counts.Completed - cancelling.Counts.Sent - cancelling.Counts.Completed; moved > batch {
		t.Errorf("%d copies sent after cancel answered, want at most one batch (%d)", moved, batch)
	}
	waitForWithin(t, 20*time.Second, "the cancel", func() bool { j = r.job(created.ID); return j.Status == "cancelled" })
	if j.Counts != held.Counts {
		t.Errorf("counts moved after they stood still for 3 s: %+v, then %+v", held.Counts, j.Counts)
	}
	t.Logf("cancelled: %s", j)
	if progress := j.Counts.Sent + j.Counts.Completed; progress >= j.Total || j.Counts.Cancelled != n-progress-j.Counts.Failed-j.Counts.Skipped {
		t.Errorf("cancelled job: progress %d of %d, cancelled %d: %s", progress, j.Total, j.Counts.Cancelled, j)
	}
	if code, body := adminFault(t, http.MethodDelete, r.adminAddr, "", r.auth); code != http.StatusNoContent {
		t.Fatalf("DELETE /$emulator/faults = %d %s", code, body)
	}
	r.checkCancelled(created.ID, j, n)
}

// TestReplayFaultsConnectionDroppedDuringComplete: every AMQP connection
// is dropped while the originals of an unpaced job's batch are being
// completed (its copies counted sent, not yet completed; the serve's log
// shows completes that failed with the broker unreachable). The job
// finishes on its own, never running without progress for longer than
// the documented bound without saying why: every original left the DLQ
// and every copy is in the destination once.
// TestReplayFaultsHangSequence drops the connections at a set time,
// whatever the job is doing; this one aims at the completes.
func TestReplayFaultsConnectionDroppedDuringComplete(t *testing.T) {
	const n = 1000
	// The longest back-off plus one call's deadline (an attach, the call,
	// the adapter's grace: --servicebus-timeout 3s).
	const bound = 22500*time.Millisecond + 7*time.Second
	r, _ := newFaultRigProcess(t)
	r.seed("drop", n)
	r.serveWith("3s", "--log-level", "debug")
	r.cataloged(n)
	// A batch's 250 completes, 32 at a time, take at least 8 × 50 ms.
	r.fault("/latency?d=50ms")

	created := r.replayAll(n, nil)
	var j faultJob
	waitForWithin(t, 60*time.Second, "a batch's originals being completed", func() bool {
		j = r.job(created.ID)
		return j.Counts.Completed > 0 && j.Counts.Sent > 0
	})
	r.fault("/drop-connections")
	droppedAt := time.Now()
	t.Logf("connections dropped with %s", j)

	lastCounts, lastChange, longestStall := j.Counts, time.Now(), time.Duration(0)
	notes, lastNote := 0, ""
	waitForWithin(t, 90*time.Second, "the job to finish", func() bool {
		j = r.job(created.ID)
		if j.Counts != lastCounts || j.Status != "running" || j.PausedReason != nil && *j.PausedReason != "" {
			if j.PausedReason != nil && *j.PausedReason != "" && (notes == 0 || *j.PausedReason != lastNote) {
				notes++
				lastNote = *j.PausedReason
				t.Logf("%v after the drop: %s", time.Since(droppedAt).Round(time.Millisecond), j)
			}
			lastCounts, lastChange = j.Counts, time.Now()
		} else if d := time.Since(lastChange); d > longestStall {
			longestStall = d
		}
		return j.Status == "completed" || j.Status == "failed" || j.Status == "paused" || j.Status == "cancelled"
	})
	t.Logf("longest time running without progress or a word: %v (bound %v)", longestStall.Round(time.Millisecond), bound)
	if longestStall > bound {
		t.Errorf("running without progress for %v (bound %v), saying nothing", longestStall, bound)
	}
	t.Logf("finished %v after the drop: %s", time.Since(droppedAt).Round(time.Millisecond), j)
	if code, body := adminFault(t, http.MethodDelete, r.adminAddr, "", r.auth); code != http.StatusNoContent {
		t.Fatalf("DELETE /$emulator/faults = %d %s", code, body)
	}
	failed := 0
	for _, line := range strings.Split(r.s.stderr.String(), "\n") {
		if strings.Contains(line, `"msg":"replay: original not removed yet"`) && strings.Contains(line, "Service Bus unreachable") {
			failed++
		}
	}
	t.Logf("completes that failed with the broker unreachable: %d", failed)
	if failed == 0 {
		t.Fatalf("the drop interrupted no complete")
	}
	if j.Status != "completed" || j.Counts.Completed != n || j.Counts.Failed != 0 {
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
		if id := fmt.Sprintf("drop-%d", i); copies[id] != 1 {
			t.Errorf("%d copies of %s in the destination, want 1", copies[id], id)
		}
	}
}
