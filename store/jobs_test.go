package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
)

func TestJobsFreezeSkipConflictAndCount(t *testing.T) {
	store.ForEachEngine(t, testJobsFreezeSkipConflictAndCount)
}

func testJobsFreezeSkipConflictAndCount(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 300)
	ctx := t.Context()
	f := dlq.Filter{Entity: "orders", IncludeGone: true}
	want := fx.want(f)

	sum, err := fx.s.SummariseSelection(ctx, replay.Selection{Filter: &f}, 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	var gone, sched, poison int
	for _, r := range fx.recs {
		if r.Entity != "orders" {
			continue
		}
		if r.GoneAt != nil {
			gone++
		}
		if r.State == dlq.StateScheduled {
			sched++
		}
		if r.ReplayCount >= 1 {
			poison++
		}
	}
	if sum.Total != len(want) || sum.Gone != gone || sum.Scheduled != sched || sum.Poison != poison || len(sum.Sample) != 5 {
		t.Fatalf("summary %+v, want total %d gone %d scheduled %d poison %d", sum, len(want), gone, sched, poison)
	}

	j, err := fx.s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "tester"}, replay.Selection{Filter: &f}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if j.Total != len(want) || j.Status != replay.StatusQueued {
		t.Fatalf("job %+v, want %d messages", j, len(want))
	}
	// Gone, scheduled and poison messages are skipped at once, with why.
	items, _, err := fx.s.ListItems(ctx, j.ID, replay.ItemSkipped, 500, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != j.Counts.Skipped || j.Counts.Pending+j.Counts.Skipped != j.Total || j.Counts.Skipped == 0 {
		t.Fatalf("%d skipped items, counts %+v", len(items), j.Counts)
	}
	for _, it := range items {
		if it.Error == "" {
			t.Errorf("skipped item %d without a reason", it.MessageID)
		}
	}
	pending, err := fx.s.UnfinishedItems(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}

	// A message in an active job is in no other.
	_, err = fx.s.CreateJob(ctx, replay.Job{Action: replay.ActionDiscard, Reason: "x"}, replay.Selection{IDs: []int64{pending[0].MessageID}}, 1)
	var conflict *replay.ConflictError
	if !errors.As(err, &conflict) || conflict.Count != 1 || conflict.Jobs[0] != j.ID {
		t.Fatalf("overlapping job: %v", err)
	}

	// Counters follow the states; a finished message never moves again.
	a, b := pending[0].MessageID, pending[1].MessageID
	if j, err = fx.s.UpdateItems(ctx, j.ID, []replay.Update{{MessageID: a, State: replay.ItemLocked, CopyMessageID: "c-a"},
		{MessageID: b, State: replay.ItemLocked, CopyMessageID: "c-b"}}); err != nil {
		t.Fatal(err)
	}
	if j, err = fx.s.UpdateItems(ctx, j.ID, []replay.Update{{MessageID: a, State: replay.ItemSent, Flag: true},
		{MessageID: b, State: replay.ItemFailed, Error: "refused"}}); err != nil {
		t.Fatal(err)
	}
	if j, err = fx.s.UpdateItems(ctx, j.ID, []replay.Update{{MessageID: a, State: replay.ItemCompleted},
		{MessageID: b, State: replay.ItemCompleted}}); err != nil {
		t.Fatal(err)
	}
	if j.Counts.Completed != 1 || j.Counts.Failed != 1 || j.Counts.Sent != 0 || j.Flagged != 1 ||
		j.Counts.Pending != len(pending)-2 {
		t.Fatalf("counts after updates: %+v flagged %d", j.Counts, j.Flagged)
	}
	hist, err := fx.s.MessageHistory(ctx, a)
	if err != nil || len(hist) != 1 || hist[0].CopyMessageID != "c-a" || !hist[0].Flagged || hist[0].State != replay.ItemCompleted {
		t.Fatalf("history %+v %v", hist, err)
	}
	// A finished message can join a new job at once.
	if _, err := fx.s.CreateJob(ctx, replay.Job{Action: replay.ActionDiscard, Reason: "x"}, replay.Selection{IDs: []int64{b}}, 1); err != nil {
		t.Fatalf("a failed message could not be selected again: %v", err)
	}

	// Status changes are guarded; a cancel counts what was never sent as
	// cancelled and frees it.
	if _, err := fx.s.SetStatus(ctx, j.ID, replay.StatusQueued, "", replay.StatusPaused); !errors.As(err, new(*replay.StatusError)) {
		t.Fatalf("resuming a queued job: %v", err)
	}
	skipped, unsent := j.Counts.Skipped, j.Counts.Pending
	if j, err = fx.s.SetStatus(ctx, j.ID, replay.StatusCancelled, "stop", replay.StatusQueued); err != nil {
		t.Fatal(err)
	}
	if j.FinishedAt == nil || j.Counts.Pending != 0 || j.Counts.Cancelled != unsent || j.Counts.Skipped != skipped ||
		j.Counts.Skipped+j.Counts.Completed+j.Counts.Failed+j.Counts.Cancelled != j.Total || j.Counts.Progress() != 1 {
		t.Fatalf("cancelled job %+v, want %d cancelled", j, unsent)
	}
	if items, _, err := fx.s.ListItems(ctx, j.ID, replay.ItemCancelled, 500, ""); err != nil || len(items) != unsent {
		t.Fatalf("%d cancelled items, want %d: %v", len(items), unsent, err)
	}
	if _, err := fx.s.CreateJob(ctx, replay.Job{Action: replay.ActionDiscard, Reason: "x"}, replay.Selection{IDs: []int64{pending[2].MessageID}}, 1); err != nil {
		t.Fatalf("a cancelled job's message could not be selected again: %v", err)
	}

	// Pages of jobs, newest first.
	jobs, next, err := fx.s.ListJobs(ctx, 2, "")
	if err != nil || len(jobs) != 2 || next == "" || jobs[0].ID < jobs[1].ID {
		t.Fatalf("jobs page %v %q %v", jobs, next, err)
	}
	rest, next2, err := fx.s.ListJobs(ctx, 2, next)
	if err != nil || len(rest) != 1 || next2 != "" {
		t.Fatalf("second jobs page %v %q %v", rest, next2, err)
	}
	if _, _, err := fx.s.ListJobs(ctx, 2, "garbage"); err == nil {
		t.Error("a bad cursor was accepted")
	}
	// An empty selection is refused.
	if _, err := fx.s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay}, replay.Selection{Filter: &dlq.Filter{Reason: "NoSuchReason"}}, 1); !errors.As(err, new(*replay.PreconditionError)) {
		t.Errorf("an empty selection: %v", err)
	}
}

