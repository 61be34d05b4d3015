package store_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
)

// TestCopyToPostgres: a SQLite catalog with messages, a job, audit entries
// and a token, copied to PostgreSQL, reads the same there (every reference
// filter and search, groups, entities, the job and its items, the audit
// chain); a copy cut off after its first batch continues when it runs
// again, and a second copy changes nothing.
func TestCopyToPostgres(t *testing.T) {
	if !slices.Contains(store.Engines(), "postgres") {
		t.Skip("PostgreSQL not among DLQDASH_TEST_ENGINES")
	}
	ctx := t.Context()
	fx := newFixtureOn(t, "sqlite", 1200)
	f := dlq.Filter{Entity: "orders"}
	j, err := fx.s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "tester", Destination: "orders"},
		replay.Selection{Filter: &f}, 100)
	if err != nil {
		t.Fatal(err)
	}
	items, _, err := fx.s.ListItems(ctx, j.ID, "", 500, "")
	if err != nil || len(items) == 0 {
		t.Fatalf("items %d, %v", len(items), err)
	}
	if _, err := fx.s.UpdateItems(ctx, j.ID, []replay.Update{{MessageID: items[0].MessageID, State: replay.ItemLocked}}); err != nil {
		t.Fatal(err)
	}
	log := audit.New(fx.s)
	for range 3 {
		if _, err := log.Append(ctx, audit.Record{Action: audit.ActionReplayJobCreated, Params: map[string]any{"job_id": j.ID}}); err != nil {
			t.Fatal(err)
		}
	}

	dst, err := store.Open(ctx, store.FreshTarget(t, "postgres"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	// Cut off after the first batch of messages.
	cut, cancel := context.WithCancel(ctx)
	err = fx.s.CopyTo(cut, dst, func(p store.CopyProgress) {
		if p.Table == "messages" && p.Copied > 0 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the cut-off copy: %v", err)
	}
	var last store.CopyProgress
	if err := fx.s.CopyTo(ctx, dst, func(p store.CopyProgress) { last = p }); err != nil {
		t.Fatalf("the copy after it: %v", err)
	}
	if last.Table != "messages_fts" || last.Copied != last.Total || last.Total != int64(len(fx.recs)) {
		t.Errorf("last progress %+v", last)
	}
	if err := fx.s.CopyTo(ctx, dst, nil); err != nil {
		t.Fatalf("a second copy: %v", err)
	}

	for _, f := range referenceFilters(fx) {
		if got, want := listAll(t, dst, f, 500), fx.want(f); !slices.Equal(got, want) {
			t.Errorf("filter %+v on the copy:\n got %v\nwant %v", f, got, want)
		}
	}
	for name, read := range map[string]func(*store.Store) (any, error){
		"entities": func(s *store.Store) (any, error) { return s.ListEntities(ctx) },
		"groups":   func(s *store.Store) (any, error) { return s.ListGroups(ctx) },
		"job":      func(s *store.Store) (any, error) { return s.Job(ctx, j.ID) },
		"items": func(s *store.Store) (any, error) {
			it, _, err := s.ListItems(ctx, j.ID, "", 500, "")
			return it, err
		},
		"message": func(s *store.Store) (any, error) { return s.GetMessage(ctx, fx.recs[7].ID) },
	} {
		a, err1 := read(fx.s)
		b, err2 := read(dst)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("%s differs on the copy (%v, %v):\n%+v\n%+v", name, err1, err2, a, b)
		}
	}
	if n, err := audit.New(dst).Verify(ctx, nil); n != 3 || err != nil {
		t.Errorf("audit chain on the copy: %d, %v", n, err)
	}
	// New rows on the copy get new ids.
	j2, err := dst.CreateJob(ctx, replay.Job{Action: replay.ActionDiscard, CreatedBy: "tester"},
		replay.Selection{IDs: []int64{fx.recs[len(fx.recs)-1].ID}}, 100)
	if err != nil || j2.ID <= j.ID {
		t.Errorf("a new job on the copy: %+v, %v", j2.ID, err)
	}
}
