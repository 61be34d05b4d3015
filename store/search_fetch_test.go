package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// A search page is the newest hits, also when there are more hits than a
// list fetches by id: on PostgreSQL the number of hits is the planner's
// estimate, which can be low (words that came after the last ANALYZE) or
// stop at the planner's cap, and a page built from the first hits fetched
// was the newest of an arbitrary part of them (at a million messages, a
// page sharing no row with the right one).
func TestSearchPageWhenHitsOutnumberTheFetch(t *testing.T) {
	store.ForEachEngine(t, testSearchPageWhenHitsOutnumberTheFetch)
}

func testSearchPageWhenHitsOutnumberTheFetch(t *testing.T, engine string) {
	ctx := t.Context()
	target := store.FreshTarget(t, engine)
	s, err := store.Open(ctx, target, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	// The oldest first, so that the search index's first hits (in the order
	// rows were written) are the oldest messages.
	add := func(from, n int, word string) {
		var recs []dlq.Record
		for i := from; i < from+n; i++ {
			var r dlq.Record
			r.Entity, r.SubQueue, r.State = "orders", dlq.SubQueueDeadLetter, dlq.StateActive
			r.SequenceNumber = int64(i + 1)
			r.MessageID = fmt.Sprintf("msg-%d", i)
			r.EnqueuedAt = ptr(t0.Add(time.Duration(i) * time.Second))
			r.Body = []byte(fmt.Sprintf(`{"n":%d,"note":"%s"}`, i, word))
			r.FirstSeenAt, r.LastSeenAt = t0, t0
			recs = append(recs, r)
		}
		storetest.Insert(t, target, recs...)
	}
	newest := func(f dlq.Filter, limit int) []int64 {
		t.Helper()
		recs, _, err := s.ListMessages(ctx, f, limit, "")
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, r := range recs {
			ids = append(ids, r.ID)
		}
		return ids
	}
	restore := store.SetFetchMaxForTest(100)
	defer restore()

	// 300 messages with "alpha", then 150 with "bravo" after the
	// statistics were taken: PostgreSQL estimates "bravo" from a sample
	// that has none of it (a few rows), "alpha" at about 300, which the
	// planner stops at its cap (41 for a page of 13 in 450 messages).
	add(0, 300, "alpha")
	if err := store.AnalyzeForTest(ctx, s); err != nil {
		t.Fatal(err)
	}
	add(300, 150, "bravo")
	all := newest(dlq.Filter{}, 450)
	if len(all) != 450 {
		t.Fatalf("listed %d of 450 messages", len(all))
	}
	var alpha, bravo []int64
	for _, id := range all {
		if len(bravo) < 150 {
			bravo = append(bravo, id)
		} else {
			alpha = append(alpha, id)
		}
	}
	for _, c := range []struct {
		word string
		want []int64
	}{{"alpha", alpha}, {"bravo", bravo}} {
		for _, limit := range []int{13, 50} {
			if got := newest(dlq.Filter{Query: c.word}, limit); !slices.Equal(got, c.want[:limit]) {
				t.Errorf("search %q, page of %d:\n got %v\nwant %v", c.word, limit, got, c.want[:limit])
			}
		}
		n, err := s.CountMessages(ctx, dlq.Filter{Query: c.word}, 0)
		if err != nil || n != int64(len(c.want)) {
			t.Errorf("CountMessages(%q) = %d, %v; want %d", c.word, n, err, len(c.want))
		}
	}
}
