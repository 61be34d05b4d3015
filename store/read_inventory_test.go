package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

func TestListWaiting(t *testing.T) { store.ForEachEngine(t, testListWaiting) }

func testListWaiting(t *testing.T, engine string) {
	path := store.FreshTarget(t, engine)
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	base := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	var recs []dlq.Record
	for i := range 23 {
		enq := base.Add(time.Duration((i*7)%23) * time.Minute)
		due := base.Add(time.Duration((i*5)%23) * time.Hour)
		r := dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueMain, Message: dlq.Message{SequenceNumber: int64(i + 1),
			State: dlq.StateDeferred, EnqueuedAt: &enq}}
		if i%2 == 1 {
			r.State, r.ScheduledEnqueueAt = dlq.StateScheduled, &due
		}
		if i == 4 {
			r.GoneAt = &enq
		}
		recs = append(recs, r)
	}
	recs = append(recs, dlq.Record{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, Message: dlq.Message{SequenceNumber: 99, State: dlq.StateActive}})
	storetest.Insert(t, path, recs...)
	for _, state := range []dlq.State{dlq.StateDeferred, dlq.StateScheduled} {
		var got []time.Time
		seen := map[int64]bool{}
		cursor := ""
		for range 20 {
			page, next, err := st.ListWaiting(t.Context(), state, 3, cursor)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page {
				if r.State != state || r.GoneAt != nil || seen[r.ID] {
					t.Fatalf("%s: unexpected %+v", state, r)
				}
				seen[r.ID] = true
				if state == dlq.StateDeferred {
					got = append(got, *r.EnqueuedAt)
				} else {
					got = append(got, *r.ScheduledEnqueueAt)
				}
			}
			if cursor = next; cursor == "" {
				break
			}
		}
		want := map[dlq.State]int{dlq.StateDeferred: 11, dlq.StateScheduled: 11}[state]
		if len(got) != want || !slices.IsSortedFunc(got, func(a, b time.Time) int { return a.Compare(b) }) {
			t.Errorf("%s: %d messages, sorted %v: %v", state, len(got), slices.IsSortedFunc(got, func(a, b time.Time) int { return a.Compare(b) }), got)
		}
	}
	if _, _, err := st.ListWaiting(t.Context(), dlq.StateActive, 3, ""); err == nil {
		t.Error("active: no error")
	}
	if _, _, err := st.ListWaiting(t.Context(), dlq.StateDeferred, 3, "bogus"); err == nil || !strings.Contains(err.Error(), "cursor") {
		t.Errorf("bad cursor: %v", err)
	}
}

// BenchmarkListWaiting pages through deferred and scheduled messages of the
// million-message catalog.
func BenchmarkListWaiting(b *testing.B) {
	st, err := store.Open(context.Background(), storetest.Catalog(b, 1_000_000), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for _, state := range []dlq.State{dlq.StateDeferred, dlq.StateScheduled} {
		b.Run(string(state), func(b *testing.B) {
			_, next, err := st.ListWaiting(context.Background(), state, 50, "")
			if err != nil || next == "" {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, _, err := st.ListWaiting(context.Background(), state, 50, next); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