// A running job's failing broker call is recorded (retrying, its error,
// attempts and next attempt) and cleared when it succeeds; a job a person
// paused is left alone; a running job's adoption covers retrying.
func TestJobRetryingState(t *testing.T) { store.ForEachEngine(t, testJobRetryingState) }

func testJobRetryingState(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 50)
	ctx := t.Context()
	f := dlq.Filter{Entity: "orders"}
	j, err := fx.s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "tester"}, replay.Selection{Filter: &f}, 100)
	if err != nil {
		t.Fatal(err)
	}
	rs := &replay.Retrying{LastError: "send to orders failed 3 times", Attempts: 3, NextAttemptAt: time.UnixMilli(1_800_000_000_000)}
	if _, err := fx.s.SetRetrying(ctx, j.ID, rs); !errors.As(err, new(*replay.StatusError)) {
		t.Fatalf("a queued job became retrying: %v", err)
	}
	if _, err := fx.s.SetStatus(ctx, j.ID, replay.StatusRunning, "", replay.StatusQueued); err != nil {
		t.Fatal(err)
	}
	if j, err = fx.s.SetRetrying(ctx, j.ID, rs); err != nil {
		t.Fatal(err)
	}
	if j.Status != replay.StatusRetrying || j.LastError != rs.LastError || j.RetryAttempts != 3 ||
		j.NextAttemptAt == nil || !j.NextAttemptAt.Equal(rs.NextAttemptAt) {
		t.Fatalf("retrying job %+v", j)
	}
	un, err := fx.s.UnfinishedJobs(ctx)
	if err != nil || len(un) != 1 || un[0].ID != j.ID {
		t.Fatalf("unfinished jobs %+v %v", un, err)
	}
	if j, err = fx.s.SetRetrying(ctx, j.ID, nil); err != nil {
		t.Fatal(err)
	}
	if j.Status != replay.StatusRunning || j.RetryAttempts != 0 || j.NextAttemptAt != nil || j.LastError != rs.LastError {
		t.Fatalf("recovered job %+v", j)
	}
	// Paused by a person: the engine's record does not resume it.
	if _, err := fx.s.SetRetrying(ctx, j.ID, rs); err != nil {
		t.Fatal(err)
	}
	if j, err = fx.s.SetStatus(ctx, j.ID, replay.StatusPaused, "by alice", replay.StatusRetrying); err != nil {
		t.Fatal(err)
	}
	if j.RetryAttempts != 0 || j.NextAttemptAt != nil {
		t.Fatalf("a paused job still says when it retries: %+v", j)
	}
	if _, err := fx.s.SetRetrying(ctx, j.ID, nil); !errors.As(err, new(*replay.StatusError)) {
		t.Fatalf("a paused job became running: %v", err)
	}
	if _, err := fx.s.SetRetrying(ctx, j.ID, rs); !errors.As(err, new(*replay.StatusError)) {
		t.Fatalf("a paused job became retrying: %v", err)
	}
}

