package replay_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/replay"
)

// toEmulator sends the admin client's https://<namespace>/ requests to
// the emulator's admin endpoint (the SAS policy has signed them by then).
type toEmulator struct{ base *url.URL }

func (t toEmulator) Do(req *http.Request) (*http.Response, error) {
	req.URL.Scheme, req.URL.Host = t.base.Scheme, t.base.Host
	return http.DefaultClient.Do(req)
}

// setStatus sets a queue's status as a person would: through the admin
// API (the emulator's, with the real SDK's admin client).
func (e *env) setStatus(queue string, status admin.EntityStatus) {
	e.t.Helper()
	base, err := url.Parse(e.srv.AdminURL())
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := admin.NewClientFromConnectionString(e.srv.ConnectionString(), &admin.ClientOptions{
		ClientOptions: azcore.ClientOptions{Transport: toEmulator{base}, Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx := context.Background()
	q, err := c.GetQueue(ctx, queue, nil)
	if err != nil || q == nil {
		e.t.Fatalf("get queue %s: %v", queue, err)
	}
	q.Status = &status
	if _, err := c.UpdateQueue(ctx, queue, q.QueueProperties, nil); err != nil {
		e.t.Fatalf("set %s's status to %s: %v", queue, status, err)
	}
}

// copiesIn receives every message of queue and counts them by original.
func (e *env) copiesIn(queue string) map[string]int {
	copies := map[string]int{}
	for _, m := range e.receiveAll(queue, "", 0) {
		copies[m.ApplicationProperties[replay.PropOriginalMessageID].(string)]++
	}
	return copies
}

func checkOnceEach(t *testing.T, copies map[string]int, n int) {
	t.Helper()
	if len(copies) != n {
		t.Errorf("%d distinct originals replayed, want %d", len(copies), n)
	}
	for id, k := range copies {
		if k != 1 {
			t.Errorf("%s arrived %d times, want once", id, k)
		}
	}
}

// A destination disabled for sending before the job starts: through the
// real adapter and the emulator, the job pauses at its first send with the
// reason in words, sends nothing, fails nothing and flags nothing (the
// messages stay pending, their originals in the DLQ). Enabled again and
// resumed, it sends every copy once.
func TestSendDisabledDestinationPauses(t *testing.T) {
	e := newEnv(t, queues("orders", "archive"), envOptions{giveUp: 2 * time.Second})
	e.sendAndDeadLetter("orders", "off", 12, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 12)
	e.setStatus("archive", admin.EntityStatusSendDisabled)

	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, Destination: "archive"})
	j := e.finished(job.ID, 30*time.Second)
	t.Logf("paused: %s", j.PausedReason)
	if j.Status != replay.StatusPaused {
		t.Fatalf("job = %+v, want paused", j)
	}
	for _, want := range []string{"the destination archive is disabled for sending", "az servicebus queue update --status Active", "resume"} {
		if !strings.Contains(j.PausedReason, want) {
			t.Errorf("paused_reason %q does not say %q", j.PausedReason, want)
		}
	}
	if j.Counts.Sent+j.Counts.Completed+j.Counts.Failed != 0 || j.Counts.Pending != 12 || j.Flagged != 0 {
		t.Errorf("counts while paused: %+v, flagged %d; want 12 pending, nothing sent, failed or flagged", j.Counts, j.Flagged)
	}
	items, _, err := e.st.ListItems(t.Context(), job.ID, replay.ItemLocked, 100, "")
	if err != nil || len(items) != 0 {
		t.Errorf("%d items left locked (%v) after a refusal that sent nothing, want them pending", len(items), err)
	}
	if got, _ := e.engine.Job(t.Context(), job.ID); got.PausedReason != j.PausedReason {
		t.Errorf("the engine's job (what GET /api/v1/jobs/{id} serves) says %q", got.PausedReason)
	}
	if left := len(e.peekAll("orders", azservicebus.SubQueueDeadLetter)); left != 12 {
		t.Fatalf("%d originals left in the DLQ while paused, want 12", left)
	}
	if n := len(e.peekAll("archive", 0)); n != 0 {
		t.Fatalf("the disabled destination holds %d messages", n)
	}

	e.setStatus("archive", admin.EntityStatusActive)
	if _, err := e.engine.Resume(audit.WithActor(t.Context(), "tester"), job.ID); err != nil {
		t.Fatal(err)
	}
	j = e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 12 || j.Flagged != 0 {
		t.Fatalf("resumed job = %+v, flagged %d; want 12 completed, none flagged", j, j.Flagged)
	}
	checkOnceEach(t, e.copiesIn("archive"), 12)
	if left := len(e.peekAll("orders", azservicebus.SubQueueDeadLetter)); left != 0 {
		t.Errorf("%d messages left in the DLQ", left)
	}
}

// A destination disabled for sending in the middle of a paced job: the
// job pauses saying so, what it sent is sent once, the rest is still in
// the DLQ, and the resume after enabling it sends each remaining copy
// once.
func TestSendDisabledMidJobPauses(t *testing.T) {
	const n = 60
	e := newEnv(t, queues("orders", "archive"), envOptions{giveUp: 2 * time.Second})
	e.sendAndDeadLetter("orders", "mid", n, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, n)

	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, Destination: "archive",
		RatePerSecond: 20})
	waitFor(t, "some copies sent", 30*time.Second, func() bool {
		j, _ := e.st.Job(t.Context(), job.ID)
		return j.Counts.Sent+j.Counts.Completed >= 10
	})
	e.setStatus("archive", admin.EntityStatusSendDisabled)
	j := e.finished(job.ID, 30*time.Second)
	t.Logf("paused after %d sent: %s", j.Counts.Sent+j.Counts.Completed, j.PausedReason)
	if j.Status != replay.StatusPaused || !strings.Contains(j.PausedReason, "the destination archive is disabled for sending") {
		t.Fatalf("job = %+v, want paused saying the destination is disabled for sending", j)
	}
	if j.Counts.Failed != 0 || j.Counts.Sent+j.Counts.Completed >= n {
		t.Fatalf("counts while paused: %+v, want nothing failed and some not sent", j.Counts)
	}
	// Paused means stopped: the counts stay where they are.
	time.Sleep(time.Second)
	if again, _ := e.st.Job(t.Context(), job.ID); again.Counts != j.Counts {
		t.Fatalf("counts moved while paused: %+v, then %+v", j.Counts, again.Counts)
	}
	left := len(e.peekAll("orders", azservicebus.SubQueueDeadLetter))
	if left+j.Counts.Completed != n {
		t.Fatalf("%d originals in the DLQ and %d completed while paused, want %d in all", left, j.Counts.Completed, n)
	}

	e.setStatus("archive", admin.EntityStatusActive)
	if _, err := e.engine.Resume(audit.WithActor(t.Context(), "tester"), job.ID); err != nil {
		t.Fatal(err)
	}
	j = e.finished(job.ID, 60*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != n {
		t.Fatalf("resumed job = %+v", j)
	}
	if j.Flagged != 0 {
		t.Errorf("%d flagged after a refusal that sent nothing, want 0", j.Flagged)
	}
	checkOnceEach(t, e.copiesIn("archive"), n)
	if left := len(e.peekAll("orders", azservicebus.SubQueueDeadLetter)); left != 0 {
		t.Errorf("%d messages left in the DLQ", left)
	}
}

