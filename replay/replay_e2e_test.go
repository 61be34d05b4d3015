package replay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/replay"
)

func queues(names ...string) func(*broker.Namespace) {
	return func(ns *broker.Namespace) {
		for _, n := range names {
			p := broker.QueueProperties{LockDuration: 10 * time.Second}
			if strings.HasPrefix(n, "dedup") {
				p.RequiresDuplicateDetection = true
				p.DuplicateDetectionHistoryTimeWindow = 10 * time.Minute
			}
			if _, err := ns.CreateQueue(n, p); err != nil {
				panic(err)
			}
		}
	}
}

func TestReplayIDs(t *testing.T) {
	e := newEnv(t, queues("orders"), envOptions{})
	e.sendAndDeadLetter("orders", "ord", 20, "SqlTimeout")
	ids := e.cataloged(dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}, 20)
	chosen := ids[3:8]

	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: chosen}})
	if job.Total != 5 || job.Status != replay.StatusQueued || job.CreatedBy != "tester" {
		t.Fatalf("job = %+v", job)
	}
	j := e.finished(job.ID, 20*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 5 || j.Counts.Failed+j.Counts.Skipped+j.Counts.Pending+j.Counts.Sent != 0 {
		t.Fatalf("job = %+v", j)
	}
	copies := e.receiveAll("orders", "", 0)
	if len(copies) != 5 {
		t.Fatalf("%d copies in orders, want 5", len(copies))
	}
	left := e.peekAll("orders", azservicebus.SubQueueDeadLetter)
	if len(left) != 15 {
		t.Fatalf("%d messages left in the DLQ, want 15", len(left))
	}
	// The copies: derived ids, the dlqdash properties, the body and the
	// sender's properties exactly; the originals are gone from the DLQ.
	leftIDs := map[string]bool{}
	for _, m := range left {
		leftIDs[m.MessageID] = true
	}
	for _, c := range copies {
		orig, _ := c.ApplicationProperties[replay.PropOriginalMessageID].(string)
		if c.MessageID != replay.DerivedMessageID(orig, 0, j.ID) {
			t.Errorf("copy id %q, want the derived id of %q", c.MessageID, orig)
		}
		if leftIDs[orig] {
			t.Errorf("the original %s is still in the DLQ", orig)
		}
		var n int
		fmt.Sscanf(orig, "ord-%d", &n)
		if want := fmt.Sprintf(`{"n":%d,"id":%q}`, n, orig); string(c.Body) != want {
			t.Errorf("copy body %q, want %q", c.Body, want)
		}
		if c.ApplicationProperties["i"] != int64(n) {
			t.Errorf("property i = %#v, want %d", c.ApplicationProperties["i"], n)
		}
		for k, want := range map[string]any{replay.PropOriginalEntity: "orders", replay.PropDeadLetterReason: "SqlTimeout",
			replay.PropJobID: itoa(j.ID), replay.PropReplayCount: int64(1)} {
			if got := c.ApplicationProperties[k]; got != want {
				t.Errorf("%s = %#v, want %#v", k, got, want)
			}
		}
		if _, ok := c.ApplicationProperties[replay.PropOriginalSequenceNumber].(int64); !ok {
			t.Errorf("%s = %#v, want an int64", replay.PropOriginalSequenceNumber, c.ApplicationProperties[replay.PropOriginalSequenceNumber])
		}
		if _, ok := c.ApplicationProperties["DeadLetterReason"]; ok {
			t.Error("the copy carries the broker's DeadLetterReason property")
		}
		if c.DeadLetterReason != nil {
			t.Errorf("the copy is marked dead-lettered: %v", *c.DeadLetterReason)
		}
	}
	// Every message's row says completed, with its copy id.
	items, _, err := e.st.ListItems(t.Context(), j.ID, "", 50, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it.State != replay.ItemCompleted || it.CopyMessageID == "" || it.Flagged {
			t.Errorf("item %+v", it)
		}
	}
	// The audit trail: the job's creation, the replays (all five ids), the
	// completion, and an intact chain.
	var replayed []string
	var actions []string
	if err := e.log.Scan(t.Context(), audit.Filter{}, func(en audit.Entry) error {
		actions = append(actions, en.Action)
		if en.Action == audit.ActionReplay {
			replayed = append(replayed, en.MessageIDs...)
			if en.Actor != "tester" {
				t.Errorf("replay entry by %q, want the job's creator", en.Actor)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(replayed) != 5 || actions[0] != audit.ActionReplayJobCreated || actions[len(actions)-1] != audit.ActionJobCompleted {
		t.Errorf("audit actions %v, replayed %v", actions, replayed)
	}
	if n, err := e.log.Verify(t.Context(), nil); err != nil || n != len(actions) {
		t.Errorf("verify: %d, %v", n, err)
	}
	// A second job over the same messages finds them finished: they left
	// the broker, and the catalog notices.
	waitFor(t, "the catalog to see the originals go", 10*time.Second, func() bool {
		gone, _ := e.st.GoneMessages(t.Context(), chosen)
		return len(gone) == 5
	})
}

func TestReplayFrozenFilterDryRunAndDestination(t *testing.T) {
	e := newEnv(t, queues("orders", "elsewhere"), envOptions{})
	e.sendAndDeadLetter("orders", "a", 6, "SqlTimeout")
	e.sendAndDeadLetter("orders", "b", 4, "Validation")
	e.cataloged(dlq.Filter{Entity: "orders"}, 10)

	f := dlq.Filter{Entity: "orders", Reason: "SqlTimeout"}
	plan, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{Filter: &f}, DryRun: true})
	if job.ID != 0 || plan.Summary.Total != 6 || len(plan.Summary.Sample) != 6 || len(plan.Targets) != 1 ||
		plan.Targets[0].Path != "orders" || plan.Targets[0].DuplicateDetection {
		t.Fatalf("dry run: %+v", plan)
	}
	if jobs, _, _ := e.st.ListJobs(t.Context(), 10, ""); len(jobs) != 0 {
		t.Fatalf("a dry run created %d jobs", len(jobs))
	}
	if !strings.Contains(strings.Join(plan.Warnings, "\n"), "no duplicate detection") {
		t.Errorf("warnings %q do not mention duplicate detection", plan.Warnings)
	}

	// Frozen: a SqlTimeout arriving after submission is not in the job.
	// Paused straight away so the late arrival is cataloged first.
	due := time.Now().Add(3 * time.Second).UTC()
	_, job = e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{Filter: &f},
		Destination: "elsewhere", ScheduledEnqueueAt: &due, RatePerSecond: 100})
	if job.Total != 6 {
		t.Fatalf("job total %d, want 6", job.Total)
	}
	e.sendAndDeadLetter("orders", "late", 1, "SqlTimeout")
	j := e.finished(job.ID, 20*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 6 {
		t.Fatalf("job = %+v", j)
	}
	left := e.peekAll("orders", azservicebus.SubQueueDeadLetter)
	if got := messageIDs(left); len(got) != 5 || !containsAll(got, "late-0", "b-0", "b-3") {
		t.Errorf("left in the DLQ: %v, want the 4 Validation ones and the late SqlTimeout", got)
	}
	// Delayed: scheduled in elsewhere until due, then delivered.
	sched := e.peekAll("elsewhere", 0)
	if len(sched) != 6 {
		t.Fatalf("%d copies in elsewhere, want 6", len(sched))
	}
	for _, m := range sched {
		if m.State != azservicebus.MessageStateScheduled || m.ScheduledEnqueueTime == nil || m.ScheduledEnqueueTime.Sub(due).Abs() > time.Second {
			t.Errorf("copy %s: state %v, scheduled %v, want scheduled for %v", m.MessageID, m.State, m.ScheduledEnqueueTime, due)
		}
	}
	if n := len(e.peekAll("orders", 0)); n != 0 {
		t.Errorf("%d copies went to orders, want them in elsewhere only", n)
	}
}

func containsAll(list []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, x := range list {
			found = found || x == w
		}
		if !found {
			return false
		}
	}
	return true
}

