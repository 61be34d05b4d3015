package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/alert"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/store"
)

// deadLetter catalogs dead letters from..through of orders with this
// reason and description, enqueued at at.
func deadLetter(t *testing.T, s *store.Store, from, through int64, reason, desc string, at time.Time) {
	t.Helper()
	var msgs []dlq.Message
	for seq := from; seq <= through; seq++ {
		enq := enqueueBase.Add(time.Duration(seq) * time.Second)
		msgs = append(msgs, dlq.Message{SequenceNumber: seq, State: dlq.StateActive, MessageID: "m" + string(rune('a'+seq%26)),
			EnqueuedAt: &enq, DeadLetterReason: &reason, DeadLetterErrorDescription: &desc})
	}
	// A page from..MaxInt64 would mark the earlier ones gone: cover only these.
	if _, err := s.ApplyPage(t.Context(), dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: from,
		Through: through, Messages: msgs, SeenAt: at}); err != nil {
		t.Fatal(err)
	}
}

var enqueueBase = time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)

func oneGroup(t *testing.T, s *store.Store, reason string) dlq.GroupSummary {
	t.Helper()
	gs, err := s.ListGroups(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if g.Reason == reason {
			return g
		}
	}
	t.Fatalf("no group of reason %s in %+v", reason, gs)
	return dlq.GroupSummary{}
}

// TestGroupTriage: a new group is new with a generated name; a rename, an
// owner, notes and status changes are kept (status_changed_at moves only
// when the status does); a bad status and an unknown group are refused.
func TestGroupTriage(t *testing.T) { store.ForEachEngine(t, testGroupTriage) }

func testGroupTriage(t *testing.T, engine string) {
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	s := openWithQueueOn(t, engine, at)
	ctx := t.Context()
	deadLetter(t, s, 1, 3, "MaxDeliveryCountExceeded", "Order 4711 not found", at)
	g := oneGroup(t, s, "MaxDeliveryCountExceeded")
	if g.Triage.Status != dlq.StatusNew || g.Triage.StatusChangedAt != nil || g.Triage.Name != "" {
		t.Errorf("new group's triage %+v: want status new, never changed, no name given", g.Triage)
	}
	if got, want := g.DisplayName(), "MaxDeliveryCountExceeded · Order <n> not found"; got != want {
		t.Errorf("generated name %q, want %q", got, want)
	}

	s.Now = func() time.Time { return at.Add(time.Minute) }
	before, after, err := s.UpdateGroupTriage(ctx, g.ID, dlq.TriageChange{Name: ptr("Orders missing"), Owner: ptr("alice"),
		Notes: ptr("upstream deletes orders early"), Status: ptrTo(dlq.StatusInvestigating)})
	if err != nil {
		t.Fatal(err)
	}
	if before.Status != dlq.StatusNew || after.Status != dlq.StatusInvestigating || after.Name != "Orders missing" ||
		after.Owner != "alice" || after.StatusChangedAt == nil || !after.StatusChangedAt.Equal(at.Add(time.Minute)) {
		t.Errorf("update: before %+v after %+v", before, after)
	}
	g = oneGroup(t, s, "MaxDeliveryCountExceeded")
	if g.DisplayName() != "Orders missing" || g.Triage.Notes != "upstream deletes orders early" || g.Triage.Owner != "alice" {
		t.Errorf("read back %+v", g.Triage)
	}
	// The same status again does not move status_changed_at.
	s.Now = func() time.Time { return at.Add(2 * time.Minute) }
	if _, after, err = s.UpdateGroupTriage(ctx, g.ID, dlq.TriageChange{Status: ptrTo(dlq.StatusInvestigating), Name: ptr("")}); err != nil {
		t.Fatal(err)
	}
	if !after.StatusChangedAt.Equal(at.Add(time.Minute)) || after.Name != "" {
		t.Errorf("same status: %+v; want status_changed_at kept and the name given back", after)
	}
	if _, _, err := s.UpdateGroupTriage(ctx, g.ID, dlq.TriageChange{Status: ptrTo(dlq.GroupStatus("done"))}); err == nil {
		t.Error("status done accepted")
	}
	if _, _, err := s.UpdateGroupTriage(ctx, "nosuchgroup", dlq.TriageChange{Owner: ptr("bob")}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown group: %v, want ErrNotFound", err)
	}
}

// TestResolvedGroupReopens: a resolved group that receives new dead letters
// is new again, says when, and the reopening waits for the audit; a known
// group stays known.
func TestResolvedGroupReopens(t *testing.T) { store.ForEachEngine(t, testResolvedGroupReopens) }

