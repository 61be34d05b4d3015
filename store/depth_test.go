package store

import (
	"slices"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

func TestDepthSeries(t *testing.T) { ForEachEngine(t, testDepthSeries) }

func testDepthSeries(t *testing.T, engine string) {
	s := OpenFresh(t, engine)
	ctx := t.Context()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ents := []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}, {Path: "email", Kind: dlq.KindQueue}, {Path: "gone", Kind: dlq.KindQueue}}
	if _, err := s.SyncEntities(ctx, ents, t0); err != nil {
		t.Fatal(err)
	}
	rec := func(entity string, at time.Duration, dlqN, tdlqN int64) {
		t.Helper()
		if err := s.RecordDepth(ctx, entity, dlq.Counts{DeadLetter: dlqN, TransferDeadLetter: tdlqN}, t0.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	rec("orders", -time.Hour, 5, 0)     // before the window: carries in
	rec("email", -2*time.Hour, 1, 1)    // before the window: carries in
	rec("orders", 15*time.Minute, 8, 0) // bucket 1
	rec("orders", 16*time.Minute, 6, 0) // bucket 1: max 8+2 = 10, then 8
	rec("email", 45*time.Minute, 0, 0)  // bucket 3: 6
	rec("gone", 30*time.Minute, 100, 0) // an entity deleted later: left out
	if _, err := s.SyncEntities(ctx, ents[:2], t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, err := s.DepthSeries(ctx, t0, t0.Add(time.Hour), 4)
	if err != nil {
		t.Fatal(err)
	}
	// A bucket shows its peak: the last one opens at 8 and drops to 6.
	if want := []int64{7, 10, 8, 8}; !slices.Equal(got.Points, want) || got.Latest != 6 {
		t.Errorf("points %v latest %d, want %v latest 6", got.Points, got.Latest, want)
	}
	if _, err := s.DepthSeries(ctx, t0, t0, 4); err == nil {
		t.Error("an empty window is accepted")
	}
}

func TestMergeSearchIndex(t *testing.T) { ForEachEngine(t, testMergeSearchIndex) }

func testMergeSearchIndex(t *testing.T, engine string) {
	s := OpenFresh(t, engine)
	if s.idx != nil {
		// the ingester's steps, not the indexer's own (index_merge.go)
		s.idx.noMerge.Store(true)
	}
	ctx := t.Context()
	now := time.Now()
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "q", Kind: dlq.KindQueue}}, now); err != nil {
		t.Fatal(err)
	}
	// Many small index transactions leave many segments: a read through
	// the search index after each page indexes that page alone.
	for i := range 40 {
		r := "Reason"
		m := dlq.Message{SequenceNumber: int64(i + 1), State: dlq.StateActive, MessageID: "m", DeadLetterReason: &r, Body: []byte("word another")}
		if _, err := s.ApplyPage(ctx, dlq.Page{Entity: "q", SubQueue: dlq.SubQueueDeadLetter, From: int64(i + 1), Through: int64(i + 1),
			Messages: []dlq.Message{m}, SeenAt: now}); err != nil {
			t.Fatal(err)
		}
		if err := s.FlushIndex(ctx); err != nil {
			t.Fatal(err)
		}
	}
	more, err := s.MergeSearchIndex(ctx, 1000)
	if err != nil || !more {
		t.Fatalf("first merge = %v, %v; want work done", more, err)
	}
	for range 20 {
		if more, err = s.MergeSearchIndex(ctx, 1000); err != nil || !more {
			break
		}
	}
	if err != nil || more {
		t.Fatalf("merging never finished: %v, %v", more, err)
	}
	if n, err := s.CountMessages(ctx, dlq.Filter{Query: "another"}, 0); err != nil || n != 40 {
		t.Fatalf("search after merging finds %d, %v; want 40", n, err)
	}
}
