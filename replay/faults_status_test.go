package replay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/replay"
)

// changes records what the engine told the dashboard (Config.OnChange).
type changes struct {
	mu   sync.Mutex
	jobs []replay.Job
	at   []time.Time
}

func (c *changes) add(j replay.Job) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.jobs = append(c.jobs, j)
	c.at = append(c.at, time.Now())
}

// firstRetrying is the first change that showed the job retrying with
// what failed, and when it was reported.
func (c *changes) firstRetrying() (replay.Job, time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, j := range c.jobs {
		if j.Status == replay.StatusRetrying {
			return j, c.at[i], true
		}
	}
	return replay.Job{}, time.Time{}, false
}

// checkRetrying says a change showed the job retrying, saying what failed,
// how many attempts and when the next one is.
func checkRetrying(t *testing.T, c *changes) time.Time {
	t.Helper()
	j, at, ok := c.firstRetrying()
	if !ok {
		t.Fatal("the job never showed the retrying status while the broker failed")
	}
	if j.LastError == "" || j.RetryAttempts < 1 || j.NextAttemptAt == nil || !strings.Contains(j.LastError, "trying again at") {
		t.Errorf("retrying job without what failed, the attempts and the next attempt: %+v", j)
	}
	t.Logf("retrying: attempts %d, next %s: %s", j.RetryAttempts, j.NextAttemptAt.Format(time.TimeOnly), j.LastError)
	return at
}

// The hang: server busy for the next 20 operations, then every
// connection dropped one second into a 1,000-message replay. The job says
// it is retrying while it does, and finishes: nothing lost, nothing twice.
func TestFaultServerBusyThenDroppedConnections(t *testing.T) {
	c := &changes{}
	e := newEnv(t, queues("orders"), envOptions{onChange: c.add})
	e.sendAndDeadLetter("orders", "hang", 1000, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 1000)
	e.ns.InjectServerBusy("orders", 20, time.Time{})
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}})
	time.Sleep(time.Second)
	e.srv.DropConnections()
	j := e.finished(job.ID, 2*time.Minute)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 1000 {
		items, _, _ := e.st.ListItems(t.Context(), job.ID, replay.ItemFailed, 3, "")
		for _, it := range items {
			t.Logf("failed: %s", it.Error)
		}
		t.Fatalf("job = %+v", j)
	}
	checkRetrying(t, c)
	if j.RetryAttempts != 0 || j.NextAttemptAt != nil {
		t.Errorf("a completed job still says it retries: %+v", j)
	}
	checkExactlyOnce(t, e, "orders", j, 1000)
}

// A broker frozen for 20 s mid-job (as by SIGSTOP: sockets open, nothing
// answers): the job shows retrying within one call's deadline (the
// adapter's 10 s, plus an attach's and its grace), and finishes when the
// broker is back.
func TestFaultBrokerFrozen(t *testing.T) {
	if testing.Short() {
		t.Skip("a 20 s freeze")
	}
	c := &changes{}
	e := newEnv(t, queues("orders"), envOptions{freezable: true, onChange: c.add})
	e.sendAndDeadLetter("orders", "frozen", 1000, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 1000)
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, RatePerSecond: 200})
	waitFor(t, "some progress", 20*time.Second, func() bool {
		j, _ := e.st.Job(t.Context(), job.ID)
		return j.Counts.Completed >= 200
	})
	frozenAt := time.Now()
	e.frozen.Freeze()
	time.Sleep(20 * time.Second)
	e.frozen.Thaw()
	at := checkRetrying(t, c)
	if d := at.Sub(frozenAt); d < 0 || d > 22*time.Second {
		t.Errorf("the job showed retrying %s after the freeze", d)
	}
	t.Logf("retrying shown %s after the freeze", at.Sub(frozenAt).Round(100*time.Millisecond))
	j := e.finished(job.ID, 2*time.Minute)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 1000 {
		t.Fatalf("job = %+v", j)
	}
	checkExactlyOnce(t, e, "orders", j, 1000)
}

// dropOnComplete drops every connection of the emulator when the engine
// has asked for its nth complete, with completes in flight.
type dropOnComplete struct {
	replay.Broker
	n    int64
	done atomic.Int64
	drop func()
}

