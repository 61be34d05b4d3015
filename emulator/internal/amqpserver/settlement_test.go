package amqpserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

func TestSendMessageBatch(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	s := env.sender(t, "q1")
	batch, err := s.NewMessageBatch(ctx, nil)
	if err != nil {
		t.Fatalf("new batch: %v", err)
	}
	for i := range 10 {
		if err := batch.AddMessage(&azservicebus.Message{Body: []byte(fmt.Sprintf("m%d", i))}, nil); err != nil {
			t.Fatalf("add: %v", err)
		}
	}
	if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
		t.Fatalf("send batch: %v", err)
	}
	r := env.receiver(t, "q1", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	msgs := receiveN(t, r, 10)
	for i, m := range msgs {
		if string(m.Body) != fmt.Sprintf("m%d", i) || *m.SequenceNumber != int64(i+1) {
			t.Errorf("message %d: body %q seq %d", i, m.Body, *m.SequenceNumber)
		}
	}
}

func TestReceiveAndDelete(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	send(t, ctx, env.sender(t, "q1"), &azservicebus.Message{Body: []byte("x")})
	r := env.receiver(t, "q1", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	msgs := receiveN(t, r, 1)
	if string(msgs[0].Body) != "x" {
		t.Fatalf("body %q", msgs[0].Body)
	}
	if err := r.CompleteMessage(ctx, msgs[0], nil); err == nil {
		t.Error("complete of a receive-and-delete message succeeded")
	}
	waitFor(t, "empty queue", func() bool {
		qi, _ := env.ns.Queue("q1")
		return qi.Counts.Active == 0
	})
}

func TestAbandonWithProperties(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	send(t, ctx, env.sender(t, "q1"), &azservicebus.Message{Body: []byte("x")})
	r := env.receiver(t, "q1", nil)
	m := receiveN(t, r, 1)[0]
	if err := r.AbandonMessage(ctx, m, &azservicebus.AbandonMessageOptions{PropertiesToModify: map[string]any{"hello": "world"}}); err != nil {
		t.Fatalf("abandon: %v", err)
	}
	m2 := receiveN(t, r, 1)[0]
	if m2.DeliveryCount != 2 || m2.ApplicationProperties["hello"] != "world" {
		t.Fatalf("after abandon: delivery count %d, props %v", m2.DeliveryCount, m2.ApplicationProperties)
	}
	if err := r.CompleteMessage(ctx, m2, nil); err != nil {
		t.Fatalf("complete: %v", err)
	}
}

func TestDeadLetterAndReceiveFromDLQ(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	send(t, ctx, env.sender(t, "q1"), &azservicebus.Message{Body: []byte("bad")})
	r := env.receiver(t, "q1", nil)
	m := receiveN(t, r, 1)[0]
	err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{
		Reason: strPtr("poison"), ErrorDescription: strPtr("could not parse"),
		PropertiesToModify: map[string]any{"extra": "yes"},
	})
	if err != nil {
		t.Fatalf("dead-letter: %v", err)
	}
	dlq := env.receiver(t, "q1", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	d := receiveN(t, dlq, 1)[0]
	if d.DeadLetterReason == nil || *d.DeadLetterReason != "poison" ||
		d.DeadLetterErrorDescription == nil || *d.DeadLetterErrorDescription != "could not parse" {
		t.Fatalf("dead-letter reason %v / description %v", d.DeadLetterReason, d.DeadLetterErrorDescription)
	}
	if string(d.Body) != "bad" || d.ApplicationProperties["extra"] != "yes" {
		t.Errorf("body %q, props %v", d.Body, d.ApplicationProperties)
	}
	if err := dlq.CompleteMessage(ctx, d, nil); err != nil {
		t.Fatalf("complete from DLQ: %v", err)
	}
}

func TestDeferAndReceiveDeferred(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	send(t, ctx, env.sender(t, "q1"), &azservicebus.Message{Body: []byte("later")})
	r := env.receiver(t, "q1", nil)
	m := receiveN(t, r, 1)[0]
	if err := r.DeferMessage(ctx, m, nil); err != nil {
		t.Fatalf("defer: %v", err)
	}
	got, err := r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive deferred: %d messages, %v", len(got), err)
	}
	d := got[0]
	if d.State != azservicebus.MessageStateDeferred || string(d.Body) != "later" || d.LockToken == [16]byte{} {
		t.Fatalf("deferred message: state %v body %q token %v", d.State, d.Body, d.LockToken)
	}
	// Settled through the management link (the SDK always does for deferred messages).
	if err := r.CompleteMessage(ctx, d, nil); err != nil {
		t.Fatalf("complete deferred: %v", err)
	}
	// A second fetch finds nothing: 404, CodeNotFound (never 204).
	_, err = r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
	if sbCode(err) != azservicebus.CodeNotFound {
		t.Fatalf("receive completed deferred message: %v (code %q)", err, sbCode(err))
	}
}

