package replay_test

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/replay"
)

// A deferred message replayed to its own queue through the engine (as the
// inventory's Replay… does): the copy arrives once, the deferred original
// is completed, and the catalog no longer lists it as deferred.
func TestReplayDeferredToItsQueue(t *testing.T) {
	e := newEnv(t, queues("stock"), envOptions{})
	e.send("stock", &azservicebus.Message{MessageID: ptr("sku-1"), Body: []byte(`{"sku":1}`)},
		&azservicebus.Message{MessageID: ptr("sku-2"), Body: []byte(`{"sku":2}`)})
	r, err := e.sb.NewReceiverForQueue("stock", nil)
	if err != nil {
		t.Fatal(err)
	}
	var ms []*azservicebus.ReceivedMessage
	for len(ms) < 2 {
		got, err := r.ReceiveMessages(t.Context(), 2-len(ms), nil)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		ms = append(ms, got...)
	}
	for _, m := range ms {
		if err := r.DeferMessage(t.Context(), m, nil); err != nil {
			t.Fatal(err)
		}
	}
	all := e.cataloged(dlq.Filter{Entity: "stock", State: dlq.StateDeferred}, 2)
	ids := all[:1]
	if rec, err := e.st.GetMessage(t.Context(), ids[0]); err != nil || rec.MessageID != "sku-1" {
		ids = all[1:]
	}

	plan, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}})
	if plan.Summary.Deferred != 1 || len(plan.Targets) != 1 || plan.Targets[0].Path != "stock" || plan.Targets[0].FanOut {
		t.Fatalf("plan %+v", plan)
	}
	if j := e.finished(job.ID, 20*time.Second); j.Status != replay.StatusCompleted || j.Counts.Completed != 1 {
		t.Fatalf("job %+v", j)
	}
	got := e.receiveAll("stock", "", 0)
	if len(got) != 1 || string(got[0].Body) != `{"sku":1}` || got[0].MessageID != "sku-1/dlqdash-"+itoa(job.ID) {
		t.Fatalf("copies in stock: %d (%v), want exactly one copy", len(got), messageIDs(got))
	}
	// Nothing deferred is left in the broker, nor in the catalog once it
	// has read the queue again.
	if _, err := r.ReceiveDeferredMessages(t.Context(), []int64{*ms[0].SequenceNumber}, nil); err == nil {
		t.Error("the deferred original can still be received")
	}
	// The other one by a filter (the API's {"filter": {"state": "deferred", ...}}),
	// discarded.
	_, job = e.submit(replay.Request{Action: replay.ActionDiscard, Reason: "stale stock update",
		Selection: replay.Selection{Filter: &dlq.Filter{Entity: "stock", State: dlq.StateDeferred}}})
	if j := e.finished(job.ID, 20*time.Second); j.Status != replay.StatusCompleted || j.Counts.Completed != 1 || j.Total != 1 {
		t.Fatalf("discard job %+v", j)
	}
	if n := len(e.peekAll("stock", 0)); n != 0 {
		t.Errorf("%d messages left in stock, want none", n)
	}
	waitFor(t, "the deferred messages to leave the inventory", 20*time.Second, func() bool {
		recs, _, err := e.st.ListWaiting(t.Context(), dlq.StateDeferred, 10, "")
		return err == nil && len(recs) == 0
	})
	var resolved int
	if err := e.log.Scan(t.Context(), audit.Filter{Action: audit.ActionDeferredResolved}, func(en audit.Entry) error {
		if slices.Equal(en.MessageIDs, []string{itoa(ids[0])}) && strings.Contains(string(en.Params), `"action":"replay"`) {
			resolved++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if resolved != 1 {
		t.Errorf("%d deferred_resolved replay entries for the message, want 1", resolved)
	}
}

// CancelScheduled through the engine and the real SDK: the message is gone
// from the broker and the catalog, audited with the actor, the reason and
// the message; one that is not scheduled is skipped; a refusal of Allow
// cancels nothing.
func TestCancelScheduledMessages(t *testing.T) {
	e := newEnv(t, queues("email"), envOptions{})
	s, err := e.sb.NewSender("email", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	at := time.Now().Add(2 * time.Hour)
	seqs, err := s.ScheduleMessages(t.Context(), []*azservicebus.Message{
		{MessageID: ptr("remind-1"), Body: []byte("a")}, {MessageID: ptr("remind-2"), Body: []byte("b")}}, at, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := e.cataloged(dlq.Filter{Entity: "email", State: dlq.StateScheduled}, 2)
	e.send("email", &azservicebus.Message{MessageID: ptr("now"), Body: []byte("c")})
	r, err := e.sb.NewReceiverForQueue("email", nil)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := r.ReceiveMessages(t.Context(), 1, nil)
	if err != nil || len(ms) != 1 {
		t.Fatalf("receive: %v", err)
	}
	if err := r.DeferMessage(t.Context(), ms[0], nil); err != nil {
		t.Fatal(err)
	}
	deferred := e.cataloged(dlq.Filter{Entity: "email", State: dlq.StateDeferred}, 1)
	ctx := audit.WithActor(t.Context(), "admin-ann")

	// Refusals first: no reason; a refusal by the access rules.
	var inv *replay.InvalidError
	if _, err := e.engine.CancelScheduled(ctx, replay.CancelRequest{Selection: replay.Selection{IDs: ids[:1]}}); !errors.As(err, &inv) || inv.Param != "reason" {
		t.Fatalf("without a reason: %v", err)
	}
	refused := errors.New("not an admin there")
	if _, err := e.engine.CancelScheduled(ctx, replay.CancelRequest{Selection: replay.Selection{IDs: ids[:1]}, Reason: "r",
		Allow: func(ns []string) error { return refused }}); !errors.Is(err, refused) {
		t.Fatalf("refused by Allow: %v", err)
	}
	var pre *replay.PreconditionError
	if _, err := e.engine.CancelScheduled(ctx, replay.CancelRequest{Selection: replay.Selection{IDs: deferred}, Reason: "r"}); !errors.As(err, &pre) {
		t.Fatalf("cancelling a deferred message: %v, want a precondition error", err)
	}

	var asked []string
	res, err := e.engine.CancelScheduled(ctx, replay.CancelRequest{Selection: replay.Selection{IDs: []int64{ids[0], deferred[0]}},
		Reason: "customer unsubscribed", Allow: func(ns []string) error { asked = ns; return nil }})
	if err != nil {
		t.Fatalf("CancelScheduled: %v", err)
	}
	res0ns := res.Cancelled[0].Namespace
	if len(res.Cancelled) != 1 || res.Cancelled[0].ID != ids[0] || len(res.Skipped) != 1 || res.Skipped[0].Record.ID != deferred[0] {
		t.Fatalf("result %+v", res)
	}
	if len(asked) != 1 || asked[0] != res.Cancelled[0].Namespace {
		t.Errorf("Allow asked about %q, want the messages' one namespace", asked)
	}
	// The broker holds the other scheduled message only (and the
	// deferred one).
	peeked, err := r.PeekMessages(t.Context(), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	var scheduled []int64
	for _, m := range peeked {
		if m.State == azservicebus.MessageStateScheduled {
			scheduled = append(scheduled, *m.SequenceNumber)
		}
	}
	if !slices.Equal(scheduled, seqs[1:]) {
		t.Fatalf("scheduled in the broker: %v, want %v", scheduled, seqs[1:])
	}
	waitFor(t, "the cancelled message to leave the scheduled inventory", 20*time.Second, func() bool {
		recs, _, err := e.st.ListWaiting(t.Context(), dlq.StateScheduled, 10, "")
		return err == nil && len(recs) == 1 && recs[0].ID == ids[1]
	})

	// By sequence number, as the application that scheduled it knows it.
	res, err = e.engine.CancelScheduled(ctx, replay.CancelRequest{Selection: replay.Selection{Entity: "email", SequenceNumbers: seqs[1:]}, Reason: "obsolete"})
	if err != nil || len(res.Cancelled) != 1 || res.Cancelled[0].ID != ids[1] {
		t.Fatalf("by sequence number: %+v, %v", res, err)
	}

	var entries []audit.Entry
	if err := e.log.Scan(t.Context(), audit.Filter{Action: audit.ActionScheduledCancelled}, func(en audit.Entry) error {
		entries = append(entries, en)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("%d scheduled_cancelled entries, want 2", len(entries))
	}
	var p struct {
		Namespace, Entity, Reason string
		SequenceNumbers           []int64 `json:"sequence_numbers"`
	}
	if err := json.Unmarshal(entries[0].Params, &p); err != nil {
		t.Fatal(err)
	}
	if en := entries[0]; en.Actor != "admin-ann" || en.Outcome != audit.OutcomeSucceeded || !slices.Equal(en.MessageIDs, []string{itoa(ids[0])}) ||
		p.Namespace != res0ns || p.Entity != "email" || p.Reason != "customer unsubscribed" || !slices.Equal(p.SequenceNumbers, seqs[:1]) {
		t.Errorf("audit entry %+v (params %s)", en, en.Params)
	}
}

// A replay to a topic says who receives the copies: each subscription by
// name, with what its rules take; the fan-out refusal names them too.
func TestFanOutListsSubscriptions(t *testing.T) {
	e := newEnv(t, func(ns *broker.Namespace) {
		if _, err := ns.CreateQueue("intake", broker.DefaultQueueProperties()); err != nil {
			panic(err)
		}
		if _, err := ns.CreateTopic("payments", broker.TopicProperties{}); err != nil {
			panic(err)
		}
		p := broker.SubscriptionProperties{LockDuration: 10 * time.Second}
		for _, s := range []string{"audit", "billing"} {
			if _, err := ns.CreateSubscription("payments", s, p); err != nil {
				panic(err)
			}
		}
		for name, r := range map[string]broker.Rule{
			"eu-cards": {Name: "eu", Kind: broker.FilterCorrelation, Correlation: &broker.CorrelationFilter{Properties: map[string]any{"region": "EU"}}},
			"eu-only":  {Name: "eu", Kind: broker.FilterSQL, SQLExpression: "region = 'eu'"},
			"placed":   {Name: "placed", Kind: broker.FilterCorrelation, Correlation: &broker.CorrelationFilter{Subject: "PaymentPlaced"}},
		} {
			if _, err := ns.CreateSubscription("payments", name, p, r); err != nil {
				panic(err)
			}
		}
	}, envOptions{})
	e.send("payments", &azservicebus.Message{MessageID: ptr("p-1"), Body: []byte("pay"), Subject: ptr("PaymentPlaced"),
		ApplicationProperties: map[string]any{"region": "US"}})
	e.deadLetter("payments", "audit", 1, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "payments/Subscriptions/audit", SubQueue: dlq.SubQueueDeadLetter}, 1)
	// What the publish delivered, before the replay.
	before := map[string]int{}
	for _, s := range []string{"billing", "eu-cards", "eu-only", "placed"} {
		before[s] = len(e.receiveAll("payments", s, 0))
	}

	plan, _, err := e.engine.Submit(t.Context(), replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Targets) != 1 || !plan.Targets[0].FanOut || !plan.Targets[0].SubscriptionsListed || len(plan.Targets[0].Subscriptions) != 5 {
		t.Fatalf("targets %+v", plan.Targets)
	}
	// The correlation filters are evaluated against the message (one
	// message: the whole selection); the SQL one is not.
	predicted := map[string]int{}
	for _, s := range plan.Targets[0].Subscriptions {
		if s.CopiesKnown {
			predicted[s.Name] = s.Copies
		} else {
			predicted[s.Name] = -1
		}
	}
	if want := map[string]int{"audit": 1, "billing": 1, "eu-cards": 0, "eu-only": -1, "placed": 1}; !maps.Equal(predicted, want) {
		t.Errorf("copies predicted %v, want %v", predicted, want)
	}
	words := strings.Join(plan.Warnings, "\n")
	for _, want := range []string{"every copy reaches audit, billing and placed", "a copy reaches eu-only when its filter matches it",
		"eu-cards receives none"} {
		if !strings.Contains(words, want) {
			t.Errorf("the warnings do not say %q:\n%s", want, words)
		}
	}
	_, _, err = e.engine.Submit(t.Context(), replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}})
	var pre *replay.PreconditionError
	if !errors.As(err, &pre) || !strings.Contains(err.Error(), "(audit, billing, eu-only and placed)") {
		t.Fatalf("without acknowledge_fan_out: %v, want the subscriptions named", err)
	}
	// Acknowledged, the copy goes where the plan said (the emulator
	// evaluates the rules itself).
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, AcknowledgeFanOut: true})
	if j := e.finished(job.ID, 20*time.Second); j.Status != replay.StatusCompleted {
		t.Fatalf("job %+v", j)
	}
	for s, want := range map[string]int{"audit": 1, "billing": 1, "eu-cards": 0, "placed": 1} {
		if got := len(e.receiveAll("payments", s, 0)); got != want {
			t.Errorf("%s received %d copies, the plan said %d", s, got, want)
		}
	}
	if got := len(e.receiveAll("payments", "eu-only", 0)); got != 0 {
		t.Errorf("eu-only received %d copies of a US message", got)
	}
	if before["placed"] != 1 || before["billing"] != 1 || before["eu-cards"] != 0 {
		t.Errorf("the publish delivered %v", before)
	}

	// A queue's message sent to the topic as its destination: not the
	// fan-out guard (it was asked for), but the same words.
	e.send("intake", &azservicebus.Message{MessageID: ptr("i-1"), Body: []byte("in")})
	e.deadLetter("intake", "", 1, "Boom")
	qids := e.cataloged(dlq.Filter{Entity: "intake", SubQueue: dlq.SubQueueDeadLetter}, 1)
	plan, _, err = e.engine.Submit(t.Context(), replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: qids}, Destination: "payments", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Targets[0].FanOut || !strings.Contains(strings.Join(plan.Warnings, "\n"), "copies sent to the topic payments: every copy reaches audit and billing") {
		t.Errorf("plan to a topic destination: %+v", plan)
	}
}

// A deferred message whose copy cannot be sent stays deferred: the engine
// completes it only after a successful send. Here the destination refuses
// sends (SendDisabled): the job pauses, saying why, with the message
// pending and still deferred in the broker; once the destination takes
// messages again, the resumed job sends the copy once and then completes
// the original.
func TestDeferredStaysWhenItsCopyCannotBeSent(t *testing.T) {
	e := newEnv(t, queues("stock", "archive"), envOptions{giveUp: time.Second})
	e.send("stock", &azservicebus.Message{MessageID: ptr("sku-9"), Body: []byte("nine")})
	r, err := e.sb.NewReceiverForQueue("stock", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	ms, err := r.ReceiveMessages(t.Context(), 1, nil)
	if err != nil || len(ms) != 1 {
		t.Fatalf("receive: %v", err)
	}
	if err := r.DeferMessage(t.Context(), ms[0], nil); err != nil {
		t.Fatal(err)
	}
	ids := e.cataloged(dlq.Filter{Entity: "stock", State: dlq.StateDeferred}, 1)
	setStatus := func(s broker.EntityStatus) {
		t.Helper()
		info, err := e.ns.Queue("archive")
		if err != nil {
			t.Fatal(err)
		}
		p := info.Properties
		p.Status = s
		if _, err := e.ns.UpdateQueue("archive", p); err != nil {
			t.Fatal(err)
		}
	}
	setStatus(broker.StatusSendDisabled)

	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, Destination: "archive"})
	j := e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusPaused || j.Counts.Completed != 0 || j.Counts.Sent != 0 || j.Counts.Failed != 0 || j.Counts.Pending != 1 {
		t.Fatalf("job with a destination that refuses sends: %+v, want it paused, the message pending, nothing sent", j)
	}
	if !strings.Contains(j.PausedReason, "archive is disabled for sending") {
		t.Fatalf("paused_reason %q does not say why", j.PausedReason)
	}
	still := e.peekAll("stock", 0)
	if len(still) != 1 || still[0].State != azservicebus.MessageStateDeferred || *still[0].SequenceNumber != *ms[0].SequenceNumber {
		t.Fatalf("stock after the failed send: %d messages (%v), want the deferred original", len(still), still)
	}

	setStatus(broker.StatusActive)
	if _, err := e.engine.Resume(audit.WithActor(t.Context(), "tester"), job.ID); err != nil {
		t.Fatal(err)
	}
	if j := e.finished(job.ID, 30*time.Second); j.Status != replay.StatusCompleted || j.Counts.Completed != 1 || j.Flagged != 0 {
		items, _, _ := e.st.ListItems(t.Context(), job.ID, "", 10, "")
		t.Fatalf("the resumed job %+v: %+v", j, items)
	}
	if got := e.receiveAll("archive", "", 0); len(got) != 1 || string(got[0].Body) != "nine" {
		t.Fatalf("%d copies in archive, want 1", len(got))
	}
	if n := len(e.peekAll("stock", 0)); n != 0 {
		t.Errorf("%d messages left in stock after the second job", n)
	}
}

