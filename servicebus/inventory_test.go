package servicebus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/replay"
)

// CancelScheduled through the real SDK against the emulator: the cancelled
// scheduled messages are gone (a peek no longer shows them, and they never
// arrive), the others stay scheduled, and numbers that are not scheduled
// are ignored.
func TestCancelScheduled(t *testing.T) {
	e := newReplayEnv(t)
	q := e.queue(t, "email", nil)
	s, err := e.sb.NewSender(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	var seqs []int64
	for i := range 3 {
		at := time.Now().Add(time.Hour)
		got, err := s.ScheduleMessages(ctxFor(t), []*azservicebus.Message{{MessageID: ptr(fmt.Sprintf("remind-%d", i)), Body: []byte("later")}}, at, nil)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, got...)
	}
	e.srv.ResetStats()
	// The first two, with a number that was never scheduled.
	if err := e.c.CancelScheduled(ctxFor(t), q, []int64{seqs[0], seqs[1], 999_999}); err != nil {
		t.Fatalf("CancelScheduled: %v", err)
	}
	if n := e.srv.Stats().Totals.ManagementOps.CancelScheduledMessage; n != 1 {
		t.Errorf("%d cancel-scheduled-message requests, want 1", n)
	}
	r, err := e.sb.NewReceiverForQueue(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	peeked, err := r.PeekMessages(ctxFor(t), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	var left []int64
	for _, m := range peeked {
		if m.State != azservicebus.MessageStateScheduled {
			t.Errorf("message %d is %v, want scheduled", *m.SequenceNumber, m.State)
		}
		left = append(left, *m.SequenceNumber)
	}
	if !slices.Equal(left, seqs[2:]) {
		t.Fatalf("scheduled after the cancel: %v, want %v", left, seqs[2:])
	}
	// Again: nothing is scheduled under those numbers any more, which is
	// not an error (a retry after a failed answer is safe).
	if err := e.c.CancelScheduled(ctxFor(t), q, seqs[:2]); err != nil {
		t.Errorf("cancelling again: %v", err)
	}

	// A subscription holds no scheduled messages; a missing queue is
	// reported as missing.
	if err := e.c.CancelScheduled(ctxFor(t), "t/Subscriptions/s", seqs); err == nil {
		t.Error("CancelScheduled on a subscription succeeded")
	}
	if err := e.c.CancelScheduled(ctxFor(t), "nowhere", seqs); !errors.Is(err, dlq.ErrEntityNotFound) {
		t.Errorf("CancelScheduled on a missing queue: %v, want ErrEntityNotFound", err)
	}
}

// Subscriptions lists a topic's subscriptions with their rules through the
// SDK's admin client against the emulator's admin API, and leaves the rules
// out past rulesUpTo.
func TestSubscriptions(t *testing.T) {
	e := newReplayEnv(t)
	if _, err := e.ns.CreateTopic("orders", broker.DefaultTopicProperties()); err != nil {
		t.Fatal(err)
	}
	p := broker.DefaultSubscriptionProperties()
	mustSub := func(name string, rules ...broker.Rule) {
		t.Helper()
		if _, err := e.ns.CreateSubscription("orders", name, p, rules...); err != nil {
			t.Fatal(err)
		}
	}
	mustSub("billing") // the $Default rule: every message
	mustSub("eu-only", broker.Rule{Name: "eu", Kind: broker.FilterSQL, SQLExpression: "region = 'eu'"})
	mustSub("audit", broker.Rule{Name: "by-subject", Kind: broker.FilterCorrelation,
		Correlation: &broker.CorrelationFilter{Subject: "OrderPlaced", Properties: map[string]any{"tenant": "t1"}}})
	mustSub("paused", broker.Rule{Name: "off", Kind: broker.FilterFalse})

	subs, err := e.c.Subscriptions(ctxFor(t), "orders", replay.RulesUpTo)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]replay.Subscription{}
	for _, s := range subs {
		got[s.Name] = s
	}
	if len(subs) != 4 {
		t.Fatalf("subscriptions %+v, want 4", subs)
	}
	for name, want := range map[string]replay.Receives{"billing": replay.ReceivesAll, "eu-only": replay.ReceivesIfMatch,
		"audit": replay.ReceivesIfMatch, "paused": replay.ReceivesNone} {
		if r := got[name].Receives(); r != want {
			t.Errorf("%s receives %q (rules %+v), want %q", name, r, got[name].Rules, want)
		}
	}
	if r := got["eu-only"].Rules; len(r) != 1 || r[0].Kind != replay.RuleSQL || r[0].Filter != "region = 'eu'" {
		t.Errorf("eu-only's rules %+v", r)
	}
	if r := got["audit"].Rules; len(r) != 1 || r[0].Kind != replay.RuleCorrelation || r[0].Filter != `subject = "OrderPlaced" and tenant = "t1"` ||
		r[0].Correlation == nil || len(r[0].Correlation.System) != 1 || r[0].Correlation.System["subject"] != "OrderPlaced" ||
		len(r[0].Correlation.Properties) != 1 || r[0].Correlation.Properties["tenant"] != "t1" {
		t.Errorf("audit's rules %+v", r)
	}
	words := replay.FanOutWords("orders", subs)
	for _, want := range []string{"every copy reaches billing", "eu-only", "audit", "paused receives none"} {
		if !strings.Contains(words, want) {
			t.Errorf("fan-out words %q do not say %q", words, want)
		}
	}

	// Past rulesUpTo, names only.
	subs, err = e.c.Subscriptions(ctxFor(t), "orders", 3)
	if err != nil || len(subs) != 4 {
		t.Fatalf("%+v, %v", subs, err)
	}
	for _, s := range subs {
		if s.RulesRead || s.Receives() != replay.ReceivesUnknown {
			t.Errorf("%s: rules read past the limit: %+v", s.Name, s)
		}
	}
	if _, err := e.c.Subscriptions(ctxFor(t), "missing", replay.RulesUpTo); !errors.Is(err, dlq.ErrEntityNotFound) {
		t.Errorf("subscriptions of a missing topic: %v, want ErrEntityNotFound", err)
	}
}

// A topic holds its scheduled messages until they are due, so cancelling
// goes to the topic; a subscription's deferred messages are received by
// sequence number on the subscription. Both through the adapter, the real
// SDK and the emulator.
func TestTopicScheduledAndSubscriptionDeferred(t *testing.T) {
	e := newReplayEnv(t)
	if _, err := e.ns.CreateTopic("events", broker.DefaultTopicProperties()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ns.CreateSubscription("events", "audit", broker.DefaultSubscriptionProperties()); err != nil {
		t.Fatal(err)
	}
	s, err := e.sb.NewSender("events", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	seqs, err := s.ScheduleMessages(ctxFor(t), []*azservicebus.Message{{MessageID: ptr("later"), Body: []byte("x")}}, time.Now().Add(2*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.CancelScheduled(ctxFor(t), "events", seqs); err != nil {
		t.Fatalf("cancel on the topic: %v", err)
	}
	if err := s.SendMessage(ctxFor(t), &azservicebus.Message{MessageID: ptr("now"), Body: []byte("y")}, nil); err != nil {
		t.Fatal(err)
	}
	sr, err := e.sb.NewReceiverForSubscription("events", "audit", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close(context.Background())
	got, err := sr.ReceiveMessages(ctxFor(t), 1, nil)
	if err != nil || len(got) != 1 || got[0].MessageID != "now" {
		t.Fatalf("the subscription received %v, %v: want only the message sent now (the cancelled one never arrives)", got, err)
	}
	if err := sr.DeferMessage(ctxFor(t), got[0], nil); err != nil {
		t.Fatal(err)
	}
	r, err := e.c.OpenReceiver(ctxFor(t), "events/Subscriptions/audit", dlq.SubQueueMain)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	rec, err := r.ReceiveDeferred(ctxFor(t), []int64{*got[0].SequenceNumber})
	if err != nil || len(rec) != 1 || rec[0].MessageID != "now" {
		t.Fatalf("ReceiveDeferred on the subscription: %v, %v", rec, err)
	}
	if err := r.Complete(ctxFor(t), rec[0]); err != nil {
		t.Fatal(err)
	}
	// Past the cancelled message's due time, nothing more arrives.
	time.Sleep(2500 * time.Millisecond)
	wctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if more, _ := sr.ReceiveMessages(wctx, 1, nil); len(more) != 0 {
		t.Errorf("a cancelled scheduled message arrived: %q", more[0].MessageID)
	}
}
