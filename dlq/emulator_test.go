package dlq_test

// The ingester end to end: the real Service Bus adapter and the real
// azservicebus SDK against our emulator over loopback, into a real store.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
	"github.com/dlqdash/dlqdash/servicebus"
	"github.com/dlqdash/dlqdash/store"
)

type emuEnv struct {
	t     *testing.T
	ns    *broker.Namespace
	srv   *emulator.Emulator
	conn  string
	admin string
	sb    *azservicebus.Client
}

func startEmulator(t *testing.T) *emuEnv {
	t.Helper()
	srv := emulatortest.Start(t, emulator.Config{TickInterval: emulator.DefaultTickInterval})
	ns, conn := srv.Namespace(), srv.ConnectionString()
	sb, err := azservicebus.NewClientFromConnectionString(conn, &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 2, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	return &emuEnv{t: t, ns: ns, srv: srv, conn: conn, admin: srv.AdminURL(), sb: sb}
}

func (e *emuEnv) queue(name string, p broker.QueueProperties) {
	e.t.Helper()
	if _, err := e.ns.CreateQueue(name, p); err != nil {
		e.t.Fatal(err)
	}
}

func (e *emuEnv) send(queue string, msgs ...*azservicebus.Message) {
	e.t.Helper()
	s, err := e.sb.NewSender(queue, nil)
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

// deadLetter receives n messages of queue and dead-letters them.
func (e *emuEnv) deadLetter(queue string, n int, reason, desc string) {
	e.t.Helper()
	r, err := e.sb.NewReceiverForQueue(queue, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Close(context.Background())
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

func (e *emuEnv) sdkPeekAll(queue string, sub azservicebus.SubQueue) []*azservicebus.ReceivedMessage {
	e.t.Helper()
	r, err := e.sb.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{SubQueue: sub})
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Close(context.Background())
	var out []*azservicebus.ReceivedMessage
	from := int64(0)
	for {
		ms, err := r.PeekMessages(e.t.Context(), 100, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
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

func (e *emuEnv) ingester(t *testing.T, st *store.Store) (*dlq.Ingester, func()) {
	t.Helper()
	client, err := servicebus.Open(t.Context(), e.conn, servicebus.Options{AdminEndpoint: e.admin})
	if err != nil {
		t.Fatal(err)
	}
	in := dlq.New(dlq.Config{Broker: client, Catalog: st, Namespace: "emulator", Poll: 20 * time.Millisecond,
		MinFullInterval: 50 * time.Millisecond, MainInterval: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		client.Close(context.Background())
	}
	t.Cleanup(stop)
	return in, stop
}

func openStore(t *testing.T) (*store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "catalog.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cataloged returns the present messages of entity/subqueue, with bodies,
// keyed by sequence number, read back through the store's export.
func cataloged(t *testing.T, st *store.Store, entity string, q dlq.SubQueue) map[int64]dlq.Record {
	t.Helper()
	out := map[int64]dlq.Record{}
	err := st.ExportMessages(t.Context(), dlq.Filter{Entity: entity, SubQueue: q}, func(r dlq.Record) error {
		out[r.SequenceNumber] = r
		return nil
	})
	if unknown := (*dlq.UnknownEntityError)(nil); errors.As(err, &unknown) {
		return out // not cataloged yet
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestIngesterAgainstTheEmulator(t *testing.T) {
	e := startEmulator(t)
	e.queue("orders", broker.QueueProperties{LockDuration: 30 * time.Second})
	e.queue("tiny", broker.QueueProperties{})

	bigBody := bytes.Repeat([]byte("x"), 200<<10)
	at := time.Date(2026, 11, 22, 10, 42, 7, 123e6, time.UTC)
	msgs := []*azservicebus.Message{
		{Body: []byte(`{"order":1,"note":"<script>alert(1)</script>"}`), ContentType: ptr("application/json"),
			MessageID: ptr("order-1"), Subject: ptr("OrderPlaced"), CorrelationID: ptr("corr-1"),
			ApplicationProperties: map[string]any{"big": int64(math.MaxInt64 - 1), "when": at, "ok": true, "f": 2.5,
				"bin": []byte{1, 2, 3}, "s": "acme", "i32": int32(-7)}},
		{Body: []byte{0xff, 0xfe, 0x00, 0x01}, MessageID: ptr("binary")},
		{Body: []byte("caf\xe9"), MessageID: ptr("latin1")},
		{Body: []byte{}, MessageID: ptr("empty")},
		{Body: bigBody, MessageID: ptr("big"), TimeToLive: ptr(time.Hour)},
		{Body: []byte("with session"), MessageID: ptr("sess"), PartitionKey: ptr("p1"), ReplyTo: ptr("replies"), To: ptr("someone")},
	}
	e.send("orders", msgs...)
	e.deadLetter("orders", len(msgs), "SqlTimeout", "Timeout after 30012 ms")

	// Deferred and scheduled messages of the main entity.
	e.send("orders", &azservicebus.Message{Body: []byte("defer me"), MessageID: ptr("deferred-1")})
	r, err := e.sb.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.ReceiveMessages(t.Context(), 1, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive to defer: %v %d", err, len(got))
	}
	if err := r.DeferMessage(t.Context(), got[0], nil); err != nil {
		t.Fatal(err)
	}
	r.Close(context.Background())
	sender, _ := e.sb.NewSender("orders", nil)
	if _, err := sender.ScheduleMessages(t.Context(), []*azservicebus.Message{{Body: []byte("later"), MessageID: ptr("sched-1")}},
		time.Now().Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	sender.Close(context.Background())

	st, _ := openStore(t)
	in, stop := e.ingester(t, st)
	waitUntil(t, "every dead letter cataloged", func() bool { return len(cataloged(t, st, "orders", dlq.SubQueueDeadLetter)) == len(msgs) })
	waitUntil(t, "deferred and scheduled cataloged", func() bool { return len(cataloged(t, st, "orders", dlq.SubQueueMain)) == 2 })

	// Field by field against what the SDK itself peeks.
	cat := cataloged(t, st, "orders", dlq.SubQueueDeadLetter)
	for _, m := range e.sdkPeekAll("orders", azservicebus.SubQueueDeadLetter) {
		c, ok := cat[*m.SequenceNumber]
		if !ok {
			t.Errorf("sequence number %d not cataloged", *m.SequenceNumber)
			continue
		}
		compareRecord(t, c, m)
	}
	for _, c := range cataloged(t, st, "orders", dlq.SubQueueMain) {
		switch c.MessageID {
		case "deferred-1":
			if c.State != dlq.StateDeferred {
				t.Errorf("deferred-1 state %s", c.State)
			}
		case "sched-1":
			if c.State != dlq.StateScheduled || c.ScheduledEnqueueAt == nil {
				t.Errorf("sched-1 = %+v", c)
			}
		default:
			t.Errorf("unexpected main-entity message %q (%s)", c.MessageID, c.State)
		}
	}

	// New dead letters appear; one completed by someone else gets gone_at.
	e.send("orders", &azservicebus.Message{Body: []byte(`{"order":2}`), MessageID: ptr("order-2")})
	e.deadLetter("orders", 1, "ValidationFailed", "field 'sku' is required")
	waitUntil(t, "the new dead letter", func() bool { return len(cataloged(t, st, "orders", dlq.SubQueueDeadLetter)) == len(msgs)+1 })

	dr, _ := e.sb.NewReceiverForQueue("orders", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	rec, err := dr.ReceiveMessages(t.Context(), 1, nil)
	if err != nil || len(rec) != 1 {
		t.Fatalf("receive from DLQ: %v", err)
	}
	if err := dr.CompleteMessage(t.Context(), rec[0], nil); err != nil {
		t.Fatal(err)
	}
	dr.Close(context.Background())
	waitUntil(t, "the completed message gone", func() bool {
		_, present := cataloged(t, st, "orders", dlq.SubQueueDeadLetter)[*rec[0].SequenceNumber]
		return !present
	})
	var goneAt *time.Time
	st.ExportMessages(t.Context(), dlq.Filter{Entity: "orders", IncludeGone: true}, func(r dlq.Record) error {
		if r.SequenceNumber == *rec[0].SequenceNumber && r.SubQueue == dlq.SubQueueDeadLetter {
			goneAt = r.GoneAt
		}
		return nil
	})
	if goneAt == nil {
		t.Error("completed message kept without gone_at")
	}
	if !in.Status().Healthy {
		t.Errorf("status %+v", in.Status())
	}

	// Restart: the cursors carry over, nothing is read twice.
	stop()
	e.srv.ResetStats()
	in2, _ := e.ingester(t, st)
	waitUntil(t, "the restarted ingester", func() bool { return in2.Status().Healthy })
	// Ten polls (each lists queues and topics over the admin API), none of
	// which may peek.
	waitUntil(t, "ten polls", func() bool { return e.srv.Stats().Totals.Admin >= 20 })
	if n := e.srv.Stats().Totals.Peek; n != 0 {
		t.Errorf("restart with nothing changed peeked %d times, want 0", n)
	}

}

func compareRecord(t *testing.T, c dlq.Record, m *azservicebus.ReceivedMessage) {
	t.Helper()
	id := m.MessageID
	if c.MessageID != m.MessageID || !bytes.Equal(c.Body, m.Body) || int64(len(m.Body)) != c.BodySize {
		t.Errorf("%s: id/body differ (body %d vs %d bytes)", id, len(c.Body), len(m.Body))
	}
	strs := []struct {
		name string
		a, b *string
	}{
		{"content_type", c.ContentType, m.ContentType}, {"correlation_id", c.CorrelationID, m.CorrelationID},
		{"subject", c.Subject, m.Subject}, {"session_id", c.SessionID, m.SessionID},
		{"partition_key", c.PartitionKey, m.PartitionKey}, {"reply_to", c.ReplyTo, m.ReplyTo}, {"to", c.To, m.To},
		{"dead_letter_reason", c.DeadLetterReason, m.DeadLetterReason},
		{"dead_letter_error_description", c.DeadLetterErrorDescription, m.DeadLetterErrorDescription},
		{"dead_letter_source", c.DeadLetterSource, m.DeadLetterSource},
	}
	for _, s := range strs {
		if (s.a == nil) != (s.b == nil) || (s.a != nil && *s.a != *s.b) {
			t.Errorf("%s: %s = %v, SDK says %v", id, s.name, deref(s.a), deref(s.b))
		}
	}
	if c.DeliveryCount != m.DeliveryCount {
		t.Errorf("%s: delivery count %d vs %d", id, c.DeliveryCount, m.DeliveryCount)
	}
	// The SDK reports an unset TTL (AMQP ttl 0) as 0s and ExpiresAt as the
	// enqueued time; the adapter reports both as unset, which is the truth:
	// such a message never expires.
	sdkExpires, sdkTTL := m.ExpiresAt, m.TimeToLive
	if sdkTTL != nil && *sdkTTL == 0 {
		sdkExpires, sdkTTL = nil, nil
	}
	times := []struct {
		name string
		a, b *time.Time
	}{{"enqueued_at", c.EnqueuedAt, m.EnqueuedTime}, {"expires_at", c.ExpiresAt, sdkExpires}}
	for _, tt := range times {
		if (tt.a == nil) != (tt.b == nil) || (tt.a != nil && tt.a.UnixMilli() != tt.b.UnixMilli()) {
			t.Errorf("%s: %s = %v, SDK says %v", id, tt.name, tt.a, tt.b)
		}
	}
	if (c.TimeToLive == nil) != (sdkTTL == nil) || (c.TimeToLive != nil && c.TimeToLive.Milliseconds() != sdkTTL.Milliseconds()) {
		t.Errorf("%s: ttl %v vs %v", id, c.TimeToLive, sdkTTL)
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(c.ApplicationProperties, &props); err != nil {
		t.Errorf("%s: properties %s: %v", id, c.ApplicationProperties, err)
	}
	if len(props) != len(m.ApplicationProperties) {
		t.Errorf("%s: %d properties, SDK has %d", id, len(props), len(m.ApplicationProperties))
	}
	if string(dlq.EncodeProperties(m.ApplicationProperties)) != string(c.ApplicationProperties) {
		t.Errorf("%s: properties %s, SDK's encode to %s", id, c.ApplicationProperties, dlq.EncodeProperties(m.ApplicationProperties))
	}
	if id == "order-1" {
		if string(props["big"]) != "9223372036854775806" || !strings.Contains(string(props["bin"]), base64.StdEncoding.EncodeToString([]byte{1, 2, 3})) ||
			string(props["when"]) != `"2026-11-22T10:42:07.123Z"` {
			t.Errorf("order-1 properties %s", c.ApplicationProperties)
		}
		if c.GroupID == "" {
			t.Error("order-1 has no failure group")
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func ptr[T any](v T) *T { return &v }

// restartable is an emulator whose AMQP and admin listeners can be stopped
// and started again on the same addresses, over the same namespace.
type restartable struct {
	t         *testing.T
	ns        *broker.Namespace
	srv       *emulator.Emulator
	amqpAddr  string
	adminAddr string
}

func (r *restartable) up() {
	r.t.Helper()
	srv, err := emulator.Start(r.t.Context(), emulator.Config{Namespace: r.ns, AMQPAddr: r.amqpAddr, AdminAddr: r.adminAddr})
	if err != nil {
		r.t.Fatal(err)
	}
	r.srv = srv
	r.amqpAddr, r.adminAddr = srv.AMQPAddr().String(), srv.AdminAddr().String()
}

func (r *restartable) down() {
	if err := r.srv.Close(); err != nil {
		r.t.Errorf("close the emulator: %v", err)
	}
}

func TestIngesterSurvivesFaults(t *testing.T) {
	r := &restartable{t: t, ns: broker.New(broker.Options{}), amqpAddr: "127.0.0.1:0", adminAddr: "127.0.0.1:0"}
	r.up()
	t.Cleanup(r.down)
	conn := r.srv.ConnectionString()
	e := &emuEnv{t: t, ns: r.ns, srv: r.srv, conn: conn, admin: "http://" + r.adminAddr}
	sb, err := azservicebus.NewClientFromConnectionString(conn, &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 5, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	e.sb = sb
	e.queue("orders", broker.QueueProperties{})
	e.queue("doomed", broker.QueueProperties{})

	batch := func(n int, tag string) {
		t.Helper()
		var ms []*azservicebus.Message
		for i := range n {
			ms = append(ms, &azservicebus.Message{Body: []byte(tag), MessageID: ptr(fmt.Sprintf("%s-%d", tag, i))})
		}
		e.send("orders", ms...)
		e.deadLetter("orders", n, "Fault"+tag, "during "+tag)
	}
	batch(20, "before")
	e.send("doomed", &azservicebus.Message{Body: []byte("x")})
	e.deadLetter("doomed", 1, "X", "y")

	st, _ := openStore(t)
	in, _ := e.ingester(t, st)
	want := 20
	caught := func(what string) {
		t.Helper()
		waitUntil(t, what, func() bool { return len(cataloged(t, st, "orders", dlq.SubQueueDeadLetter)) == want })
	}
	caught("the first batch")

	r.ns.InjectServerBusy("orders/$DeadLetterQueue", 3, time.Time{})
	r.ns.InjectServerBusy("orders", 3, time.Time{})
	batch(10, "busy")
	want += 10
	caught("the batch sent while the broker was busy")
	r.ns.ClearFaults()

	batch(10, "drop")
	r.srv.DropConnections()
	want += 10
	caught("the batch around dropped connections")

	r.srv.SetLatency(30 * time.Millisecond)
	batch(5, "slow")
	want += 5
	caught("the batch sent with latency")
	r.srv.SetLatency(0)

	if err := r.ns.DeleteQueue("doomed"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the deleted queue marked", func() bool { return len(cataloged(t, st, "doomed", dlq.SubQueueDeadLetter)) == 0 })

	// The broker stopped: the status says so, the catalog stays.
	sb.Close(context.Background())
	r.down()
	waitUntil(t, "an unhealthy status", func() bool { return !in.Status().Healthy })
	if st := in.Status(); st.Error == "" || st.LastSuccessAt == nil {
		t.Errorf("status while down: %+v", st)
	}
	if n := len(cataloged(t, st, "orders", dlq.SubQueueDeadLetter)); n != want {
		t.Errorf("catalog while the broker is down has %d, want %d", n, want)
	}

	// Back on the same addresses: it catches up.
	r.up()
	e.srv = r.srv
	sb2, err := azservicebus.NewClientFromConnectionString(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb2.Close(context.Background())
	e.sb = sb2
	batch(5, "after")
	want += 5
	caught("the batch after the restart")
	waitUntil(t, "a healthy status", func() bool { return in.Status().Healthy })

	// Nothing lost, nothing doubled: the catalog is exactly the DLQ.
	peeked := e.sdkPeekAll("orders", azservicebus.SubQueueDeadLetter)
	cat := cataloged(t, st, "orders", dlq.SubQueueDeadLetter)
	if len(peeked) != want || len(cat) != want {
		t.Fatalf("DLQ has %d, catalog %d, want %d", len(peeked), len(cat), want)
	}
	for _, m := range peeked {
		if c, ok := cat[*m.SequenceNumber]; !ok || c.MessageID != m.MessageID {
			t.Errorf("sequence number %d (%s) missing or different in the catalog", *m.SequenceNumber, m.MessageID)
		}
	}
	rows := 0
	st.ExportMessages(t.Context(), dlq.Filter{Entity: "orders", IncludeGone: true}, func(dlq.Record) error { rows++; return nil })
	if rows != want {
		t.Errorf("orders has %d catalog rows including gone, want %d (nothing twice)", rows, want)
	}
}
