package amqpserver_test

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

// TestAutoForwarding drives auto-forwarding through the SDK: a forward to a
// disabled queue lands in the source's transfer dead-letter queue, which a
// SubQueueTransfer receiver drains; a working forward shows up in
// the target with EnqueuedSequenceNumber; a dead-lettered message forwarded
// by ForwardDeadLetteredMessagesTo carries DeadLetterSource.
func TestAutoForwarding(t *testing.T) {
	e := startEmulator(t, func(ns *broker.Namespace) {
		createQueue(t, ns, "off", nil)
		createQueue(t, ns, "dst", nil)
		createQueue(t, ns, "to-off", func(p *broker.QueueProperties) { p.ForwardTo = "off" })
		createQueue(t, ns, "to-dst", func(p *broker.QueueProperties) { p.ForwardTo = "dst" })
		createQueue(t, ns, "dl-src", func(p *broker.QueueProperties) { p.ForwardDeadLetteredMessagesTo = "dst" })
		qi, err := ns.Queue("off")
		if err != nil {
			t.Fatal(err)
		}
		qi.Properties.Status = broker.StatusDisabled
		if _, err := ns.UpdateQueue("off", qi.Properties); err != nil {
			t.Fatal(err)
		}
	})
	ctx := testCtx(t)

	// Forward to a disabled queue → the source's transfer DLQ.
	send(t, ctx, e.sender(t, "to-off"), &azservicebus.Message{Body: []byte("stuck"), ApplicationProperties: map[string]any{"k": "v"}})
	tdlq := e.receiver(t, "to-off", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueTransfer})
	got := receiveN(t, tdlq, 1)[0]
	if string(got.Body) != "stuck" || got.ApplicationProperties["k"] != "v" {
		t.Fatalf("TDLQ message = %q %v", got.Body, got.ApplicationProperties)
	}
	if got.DeadLetterReason == nil || *got.DeadLetterReason != "TransferToEntityFailed" || got.DeadLetterErrorDescription == nil {
		t.Fatalf("DeadLetterReason = %v", got.DeadLetterReason)
	}
	t.Logf("TDLQ description: %s", *got.DeadLetterErrorDescription)
	if err := tdlq.CompleteMessage(ctx, got, nil); err != nil {
		t.Fatal(err)
	}
	if qi, err := e.ns.Queue("to-off"); err != nil || qi.Counts.TransferDeadLetter != 0 || qi.Counts.Total != 0 {
		t.Fatalf("to-off counts = %+v, %v", qi.Counts, err)
	}

	// A working forward: the message is in dst, not in to-dst.
	send(t, ctx, e.sender(t, "to-dst"), &azservicebus.Message{Body: []byte("moved")})
	if peeked, err := e.receiver(t, "to-dst", nil).PeekMessages(ctx, 10, nil); err != nil || len(peeked) != 0 {
		t.Fatalf("to-dst peek = %d messages, %v", len(peeked), err)
	}
	peeked, err := e.receiver(t, "dst", nil).PeekMessages(ctx, 10, nil)
	if err != nil || len(peeked) != 1 {
		t.Fatalf("dst peek = %d messages, %v", len(peeked), err)
	}
	p := peeked[0]
	if string(p.Body) != "moved" || p.EnqueuedSequenceNumber == nil || *p.EnqueuedSequenceNumber != 1 || p.DeadLetterSource != nil {
		t.Fatalf("dst message = %q seq %d enqueued seq %v", p.Body, *p.SequenceNumber, p.EnqueuedSequenceNumber)
	}

	// Dead-letter forwarding: the dead-lettered message arrives in dst with
	// DeadLetterSource and its reason.
	send(t, ctx, e.sender(t, "dl-src"), &azservicebus.Message{Body: []byte("bad")})
	r := e.receiver(t, "dl-src", nil)
	m := receiveN(t, r, 1)[0]
	if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: strPtr("Poison")}); err != nil {
		t.Fatal(err)
	}
	peeked, err = e.receiver(t, "dst", nil).PeekMessages(ctx, 10, nil)
	if err != nil || len(peeked) != 2 {
		t.Fatalf("dst peek = %d messages, %v", len(peeked), err)
	}
	p = peeked[1]
	if string(p.Body) != "bad" || p.DeadLetterSource == nil || *p.DeadLetterSource != "dl-src" || p.DeadLetterReason == nil || *p.DeadLetterReason != "Poison" {
		t.Fatalf("forwarded dead letter = %q source %v reason %v", p.Body, p.DeadLetterSource, p.DeadLetterReason)
	}
}
