package amqpserver_test

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/amqp"
	"github.com/dlqdash/dlqdash/emulator/broker"
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

// TestRawSessionFilterEncodings drives session receivers by hand, as the JavaScript SDK
// does: its session filter is a plain string (or null for the next session) where the
// Go SDK sends a described value. Both are accepted, and the attach reply carries the
// locked session id in the encoding the client used.
func TestRawSessionFilterEncodings(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) {
		createQueue(t, ns, "sq", func(p *broker.QueueProperties) { p.RequiresSession = true })
		createQueue(t, ns, "q1", nil) // for stillServes
	})
	for _, id := range []string{"a", "b", "c"} {
		sid := id
		if err := env.ns.Send("sq", &goamqp.Message{Data: [][]byte{[]byte(id)}, Properties: &goamqp.MessageProperties{GroupID: &sid}}); err != nil {
			t.Fatal(err)
		}
	}
	c := dialRaw(t, env)
	c.handshake(true)
	c.writeFrame(0, &amqp.Begin{NextOutgoingID: 0, IncomingWindow: 100, OutgoingWindow: 100, HandleMax: 10})
	if _, ok := c.readFrame().Body.(*amqp.Begin); !ok {
		t.Fatal("no begin")
	}
	const key = amqp.Symbol("com.microsoft:session-filter")
	attach := func(handle uint32, filter any) *amqp.Attach {
		t.Helper()
		c.writeFrame(0, &amqp.Attach{Name: fmt.Sprint("session-link-", handle), Handle: handle, Role: amqp.RoleReceiver,
			Source: &amqp.Source{Address: "sq", Filter: map[amqp.Symbol]any{key: filter}}, Target: &amqp.Target{Address: "raw"}})
		for {
			switch b := c.readFrame().Body.(type) {
			case *amqp.Attach:
				return b
			case *amqp.Flow, nil:
			default:
				t.Fatalf("attach %d: got %T", handle, b)
			}
		}
	}
	described := func(v any) *amqp.Described {
		return &amqp.Described{Descriptor: uint64(0x137000000C), Value: v}
	}
	tests := []struct {
		name   string
		filter any
		want   any // the reply's filter value
	}{
		{"plain string (JavaScript SDK)", "a", "a"},
		{"described string (Go SDK)", described("b"), described("b")},
		{"plain null: next session", nil, "c"},
	}
	for i, tt := range tests {
		r := attach(uint32(i), tt.filter)
		if r.Source == nil {
			t.Fatalf("%s: attach refused", tt.name)
		}
		if got := r.Source.Filter[key]; !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: reply filter %#v, want %#v", tt.name, got, tt.want)
		}
		if _, ok := r.Properties["com.microsoft:locked-until-utc"].(int64); !ok {
			t.Errorf("%s: reply properties %v, want com.microsoft:locked-until-utc", tt.name, r.Properties)
		}
	}
	// A filter that is neither a string nor null is refused, and the connection lives on.
	r := attach(3, int32(7))
	if r.Source != nil {
		t.Fatal("attach with an int session filter accepted")
	}
	for {
		if d, ok := c.readFrame().Body.(*amqp.Detach); ok {
			if d.Error == nil || d.Error.Condition != "amqp:not-allowed" {
				t.Fatalf("refusal %+v", d.Error)
			}
			break
		}
	}
	if r := attach(4, "a"); r.Source != nil {
		t.Fatal("session a locked twice")
	}
	stillServes(t, env)
}