func TestSettleOnManagementLinkAfterReceiverClosed(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	send(t, ctx, env.sender(t, "q1"), &azservicebus.Message{Body: []byte("a")}, &azservicebus.Message{Body: []byte("b")})
	r1 := env.receiver(t, "q1", nil)
	msgs := receiveN(t, r1, 2)
	if err := r1.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	// Locks survive the link: a second receiver settles by lock token on $management.
	r2 := env.receiver(t, "q1", nil)
	if err := r2.CompleteMessage(ctx, msgs[0], nil); err != nil {
		t.Fatalf("complete via second receiver: %v", err)
	}
	if err := r2.DeadLetterMessage(ctx, msgs[1], &azservicebus.DeadLetterOptions{Reason: strPtr("r")}); err != nil {
		t.Fatalf("dead-letter via second receiver: %v", err)
	}
	waitFor(t, "counts", func() bool {
		qi, _ := env.ns.Queue("q1")
		return qi.Counts.Active == 0 && qi.Counts.DeadLetter == 1
	})
}

func TestPeek(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	s := env.sender(t, "q1")
	for i := range 5 {
		send(t, ctx, s, &azservicebus.Message{Body: []byte(fmt.Sprintf("m%d", i+1))})
	}
	if _, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("future")}}, time.Now().Add(time.Hour), nil); err != nil {
		t.Fatalf("schedule: %v", err)
	}
	r := env.receiver(t, "q1", nil)
	first := receiveN(t, r, 1)[0] // seq 1
	if err := r.DeferMessage(ctx, first, nil); err != nil {
		t.Fatalf("defer: %v", err)
	}
	second := receiveN(t, r, 1)[0] // seq 2
	if err := r.DeadLetterMessage(ctx, second, nil); err != nil {
		t.Fatalf("dead-letter: %v", err)
	}

	peeked, err := r.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to64(1)})
	if err != nil {
		t.Fatalf("peek: %v", err)
	}
	var seqs []int64
	states := map[int64]azservicebus.MessageState{}
	for _, m := range peeked {
		seqs = append(seqs, *m.SequenceNumber)
		states[*m.SequenceNumber] = m.State
		if m.LockedUntil != nil {
			t.Errorf("peeked message %d has LockedUntil", *m.SequenceNumber)
		}
	}
	if !sort.SliceIsSorted(seqs, func(i, j int) bool { return seqs[i] < seqs[j] }) || len(seqs) != 5 {
		t.Fatalf("peeked seqs %v, want 5 ascending (seq 2 is in the DLQ)", seqs)
	}
	if states[1] != azservicebus.MessageStateDeferred || states[3] != azservicebus.MessageStateActive || states[6] != azservicebus.MessageStateScheduled {
		t.Errorf("states %v", states)
	}

	// Explicit paging from a sequence number.
	page, err := r.PeekMessages(ctx, 2, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to64(3)})
	if err != nil || len(page) != 2 || *page[0].SequenceNumber != 3 || *page[1].SequenceNumber != 4 {
		t.Fatalf("page from 3: %v %v", seqsOf(page), err)
	}
	// Implicit paging: the receiver continues after the last message it peeked itself.
	var all []int64
	for {
		page, err := r.PeekMessages(ctx, 2, nil)
		if err != nil {
			t.Fatalf("implicit page: %v", err)
		}
		if len(page) == 0 {
			break
		}
		all = append(all, seqsOf(page)...)
	}
	if fmt.Sprint(all) != "[1 3 4 5 6]" {
		t.Fatalf("implicit paging saw %v", all)
	}

	dlq := env.receiver(t, "q1", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	dl, err := dlq.PeekMessages(ctx, 10, nil)
	if err != nil || len(dl) != 1 || *dl[0].SequenceNumber != 2 {
		t.Fatalf("DLQ peek: %v %v", seqsOf(dl), err)
	}
}

