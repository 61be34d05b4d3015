package servicebus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
	"github.com/dlqdash/dlqdash/replay"
)

func TestWithin(t *testing.T) {
	t.Run("honoured", func(t *testing.T) {
		start := time.Now()
		o := within(context.Background(), 100*time.Millisecond, func(ctx context.Context) error {
			<-ctx.Done()
			return fmt.Errorf("sdk: %w", ctx.Err())
		})
		took := time.Since(start)
		if !o.timedOut || !o.expired || o.abandoned || !errors.Is(o.err, context.DeadlineExceeded) {
			t.Fatalf("outcome %+v", o)
		}
		if took < 100*time.Millisecond || took > 100*time.Millisecond+abandonGrace/2 {
			t.Fatalf("took %v", took)
		}
	})
	t.Run("ignored", func(t *testing.T) {
		release := make(chan struct{})
		returned := make(chan struct{})
		start := time.Now()
		o := within(context.Background(), 100*time.Millisecond, func(context.Context) error {
			defer close(returned)
			<-release // an SDK path that waits without its context
			return nil
		})
		took := time.Since(start)
		if !o.timedOut || !o.abandoned || !o.broken() || !errors.Is(o.err, context.DeadlineExceeded) {
			t.Fatalf("outcome %+v", o)
		}
		if took < 100*time.Millisecond+abandonGrace || took > 100*time.Millisecond+abandonGrace+500*time.Millisecond {
			t.Fatalf("took %v, want the deadline plus the grace", took)
		}
		close(release)
		<-returned
	})
	t.Run("caller's cancellation", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		o := within(ctx, time.Minute, func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		})
		if o.timedOut || o.expired || o.broken() || !errors.Is(o.err, context.Canceled) {
			t.Fatalf("outcome %+v", o)
		}
	})
	t.Run("answered", func(t *testing.T) {
		boom := errors.New("boom")
		if o := within(context.Background(), time.Second, func(context.Context) error { return boom }); o.err != boom || o.broken() {
			t.Fatalf("outcome %+v", o)
		}
	})
}

func TestTimeoutsDefaults(t *testing.T) {
	got := Timeouts{Send: time.Second, Admin: -1}.withDefaults()
	want := Timeouts{Attach: DefaultTimeout, Send: time.Second, Receive: DefaultTimeout, Settle: DefaultTimeout,
		Peek: DefaultTimeout, Admin: DefaultTimeout}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if d := want.peek(5000); d != DefaultTimeout+10*time.Second {
		t.Fatalf("peek(5000) = %v", d)
	}
	for d, w := range map[time.Duration]string{10 * time.Second: "10 s", 250 * time.Millisecond: "250 ms", 1500 * time.Millisecond: "1.5 s"} {
		if got := words(d); got != w {
			t.Errorf("words(%v) = %q, want %q", d, got, w)
		}
	}
}

// frozenEnv is the emulator behind a Freezable proxy, the adapter on the
// proxy with short deadlines, and a DLQ to work on.
type frozenEnv struct {
	emu *emulator.Emulator
	fz  *emulatortest.Freezable
	c   *Client
	tm  Timeouts
}

