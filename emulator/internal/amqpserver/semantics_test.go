package amqpserver_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/internal/amqpserver"
)

// manualClock is a broker clock that tests move by hand, so that time-driven
// behaviour (TTL, duplicate-detection windows) is tested without waiting.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// startWithClock is startEmulator with a broker on a manual clock; the
// server's ticker is slowed down so that the test decides when Tick runs.
func startWithClock(t *testing.T, setup func(ns *broker.Namespace)) (*testEnv, *manualClock) {
	t.Helper()
	clk := &manualClock{now: time.Now()}
	ns := broker.New(broker.Options{Now: clk.Now})
	setup(ns)
	srv := amqpserver.New(amqpserver.Options{Namespace: ns, Logger: testLogger(), TickInterval: time.Hour})
	connStr, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("start emulator: %v", err)
	}
	client := newClient(t, connStr)
	env := &testEnv{srv: srv, ns: ns, client: client, conn: connStr}
	t.Cleanup(func() {
		_ = client.Close(context.Background())
		_ = srv.Close()
	})
	return env, clk
}

func peekAll(t *testing.T, ctx context.Context, r *azservicebus.Receiver) []*azservicebus.ReceivedMessage {
	t.Helper()
	var out []*azservicebus.ReceivedMessage
	from := int64(1)
	for {
		page, err := r.PeekMessages(ctx, 100, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
		if err != nil {
			t.Fatalf("peek: %v", err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		from = *page[len(page)-1].SequenceNumber + 1
	}
}

// The replay engine relies on this: a copy sent with the original's
// MessageID inside the window is silently dropped, one with a derived
// MessageID is not, and the window ends.
func TestDuplicateDetectionThroughSDK(t *testing.T) {
	env, clk := startWithClock(t, func(ns *broker.Namespace) {
		createQueue(t, ns, "dedup", func(p *broker.QueueProperties) {
			p.RequiresDuplicateDetection = true
			p.DuplicateDetectionHistoryTimeWindow = 10 * time.Minute
		})
	})
	ctx := testCtx(t)
	s := env.sender(t, "dedup")
	send(t, ctx, s,
		&azservicebus.Message{MessageID: strPtr("order-1"), Body: []byte("first")},
		&azservicebus.Message{MessageID: strPtr("order-1"), Body: []byte("duplicate, dropped")},
		&azservicebus.Message{MessageID: strPtr("order-1:replay-7"), Body: []byte("derived id, kept")},
	)
	clk.Advance(11 * time.Minute)
	env.ns.Tick()
	send(t, ctx, s, &azservicebus.Message{MessageID: strPtr("order-1"), Body: []byte("after the window")})

	r := env.receiver(t, "dedup", nil)
	var got []string
	for _, m := range peekAll(t, ctx, r) {
		got = append(got, string(m.Body))
	}
	want := []string{"first", "derived id, kept", "after the window"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("queue holds %q, want %q", got, want)
	}
}

func TestTTLExpiryThroughSDK(t *testing.T) {
	env, clk := startWithClock(t, func(ns *broker.Namespace) {
		createQueue(t, ns, "keep", func(p *broker.QueueProperties) { p.DeadLetteringOnMessageExpiration = true })
		createQueue(t, ns, "drop", nil)
	})
	ctx := testCtx(t)
	ttl := time.Minute
	for _, q := range []string{"keep", "drop"} {
		send(t, ctx, env.sender(t, q),
			&azservicebus.Message{MessageID: strPtr("short"), Body: []byte("expires"), TimeToLive: &ttl},
			&azservicebus.Message{MessageID: strPtr("long"), Body: []byte("stays")},
		)
	}
	clk.Advance(2 * time.Minute)
	env.ns.Tick()

	for _, q := range []string{"keep", "drop"} {
		main := peekAll(t, ctx, env.receiver(t, q, nil))
		if len(main) != 1 || main[0].MessageID != "long" {
			t.Errorf("%s: main queue holds %d messages, want only the one without TTL", q, len(main))
		}
	}
	dlq := env.receiver(t, "keep", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	msgs := receiveN(t, dlq, 1)
	m := msgs[0]
	if m.MessageID != "short" || m.DeadLetterReason == nil || *m.DeadLetterReason != "TTLExpiredException" {
		t.Errorf("DLQ message %v with reason %v, want short with TTLExpiredException", m.MessageID, m.DeadLetterReason)
	}
	if err := dlq.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	if left := peekAll(t, ctx, env.receiver(t, "drop", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})); len(left) != 0 {
		t.Errorf("queue without dead-lettering on expiration has %d messages in its DLQ", len(left))
	}
}

func TestCorrelationFilterThroughSDK(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) {
		if _, err := ns.CreateTopic("events", broker.DefaultTopicProperties()); err != nil {
			t.Fatal(err)
		}
		if _, err := ns.CreateSubscription("events", "all", broker.DefaultSubscriptionProperties()); err != nil {
			t.Fatal(err)
		}
		_, err := ns.CreateSubscription("events", "eu-refunds", broker.DefaultSubscriptionProperties(), broker.Rule{
			Name: "eu-refunds", Kind: broker.FilterCorrelation,
			Correlation: &broker.CorrelationFilter{Subject: "Refund", Properties: map[string]any{"region": "EU"}},
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	ctx := testCtx(t)
	send(t, ctx, env.sender(t, "events"),
		&azservicebus.Message{MessageID: strPtr("1"), Subject: strPtr("Refund"), ApplicationProperties: map[string]any{"region": "EU"}},
		&azservicebus.Message{MessageID: strPtr("2"), Subject: strPtr("Refund"), ApplicationProperties: map[string]any{"region": "US"}},
		&azservicebus.Message{MessageID: strPtr("3"), Subject: strPtr("Payment"), ApplicationProperties: map[string]any{"region": "EU"}},
	)
	ids := func(sub string) []string {
		r, err := env.client.NewReceiverForSubscription("events", sub, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(ctx)
		var out []string
		for _, m := range peekAll(t, ctx, r) {
			out = append(out, m.MessageID)
		}
		return out
	}
	if got := ids("all"); fmt.Sprint(got) != "[1 2 3]" {
		t.Errorf("subscription with the default rule got %v", got)
	}
	if got := ids("eu-refunds"); fmt.Sprint(got) != "[1]" {
		t.Errorf("correlation-filtered subscription got %v, want [1]", got)
	}
}

// TestExpiredDeferredThroughSDK: a deferred message past its TTL is still
// deferred in a peek; ReceiveDeferredMessages then dead-letters it (the queue
// says so) and returns nothing for it.
func TestExpiredDeferredThroughSDK(t *testing.T) {
	env, clk := startWithClock(t, func(ns *broker.Namespace) {
		createQueue(t, ns, "q", func(p *broker.QueueProperties) { p.DeadLetteringOnMessageExpiration = true })
	})
	ctx := testCtx(t)
	ttl := time.Minute
	send(t, ctx, env.sender(t, "q"), &azservicebus.Message{MessageID: strPtr("d"), Body: []byte("deferred"), TimeToLive: &ttl})
	r := env.receiver(t, "q", nil)
	m := receiveN(t, r, 1)[0]
	if err := r.DeferMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	env.ns.Tick()
	peeked := peekAll(t, ctx, r)
	if len(peeked) != 1 || peeked[0].State != azservicebus.MessageStateDeferred {
		t.Fatalf("peek after the TTL: %d messages, want the deferred one", len(peeked))
	}
	got, err := r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("ReceiveDeferredMessages = %d messages, %v; want none", len(got), err)
	}
	dlq := env.receiver(t, "q", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	d := receiveN(t, dlq, 1)[0]
	if d.MessageID != "d" || d.DeadLetterReason == nil || *d.DeadLetterReason != "TTLExpiredException" {
		t.Fatalf("DLQ message %q reason %v", d.MessageID, d.DeadLetterReason)
	}
}

// TestScheduledActivationTakesNewSequenceNumber: a scheduled message becomes
// active under the queue's next sequence number, enqueued at its due time;
// its scheduled number cancels it only while it is scheduled.
func TestScheduledActivationTakesNewSequenceNumber(t *testing.T) {
	env, clk := startWithClock(t, func(ns *broker.Namespace) { createQueue(t, ns, "q", nil) })
	ctx := testCtx(t)
	s := env.sender(t, "q")
	due := clk.Now().Add(time.Minute).Truncate(time.Millisecond)
	seqs, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("later")}}, due, nil)
	if err != nil {
		t.Fatal(err)
	}
	send(t, ctx, s, &azservicebus.Message{Body: []byte("now")})
	r := env.receiver(t, "q", nil)
	peeked := peekAll(t, ctx, r)
	if len(peeked) != 2 || *peeked[0].SequenceNumber != seqs[0] || peeked[0].State != azservicebus.MessageStateScheduled {
		t.Fatalf("peek before the due time: %d messages", len(peeked))
	}
	clk.Advance(time.Minute)
	env.ns.Tick()
	if err := s.CancelScheduledMessages(ctx, seqs, nil); err != nil {
		t.Fatal(err)
	}
	peeked = peekAll(t, ctx, r)
	if len(peeked) != 2 {
		t.Fatalf("peek after activation and a late cancel: %d messages, want 2", len(peeked))
	}
	m := peeked[1]
	if string(m.Body) != "later" || *m.SequenceNumber != seqs[0]+2 || m.State != azservicebus.MessageStateActive || !m.EnqueuedTime.Equal(due) {
		t.Fatalf("activated message %q seq %d (scheduled as %d) state %v enqueued %v (due %v)",
			m.Body, *m.SequenceNumber, seqs[0], m.State, m.EnqueuedTime, due)
	}
}

// TestTopicScheduledThroughSDK: messages scheduled on a topic stay there
// (counted as the topic's scheduled messages, invisible in subscriptions,
// cancellable on the topic sender) until they are due; then the rules
// decide which subscriptions get them, under new sequence numbers.
func TestTopicScheduledThroughSDK(t *testing.T) {
	env, clk := startWithClock(t, func(ns *broker.Namespace) {
		if _, err := ns.CreateTopic("events", broker.DefaultTopicProperties()); err != nil {
			t.Fatal(err)
		}
		if _, err := ns.CreateSubscription("events", "all", broker.DefaultSubscriptionProperties()); err != nil {
			t.Fatal(err)
		}
		_, err := ns.CreateSubscription("events", "eu", broker.DefaultSubscriptionProperties(), broker.Rule{
			Name: "eu", Kind: broker.FilterCorrelation, Correlation: &broker.CorrelationFilter{Properties: map[string]any{"region": "EU"}}})
		if err != nil {
			t.Fatal(err)
		}
	})
	ctx := testCtx(t)
	s := env.sender(t, "events")
	due := clk.Now().Add(time.Minute).Truncate(time.Millisecond)
	seqs, err := s.ScheduleMessages(ctx, []*azservicebus.Message{
		{MessageID: strPtr("eu"), ApplicationProperties: map[string]any{"region": "EU"}},
		{MessageID: strPtr("us"), ApplicationProperties: map[string]any{"region": "US"}},
		{MessageID: strPtr("cancelled"), ApplicationProperties: map[string]any{"region": "EU"}},
	}, due, nil)
	if err != nil || len(seqs) != 3 {
		t.Fatalf("schedule: %v %v", seqs, err)
	}
	if err := s.CancelScheduledMessages(ctx, seqs[2:], nil); err != nil {
		t.Fatal(err)
	}
	if ti, _ := env.ns.Topic("events"); ti.Counts.Scheduled != 2 {
		t.Fatalf("topic scheduled count %d, want 2", ti.Counts.Scheduled)
	}
	receiver := func(sub string) *azservicebus.Receiver {
		r, err := env.client.NewReceiverForSubscription("events", sub, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close(context.Background()) })
		return r
	}
	all, eu := receiver("all"), receiver("eu")
	for _, r := range []*azservicebus.Receiver{all, eu} {
		if got := peekAll(t, ctx, r); len(got) != 0 {
			t.Fatalf("a subscription shows %d messages before they are due", len(got))
		}
	}
	clk.Advance(time.Minute)
	env.ns.Tick()
	if ti, _ := env.ns.Topic("events"); ti.Counts.Scheduled != 0 {
		t.Fatalf("topic scheduled count %d after activation", ti.Counts.Scheduled)
	}
	got := peekAll(t, ctx, all)
	if len(got) != 2 || got[0].MessageID != "eu" || *got[0].SequenceNumber != 4 || got[1].MessageID != "us" || *got[1].SequenceNumber != 5 {
		t.Fatalf("all holds %d messages", len(got))
	}
	m := receiveN(t, eu, 1)[0]
	if m.MessageID != "eu" || *m.SequenceNumber != 4 || !m.EnqueuedTime.Equal(due) || m.State != azservicebus.MessageStateActive {
		t.Fatalf("eu got %q seq %d enqueued %v", m.MessageID, *m.SequenceNumber, m.EnqueuedTime)
	}
	if got := peekAll(t, ctx, eu); len(got) != 1 {
		t.Fatalf("eu holds %d messages, want only the EU one", len(got))
	}
}

// TestAutoDeleteOnIdleThroughSDK: a queue used only through the SDK lives as
// long as it is used (a peek counts) and goes, with its messages, once it
// has been idle for its AutoDeleteOnIdle.
func TestAutoDeleteOnIdleThroughSDK(t *testing.T) {
	env, clk := startWithClock(t, func(ns *broker.Namespace) {
		createQueue(t, ns, "temp", func(p *broker.QueueProperties) { p.AutoDeleteOnIdle = 5 * time.Minute })
	})
	ctx := testCtx(t)
	s := env.sender(t, "temp")
	send(t, ctx, s, &azservicebus.Message{Body: []byte("x")})
	clk.Advance(4 * time.Minute)
	env.ns.Tick()
	// The SDK's receiver attaches a receive link even to peek; an attached
	// receiver is ongoing activity, so close it (the emulator answers the
	// detach after releasing the receiver).
	r := env.receiver(t, "temp", nil)
	if got := peekAll(t, ctx, r); len(got) != 1 {
		t.Fatalf("peek: %d messages", len(got))
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(4 * time.Minute)
	env.ns.Tick()
	if _, err := env.ns.Queue("temp"); err != nil {
		t.Fatalf("queue deleted 4 minutes after a peek: %v", err)
	}
	clk.Advance(time.Minute)
	env.ns.Tick()
	if _, err := env.ns.Queue("temp"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("queue idle for 5 minutes: %v, want it deleted", err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("y")}, nil); err == nil {
		t.Fatal("send to the deleted queue succeeded")
	}
}
