package store_test

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// TestImportThenApplyPage: records written by Import (what storetest
// writes) keep their own times and replay counts, are counted and grouped
// as ApplyPage counts them, and are the catalog's known messages for the
// ingester's next page: one ingest path.
func TestImportThenApplyPage(t *testing.T) { store.ForEachEngine(t, testImportThenApplyPage) }

func testImportThenApplyPage(t *testing.T, engine string) {
	ctx := t.Context()
	t0 := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	s := openWithQueueOn(t, engine, t0)
	msg := func(seq int64, id string) dlq.Message {
		enq := t0.Add(time.Duration(seq) * time.Second)
		return dlq.Message{SequenceNumber: seq, State: dlq.StateActive, MessageID: id, EnqueuedAt: &enq,
			DeadLetterReason: ptr("SqlTimeout"), DeadLetterErrorDescription: ptr("timed out after 30000 ms"),
			Body: []byte("order " + id)}
	}
	recs := []dlq.Record{
		{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Message: msg(1, "a"), FirstSeenAt: t0, LastSeenAt: t0.Add(time.Minute), ReplayCount: 2},
		{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Message: msg(2, "b"), FirstSeenAt: t0},
		{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Message: msg(3, "c"), FirstSeenAt: t0},
		{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Message: msg(4, "d"), FirstSeenAt: t0, GoneAt: ptr(t0.Add(2 * time.Minute))},
	}
	recs[1].ApplicationProperties = dlq.EncodeProperties(map[string]any{store.ReplayCountProperty: int64(3)})
	ids, err := s.Import(ctx, recs)
	if err != nil || len(ids) != 4 {
		t.Fatalf("Import = %v, %v", ids, err)
	}

	got, err := s.GetMessage(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if !got.FirstSeenAt.Equal(t0) || !got.LastSeenAt.Equal(t0.Add(time.Minute)) || got.ReplayCount != 2 || got.BodyPreview != "order a" || got.GoneAt != nil {
		t.Errorf("imported record = %+v", got)
	}
	if got, _ := s.GetMessage(ctx, ids[1]); got.ReplayCount != 3 || !got.LastSeenAt.Equal(t0) {
		t.Errorf("the replay count from the properties, last seen when first seen: %+v", got)
	}
	if got, _ := s.GetMessage(ctx, ids[3]); got.GoneAt == nil || !got.GoneAt.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("gone record = %+v", got)
	}
	check := func(when string, present, total int64) {
		t.Helper()
		n, err := s.PresentCount(ctx, "orders", dlq.SubQueueDeadLetter)
		if err != nil || n != present {
			t.Errorf("%s: present count %d, %v, want %d", when, n, err, present)
		}
		gs, err := s.ListGroups(ctx)
		if err != nil || len(gs) != 1 || gs[0].Present != present || gs[0].Total != total || !slices.Equal(gs[0].Entities, []string{"orders"}) {
			t.Errorf("%s: groups %+v, %v, want one with %d present of %d", when, gs, err, present, total)
		}
	}
	check("after the import", 3, 4)

	// The ingester's next page holds 1 and 2 as they were, and a new 5:
	// 3 has gone, 4 was gone already.
	res, err := s.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: 0, Through: math.MaxInt64,
		Messages: []dlq.Message{msg(1, "a"), msg(2, "b"), msg(5, "e")}, SeenAt: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.New) != 1 || !slices.Equal(res.Gone, []int64{ids[2]}) || res.Updated != 0 {
		t.Errorf("ApplyPage after Import = %+v, want one new, %d gone", res, ids[2])
	}
	check("after the page", 3, 5)
	if got, _ := s.GetMessage(ctx, ids[0]); !got.LastSeenAt.Equal(t0.Add(time.Hour)) || !got.FirstSeenAt.Equal(t0) {
		t.Errorf("seen again by the page: %+v", got)
	}

	if _, err := s.Import(ctx, []dlq.Record{{Entity: "nowhere", SubQueue: dlq.SubQueueDeadLetter, Message: msg(1, "x")}}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Import into an unknown entity: %v, want ErrNotFound", err)
	}
}