// A cancel counts the pending messages as cancelled at once and frees
// them; a message locked (being sent) or sent keeps its state.
func TestCancelUnsent(t *testing.T) { store.ForEachEngine(t, testCancelUnsent) }

func testCancelUnsent(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 50)
	ctx := t.Context()
	f := dlq.Filter{Entity: "orders"}
	j, err := fx.s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "tester"}, replay.Selection{Filter: &f}, 100)
	if err != nil {
		t.Fatal(err)
	}
	items, err := fx.s.UnfinishedItems(ctx, j.ID)
	if err != nil || len(items) < 3 {
		t.Fatalf("%d items: %v", len(items), err)
	}
	if _, err := fx.s.UpdateItems(ctx, j.ID, []replay.Update{{MessageID: items[0].MessageID, State: replay.ItemLocked},
		{MessageID: items[1].MessageID, State: replay.ItemSent}}); err != nil {
		t.Fatal(err)
	}
	if j, err = fx.s.CancelUnsent(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if j.Counts.Cancelled != len(items)-2 || j.Counts.Pending != 1 || j.Counts.Sent != 1 {
		t.Fatalf("counts %+v, want %d cancelled, the locked and the sent one kept", j.Counts, len(items)-2)
	}
	if _, err := fx.s.CreateJob(ctx, replay.Job{Action: replay.ActionDiscard, Reason: "x"}, replay.Selection{IDs: []int64{items[2].MessageID}}, 1); err != nil {
		t.Fatalf("a cancelled message could not be selected again: %v", err)
	}
}

// UpdateItems writes a call's updates with one statement per outcome:
// each item ends as its updates applied in order would leave it (the later
// of two updates of one id wins, a finished item never moves, flags
// accumulate, an empty copy id keeps the stored one), copy ids are stored
// exactly (quotes, backslashes, control characters, non-ASCII), ids that
// are not the job's are ignored, and only finished items leave the active
// set.
func TestUpdateItemsBatchedOutcomes(t *testing.T) {
	store.ForEachEngine(t, testUpdateItemsBatchedOutcomes)
}