func to64(v int64) *int64 { return &v }

func seqsOf(ms []*azservicebus.ReceivedMessage) []int64 {
	out := make([]int64, 0, len(ms))
	for _, m := range ms {
		out = append(out, *m.SequenceNumber)
	}
	return out
}

func TestRenewMessageLock(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) {
		createQueue(t, ns, "q1", func(p *broker.QueueProperties) { p.LockDuration = 5 * time.Second })
	})
	ctx := testCtx(t)
	send(t, ctx, env.sender(t, "q1"), &azservicebus.Message{Body: []byte("x")})
	r := env.receiver(t, "q1", nil)
	m := receiveN(t, r, 1)[0]
	before := *m.LockedUntil
	waitFor(t, "clock to move", func() bool { return time.Since(before.Add(-5*time.Second)) > 50*time.Millisecond })
	if err := r.RenewMessageLock(ctx, m, nil); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if !m.LockedUntil.After(before) {
		t.Fatalf("locked until %v not after %v", m.LockedUntil, before)
	}
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if err := r.RenewMessageLock(ctx, m, nil); sbCode(err) != azservicebus.CodeLockLost {
		t.Fatalf("renew after complete: %v (code %q)", err, sbCode(err))
	}
}

func TestScheduleAndCancel(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	s := env.sender(t, "q1")
	seqs, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("a")}, {Body: []byte("b")}}, time.Now().Add(time.Hour), nil)
	if err != nil || len(seqs) != 2 {
		t.Fatalf("schedule: %v %v", seqs, err)
	}
	qi, _ := env.ns.Queue("q1")
	if qi.Counts.Scheduled != 2 {
		t.Fatalf("scheduled count %d", qi.Counts.Scheduled)
	}
	if err := s.CancelScheduledMessages(ctx, seqs[:1], nil); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	qi, _ = env.ns.Queue("q1")
	if qi.Counts.Scheduled != 1 {
		t.Fatalf("scheduled count after cancel %d", qi.Counts.Scheduled)
	}
	// A message scheduled for now becomes receivable.
	if _, err := s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("now")}}, time.Now().Add(200*time.Millisecond), nil); err != nil {
		t.Fatalf("schedule soon: %v", err)
	}
	r := env.receiver(t, "q1", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	m := receiveN(t, r, 1)[0]
	if string(m.Body) != "now" {
		t.Fatalf("body %q", m.Body)
	}
}

func TestLockExpiryRedeliveryAndLockLost(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) {
		createQueue(t, ns, "q1", func(p *broker.QueueProperties) { p.LockDuration = time.Second })
	})
	ctx := testCtx(t)
	send(t, ctx, env.sender(t, "q1"), &azservicebus.Message{Body: []byte("x")})
	r := env.receiver(t, "q1", nil)
	m := receiveN(t, r, 1)[0]
	// Not settled: after the lock expires the message comes again, counted.
	m2 := receiveN(t, r, 1)[0]
	if m2.DeliveryCount != 2 || *m2.SequenceNumber != *m.SequenceNumber {
		t.Fatalf("redelivery: count %d seq %d", m2.DeliveryCount, *m2.SequenceNumber)
	}
	err := r.CompleteMessage(ctx, m, nil)
	if sbCode(err) != azservicebus.CodeLockLost {
		t.Fatalf("complete with an expired lock: %v (code %q)", err, sbCode(err))
	}
	if err := r.CompleteMessage(ctx, m2, nil); err != nil {
		t.Fatalf("complete redelivered: %v", err)
	}
}

