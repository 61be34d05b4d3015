package store_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
)

// TestRedeadletteredCountedOnceAtIngest: copies of a job that come back to
// a dead-letter queue are counted for the job as the catalog inserts them,
// with their reasons; a copy seen again, or gone, is not counted twice or
// uncounted; a copy naming a job this database does not have is ignored.
func TestRedeadletteredCountedOnceAtIngest(t *testing.T) {
	store.ForEachEngine(t, testRedeadletteredCountedOnceAtIngest)
}

func testRedeadletteredCountedOnceAtIngest(t *testing.T, engine string) {
	ctx := t.Context()
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	s := openWithQueueOn(t, engine, at)
	msg := func(seq int64, id, reason string, props map[string]any) dlq.Message {
		enq := at.Add(time.Duration(seq) * time.Second)
		return dlq.Message{SequenceNumber: seq, State: dlq.StateActive, MessageID: id, EnqueuedAt: &enq,
			DeadLetterReason: ptr(reason), ApplicationProperties: dlq.EncodeProperties(props), Body: []byte("x")}
	}
	page := func(from int64, msgs ...dlq.Message) {
		t.Helper()
		if _, err := s.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: from, Through: math.MaxInt64,
			Messages: msgs, SeenAt: at.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	page(1, msg(1, "a", "SqlTimeout", nil), msg(2, "b", "SqlTimeout", nil), msg(3, "c", "SqlTimeout", nil))
	recs, _, err := s.ListMessages(ctx, dlq.Filter{Entity: "orders"}, 10, "")
	if err != nil || len(recs) != 3 {
		t.Fatalf("%d messages, %v", len(recs), err)
	}
	pause := 0.5
	j, err := s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "tester",
		Canary: replay.Canary{Count: 2, Watch: 3 * time.Second, PauseOnRedeadletter: &pause, Ramp: time.Minute}},
		replay.Selection{IDs: []int64{recs[0].ID, recs[1].ID, recs[2].ID}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if c := j.Canary; c.Count != 2 || c.Watch != 3*time.Second || c.PauseOnRedeadletter == nil || *c.PauseOnRedeadletter != 0.5 ||
		c.Ramp != time.Minute || c.Verdict != "" || j.Counts.Redeadlettered != 0 || len(j.RedeadletteredReasons) != 0 {
		t.Fatalf("new job %+v", j)
	}
	cp := func(seq int64, orig, reason string, job int64) dlq.Message {
		return msg(seq, fmt.Sprintf("%s/dlqdash-%d", orig, job), reason, map[string]any{
			"dlqdash.job_id": fmt.Sprint(job), "dlqdash.replay_count": int64(1)})
	}
	copies := []dlq.Message{msg(1, "a", "SqlTimeout", nil), msg(2, "b", "SqlTimeout", nil), msg(3, "c", "SqlTimeout", nil),
		cp(10, "a", "SqlTimeout", j.ID), cp(11, "b", "SqlTimeout", j.ID), cp(12, "c", "Bad input", j.ID), cp(13, "z", "Other", 999)}
	page(1, copies...)
	want := []replay.ReasonCount{{Reason: "SqlTimeout", Count: 2}, {Reason: "Bad input", Count: 1}}
	check := func(when string) {
		t.Helper()
		got, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Counts.Redeadlettered != 3 || !slices.Equal(got.RedeadletteredReasons, want) {
			t.Fatalf("%s: redeadlettered %d %v, want 3 %v", when, got.Counts.Redeadlettered, got.RedeadletteredReasons, want)
		}
	}
	check("after the copies came back")
	all, _, err := s.ListMessages(ctx, dlq.Filter{Entity: "orders"}, 50, "")
	if err != nil || len(all) != 7 {
		t.Fatalf("%d messages, %v", len(all), err)
	}
	var allIDs []int64
	for _, r := range all {
		allIDs = append(allIDs, r.ID)
	}
	if js, err := s.JobsOfCopies(ctx, allIDs); err != nil || len(js) != 1 || js[0].ID != j.ID || js[0].Counts.Redeadlettered != 3 {
		t.Fatalf("jobs of the copies: %+v, %v", js, err)
	}
	if js, err := s.JobsOfCopies(ctx, allIDs[len(allIDs)-3:]); err != nil || len(js) != 0 { // newest first: the originals
		t.Fatalf("jobs of the originals: %+v, %v", js, err)
	}
	page(1, copies...)
	check("after the same page again")
	page(1) // every message of the queue has gone
	check("after the copies left the broker")

	j2, err := s.SetCanary(ctx, j.ID, replay.CanaryFailed, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if j2.Canary.Verdict != replay.CanaryFailed || j2.Canary.SentBase != 2 || j2.Canary.RedeadletteredBase != 3 || j2.Counts.Redeadlettered != 3 {
		t.Fatalf("after SetCanary: %+v", j2)
	}
	if _, err := s.SetCanary(ctx, 12345, "", 0, 0); !errors.Is(err, replay.ErrNotFound) {
		t.Fatalf("SetCanary of no job: %v", err)
	}
}