func testUpdateItemsBatchedOutcomes(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 200)
	ctx := t.Context()
	f := dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}
	j, err := fx.s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "tester"}, replay.Selection{Filter: &f}, 9)
	if err != nil {
		t.Fatal(err)
	}
	items, err := fx.s.UnfinishedItems(ctx, j.ID)
	if err != nil || len(items) < 8 {
		t.Fatalf("%d items: %v", len(items), err)
	}
	id := func(i int) int64 { return items[i].MessageID }
	odd := "c-\"quoted\"\\back\x01\tslash/ünï/日本"
	var ups []replay.Update
	for i := range 6 {
		ups = append(ups, replay.Update{MessageID: id(i), State: replay.ItemLocked, CopyMessageID: fmt.Sprintf("copy-%d", i)})
	}
	ups[1].CopyMessageID = odd
	ups = append(ups,
		replay.Update{MessageID: 1 << 40, State: replay.ItemCompleted},                      // not the job's
		replay.Update{MessageID: id(2), State: replay.ItemSent, Flag: true},                 // locked → sent, flagged
		replay.Update{MessageID: id(3), State: replay.ItemFailed, Error: "refused"},         // finished…
		replay.Update{MessageID: id(3), State: replay.ItemSent},                             // …never moves again
		replay.Update{MessageID: id(4), State: replay.ItemSkipped, Error: "poison"},         // another outcome
		replay.Update{MessageID: id(6), State: replay.ItemLocked},                           // no copy id
		replay.Update{MessageID: id(7), State: replay.ItemCompleted, Error: "already left"}) // pending → completed
	if j, err = fx.s.UpdateItems(ctx, j.ID, ups); err != nil {
		t.Fatal(err)
	}
	if j.Counts.Sent != 1 || j.Counts.Failed != 1 || j.Counts.Skipped != 1 || j.Counts.Completed != 1 || j.Flagged != 1 ||
		j.Counts.Pending != len(items)-4 {
		t.Fatalf("counts %+v flagged %d", j.Counts, j.Flagged)
	}
	// Later updates: an empty copy id keeps the stored one; a flag stays.
	if j, err = fx.s.UpdateItems(ctx, j.ID, []replay.Update{{MessageID: id(1), State: replay.ItemSent},
		{MessageID: id(2), State: replay.ItemCompleted}, {MessageID: id(0), State: replay.ItemSent, Flag: true}}); err != nil {
		t.Fatal(err)
	}
	if j.Flagged != 2 || j.Counts.Sent != 2 || j.Counts.Completed != 2 {
		t.Fatalf("counts %+v flagged %d", j.Counts, j.Flagged)
	}
	want := []struct {
		st      replay.ItemState
		copyID  string
		errText string
		flagged bool
	}{
		{replay.ItemSent, "copy-0", "", true},
		{replay.ItemSent, odd, "", false},
		{replay.ItemCompleted, "copy-2", "", true},
		{replay.ItemFailed, "copy-3", "refused", false},
		{replay.ItemSkipped, "copy-4", "poison", false},
		{replay.ItemLocked, "copy-5", "", false},
		{replay.ItemLocked, "", "", false},
		{replay.ItemCompleted, "", "already left", false},
	}
	for i, w := range want {
		hist, err := fx.s.MessageHistory(ctx, id(i))
		if err != nil || len(hist) != 1 {
			t.Fatalf("item %d: %v %v", i, hist, err)
		}
		h := hist[0]
		if h.State != w.st || h.CopyMessageID != w.copyID || h.Error != w.errText || h.Flagged != w.flagged {
			t.Errorf("item %d = %s %q %q flagged %v, want %+v", i, h.State, h.CopyMessageID, h.Error, h.Flagged, w)
		}
	}
	// Finished items left the active set (another job may take them);
	// unfinished ones did not.
	for i, free := range map[int]bool{2: true, 3: true, 4: true, 7: true, 0: false, 5: false, 6: false} {
		_, err := fx.s.CreateJob(ctx, replay.Job{Action: replay.ActionDiscard, Reason: "x"}, replay.Selection{IDs: []int64{id(i)}}, 9)
		if free && err != nil {
			t.Errorf("finished item %d could not join another job: %v", i, err)
		}
		if !free && !errors.As(err, new(*replay.ConflictError)) {
			t.Errorf("unfinished item %d joined another job: %v", i, err)
		}
	}
}

// The same outcomes when every id is given once (the engine's batches):
// the counters follow from counting the items by state, and a finished
// item is still never moved.
func TestUpdateItemsOnePerItem(t *testing.T) { store.ForEachEngine(t, testUpdateItemsOnePerItem) }