// A target with duplicate detection: the originals' ids are still in its
// window (they were first sent there), yet no copy is dropped.
func TestReplayToDuplicateDetectionTarget(t *testing.T) {
	e := newEnv(t, queues("dedup-orders"), envOptions{})
	e.sendAndDeadLetter("dedup-orders", "d", 8, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "dedup-orders"}, 8)
	plan, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}})
	if !plan.Targets[0].DuplicateDetection {
		t.Error("the plan does not show the target's duplicate detection")
	}
	j := e.finished(job.ID, 20*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 8 {
		t.Fatalf("job = %+v", j)
	}
	if n := len(e.receiveAll("dedup-orders", "", 0)); n != 8 {
		t.Fatalf("%d copies arrived, want 8 (none dropped as duplicates)", n)
	}
}

func TestFanOutGuard(t *testing.T) {
	e := newEnv(t, func(ns *broker.Namespace) {
		if _, err := ns.CreateTopic("payments", broker.TopicProperties{}); err != nil {
			panic(err)
		}
		for _, s := range []string{"audit", "billing"} {
			if _, err := ns.CreateSubscription("payments", s, broker.SubscriptionProperties{LockDuration: 10 * time.Second}); err != nil {
				panic(err)
			}
		}
	}, envOptions{})
	e.send("payments", &azservicebus.Message{MessageID: ptr("p-1"), Body: []byte("pay")})
	e.deadLetter("payments", "audit", 1, "Boom")
	e.receiveAll("payments", "billing", 0)
	ids := e.cataloged(dlq.Filter{Entity: "payments/Subscriptions/audit", SubQueue: dlq.SubQueueDeadLetter}, 1)

	req := replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}}
	_, _, err := e.engine.Submit(t.Context(), req)
	var pre *replay.PreconditionError
	if !errors.As(err, &pre) || !strings.Contains(err.Error(), "acknowledge_fan_out") {
		t.Fatalf("submit without acknowledge_fan_out: %v, want a precondition error naming it", err)
	}
	req.AcknowledgeFanOut = true
	_, job := e.submit(req)
	if j := e.finished(job.ID, 20*time.Second); j.Status != replay.StatusCompleted {
		t.Fatalf("job = %+v", j)
	}
	for _, s := range []string{"audit", "billing"} {
		if n := len(e.receiveAll("payments", s, 0)); n != 1 {
			t.Errorf("subscription %s got %d copies, want 1 (fan-out)", s, n)
		}
	}
}

