package store_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// newestCatalog is 6,000 messages in three queues (six blocks of ids)
// whose ids and sort keys mostly grow together, as in a steady ingest
// (give or take a few seconds),
// with the exceptions a page from the newest hits must survive: messages
// of one queue written late with old times, runs of messages sharing one
// time (ties ordered by id), one of them across a block's edge, a message
// early in the last block with the newest time of all but the first, and
// with firstNewest a message written first with the newest time of all
// (which makes every block's bound that time). Words: "common" in a third,
// "scarce" in one in 40, "unique" in three.
func newestCatalog(t *testing.T, firstNewest bool) *store.Store {
	t.Helper()
	ctx := t.Context()
	s, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}, {Path: "billing", Kind: dlq.KindQueue},
		{Path: "late", Kind: dlq.KindQueue}}, now); err != nil {
		t.Fatal(err)
	}
	start := now.Add(-24 * time.Hour)
	seq := map[string]int64{}
	n := 0
	write := func(entity string, count int, at func(k int) time.Time) {
		var msgs []dlq.Message
		for k := range count {
			n++
			seq[entity]++
			body := "hay"
			switch {
			case n%3 == 0:
				body = "common hay"
			case n%40 == 1:
				body = "scarce hay"
			}
			if n == 7 || n == 3001 || n == 5999 {
				body += " unique"
			}
			reason := []string{"Timeout", "Poison"}[n%2]
			enq := at(k)
			if n == 5130 {
				// Early in the last block of ids, the newest of its block:
				// below the newest hits, above the bound of the block
				// under them.
				body, enq = "common hay", now.Add(2*time.Hour)
			}
			msgs = append(msgs, dlq.Message{SequenceNumber: seq[entity], State: dlq.StateActive, MessageID: fmt.Sprintf("m-%d", n),
				DeadLetterReason: &reason, EnqueuedAt: &enq, Body: []byte(body)})
		}
		if _, err := s.ApplyPage(ctx, dlq.Page{Entity: entity, SubQueue: dlq.SubQueueDeadLetter, From: seq[entity] - int64(count) + 1,
			Through: seq[entity], Messages: msgs, SeenAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	first := start
	if firstNewest {
		first = now.Add(time.Hour)
	}
	write("orders", 1, func(int) time.Time { return first })
	// A second a message, give or take 5 (pages of other queues, clocks).
	steady := func(k int) time.Time {
		return start.Add(time.Duration(n+k)*time.Second + time.Duration((n+k)*7919%11-5)*time.Second)
	}
	for range 4 {
		write("orders", 500, steady)
		write("billing", 400, steady)
	}
	// Written late, enqueued long ago.
	write("late", 700, func(k int) time.Time { return start.Add(-time.Duration(k) * time.Minute) })
	// Runs of one time, one of them across the edge of ids 4,095/4,096.
	for range 4 {
		at := start.Add(time.Duration(n) * time.Second)
		write("billing", 130, func(int) time.Time { return at })
	}
	for n < 6000 {
		write("orders", min(250, 6000-n), steady)
	}
	return s
}

// pagesOf lists the first three pages of f, following the cursors: the
// first comes from the newest hits when it can, the others from the
// cursor it gave.
func pagesOf(t *testing.T, s *store.Store, f dlq.Filter, limit int) [][]int64 {
	t.Helper()
	var out [][]int64
	cursor := ""
	for range 3 {
		recs, next, err := s.ListMessages(t.Context(), f, limit, cursor)
		if err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
		var ids []int64
		for _, r := range recs {
			ids = append(ids, r.ID)
		}
		out = append(out, ids)
		if next == "" {
			break
		}
		cursor = next
	}
	return out
}

// TestSearchPageFromNewestHits: a search's first page found among the
// newest hits, and the pages after its cursor, are the pages another
// strategy finds, whether the ids and the sort keys agree or not; and the
// newest hits answer the pages where they agree.
func TestSearchPageFromNewestHits(t *testing.T) {
	t.Run("steady", func(t *testing.T) { testSearchPageFromNewestHits(t, false) })
	t.Run("first message newest", func(t *testing.T) { testSearchPageFromNewestHits(t, true) })
}

func testSearchPageFromNewestHits(t *testing.T, firstNewest bool) {
	s := newestCatalog(t, firstNewest)
	defer store.SetNewestMinForTest(8)()
	filters := []dlq.Filter{
		{Query: "common"},
		{Query: "scarce"},
		{Query: "unique"},
		{Query: "common", Entity: "orders"},
		{Query: "common", Entity: "late"},
		{Query: "scarce", Reason: "Poison"},
		{Query: "common hay"},
		{Query: "nowhere"},
	}
	for _, f := range filters {
		for _, limit := range []int{3, 7, 50} {
			got := pagesOf(t, s, f, limit)
			for _, how := range []string{"collect"} {
				restore := store.ForceSearchForTest(how)
				want := pagesOf(t, s, f, limit)
				restore()
				if !slices.EqualFunc(got, want, slices.Equal) {
					t.Errorf("%+v, %d a page: pages %v, want (%s) %v", f, limit, got, how, want)
				}
			}
		}
	}
	found, missed := store.NewestCountsForTest(s)
	t.Logf("pages found among the newest hits: %d; planned as before: %d", found, missed)
	if firstNewest {
		// Every bound is the first message's time: only a search whose
		// candidates are all its hits is found there.
		if missed == 0 {
			t.Errorf("no page was planned as before, though every block's bound is the newest time")
		}
		return
	}
	if found == 0 {
		t.Errorf("no page was found among the newest hits")
	}
	// The first pages of these are found there; the late queue's, whose
	// messages are older than the blocks below them, are not.
	for _, c := range []struct {
		f     dlq.Filter
		found bool
	}{
		{dlq.Filter{Query: "common"}, true},
		{dlq.Filter{Query: "common", Entity: "orders"}, true},
		{dlq.Filter{Query: "scarce", Reason: "Poison"}, true},
		{dlq.Filter{Query: "common hay"}, true},
		{dlq.Filter{Query: "common", Entity: "late"}, false},
	} {
		f0, m0 := store.NewestCountsForTest(s)
		if _, _, err := s.ListMessages(t.Context(), c.f, 20, ""); err != nil {
			t.Fatal(err)
		}
		f1, m1 := store.NewestCountsForTest(s)
		if got := f1 == f0+1 && m1 == m0; got != c.found {
			t.Errorf("%+v: first page found among the newest hits %v, want %v", c.f, got, c.found)
		}
	}
}
