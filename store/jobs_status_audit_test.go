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

// A job's status change and its audit entry are one transaction: both are
// written, or (an entry that cannot be made, a fault between the two
// writes, as a crash there would) neither; the chain stays intact either
// way.
func TestSetStatusAudited(t *testing.T) { store.ForEachEngine(t, testSetStatusAudited) }

func testSetStatusAudited(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 30)
	ctx := audit.WithActor(t.Context(), "tester")
	l := audit.New(fx.s)
	f := dlq.Filter{Entity: "orders"}
	j, err := fx.s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "tester"}, replay.Selection{Filter: &f}, 100)
	if err != nil {
		t.Fatal(err)
	}
	build, err := l.Builder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var recorded replay.Job
	entry := func(j replay.Job) (audit.Build, error) {
		recorded = j
		return build(audit.Record{Action: audit.ActionJobCompleted, Params: map[string]any{"job_id": strconv.FormatInt(j.ID, 10),
			"status": string(j.Status), "skipped": j.Counts.Skipped}})
	}
	entries := func() []audit.Entry {
		t.Helper()
		var out []audit.Entry
		if err := fx.s.ScanAudit(ctx, audit.Filter{}, func(e audit.Entry) error { out = append(out, e); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	status := func() replay.Status {
		t.Helper()
		got, err := fx.s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Status
	}

	// A fault between the status change and its entry: neither stays.
	crash := errors.New("crashed between the status and its entry")
	restore := store.FaultBeforeStatusEntryForTest(fx.s, crash)
	if _, err := fx.s.SetStatusAudited(ctx, j.ID, replay.StatusCompleted, "", entry, replay.StatusQueued); !errors.Is(err, crash) {
		t.Fatalf("SetStatusAudited with a fault: %v, want %v", err, crash)
	}
	restore()
	if s, n := status(), len(entries()); s != replay.StatusQueued || n != 0 {
		t.Fatalf("after a fault between the writes: status %s and %d entries, want queued and none", s, n)
	}
	// An entry that cannot be made: the status is not changed either.
	bad := func(replay.Job) (audit.Build, error) { return build(audit.Record{Action: "no_such_action"}) }
	if _, err := fx.s.SetStatusAudited(ctx, j.ID, replay.StatusCompleted, "", bad, replay.StatusQueued); !errors.Is(err, audit.ErrUnknownAction) {
		t.Fatalf("SetStatusAudited with an unknown action: %v", err)
	}
	if s, n := status(), len(entries()); s != replay.StatusQueued || n != 0 {
		t.Fatalf("after an entry that could not be made: status %s and %d entries, want queued and none", s, n)
	}
	// A status another change left meanwhile: nothing written, no entry.
	var se *replay.StatusError
	if _, err := fx.s.SetStatusAudited(ctx, j.ID, replay.StatusCompleted, "", entry, replay.StatusRunning); !errors.As(err, &se) {
		t.Fatalf("from running while queued: %v, want a StatusError", err)
	}
	if n := len(entries()); n != 0 {
		t.Fatalf("a refused change appended %d entries", n)
	}

	// Both, and the entry is made from the job as the change left it.
	done, err := fx.s.SetStatusAudited(ctx, j.ID, replay.StatusCompleted, "", entry, replay.StatusQueued)
	if err != nil {
		t.Fatal(err)
	}
	es := entries()
	if done.Status != replay.StatusCompleted || recorded.Status != replay.StatusCompleted || len(es) != 1 {
		t.Fatalf("status %s (entry made from %s), %d entries; want completed and one entry", done.Status, recorded.Status, len(es))
	}
	want := `{"job_id":"` + strconv.FormatInt(j.ID, 10) + `","skipped":` + strconv.Itoa(done.Counts.Skipped) + `,"status":"completed"}`
	if string(es[0].Params) != want || es[0].Actor != "tester" || done.Counts.Skipped == 0 {
		t.Fatalf("entry %s by %s, want %s by tester (the unsent messages counted skipped)", es[0].Params, es[0].Actor, want)
	}
	// Chained with plain appends on either side.
	if _, err := l.Append(ctx, audit.Record{Action: audit.ActionJobResumed, Params: map[string]any{"job_id": "x"}}); err != nil {
		t.Fatal(err)
	}
	if n, err := l.Verify(ctx, nil); err != nil || n != 2 {
		t.Fatalf("verify: %d entries, %v", n, err)
	}
}