func TestMaxDeliveryCount(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) {
		createQueue(t, ns, "q1", func(p *broker.QueueProperties) { p.MaxDeliveryCount = 2 })
	})
	ctx := testCtx(t)
	send(t, ctx, env.sender(t, "q1"), &azservicebus.Message{Body: []byte("x")})
	r := env.receiver(t, "q1", nil)
	for range 2 {
		m := receiveN(t, r, 1)[0]
		if err := r.AbandonMessage(ctx, m, nil); err != nil {
			t.Fatalf("abandon: %v", err)
		}
	}
	dlq := env.receiver(t, "q1", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	d := receiveN(t, dlq, 1)[0]
	if d.DeadLetterReason == nil || *d.DeadLetterReason != "MaxDeliveryCountExceeded" {
		t.Fatalf("reason %v", d.DeadLetterReason)
	}
}

func TestNotFound(t *testing.T) {
	env := startEmulator(t, nil)
	ctx := testCtx(t)
	err := env.sender(t, "nope").SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
	if sbCode(err) != azservicebus.CodeNotFound {
		t.Fatalf("send to a missing queue: %v (code %q)", err, sbCode(err))
	}
	_, err = env.receiver(t, "nope", nil).PeekMessages(ctx, 1, nil)
	if sbCode(err) != azservicebus.CodeNotFound {
		t.Fatalf("peek a missing queue: %v (code %q)", err, sbCode(err))
	}
}

func TestUnauthorized(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	bad := strings.Replace(env.conn, "SharedAccessKey=SAS_KEY_VALUE", "SharedAccessKey=wrong", 1)
	client := newClient(t, bad)
	defer client.Close(ctx)
	s, err := client.NewSender("q1", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
	if sbCode(err) != azservicebus.CodeUnauthorizedAccess {
		t.Fatalf("send with a wrong key: %v (code %q)", err, sbCode(err))
	}
}

func TestServerBusy(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	s := env.sender(t, "q1")
	send(t, ctx, s, &azservicebus.Message{Body: []byte("warm-up")})
	env.ns.InjectServerBusy("q1", 100, time.Time{})
	err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
	var amqpErr *goamqp.Error
	if !errors.As(err, &amqpErr) || amqpErr.Condition != "com.microsoft:server-busy" {
		t.Fatalf("send while busy: %v", err)
	}
	env.ns.ClearFaults()
	send(t, ctx, s, &azservicebus.Message{Body: []byte("after")})
}

func TestLargeMessageBothWays(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	body := make([]byte, 200*1024)
	for i := range body {
		body[i] = byte(i * 7)
	}
	send(t, ctx, env.sender(t, "q1"), &azservicebus.Message{Body: body})
	r := env.receiver(t, "q1", nil)
	m := receiveN(t, r, 1)[0]
	if !bytes.Equal(m.Body, body) {
		t.Fatalf("body of %d bytes differs", len(m.Body))
	}
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatalf("complete: %v", err)
	}
	// Above the 256 KiB limit the SDK gets ErrMessageTooLarge.
	err := env.sender(t, "q1").SendMessage(ctx, &azservicebus.Message{Body: make([]byte, 300*1024)}, nil)
	if !errors.Is(err, azservicebus.ErrMessageTooLarge) {
		t.Fatalf("oversized send: %v", err)
	}
}

func TestTopicFanOut(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) {
		if _, err := ns.CreateTopic("t1", broker.DefaultTopicProperties()); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"s1", "s2"} {
			if _, err := ns.CreateSubscription("t1", s, broker.DefaultSubscriptionProperties()); err != nil {
				t.Fatal(err)
			}
		}
	})
	ctx := testCtx(t)
	send(t, ctx, env.sender(t, "t1"), &azservicebus.Message{Body: []byte("fan")})
	for _, sub := range []string{"s1", "s2"} {
		r, err := env.client.NewReceiverForSubscription("t1", sub, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := receiveN(t, r, 1)[0]
		if string(m.Body) != "fan" {
			t.Fatalf("%s: body %q", sub, m.Body)
		}
		if sub == "s1" {
			if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: strPtr("sub-dl")}); err != nil {
				t.Fatalf("%s: dead-letter: %v", sub, err)
			}
		} else if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatalf("%s: complete: %v", sub, err)
		}
		_ = r.Close(ctx)
	}
	dlq, err := env.client.NewReceiverForSubscription("t1", "s1", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close(ctx)
	peeked, err := dlq.PeekMessages(ctx, 10, nil)
	if err != nil || len(peeked) != 1 || deref(peeked[0].DeadLetterReason) != "sub-dl" {
		t.Fatalf("subscription DLQ peek: %v %v", peeked, err)
	}
	d := receiveN(t, dlq, 1)[0]
	if err := dlq.CompleteMessage(ctx, d, nil); err != nil {
		t.Fatalf("complete from subscription DLQ: %v", err)
	}
}