// openDLQ opens a receiver on the dead-letter queue of "orders", closed
// when the test ends.
func (e *frozenEnv) openDLQ(t *testing.T, ctx context.Context) replay.Receiver {
	t.Helper()
	r, err := e.c.OpenReceiver(ctx, "orders", dlq.SubQueueDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

// openSender opens a sender to path, closed when the test ends.
func (e *frozenEnv) openSender(t *testing.T, ctx context.Context, path string) replay.Sender {
	t.Helper()
	snd, err := e.c.OpenSender(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snd.Close(context.Background()) })
	return snd
}

func newFrozenEnv(t *testing.T, tm Timeouts, lock time.Duration, n int) *frozenEnv {
	t.Helper()
	emu := emulatortest.Start(t, emulator.Config{})
	ns := emu.Namespace()
	p := broker.DefaultQueueProperties()
	p.LockDuration = lock
	for _, q := range []string{"orders", "target"} {
		if _, err := ns.CreateQueue(q, p); err != nil {
			t.Fatal(err)
		}
	}
	emulatortest.FillDLQ(t, ns, "orders", n, 64, nil)
	fz := emulatortest.StartFreezable(t, emu)
	c, err := Open(t.Context(), fz.ConnectionString(), Options{AdminEndpoint: fz.AdminURL(), Timeouts: tm, Logger: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		fz.Thaw()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return &frozenEnv{emu: emu, fz: fz, c: c, tm: tm.withDefaults()}
}

// testLog logs the adapter's debug records (links replaced) when
// SERVICEBUS_TEST_LOG is set.
func testLog(t *testing.T) *slog.Logger {
	if os.Getenv("SERVICEBUS_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

// timed runs f with no deadline of the caller's and reports how long it
// took; a call still running after limit fails the test (it hangs).
func timed(t *testing.T, name string, limit time.Duration, f func(ctx context.Context) error) (time.Duration, error) {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- f(context.Background()) }()
	select {
	case err := <-done:
		return time.Since(start), err
	case <-time.After(limit):
		t.Fatalf("%s still running after %v: it hangs", name, limit)
	}
	return 0, nil
}

// TestDeadlinesFrozenBroker freezes the broker (both listeners: every
// socket stays open, nothing answers) and checks that every kind of call,
// made with a context that has no deadline, fails within its own deadline
// with an error the callers retry, in words; then thaws it and checks
// that the same objects work again without anyone reopening them.
func TestDeadlinesFrozenBroker(t *testing.T) {
	tm := Timeouts{Attach: 700 * time.Millisecond, Send: 500 * time.Millisecond, Receive: 500 * time.Millisecond,
		Settle: 500 * time.Millisecond, Peek: 500 * time.Millisecond, Admin: 500 * time.Millisecond}
	e := newFrozenEnv(t, tm, 30*time.Second, 40)
	ctx := ctxFor(t)
	r := e.openDLQ(t, ctx)
	got := receiveN(t, r, 10)
	snd := e.openSender(t, ctx, "target")
	if err := snd.Send(ctx, []replay.Copy{{Of: got[0], MessageID: "warm"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Peek(ctx, "orders", dlq.SubQueueDeadLetter, 0, 10); err != nil {
		t.Fatal(err)
	}
	fresh, err := e.c.OpenSender(ctx, "target") // never attached: its first send attaches while frozen
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close(context.Background())

	// Each call's deadline, and the most it may take: the deadline, the
	// grace after which the adapter abandons an SDK call that ignores it,
	// and scheduling on a loaded machine.
	const slack = abandonGrace + 500*time.Millisecond
	calls := []struct {
		name     string
		deadline time.Duration
		call     func(ctx context.Context) error
	}{
		{"peek", tm.Peek + 10*perPeekedMessage, func(ctx context.Context) error {
			_, err := e.c.Peek(ctx, "orders", dlq.SubQueueDeadLetter, 0, 10)
			return err
		}},
		{"send", tm.Send, func(ctx context.Context) error {
			return snd.Send(ctx, []replay.Copy{{Of: got[0], MessageID: "frozen-1"}})
		}},
		{"send on a new link", tm.Attach + tm.Send, func(ctx context.Context) error {
			return fresh.Send(ctx, []replay.Copy{{Of: got[0], MessageID: "frozen-2"}})
		}},
		{"complete", tm.Settle, func(ctx context.Context) error { return r.Complete(ctx, got[1]) }},
		// The wait (200 ms) passes with nothing; the check that follows
		// is what times out, on a link that attaches anew (the one the
		// complete timed out on was replaced).
		{"receive", 200*time.Millisecond + tm.Attach + tm.Peek + perPeekedMessage, func(ctx context.Context) error {
			msgs, err := r.Receive(ctx, 5, 200*time.Millisecond)
			if err == nil && len(msgs) > 0 {
				return fmt.Errorf("received %d messages from a frozen broker", len(msgs))
			}
			return err
		}},
		{"receive deferred", tm.Attach + tm.Peek + 2*perPeekedMessage, func(ctx context.Context) error {
			_, err := r.ReceiveDeferred(ctx, []int64{got[2].SequenceNumber, got[3].SequenceNumber})
			return err
		}},
		{"list entities", tm.Admin, func(ctx context.Context) error { _, err := e.c.Entities(ctx); return err }},
		{"list settings", tm.Admin, func(ctx context.Context) error { _, err := e.c.Settings(ctx); return err }},
		{"describe", tm.Admin, func(ctx context.Context) error { _, err := e.c.Entity(ctx, "target"); return err }},
	}
	e.fz.Freeze()
	for _, c := range calls {
		took, err := timed(t, c.name, time.Minute, c.call)
		t.Logf("frozen: %s: %v after %v", c.name, err, took.Round(time.Millisecond))
		switch {
		case err == nil:
			t.Errorf("%s succeeded with the broker frozen", c.name)
		case !errors.Is(err, dlq.ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded):
			t.Errorf("%s: %v, want dlq.ErrUnreachable and context.DeadlineExceeded (retryable)", c.name, err)
		case !strings.Contains(err.Error(), "did not answer") ||
			!strings.Contains(err.Error(), words(c.deadline)) && !strings.Contains(err.Error(), words(c.deadline-200*time.Millisecond)):
			t.Errorf("%s: %q does not say in words what did not answer within how long", c.name, err)
		}
		if took > c.deadline+slack {
			t.Errorf("%s took %v, want at most its deadline %v (+%v)", c.name, took, c.deadline, slack)
		}
	}

	// Thawed: the same receiver, senders and client carry on (links that
	// timed out were replaced and attach again).
	e.fz.Thaw()
	ctx = ctxFor(t)
	if err := snd.Send(ctx, []replay.Copy{{Of: got[0], MessageID: "thawed-1"}}); err != nil {
		t.Errorf("send after the thaw: %v", err)
	}
	if err := fresh.Send(ctx, []replay.Copy{{Of: got[0], MessageID: "thawed-2"}}); err != nil {
		t.Errorf("send on the new link after the thaw: %v", err)
	}
	// The complete that timed out was held by the frozen broker, which
	// applied it when thawed: completing it again finds no lock.
	if err := r.Complete(ctx, got[1]); err != nil && !errors.Is(err, dlq.ErrLockLost) {
		t.Errorf("complete %d (timed out while frozen) after the thaw: %v", got[1].SequenceNumber, err)
	}
	for _, m := range got[2:] {
		if err := r.Complete(ctx, m); err != nil {
			t.Errorf("complete %d after the thaw: %v", m.SequenceNumber, err)
		}
	}
	if more, err := r.Receive(ctx, 30, 5*time.Second); err != nil || len(more) == 0 {
		t.Errorf("receive after the thaw: %d messages, %v", len(more), err)
	}
	if msgs, err := e.c.Peek(ctx, "target", dlq.SubQueueMain, 0, 10); err != nil || len(msgs) < 3 {
		t.Errorf("peek after the thaw: %d messages, %v", len(msgs), err)
	}
	// The 9 completed (one of them while frozen) are gone from the DLQ.
	if msgs, err := e.c.Peek(ctx, "orders", dlq.SubQueueDeadLetter, 0, 100); err != nil || len(msgs) != 31 {
		t.Errorf("%d messages in the DLQ after the thaw (%v), want 31", len(msgs), err)
	}
	if _, err := e.c.Entities(ctx); err != nil {
		t.Errorf("list entities after the thaw: %v", err)
	}
	if info, err := e.c.Entity(ctx, "target"); err != nil || info.Kind != dlq.KindQueue {
		t.Errorf("describe after the thaw: %+v, %v", info, err)
	}
}

// TestReceiveIsNotEmptyWhenTheBrokerIsNot: the SDK reports no messages and
// no error both for a receive whose connection was just dropped and for
// one that spent its wait retrying a busy broker; the adapter must not
// pass that on as an empty queue (the engine concludes from an empty
// queue that the messages it looks for are gone).
func TestReceiveIsNotEmptyWhenTheBrokerIsNot(t *testing.T) {
	e := newReplayEnv(t)
	q := e.queue(t, "orders", func(p *broker.QueueProperties) { p.LockDuration = 30 * time.Second })
	emulatortest.FillDLQ(t, e.ns, q, 20, 64, nil)
	ctx := ctxFor(t)
	r, err := e.c.OpenReceiver(ctx, q, dlq.SubQueueDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	receiveN(t, r, 5)

	// Dropped: the receive recovers within its wait and gets messages.
	e.srv.DropConnections()
	msgs, err := r.Receive(ctx, 5, 3*time.Second)
	if err != nil || len(msgs) == 0 {
		t.Fatalf("receive after a dropped connection: %d messages, %v; want messages (15 are there)", len(msgs), err)
	}

	// Busy for longer than the wait, on a link that must attach again
	// (the emulator refuses attaches, not deliveries on an open link): an
	// error the engine retries, not "nothing there".
	e.ns.InjectServerBusy(q, 0, time.Now().Add(3*time.Second))
	e.srv.DropConnections()
	start := time.Now()
	msgs, err = r.Receive(ctx, 5, 500*time.Millisecond)
	t.Logf("busy receive: %v after %v", err, time.Since(start))
	if err == nil || !errors.Is(err, dlq.ErrThrottled) {
		t.Fatalf("receive from a busy entity: %d messages, %v; want dlq.ErrThrottled", len(msgs), err)
	}
	e.ns.ClearFaults()

	// Really empty: no error, no messages, after the wait.
	empty := e.queue(t, "empty", nil)
	er, err := e.c.OpenReceiver(ctx, empty, dlq.SubQueueMain)
	if err != nil {
		t.Fatal(err)
	}
	defer er.Close(context.Background())
	if msgs, err := er.Receive(ctx, 5, 500*time.Millisecond); err != nil || len(msgs) != 0 {
		t.Fatalf("receive from an empty queue: %d messages, %v", len(msgs), err)
	}
	if msgs, err := er.Receive(ctx, 5, 500*time.Millisecond); err != nil || len(msgs) != 0 {
		t.Fatalf("second receive from an empty queue: %d messages, %v", len(msgs), err)
	}
}

// TestDeadlinesBusyThenDropped is the fault sequence of issue 15 at the
// adapter: a replay-like stream of receives, sends and completes (none
// with a deadline of its own) meets 20 server-busy refusals on both
// entities, then every connection dropped a second later. Every call
// returns within its deadline, the stream finishes on its own, and every
// message reaches the target (at least once) and leaves the DLQ.
func TestDeadlinesBusyThenDropped(t *testing.T) {
	const n = 1000
	tm := Timeouts{Attach: 2 * time.Second, Send: 2 * time.Second, Receive: time.Second, Settle: 2 * time.Second,
		Peek: 2 * time.Second, Admin: 2 * time.Second}
	e := newFrozenEnv(t, tm, 3*time.Second, n)
	ns := e.emu.Namespace()
	ctx := ctxFor(t)
	r := e.openDLQ(t, ctx)
	snd := e.openSender(t, ctx, "target")

	// The longest any call may take: a receive's wait, its margin and
	// the check after an empty one, each on a link attached anew, plus
	// the grace for an SDK that ignores its deadline.
	const wait = 300 * time.Millisecond
	limit := wait + e.tm.Receive + e.tm.Peek + 2*e.tm.Attach + abandonGrace + time.Second
	var (
		mu      sync.Mutex
		longest = map[string]time.Duration{}
		errs    = map[string]int{}
	)
	call := func(kind string, f func(ctx context.Context) error) error {
		took, err := timed(t, kind, time.Minute, f)
		mu.Lock()
		defer mu.Unlock()
		longest[kind] = max(longest[kind], took)
		if err != nil {
			switch {
			case errors.Is(err, dlq.ErrThrottled):
				errs[kind+" throttled"]++
			case errors.Is(err, dlq.ErrUnreachable):
				errs[kind+" unreachable"]++
			case errors.Is(err, dlq.ErrLockLost):
				errs[kind+" lock lost"]++
			default:
				t.Errorf("%s: %v (not an error the engine retries)", kind, err)
			}
		}
		if took > limit {
			t.Errorf("%s took %v: longer than any deadline allows (%v); error %v", kind, took, limit, err)
		}
		return err
	}

	faults := make(chan struct{})
	completed := 0
	go func() {
		defer close(faults)
		for {
			mu.Lock()
			c := completed
			mu.Unlock()
			if c >= 100 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		ns.InjectServerBusy("orders", 20, time.Time{})
		ns.InjectServerBusy("target", 20, time.Time{})
		time.Sleep(time.Second)
		e.emu.DropConnections()
	}()

	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		var got []*replay.Received
		if call("receive", func(ctx context.Context) (err error) {
			got, err = r.Receive(ctx, 50, wait)
			return err
		}) != nil {
			continue
		}
		if len(got) == 0 {
			if left, err := e.c.Peek(ctx, "orders", dlq.SubQueueDeadLetter, 0, 1); err == nil && len(left) == 0 {
				break // the DLQ is empty
			}
			continue
		}
		copies := make([]replay.Copy, len(got))
		for i, m := range got {
			copies[i] = replay.Copy{Of: m, MessageID: fmt.Sprintf("copy-%d", m.SequenceNumber)}
		}
		if call("send", func(ctx context.Context) error { return snd.Send(ctx, copies) }) != nil {
			continue // the originals' locks expire; they come back
		}
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for _, m := range got {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if call("complete", func(ctx context.Context) error { return r.Complete(ctx, m) }) == nil {
					mu.Lock()
					completed++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		// Paced, so that the faults land mid-stream.
		time.Sleep(20 * time.Millisecond)
	}
	<-faults
	t.Logf("longest call by kind: %v; errors: %v; completed %d", longest, errs, completed)

	if left, err := e.c.Peek(ctx, "orders", dlq.SubQueueDeadLetter, 0, n); err != nil || len(left) != 0 {
		t.Fatalf("%d messages left in the DLQ (%v)", len(left), err)
	}
	ids := map[string]bool{}
	for from := int64(0); ; {
		page, err := e.c.Peek(ctx, "target", dlq.SubQueueMain, from, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, m := range page {
			ids[m.MessageID] = true
		}
		from = page[len(page)-1].SequenceNumber + 1
	}
	if len(ids) != n {
		t.Fatalf("%d distinct copies in the target, want %d", len(ids), n)
	}
	if errs["send throttled"]+errs["receive throttled"] == 0 {
		t.Errorf("no call saw the server-busy fault: the test did not test it (%v)", errs)
	}
}

// TestConnectionClosedWithAFatalCondition: a broker that closes the
// connection with a condition the SDK deems fatal (amqp:not-allowed: what
// the emulator answers when go-amqp ends a session whose begin it dropped
// because the context had ended) leaves the SDK with a dead connection it
// never replaces, and a sender whose every Send fails at once with that
// error, forever. The adapter reports it as a lost connection (retryable),
// replaces the SDK client, and the same sender and receiver carry on.
func TestConnectionClosedWithAFatalCondition(t *testing.T) {
	tm := Timeouts{Attach: 2 * time.Second, Send: 2 * time.Second, Receive: time.Second, Settle: 2 * time.Second,
		Peek: 2 * time.Second, Admin: 2 * time.Second}
	e := newFrozenEnv(t, tm, 30*time.Second, 20)
	ctx := ctxFor(t)
	r := e.openDLQ(t, ctx)
	got := receiveN(t, r, 10)
	snd := e.openSender(t, ctx, "target")
	if err := snd.Send(ctx, []replay.Copy{{Of: got[0], MessageID: "before"}}); err != nil {
		t.Fatal(err)
	}

	if err := e.fz.AMQP().CloseConnections("amqp:not-allowed", "end on channel 2 without a session"); err != nil {
		t.Fatal(err)
	}
	// Every call returns an error the engine retries, or succeeds; within
	// a few tries each kind succeeds again.
	try := func(name string, f func(ctx context.Context) error) {
		t.Helper()
		var err error
		for i := range 5 {
			var took time.Duration
			took, err = timed(t, name, time.Minute, f)
			if err == nil {
				return
			}
			t.Logf("%s, try %d: %v after %v", name, i+1, err, took.Round(time.Millisecond))
			if !errors.Is(err, dlq.ErrUnreachable) && !errors.Is(err, dlq.ErrThrottled) {
				t.Fatalf("%s: %v: not an error the engine retries", name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%s still fails after 5 tries: %v", name, err)
	}
	try("send", func(ctx context.Context) error {
		return snd.Send(ctx, []replay.Copy{{Of: got[0], MessageID: "after"}})
	})
	for _, m := range got[1:] {
		try("complete", func(ctx context.Context) error { return r.Complete(ctx, m) })
	}
	try("receive", func(ctx context.Context) error {
		msgs, err := r.Receive(ctx, 10, 2*time.Second)
		if err == nil && len(msgs) == 0 {
			return fmt.Errorf("%w: no messages (10 are there)", dlq.ErrUnreachable)
		}
		return err
	})
	try("peek", func(ctx context.Context) error {
		msgs, err := e.c.Peek(ctx, "target", dlq.SubQueueMain, 0, 10)
		if err == nil && len(msgs) != 2 {
			return fmt.Errorf("peeked %d copies in the target, want 2", len(msgs))
		}
		return err
	})
	// 20 dead letters, 9 completed after the close.
	if msgs, err := e.c.Peek(ctx, "orders", dlq.SubQueueDeadLetter, 0, 100); err != nil || len(msgs) != 11 {
		t.Fatalf("%d messages in the DLQ (%v), want 11", len(msgs), err)
	}
}

// TestCompleteAfterDroppedConnection: messages received before the
// connection dropped are completed afterwards (by lock token over
// $management: the SDK would try their dead link, with its default 4 s,
// 8 s, 16 s back-off, until their locks ran out).
func TestCompleteAfterDroppedConnection(t *testing.T) {
	tm := Timeouts{Attach: 2 * time.Second, Send: 2 * time.Second, Receive: time.Second, Settle: 2 * time.Second,
		Peek: 2 * time.Second, Admin: 2 * time.Second}
	e := newFrozenEnv(t, tm, 30*time.Second, 20)
	ctx := ctxFor(t)
	r := e.openDLQ(t, ctx)
	got := receiveN(t, r, 10)
	e.emu.DropConnections()
	time.Sleep(50 * time.Millisecond)

	start := time.Now()
	limit := tm.Settle + tm.Attach + abandonGrace + 500*time.Millisecond
	for _, m := range got {
		var err error
		for try := 0; try < 3; try++ {
			var took time.Duration
			took, err = timed(t, "complete", time.Minute, func(ctx context.Context) error { return r.Complete(ctx, m) })
			if took > limit {
				t.Errorf("complete %d took %v, more than its deadline allows (%v)", m.SequenceNumber, took, limit)
			}
			if err == nil {
				break
			}
			if !errors.Is(err, dlq.ErrUnreachable) {
				t.Fatalf("complete %d: %v: not an error the engine retries", m.SequenceNumber, err)
			}
		}
		if err != nil {
			t.Fatalf("complete %d after the drop, 3 tries: %v", m.SequenceNumber, err)
		}
	}
	t.Logf("10 completes after the drop took %v", time.Since(start).Round(time.Millisecond))
	if msgs, err := e.c.Peek(ctx, "orders", dlq.SubQueueDeadLetter, 0, 100); err != nil || len(msgs) != 10 {
		t.Fatalf("%d messages in the DLQ (%v), want 10", len(msgs), err)
	}
}
