package amqpserver_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

// These tests pin behaviour the azservicebus v1.11.0 live tests expect of
// the service (scripts/sdk-suite runs them against the emulator).

// A message sent without a message-id gets one from the broker
// (Test_Sender_MessageID, TestSender_SendAMQPMessageWithMultipleByteSlicesInData);
// one sent with an id keeps it.
func TestBrokerAssignsMessageID(t *testing.T) {
	e := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q", nil) })
	ctx := testCtx(t)
	s := e.sender(t, "q")
	send(t, ctx, s, &azservicebus.Message{Body: []byte("no id")}, &azservicebus.Message{Body: []byte("an id"), MessageID: strPtr("mine")})
	if err := s.SendAMQPAnnotatedMessage(ctx, &azservicebus.AMQPAnnotatedMessage{
		Body: azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("raw")}},
	}, nil); err != nil {
		t.Fatal(err)
	}
	msgs := receiveN(t, e.receiver(t, "q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}), 3)
	guid := regexp.MustCompile(`^[0-9a-f]{32}$`)
	if !guid.MatchString(msgs[0].MessageID) || !guid.MatchString(msgs[2].MessageID) || msgs[0].MessageID == msgs[2].MessageID {
		t.Errorf("assigned ids %q, %q: want two distinct 32-hex-digit GUIDs", msgs[0].MessageID, msgs[2].MessageID)
	}
	if msgs[1].MessageID != "mine" {
		t.Errorf("given id came back as %q", msgs[1].MessageID)
	}
	// The raw message's properties carry the assigned id too.
	if p := msgs[2].RawAMQPMessage.Properties; p == nil || p.MessageID != msgs[2].MessageID {
		t.Errorf("raw properties = %+v", p)
	}
}

// The empty string is a session id: sent, scheduled and accepted by name
// (TestSessionReceiver_blankSessionIDs); only a message with no session id
// is refused by a session queue.
func TestEmptySessionID(t *testing.T) {
	e := startEmulator(t, func(ns *broker.Namespace) {
		createQueue(t, ns, "sq", func(p *broker.QueueProperties) { p.RequiresSession = true })
	})
	ctx := testCtx(t)
	s := e.sender(t, "sq")
	send(t, ctx, s, &azservicebus.Message{Body: []byte("one"), SessionID: strPtr("")},
		&azservicebus.Message{Body: []byte("elsewhere"), SessionID: strPtr("other")})
	if _, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("two"), SessionID: strPtr("")}}, time.Now(), nil); err != nil {
		t.Fatalf("schedule with session id \"\": %v", err)
	}
	err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("none")}, nil)
	var amqpErr *goamqp.Error
	if !errors.As(err, &amqpErr) || amqpErr.Condition != "amqp:not-allowed" {
		t.Errorf("a message without a session id: %v", err)
	}

	r, err := e.client.AcceptSessionForQueue(ctx, "sq", "", nil)
	if err != nil {
		t.Fatalf("accept session \"\": %v", err)
	}
	defer r.Close(ctx)
	if r.SessionID() != "" || r.LockedUntil().IsZero() {
		t.Fatalf("accepted session %q locked until %v", r.SessionID(), r.LockedUntil())
	}
	msgs := receiveN(t, r, 2)
	for _, m := range msgs {
		if m.SessionID == nil || *m.SessionID != "" {
			t.Errorf("message %q from session %v", m.Body, m.SessionID)
		}
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Error(err)
		}
	}
	if err := r.SetSessionState(ctx, []byte("state"), nil); err != nil {
		t.Fatal(err)
	}
	if st, err := r.GetSessionState(ctx, nil); err != nil || string(st) != "state" {
		t.Errorf("session \"\" state = %q, %v", st, err)
	}
	if err := r.RenewSessionLock(ctx, nil); err != nil {
		t.Errorf("renew session \"\": %v", err)
	}
	// Accept-next still finds the named session, not "".
	next, err := e.client.AcceptNextSessionForQueue(ctx, "sq", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close(ctx)
	if next.SessionID() != "other" {
		t.Errorf("accept-next gave session %q, want other", next.SessionID())
	}
}

// An active message carries no x-opt-message-state (the service sends it
// only for deferred and scheduled messages), and its annotations are the
// sender's plus sequence number, enqueued time and locked-until.
func TestActiveMessageAnnotations(t *testing.T) {
	e := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q", nil) })
	ctx := testCtx(t)
	s := e.sender(t, "q")
	if err := s.SendAMQPAnnotatedMessage(ctx, &azservicebus.AMQPAnnotatedMessage{
		MessageAnnotations: map[any]any{"x-opt-test": "v"},
		Body:               azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("a")}},
	}, nil); err != nil {
		t.Fatal(err)
	}
	r := e.receiver(t, "q", nil)
	m := receiveN(t, r, 1)[0]
	var keys []string
	for k := range m.RawAMQPMessage.MessageAnnotations {
		keys = append(keys, k.(string))
	}
	if len(keys) != 4 || m.State != azservicebus.MessageStateActive {
		t.Errorf("active message: annotations %v, state %v; want x-opt-test, x-opt-sequence-number, x-opt-enqueued-time, x-opt-locked-until", keys, m.State)
	}
	if _, ok := m.RawAMQPMessage.MessageAnnotations["x-opt-message-state"]; ok {
		t.Error("an active message carries x-opt-message-state")
	}
	if err := r.DeferMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	d, err := r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
	if err != nil || len(d) != 1 {
		t.Fatalf("receive deferred: %v, %v", d, err)
	}
	if d[0].State != azservicebus.MessageStateDeferred || d[0].RawAMQPMessage.MessageAnnotations["x-opt-message-state"] == nil {
		t.Errorf("deferred message: state %v, annotations %v", d[0].State, d[0].RawAMQPMessage.MessageAnnotations)
	}
}

// Errors clients match on by text carry the service's wording
// (TestSessionReceiver_nonSessionReceiver, TestReceiver_RenewMessageLock).
func TestAzureErrorDescriptions(t *testing.T) {
	e := startEmulator(t, func(ns *broker.Namespace) {
		createQueue(t, ns, "q", nil)
		createQueue(t, ns, "sq", func(p *broker.QueueProperties) { p.RequiresSession = true })
	})
	ctx := testCtx(t)

	msgs, err := e.receiver(t, "sq", nil).ReceiveMessages(ctx, 1, nil)
	var amqpErr *goamqp.Error
	if msgs != nil || !errors.As(err, &amqpErr) || amqpErr.Condition != "amqp:not-allowed" ||
		!strings.Contains(amqpErr.Description, "It is not possible for an entity that requires sessions to create a non-sessionful message receiver.") {
		t.Errorf("non-session receiver on a session queue: %v", err)
	}

	send(t, ctx, e.sender(t, "q"), &azservicebus.Message{Body: []byte("a")})
	r := e.receiver(t, "q", nil)
	m := receiveN(t, r, 1)[0]
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	err = r.RenewMessageLock(ctx, m, nil)
	if sbCode(err) != azservicebus.CodeLockLost ||
		!strings.Contains(err.Error(), "status code 410 and description: The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue") {
		t.Errorf("renewing a completed message's lock: %v", err)
	}
}
