package replay_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

// consume runs a consumer of queue that dead-letters every message with
// reason (the bug is not fixed), or completes it when reason is "" (it is).
// The returned func stops it and waits.
func (e *env) consume(queue, reason string) func() {
	e.t.Helper()
	r, err := e.sb.NewReceiverForQueue(queue, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer r.Close(context.Background())
		desc := "the consumer still fails"
		for ctx.Err() == nil {
			ms, err := r.ReceiveMessages(ctx, 50, nil)
			if err != nil {
				continue
			}
			for _, m := range ms {
				if reason == "" {
					_ = r.CompleteMessage(context.Background(), m, nil)
				} else {
					_ = r.DeadLetterMessage(context.Background(), m, &azservicebus.DeadLetterOptions{Reason: &reason, ErrorDescription: &desc})
				}
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// TestRedeadletteredCountsEveryCopy: a replay to a consumer that still
// dead-letters everything completes, and the job says that every copy came
// back, with the new reason.
func TestRedeadletteredCountsEveryCopy(t *testing.T) {
	e := newEnv(t, queues("orders"), envOptions{})
	e.sendAndDeadLetter("orders", "ord", 20, "Original")
	ids := e.cataloged(dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}, 20)
	stop := e.consume("orders", "SqlTimeout")
	defer stop()

	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}})
	if j := e.finished(job.ID, 30*time.Second); j.Status != replay.StatusCompleted || j.Counts.Completed != 20 {
		t.Fatalf("job %+v", j)
	}
	var j replay.Job
	waitFor(t, "every copy counted as dead-lettered again", 20*time.Second, func() bool {
		var err error
		if j, err = e.st.Job(t.Context(), job.ID); err != nil {
			t.Fatal(err)
		}
		return j.Counts.Redeadlettered >= 20
	})
	time.Sleep(300 * time.Millisecond) // further polls must not count a copy twice
	if j, _ = e.st.Job(t.Context(), job.ID); j.Counts.Redeadlettered != 20 || len(j.RedeadletteredReasons) != 1 ||
		j.RedeadletteredReasons[0] != (replay.ReasonCount{Reason: "SqlTimeout", Count: 20}) {
		t.Fatalf("redeadlettered %d, reasons %v; want 20 SqlTimeout", j.Counts.Redeadlettered, j.RedeadletteredReasons)
	}
}

// TestCanaryPausesThenResumeContinues: with a canary of 5 and
// pause_on_redeadletter 0.5, a replay to a consumer that dead-letters
// everything pauses after 5 sends, naming the count and the reason, with
// the other messages still in the DLQ and the verdict in the audit; once
// the consumer is fixed, resume sends the rest.
func TestCanaryPausesThenResumeContinues(t *testing.T) {
	e := newEnv(t, queues("orders"), envOptions{})
	e.sendAndDeadLetter("orders", "ord", 30, "Original")
	ids := e.cataloged(dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}, 30)
	stop := e.consume("orders", "SqlTimeout")

	half := 0.5
	plan, _ := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, DryRun: true,
		Canary: replay.Canary{Count: 5, PauseOnRedeadletter: &half}})
	if plan.Canary.Count != 5 || plan.Canary.Watch != replay.DefaultCanaryWatch || !strings.Contains(strings.Join(plan.Warnings, "\n"), "canary: 5 copies") {
		t.Fatalf("dry run's plan: %+v, warnings %q", plan.Canary, plan.Warnings)
	}
	start := time.Now()
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids},
		Canary: replay.Canary{Count: 5, Watch: 20 * time.Second, PauseOnRedeadletter: &half}})
	j := e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusPaused || j.Counts.Sent+j.Counts.Completed != 5 || j.Counts.Pending != 25 {
		t.Fatalf("job %+v, want paused after 5 sends", j)
	}
	took := time.Since(start)
	t.Logf("paused %s after submission", took)
	if took > 15*time.Second {
		t.Errorf("the canary failed after %s: it should not wait out its 20 s watch once more than half came back", took)
	}
	if !strings.Contains(j.PausedReason, "of 5 copies sent were dead-lettered again") || !strings.Contains(j.PausedReason, "SqlTimeout") {
		t.Fatalf("paused reason %q", j.PausedReason)
	}
	if j.Canary.Verdict != replay.CanaryFailed {
		t.Fatalf("verdict %q", j.Canary.Verdict)
	}
	stop()
	originals := 0
	for _, m := range e.peekAll("orders", azservicebus.SubQueueDeadLetter) {
		if strings.HasPrefix(m.MessageID, "ord-") && !strings.Contains(m.MessageID, "/dlqdash-") {
			originals++
		}
	}
	if originals != 25 {
		t.Fatalf("%d originals left in the DLQ, want 25", originals)
	}
	var verdicts []audit.Entry
	if err := e.log.Scan(t.Context(), audit.Filter{Action: audit.ActionCanaryVerdict}, func(en audit.Entry) error {
		verdicts = append(verdicts, en)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(verdicts) != 1 || verdicts[0].Outcome != audit.OutcomeFailed || !strings.Contains(string(verdicts[0].Params), `"verdict":"failed"`) {
		t.Fatalf("canary verdicts in the audit: %+v", verdicts)
	}

	// The consumer is fixed: resume sends the other 25, no canary again.
	stopFixed := e.consume("orders", "")
	defer stopFixed()
	if _, err := e.engine.Resume(audit.WithActor(t.Context(), "tester"), job.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resumed job to finish", 30*time.Second, func() bool {
		var err error
		if j, err = e.st.Job(t.Context(), job.ID); err != nil {
			t.Fatal(err)
		}
		return j.Status.Finished()
	})
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 30 {
		t.Fatalf("resumed job %+v", j)
	}
}