// fullSender answers every Send with a full destination (the adapter's
// dlq.ErrQuotaExceeded for amqp:resource-limit-exceeded; the emulator does
// not enforce MaxSizeInMegabytes) while full is set, or for the first
// fullFor calls, sending nothing.
type fullSender struct {
	replay.Sender
	full    atomic.Bool
	fullFor atomic.Int32
	refused atomic.Int32
}

func (f *fullSender) Send(ctx context.Context, copies []replay.Copy) error {
	if f.full.Load() || f.fullFor.Add(-1) >= 0 {
		f.refused.Add(1)
		return fmt.Errorf("send to archive: %w: the entity is full (amqp:resource-limit-exceeded)", dlq.ErrQuotaExceeded)
	}
	return f.Sender.Send(ctx, copies)
}

type fullBroker struct {
	replay.Broker
	s *fullSender
}

func (b *fullBroker) OpenSender(ctx context.Context, path string) (replay.Sender, error) {
	s, err := b.Broker.OpenSender(ctx, path)
	if err != nil {
		return nil, err
	}
	b.s.Sender = s
	return b.s, nil
}

// A full destination is retried with back-off: one that has room again
// within the give-up time takes the copies and the job completes without
// pausing.
func TestFullDestinationRetried(t *testing.T) {
	fs := &fullSender{}
	fs.fullFor.Store(2)
	var paused atomic.Bool
	e := newEnv(t, queues("orders", "archive"), envOptions{giveUp: 20 * time.Second,
		wrap:     func(b replay.Broker) replay.Broker { return &fullBroker{Broker: b, s: fs} },
		onChange: func(j replay.Job) { paused.Store(paused.Load() || j.Status == replay.StatusPaused) }})
	e.sendAndDeadLetter("orders", "room", 5, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 5)
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, Destination: "archive"})
	j := e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 5 || paused.Load() {
		t.Fatalf("job = %+v (paused on the way: %v), want completed without a pause", j, paused.Load())
	}
	if fs.refused.Load() != 2 {
		t.Fatalf("%d sends answered full, want 2: the test did not test anything", fs.refused.Load())
	}
	if !strings.Contains(j.LastError, "full") {
		t.Errorf("last_error %q does not say the destination was full", j.LastError)
	}
	checkOnceEach(t, e.copiesIn("archive"), 5)
}

