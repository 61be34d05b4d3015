package amqpserver_test

// Each injected fault (issue 4, "Fault injection"; docs/servicebus-protocol.md §11) as the real
// azservicebus SDK sees it: the error code or condition it reports, and the
// recovery it performs.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

// faultRetries allows two retries (three attempts) with short delays.
var faultRetries = azservicebus.RetryOptions{MaxRetries: 2, RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 40 * time.Millisecond}

// faultClient is an SDK client on env's emulator with faultRetries.
func faultClient(tb testing.TB, env *testEnv) *azservicebus.Client {
	tb.Helper()
	c, err := azservicebus.NewClientFromConnectionString(env.conn, &azservicebus.ClientOptions{RetryOptions: faultRetries})
	if err != nil {
		tb.Fatalf("new client: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func faultSender(tb testing.TB, c *azservicebus.Client, entity string) *azservicebus.Sender {
	tb.Helper()
	s, err := c.NewSender(entity, nil)
	if err != nil {
		tb.Fatalf("new sender: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func faultReceiver(tb testing.TB, c *azservicebus.Client, queue string) *azservicebus.Receiver {
	tb.Helper()
	r, err := c.NewReceiverForQueue(queue, nil)
	if err != nil {
		tb.Fatalf("new receiver: %v", err)
	}
	tb.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// isServerBusy reports whether err is the rejection com.microsoft:server-busy,
// which the SDK returns as a bare *amqp.Error once its retries are spent.
func isServerBusy(err error) bool {
	var ae *goamqp.Error
	return errors.As(err, &ae) && ae.Condition == "com.microsoft:server-busy"
}

// rpcStatus is the management status code of an SDK RPC error (its type is
// internal; the method is not), or 0.
func rpcStatus(err error) int {
	var rc interface{ RPCCode() int }
	if errors.As(err, &rc) {
		return rc.RPCCode()
	}
	return 0
}

func activeCount(tb testing.TB, ns *broker.Namespace, queue string) int64 {
	tb.Helper()
	q, err := ns.Queue(queue)
	if err != nil {
		tb.Fatalf("queue %s: %v", queue, err)
	}
	return q.Counts.Active
}

// TestFaultServerBusyOpsOnSend: server-busy for the next N operations. The SDK
// retries a rejected transfer, so N ≤ MaxRetries is invisible to the caller;
// N > MaxRetries fails with the server-busy condition. Rejected sends store nothing.
func TestFaultServerBusyOpsOnSend(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	s := faultSender(t, faultClient(t, env), "q1")
	send(t, ctx, s, &azservicebus.Message{Body: []byte("warm-up")})

	// Two busy answers, three attempts: the third one lands.
	env.ns.InjectServerBusy("q1", int(faultRetries.MaxRetries), time.Time{})
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("retried")}, nil); err != nil {
		t.Fatalf("send with %d busy answers and %d retries: %v", faultRetries.MaxRetries, faultRetries.MaxRetries, err)
	}
	if n := activeCount(t, env.ns, "q1"); n != 2 {
		t.Fatalf("active messages = %d, want 2", n)
	}

	// One more busy answer than attempts: the caller sees server-busy.
	env.ns.InjectServerBusy("Q1", int(faultRetries.MaxRetries)+1, time.Time{}) // names are case-insensitive
	err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("refused")}, nil)
	if !isServerBusy(err) {
		t.Fatalf("send with %d busy answers and %d retries: %v, want com.microsoft:server-busy", faultRetries.MaxRetries+1, faultRetries.MaxRetries, err)
	}
	if n := activeCount(t, env.ns, "q1"); n != 2 {
		t.Fatalf("active messages after refused sends = %d, want 2", n)
	}
	// All three operations were used up: the next send succeeds at once.
	send(t, ctx, s, &azservicebus.Message{Body: []byte("after")})
	if n := activeCount(t, env.ns, "q1"); n != 3 {
		t.Fatalf("active messages = %d, want 3", n)
	}
}

// TestFaultServerBusySpanOnManagement: server-busy for a time span turns peek and
// receive-deferred (management operations) into status 503, which the SDK retries
// and then returns; once the span ends (or faults are cleared) both work again.
func TestFaultServerBusySpanOnManagement(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	c := faultClient(t, env)
	send(t, ctx, faultSender(t, c, "q1"), &azservicebus.Message{Body: []byte("deferred")})
	r := faultReceiver(t, c, "q1")
	m := receiveN(t, r, 1)[0]
	if err := r.DeferMessage(ctx, m, nil); err != nil {
		t.Fatalf("defer: %v", err)
	}
	seq := *m.SequenceNumber
	if _, err := r.PeekMessages(ctx, 1, nil); err != nil { // management link up
		t.Fatalf("warm-up peek: %v", err)
	}

	env.ns.InjectServerBusy("q1", 0, time.Now().Add(time.Hour))
	_, err := r.PeekMessages(ctx, 1, nil)
	if rpcStatus(err) != 503 {
		t.Fatalf("peek while busy: %v (status %d), want a 503 RPC error", err, rpcStatus(err))
	}
	_, err = r.ReceiveDeferredMessages(ctx, []int64{seq}, nil)
	if rpcStatus(err) != 503 {
		t.Fatalf("receive-deferred while busy: %v (status %d), want a 503 RPC error", err, rpcStatus(err))
	}
	env.ns.ClearFaults()
	// The receiver remembers where the last peek ended: start at the message again.
	if got, err := r.PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &seq}); err != nil || len(got) != 1 {
		t.Fatalf("peek after ClearFaults: %d messages, %v", len(got), err)
	}

	// A short span ends by itself.
	env.ns.InjectServerBusy("q1", 0, time.Now().Add(300*time.Millisecond))
	if _, err := r.PeekMessages(ctx, 1, nil); rpcStatus(err) != 503 {
		t.Fatalf("peek inside a 300ms busy span: %v", err)
	}
	waitFor(t, "the busy span to end", func() bool {
		_, err := r.PeekMessages(ctx, 1, nil)
		return err == nil
	})
	got, err := r.ReceiveDeferredMessages(ctx, []int64{seq}, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive-deferred after the span: %d messages, %v", len(got), err)
	}
	if err := r.CompleteMessage(ctx, got[0], nil); err != nil {
		t.Fatalf("complete: %v", err)
	}
}

