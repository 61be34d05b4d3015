package store_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// namespaceCatalog is a catalog of big messages in namespace big (spread
// over 4 queues, enqueued over a day) and small in namespace small (one
// queue, all older than big's), the shape where a namespace filter walking
// the time index finds few rows for a long time.
func namespaceCatalog(tb testing.TB, big, small int) *store.Store {
	tb.Helper()
	ctx := tb.Context()
	s, err := store.Open(ctx, filepath.Join(tb.TempDir(), "ns.db"), store.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	at := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	queues := []dlq.Entity{{Path: "q0", Kind: dlq.KindQueue}, {Path: "q1", Kind: dlq.KindQueue}, {Path: "q2", Kind: dlq.KindQueue}, {Path: "q3", Kind: dlq.KindQueue}}
	if _, err := s.Namespace("big").SyncEntities(ctx, queues, at); err != nil {
		tb.Fatal(err)
	}
	if _, err := s.Namespace("small").SyncEntities(ctx, queues[:1], at); err != nil {
		tb.Fatal(err)
	}
	reason := "SqlTimeout"
	var recs []dlq.Record
	flush := func() {
		if _, err := s.Import(ctx, recs); err != nil {
			tb.Fatal(err)
		}
		recs = recs[:0]
	}
	for i := range small {
		enq := at.Add(-time.Duration(small-i) * time.Minute)
		recs = append(recs, dlq.Record{Namespace: "small", Entity: "q0", SubQueue: dlq.SubQueueDeadLetter,
			Message: dlq.Message{SequenceNumber: int64(i + 1), State: dlq.StateActive, MessageID: fmt.Sprint("s", i),
				EnqueuedAt: &enq, DeadLetterReason: &reason, Body: []byte("{}")}})
	}
	for i := range big {
		enq := at.Add(time.Duration(i) * 24 * time.Hour / time.Duration(big))
		recs = append(recs, dlq.Record{Namespace: "big", Entity: fmt.Sprint("q", i%4), SubQueue: dlq.SubQueueDeadLetter,
			Message: dlq.Message{SequenceNumber: int64(i + 1), State: dlq.StateActive, MessageID: fmt.Sprint("b", i),
				EnqueuedAt: &enq, DeadLetterReason: &reason, Body: []byte("{}")}})
		if len(recs) == 5000 {
			flush()
		}
	}
	flush()
	return s
}

// BenchmarkListSmallNamespace: a page and a count of the small namespace's
// messages in a catalog that is mostly another namespace's.
func BenchmarkListSmallNamespace(b *testing.B) {
	s := namespaceCatalog(b, 200_000, 40)
	for _, f := range []dlq.Filter{{Namespace: "small"}, {Namespace: "small", Entity: "q0"}, {Entity: "q0"}, {Namespace: "big"}} {
		b.Run(fmt.Sprintf("%s/%s", f.Namespace, f.Entity), func(b *testing.B) {
			for b.Loop() {
				if _, _, err := s.ListMessages(b.Context(), f, 50, ""); err != nil {
					b.Fatal(err)
				}
				if _, err := s.CountMessages(b.Context(), f, 10_001); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSmallNamespaceListIsComplete: whatever plan serves it, the small
// namespace's list is its messages, newest first, and pages on.
func TestSmallNamespaceListIsComplete(t *testing.T) {
	s := namespaceCatalog(t, 2000, 40)
	var got []string
	cursor := ""
	for {
		recs, next, err := s.ListMessages(t.Context(), dlq.Filter{Namespace: "small"}, 15, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got = append(got, r.MessageID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(got) != 40 || got[0] != "s39" || got[39] != "s0" {
		t.Errorf("small namespace's list: %d messages %v", len(got), got)
	}
	if n, err := s.CountMessages(t.Context(), dlq.Filter{Namespace: "small"}, 10_001); err != nil || n != 40 {
		t.Errorf("count %d, %v", n, err)
	}
	if n, err := s.CountMessages(t.Context(), dlq.Filter{Entity: "q0"}, 10_001); err != nil || n != 540 {
		t.Errorf("q0 in both namespaces: count %d, %v; want 500 + 40", n, err)
	}
}
