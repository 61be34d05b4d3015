package store_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// TestReasonFilter: a reason filter finds exactly the messages with that
// reason, newest first and across pages, whichever index drives it: a
// reason of one group, of several, one that main-queue messages (no group)
// share with dead letters, one that only main-queue messages have, and one
// nobody has.
func TestReasonFilter(t *testing.T) {
	store.ForEachEngine(t, testReasonFilterThroughGroups)
}

func testReasonFilterThroughGroups(t *testing.T, engine string) {
	ctx := t.Context()
	s := store.OpenFresh(t, engine)
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}, {Path: "email", Kind: dlq.KindQueue}}, now); err != nil {
		t.Fatal(err)
	}
	// reason and description of every message, per (entity, subqueue).
	type msg struct{ reason, desc string }
	pages := []struct {
		entity string
		q      dlq.SubQueue
		msgs   []msg
	}{
		{"orders", dlq.SubQueueDeadLetter, nil},
		{"email", dlq.SubQueueDeadLetter, nil},
		{"orders", dlq.SubQueueMain, nil},
	}
	for i := range 40 {
		pages[0].msgs = append(pages[0].msgs, msg{"Solo", "always the same"})
		pages[1].msgs = append(pages[1].msgs, msg{"Multi", []string{"disk full", "quota exceeded", "lock lost"}[i%3]})
		if i%2 == 0 {
			pages[0].msgs = append(pages[0].msgs, msg{"Multi", "printer on fire"})
		}
		if i%5 == 0 {
			// Resubmitted with the dead-lettering properties copied:
			// a reason, and no group.
			pages[2].msgs = append(pages[2].msgs, msg{"Multi", "disk full"}, msg{"MainOnly", "kept"})
		}
	}
	want := map[string][]string{} // reason: message ids, newest first
	at := now.Add(-time.Hour)
	for _, p := range pages {
		var msgs []dlq.Message
		for i, m := range p.msgs {
			at = at.Add(time.Second)
			enq := at
			reason, desc := m.reason, m.desc
			id := fmt.Sprintf("%s-%s-%d", p.entity, p.q, i)
			msgs = append(msgs, dlq.Message{SequenceNumber: int64(i + 1), State: dlq.StateActive, MessageID: id,
				DeadLetterReason: &reason, DeadLetterErrorDescription: &desc, EnqueuedAt: &enq, Body: []byte("x")})
			want[reason] = append([]string{id}, want[reason]...)
		}
		if _, err := s.ApplyPage(ctx, dlq.Page{Entity: p.entity, SubQueue: p.q, From: 1, Through: int64(len(msgs)),
			Messages: msgs, SeenAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	for _, reason := range []string{"Solo", "Multi", "MainOnly", "NoSuchReason"} {
		for _, f := range []dlq.Filter{{Reason: reason}, {Reason: reason, Entity: "orders"}, {Reason: reason, SubQueue: dlq.SubQueueDeadLetter}} {
			var got []string
			cursor := ""
			for range 100 {
				recs, next, err := s.ListMessages(ctx, f, 7, cursor)
				if err != nil {
					t.Fatalf("%+v: %v", f, err)
				}
				for _, r := range recs {
					got = append(got, r.MessageID)
				}
				if cursor = next; cursor == "" {
					break
				}
			}
			expect := slices.DeleteFunc(slices.Clone(want[reason]), func(id string) bool {
				return (f.Entity != "" && !strings.HasPrefix(id, f.Entity+"-")) ||
					(f.SubQueue != "" && !strings.Contains(id, "-"+string(f.SubQueue)+"-"))
			})
			if !slices.Equal(got, expect) {
				t.Errorf("%+v: %d messages %v, want %d %v", f, len(got), got, len(expect), expect)
			}
			n, err := s.CountMessages(ctx, f, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(len(expect)) {
				t.Errorf("%+v: count %d, want %d", f, n, len(expect))
			}
		}
	}
}