func (d *dropOnComplete) OpenReceiver(ctx context.Context, entity string, q dlq.SubQueue) (replay.Receiver, error) {
	r, err := d.Broker.OpenReceiver(ctx, entity, q)
	if err != nil {
		return nil, err
	}
	return &dropReceiver{Receiver: r, d: d}, nil
}

type dropReceiver struct {
	replay.Receiver
	d *dropOnComplete
}

func (r *dropReceiver) Complete(ctx context.Context, m *replay.Received) error {
	if r.d.done.Add(1) == r.d.n {
		r.d.drop()
	}
	return r.Receiver.Complete(ctx, m)
}

// Connections dropped while originals are being completed: the job
// finishes, nothing lost, nothing twice.
func TestFaultConnectionDroppedDuringComplete(t *testing.T) {
	var d *dropOnComplete
	var e *env
	e = newEnv(t, queues("orders"), envOptions{wrap: func(b replay.Broker) replay.Broker {
		d = &dropOnComplete{Broker: b, n: 100, drop: func() { e.srv.DropConnections() }}
		return d
	}})
	e.sendAndDeadLetter("orders", "complete", 500, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 500)
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}})
	j := e.finished(job.ID, time.Minute)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 500 {
		t.Fatalf("job = %+v", j)
	}
	if got := d.done.Load(); got < 500 {
		t.Fatalf("only %d completes: the drop never happened during one", got)
	}
	checkExactlyOnce(t, e, "orders", j, 500)
}

// A job that was running when its process died waits, when it is adopted,
// for the locks the dead process held on some of its messages, and says
// so while it waits; then it finishes them.
func TestAdoptedJobSaysItWaitsForLocks(t *testing.T) {
	c := &changes{}
	e := newEnv(t, queues("orders"), envOptions{onChange: c.add, noRun: true})
	e.sendAndDeadLetter("orders", "held", 10, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 10)
	// The dead process's locks on 4 of them (10 s).
	r, err := e.sb.NewReceiverForQueue("orders", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	held, err := r.ReceiveMessages(t.Context(), 4, nil)
	if err != nil || len(held) != 4 {
		t.Fatalf("locked %d: %v", len(held), err)
	}
	j, err := e.st.CreateJob(t.Context(), replay.Job{Action: replay.ActionReplay, CreatedBy: "tester"}, replay.Selection{IDs: ids}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.SetStatus(t.Context(), j.ID, replay.StatusRunning, "", replay.StatusQueued); err != nil {
		t.Fatal(err)
	}
	e.run()
	waitFor(t, "the job to say it waits for the locks", 20*time.Second, func() bool {
		j, _ := e.st.Job(t.Context(), j.ID)
		return j.Status == replay.StatusRunning && strings.Contains(j.PausedReason, "message locks held before the restart")
	})
	j, _ = e.st.Job(t.Context(), j.ID)
	t.Logf("while waiting: %s (%+v)", j.PausedReason, j.Counts)
	if !strings.HasPrefix(j.PausedReason, "waiting up to ") || j.Counts.Completed != 6 {
		t.Errorf("job while waiting %+v", j)
	}
	j = e.finished(j.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 10 || j.PausedReason != "" {
		t.Fatalf("job = %+v", j)
	}
	checkExactlyOnce(t, e, "orders", j, 10)
}

// flakySender refuses every batch of more than one copy for what it is,
// and fails the first `transient` single sends with a transient error.
type flakySender struct {
	replay.Sender
	transient atomic.Int64
}

func (f *flakySender) Send(ctx context.Context, copies []replay.Copy) error {
	if len(copies) > 1 {
		return errors.New("the batch is too large")
	}
	if f.transient.Add(-1) >= 0 {
		return fmt.Errorf("send: %w", dlq.ErrUnreachable)
	}
	return f.Sender.Send(ctx, copies)
}

type flakyBroker struct {
	replay.Broker
	s *flakySender
}

func (b *flakyBroker) OpenSender(ctx context.Context, path string) (replay.Sender, error) {
	s, err := b.Broker.OpenSender(ctx, path)
	if err != nil {
		return nil, err
	}
	b.s.Sender = s
	return b.s, nil
}

// Copies sent one by one after the destination refused their batch: a
// transient failure of one of them is retried (the job shows retrying),
// never counted as the destination refusing that copy.
func TestOneByOneSendRetriesTransientErrors(t *testing.T) {
	c := &changes{}
	fs := &flakySender{}
	fs.transient.Store(3)
	e := newEnv(t, queues("orders"), envOptions{onChange: c.add, wrap: func(b replay.Broker) replay.Broker {
		return &flakyBroker{Broker: b, s: fs}
	}})
	e.sendAndDeadLetter("orders", "one", 5, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 5)
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}})
	j := e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 5 || j.Counts.Failed != 0 {
		t.Fatalf("job = %+v", j)
	}
	checkRetrying(t, c)
	checkExactlyOnce(t, e, "orders", j, 5)
}

