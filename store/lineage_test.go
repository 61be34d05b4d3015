package store_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// lineageFixture: a dead letter replayed by a job, its copy dead-lettered
// again and replayed by a second job, whose copy is dead-lettered again;
// plus a decoy carrying the first copy's MessageId from another job.
type lineageFixture struct {
	s                *store.Store
	orig, c1, c2     int64
	decoy, unrelated int64
	j1, j2           int64
}

func newLineageFixture(t *testing.T, engine string) lineageFixture {
	t.Helper()
	ctx := t.Context()
	path := store.FreshTarget(t, engine)
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.AddEntities(t, path, storetest.Entity{Path: "orders", Counts: dlq.Counts{DeadLetter: 3}})
	dl := func(seq int64, msgID string, replays int, jobID int64, at time.Time) dlq.Record {
		props := map[string]any{"tenant": "t1"}
		if jobID > 0 {
			props[replay.PropJobID] = strconv.FormatInt(jobID, 10)
			props[replay.PropReplayCount] = int64(replays)
		}
		return dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, FirstSeenAt: at, LastSeenAt: at, ReplayCount: replays,
			Message: dlq.Message{SequenceNumber: seq, State: dlq.StateActive, MessageID: msgID, EnqueuedAt: &at,
				DeadLetterReason: ptr("MaxDeliveryCountExceeded"), ApplicationProperties: dlq.EncodeProperties(props)}}
	}
	var fx lineageFixture
	fx.s = s
	ids := storetest.Insert(t, path, dl(1, "o-1", 0, 0, t0), dl(2, "other", 0, 0, t0))
	fx.orig, fx.unrelated = ids[0], ids[1]

	replayOne := func(id int64, copyID string) int64 {
		t.Helper()
		j, err := s.CreateJob(ctx, replay.Job{Action: replay.ActionReplay, CreatedBy: "tester"}, replay.Selection{IDs: []int64{id}}, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range []replay.Update{{MessageID: id, State: replay.ItemLocked}, {MessageID: id, State: replay.ItemSent, CopyMessageID: copyID},
			{MessageID: id, State: replay.ItemCompleted}} {
			if _, err := s.UpdateItems(ctx, j.ID, []replay.Update{u}); err != nil {
				t.Fatal(err)
			}
		}
		return j.ID
	}
	fx.j1 = replayOne(fx.orig, "o-1/dlqdash-1")
	c1 := replay.DerivedMessageID("o-1", 1, fx.j1)
	if c1 != "o-1/dlqdash-1" {
		t.Fatalf("job ids: %s", c1)
	}
	ids = storetest.Insert(t, path, dl(3, c1, 1, fx.j1, t0.Add(time.Hour)), dl(4, c1, 1, 999, t0.Add(time.Hour)))
	fx.c1, fx.decoy = ids[0], ids[1]
	fx.j2 = replayOne(fx.c1, c1+"/dlqdash-2")
	fx.c2 = storetest.Insert(t, path, dl(5, c1+"/dlqdash-2", 2, fx.j2, t0.Add(2*time.Hour)))[0]
	return fx
}

func lineageText(evs []dlq.LineageEvent) string {
	var parts []string
	for _, e := range evs {
		switch e.Kind {
		case dlq.LineageDeadLettered:
			parts = append(parts, fmt.Sprintf("%d:dl %d", e.Depth, e.Message.ID))
		default:
			parts = append(parts, fmt.Sprintf("%d:%s by %d of %d as %s (%s)", e.Depth, e.Kind, e.JobID, e.Message.ID, e.CopyMessageID, e.State))
		}
	}
	return strings.Join(parts, ", ")
}

// One timeline whichever of its messages is asked about: the first dead
// letter, the job that replayed it as a copy, the copy dead-lettered again,
// and on; a message with the copy's MessageId from another job is not in it.
func TestLineageBothWays(t *testing.T) { store.ForEachEngine(t, testLineageBothWays) }

func testLineageBothWays(t *testing.T, engine string) {
	fx := newLineageFixture(t, engine)
	want := fmt.Sprintf("0:dl %d, 0:replayed by %d of %d as o-1/dlqdash-1 (completed), 1:dl %d, "+
		"1:replayed by %d of %d as o-1/dlqdash-1/dlqdash-2 (completed), 2:dl %d",
		fx.orig, fx.j1, fx.orig, fx.c1, fx.j2, fx.c1, fx.c2)
	for _, id := range []int64{fx.orig, fx.c1, fx.c2} {
		evs, err := fx.s.Lineage(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got := lineageText(evs); got != want {
			t.Errorf("lineage of %d:\n got %s\nwant %s", id, got, want)
		}
	}
	// The decoy's job has no record of it: it is its own lineage.
	evs, err := fx.s.Lineage(t.Context(), fx.decoy)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := lineageText(evs), fmt.Sprintf("0:dl %d", fx.decoy); got != want {
		t.Errorf("decoy: %s, want %s", got, want)
	}
	evs, err = fx.s.Lineage(t.Context(), fx.unrelated)
	if err != nil || lineageText(evs) != fmt.Sprintf("0:dl %d", fx.unrelated) {
		t.Errorf("an ordinary dead letter: %s, %v", lineageText(evs), err)
	}
	if _, err := fx.s.Lineage(t.Context(), 12345); err == nil {
		t.Error("no error for a message that does not exist")
	}
}