func TestPoisonCapDiscardAndEdit(t *testing.T) {
	e := newEnv(t, queues("orders"), envOptions{poison: 2})
	e.send("orders",
		&azservicebus.Message{MessageID: ptr("looping"), Body: []byte("again"), ApplicationProperties: map[string]any{replay.PropReplayCount: int64(2)}},
		&azservicebus.Message{MessageID: ptr("junk"), Body: []byte("junk")},
		&azservicebus.Message{MessageID: ptr("fixme"), Body: []byte(`{"amount":"ten"}`), ContentType: ptr("application/json"),
			ApplicationProperties: map[string]any{"tenant": "t1"}})
	e.deadLetter("orders", "", 3, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 3)
	byMsgID := map[string]int64{}
	for _, id := range ids {
		r, err := e.st.GetMessage(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		byMsgID[r.MessageID] = id
		if r.MessageID == "looping" && r.ReplayCount != 2 {
			t.Errorf("the catalog's replay_count for a copy = %d, want 2", r.ReplayCount)
		}
	}

	// Poison: skipped, and left in the DLQ.
	plan, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: []int64{byMsgID["looping"]}}})
	if plan.Summary.Poison != 1 {
		t.Errorf("dry run poison count %d, want 1", plan.Summary.Poison)
	}
	if j := e.finished(job.ID, 20*time.Second); j.Counts.Skipped != 1 || j.Status != replay.StatusCompleted {
		t.Fatalf("poison job = %+v", j)
	}
	// With allow_poison it goes, with replay_count 3.
	_, job = e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: []int64{byMsgID["looping"]}}, AllowPoison: true})
	if j := e.finished(job.ID, 20*time.Second); j.Counts.Completed != 1 {
		t.Fatalf("allow_poison job = %+v", j)
	}
	got := e.receiveAll("orders", "", 0)
	if len(got) != 1 || got[0].ApplicationProperties[replay.PropReplayCount] != int64(3) {
		t.Fatalf("copies %v", got)
	}

	// Discard: a reason is required; then the message is gone, not resent.
	if _, _, err := e.engine.Submit(t.Context(), replay.Request{Action: replay.ActionDiscard, Selection: replay.Selection{IDs: []int64{byMsgID["junk"]}}}); err == nil {
		t.Fatal("a discard without a reason was accepted")
	}
	_, job = e.submit(replay.Request{Action: replay.ActionDiscard, Selection: replay.Selection{IDs: []int64{byMsgID["junk"]}}, Reason: "test junk"})
	if j := e.finished(job.ID, 20*time.Second); j.Counts.Completed != 1 {
		t.Fatalf("discard job = %+v", j)
	}

	// Edit and replay: the new body and properties go; the catalog keeps
	// the original bytes.
	edit := &replay.Edit{Body: []byte(`{"amount":10}`), ApplicationProperties: []byte(`{"tenant":"t2","fixed":true,"n":7}`)}
	_, job = e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: []int64{byMsgID["fixme"]}, Edit: edit}})
	if j := e.finished(job.ID, 20*time.Second); j.Counts.Completed != 1 {
		t.Fatalf("edit job = %+v", j)
	}
	got = e.receiveAll("orders", "", 0)
	if len(got) != 1 || string(got[0].Body) != `{"amount":10}` || got[0].ApplicationProperties["tenant"] != "t2" ||
		got[0].ApplicationProperties["fixed"] != true || got[0].ApplicationProperties["n"] != int64(7) ||
		got[0].ContentType == nil || *got[0].ContentType != "application/json" {
		t.Fatalf("edited copy %+v", got)
	}
	orig, _, err := e.st.MessageBody(t.Context(), byMsgID["fixme"])
	if err != nil || !bytes.Equal(orig, []byte(`{"amount":"ten"}`)) {
		t.Errorf("the catalog's original body = %q, %v", orig, err)
	}
	if n := len(e.peekAll("orders", azservicebus.SubQueueDeadLetter)); n != 0 {
		t.Errorf("%d messages left in the DLQ, want 0", n)
	}
}