// ambiguousSender delivers its first batch and then fails the call with an
// error that is neither transient nor a halt (a link that ended mid-call,
// as the adapter may report it): the engine cannot know the batch arrived.
type ambiguousSender struct {
	replay.Sender
	failed atomic.Bool
}

func (f *ambiguousSender) Send(ctx context.Context, copies []replay.Copy) error {
	if len(copies) > 1 && !f.failed.Swap(true) {
		if err := f.Sender.Send(ctx, copies); err != nil {
			return err
		}
		return errors.New("the link ended after the transfer, before its outcome")
	}
	return f.Sender.Send(ctx, copies)
}

type ambiguousBroker struct {
	replay.Broker
	s *ambiguousSender
}

func (b *ambiguousBroker) OpenSender(ctx context.Context, path string) (replay.Sender, error) {
	s, err := b.Broker.OpenSender(ctx, path)
	if err != nil {
		return nil, err
	}
	b.s.Sender = s
	return b.s, nil
}

// A batch whose send failed in a way that leaves unknown whether the broker
// took it is sent again one by one: every copy sent twice is flagged (CI
// once saw 20 duplicate copies of a 20-message batch and 0 flagged in
// TestFaultDroppedConnectionsAndLostLocks).
func TestAmbiguousBatchFailureFlagsTheResentCopies(t *testing.T) {
	as := &ambiguousSender{}
	e := newEnv(t, queues("orders"), envOptions{wrap: func(b replay.Broker) replay.Broker {
		return &ambiguousBroker{Broker: b, s: as}
	}})
	e.sendAndDeadLetter("orders", "amb", 5, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 5)
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}})
	j := e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 5 {
		t.Fatalf("job = %+v", j)
	}
	if !as.failed.Load() {
		t.Fatal("the batch send never failed: the test did not test anything")
	}
	if j.Flagged != 5 {
		t.Errorf("%d messages flagged as possibly sent twice, want the 5 sent again", j.Flagged)
	}
	checkExactlyOnce(t, e, "orders", j, 5)
}

// lossyBroker's receivers lose the first batch the broker delivers after
// a slow start: the call fails (as when the link dies after the broker
// delivered), and the messages stay locked where the engine cannot see
// them.
type lossyBroker struct {
	replay.Broker
	lost atomic.Bool
}

func (b *lossyBroker) OpenReceiver(ctx context.Context, entity string, q dlq.SubQueue) (replay.Receiver, error) {
	r, err := b.Broker.OpenReceiver(ctx, entity, q)
	if err != nil {
		return nil, err
	}
	return &lossyReceiver{Receiver: r, b: b}, nil
}

type lossyReceiver struct {
	replay.Receiver
	b *lossyBroker
}

func (r *lossyReceiver) ReceiveDeferred(ctx context.Context, seqs []int64) ([]*replay.Received, error) {
	if !r.b.lost.Swap(true) {
		msgs, err := r.Receiver.ReceiveDeferred(ctx, seqs)
		return nil, fmt.Errorf("the link died after the broker delivered %d messages (%v): %w", len(msgs), err, dlq.ErrUnreachable)
	}
	return r.Receiver.ReceiveDeferred(ctx, seqs)
}

func (r *lossyReceiver) Receive(ctx context.Context, max int, wait time.Duration) ([]*replay.Received, error) {
	if !r.b.lost.Swap(true) {
		time.Sleep(2 * time.Second)
		msgs, err := r.Receiver.Receive(ctx, max, wait)
		return nil, fmt.Errorf("the link died after the broker delivered %d messages (%v): %w", len(msgs), err, dlq.ErrUnreachable)
	}
	return r.Receiver.Receive(ctx, max, wait)
}