// A destination that stays full pauses the job once retries did not cure
// it, saying so; nothing is lost, and the resume once there is room sends
// every copy once.
func TestFullDestinationPauses(t *testing.T) {
	fs := &fullSender{}
	fs.full.Store(true)
	e := newEnv(t, queues("orders", "archive"), envOptions{giveUp: time.Second,
		wrap: func(b replay.Broker) replay.Broker { return &fullBroker{Broker: b, s: fs} }})
	e.sendAndDeadLetter("orders", "full", 8, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 8)
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, Destination: "archive"})
	j := e.finished(job.ID, 30*time.Second)
	t.Logf("paused: %s", j.PausedReason)
	if j.Status != replay.StatusPaused {
		t.Fatalf("job = %+v, want paused", j)
	}
	for _, want := range []string{"the destination archive is full", "after 1s of retries", "raise its maximum size", "resume"} {
		if !strings.Contains(j.PausedReason, want) {
			t.Errorf("paused_reason %q does not say %q", j.PausedReason, want)
		}
	}
	if fs.refused.Load() < 2 {
		t.Errorf("the full destination was tried %d times, want retries", fs.refused.Load())
	}
	if j.Counts.Failed != 0 || j.Counts.Sent+j.Counts.Completed != 0 {
		t.Fatalf("counts while paused: %+v, want nothing sent or failed", j.Counts)
	}
	if left := len(e.peekAll("orders", azservicebus.SubQueueDeadLetter)); left != 8 {
		t.Fatalf("%d originals left in the DLQ while paused, want 8", left)
	}

	fs.full.Store(false)
	if _, err := e.engine.Resume(audit.WithActor(t.Context(), "tester"), job.ID); err != nil {
		t.Fatal(err)
	}
	j = e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 8 {
		t.Fatalf("resumed job = %+v", j)
	}
	checkOnceEach(t, e.copiesIn("archive"), 8)
}

// oneAmbiguousSender fails every batch, and the single copy of the message
// whose id has the suffix bad, with an error that is not a refusal: the
// broker may have kept what it was sent. It sends the bad copy first, as
// a broker that kept it and then lost the link would.
type oneAmbiguousSender struct {
	replay.Sender
	bad    string
	failed atomic.Int32
}

func (a *oneAmbiguousSender) Send(ctx context.Context, copies []replay.Copy) error {
	ambiguous := errors.New("send to orders: the link ended with amqp:not-allowed before the broker said what it kept")
	if len(copies) > 1 {
		return ambiguous
	}
	if strings.HasSuffix(copies[0].Of.MessageID, a.bad) {
		a.failed.Add(1)
		if err := a.Sender.Send(ctx, copies); err != nil {
			return err
		}
		return ambiguous
	}
	return a.Sender.Send(ctx, copies)
}

type oneAmbiguousBroker struct {
	replay.Broker
	s *oneAmbiguousSender
}

func (b *oneAmbiguousBroker) OpenSender(ctx context.Context, path string) (replay.Sender, error) {
	s, err := b.Broker.OpenSender(ctx, path)
	if err != nil {
		return nil, err
	}
	b.s.Sender = s
	return b.s, nil
}

