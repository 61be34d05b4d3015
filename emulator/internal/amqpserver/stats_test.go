package amqpserver_test

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/internal/amqpserver"
)

// TestStatsThroughSDK: the operation counters see what the SDK asks for, per
// entity path as addressed.
func TestStatsThroughSDK(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) {
		createQueue(t, ns, "Orders", nil)
		if _, err := ns.CreateTopic("payments", broker.DefaultTopicProperties()); err != nil {
			t.Fatal(err)
		}
		if _, err := ns.CreateSubscription("payments", "audit", broker.DefaultSubscriptionProperties()); err != nil {
			t.Fatal(err)
		}
	})
	ctx := testCtx(t)
	if st := env.srv.Stats(); st.Totals != (amqpserver.OpCounts{}) || len(st.Entities) != 0 {
		t.Fatalf("stats before any operation: %+v", st)
	}
	s := env.sender(t, "Orders")
	batch, err := s.NewMessageBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"a", "b"} {
		if err := batch.AddMessage(&azservicebus.Message{Body: []byte(b)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
		t.Fatal(err)
	}
	send(t, ctx, s, &azservicebus.Message{Body: []byte("c")})

	r := env.receiver(t, "orders", nil)
	dlq := env.receiver(t, "orders", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if got := peekAll(t, ctx, dlq); len(got) != 0 { // one request, nothing found
		t.Fatalf("dlq peek: %d", len(got))
	}
	if got, err := r.PeekMessages(ctx, 10, nil); err != nil || len(got) != 3 {
		t.Fatalf("peek: %d %v", len(got), err)
	}
	msgs := receiveN(t, r, 3)
	if err := r.CompleteMessage(ctx, msgs[0], nil); err != nil {
		t.Fatal(err)
	}
	if err := r.AbandonMessage(ctx, msgs[1], nil); err != nil {
		t.Fatal(err)
	}
	if err := r.DeferMessage(ctx, msgs[2], nil); err != nil {
		t.Fatal(err)
	}
	deferred, err := r.ReceiveDeferredMessages(ctx, []int64{*msgs[2].SequenceNumber}, nil)
	if err != nil || len(deferred) != 1 {
		t.Fatalf("receive deferred: %d %v", len(deferred), err)
	}
	if err := r.CompleteMessage(ctx, deferred[0], nil); err != nil { // through $management
		t.Fatal(err)
	}
	if _, err := env.sender(t, "payments").ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("later")}}, time.Now().Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}

	st := env.srv.Stats()
	want := amqpserver.OpCounts{Peek: 2, PeekedMessages: 3, Receive: 4, Send: 4, Settle: 4, Management: 5}
	got := st.Totals
	got.ManagementOps = amqpserver.ManagementOpCounts{}
	if got != want {
		t.Errorf("totals %+v, want %+v", got, want)
	}
	wantOps := amqpserver.ManagementOpCounts{PeekMessage: 2, ReceiveBySequenceNumber: 1, UpdateDisposition: 1, ScheduleMessage: 1}
	if st.Totals.ManagementOps != wantOps {
		t.Errorf("management ops %+v, want %+v", st.Totals.ManagementOps, wantOps)
	}
	if o := st.Entity("ORDERS/$DeadLetterQueue"); o.Peek != 1 || o.PeekedMessages != 0 || o.Management != 1 {
		t.Errorf("orders/$deadletterqueue %+v", o)
	}
	if o := st.Entities["orders"]; o.Peek != 1 || o.PeekedMessages != 3 || o.Send != 3 || o.Receive != 4 || o.Settle != 4 {
		t.Errorf("orders %+v", o)
	}
	if o := st.Entities["payments"]; o.Send != 1 || o.ManagementOps.ScheduleMessage != 1 {
		t.Errorf("payments %+v", o)
	}
	if len(st.Entities) != 3 {
		t.Errorf("entities %v", st.Entities)
	}

	// Steady state: nothing runs, nothing is counted.
	env.srv.ResetStats()
	if st := env.srv.Stats(); st.Totals.Peek != 0 || st.Totals.Management != 0 || len(st.Entities) != 0 {
		t.Fatalf("after reset: %+v", st)
	}
}
