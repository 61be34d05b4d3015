package emulator_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/servicebus/emulator/broker"
)

func TestSessions(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) {
		createQueue(t, ns, "sq", func(p *broker.QueueProperties) { p.RequiresSession = true })
	})
	ctx := testCtx(t)
	s := env.sender(t, "sq")
	send(t, ctx, s,
		&azservicebus.Message{Body: []byte("a1"), SessionID: strPtr("a")},
		&azservicebus.Message{Body: []byte("b1"), SessionID: strPtr("b")},
		&azservicebus.Message{Body: []byte("a2"), SessionID: strPtr("a")},
	)

	ra, err := env.client.AcceptSessionForQueue(ctx, "sq", "a", nil)
	if err != nil {
		t.Fatalf("accept session a: %v", err)
	}
	defer ra.Close(ctx)
	if ra.SessionID() != "a" || ra.LockedUntil().IsZero() {
		t.Fatalf("session id %q, locked until %v", ra.SessionID(), ra.LockedUntil())
	}
	msgs := receiveN(t, ra, 2)
	if string(msgs[0].Body) != "a1" || string(msgs[1].Body) != "a2" || *msgs[0].SessionID != "a" {
		t.Fatalf("session a got %q %q", msgs[0].Body, msgs[1].Body)
	}
	if err := ra.CompleteMessage(ctx, msgs[0], nil); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if err := ra.DeadLetterMessage(ctx, msgs[1], &azservicebus.DeadLetterOptions{Reason: strPtr("session-dl")}); err != nil {
		t.Fatalf("dead-letter in session: %v", err)
	}

	// State round trip.
	if err := ra.SetSessionState(ctx, []byte("state-1"), nil); err != nil {
		t.Fatalf("set state: %v", err)
	}
	st, err := ra.GetSessionState(ctx, nil)
	if err != nil || string(st) != "state-1" {
		t.Fatalf("get state: %q %v", st, err)
	}
	if err := ra.SetSessionState(ctx, nil, nil); err != nil {
		t.Fatalf("clear state: %v", err)
	}
	st, err = ra.GetSessionState(ctx, nil)
	if err != nil || st != nil {
		t.Fatalf("state after clear: %q %v", st, err)
	}
	before := ra.LockedUntil()
	waitFor(t, "clock to move", func() bool { return time.Since(before.Add(-time.Minute)) > 20*time.Millisecond })
	if err := ra.RenewSessionLock(ctx, nil); err != nil {
		t.Fatalf("renew session lock: %v", err)
	}
	if !ra.LockedUntil().After(before) {
		t.Errorf("session lock %v not after %v", ra.LockedUntil(), before)
	}

	// Peek shows session ids.
	peeked, err := ra.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: to64(1)})
	if err != nil {
		t.Fatalf("peek: %v", err)
	}
	for _, m := range peeked {
		if m.SessionID == nil {
			t.Errorf("peeked message %d without session id", *m.SequenceNumber)
		}
	}

	// A second receiver cannot lock session a.
	if r2, err := env.client.AcceptSessionForQueue(ctx, "sq", "a", nil); err == nil {
		r2.Close(ctx)
		t.Fatal("second accept of a locked session succeeded")
	}

	// Accept-next gets the only other session with messages.
	nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rb, err := env.client.AcceptNextSessionForQueue(nctx, "sq", nil)
	if err != nil {
		t.Fatalf("accept next: %v", err)
	}
	defer rb.Close(ctx)
	if rb.SessionID() != "b" {
		t.Fatalf("accept next got session %q", rb.SessionID())
	}
	mb := receiveN(t, rb, 1)[0]
	if err := rb.CompleteMessage(ctx, mb, nil); err != nil {
		t.Fatalf("complete b: %v", err)
	}

	// The dead-lettered session message is in the DLQ with its session id.
	dlq := env.receiver(t, "sq", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	d := receiveN(t, dlq, 1)[0]
	if d.SessionID == nil || *d.SessionID != "a" || d.DeadLetterReason == nil || *d.DeadLetterReason != "session-dl" {
		t.Fatalf("DLQ message session %v reason %v", d.SessionID, d.DeadLetterReason)
	}

	// Closing the receiver releases the session lock: session a can be accepted again.
	if err := ra.Close(ctx); err != nil {
		t.Fatalf("close session receiver: %v", err)
	}
	ra2, err := env.client.AcceptSessionForQueue(ctx, "sq", "a", nil)
	if err != nil {
		t.Fatalf("accept session a again: %v", err)
	}
	if err := ra2.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}

	// No session left: accept-next times out with CodeTimeout.
	tctx, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	if _, err := env.client.AcceptNextSessionForQueue(tctx, "sq", nil); sbCode(err) != azservicebus.CodeTimeout {
		t.Fatalf("accept next with no sessions: %v (code %q)", err, sbCode(err))
	}
}

func TestConcurrentSendersAndReceivers(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	const senders, perSender, receivers = 4, 100, 3
	var wg sync.WaitGroup
	errs := make(chan error, senders+receivers)
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := env.client.NewSender("q1", nil)
			if err != nil {
				errs <- err
				return
			}
			defer s.Close(ctx)
			for j := range perSender {
				if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(fmt.Sprintf("%d-%d", i, j))}, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var mu sync.Mutex
	seen := map[string]int{}
	total := senders * perSender
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := env.client.NewReceiverForQueue("q1", nil)
			if err != nil {
				errs <- err
				return
			}
			defer r.Close(context.Background())
			for {
				msgs, err := r.ReceiveMessages(rctx, 50, nil)
				if err != nil {
					if rctx.Err() == nil {
						errs <- err
					}
					return
				}
				for _, m := range msgs {
					if err := r.CompleteMessage(ctx, m, nil); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					seen[string(m.Body)]++
					done := len(seen) == total
					mu.Unlock()
					if done {
						cancel()
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("worker: %v", err)
	}
	if len(seen) != total {
		t.Fatalf("received %d distinct messages, want %d", len(seen), total)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("message %s completed %d times", k, n)
		}
	}
}

func TestListSessions(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) {
		createQueue(t, ns, "sq", func(p *broker.QueueProperties) { p.RequiresSession = true })
	})
	ctx := testCtx(t)
	s := env.sender(t, "sq")
	want := map[string]bool{}
	for i := range 150 {
		id := fmt.Sprintf("s%03d", i)
		want[id] = true
		send(t, ctx, s, &azservicebus.Message{Body: []byte("x"), SessionID: &id})
	}
	got := map[string]bool{}
	pager := env.client.NewListSessionsForQueuePager("sq", nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("list sessions: %v", err)
		}
		for _, id := range page.Sessions {
			got[id] = true
		}
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d sessions, want %d", len(got), len(want))
	}
}