func TestResolveDeferred(t *testing.T) {
	e := newEnv(t, queues("orders", "archive"), envOptions{})
	e.send("orders", &azservicebus.Message{MessageID: ptr("later-1"), Body: []byte("one")},
		&azservicebus.Message{MessageID: ptr("later-2"), Body: []byte("two")})
	r, err := e.sb.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := r.ReceiveMessages(t.Context(), 2, nil)
	if err != nil || len(ms) != 2 {
		t.Fatalf("receive: %v %d", err, len(ms))
	}
	for _, m := range ms {
		if err := r.DeferMessage(t.Context(), m, nil); err != nil {
			t.Fatal(err)
		}
	}
	r.Close(context.Background())
	ids := e.cataloged(dlq.Filter{Entity: "orders", State: dlq.StateDeferred}, 2)

	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids[:1]}, Destination: "archive"})
	// The second by its sequence number, as the application that deferred
	// it knows it.
	rec, err := e.st.GetMessage(t.Context(), ids[1])
	if err != nil {
		t.Fatal(err)
	}
	_, job2 := e.submit(replay.Request{Action: replay.ActionDiscard, Reason: "obsolete",
		Selection: replay.Selection{Entity: "orders", SequenceNumbers: []int64{rec.SequenceNumber}}})
	if job2.Total != 1 {
		t.Fatalf("selected by sequence number: %+v", job2)
	}
	for _, id := range []int64{job.ID, job2.ID} {
		if j := e.finished(id, 20*time.Second); j.Status != replay.StatusCompleted || j.Counts.Completed != 1 {
			t.Fatalf("job = %+v", j)
		}
	}
	if got := e.receiveAll("archive", "", 0); len(got) != 1 {
		t.Fatalf("%d copies in archive, want 1", len(got))
	}
	if n := len(e.peekAll("orders", 0)); n != 0 {
		t.Errorf("%d messages left in orders, want the deferred ones resolved", n)
	}
}

