package servicebus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
	"github.com/dlqdash/dlqdash/replay"
)

// replayEnv is an emulator with its admin API, the adapter's Client on it,
// and a plain SDK client to prepare and check messages with.
type replayEnv struct {
	srv *emulator.Emulator
	ns  *broker.Namespace
	c   *Client
	sb  *azservicebus.Client
}

func newReplayEnv(t *testing.T) *replayEnv {
	t.Helper()
	srv := emulatortest.Start(t, emulator.Config{})
	connStr := srv.ConnectionString()
	c, err := Open(t.Context(), connStr, Options{AdminEndpoint: srv.AdminURL()})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := azservicebus.NewClientFromConnectionString(connStr, &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 1, RetryDelay: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sb.Close(ctx)
		_ = c.Close(ctx)
	})
	return &replayEnv{srv: srv, ns: srv.Namespace(), c: c, sb: sb}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (e *replayEnv) queue(t *testing.T, name string, edit func(*broker.QueueProperties)) string {
	t.Helper()
	p := broker.DefaultQueueProperties()
	if edit != nil {
		edit(&p)
	}
	if _, err := e.ns.CreateQueue(name, p); err != nil {
		t.Fatal(err)
	}
	return name
}

func (e *replayEnv) send(t *testing.T, queue string, msgs ...*azservicebus.Message) {
	t.Helper()
	s, err := e.sb.NewSender(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for _, m := range msgs {
		if err := s.SendMessage(ctxFor(t), m, nil); err != nil {
			t.Fatalf("send to %s: %v", queue, err)
		}
	}
}

func (e *replayEnv) sendAMQP(t *testing.T, queue string, msgs ...*azservicebus.AMQPAnnotatedMessage) {
	t.Helper()
	s, err := e.sb.NewSender(queue, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for _, m := range msgs {
		if err := s.SendAMQPAnnotatedMessage(ctxFor(t), m, nil); err != nil {
			t.Fatalf("send to %s: %v", queue, err)
		}
	}
}

// sdkReceive receives n messages of queue's subqueue with the SDK.
func (e *replayEnv) sdkReceive(t *testing.T, queue string, sub azservicebus.SubQueue, n int) (*azservicebus.Receiver, []*azservicebus.ReceivedMessage) {
	t.Helper()
	r, err := e.sb.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{SubQueue: sub})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	var got []*azservicebus.ReceivedMessage
	ctx := ctxFor(t)
	for len(got) < n {
		msgs, err := r.ReceiveMessages(ctx, n-len(got), nil)
		if err != nil {
			t.Fatalf("receive %d of %s: %v (have %d)", n, queue, err, len(got))
		}
		got = append(got, msgs...)
	}
	return r, got
}

// deadLetter moves n messages of queue's main queue to its dead-letter
// queue.
func (e *replayEnv) deadLetter(t *testing.T, queue string, n int, reason string) {
	t.Helper()
	r, got := e.sdkReceive(t, queue, 0, n)
	for _, m := range got {
		desc := "description of " + reason
		if err := r.DeadLetterMessage(ctxFor(t), m, &azservicebus.DeadLetterOptions{Reason: &reason, ErrorDescription: &desc}); err != nil {
			t.Fatal(err)
		}
	}
}

// receiveN receives n messages with the adapter's receiver.
func receiveN(t *testing.T, r replay.Receiver, n int) []*replay.Received {
	t.Helper()
	ctx := ctxFor(t)
	var got []*replay.Received
	for len(got) < n {
		msgs, err := r.Receive(ctx, n-len(got), 5*time.Second)
		if err != nil {
			t.Fatalf("Receive: %v (have %d of %d)", err, len(got), n)
		}
		if msgs == nil {
			t.Fatalf("Receive: nothing in 5 s (have %d of %d)", len(got), n)
		}
		got = append(got, msgs...)
	}
	return got
}

func ptr[T any](v T) *T { return &v }

func TestReplayEntity(t *testing.T) {
	e := newReplayEnv(t)
	e.queue(t, "orders", func(p *broker.QueueProperties) {
		p.LockDuration = 45 * time.Second
		p.DefaultMessageTimeToLive = 2 * time.Hour
	})
	e.queue(t, "dedupe", func(p *broker.QueueProperties) {
		p.RequiresDuplicateDetection = true
		p.DuplicateDetectionHistoryTimeWindow = 5 * time.Minute
		p.RequiresSession = true
		p.Status = broker.StatusSendDisabled
	})
	tp := broker.DefaultTopicProperties()
	tp.RequiresDuplicateDetection = true
	tp.DuplicateDetectionHistoryTimeWindow = 3 * time.Minute
	tp.DefaultMessageTimeToLive = time.Hour
	if _, err := e.ns.CreateTopic("events", tp); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ns.CreateTopic("plain", broker.DefaultTopicProperties()); err != nil {
		t.Fatal(err)
	}
	sp := broker.DefaultSubscriptionProperties()
	sp.LockDuration = 20 * time.Second
	sp.RequiresSession = true
	if _, err := e.ns.CreateSubscription("events", "audit", sp); err != nil {
		t.Fatal(err)
	}

	ctx := ctxFor(t)
	for _, want := range []replay.EntityInfo{
		{Path: "orders", Kind: dlq.KindQueue, LockDuration: 45 * time.Second, DuplicateDetectionWindow: 10 * time.Minute,
			DefaultTimeToLive: 2 * time.Hour, Status: "Active"},
		{Path: "dedupe", Kind: dlq.KindQueue, LockDuration: time.Minute, DuplicateDetection: true,
			DuplicateDetectionWindow: 5 * time.Minute, RequiresSession: true, Status: "SendDisabled"},
		{Path: "events", Kind: dlq.KindTopic, DuplicateDetection: true, DuplicateDetectionWindow: 3 * time.Minute,
			DefaultTimeToLive: time.Hour, Status: "Active"},
		{Path: "plain", Kind: dlq.KindTopic, DuplicateDetectionWindow: 10 * time.Minute, Status: "Active"},
		{Path: "events/Subscriptions/audit", Kind: dlq.KindSubscription, Topic: "events", LockDuration: 20 * time.Second,
			RequiresSession: true, Status: "Active"},
	} {
		got, err := e.c.Entity(ctx, want.Path)
		if err != nil {
			t.Errorf("Entity(%s): %v", want.Path, err)
			continue
		}
		// An unset default time-to-live is "forever": whatever the
		// emulator says, not 0 for a real entity; only compare set ones.
		if want.DefaultTimeToLive == 0 {
			got.DefaultTimeToLive = 0
		}
		if got != want {
			t.Errorf("Entity(%s)\n got %+v\nwant %+v", want.Path, got, want)
		}
	}

	for _, path := range []string{"nope", "events/Subscriptions/nope", "nope/Subscriptions/audit", "deep/er/queue"} {
		_, err := e.c.Entity(ctx, path)
		if !errors.Is(err, dlq.ErrEntityNotFound) {
			t.Errorf("Entity(%s): %v, want ErrEntityNotFound", path, err)
		} else if !strings.Contains(err.Error(), path) {
			t.Errorf("Entity(%s): %q does not name the path", path, err)
		}
	}
	for _, path := range []string{"", "/orders", "orders/", "orders/$DeadLetterQueue", "events/Subscriptions", "events/Subscriptions/audit/Rules/$Default", "a//b"} {
		_, err := e.c.Entity(ctx, path)
		if err == nil || errors.Is(err, dlq.ErrEntityNotFound) || !strings.Contains(err.Error(), fmt.Sprintf("%q", path)) {
			t.Errorf("Entity(%q): %v, want an error naming the path", path, err)
		}
	}
}

// TestReplayReceiveComplete receives dead letters, completes them, and
// checks what the engine reads off a Received.
func TestReplayReceiveComplete(t *testing.T) {
	e := newReplayEnv(t)
	q := e.queue(t, "orders", nil)
	e.send(t, q,
		&azservicebus.Message{MessageID: ptr("m1"), Body: []byte("one"), TimeToLive: ptr(time.Hour)},
		&azservicebus.Message{MessageID: ptr("m2"), Body: []byte("two"), ApplicationProperties: map[string]any{"dlqdash.replay_count": int32(3)}},
		&azservicebus.Message{MessageID: ptr("m3"), Body: []byte("three"), ApplicationProperties: map[string]any{"dlqdash.replay_count": "7"}},
	)
	e.deadLetter(t, q, 3, "poison")
	ctx := ctxFor(t)

	r, err := e.c.OpenReceiver(ctx, q, dlq.SubQueueDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	start := time.Now()
	got := receiveN(t, r, 3)
	byID := map[string]*replay.Received{}
	for _, m := range got {
		byID[m.MessageID] = m
		if m.SequenceNumber <= 0 || m.DeadLetterReason != "poison" {
			t.Errorf("%s: seq %d, reason %q", m.MessageID, m.SequenceNumber, m.DeadLetterReason)
		}
		if !m.LockedUntil.After(start.Add(50*time.Second)) || m.LockedUntil.After(time.Now().Add(61*time.Second)) {
			t.Errorf("%s: locked until %s, want about a minute from now", m.MessageID, m.LockedUntil)
		}
		if _, ok := m.Raw.(*azservicebus.ReceivedMessage); !ok {
			t.Errorf("%s: Raw is %T", m.MessageID, m.Raw)
		}
	}
	if len(byID) != 3 {
		t.Fatalf("received %v", byID)
	}
	if m := byID["m1"]; m.TimeToLive != time.Hour || m.ReplayCount != 0 {
		t.Errorf("m1: ttl %s, replay count %d", m.TimeToLive, m.ReplayCount)
	}
	if m := byID["m2"]; m.ReplayCount != 3 {
		t.Errorf("m2: replay count %d, want 3", m.ReplayCount)
	}
	if m := byID["m3"]; m.ReplayCount != 0 {
		t.Errorf("m3 (a string count): replay count %d, want 0", m.ReplayCount)
	}

	// Complete two; the third's lock is expired first.
	for _, id := range []string{"m1", "m2"} {
		if err := r.Complete(ctx, byID[id]); err != nil {
			t.Fatalf("Complete %s: %v", id, err)
		}
	}
	e.ns.ExpireLocks(q)
	err = r.Complete(ctx, byID["m3"])
	if !errors.Is(err, dlq.ErrLockLost) {
		t.Fatalf("Complete after the lock expired: %v, want ErrLockLost", err)
	}
	t.Logf("lock lost: %v", err)
	left, err := e.c.Peek(ctx, q, dlq.SubQueueDeadLetter, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].MessageID != "m3" {
		t.Errorf("left in the DLQ: %+v, want only m3", left)
	}
	// m3 is back and can be received and completed again.
	again := receiveN(t, r, 1)
	if again[0].MessageID != "m3" {
		t.Fatalf("received %s", again[0].MessageID)
	}
	if err := r.Complete(ctx, again[0]); err != nil {
		t.Fatal(err)
	}
	if left, _ := e.c.Peek(ctx, q, dlq.SubQueueDeadLetter, 0, 10); len(left) != 0 {
		t.Errorf("left in the DLQ: %+v", left)
	}

	// Not a message of this adapter.
	if err := r.Complete(ctx, &replay.Received{SequenceNumber: 1, Raw: "x"}); err == nil {
		t.Error("Complete of a foreign message succeeded")
	}
}

// TestReplayLockExpires lets a short lock run out by itself.
func TestReplayLockExpires(t *testing.T) {
	e := newReplayEnv(t)
	q := e.queue(t, "short", func(p *broker.QueueProperties) { p.LockDuration = time.Second })
	e.send(t, q, &azservicebus.Message{MessageID: ptr("x"), Body: []byte("x")})
	e.deadLetter(t, q, 1, "r")
	info, err := e.c.Entity(ctxFor(t), q)
	if err != nil || info.LockDuration != time.Second {
		t.Fatalf("Entity: %+v, %v", info, err)
	}
	r, err := e.c.OpenReceiver(ctxFor(t), q, dlq.SubQueueDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	m := receiveN(t, r, 1)[0]
	if d := time.Until(m.LockedUntil); d <= 0 || d > 1100*time.Millisecond {
		t.Errorf("locked for %s more, want up to 1 s", d)
	}
	time.Sleep(time.Until(m.LockedUntil) + 300*time.Millisecond)
	if err := r.Complete(ctxFor(t), m); !errors.Is(err, dlq.ErrLockLost) {
		t.Fatalf("Complete after the lock ran out: %v, want ErrLockLost", err)
	}
}

func TestReplayReceiveNothing(t *testing.T) {
	e := newReplayEnv(t)
	q := e.queue(t, "empty", nil)
	r, err := e.c.OpenReceiver(ctxFor(t), q, dlq.SubQueueDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	// The first receive attaches; give it time, then time an empty wait.
	if got, err := r.Receive(ctxFor(t), 10, 2*time.Second); got != nil || err != nil {
		t.Fatalf("Receive: %v, %v", got, err)
	}
	start := time.Now()
	got, err := r.Receive(ctxFor(t), 10, 300*time.Millisecond)
	if got != nil || err != nil {
		t.Fatalf("Receive: %v, %v; want nil, nil", got, err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
		t.Errorf("an empty Receive took %s, want about the wait (300 ms)", d)
	}

	// The caller's own cancellation is an error.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err = r.Receive(ctx, 10, 10*time.Second)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Receive with the caller's deadline: %v", err)
	}
	ctx, cancel = context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = r.Receive(ctx, 10, 10*time.Second)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Receive cancelled: %v", err)
	}

	// More than the SDK allows is clamped, not refused; 0 is refused.
	e.send(t, q, &azservicebus.Message{Body: []byte("x")})
	e.deadLetter(t, q, 1, "r")
	if got, err := r.Receive(ctxFor(t), 100000, 5*time.Second); err != nil || len(got) != 1 {
		t.Errorf("Receive(max 100000): %d, %v", len(got), err)
	}
	if _, err := r.Receive(ctxFor(t), 0, time.Second); err == nil {
		t.Error("Receive(max 0) succeeded")
	}

	// A missing entity, a bad subqueue, a bad path.
	nr, err := e.c.OpenReceiver(ctxFor(t), "nope", dlq.SubQueueDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	defer nr.Close(context.Background())
	if _, err := nr.Receive(ctxFor(t), 1, 5*time.Second); !errors.Is(err, dlq.ErrEntityNotFound) {
		t.Errorf("Receive from a missing queue: %v", err)
	}
	if _, err := e.c.OpenReceiver(ctxFor(t), q, "bogus"); err == nil {
		t.Error("OpenReceiver with a bogus subqueue succeeded")
	}
	if _, err := e.c.OpenReceiver(ctxFor(t), "a//b", dlq.SubQueueMain); err == nil {
		t.Error("OpenReceiver of a//b succeeded")
	}
}

func TestReplayReceiveDeferred(t *testing.T) {
	e := newReplayEnv(t)
	q := e.queue(t, "orders", nil)
	var msgs []*azservicebus.Message
	for i := range 5 {
		msgs = append(msgs, &azservicebus.Message{MessageID: ptr(fmt.Sprintf("d%d", i)), Body: []byte{byte(i)}})
	}
	e.send(t, q, msgs...)
	sr, got := e.sdkReceive(t, q, 0, 5)
	deferred := map[int64]string{}
	var completed int64
	for i, m := range got {
		if i < 3 {
			if err := sr.DeferMessage(ctxFor(t), m, nil); err != nil {
				t.Fatal(err)
			}
			deferred[*m.SequenceNumber] = m.MessageID
		} else {
			if err := sr.CompleteMessage(ctxFor(t), m, nil); err != nil {
				t.Fatal(err)
			}
			completed = *m.SequenceNumber
		}
	}

	r, err := e.c.OpenReceiver(ctxFor(t), q, dlq.SubQueueMain)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	var seqs []int64
	for s := range deferred {
		seqs = append(seqs, s)
	}
	// With a completed number, unknown ones (enough for two requests) and a
	// repeat mixed in.
	ask := []int64{completed}
	for i := range 150 {
		ask = append(ask, int64(100000+i))
	}
	ask = append(ask, seqs...)
	ask = append(ask, seqs[0])
	e.srv.ResetStats()
	start := time.Now()
	rec, err := r.ReceiveDeferred(ctxFor(t), ask)
	if err != nil {
		t.Fatalf("ReceiveDeferred: %v", err)
	}
	if len(rec) != 3 {
		t.Fatalf("ReceiveDeferred returned %d messages, want the 3 deferred", len(rec))
	}
	ops := e.srv.Stats().Totals.ManagementOps
	t.Logf("%d numbers: %d receive-by-sequence-number requests, %d peeks", len(ask), ops.ReceiveBySequenceNumber, ops.PeekMessage)
	if ops.PeekMessage != 1 {
		t.Errorf("%d peeks to confirm the entity, want 1", ops.PeekMessage)
	}
	for _, m := range rec {
		if deferred[m.SequenceNumber] != m.MessageID || !m.LockedUntil.After(start) {
			t.Errorf("got %d %q locked until %s", m.SequenceNumber, m.MessageID, m.LockedUntil)
		}
		if err := r.Complete(ctxFor(t), m); err != nil {
			t.Errorf("Complete deferred %d: %v", m.SequenceNumber, err)
		}
	}
	// Now none are there.
	if rec, err := r.ReceiveDeferred(ctxFor(t), seqs); err != nil || len(rec) != 0 {
		t.Errorf("ReceiveDeferred after completing: %d, %v", len(rec), err)
	}
	if rec, err := r.ReceiveDeferred(ctxFor(t), nil); err != nil || len(rec) != 0 {
		t.Errorf("ReceiveDeferred(nil): %d, %v", len(rec), err)
	}

	// A queue deleted under the receiver is not "no messages".
	if err := e.ns.DeleteQueue(q); err != nil {
		t.Fatal(err)
	}
	_, err = r.ReceiveDeferred(ctxFor(t), seqs)
	t.Logf("deleted: %v", err)
	if !errors.Is(err, dlq.ErrEntityNotFound) {
		t.Errorf("ReceiveDeferred of a deleted queue: %v, want ErrEntityNotFound", err)
	}
}

// TestReplaySendCopies sends copies of dead letters of every body kind and
// checks each field on the target.
func TestReplaySendCopies(t *testing.T) {
	e := newReplayEnv(t)
	src := e.queue(t, "src", nil)
	dst := e.queue(t, "dst", nil)
	sessions := e.queue(t, "dst-sessions", func(p *broker.QueueProperties) { p.RequiresSession = true })

	stamp := time.UnixMilli(1_700_000_000_123).UTC()
	props := map[string]any{
		"big": int64(1<<60 + 1), "neg": int64(-(1<<53 + 1)), "f": 3.25, "b": true, "s": "text",
		"bin": []byte{0, 1, 254, 255}, "t": stamp, "i32": int32(7),
	}
	binary := []byte{0, 1, 2, 0xfe, 0xff, '\n', 0}
	e.send(t, src, &azservicebus.Message{
		MessageID: ptr("bin"), Body: binary, ContentType: ptr("application/octet-stream"),
		CorrelationID: ptr("corr-1"), Subject: ptr("subj"), ReplyTo: ptr("replies"), ReplyToSessionID: ptr("rs"),
		To: ptr("someone"), PartitionKey: ptr("pk-1"), TimeToLive: ptr(90 * time.Minute), ApplicationProperties: props,
	})
	e.sendAMQP(t, src,
		&azservicebus.AMQPAnnotatedMessage{Body: azservicebus.AMQPAnnotatedMessageBody{Value: "an amqp-value string"},
			Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: "value", ContentType: ptr("text/plain"), ContentEncoding: ptr("identity")}},
		&azservicebus.AMQPAnnotatedMessage{Body: azservicebus.AMQPAnnotatedMessageBody{Value: map[string]any{"k": int64(1), "l": []any{"x", true}}},
			Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: "value-map"}},
		&azservicebus.AMQPAnnotatedMessage{Body: azservicebus.AMQPAnnotatedMessageBody{Sequence: [][]any{{int64(1), "two"}, {3.5}}},
			Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: "sequence"}},
		&azservicebus.AMQPAnnotatedMessage{Body: azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{{1}, {2, 3}, {}}},
			Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: "multi-data"}},
	)
	e.send(t, src, &azservicebus.Message{MessageID: ptr("session"), Body: []byte("in a session"), SessionID: ptr("cart-7")})
	e.send(t, src, &azservicebus.Message{MessageID: ptr("edited"), Body: []byte("old"), ApplicationProperties: map[string]any{"old": "gone"}})
	e.send(t, src, &azservicebus.Message{MessageID: ptr("later"), Body: []byte("later")})
	e.deadLetter(t, src, 8, "poison")

	r, err := e.c.OpenReceiver(ctxFor(t), src, dlq.SubQueueDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	orig := map[string]*replay.Received{}
	for _, m := range receiveN(t, r, 8) {
		orig[m.MessageID] = m
	}
	if len(orig) != 8 {
		t.Fatalf("received %d distinct dead letters", len(orig))
	}

	extra := map[string]any{"dlqdash.replay_count": int64(1), "dlqdash.replay_of": "x"}
	at := time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()
	var copies []replay.Copy
	for _, id := range []string{"bin", "value", "value-map", "sequence", "multi-data"} {
		copies = append(copies, replay.Copy{Of: orig[id], MessageID: "copy-of-" + id, Properties: extra})
	}
	copies = append(copies,
		replay.Copy{Of: orig["later"], MessageID: "copy-of-later", Properties: extra, ScheduledEnqueueAt: &at},
		replay.Copy{Of: orig["edited"], MessageID: "copy-of-edited", Properties: map[string]any{"dlqdash.replay_count": int64(2)},
			Edit: &replay.Edit{Body: []byte("new body"), ApplicationProperties: json.RawMessage(
				`{"s": "x", "n": 9007199254740993, "neg": -5, "f": 1.5, "e": 1e3, "b": false, "z": null, "bin": {"base64": "AQI="},
				"DeadLetterReason": "poison", "DeadLetterErrorDescription": "kept by the edit form"}`)}},
	)
	snd, err := e.c.OpenSender(ctxFor(t), dst)
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close(context.Background())
	if err := snd.Send(ctxFor(t), copies); err != nil {
		t.Fatalf("Send: %v", err)
	}
	ssnd, err := e.c.OpenSender(ctxFor(t), sessions)
	if err != nil {
		t.Fatal(err)
	}
	defer ssnd.Close(context.Background())
	if err := ssnd.Send(ctxFor(t), []replay.Copy{{Of: orig["session"], MessageID: "copy-of-session", Properties: extra}}); err != nil {
		t.Fatalf("Send to the session queue: %v", err)
	}

	// The scheduled copy waits; the others are there at once.
	info, err := e.ns.Queue(dst)
	if err != nil {
		t.Fatal(err)
	}
	if info.Counts.Scheduled != 1 || info.Counts.Active != 6 {
		t.Errorf("dst counts %+v, want 6 active and 1 scheduled", info.Counts)
	}
	pr, err := e.sb.NewReceiverForQueue(dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close(context.Background())
	peeked, err := pr.PeekMessages(ctxFor(t), 20, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range peeked {
		scheduled := m.State == azservicebus.MessageStateScheduled
		if scheduled != (m.MessageID == "copy-of-later") {
			t.Errorf("%s: state %v", m.MessageID, m.State)
		}
		if scheduled && (m.ScheduledEnqueueTime == nil || !m.ScheduledEnqueueTime.Equal(at)) {
			t.Errorf("%s: scheduled for %v, want %s", m.MessageID, m.ScheduledEnqueueTime, at)
		}
	}

	_, got := e.sdkReceive(t, dst, 0, 6)
	copyOf := map[string]*azservicebus.ReceivedMessage{}
	for _, m := range got {
		copyOf[m.MessageID] = m
	}
	sr, err := e.sb.AcceptSessionForQueue(ctxFor(t), sessions, "cart-7", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close(context.Background())
	sgot, err := sr.ReceiveMessages(ctxFor(t), 1, nil)
	if err != nil || len(sgot) != 1 {
		t.Fatalf("receive from the session: %v, %v", sgot, err)
	}
	copyOf[sgot[0].MessageID] = sgot[0]

	withExtra := func(m map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	for _, id := range []string{"bin", "value", "value-map", "sequence", "multi-data", "session"} {
		o := orig[id].Raw.(*azservicebus.ReceivedMessage)
		c := copyOf["copy-of-"+id]
		if c == nil {
			t.Errorf("no copy of %s arrived", id)
			continue
		}
		if !reflect.DeepEqual(c.RawAMQPMessage.Body, o.RawAMQPMessage.Body) {
			t.Errorf("%s: body %#v, want %#v", id, c.RawAMQPMessage.Body, o.RawAMQPMessage.Body)
		}
		for _, f := range []struct {
			name      string
			got, want *string
		}{
			{"content type", c.ContentType, o.ContentType}, {"correlation id", c.CorrelationID, o.CorrelationID},
			{"subject", c.Subject, o.Subject}, {"session id", c.SessionID, o.SessionID},
			{"partition key", c.PartitionKey, o.PartitionKey}, {"reply to", c.ReplyTo, o.ReplyTo},
			{"reply to session id", c.ReplyToSessionID, o.ReplyToSessionID}, {"to", c.To, o.To},
			{"content encoding", c.RawAMQPMessage.Properties.ContentEncoding, o.RawAMQPMessage.Properties.ContentEncoding},
		} {
			if !reflect.DeepEqual(f.got, f.want) {
				t.Errorf("%s: %s %v, want %v", id, f.name, deref(f.got), deref(f.want))
			}
		}
		if c.ScheduledEnqueueTime != nil || c.DeadLetterSource != nil || c.DeadLetterReason != nil || c.DeliveryCount != 1 {
			t.Errorf("%s: scheduled %v, dead-letter source %v, reason %v, delivery count %d", id, c.ScheduledEnqueueTime, c.DeadLetterSource, c.DeadLetterReason, c.DeliveryCount)
		}
		wantProps := map[string]any{}
		for k, v := range o.ApplicationProperties {
			if k != "DeadLetterReason" && k != "DeadLetterErrorDescription" {
				wantProps[k] = v
			}
		}
		if !reflect.DeepEqual(c.ApplicationProperties, withExtra(wantProps)) {
			t.Errorf("%s: properties %#v, want %#v", id, c.ApplicationProperties, withExtra(wantProps))
		}
	}

	// The binary one in detail, against what was sent.
	c := copyOf["copy-of-bin"]
	if !bytes.Equal(c.Body, binary) || *c.ContentType != "application/octet-stream" || *c.CorrelationID != "corr-1" ||
		*c.Subject != "subj" || *c.PartitionKey != "pk-1" || *c.ReplyTo != "replies" || *c.To != "someone" {
		t.Errorf("binary copy: %+v", c)
	}
	if c.TimeToLive == nil || *c.TimeToLive != 90*time.Minute {
		t.Errorf("binary copy: ttl %v", c.TimeToLive)
	}
	if !reflect.DeepEqual(utcTimes(c.ApplicationProperties), withExtra(props)) {
		t.Errorf("binary copy: properties\n got %#v\nwant %#v", c.ApplicationProperties, withExtra(props))
	}
	if vc := copyOf["copy-of-value"]; vc.RawAMQPMessage.Body.Value != "an amqp-value string" || vc.RawAMQPMessage.Body.Data != nil {
		t.Errorf("value copy body %#v", vc.RawAMQPMessage.Body)
	}
	if sc := copyOf["copy-of-session"]; deref(sc.SessionID) != "cart-7" {
		t.Errorf("session copy: session %v", sc.SessionID)
	}

	// The edited one.
	ec := copyOf["copy-of-edited"]
	if ec == nil {
		t.Fatal("no edited copy")
	}
	if !reflect.DeepEqual(ec.RawAMQPMessage.Body, azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("new body")}}) {
		t.Errorf("edited body %#v", ec.RawAMQPMessage.Body)
	}
	wantEdited := map[string]any{"s": "x", "n": int64(9007199254740993), "neg": int64(-5), "f": 1.5, "e": 1000.0, "b": false, "z": nil,
		"bin": []byte{1, 2}, "dlqdash.replay_count": int64(2)}
	if !reflect.DeepEqual(ec.ApplicationProperties, wantEdited) {
		t.Errorf("edited properties\n got %#v\nwant %#v", ec.ApplicationProperties, wantEdited)
	}
}

// TestReplaySendBatch sends 500 copies and checks they took few round
// trips and all arrived; then one copy too large for any batch.
func TestReplaySendBatch(t *testing.T) {
	e := newReplayEnv(t)
	src := e.queue(t, "src", nil)
	dst := e.queue(t, "dst", nil)
	s, err := e.sb.NewSender(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	batch, err := s.NewMessageBatch(ctxFor(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := batch.AddMessage(&azservicebus.Message{MessageID: ptr(fmt.Sprint("m", i)), Body: bytes.Repeat([]byte{'x'}, 200),
			ApplicationProperties: map[string]any{"i": int64(i)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SendMessageBatch(ctxFor(t), batch, nil); err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())

	r, err := e.c.OpenReceiver(ctxFor(t), src, dlq.SubQueueMain)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	got := receiveN(t, r, n)
	copies := make([]replay.Copy, len(got))
	for i, m := range got {
		copies[i] = replay.Copy{Of: m, MessageID: "copy-" + m.MessageID, Properties: map[string]any{"dlqdash.replay_count": int64(1)}}
	}
	snd, err := e.c.OpenSender(ctxFor(t), dst)
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close(context.Background())
	e.srv.ResetStats()
	start := time.Now()
	if err := snd.Send(ctxFor(t), copies); err != nil {
		t.Fatal(err)
	}
	trips := snd.(*sender).batches.Load()
	t.Logf("%d copies in %d batches, %s", n, trips, time.Since(start))
	if trips < 1 || trips > 3 {
		t.Errorf("%d copies took %d round trips, want at most 3", n, trips)
	}
	if sent := e.srv.Stats().Entity(dst).Send; sent != n {
		t.Errorf("emulator accepted %d messages, want %d", sent, n)
	}
	if info, _ := e.ns.Queue(dst); info.Counts.Active != n {
		t.Errorf("dst holds %d messages, want %d", info.Counts.Active, n)
	}

	// One copy larger than a batch may be: an error naming it, a refusal
	// (nothing sent), even after copies that fill a batch before it: every
	// batch is filled before the first goes out.
	big := replay.Copy{Of: got[0], MessageID: "too-big", Edit: &replay.Edit{Body: bytes.Repeat([]byte{'y'}, 300<<10)}}
	for _, cps := range [][]replay.Copy{{big}, append(copies[:len(copies):len(copies)], big)} {
		before := snd.(*sender).batches.Load()
		err = snd.Send(ctxFor(t), cps)
		if err == nil || !strings.Contains(err.Error(), `"too-big"`) {
			t.Errorf("Send of a 300 KiB copy after %d others: %v, want an error naming too-big", len(cps)-1, err)
		}
		if !isRefused(err) {
			t.Errorf("Send of a 300 KiB copy after %d others: %v is not a refusal", len(cps)-1, err)
		}
		if d := snd.(*sender).batches.Load() - before; d != 0 {
			t.Errorf("Send of a 300 KiB copy after %d others sent %d batches, want none", len(cps)-1, d)
		}
	}
	if info, _ := e.ns.Queue(dst); info.Counts.Active != n {
		t.Errorf("dst holds %d messages after the refused sends, want still %d", info.Counts.Active, n)
	}

	// Copies of different sessions and schedules go in separate batches,
	// in order within each.
	at := time.Now().Add(time.Hour)
	mixed := []replay.Copy{
		{Of: got[1], MessageID: "a1"}, {Of: got[2], MessageID: "b1", ScheduledEnqueueAt: &at}, {Of: got[3], MessageID: "a2"},
	}
	before := snd.(*sender).batches.Load()
	if err := snd.Send(ctxFor(t), mixed); err != nil {
		t.Fatal(err)
	}
	if d := snd.(*sender).batches.Load() - before; d != 2 {
		t.Errorf("a copy scheduled among unscheduled ones: %d batches, want 2", d)
	}
}

// TestReplaySendDuplicate sends one MessageID twice to a queue that
// detects duplicates.
func TestReplaySendDuplicate(t *testing.T) {
	e := newReplayEnv(t)
	src := e.queue(t, "src", nil)
	dst := e.queue(t, "dst", func(p *broker.QueueProperties) { p.RequiresDuplicateDetection = true })
	e.send(t, src, &azservicebus.Message{MessageID: ptr("orig"), Body: []byte("b")})
	e.deadLetter(t, src, 1, "r")
	r, err := e.c.OpenReceiver(ctxFor(t), src, dlq.SubQueueDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	m := receiveN(t, r, 1)[0]
	snd, err := e.c.OpenSender(ctxFor(t), dst)
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close(context.Background())
	cp := replay.Copy{Of: m, MessageID: "replay-1"}
	for range 2 {
		if err := snd.Send(ctxFor(t), []replay.Copy{cp, cp}); err != nil {
			t.Fatal(err)
		}
	}
	if info, _ := e.ns.Queue(dst); info.Counts.Active != 1 {
		t.Errorf("dst holds %d messages, want 1", info.Counts.Active)
	}
}

// TestReplaySendErrors covers the refusals before anything is sent.
func TestReplaySendErrors(t *testing.T) {
	e := newReplayEnv(t)
	e.queue(t, "dst", nil)
	ctx := ctxFor(t)
	if _, err := e.c.OpenSender(ctx, "events/Subscriptions/audit"); err == nil {
		t.Error("OpenSender to a subscription succeeded")
	}
	if _, err := e.c.OpenSender(ctx, "dst/$DeadLetterQueue"); err == nil {
		t.Error("OpenSender to a DLQ succeeded")
	}
	snd, err := e.c.OpenSender(ctx, "nope")
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close(context.Background())
	orig := &replay.Received{Raw: &azservicebus.ReceivedMessage{MessageID: "o", RawAMQPMessage: &azservicebus.AMQPAnnotatedMessage{
		Body: azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("x")}}}}}
	if err := snd.Send(ctx, []replay.Copy{{Of: orig, MessageID: "c"}}); !errors.Is(err, dlq.ErrEntityNotFound) || isRefused(err) {
		t.Errorf("Send to a missing queue: %v, want ErrEntityNotFound and no refusal (the engine pauses for it)", err)
	}
	dst, err := e.c.OpenSender(ctx, "dst")
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close(context.Background())
	for _, tt := range []struct {
		name string
		cp   replay.Copy
		want string
	}{
		{"no id", replay.Copy{Of: orig}, "no MessageID"},
		{"no original", replay.Copy{MessageID: "c"}, "no original"},
		{"foreign original", replay.Copy{Of: &replay.Received{Raw: 1}, MessageID: "c"}, "not received by this adapter"},
		{"array property", replay.Copy{Of: orig, MessageID: "c", Edit: &replay.Edit{ApplicationProperties: json.RawMessage(`{"ok": 1, "list": [1]}`)}}, `"list"`},
		{"object property", replay.Copy{Of: orig, MessageID: "c", Edit: &replay.Edit{ApplicationProperties: json.RawMessage(`{"obj": {"a": 1}}`)}}, `"obj"`},
		{"bad base64", replay.Copy{Of: orig, MessageID: "c", Edit: &replay.Edit{ApplicationProperties: json.RawMessage(`{"bin": {"base64": "!"}}`)}}, `"bin"`},
		{"huge integer", replay.Copy{Of: orig, MessageID: "c", Edit: &replay.Edit{ApplicationProperties: json.RawMessage(`{"n": 99999999999999999999}`)}}, `"n"`},
		{"not an object", replay.Copy{Of: orig, MessageID: "c", Edit: &replay.Edit{ApplicationProperties: json.RawMessage(`[1]`)}}, "JSON object"},
		{"trailing data", replay.Copy{Of: orig, MessageID: "c", Edit: &replay.Edit{ApplicationProperties: json.RawMessage(`{} {}`)}}, "JSON object"},
	} {
		err := dst.Send(ctx, []replay.Copy{tt.cp})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error containing %s", tt.name, err, tt.want)
		}
		if !isRefused(err) {
			t.Errorf("%s: %v is not a refusal", tt.name, err)
		}
	}
	if info, _ := e.ns.Queue("dst"); info.Counts.Active != 0 {
		t.Errorf("refused copies were sent: %+v", info.Counts)
	}
	// A JSON null edit keeps the original's properties.
	m, err := buildCopy(replay.Copy{Of: orig, MessageID: "c", Properties: map[string]any{"p": 1},
		Edit: &replay.Edit{ApplicationProperties: json.RawMessage(`null`)}})
	if err != nil || !reflect.DeepEqual(m.ApplicationProperties, map[string]any{"p": 1}) {
		t.Errorf("null edit: %v, %v", m, err)
	}
}

// TestBuildCopyAnnotations checks what is kept of the original's
// annotations and header.
func TestBuildCopyAnnotations(t *testing.T) {
	exp := time.Now().Add(-time.Hour)
	raw := &azservicebus.AMQPAnnotatedMessage{
		Body:   azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("x")}},
		Header: &azservicebus.AMQPAnnotatedMessageHeader{DeliveryCount: 4, Durable: true, Priority: 7, TTL: time.Minute, FirstAcquirer: true},
		Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: "o", AbsoluteExpiryTime: &exp, CreationTime: &exp,
			UserID: []byte("u"), GroupID: ptr("g"), CorrelationID: uint64(42)},
		MessageAnnotations: map[any]any{
			"x-opt-partition-key": "pk", "x-opt-via-partition-key": "via", "x-opt-sequence-number": int64(5),
			"x-opt-enqueued-time": exp, "x-opt-locked-until": exp, "x-opt-enqueue-sequence-number": int64(5),
			"x-opt-deadletter-source": "q", "x-opt-scheduled-enqueue-time": exp, "x-opt-message-state": int32(0),
			"custom": "c",
		},
		DeliveryAnnotations: map[any]any{"x-opt-lock-token": "t"},
		Footer:              map[any]any{"f": 1},
		ApplicationProperties: map[string]any{
			"DeadLetterReason": "r", "DeadLetterErrorDescription": "d", "keep": "k", "dlqdash.replay_count": int64(1),
		},
	}
	at := time.Now().Add(time.Hour)
	m, err := buildCopy(replay.Copy{Of: &replay.Received{Raw: &azservicebus.ReceivedMessage{RawAMQPMessage: raw}},
		MessageID: "new", Properties: map[string]any{"dlqdash.replay_count": int64(2)}, ScheduledEnqueueAt: &at})
	if err != nil {
		t.Fatal(err)
	}
	wantAnn := map[any]any{"x-opt-partition-key": "pk", "x-opt-via-partition-key": "via", "x-opt-scheduled-enqueue-time": at.UTC()}
	if !reflect.DeepEqual(m.MessageAnnotations, wantAnn) {
		t.Errorf("annotations %#v", m.MessageAnnotations)
	}
	if *m.Header != (azservicebus.AMQPAnnotatedMessageHeader{Durable: true, Priority: 7, TTL: time.Minute}) {
		t.Errorf("header %+v", *m.Header)
	}
	p := m.Properties
	if p.MessageID != "new" || p.AbsoluteExpiryTime != nil || p.CreationTime != nil || p.UserID != nil || *p.GroupID != "g" || p.CorrelationID != uint64(42) {
		t.Errorf("properties %+v", p)
	}
	if m.DeliveryAnnotations != nil || m.Footer != nil {
		t.Errorf("delivery annotations %v, footer %v", m.DeliveryAnnotations, m.Footer)
	}
	if !reflect.DeepEqual(m.ApplicationProperties, map[string]any{"keep": "k", "dlqdash.replay_count": int64(2)}) {
		t.Errorf("application properties %v", m.ApplicationProperties)
	}
	// The original is untouched.
	if len(raw.ApplicationProperties) != 4 || len(raw.MessageAnnotations) != 10 || raw.Properties.MessageID != "o" {
		t.Errorf("the original was changed: %+v", raw)
	}
}

// utcTimes sets the time values of m to UTC (go-amqp decodes timestamps
// in local time).
func utcTimes(m map[string]any) map[string]any {
	for k, v := range m {
		if tv, ok := v.(time.Time); ok {
			m[k] = tv.UTC()
		}
	}
	return m
}

func TestReplayCount(t *testing.T) {
	for _, tt := range []struct {
		v    any
		want int
	}{{nil, 0}, {int64(3), 3}, {int32(4), 4}, {uint8(5), 5}, {uint64(1 << 63), int(^uint(0) >> 1)}, {int64(-2), 0}, {"3", 0}, {3.0, 0}} {
		if got := replayCount(tt.v); got != tt.want {
			t.Errorf("replayCount(%#v) = %d, want %d", tt.v, got, tt.want)
		}
	}
}

// TestReplaySubscription replays a subscription's dead letter to its topic.
func TestReplaySubscription(t *testing.T) {
	e := newReplayEnv(t)
	if _, err := e.ns.CreateTopic("events", broker.DefaultTopicProperties()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ns.CreateSubscription("events", "audit", broker.DefaultSubscriptionProperties()); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	s, err := e.sb.NewSender("events", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: ptr("e1"), Body: []byte("event")}, nil); err != nil {
		t.Fatal(err)
	}
	sr, err := e.sb.NewReceiverForSubscription("events", "audit", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close(context.Background())
	got, err := sr.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive: %v, %v", got, err)
	}
	if err := sr.DeadLetterMessage(ctx, got[0], &azservicebus.DeadLetterOptions{Reason: ptr("bad event")}); err != nil {
		t.Fatal(err)
	}

	sub := "events/Subscriptions/audit"
	r, err := e.c.OpenReceiver(ctx, sub, dlq.SubQueueDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	m := receiveN(t, r, 1)[0]
	if m.MessageID != "e1" || m.DeadLetterReason != "bad event" {
		t.Errorf("received %+v", m)
	}
	if _, err := e.c.OpenSender(ctx, sub); err == nil {
		t.Error("OpenSender to a subscription succeeded")
	}
	snd, err := e.c.OpenSender(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close(context.Background())
	if err := snd.Send(ctx, []replay.Copy{{Of: m, MessageID: "e1-replay"}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Complete(ctx, m); err != nil {
		t.Fatal(err)
	}
	again, err := sr.ReceiveMessages(ctx, 1, nil)
	if err != nil || len(again) != 1 || again[0].MessageID != "e1-replay" || string(again[0].Body) != "event" {
		t.Fatalf("the replayed event: %v, %v", again, err)
	}
	if left, err := e.c.Peek(ctx, sub, dlq.SubQueueDeadLetter, 0, 10); err != nil || len(left) != 0 {
		t.Errorf("left in the subscription's DLQ: %v, %v", left, err)
	}
}

// TestReplayReceiveLatent checks that a batch fills on a slow link: a
// Receive gets the available messages, not only those of the first few
// milliseconds.
func TestReplayReceiveLatent(t *testing.T) {
	e := newReplayEnv(t)
	q := e.queue(t, "orders", nil)
	const n = 300
	msgs := make([]*azservicebus.Message, n)
	for i := range msgs {
		msgs[i] = &azservicebus.Message{Body: bytes.Repeat([]byte{'x'}, 500)}
	}
	s, err := e.sb.NewSender(q, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.NewMessageBatch(ctxFor(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if err := b.AddMessage(m, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SendMessageBatch(ctxFor(t), b, nil); err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	r, err := e.c.OpenReceiver(ctxFor(t), q, dlq.SubQueueMain)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	e.srv.SetLatency(50 * time.Millisecond)
	defer e.srv.SetLatency(0)
	// On a quiet machine one Receive gets all of them. Under -race on a
	// loaded CI machine a pause of the process longer than the time the
	// SDK waits after the first message (timeAfterFirstMessage) can cut a
	// batch (CI: 127 of 300), so a second Receive is allowed; with the
	// batch cut 1 ms after the first message two get 280 of 300 (measured:
	// 161, 119), so this still fails when batches are cut short.
	var counts []int
	total := 0
	for len(counts) < 2 && total < n {
		got, err := r.Receive(ctxFor(t), n-total, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		counts = append(counts, len(got))
		total += len(got)
	}
	t.Logf("Receives on a 50 ms link got %v of %d", counts, n)
	if total < n {
		t.Errorf("two Receives on a 50 ms link got %v, %d of %d messages", counts, total, n)
	}
}

// TestReplayClientClosed checks receivers and senders after their Client
// closed: their calls fail with ErrClosed and closing them is harmless.
func TestReplayClientClosed(t *testing.T) {
	e := newReplayEnv(t)
	q := e.queue(t, "orders", nil)
	e.send(t, q, &azservicebus.Message{MessageID: ptr("m"), Body: []byte("m")})
	ctx := ctxFor(t)
	r, err := e.c.OpenReceiver(ctx, q, dlq.SubQueueMain)
	if err != nil {
		t.Fatal(err)
	}
	m := receiveN(t, r, 1)[0]
	snd, err := e.c.OpenSender(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.Send(ctx, []replay.Copy{{Of: m, MessageID: "c"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Receive(ctx, 1, time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("Receive after Close: %v", err)
	}
	if err := r.Complete(ctx, m); !errors.Is(err, ErrClosed) {
		t.Errorf("Complete after Close: %v", err)
	}
	if err := snd.Send(ctx, []replay.Copy{{Of: m, MessageID: "c2"}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close: %v", err)
	}
	if err := r.Close(ctx); err != nil {
		t.Errorf("receiver Close after the Client's: %v", err)
	}
	if err := snd.Close(ctx); err != nil {
		t.Errorf("sender Close after the Client's: %v", err)
	}
	if _, err := e.c.OpenReceiver(ctx, q, dlq.SubQueueMain); !errors.Is(err, ErrClosed) {
		t.Errorf("OpenReceiver after Close: %v", err)
	}
	if _, err := e.c.OpenSender(ctx, q); !errors.Is(err, ErrClosed) {
		t.Errorf("OpenSender after Close: %v", err)
	}
	if _, err := e.c.Entity(ctx, q); !errors.Is(err, ErrClosed) {
		t.Errorf("Entity after Close: %v", err)
	}
}