// Messages a failed receive left locked are waited for (one lock duration
// after the failure), not failed as gone.
func TestMessagesLockedByAFailedReceiveAreNotLost(t *testing.T) {
	e := newEnv(t, func(ns *broker.Namespace) {
		if _, err := ns.CreateQueue("orders", broker.QueueProperties{LockDuration: 5 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}, envOptions{batch: 10, wrap: func(b replay.Broker) replay.Broker { return &lossyBroker{Broker: b} }})
	e.sendAndDeadLetter("orders", "lost", 30, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 30)
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}})
	j := e.finished(job.ID, 40*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 30 {
		t.Fatalf("job = %+v", j)
	}
	checkExactlyOnce(t, e, "orders", j, 30)
}

// The same for deferred messages received by sequence number: a receive
// that failed after the broker locked them is followed, when no retry
// returns them, by one more once their locks lapsed.
func TestDeferredLockedByAFailedReceiveAreNotLost(t *testing.T) {
	e := newEnv(t, func(ns *broker.Namespace) {
		for _, q := range []string{"orders", "archive"} {
			if _, err := ns.CreateQueue(q, broker.QueueProperties{LockDuration: 5 * time.Second}); err != nil {
				t.Fatal(err)
			}
		}
	}, envOptions{wrap: func(b replay.Broker) replay.Broker { return &lossyBroker{Broker: b} }})
	e.send("orders", &azservicebus.Message{MessageID: ptr("later-1"), Body: []byte("one")},
		&azservicebus.Message{MessageID: ptr("later-2"), Body: []byte("two")})
	r, err := e.sb.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := r.ReceiveMessages(t.Context(), 2, nil)
	if err != nil || len(ms) != 2 {
		t.Fatalf("receive: %v %d", err, len(ms))
	}
	for _, m := range ms {
		if err := r.DeferMessage(t.Context(), m, nil); err != nil {
			t.Fatal(err)
		}
	}
	r.Close(context.Background())
	ids := e.cataloged(dlq.Filter{Entity: "orders", State: dlq.StateDeferred}, 2)
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, Destination: "archive"})
	j := e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 2 {
		t.Fatalf("job = %+v", j)
	}
	if got := e.receiveAll("archive", "", 0); len(got) != 2 {
		t.Fatalf("%d copies in archive, want 2", len(got))
	}
}

// failFirstCompletes fails the first n completes as a dropped connection
// does, without reaching the broker: the originals stay locked.
type failFirstCompletes struct {
	replay.Broker
	n     int64
	calls atomic.Int64
}

func (f *failFirstCompletes) OpenReceiver(ctx context.Context, entity string, q dlq.SubQueue) (replay.Receiver, error) {
	r, err := f.Broker.OpenReceiver(ctx, entity, q)
	if err != nil {
		return nil, err
	}
	return &failCompleteReceiver{Receiver: r, f: f}, nil
}

type failCompleteReceiver struct {
	replay.Receiver
	f *failFirstCompletes
}

func (r *failCompleteReceiver) Complete(ctx context.Context, m *replay.Received) error {
	if r.f.calls.Add(1) <= r.f.n {
		return fmt.Errorf("complete message %d: the connection was lost: %w", m.SequenceNumber, dlq.ErrUnreachable)
	}
	return r.Receiver.Complete(ctx, m)
}

// Completes that fail without losing their locks leave originals the next
// pass cannot see for one lock duration: while the job waits for those
// locks it says how many messages wait and why (their removal failed),
// not "0 selected messages ... that receives which failed may have left
// locked" as it did; then it finishes them.
func TestWaitAfterFailedRemovalsSaysSo(t *testing.T) {
	const n, failing = 20, 5
	c := &changes{}
	e := newEnv(t, func(ns *broker.Namespace) {
		if _, err := ns.CreateQueue("orders", broker.QueueProperties{LockDuration: 3 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}, envOptions{onChange: c.add, wrap: func(b replay.Broker) replay.Broker { return &failFirstCompletes{Broker: b, n: failing} }})
	e.sendAndDeadLetter("orders", "unremoved", n, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, n)
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}})
	j := e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != n {
		t.Fatalf("job = %+v", j)
	}
	c.mu.Lock()
	var notes []string
	for _, cj := range c.jobs {
		if strings.HasPrefix(cj.PausedReason, "waiting up to ") && (len(notes) == 0 || notes[len(notes)-1] != cj.PausedReason) {
			notes = append(notes, cj.PausedReason)
		}
	}
	c.mu.Unlock()
	t.Logf("notes while running: %q", notes)
	want := fmt.Sprintf("%d selected messages in orders/$DeadLetterQueue whose removal failed", failing)
	if len(notes) == 0 || !strings.Contains(notes[0], want) {
		t.Errorf("the job's note while it waited: %q, want one with %q", notes, want)
	}
	checkExactlyOnce(t, e, "orders", j, n)
}