func testResolvedGroupReopens(t *testing.T, engine string) {
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	s := openWithQueueOn(t, engine, at)
	ctx := t.Context()
	deadLetter(t, s, 1, 2, "Timeout", "after 30 s", at)
	deadLetter(t, s, 3, 3, "Bad", "bad input", at)
	g := oneGroup(t, s, "Timeout")
	bad := oneGroup(t, s, "Bad")
	if _, _, err := s.UpdateGroupTriage(ctx, g.ID, dlq.TriageChange{Status: ptrTo(dlq.StatusResolved)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.UpdateGroupTriage(ctx, bad.ID, dlq.TriageChange{Status: ptrTo(dlq.StatusKnown)}); err != nil {
		t.Fatal(err)
	}
	// Seen again, the same messages do not reopen it.
	deadLetter(t, s, 1, 2, "Timeout", "after 30 s", at.Add(time.Second))
	if g := oneGroup(t, s, "Timeout"); g.Triage.Status != dlq.StatusResolved {
		t.Fatalf("the same dead letters seen again reopened it: %+v", g.Triage)
	}
	deadLetter(t, s, 4, 6, "Timeout", "after 31 s", at.Add(time.Minute))
	deadLetter(t, s, 7, 7, "Bad", "bad input", at.Add(time.Minute))
	g = oneGroup(t, s, "Timeout")
	if g.Triage.Status != dlq.StatusNew || g.Triage.ReopenedAt == nil || g.Triage.StatusChangedAt == nil {
		t.Errorf("after new dead letters: %+v; want new, reopened", g.Triage)
	}
	if b := oneGroup(t, s, "Bad"); b.Triage.Status != dlq.StatusKnown || b.Triage.ReopenedAt != nil {
		t.Errorf("known group: %+v; want it to stay known", b.Triage)
	}
	rs, err := s.UnauditedReopenings(ctx)
	if err != nil || len(rs) != 1 || rs[0].GroupKey != g.ID || rs[0].Added != 3 || rs[0].Name != "Timeout · after <n> s" {
		t.Fatalf("reopenings %+v, %v: want Timeout's with 3 added", rs, err)
	}
	if err := s.MarkReopeningAudited(ctx, rs[0].ID); err != nil {
		t.Fatal(err)
	}
	if rs, err := s.UnauditedReopenings(ctx); err != nil || len(rs) != 0 {
		t.Errorf("after marking: %+v, %v", rs, err)
	}
}

// TestAlertTables: the new-group cursor, the oldest present dead letter,
// webhooks and deliveries.
func TestAlertTables(t *testing.T) { store.ForEachEngine(t, testAlertTables) }

func testAlertTables(t *testing.T, engine string) {
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	s := openWithQueueOn(t, engine, at)
	ctx := t.Context()
	deadLetter(t, s, 1, 3, "Timeout", "after 30 s", at)
	keys, err := s.TakeNewGroups(ctx)
	if err != nil || len(keys) != 1 {
		t.Fatalf("first take %v, %v: want the one group", keys, err)
	}
	if again, err := s.TakeNewGroups(ctx); err != nil || len(again) != 0 {
		t.Errorf("second take %v, %v: want none", again, err)
	}
	deadLetter(t, s, 4, 4, "Bad", "bad input", at)
	if more, err := s.TakeNewGroups(ctx); err != nil || len(more) != 1 || more[0] == keys[0] {
		t.Errorf("after a new failure: %v, %v", more, err)
	}
	// The oldest present: seq 1 goes, seq 2 (enqueued at+2s) is the oldest.
	if _, err := s.ApplyPage(ctx, dlq.Page{Entity: "orders", SubQueue: dlq.SubQueueDeadLetter, From: 1, Through: 1, SeenAt: at}); err != nil {
		t.Fatal(err)
	}
	old, err := s.OldestPresent(ctx, []string{keys[0], "nosuchgroup"})
	if err != nil || len(old) != 1 || !old[keys[0]].Equal(enqueueBase.Add(2*time.Second)) {
		t.Errorf("oldest present %v, %v; want %v", old, err, enqueueBase.Add(2*time.Second))
	}

	w, err := s.AddAlertWebhook(ctx, alert.Webhook{Name: "ops", URL: "https://hooks.example/T1/B2/secret", Host: "hooks.example",
		Format: alert.FormatSlack, Events: []alert.Event{alert.EventNewGroup, alert.EventUntriaged}, UntriagedAfter: 30 * time.Minute,
		BaseURL: "https://dlq.example", CreatedBy: "local"})
	if err != nil || w.ID == 0 {
		t.Fatalf("add webhook %+v, %v", w, err)
	}
	ws, err := s.AlertWebhooks(ctx)
	if err != nil || len(ws) != 1 || ws[0].URL != w.URL || ws[0].UntriagedAfter != 30*time.Minute || len(ws[0].Events) != 2 {
		t.Fatalf("webhooks %+v, %v", ws, err)
	}
	if _, err := s.RemoveAlertWebhook(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RemoveAlertWebhook(ctx, w.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second removal: %v", err)
	}
	if ws, _ := s.AlertWebhooks(ctx); len(ws) != 0 {
		t.Errorf("after removal: %+v", ws)
	}

	d, err := s.AddAlertDelivery(ctx, alert.Delivery{At: at, Webhook: "ui:1", WebhookName: "ops", Host: "hooks.example",
		Format: alert.FormatSlack, Event: alert.EventNewGroup, Subject: keys[0], Title: "New", StatusCode: 200, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddAlertDelivery(ctx, alert.Delivery{At: at.Add(time.Hour), Webhook: "ui:1", Event: alert.EventUntriaged,
		Subject: keys[0], Error: "no answer", Attempts: 3}); err != nil {
		t.Fatal(err)
	}
	since, err := s.AlertDeliveriesSince(ctx, at.Add(time.Minute))
	if err != nil || len(since) != 1 || since[0].Error != "no answer" || since[0].StatusCode != 0 {
		t.Errorf("since: %+v, %v", since, err)
	}
	all, err := s.AlertDeliveries(ctx, 10)
	if err != nil || len(all) != 2 || all[1].ID != d.ID || !all[1].OK() || all[0].OK() {
		t.Errorf("history: %+v, %v", all, err)
	}
}

func ptrTo[T any](v T) *T { return &v }
