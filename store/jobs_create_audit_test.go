package store_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
)

// A job, its items and its creation entry are one transaction: all are
// written, or (a fault after the job's rows and before its entry, as a
// crash there would; an entry that cannot be made) none; the chain stays
// intact either way, and the messages stay free for the next job.
func TestCreateJobAudited(t *testing.T) { store.ForEachEngine(t, testCreateJobAudited) }

func testCreateJobAudited(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 30)
	ctx := audit.WithActor(t.Context(), "tester")
	l := audit.New(fx.s)
	if _, err := l.Append(ctx, audit.Record{Action: audit.ActionLogin}); err != nil {
		t.Fatal(err)
	}
	build, err := l.Builder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := dlq.Filter{Entity: "orders"}
	sel := replay.Selection{Filter: &f}
	var recorded replay.Job
	entry := func(j replay.Job) (audit.Build, error) {
		recorded = j
		return build(audit.Record{Action: audit.ActionReplayJobCreated, Params: map[string]any{"job_id": strconv.FormatInt(j.ID, 10),
			"total": j.Total, "status": string(j.Status)}})
	}
	entries := func() []audit.Entry {
		t.Helper()
		var out []audit.Entry
		if err := fx.s.ScanAudit(ctx, audit.Filter{}, func(e audit.Entry) error { out = append(out, e); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	jobs := func() []replay.Job {
		t.Helper()
		js, _, err := fx.s.ListJobs(ctx, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	newJob := replay.Job{Action: replay.ActionReplay, CreatedBy: "tester"}

	// A fault after the job and its items were inserted, before the
	// entry: neither the job nor the entry stays.
	crash := errors.New("crashed between the job and its entry")
	restore := store.FaultBeforeCreationEntryForTest(fx.s, crash)
	recorded = replay.Job{}
	if _, err := fx.s.CreateJobAudited(ctx, newJob, sel, 100, entry); !errors.Is(err, crash) {
		t.Fatalf("CreateJobAudited with a fault: %v, want %v", err, crash)
	}
	restore()
	if recorded.ID == 0 || recorded.Total == 0 {
		t.Fatalf("the fault came before the job was inserted (entry made from %+v): the test would prove nothing", recorded)
	}
	if js, es := jobs(), entries(); len(js) != 0 || len(es) != 1 {
		t.Fatalf("after a fault between the job and its entry: %d jobs and %d entries, want none and the login's", len(js), len(es))
	}
	// An entry that cannot be made: no job either.
	bad := func(replay.Job) (audit.Build, error) { return build(audit.Record{Action: "no_such_action"}) }
	if _, err := fx.s.CreateJobAudited(ctx, newJob, sel, 100, bad); !errors.Is(err, audit.ErrUnknownAction) {
		t.Fatalf("CreateJobAudited with an unknown action: %v", err)
	}
	if js, es := jobs(), entries(); len(js) != 0 || len(es) != 1 {
		t.Fatalf("after an entry that could not be made: %d jobs and %d entries, want none and the login's", len(js), len(es))
	}
	if n, err := l.Verify(ctx, nil); err != nil || n != 1 {
		t.Fatalf("verify after the rolled-back creations: %d entries, %v", n, err)
	}

	// Both, the entry made from the job as created; the messages the
	// rolled-back creations froze were never in a job (no conflict).
	j, err := fx.s.CreateJobAudited(ctx, newJob, sel, 100, entry)
	if err != nil {
		t.Fatal(err)
	}
	es := entries()
	if js := jobs(); len(js) != 1 || js[0].ID != j.ID || len(es) != 2 || recorded.ID != j.ID {
		t.Fatalf("%d jobs, %d entries, entry made from job %d; want job %d and its entry after the login's", len(js), len(es), recorded.ID, j.ID)
	}
	want := `{"job_id":"` + strconv.FormatInt(j.ID, 10) + `","status":"queued","total":` + strconv.Itoa(j.Total) + `}`
	if e := es[1]; e.Action != audit.ActionReplayJobCreated || string(e.Params) != want || e.Actor != "tester" {
		t.Fatalf("entry %s %s by %s, want %s %s by tester", e.Action, e.Params, e.Actor, audit.ActionReplayJobCreated, want)
	}
	items, _, err := fx.s.ListItems(ctx, j.ID, "", 100, "")
	if err != nil || len(items) != j.Total || j.Total == 0 {
		t.Fatalf("job %d has %d items (%v), total %d", j.ID, len(items), err, j.Total)
	}
	// A conflict (the messages are in that job now) writes neither.
	var conflict *replay.ConflictError
	if _, err := fx.s.CreateJobAudited(ctx, newJob, sel, 100, entry); !errors.As(err, &conflict) {
		t.Fatalf("a second job on the same messages: %v, want a ConflictError", err)
	}
	if js, es := jobs(), entries(); len(js) != 1 || len(es) != 2 {
		t.Fatalf("after a conflict: %d jobs and %d entries, want 1 and 2", len(js), len(es))
	}
	// Chained with plain appends on either side.
	if _, err := l.Append(ctx, audit.Record{Action: audit.ActionJobResumed, Params: map[string]any{"job_id": "x"}}); err != nil {
		t.Fatal(err)
	}
	if n, err := l.Verify(ctx, nil); err != nil || n != 3 {
		t.Fatalf("verify: %d entries, %v", n, err)
	}
}
