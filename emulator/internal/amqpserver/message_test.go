package amqpserver_test

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

// TestMessageFieldsRoundTrip sends every settable field and checks it comes back, then
// abandons and defers with typed properties to modify (link and management paths).
func TestMessageFieldsRoundTrip(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	ttl := 10 * time.Minute
	in := &azservicebus.Message{
		Body:                  []byte("payload"),
		MessageID:             strPtr("mid"),
		CorrelationID:         strPtr("cid"),
		Subject:               strPtr("subj"),
		ContentType:           strPtr("application/json"),
		To:                    strPtr("to"),
		ReplyTo:               strPtr("reply"),
		PartitionKey:          strPtr("pk"),
		TimeToLive:            &ttl,
		ApplicationProperties: map[string]any{"s": "v", "i": int64(42), "b": true, "f": 1.5},
	}
	send(t, ctx, env.sender(t, "q1"), in)
	r := env.receiver(t, "q1", nil)
	m := receiveN(t, r, 1)[0]
	checks := map[string][2]any{
		"message id":     {m.MessageID, "mid"},
		"correlation id": {deref(m.CorrelationID), "cid"},
		"subject":        {deref(m.Subject), "subj"},
		"content type":   {deref(m.ContentType), "application/json"},
		"to":             {deref(m.To), "to"},
		"reply to":       {deref(m.ReplyTo), "reply"},
		"partition key":  {deref(m.PartitionKey), "pk"},
		"prop s":         {m.ApplicationProperties["s"], "v"},
		"prop i":         {m.ApplicationProperties["i"], int64(42)},
		"prop b":         {m.ApplicationProperties["b"], true},
		"prop f":         {m.ApplicationProperties["f"], 1.5},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s: got %v (%T), want %v", name, c[0], c[0], c[1])
		}
	}
	if m.TimeToLive == nil || *m.TimeToLive != ttl {
		t.Errorf("ttl %v", m.TimeToLive)
	}
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := r.AbandonMessage(ctx, m, &azservicebus.AbandonMessageOptions{PropertiesToModify: map[string]any{
		"n": int64(7), "when": when, "flag": false, "s": "changed",
	}}); err != nil {
		t.Fatalf("abandon: %v", err)
	}
	m = receiveN(t, r, 1)[0]
	if m.ApplicationProperties["n"] != int64(7) || m.ApplicationProperties["flag"] != false || m.ApplicationProperties["s"] != "changed" {
		t.Errorf("after abandon: %v", m.ApplicationProperties)
	}
	if got, ok := m.ApplicationProperties["when"].(time.Time); !ok || !got.Equal(when) {
		t.Errorf("when: %v", m.ApplicationProperties["when"])
	}
	// Defer on the link with properties, then abandon the deferred message via
	// $management: it stays deferred and its delivery count grows.
	if err := r.DeferMessage(ctx, m, &azservicebus.DeferMessageOptions{PropertiesToModify: map[string]any{"deferred": "yes"}}); err != nil {
		t.Fatalf("defer: %v", err)
	}
	got, err := r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive deferred: %v %v", got, err)
	}
	d := got[0]
	if d.ApplicationProperties["deferred"] != "yes" {
		t.Errorf("deferred props %v", d.ApplicationProperties)
	}
	if err := r.AbandonMessage(ctx, d, nil); err != nil {
		t.Fatalf("abandon deferred: %v", err)
	}
	got, err = r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
	if err != nil || len(got) != 1 || got[0].DeliveryCount <= d.DeliveryCount {
		t.Fatalf("deferred after abandon: %v %v", got, err)
	}
	if err := r.DeadLetterMessage(ctx, got[0], &azservicebus.DeadLetterOptions{Reason: strPtr("via-mgmt"), ErrorDescription: strPtr("desc")}); err != nil {
		t.Fatalf("dead-letter deferred: %v", err)
	}
	dlq := env.receiver(t, "q1", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	dl, err := dlq.PeekMessages(ctx, 5, nil)
	if err != nil || len(dl) != 1 || deref(dl[0].DeadLetterReason) != "via-mgmt" || deref(dl[0].DeadLetterErrorDescription) != "desc" {
		t.Fatalf("DLQ after mgmt dead-letter: %v %v", dl, err)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