// TestFaultExpireLocks: a lock expired early makes the settlement fail with
// CodeLockLost and the message comes back with a higher delivery count.
func TestFaultExpireLocks(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) }) // 1-minute locks
	ctx := testCtx(t)
	c := faultClient(t, env)
	send(t, ctx, faultSender(t, c, "q1"), &azservicebus.Message{MessageID: strPtr("m1"), Body: []byte("x")})
	r := faultReceiver(t, c, "q1")
	first := receiveN(t, r, 1)[0]

	env.ns.ExpireLocks("q1")
	err := r.CompleteMessage(ctx, first, nil)
	if sbCode(err) != azservicebus.CodeLockLost {
		t.Fatalf("complete after ExpireLocks: %v, want CodeLockLost", err)
	}
	again := receiveN(t, r, 1)[0]
	if again.MessageID != "m1" || again.DeliveryCount <= first.DeliveryCount {
		t.Fatalf("redelivered %q with delivery count %d, first delivery had %d", again.MessageID, again.DeliveryCount, first.DeliveryCount)
	}
	if err := r.CompleteMessage(ctx, again, nil); err != nil {
		t.Fatalf("complete the redelivered message: %v", err)
	}
	if n := activeCount(t, env.ns, "q1"); n != 0 {
		t.Fatalf("active messages = %d, want 0", n)
	}
}

// TestFaultDropConnections: close{amqp:connection:forced} on every connection.
// The SDK reconnects: a send right after the drop succeeds (within its retries),
// a receive that was waiting when the drop happened comes back, and the receiver
// then gets the message.
func TestFaultDropConnections(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	c := faultClient(t, env)
	s := faultSender(t, c, "q1")
	send(t, ctx, s, &azservicebus.Message{Body: []byte("warm-up")})
	r := faultReceiver(t, c, "q1")
	receiveN(t, r, 1) // links attached; the message stays locked and is ignored

	type result struct {
		msgs []*azservicebus.ReceivedMessage
		err  error
	}
	inflight := make(chan result, 1)
	go func() {
		msgs, err := r.ReceiveMessages(ctx, 1, nil)
		inflight <- result{msgs, err}
	}()
	// The waiting receive has issued credit once peek answers on the same receiver.
	waitFor(t, "receiver links", func() bool {
		_, err := r.PeekMessages(ctx, 1, nil)
		return err == nil
	})

	env.srv.DropConnections()
	if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: strPtr("after"), Body: []byte("after")}, nil); err != nil {
		t.Fatalf("send right after DropConnections: %v", err)
	}

	var got []*azservicebus.ReceivedMessage
	select {
	case res := <-inflight:
		// Either the recovered link delivered the message, or the receive reports
		// the lost connection; both are recoveries the caller can handle.
		if res.err != nil {
			t.Logf("in-flight receive after the drop: %v", res.err)
		}
		got = res.msgs
	case <-time.After(15 * time.Second):
		t.Fatal("in-flight ReceiveMessages still blocked 15s after DropConnections")
	}
	for len(got) == 0 || got[0].MessageID != "after" {
		got = receiveN(t, r, 1)
	}
	if err := r.CompleteMessage(ctx, got[0], nil); err != nil {
		t.Fatalf("complete after the drop: %v", err)
	}
}