func TestConflictAndCancel(t *testing.T) {
	e := newEnv(t, queues("orders"), envOptions{})
	e.sendAndDeadLetter("orders", "c", 30, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 30)
	// Slow: 5 a second, so the cancel lands mid-way.
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, RatePerSecond: 5})
	_, _, err := e.engine.Submit(t.Context(), replay.Request{Action: replay.ActionDiscard, Selection: replay.Selection{IDs: ids[:2]}, Reason: "x"})
	var conflict *replay.ConflictError
	if !errors.As(err, &conflict) || conflict.Count != 2 {
		t.Fatalf("overlapping job: %v, want a conflict over 2 messages", err)
	}
	waitFor(t, "some progress", 20*time.Second, func() bool {
		j, _ := e.st.Job(t.Context(), job.ID)
		return j.Counts.Completed >= 3
	})
	if _, err := e.engine.Cancel(audit.WithActor(t.Context(), "tester"), job.ID); err != nil {
		t.Fatal(err)
	}
	j := e.finished(job.ID, 20*time.Second)
	if j.Status != replay.StatusCancelled || j.Counts.Completed+j.Counts.Cancelled != 30 || j.Counts.Cancelled == 0 || j.Counts.Skipped != 0 {
		t.Fatalf("cancelled job = %+v", j)
	}
	copies := len(e.receiveAll("orders", "", 0))
	left := len(e.peekAll("orders", azservicebus.SubQueueDeadLetter))
	if copies != j.Counts.Completed || left != j.Counts.Cancelled || copies+left != 30 {
		t.Errorf("%d copies and %d left in the DLQ after cancelling %+v: every message must be exactly one of them", copies, left, j.Counts)
	}
	// The cancelled messages can be selected again.
	if _, _, err := e.engine.Submit(t.Context(), replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, DryRun: true}); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// A job gives back what it held: the next job on the same queue does not
// wait for the first one's locks to lapse (a minute here).
func TestNextJobDoesNotWaitForLocks(t *testing.T) {
	e := newEnv(t, func(ns *broker.Namespace) {
		if _, err := ns.CreateQueue("orders", broker.QueueProperties{LockDuration: time.Minute}); err != nil {
			panic(err)
		}
	}, envOptions{})
	e.sendAndDeadLetter("orders", "n", 6, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 6)
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids[:2]}})
	if j := e.finished(job.ID, 20*time.Second); j.Counts.Completed != 2 {
		t.Fatalf("job = %+v", j)
	}
	start := time.Now()
	_, job = e.submit(replay.Request{Action: replay.ActionDiscard, Selection: replay.Selection{IDs: ids[2:]}, Reason: "x"})
	if j := e.finished(job.ID, 20*time.Second); j.Counts.Completed != 4 {
		t.Fatalf("job = %+v", j)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the second job took %s: it waited for the first one's locks", d)
	}
	left := e.peekAll("orders", azservicebus.SubQueueDeadLetter)
	if len(left) != 0 {
		t.Errorf("%d left", len(left))
	}
}