// TestRampStartsSlower: a paced job with a ramp starts at a tenth of its
// rate, so the same replay takes measurably longer than without one.
func TestRampStartsSlower(t *testing.T) {
	e := newEnv(t, queues("orders", "fast", "slow"), envOptions{})
	e.sendAndDeadLetter("orders", "ord", 80, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}, 80)
	took := func(dest string, sel []int64, ramp time.Duration) time.Duration {
		t.Helper()
		_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: sel}, Destination: dest,
			RatePerSecond: 40, Canary: replay.Canary{Ramp: ramp}})
		j := e.finished(job.ID, 30*time.Second)
		if j.Status != replay.StatusCompleted || j.Counts.Completed != len(sel) {
			t.Fatalf("job %+v", j)
		}
		return j.FinishedAt.Sub(*j.StartedAt)
	}
	// 40 messages at 40/s go in about one bucketful; ramping over 3 s
	// from 4/s, the 40th leaves after about 2.3 s.
	fast := took("fast", ids[:40], 0)
	slow := took("slow", ids[40:], 3*time.Second)
	t.Logf("without a ramp %s, with one %s", fast, slow)
	if slow < fast+800*time.Millisecond || slow < 1500*time.Millisecond {
		t.Fatalf("with a ramp %s, without %s: the ramp did not start slower", slow, fast)
	}
}

// TestCanaryPassesThenSendsTheRest: a canary whose copies are consumed
// passes after its watch, the verdict is audited, and the job sends the
// rest.
func TestCanaryPassesThenSendsTheRest(t *testing.T) {
	e := newEnv(t, queues("orders"), envOptions{})
	e.sendAndDeadLetter("orders", "ord", 12, "Original")
	ids := e.cataloged(dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}, 12)
	stop := e.consume("orders", "")
	defer stop()
	half := 0.5
	start := time.Now()
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids},
		Canary: replay.Canary{Count: 3, Watch: time.Second, PauseOnRedeadletter: &half}})
	j := e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 12 || j.Canary.Verdict != replay.CanaryPassed || j.Counts.Redeadlettered != 0 {
		t.Fatalf("job %+v", j)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("finished after %s: the canary was not watched for its second", took)
	}
	var verdicts []audit.Entry
	if err := e.log.Scan(t.Context(), audit.Filter{Action: audit.ActionCanaryVerdict}, func(en audit.Entry) error {
		verdicts = append(verdicts, en)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(verdicts) != 1 || verdicts[0].Outcome != audit.OutcomeSucceeded || !strings.Contains(string(verdicts[0].Params), `"canary_sent":3`) {
		t.Fatalf("canary verdicts in the audit: %+v", verdicts)
	}
}

// TestGuardPausesWithoutCanary: pause_on_redeadletter alone is judged after
// every batch: a paced replay to a consumer that dead-letters everything
// pauses itself before it has sent everything.
func TestGuardPausesWithoutCanary(t *testing.T) {
	e := newEnv(t, queues("orders"), envOptions{})
	e.sendAndDeadLetter("orders", "ord", 60, "Original")
	ids := e.cataloged(dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}, 60)
	stop := e.consume("orders", "SqlTimeout")
	defer stop()
	share := 0.3
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, RatePerSecond: 10,
		Canary: replay.Canary{PauseOnRedeadletter: &share}})
	j := e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusPaused || j.Counts.Sent+j.Counts.Completed >= 60 || !strings.Contains(j.PausedReason, "SqlTimeout") ||
		!strings.Contains(j.PausedReason, "more than pause_on_redeadletter 30 %") {
		t.Fatalf("job %+v", j)
	}
	t.Logf("paused after %d sent: %s", j.Counts.Sent+j.Counts.Completed, j.PausedReason)
}