// TestFaultDeleteQueueInUse: deleting a queue while a receiver waits on it and a
// sender has a link to it. The receive ends (with an error or nothing); sends fail,
// and a new sender gets CodeNotFound.
func TestFaultDeleteQueueInUse(t *testing.T) {
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	c := faultClient(t, env)
	s := faultSender(t, c, "q1")
	send(t, ctx, s, &azservicebus.Message{Body: []byte("warm-up")})
	r := faultReceiver(t, c, "q1")
	receiveN(t, r, 1)

	type result struct {
		n   int
		err error
	}
	inflight := make(chan result, 1)
	go func() {
		msgs, err := r.ReceiveMessages(ctx, 5, nil)
		inflight <- result{len(msgs), err}
	}()
	waitFor(t, "receiver links", func() bool {
		_, err := r.PeekMessages(ctx, 1, nil)
		return err == nil
	})

	if err := env.ns.DeleteQueue("q1"); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-inflight:
		if res.err == nil && res.n != 0 {
			t.Fatalf("receive on a deleted queue returned %d messages", res.n)
		}
		t.Logf("in-flight receive after the delete: %d messages, %v", res.n, res.err)
	case <-time.After(15 * time.Second):
		t.Fatal("in-flight ReceiveMessages still blocked 15s after the queue was deleted")
	}

	// The sender that was attached fails: not-found, as a code or a condition.
	err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("to nowhere")}, nil)
	t.Logf("send with the old sender after the delete: %v", err)
	var ae *goamqp.Error
	if sbCode(err) != azservicebus.CodeNotFound && !(errors.As(err, &ae) && ae.Condition == goamqp.ErrCondNotFound) {
		t.Fatalf("send with the old sender after the delete: %v, want not-found", err)
	}
	// A new sender's token request names a missing entity: CodeNotFound.
	err = faultSender(t, c, "q1").SendMessage(ctx, &azservicebus.Message{Body: []byte("to nowhere")}, nil)
	if sbCode(err) != azservicebus.CodeNotFound {
		t.Fatalf("send with a new sender after the delete: %v, want CodeNotFound", err)
	}
	// Receiving from the deleted queue fails too.
	if _, err := faultReceiver(t, c, "q1").ReceiveMessages(ctx, 1, nil); err == nil {
		t.Fatal("receive with a new receiver on the deleted queue succeeded")
	}
}

// TestFaultLatency: every reply is delayed by the latency, so an operation takes
// at least that long, and a context shorter than it ends the operation with
// context.DeadlineExceeded.
func TestFaultLatency(t *testing.T) {
	const latency = 200 * time.Millisecond
	const slack = 10 * time.Millisecond // timer granularity
	env := startEmulator(t, func(ns *broker.Namespace) { createQueue(t, ns, "q1", nil) })
	ctx := testCtx(t)
	c := faultClient(t, env)
	s := faultSender(t, c, "q1")
	r := faultReceiver(t, c, "q1")
	send(t, ctx, s, &azservicebus.Message{Body: []byte("warm-up")})
	if _, err := r.PeekMessages(ctx, 1, nil); err != nil {
		t.Fatalf("warm-up peek: %v", err)
	}

	env.srv.SetLatency(latency)
	defer env.srv.SetLatency(0)
	start := time.Now()
	send(t, ctx, s, &azservicebus.Message{Body: []byte("slow")})
	if d := time.Since(start); d < latency-slack {
		t.Fatalf("send took %v with %v latency", d, latency)
	}
	start = time.Now()
	if _, err := r.PeekMessages(ctx, 1, nil); err != nil {
		t.Fatalf("peek with latency: %v", err)
	}
	if d := time.Since(start); d < latency-slack {
		t.Fatalf("peek took %v with %v latency", d, latency)
	}

	short, cancel := context.WithTimeout(ctx, latency/4)
	err := s.SendMessage(short, &azservicebus.Message{Body: []byte("impatient")}, nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send with a context shorter than the latency: %v, want context.DeadlineExceeded", err)
	}
	short, cancel = context.WithTimeout(ctx, latency/4)
	_, err = r.PeekMessages(short, 1, nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("peek with a context shorter than the latency: %v, want context.DeadlineExceeded", err)
	}

	env.srv.SetLatency(0)
	send(t, ctx, s, &azservicebus.Message{Body: []byte("fast again")})
	if _, err := r.PeekMessages(ctx, 1, nil); err != nil {
		t.Fatalf("peek after the latency was removed: %v", err)
	}
}
