package store_test

import (
	"maps"
	"testing"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
)

func TestCountJobs(t *testing.T) { store.ForEachEngine(t, testCountJobs) }

func testCountJobs(t *testing.T, engine string) {
	fx := newFixtureOn(t, engine, 50)
	ctx := t.Context()
	got, err := fx.s.CountJobs(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("no jobs: %v, %v", got, err)
	}
	var ids []int64
	for _, e := range []string{"orders", "email", "invoices"} {
		f := dlq.Filter{Entity: e}
		j, err := fx.s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "tester"}, replay.Selection{Filter: &f}, 1)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	if _, err := fx.s.SetStatus(ctx, ids[0], replay.StatusCancelled, "stop", replay.StatusQueued); err != nil {
		t.Fatal(err)
	}
	got, err = fx.s.CountJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[replay.Status]int{replay.StatusQueued: 2, replay.StatusCancelled: 1}; !maps.Equal(got, want) {
		t.Errorf("CountJobs = %v, want %v", got, want)
	}
}
