package amqpserver_test

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

func TestSendReceiveComplete(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	s := env.sender(t, "q1")
	send(t, ctx, s,
		&azservicebus.Message{Body: []byte("one"), ApplicationProperties: map[string]any{"k": "v"}, MessageID: strPtr("m1")},
		&azservicebus.Message{Body: []byte("two")},
	)
	r := env.receiver(t, "q1", nil)
	msgs := receiveN(t, r, 2)
	if string(msgs[0].Body) != "one" || string(msgs[1].Body) != "two" {
		t.Fatalf("bodies: %q %q", msgs[0].Body, msgs[1].Body)
	}
	m := msgs[0]
	if m.MessageID != "m1" || m.ApplicationProperties["k"] != "v" {
		t.Errorf("message id %q, props %v", m.MessageID, m.ApplicationProperties)
	}
	if m.SequenceNumber == nil || *m.SequenceNumber != 1 || *msgs[1].SequenceNumber != 2 {
		t.Errorf("sequence numbers %v %v", m.SequenceNumber, msgs[1].SequenceNumber)
	}
	if m.DeliveryCount != 1 {
		t.Errorf("delivery count %d, want 1", m.DeliveryCount)
	}
	if m.LockedUntil == nil || m.EnqueuedTime == nil || m.LockedUntil.Before(*m.EnqueuedTime) {
		t.Errorf("locked until %v, enqueued %v", m.LockedUntil, m.EnqueuedTime)
	}
	if m.LockToken == [16]byte{} {
		t.Error("no lock token")
	}
	for _, m := range msgs {
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatalf("complete: %v", err)
		}
	}
	waitFor(t, "queue to be empty", func() bool {
		qi, err := env.ns.Queue("q1")
		return err == nil && qi.Counts.Active == 0
	})
}