// slowFailingCompletes makes completes first..last (counted from 1) fail
// as calls past their deadline do on a broker that stopped answering:
// after d, without reaching the broker (the originals stay locked).
type slowFailingCompletes struct {
	replay.Broker
	first, last int64
	d           time.Duration
	calls       atomic.Int64
}

func (f *slowFailingCompletes) OpenReceiver(ctx context.Context, entity string, q dlq.SubQueue) (replay.Receiver, error) {
	r, err := f.Broker.OpenReceiver(ctx, entity, q)
	if err != nil {
		return nil, err
	}
	return &slowFailingReceiver{Receiver: r, f: f}, nil
}

type slowFailingReceiver struct {
	replay.Receiver
	f *slowFailingCompletes
}

func (r *slowFailingReceiver) Complete(ctx context.Context, m *replay.Received) error {
	if k := r.f.calls.Add(1); k >= r.f.first && k <= r.f.last {
		select {
		case <-time.After(r.f.d):
		case <-ctx.Done():
		}
		return fmt.Errorf("complete message %d: the broker did not answer within %v: %w", m.SequenceNumber, r.f.d, dlq.ErrUnreachable)
	}
	return r.Receiver.Complete(ctx, m)
}

// Completes that fail (each after a call's deadline, as on a broker that
// stopped answering) are on the job as soon as the first round has
// failed, while the batch's other rounds still run: status retrying,
// what failed; it was silent in running for the whole batch before. The
// job is running again once the broker answers, and finishes.
func TestFailingRemovalsAreOnTheJobAtOnce(t *testing.T) {
	const n = 200
	const d = 500 * time.Millisecond
	c := &changes{}
	// Every complete of the first batch fails: 200 completes, 32 at a
	// time, 7 rounds of half a second.
	f := &slowFailingCompletes{first: 1, last: n, d: d}
	e := newEnv(t, func(ns *broker.Namespace) {
		if _, err := ns.CreateQueue("orders", broker.QueueProperties{LockDuration: 5 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}, envOptions{onChange: c.add, wrap: func(b replay.Broker) replay.Broker { f.Broker = b; return f }})
	e.sendAndDeadLetter("orders", "failing", n, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, n)
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}})
	waitFor(t, "the first complete", 20*time.Second, func() bool { return f.calls.Load() > 0 })
	firstAt := time.Now()
	j := e.finished(job.ID, time.Minute)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != n {
		t.Fatalf("job = %+v", j)
	}
	rj, at, ok := c.firstRetrying()
	if !ok {
		t.Fatal("the job never showed the retrying status while its completes failed")
	}
	t.Logf("retrying %v after the first complete started: %s", at.Sub(firstAt).Round(10*time.Millisecond), rj.LastError)
	if !strings.Contains(rj.LastError, "remove originals from orders/$DeadLetterQueue failed") || rj.RetryAttempts < 1 || rj.NextAttemptAt == nil {
		t.Errorf("retrying job without what failed: %+v", rj)
	}
	// Within the second round of completes, not after the seven.
	if took, limit := at.Sub(firstAt), 2*d+time.Second; took > limit {
		t.Errorf("retrying shown %v after the first complete started, want within %v", took, limit)
	}
	if j.RetryAttempts != 0 || j.NextAttemptAt != nil {
		t.Errorf("a completed job still says it retries: %+v", j)
	}
	c.mu.Lock()
	running := false
	for i, cj := range c.jobs {
		running = running || c.at[i].After(at) && cj.Status == replay.StatusRunning && cj.RetryAttempts == 0
	}
	c.mu.Unlock()
	if !running {
		t.Errorf("the job was not running again before it completed")
	}
	checkExactlyOnce(t, e, "orders", j, n)
}
