package replay_test

// The engine end to end: the real Service Bus adapter and the real
// azservicebus SDK against our emulator over loopback, a real store (the
// catalog filled by the real ingester), and the real audit log.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/servicebus"
	"github.com/dlqdash/dlqdash/store"
)

type env struct {
	t        testing.TB
	ns       *broker.Namespace
	srv      *emulator.Emulator
	sb       *azservicebus.Client
	st       *store.Store
	log      *audit.Log
	client   *servicebus.Client
	engine   *replay.Engine
	ingester *dlq.Ingester
	// frozen is the freezable proxy the adapter connects through (with
	// envOptions.freezable).
	frozen *emulatortest.Freezable
}

type envOptions struct {
	giveUp time.Duration
	poison int
	batch  int
	// ingest, when set, configures the ingester instead of the tests'
	// fast polling (Broker and Catalog are filled in).
	ingest *dlq.Config
	// freezable: the adapter (engine and ingester) reaches the emulator
	// through an emulatortest.Freezable (env.frozen).
	freezable bool
	// wrap, when set, wraps the adapter the engine uses.
	wrap func(replay.Broker) replay.Broker
	// onChange receives the engine's job changes.
	onChange func(replay.Job)
	// noRun: the engine is not started (the test calls env.run).
	noRun bool
	// counter, when set, counts the engine's store and audit calls.
	counter *storeCounter
}

func newEnv(t testing.TB, setup func(ns *broker.Namespace), o envOptions) *env {
	t.Helper()
	ns := broker.New(broker.Options{})
	setup(ns)
	srv := emulatortest.Start(t, emulator.Config{Namespace: ns, TickInterval: emulator.DefaultTickInterval})
	conn := srv.ConnectionString()
	sb, err := azservicebus.NewClientFromConnectionString(conn, &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 2, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })

	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "dlqdash.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	adapterConn, admin := conn, srv.AdminURL()
	var frozen *emulatortest.Freezable
	if o.freezable {
		frozen = emulatortest.StartFreezable(t, srv)
		adapterConn, admin = frozen.ConnectionString(), frozen.AdminURL()
	}
	client, err := servicebus.Open(t.Context(), adapterConn, servicebus.Options{AdminEndpoint: admin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(context.Background()) })
	e := &env{t: t, ns: ns, srv: srv, sb: sb, st: st, log: audit.New(st), client: client, frozen: frozen}

	icfg := dlq.Config{Namespace: "emulator", Poll: 20 * time.Millisecond,
		MinFullInterval: 50 * time.Millisecond, MainInterval: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	if o.ingest != nil {
		icfg = *o.ingest
	}
	icfg.Broker, icfg.Catalog = client, st
	in := dlq.New(icfg)
	e.ingester = in
	e.engine = e.newEngine(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { in.Run(ctx); done <- struct{}{} }()
	if o.noRun {
		t.Cleanup(func() { cancel(); <-done })
		return e
	}
	go func() { e.engine.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	return e
}

// run starts the engine of an env made with noRun.
func (e *env) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.engine.Run(ctx); close(done) }()
	e.t.Cleanup(func() { cancel(); <-done })
}

func (e *env) newEngine(o envOptions) *replay.Engine {
	var logger *slog.Logger
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	var b replay.Broker = e.client
	if o.wrap != nil {
		b = o.wrap(b)
	}
	var st replay.Store = e.st
	var au replay.Auditor = e.log
	if o.counter != nil {
		st, au = o.counter.wrap(e.st, e.log)
	}
	eng, err := replay.New(replay.Config{Store: st, Broker: b, Audit: au, GiveUpAfter: o.giveUp,
		PoisonCap: o.poison, Batch: o.batch, Logger: logger, OnRemoved: e.ingester.Removed, OnChange: o.onChange})
	if err != nil {
		e.t.Fatal(err)
	}
	return eng
}