// A scan over many small batches: an unpaced job receives each next batch
// while it acts on the current one; every selected message is replayed
// once and the others stay where they were.
func TestReplayScanInSmallBatches(t *testing.T) {
	e := newEnv(t, queues("orders"), envOptions{batch: 7})
	e.sendAndDeadLetter("orders", "ord", 60, "SqlTimeout")
	ids := e.cataloged(dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}, 60)
	var chosen []int64
	for i, id := range ids {
		if i%3 == 1 {
			chosen = append(chosen, id)
		}
	}
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: chosen}})
	j := e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 20 || j.Flagged != 0 {
		t.Fatalf("job = %+v", j)
	}
	copies := e.receiveAll("orders", "", 0)
	left := e.peekAll("orders", azservicebus.SubQueueDeadLetter)
	if len(copies) != 20 || len(left) != 40 {
		t.Fatalf("%d copies in orders and %d left in the DLQ, want 20 and 40", len(copies), len(left))
	}
	var orig []string
	for _, c := range copies {
		o, _ := c.ApplicationProperties[replay.PropOriginalMessageID].(string)
		var n int
		if _, err := fmt.Sscanf(o, "ord-%d", &n); err != nil || n%3 != 1 {
			t.Errorf("a copy of %q, which was not selected", o)
		}
		orig = append(orig, o)
	}
	all := append(orig, messageIDs(left)...)
	slices.Sort(all)
	if len(slices.Compact(all)) != 60 {
		t.Errorf("copies and the DLQ together hold %d distinct originals, want 60", len(slices.Compact(all)))
	}
}

// An unpaced job writes a batch's completions with the next batch's locks:
// two UpdateItems a batch (plus the last flush), and still every item ends
// completed, the counters agree, and the audit trail names every replayed
// message exactly once, also when batches in between select nothing (the
// held-back completions are then written after the next batch).
func TestReplayBatchWritesCompletionsWithNextLocks(t *testing.T) {
	c := &storeCounter{}
	e := newEnv(t, queues("orders"), envOptions{batch: 10, counter: c})
	e.sendAndDeadLetter("orders", "ord", 80, "SqlTimeout")
	ids := e.cataloged(dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}, 80)
	// The first 30 (three batches in a row), then nothing for three
	// batches, then the last 20.
	chosen := append(slices.Clone(ids[:30]), ids[60:]...)
	c.reset()
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: chosen}})
	j := e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 50 || j.Counts.Sent+j.Counts.Pending+j.Counts.Failed != 0 || j.Flagged != 0 {
		t.Fatalf("job = %+v", j)
	}
	calls, rows, which := c.total()
	t.Logf("store calls: %d (%s), %d item updates", calls, which, rows)
	c.mu.Lock()
	updates := c.calls["UpdateItems"]
	c.mu.Unlock()
	// 5 batches with work: locked (with the batch before's completions)
	// and sent each; the completions of the last, and of the batch before
	// the gap, written on their own.
	if updates > 2*5+2 {
		t.Errorf("%d UpdateItems for 5 batches of work, want at most 12", updates)
	}
	if rows != 3*50 {
		t.Errorf("%d item updates, want 150 (locked, sent, completed)", rows)
	}
	items, _, err := e.st.ListItems(t.Context(), j.ID, "", 500, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it.State != replay.ItemCompleted || it.Error != "" {
			t.Errorf("item %d ended %s %q", it.MessageID, it.State, it.Error)
		}
	}
	replayed := map[string]int{}
	if err := e.log.Scan(t.Context(), audit.Filter{Action: audit.ActionReplay}, func(en audit.Entry) error {
		for _, id := range en.MessageIDs {
			replayed[id]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range chosen {
		if n := replayed[strconv.FormatInt(id, 10)]; n != 1 {
			t.Errorf("message %d is in %d replay audit entries, want 1", id, n)
		}
	}
	if len(replayed) != len(chosen) {
		t.Errorf("%d messages in replay audit entries, want %d", len(replayed), len(chosen))
	}
	if copies := e.receiveAll("orders", "", 0); len(copies) != 50 {
		t.Errorf("%d copies, want 50", len(copies))
	}
}
