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

// TestEntityAndReasonFilters: an entity with a reason, or with a group, finds
// exactly that entity's messages of it, newest first and across pages, when
// the reason has many more messages in another entity and the entity more
// of other reasons (on SQLite through messages_by_entity_reason, migration
// 0021; a group's other groups of the same reason are left out).
func TestEntityAndReasonFilters(t *testing.T) {
	store.ForEachEngine(t, testEntityAndReasonFilters)
}

func testEntityAndReasonFilters(t *testing.T, engine string) {
	ctx := t.Context()
	s := store.OpenFresh(t, engine)
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	if _, err := s.SyncEntities(ctx, []dlq.Entity{{Path: "orders", Kind: dlq.KindQueue}, {Path: "load", Kind: dlq.KindQueue}}, now); err != nil {
		t.Fatal(err)
	}
	type msg struct{ reason, desc string }
	var orders, load []msg
	for i := range 300 {
		load = append(load, msg{"SqlTimeout", "timed out"})
		if i%10 == 0 {
			orders = append(orders, msg{"SqlTimeout", "timed out"}, msg{"SqlTimeout", "pool exhausted"})
		}
		orders = append(orders, msg{"Other", "something else"})
	}
	var ids []string // every message id in order of enqueued time, and its msg
	var all []msg
	at := now.Add(-time.Hour)
	for _, p := range []struct {
		entity string
		msgs   []msg
	}{{"orders", orders}, {"load", load}} {
		var msgs []dlq.Message
		for i, m := range p.msgs {
			at = at.Add(time.Second)
			enq, reason, desc := at, m.reason, m.desc
			id := fmt.Sprintf("%s-%d", p.entity, i)
			msgs = append(msgs, dlq.Message{SequenceNumber: int64(i + 1), State: dlq.StateActive, MessageID: id,
				DeadLetterReason: &reason, DeadLetterErrorDescription: &desc, EnqueuedAt: &enq, Body: []byte("x")})
			ids, all = append(ids, id), append(all, m)
		}
		if _, err := s.ApplyPage(ctx, dlq.Page{Entity: p.entity, SubQueue: dlq.SubQueueDeadLetter, From: 1,
			Through: int64(len(msgs)), Messages: msgs, SeenAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	gs, err := s.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	group := map[string]string{} // description: group id
	for _, g := range gs {
		group[g.DescriptionPattern] = g.ID
	}
	if group["timed out"] == "" || group["pool exhausted"] == "" {
		t.Fatalf("groups %+v", gs)
	}
	for _, tt := range []struct {
		f     dlq.Filter
		match func(id string, m msg) bool
	}{
		{dlq.Filter{Entity: "orders", Reason: "SqlTimeout"}, func(id string, m msg) bool {
			return strings.HasPrefix(id, "orders-") && m.reason == "SqlTimeout"
		}},
		{dlq.Filter{Entity: "orders", Group: group["timed out"]}, func(id string, m msg) bool {
			return strings.HasPrefix(id, "orders-") && m.desc == "timed out"
		}},
		{dlq.Filter{Entity: "load", Reason: "Other"}, func(string, msg) bool { return false }},
	} {
		var want []string
		for i := len(ids) - 1; i >= 0; i-- {
			if tt.match(ids[i], all[i]) {
				want = append(want, ids[i])
			}
		}
		var got []string
		cursor := ""
		for range 100 {
			recs, next, err := s.ListMessages(ctx, tt.f, 7, cursor)
			if err != nil {
				t.Fatalf("%+v: %v", tt.f, err)
			}
			for _, r := range recs {
				got = append(got, r.MessageID)
			}
			if cursor = next; cursor == "" {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%+v: %d messages %v, want %d %v", tt.f, len(got), got, len(want), want)
		}
		if n, err := s.CountMessages(ctx, tt.f, 1000); err != nil || n != int64(len(want)) {
			t.Errorf("%+v: count %d (%v), want %d", tt.f, n, err, len(want))
		}
		if engine == "sqlite" {
			// The entity's rows of the reason drive the walk: not the
			// reason's (330, mostly load's) nor the entity's (330).
			if index, _, err := store.ListPlanForTest(ctx, s, tt.f); err != nil || index != "INDEXED BY messages_by_entity_reason" {
				t.Errorf("%+v: plan %q (%v), want messages_by_entity_reason", tt.f, index, err)
			}
		}
	}
}