// TestReleasedMessagesAreNotCounted: messages arriving on leftover credit after
// ReceiveMessages returned are released by the SDK; that must not count as a delivery.
func TestReleasedMessagesAreNotCounted(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) {
		createQueue(t, ns, "q1", func(p *broker.QueueProperties) { p.MaxDeliveryCount = 1 })
	})
	ctx := testCtx(t)
	s := env.sender(t, "q1")
	send(t, ctx, s, &azservicebus.Message{Body: []byte("first")})
	r := env.receiver(t, "q1", nil)
	first := receiveN(t, r, 1)[0]
	if err := r.CompleteMessage(ctx, first, nil); err != nil {
		t.Fatal(err)
	}
	// 99 credits are still outstanding: these go out and come back released.
	for i := range 5 {
		send(t, ctx, s, &azservicebus.Message{Body: []byte(fmt.Sprintf("later-%d", i))})
	}
	msgs := receiveN(t, r, 5)
	for _, m := range msgs {
		if m.DeliveryCount != 1 {
			t.Errorf("%s: delivery count %d after release, want 1", m.Body, m.DeliveryCount)
		}
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			t.Fatalf("complete: %v", err)
		}
	}
	qi, _ := env.ns.Queue("q1")
	if qi.Counts.DeadLetter != 0 {
		t.Fatalf("%d messages dead-lettered by releases", qi.Counts.DeadLetter)
	}
}

// TestRandomSettlementSoak: concurrent receivers settle at random; every message ends
// up completed or dead-lettered exactly once.
func TestRandomSettlementSoak(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) {
		createQueue(t, ns, "q1", func(p *broker.QueueProperties) { p.MaxDeliveryCount = 3 })
	})
	ctx := testCtx(t)
	const total = 600
	s := env.sender(t, "q1")
	for i := 0; i < total; i += 100 {
		batch, err := s.NewMessageBatch(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 100 {
			if err := batch.AddMessage(&azservicebus.Message{Body: []byte(fmt.Sprint(i + j))}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
	}
	var completed, deadLettered atomicCounter
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := env.client.NewReceiverForQueue("q1", nil)
			if err != nil {
				errs <- err
				return
			}
			defer r.Close(context.Background())
			n := w
			for rctx.Err() == nil {
				msgs, err := r.ReceiveMessages(rctx, 20, nil)
				if err != nil {
					return
				}
				for _, m := range msgs {
					n++
					var err error
					switch n % 4 {
					case 0:
						err = r.AbandonMessage(ctx, m, nil)
					case 1:
						err = r.DeadLetterMessage(ctx, m, nil)
						deadLettered.add(err)
					default:
						err = r.CompleteMessage(ctx, m, nil)
						completed.add(err)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	waitFor(t, "all messages settled", func() bool {
		qi, _ := env.ns.Queue("q1")
		return qi.Counts.Active == 0 && qi.Counts.DeadLetter+completed.get() == total
	})
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("worker: %v", err)
	}
	qi, _ := env.ns.Queue("q1")
	if qi.Counts.DeadLetter < deadLettered.get() {
		t.Errorf("DLQ has %d, explicitly dead-lettered %d", qi.Counts.DeadLetter, deadLettered.get())
	}
}

type atomicCounter struct {
	mu sync.Mutex
	n  int64
}

func (c *atomicCounter) add(err error) {
	if err == nil {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
}

func (c *atomicCounter) get() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