func testUpdateItemsOnePerItem(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 200)
	ctx := t.Context()
	f := dlq.Filter{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter}
	j, err := fx.s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "tester"}, replay.Selection{Filter: &f}, 9)
	if err != nil {
		t.Fatal(err)
	}
	items, err := fx.s.UnfinishedItems(ctx, j.ID)
	if err != nil || len(items) < 6 {
		t.Fatalf("%d items: %v", len(items), err)
	}
	id := func(i int) int64 { return items[i].MessageID }
	odd := "c-\"q\"\\\x01ü\xff"
	step := func(ups ...replay.Update) {
		t.Helper()
		if j, err = fx.s.UpdateItems(ctx, j.ID, ups); err != nil {
			t.Fatal(err)
		}
	}
	step(replay.Update{MessageID: id(0), State: replay.ItemLocked, CopyMessageID: odd},
		replay.Update{MessageID: id(1), State: replay.ItemLocked, CopyMessageID: "c-1"},
		replay.Update{MessageID: id(2), State: replay.ItemLocked, CopyMessageID: "c-2"},
		replay.Update{MessageID: id(3), State: replay.ItemFailed, Error: "gone"},
		replay.Update{MessageID: 1 << 40, State: replay.ItemLocked, CopyMessageID: "nobody's"})
	step(replay.Update{MessageID: id(0), State: replay.ItemSent, Flag: true},
		replay.Update{MessageID: id(1), State: replay.ItemSent, Flag: true},
		replay.Update{MessageID: id(2), State: replay.ItemSent},
		replay.Update{MessageID: id(3), State: replay.ItemSent, Flag: true}) // finished: not moved, not flagged
	if j.Counts.Sent != 3 || j.Counts.Failed != 1 || j.Flagged != 2 || j.Counts.Pending != len(items)-4 {
		t.Fatalf("counts %+v flagged %d", j.Counts, j.Flagged)
	}
	step(replay.Update{MessageID: id(0), State: replay.ItemCompleted},
		replay.Update{MessageID: id(1), State: replay.ItemCompleted, Flag: true}, // already flagged: counted once
		replay.Update{MessageID: id(4), State: replay.ItemCompleted, Error: "already left"},
		replay.Update{MessageID: id(5), State: replay.ItemSkipped, Error: "poison"})
	if j.Counts.Sent != 1 || j.Counts.Completed != 3 || j.Counts.Failed != 1 || j.Counts.Skipped != 1 || j.Flagged != 2 ||
		j.Counts.Pending != len(items)-6 {
		t.Fatalf("counts %+v flagged %d", j.Counts, j.Flagged)
	}
	for i, w := range []struct {
		st      replay.ItemState
		copyID  string
		flagged bool
	}{{replay.ItemCompleted, strings.ToValidUTF8(odd, "\uFFFD"), true}, {replay.ItemCompleted, "c-1", true},
		{replay.ItemSent, "c-2", false}, {replay.ItemFailed, "", false}, {replay.ItemCompleted, "", false}, {replay.ItemSkipped, "", false}} {
		hist, err := fx.s.MessageHistory(ctx, id(i))
		if err != nil || len(hist) != 1 {
			t.Fatalf("item %d: %v %v", i, hist, err)
		}
		if h := hist[0]; h.State != w.st || h.CopyMessageID != w.copyID || h.Flagged != w.flagged {
			t.Errorf("item %d = %s %q flagged %v, want %+v", i, h.State, h.CopyMessageID, h.Flagged, w)
		}
	}
	// The counters agree with the items.
	var byState = map[replay.ItemState]int{}
	all, _, err := fx.s.ListItems(ctx, j.ID, "", 500, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range all {
		byState[it.State]++
	}
	if byState[replay.ItemPending]+byState[replay.ItemLocked] != j.Counts.Pending || byState[replay.ItemSent] != j.Counts.Sent ||
		byState[replay.ItemCompleted] != j.Counts.Completed {
		t.Errorf("items by state %v, counters %+v", byState, j.Counts)
	}
}
