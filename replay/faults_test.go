package replay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/replay"
)

// checkExactlyOnce says every original of the job reached the target once
// (more only for flagged messages) and left the DLQ.
func checkExactlyOnce(t *testing.T, e *env, queue string, j replay.Job, n int) {
	t.Helper()
	copies := map[string]int{}
	for _, m := range e.receiveAll(queue, "", 0) {
		copies[m.ApplicationProperties[replay.PropOriginalMessageID].(string)]++
	}
	if len(copies) != n {
		t.Errorf("%d distinct originals replayed, want %d", len(copies), n)
	}
	dups := 0
	for _, k := range copies {
		dups += k - 1
	}
	if dups > j.Flagged {
		t.Errorf("%d duplicate copies but only %d flagged messages", dups, j.Flagged)
	}
	if left := len(e.peekAll(queue, azservicebus.SubQueueDeadLetter)); left != 0 {
		t.Errorf("%d messages left in the DLQ", left)
	}
}

func TestFaultServerBusy(t *testing.T) {
	e := newEnv(t, queues("orders"), envOptions{})
	e.sendAndDeadLetter("orders", "busy", 40, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 40)
	// Sends and receives fail for a while: the job backs off and finishes.
	e.ns.InjectServerBusy("orders", 0, time.Now().Add(1500*time.Millisecond))
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}})
	j := e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 40 {
		t.Fatalf("job = %+v", j)
	}
	checkExactlyOnce(t, e, "orders", j, 40)
}

func TestFaultDroppedConnectionsAndLostLocks(t *testing.T) {
	e := newEnv(t, queues("orders"), envOptions{batch: 20})
	e.sendAndDeadLetter("orders", "drop", 200, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 200)
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, RatePerSecond: 200})
	// Connections dropped and locks lost while it runs.
	for i := range 6 {
		time.Sleep(150 * time.Millisecond)
		if i%2 == 0 {
			e.srv.DropConnections()
		} else {
			e.ns.ExpireLocks("orders/$DeadLetterQueue")
		}
	}
	j := e.finished(job.ID, 60*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 200 {
		t.Fatalf("job = %+v", j)
	}
	checkExactlyOnce(t, e, "orders", j, 200)
}

func TestFaultDestinationDeleted(t *testing.T) {
	e := newEnv(t, queues("orders", "target"), envOptions{giveUp: 2 * time.Second})
	e.sendAndDeadLetter("orders", "gone", 5, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 5)
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, Destination: "target"})
	// Deleted between submission and the first send... or before the
	// job starts: either way it pauses, saying why, and loses nothing.
	if err := e.ns.DeleteQueue("target"); err != nil {
		t.Fatal(err)
	}
	j := e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusPaused || !strings.Contains(j.PausedReason, "target") {
		t.Fatalf("job = %+v, want paused naming the destination", j)
	}
	if left := len(e.peekAll("orders", azservicebus.SubQueueDeadLetter)); left+j.Counts.Completed != 5 || j.Counts.Completed != 0 {
		t.Fatalf("%d left in the DLQ, %+v", left, j.Counts)
	}
	// Recreated and resumed: it finishes.
	if _, err := e.ns.CreateQueue("target", broker.QueueProperties{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.engine.Resume(t.Context(), job.ID); err != nil {
		t.Fatal(err)
	}
	j = e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 5 {
		t.Fatalf("resumed job = %+v", j)
	}
	checkExactlyOnce(t, e, "target", j, 5)
}

// A source entity deleted: its messages are skipped as gone, the job ends.
func TestFaultSourceDeleted(t *testing.T) {
	e := newEnv(t, queues("orders", "archive"), envOptions{})
	e.sendAndDeadLetter("orders", "src", 3, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 3)
	if err := e.ns.DeleteQueue("orders"); err != nil {
		t.Fatal(err)
	}
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, Destination: "archive"})
	j := e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Skipped+j.Counts.Failed != 3 {
		t.Fatalf("job = %+v", j)
	}
}