// A single copy whose send fails with an error that is not a refusal is
// failed saying that it may have arrived, and flagged (the destination does
// not detect duplicates): here it did arrive.
func TestAmbiguousSingleSendFailsHonestly(t *testing.T) {
	as := &oneAmbiguousSender{bad: "-2"}
	e := newEnv(t, queues("orders", "archive"), envOptions{
		wrap: func(b replay.Broker) replay.Broker { return &oneAmbiguousBroker{Broker: b, s: as} }})
	e.sendAndDeadLetter("orders", "amb", 4, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 4)
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, Destination: "archive"})
	j := e.finished(job.ID, 30*time.Second)
	if j.Counts.Completed != 3 || j.Counts.Failed != 1 {
		t.Fatalf("job = %+v, want 3 completed and 1 failed", j)
	}
	if as.failed.Load() == 0 {
		t.Fatal("no single send failed: the test did not test anything")
	}
	items, _, err := e.st.ListItems(t.Context(), job.ID, replay.ItemFailed, 10, "")
	if err != nil || len(items) != 1 {
		t.Fatalf("failed items: %v %v", items, err)
	}
	t.Logf("failed: %s", items[0].Error)
	if strings.Contains(items[0].Error, "refused") || !strings.Contains(items[0].Error, "may have arrived") {
		t.Errorf("the failed item says %q, want that the copy may have arrived, not that it was refused", items[0].Error)
	}
	if !items[0].Flagged {
		t.Error("the failed copy that may have arrived is not flagged")
	}
	if got := e.copiesIn("archive"); len(got) != 4 {
		t.Errorf("%d originals have a copy in archive, want 4 (the failed one arrived): %v", len(got), got)
	}
}

// With named namespaces, the reason names the destination as the user
// knows it: its namespace and its path.
func TestSendDisabledReasonNamesTheNamespace(t *testing.T) {
	e := newTwoNamespaceEnv(t, 0, 3)
	e.count(dlq.Filter{Namespace: "us", SubQueue: dlq.SubQueueDeadLetter}, 3)
	info, err := e.ns["eu"].Queue("orders")
	if err != nil {
		t.Fatal(err)
	}
	p := info.Properties
	p.Status = broker.StatusSendDisabled
	if _, err := e.ns["eu"].UpdateQueue("orders", p); err != nil {
		t.Fatal(err)
	}
	ctx := audit.WithActor(t.Context(), "tester")
	_, job, err := e.engine.Submit(ctx, replay.Request{Action: replay.ActionReplay, DestinationNamespace: "eu",
		Selection: replay.Selection{Filter: &dlq.Filter{Namespace: "us"}}})
	if err != nil {
		t.Fatal(err)
	}
	env := &env{t: t, st: e.st}
	j := env.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusPaused || !strings.HasPrefix(j.PausedReason, "the destination eu/orders is disabled for sending: enable it") {
		t.Fatalf("job = %s %+v, reason %q; want paused naming eu/orders", j.Status, j.Counts, j.PausedReason)
	}
	if j.Counts.Pending != 3 || j.Flagged != 0 {
		t.Errorf("counts %+v, flagged %d; want 3 pending, none flagged", j.Counts, j.Flagged)
	}
}

// A source disabled for receiving (ReceiveDisabled, which closes its
// dead-letter queue to receivers too): the job pauses saying which entity
// to enable and how, nothing is sent or removed, and the resume after
// enabling it replays every message once.
func TestReceiveDisabledSourcePauses(t *testing.T) {
	e := newEnv(t, queues("orders", "archive"), envOptions{giveUp: 2 * time.Second})
	e.sendAndDeadLetter("orders", "rd", 12, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 12)
	e.setStatus("orders", admin.EntityStatusReceiveDisabled)

	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}, Destination: "archive"})
	j := e.finished(job.ID, 30*time.Second)
	t.Logf("paused: %s", j.PausedReason)
	if j.Status != replay.StatusPaused {
		t.Fatalf("job = %+v, want paused", j)
	}
	for _, want := range []string{"the source orders is disabled for receiving", "az servicebus queue update --name orders --status Active", "resume"} {
		if !strings.Contains(j.PausedReason, want) {
			t.Errorf("paused_reason %q does not say %q", j.PausedReason, want)
		}
	}
	if j.Counts.Sent+j.Counts.Completed+j.Counts.Failed != 0 || j.Counts.Pending != 12 {
		t.Errorf("counts while paused: %+v; want 12 pending, nothing sent or failed", j.Counts)
	}
	if n := len(e.peekAll("archive", 0)); n != 0 {
		t.Fatalf("the destination holds %d messages while the source is disabled", n)
	}

	e.setStatus("orders", admin.EntityStatusActive)
	if _, err := e.engine.Resume(audit.WithActor(t.Context(), "tester"), job.ID); err != nil {
		t.Fatal(err)
	}
	j = e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 12 {
		t.Fatalf("resumed job = %+v, want 12 completed", j)
	}
	checkOnceEach(t, e.copiesIn("archive"), 12)
	if left := len(e.peekAll("orders", azservicebus.SubQueueDeadLetter)); left != 0 {
		t.Errorf("%d messages left in the DLQ", left)
	}
}