// A job that pauses while a deferred message is received (its destination
// keeps answering "server busy") gives the message back still deferred, so
// a resume right away (not a lock duration later) sends its copy once and
// completes it.
func TestDeferredGivenBackWhenTheJobPauses(t *testing.T) {
	e := newEnv(t, func(ns *broker.Namespace) {
		p := broker.DefaultQueueProperties()
		p.LockDuration = 5 * time.Minute // a lapse would not come within the test
		for _, q := range []string{"stock", "archive"} {
			if _, err := ns.CreateQueue(q, p); err != nil {
				panic(err)
			}
		}
	}, envOptions{giveUp: 500 * time.Millisecond})
	e.send("stock", &azservicebus.Message{MessageID: ptr("sku-5"), Body: []byte("five")})
	r, err := e.sb.NewReceiverForQueue("stock", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	ms, err := r.ReceiveMessages(t.Context(), 1, nil)
	if err != nil || len(ms) != 1 {
		t.Fatalf("receive: %v", err)
	}
	if err := r.DeferMessage(t.Context(), ms[0], nil); err != nil {
		t.Fatal(err)
	}
	ids := e.cataloged(dlq.Filter{Entity: "stock", State: dlq.StateDeferred}, 1)
	e.ns.InjectServerBusy("archive", 1_000_000, time.Time{})

	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, Destination: "archive"})
	j := e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusPaused || j.Counts.Completed != 0 {
		t.Fatalf("job with a busy destination: %+v, want paused", j)
	}
	still := e.peekAll("stock", 0)
	if len(still) != 1 || still[0].State != azservicebus.MessageStateDeferred {
		t.Fatalf("stock while paused: %d messages, want the deferred original", len(still))
	}
	e.ns.ClearFaults()
	start := time.Now()
	if _, err := e.engine.Resume(audit.WithActor(t.Context(), "tester"), job.ID); err != nil {
		t.Fatal(err)
	}
	j = e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 1 {
		items, _, _ := e.st.ListItems(t.Context(), job.ID, "", 10, "")
		t.Fatalf("resumed job %+v: %+v", j, items)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("the resume took %s: it waited for a lock instead of finding the message given back", d)
	}
	if got := e.receiveAll("archive", "", 0); len(got) != 1 {
		t.Fatalf("%d copies in archive, want 1", len(got))
	}
	if n := len(e.peekAll("stock", 0)); n != 0 {
		t.Errorf("%d messages left in stock", n)
	}
}