// send sends messages to a queue or topic.
func (e *env) send(to string, msgs ...*azservicebus.Message) {
	e.t.Helper()
	s, err := e.sb.NewSender(to, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer s.Close(context.Background())
	for _, m := range msgs {
		if err := s.SendMessage(e.t.Context(), m, nil); err != nil {
			e.t.Fatal(err)
		}
	}
}

// deadLetter receives n messages of a queue or subscription and
// dead-letters them with reason.
func (e *env) deadLetter(queue, sub string, n int, reason string) {
	e.t.Helper()
	var r *azservicebus.Receiver
	var err error
	if sub == "" {
		r, err = e.sb.NewReceiverForQueue(queue, nil)
	} else {
		r, err = e.sb.NewReceiverForSubscription(queue, sub, nil)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Close(context.Background())
	desc := "failed in a test"
	for got := 0; got < n; {
		ctx, cancel := context.WithTimeout(e.t.Context(), 10*time.Second)
		ms, err := r.ReceiveMessages(ctx, n-got, nil)
		cancel()
		if err != nil {
			e.t.Fatal(err)
		}
		for _, m := range ms {
			if err := r.DeadLetterMessage(e.t.Context(), m, &azservicebus.DeadLetterOptions{Reason: &reason, ErrorDescription: &desc}); err != nil {
				e.t.Fatal(err)
			}
		}
		got += len(ms)
	}
}

// sendAndDeadLetter puts n messages with ids prefix-0... into queue's DLQ.
func (e *env) sendAndDeadLetter(queue, prefix string, n int, reason string) {
	e.t.Helper()
	msgs := make([]*azservicebus.Message, n)
	for i := range msgs {
		id := fmt.Sprintf("%s-%d", prefix, i)
		msgs[i] = &azservicebus.Message{MessageID: &id, Body: []byte(fmt.Sprintf(`{"n":%d,"id":%q}`, i, id)),
			ApplicationProperties: map[string]any{"i": int64(i)}}
	}
	e.send(queue, msgs...)
	e.deadLetter(queue, "", n, reason)
}

func waitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cataloged waits until the catalog holds n present messages matching f and
// returns their ids.
func (e *env) cataloged(f dlq.Filter, n int) []int64 {
	e.t.Helper()
	var ids []int64
	waitFor(e.t, fmt.Sprintf("%d cataloged messages matching %+v", n, f), 20*time.Second, func() bool {
		ids = ids[:0]
		err := e.st.ExportMessages(e.t.Context(), f, func(r dlq.Record) error {
			ids = append(ids, r.ID)
			return nil
		})
		if unknown := (*dlq.UnknownEntityError)(nil); errors.As(err, &unknown) {
			return false // the entity is not cataloged yet
		}
		if err != nil {
			e.t.Fatal(err)
		}
		return len(ids) == n
	})
	return slices.Clone(ids)
}

// finished waits for a job to reach a final (or paused) status.
func (e *env) finished(id int64, within time.Duration) replay.Job {
	e.t.Helper()
	var j replay.Job
	waitFor(e.t, fmt.Sprintf("job %d to finish", id), within, func() bool {
		var err error
		if j, err = e.st.Job(e.t.Context(), id); err != nil {
			e.t.Fatal(err)
		}
		return j.Status.Finished() || j.Status == replay.StatusPaused
	})
	return j
}

func (e *env) submit(req replay.Request) (replay.Plan, replay.Job) {
	e.t.Helper()
	ctx := audit.WithActor(e.t.Context(), "tester")
	plan, job, err := e.engine.Submit(ctx, req)
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	return plan, job
}

// receiveAll receives (and completes) every message now in a queue or
// subscription's subqueue.
func (e *env) receiveAll(queue, sub string, q azservicebus.SubQueue) []*azservicebus.ReceivedMessage {
	e.t.Helper()
	var r *azservicebus.Receiver
	var err error
	opts := &azservicebus.ReceiverOptions{SubQueue: q}
	if sub == "" {
		r, err = e.sb.NewReceiverForQueue(queue, opts)
	} else {
		r, err = e.sb.NewReceiverForSubscription(queue, sub, opts)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Close(context.Background())
	var out []*azservicebus.ReceivedMessage
	for {
		ctx, cancel := context.WithTimeout(e.t.Context(), 500*time.Millisecond)
		ms, err := r.ReceiveMessages(ctx, 100, nil)
		cancel()
		if err != nil && ctx.Err() == nil {
			e.t.Fatal(err)
		}
		if len(ms) == 0 {
			return out
		}
		for _, m := range ms {
			if err := r.CompleteMessage(e.t.Context(), m, nil); err != nil {
				e.t.Fatal(err)
			}
		}
		out = append(out, ms...)
	}
}

// peekAll returns every message of a queue's subqueue without locking.
func (e *env) peekAll(queue string, q azservicebus.SubQueue) []*azservicebus.ReceivedMessage {
	e.t.Helper()
	r, err := e.sb.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{SubQueue: q})
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Close(context.Background())
	var out []*azservicebus.ReceivedMessage
	from := int64(0)
	for {
		ms, err := r.PeekMessages(e.t.Context(), 250, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(ms) == 0 {
			return out
		}
		out = append(out, ms...)
		from = *ms[len(ms)-1].SequenceNumber + 1
	}
}

func messageIDs(ms []*azservicebus.ReceivedMessage) []string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.MessageID)
	}
	slices.Sort(ids)
	return ids
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
