package store_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// keyBoundsCatalog writes a catalog whose newest messages (ids 2,001 to
// 5,000, three blocks of key_bounds and more) have none of the word
// "needle", which older ones have: every 50th of the first 2,000, and the
// first message, enqueued after all the others. It returns the catalog and
// the ids of the messages with the word, in list order.
func keyBoundsCatalog(t *testing.T, path string) (*store.Store, []string) {
	t.Helper()
	ctx := t.Context()
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}, {Path: "burst", Kind: dlq.KindQueue}}, now); err != nil {
		t.Fatal(err)
	}
	type hit struct {
		id string
		at time.Time
	}
	var hits []hit
	page := func(entity string, from, to int, body func(i int) string, at func(i int) time.Time) {
		var msgs []dlq.Message
		for i := from; i <= to; i++ {
			enq, reason := at(i), "R"
			id := fmt.Sprintf("%s-%d", entity, i)
			b := body(i)
			msgs = append(msgs, dlq.Message{SequenceNumber: int64(i), State: dlq.StateActive, MessageID: id,
				DeadLetterReason: &reason, EnqueuedAt: &enq, Body: []byte(b)})
			if b == "a needle here" {
				hits = append(hits, hit{id, enq})
			}
		}
		if _, err := s.ApplyPage(ctx, dlq.Page{Entity: entity, SubQueue: dlq.SubQueueDeadLetter, From: int64(from), Through: int64(to),
			Messages: msgs, SeenAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	old := now.Add(-48 * time.Hour)
	for from := 1; from <= 2000; from += 500 {
		page("orders", from, from+499, func(i int) string {
			if i%50 == 0 || i == 1 {
				return "a needle here"
			}
			return "hay"
		}, func(i int) time.Time {
			if i == 1 {
				return now.Add(time.Hour) // enqueued last, written first
			}
			return old.Add(time.Duration(i) * time.Second)
		})
	}
	for from := 1; from <= 3000; from += 500 {
		page("burst", from, from+499, func(int) string { return "more hay" },
			func(i int) time.Time { return now.Add(time.Duration(i) * time.Millisecond) })
	}
	if err := s.FlushIndex(ctx); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(hits, func(a, b hit) int { return b.at.Compare(a.at) })
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.id)
	}
	return s, ids
}

// TestSearchStartsAtItsHitsKeyBound: a search whose hits are all older
// than the newest messages finds them whichever way it walks, and its
// bound is the largest sort key among the hits' blocks and those below
// (here the first message's, enqueued last), below the newer messages'.
func TestSearchStartsAtItsHitsKeyBound(t *testing.T) {
	ctx := t.Context()
	s, want := keyBoundsCatalog(t, filepath.Join(t.TempDir(), "catalog.db"))
	defer s.Close()
	bound, ok, err := store.SearchKeyBoundForTest(ctx, s, "needle")
	if err != nil || !ok {
		t.Fatalf("bound %d, %v, %v", bound, ok, err)
	}
	first, _, err := s.ListMessages(ctx, dlq.Filter{Query: "needle"}, 1, "")
	if err != nil || len(first) != 1 || first[0].EnqueuedAt == nil {
		t.Fatalf("%v %v", first, err)
	}
	if got := first[0].EnqueuedAt.UnixMilli(); bound != got {
		t.Errorf("bound %d, want the newest hit's key %d", bound, got)
	}
	for _, how := range []string{"collect", "probe"} {
		// The walk is bounded: a range seek past the newer messages.
		restore := store.ForceSearchForTest(how)
		_, where, err := store.ListPlanForTest(ctx, s, dlq.Filter{Query: "needle"})
		restore()
		if err != nil || !slices.Contains(where, "coalesce(m.enqueued_at, -1) < ?") {
			t.Errorf("%s: terms %q (%v), want a bound on the sort key", how, where, err)
		}
	}
	if _, ok, err := store.SearchKeyBoundForTest(ctx, s, "nowhere"); err != nil || ok {
		t.Errorf("a search without hits has a bound: %v %v", ok, err)
	}
	for _, how := range []string{"", "collect", "probe", "fetch"} {
		restore := store.ForceSearchForTest(how)
		var got []string
		cursor := ""
		for range 100 {
			recs, next, err := s.ListMessages(ctx, dlq.Filter{Query: "needle"}, 9, cursor)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				got = append(got, r.MessageID)
			}
			if cursor = next; cursor == "" {
				break
			}
		}
		restore()
		if !slices.Equal(got, want) {
			t.Errorf("%q: %d messages %v, want %d %v", how, len(got), got, len(want), want)
		}
		restore = store.ForceSearchForTest(how)
		n, err := s.CountMessages(ctx, dlq.Filter{Query: "needle"}, 1000)
		restore()
		if err != nil || n != int64(len(want)) {
			t.Errorf("%q: count %d (%v), want %d", how, n, err, len(want))
		}
	}
}

// TestKeyBoundsOfAnOlderIndexFile: an index file written before the bounds
// were gets them at Open, from the messages it has search rows of.
func TestKeyBoundsOfAnOlderIndexFile(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "catalog.db")
	s, want := keyBoundsCatalog(t, path)
	before, ok, err := store.SearchKeyBoundForTest(ctx, s, "needle")
	if err != nil || !ok {
		t.Fatalf("bound %d, %v, %v", before, ok, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+store.IndexPath(path)+"?mode=rw")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DROP TABLE key_bounds`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// Read-only (dlqdash export beside an older dlqdash's server): no
	// bounds, the same answers.
	ro, err := store.OpenReadOnly(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	restore := store.ForceSearchForTest("collect") // a walk, which the bound would start
	recs, _, err := ro.ListMessages(ctx, dlq.Filter{Query: "needle"}, 100, "")
	restore()
	ro.Close()
	if err != nil || len(recs) != len(want) {
		t.Errorf("read-only: %d messages (%v), want %d", len(recs), err, len(want))
	}
	s, err = store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	after, ok, err := store.SearchKeyBoundForTest(ctx, s, "needle")
	if err != nil || !ok || after != before {
		t.Errorf("bound after Open %d (%v, %v), want %d", after, ok, err, before)
	}
}
