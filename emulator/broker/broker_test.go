package broker

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

func TestSequenceNumbersAndStamping(t *testing.T) {
	ns, clk := newNS(t)
	mustQueue(t, ns, "q", nil)
	mustQueue(t, ns, "other", nil)
	mustSend(t, ns, "q", msg("a"), msg("b"), msg("c"))
	mustSend(t, ns, "other", msg("x"))
	c := mustConsumer(t, ns, "Q", ConsumerOptions{})
	for i, want := range []string{"a", "b", "c"} {
		d := mustNext(t, c)
		if d.SequenceNumber != int64(i+1) || body(d) != want {
			t.Fatalf("delivery %d: seq %d body %q", i, d.SequenceNumber, body(d))
		}
		m := d.Message
		if m.Header == nil || m.Header.DeliveryCount != 0 || m.Header.Priority != 4 {
			t.Fatalf("header = %+v", m.Header)
		}
		if m.Properties == nil {
			t.Fatal("properties nil")
		}
		if got := ann(d, "x-opt-sequence-number"); got != int64(i+1) {
			t.Fatalf("seq annotation %v (%T)", got, got)
		}
		if got := ann(d, "x-opt-enqueued-time"); got != clk.Now().UTC() {
			t.Fatalf("enqueued %v", got)
		}
		if got, ok := d.Message.Annotations["x-opt-message-state"]; ok {
			t.Fatalf("an active message carries x-opt-message-state %v (the service sends none)", got)
		}
		if got := ann(d, "x-opt-locked-until"); got != d.LockedUntil || !d.LockedUntil.Equal(clk.Now().Add(time.Minute)) {
			t.Fatalf("locked until %v / %v", got, d.LockedUntil)
		}
		if got := d.Message.DeliveryAnnotations["x-opt-lock-token"]; got != d.LockToken || d.LockToken == (goamqp.UUID{}) {
			t.Fatalf("lock token %v / %v", got, d.LockToken)
		}
	}
	noNext(t, c)
	o := mustConsumer(t, ns, "other", ConsumerOptions{Mode: ReceiveAndDelete})
	d := mustNext(t, o)
	if d.SequenceNumber != 1 || d.LockToken != (goamqp.UUID{}) || !d.LockedUntil.IsZero() {
		t.Fatalf("receive-and-delete delivery %+v", d)
	}
	if _, ok := d.Message.Annotations["x-opt-locked-until"]; ok {
		t.Fatal("receive-and-delete delivery has x-opt-locked-until")
	}
	if d.Message.DeliveryAnnotations["x-opt-lock-token"] != nil {
		t.Fatal("receive-and-delete delivery has a lock token")
	}
	if got := counts(t, ns, "other"); got.Total != 0 {
		t.Fatalf("receive-and-delete left %+v", got)
	}
}

func TestSendNormalisation(t *testing.T) {
	ns, clk := newNS(t)
	mustQueue(t, ns, "q", nil)
	m := msg("a")
	m.Header = &goamqp.MessageHeader{Priority: 7, TTL: time.Hour, Durable: true, DeliveryCount: 9}
	m.Annotations = goamqp.Annotations{
		"x-opt-sequence-number":              nil,
		goamqp.Symbol("x-opt-enqueued-time"): nil,
		"x-opt-locked-until":                 nil,
		"x-opt-partition-key":                nil,
		"x-opt-deadletter-source":            nil,
		"custom":                             "kept",
	}
	m.DeliveryAnnotations = goamqp.Annotations{"x-opt-lock-token": nil, "d": int32(1)}
	m.ApplicationProperties = map[string]any{"k": "v"}
	mustSend(t, ns, "q", m)
	d := mustNext(t, mustConsumer(t, ns, "q", ConsumerOptions{}))
	h := d.Message.Header
	if h.Priority != 7 || h.TTL != time.Hour || !h.Durable || h.DeliveryCount != 0 {
		t.Fatalf("header %+v", h)
	}
	a := d.Message.Annotations
	if a["x-opt-sequence-number"] != int64(1) || a["x-opt-enqueued-time"] != clk.Now().UTC() || a["custom"] != "kept" {
		t.Fatalf("annotations %v", a)
	}
	for _, k := range []string{"x-opt-partition-key", "x-opt-deadletter-source"} {
		if _, ok := a[k]; ok {
			t.Fatalf("null %s kept", k)
		}
	}
	if _, ok := a[goamqp.Symbol("x-opt-enqueued-time")]; ok {
		t.Fatal("symbol-keyed duplicate kept")
	}
	if d.Message.DeliveryAnnotations["x-opt-lock-token"] != d.LockToken || d.Message.DeliveryAnnotations["d"] != int32(1) {
		t.Fatalf("delivery annotations %v", d.Message.DeliveryAnnotations)
	}
	if d.Message.ApplicationProperties["k"] != "v" {
		t.Fatalf("app props %v", d.Message.ApplicationProperties)
	}
}

func TestSendValidation(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "q", nil)
	mustQueue(t, ns, "sq", func(p *QueueProperties) { p.RequiresSession = true })
	mustNil(t, ns.CreateTopicDefault("t"))
	tests := []struct {
		name string
		path string
		mod  func(*goamqp.Message)
		want error
	}{
		{"null scheduled time", "q", func(m *goamqp.Message) { m.Annotations = goamqp.Annotations{"x-opt-scheduled-enqueue-time": nil} }, ErrInvalidMessage},
		{"string scheduled time", "q", func(m *goamqp.Message) { m.Annotations = goamqp.Annotations{"x-opt-scheduled-enqueue-time": "x"} }, ErrInvalidMessage},
		{"null message state", "q", func(m *goamqp.Message) { m.Annotations = goamqp.Annotations{"x-opt-message-state": nil} }, ErrInvalidMessage},
		{"string enqueue seq", "q", func(m *goamqp.Message) { m.Annotations = goamqp.Annotations{"x-opt-enqueue-sequence-number": "1"} }, ErrInvalidMessage},
		{"int reason", "q", func(m *goamqp.Message) { m.ApplicationProperties = map[string]any{"DeadLetterReason": 1} }, ErrInvalidMessage},
		{"null description", "q", func(m *goamqp.Message) { m.ApplicationProperties = map[string]any{"DeadLetterErrorDescription": nil} }, ErrInvalidMessage},
		{"session entity without group-id", "sq", nil, ErrInvalidMessage},
		{"to a DLQ", "q/$deadletterqueue", nil, ErrNotAllowed},
		{"unknown", "nope", nil, ErrNotFound},
		{"valid state", "q", func(m *goamqp.Message) { m.Annotations = goamqp.Annotations{"x-opt-message-state": int32(0)} }, nil},
		{"string reason", "q", func(m *goamqp.Message) { m.ApplicationProperties = map[string]any{"DeadLetterReason": "r"} }, nil},
		{"topic", "T", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := msg("x")
			if tt.mod != nil {
				tt.mod(m)
			}
			err := ns.Send(tt.path, m)
			if tt.want == nil {
				mustNil(t, err)
				return
			}
			wantErr(t, err, tt.want)
		})
	}
	wantErr(t, ns.Send("q", nil), ErrInvalidMessage)
	mustNil(t, ns.Send("t", msg("to topic without subscriptions")))
	_, err := ns.CreateSubscription("t", "s", DefaultSubscriptionProperties())
	mustNil(t, err)
	wantErr(t, ns.Send("t/Subscriptions/s", msg("x")), ErrNotAllowed)
}

// CreateTopicDefault is a test shorthand.
func (ns *Namespace) CreateTopicDefault(name string) error {
	_, err := ns.CreateTopic(name, DefaultTopicProperties())
	return err
}

func TestResolve(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "Orders", nil)
	mustQueue(t, ns, "a/b", nil)
	mustNil(t, ns.CreateTopicDefault("Events"))
	_, err := ns.CreateSubscription("events", "Audit", DefaultSubscriptionProperties())
	mustNil(t, err)
	tests := []struct {
		path string
		want Address
		err  error
	}{
		{"orders", Address{Kind: KindQueue, Entity: "Orders"}, nil},
		{"ORDERS/$DeadLetterQueue", Address{Kind: KindQueue, Entity: "Orders", SubQueue: SubQueueDeadLetter}, nil},
		{"orders/$Transfer/$DeadLetterQueue", Address{Kind: KindQueue, Entity: "Orders", SubQueue: SubQueueTransferDeadLetter}, nil},
		{"a/b/$deadletterqueue", Address{Kind: KindQueue, Entity: "a/b", SubQueue: SubQueueDeadLetter}, nil},
		{"events", Address{Kind: KindTopic, Entity: "Events", Topic: "Events"}, nil},
		{"events/subscriptions/audit", Address{Kind: KindSubscription, Entity: "Events/Subscriptions/Audit", Topic: "Events", Subscription: "Audit"}, nil},
		{"Events/Subscriptions/Audit/$DeadLetterQueue", Address{Kind: KindSubscription, Entity: "Events/Subscriptions/Audit", Topic: "Events", Subscription: "Audit", SubQueue: SubQueueDeadLetter}, nil},
		{"events/$deadletterqueue", Address{}, ErrNotFound},
		{"events/subscriptions/nope", Address{}, ErrNotFound},
		{"nope", Address{}, ErrNotFound},
	}
	for _, tt := range tests {
		got, err := ns.Resolve(tt.path)
		if tt.err != nil {
			wantErr(t, err, tt.err)
			continue
		}
		mustNil(t, err)
		if got != tt.want {
			t.Errorf("Resolve(%q) = %+v, want %+v", tt.path, got, tt.want)
		}
	}
}

func TestPeekOrderingAndStates(t *testing.T) {
	ns, clk := newNS(t)
	mustQueue(t, ns, "q", nil)
	for i := 1; i <= 6; i++ {
		mustSend(t, ns, "q", msg(fmt.Sprint(i)))
	}
	future := msg("scheduled")
	future.Annotations = goamqp.Annotations{"x-opt-scheduled-enqueue-time": clk.Now().Add(time.Hour)}
	mustSend(t, ns, "q", future) // seq 7
	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	var ds []Delivery
	for range 4 {
		ds = append(ds, mustNext(t, c))
	}
	// Dead-letter out of order: 4, then 1, then 3; defer 2.
	mustNil(t, ns.DeadLetter(ds[3].LockToken, "r4", "d4", nil))
	mustNil(t, ns.DeadLetter(ds[0].LockToken, "r1", "", map[string]any{"extra": int64(1)}))
	mustNil(t, ns.DeadLetter(ds[2].LockToken, "", "", nil))
	mustNil(t, ns.Defer(ds[1].LockToken, nil))

	main, err := ns.Peek("q", 1, 100)
	mustNil(t, err)
	if got := seqs(main); !slices.Equal(got, []int64{2, 5, 6, 7}) {
		t.Fatalf("main peek seqs %v", got)
	}
	states := map[int64]any{2: int64(1), 5: nil, 6: nil, 7: int64(2)} // active: absent
	for _, d := range main {
		if got := ann(d, "x-opt-message-state"); got != states[d.SequenceNumber] {
			t.Errorf("seq %d state %v", d.SequenceNumber, got)
		}
		if _, ok := d.Message.Annotations["x-opt-locked-until"]; ok || d.LockToken != (goamqp.UUID{}) {
			t.Errorf("peeked seq %d has lock fields", d.SequenceNumber)
		}
	}
	dlq, err := ns.Peek("q/$DeadLetterQueue", 0, 100)
	mustNil(t, err)
	if got := seqs(dlq); !slices.Equal(got, []int64{1, 3, 4}) {
		t.Fatalf("dlq peek seqs %v", got)
	}
	wantProps := []map[string]any{
		{"DeadLetterReason": "r1", "DeadLetterErrorDescription": "", "extra": int64(1)},
		{"DeadLetterReason": "", "DeadLetterErrorDescription": ""},
		{"DeadLetterReason": "r4", "DeadLetterErrorDescription": "d4"},
	}
	for i, d := range dlq {
		if !maps.Equal(d.Message.ApplicationProperties, wantProps[i]) {
			t.Errorf("dlq seq %d props %v", d.SequenceNumber, d.Message.ApplicationProperties)
		}
	}
	page, err := ns.Peek("q", 6, 1)
	mustNil(t, err)
	if got := seqs(page); !slices.Equal(got, []int64{6}) {
		t.Fatalf("page %v", got)
	}
	page, err = ns.Peek("q", 8, 10)
	mustNil(t, err)
	if len(page) != 0 {
		t.Fatalf("peek past end: %v", seqs(page))
	}
	_, err = ns.Peek("nope", 1, 1)
	wantErr(t, err, ErrNotFound)
}

func TestLockExpiryRedelivers(t *testing.T) {
	ns, clk := newNS(t)
	mustQueue(t, ns, "q", func(p *QueueProperties) { p.LockDuration = 30 * time.Second })
	mustSend(t, ns, "q", msg("a"))
	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	d1 := mustNext(t, c)
	noNext(t, c)
	signalled(c) // drain
	clk.Advance(29 * time.Second)
	ns.Tick()
	noNext(t, c)
	clk.Advance(time.Second)
	ns.Tick()
	if !signalled(c) {
		t.Fatal("lock expiry did not notify")
	}
	d2 := mustNext(t, c)
	if d2.SequenceNumber != 1 || d2.Message.Header.DeliveryCount != 1 || d2.LockToken == d1.LockToken {
		t.Fatalf("redelivery seq %d count %d", d2.SequenceNumber, d2.Message.Header.DeliveryCount)
	}
	wantErr(t, ns.Complete(d1.LockToken), ErrLockLost)
	// Lazy expiry: no Tick, settlement after the lock time fails and the
	// message comes back with a higher count.
	clk.Advance(31 * time.Second)
	wantErr(t, ns.Complete(d2.LockToken), ErrLockLost)
	d3 := mustNext(t, c)
	if d3.Message.Header.DeliveryCount != 2 {
		t.Fatalf("count %d", d3.Message.Header.DeliveryCount)
	}
	mustNil(t, ns.Complete(d3.LockToken))
}

func TestLockExpiryRacesSettlement(t *testing.T) {
	const n = 400
	ns, clk := newNS(t)
	mustQueue(t, ns, "q", func(p *QueueProperties) { p.LockDuration = time.Second })
	for i := range n {
		mustSend(t, ns, "q", msg(fmt.Sprint(i)))
	}
	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	tokens := make([]goamqp.UUID, n)
	for i := range n {
		tokens[i] = mustNext(t, c).LockToken
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	completed := 0
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				err := ns.Complete(tokens[i])
				switch {
				case err == nil:
					mu.Lock()
					completed++
					mu.Unlock()
				case !errors.Is(err, ErrLockLost):
					t.Errorf("complete: %v", err)
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			clk.Advance(100 * time.Millisecond)
			ns.Tick()
		}
	})
	wg.Wait()
	ns.Tick()
	left := counts(t, ns, "q").Active
	if int64(completed)+left != n {
		t.Fatalf("completed %d + left %d != %d", completed, left, n)
	}
	for range left {
		d := mustNext(t, c)
		if d.Message.Header.DeliveryCount != 1 {
			t.Fatalf("seq %d count %d", d.SequenceNumber, d.Message.Header.DeliveryCount)
		}
	}
	noNext(t, c)
	t.Logf("completed %d, expired %d", completed, left)
}

func TestRenewLock(t *testing.T) {
	ns, clk := newNS(t)
	mustQueue(t, ns, "q", nil)
	mustSend(t, ns, "q", msg("a"))
	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	d := mustNext(t, c)
	clk.Advance(50 * time.Second)
	until, err := ns.RenewLock(d.LockToken)
	mustNil(t, err)
	if !until.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("renewed until %v", until)
	}
	clk.Advance(30 * time.Second)
	ns.Tick()
	noNext(t, c)
	mustNil(t, ns.Complete(d.LockToken))
	_, err = ns.RenewLock(d.LockToken)
	wantErr(t, err, ErrLockLost)
}

func TestAbandonMergesProps(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "q", nil)
	m := msg("a")
	m.ApplicationProperties = map[string]any{"keep": "me", "hello": "old"}
	mustSend(t, ns, "q", m)
	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	d := mustNext(t, c)
	mustNil(t, ns.Abandon(d.LockToken, map[string]any{"hello": "world", "n": int32(2)}))
	d2 := mustNext(t, c)
	want := map[string]any{"keep": "me", "hello": "world", "n": int32(2)}
	if !maps.Equal(d2.Message.ApplicationProperties, want) || d2.Message.Header.DeliveryCount != 1 {
		t.Fatalf("after abandon: props %v count %d", d2.Message.ApplicationProperties, d2.Message.Header.DeliveryCount)
	}
	wantErr(t, ns.Abandon(d2.LockToken, map[string]any{"DeadLetterReason": 5}), ErrInvalidMessage)
	wantErr(t, ns.Abandon(d.LockToken, nil), ErrLockLost)
}

func TestMaxDeliveryCount(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "q", func(p *QueueProperties) { p.MaxDeliveryCount = 3 })
	mustSend(t, ns, "q", msg("a"))
	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	dlqc := mustConsumer(t, ns, "q/$deadletterqueue", ConsumerOptions{})
	signalled(dlqc)
	for i := range 3 {
		d := mustNext(t, c)
		if got := d.Message.Header.DeliveryCount; got != uint32(i) {
			t.Fatalf("attempt %d: count %d", i, got)
		}
		mustNil(t, ns.Abandon(d.LockToken, nil))
	}
	noNext(t, c)
	if !signalled(dlqc) {
		t.Fatal("DLQ consumer not notified")
	}
	d := mustNext(t, dlqc)
	ap := d.Message.ApplicationProperties
	if ap["DeadLetterReason"] != "MaxDeliveryCountExceeded" ||
		ap["DeadLetterErrorDescription"] != "Message could not be consumed after 3 delivery attempts." ||
		d.Message.Header.DeliveryCount != 3 || d.SequenceNumber != 1 {
		t.Fatalf("dead-lettered: %v count %d", ap, d.Message.Header.DeliveryCount)
	}
	// Abandon in the DLQ never counts.
	for range 5 {
		mustNil(t, ns.Abandon(d.LockToken, nil))
		d = mustNext(t, dlqc)
		if d.Message.Header.DeliveryCount != 3 {
			t.Fatalf("DLQ abandon counted: %d", d.Message.Header.DeliveryCount)
		}
	}
	wantErr(t, ns.DeadLetter(d.LockToken, "again", "", nil), ErrNotAllowed)
	mustNil(t, ns.Complete(d.LockToken)) // the failed dead-letter kept the lock
	if got := counts(t, ns, "q"); got.Total != 0 {
		t.Fatalf("counts %+v", got)
	}
}

func TestReleaseDoesNotCount(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "q", func(p *QueueProperties) { p.MaxDeliveryCount = 1 })
	mustSend(t, ns, "q", msg("a"))
	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	for range 5 {
		d := mustNext(t, c)
		if d.Message.Header.DeliveryCount != 0 {
			t.Fatalf("count %d", d.Message.Header.DeliveryCount)
		}
		signalled(c)
		mustNil(t, ns.Release(d.LockToken))
		if !signalled(c) {
			t.Fatal("release did not notify")
		}
	}
}

func TestDeferAndReceiveDeferred(t *testing.T) {
	for _, mode := range []ReceiveMode{PeekLock, ReceiveAndDelete} {
		t.Run(fmt.Sprint("mode", mode), func(t *testing.T) {
			ns, _ := newNS(t)
			mustQueue(t, ns, "q", nil)
			mustSend(t, ns, "q", msg("a"), msg("b"))
			c := mustConsumer(t, ns, "q", ConsumerOptions{})
			d := mustNext(t, c)
			mustNil(t, ns.Defer(d.LockToken, map[string]any{"why": "later"}))
			wantErr(t, ns.Complete(d.LockToken), ErrLockLost)
			if got := mustNext(t, c).SequenceNumber; got != 2 {
				t.Fatalf("next after defer: %d", got)
			}
			noNext(t, c)
			if got := counts(t, ns, "q").Active; got != 2 {
				t.Fatalf("active %d (deferred and locked count)", got)
			}
			_, err := ns.ReceiveDeferred("q", []int64{1, 2}, mode)
			wantErr(t, err, ErrNotFound) // 2 is not deferred
			_, err = ns.ReceiveDeferred("q", []int64{99}, mode)
			wantErr(t, err, ErrNotFound)
			got, err := ns.ReceiveDeferred("q", []int64{1}, mode)
			mustNil(t, err)
			if len(got) != 1 {
				t.Fatalf("got %d", len(got))
			}
			g := got[0]
			if ann(g, "x-opt-message-state") != int64(1) || g.Message.Header.DeliveryCount != 1 || g.Message.ApplicationProperties["why"] != "later" {
				t.Fatalf("deferred delivery: %v %d %v", ann(g, "x-opt-message-state"), g.Message.Header.DeliveryCount, g.Message.ApplicationProperties)
			}
			if mode == ReceiveAndDelete {
				if g.LockToken != (goamqp.UUID{}) {
					t.Fatal("lock token in receive-and-delete")
				}
				_, err = ns.ReceiveDeferred("q", []int64{1}, mode)
				wantErr(t, err, ErrNotFound)
				return
			}
			if g.LockToken == (goamqp.UUID{}) || g.Message.DeliveryAnnotations["x-opt-lock-token"] != g.LockToken || ann(g, "x-opt-locked-until") == nil {
				t.Fatal("peek-lock deferred delivery without lock")
			}
			_, err = ns.ReceiveDeferred("q", []int64{1}, mode)
			wantErr(t, err, ErrNotFound) // locked
			// Abandoning a deferred message counts and keeps it deferred.
			mustNil(t, ns.Abandon(g.LockToken, nil))
			noNext(t, c)
			got, err = ns.ReceiveDeferred("q", []int64{1}, mode)
			mustNil(t, err)
			if got[0].Message.Header.DeliveryCount != 2 {
				t.Fatalf("count %d", got[0].Message.Header.DeliveryCount)
			}
			mustNil(t, ns.Complete(got[0].LockToken))
			peek, err := ns.Peek("q", 1, 10)
			mustNil(t, err)
			if !slices.Equal(seqs(peek), []int64{2}) {
				t.Fatalf("left %v", seqs(peek))
			}
		})
	}
}

func TestDeferWithMaxDeliveryCountOne(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "q", func(p *QueueProperties) { p.MaxDeliveryCount = 1 })
	mustSend(t, ns, "q", msg("a"))
	d := mustNext(t, mustConsumer(t, ns, "q", ConsumerOptions{}))
	mustNil(t, ns.Defer(d.LockToken, nil))
	c := counts(t, ns, "q")
	if c.Active != 0 || c.DeadLetter != 1 {
		t.Fatalf("counts %+v", c)
	}
	dl, err := ns.Peek("q/$deadletterqueue", 1, 1)
	mustNil(t, err)
	if dl[0].Message.ApplicationProperties["DeadLetterReason"] != "MaxDeliveryCountExceeded" {
		t.Fatalf("props %v", dl[0].Message.ApplicationProperties)
	}
}

func TestDeferInDeadLetterQueue(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "q", nil)
	mustSend(t, ns, "q", msg("a"), msg("b"))
	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	for range 2 {
		mustNil(t, ns.DeadLetter(mustNext(t, c).LockToken, "r", "d", nil))
	}
	dc := mustConsumer(t, ns, "q/$DeadLetterQueue", ConsumerOptions{})
	for range 2 {
		mustNil(t, ns.Defer(mustNext(t, dc).LockToken, nil))
	}
	noNext(t, dc)
	got, err := ns.ReceiveDeferred("q/$DeadLetterQueue", []int64{2}, ReceiveAndDelete)
	mustNil(t, err)
	if got[0].SequenceNumber != 2 || got[0].Message.Header.DeliveryCount != 0 {
		t.Fatalf("got seq %d count %d", got[0].SequenceNumber, got[0].Message.Header.DeliveryCount)
	}
	if c := counts(t, ns, "q"); c.DeadLetter != 1 {
		t.Fatalf("counts %+v", c)
	}
}

func TestTTL(t *testing.T) {
	for _, dlq := range []bool{false, true} {
		t.Run(fmt.Sprint("dlq=", dlq), func(t *testing.T) {
			ns, clk := newNS(t)
			mustQueue(t, ns, "q", func(p *QueueProperties) {
				p.DefaultMessageTimeToLive = 10 * time.Second
				p.DeadLetteringOnMessageExpiration = dlq
			})
			short := msg("short")
			short.Header = &goamqp.MessageHeader{TTL: 5 * time.Second}
			long := msg("long")
			long.Header = &goamqp.MessageHeader{TTL: time.Hour} // capped by the entity's 10s
			mustSend(t, ns, "q", short, long, msg("default"))
			c := mustConsumer(t, ns, "q", ConsumerOptions{})
			clk.Advance(5 * time.Second)
			// Expired messages are never delivered, even before a Tick.
			d := mustNext(t, c)
			if body(d) != "long" {
				t.Fatalf("got %q", body(d))
			}
			mustNil(t, ns.Abandon(d.LockToken, nil))
			clk.Advance(5 * time.Second)
			ns.Tick()
			noNext(t, c)
			got := counts(t, ns, "q")
			want := Counts{}
			if dlq {
				want.DeadLetter, want.Total = 3, 3
			}
			if got.Active != want.Active || got.DeadLetter != want.DeadLetter || got.Total != want.Total {
				t.Fatalf("counts %+v", got)
			}
			if !dlq {
				return
			}
			ds, err := ns.Peek("q/$DeadLetterQueue", 1, 10)
			mustNil(t, err)
			if !slices.Equal(seqs(ds), []int64{1, 2, 3}) {
				t.Fatalf("dlq %v", seqs(ds))
			}
			for _, d := range ds {
				ap := d.Message.ApplicationProperties
				if ap["DeadLetterReason"] != "TTLExpiredException" || ap["DeadLetterErrorDescription"] != "The message expired and was dead lettered." {
					t.Fatalf("props %v", ap)
				}
			}
			// TTL is not enforced in the DLQ.
			clk.Advance(24 * time.Hour)
			ns.Tick()
			if got := counts(t, ns, "q").DeadLetter; got != 3 {
				t.Fatalf("dlq count %d", got)
			}
		})
	}
}

func TestLockedMessageNotExpiredWhileLocked(t *testing.T) {
	ns, clk := newNS(t)
	mustQueue(t, ns, "q", func(p *QueueProperties) { p.DefaultMessageTimeToLive = 10 * time.Second })
	mustSend(t, ns, "q", msg("a"))
	d := mustNext(t, mustConsumer(t, ns, "q", ConsumerOptions{}))
	clk.Advance(20 * time.Second)
	ns.Tick()
	mustNil(t, ns.Complete(d.LockToken))
}

func TestScheduled(t *testing.T) {
	ns, clk := newNS(t)
	mustQueue(t, ns, "q", nil)
	due := clk.Now().Add(time.Minute)
	m := msg("later")
	m.Annotations = goamqp.Annotations{"x-opt-scheduled-enqueue-time": due, "x-opt-partition-key": "pk"}
	mustSend(t, ns, "q", m)
	past := msg("past")
	past.Annotations = goamqp.Annotations{"x-opt-scheduled-enqueue-time": clk.Now().Add(-time.Minute)}
	mustSend(t, ns, "q", past)
	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	if d := mustNext(t, c); body(d) != "past" {
		t.Fatalf("got %q", body(d))
	} else {
		mustNil(t, ns.Complete(d.LockToken))
	}
	noNext(t, c)
	if got := counts(t, ns, "q"); got.Scheduled != 1 || got.Active != 0 || got.Total != 1 {
		t.Fatalf("counts %+v", got)
	}
	p, err := ns.Peek("q", 1, 1)
	mustNil(t, err)
	if ann(p[0], "x-opt-message-state") != int64(2) || ann(p[0], "x-opt-scheduled-enqueue-time") != due || ann(p[0], "x-opt-partition-key") != "pk" {
		t.Fatalf("peeked scheduled: %v", p[0].Message.Annotations)
	}
	seqsOut, err := ns.Schedule("q", []*goamqp.Message{schedMsg("s1", due), schedMsg("s2", due.Add(time.Hour))})
	mustNil(t, err)
	if !slices.Equal(seqsOut, []int64{3, 4}) {
		t.Fatalf("scheduled seqs %v", seqsOut)
	}
	_, err = ns.Schedule("q", []*goamqp.Message{msg("no time")})
	wantErr(t, err, ErrInvalidMessage)
	mustNil(t, ns.CancelScheduled("q", []int64{4, 999, 2})) // 999 unknown, 2 not scheduled: ignored
	signalled(c)
	clk.Advance(time.Minute)
	ns.Tick()
	if !signalled(c) {
		t.Fatal("activation did not notify")
	}
	// Active now under new numbers (the queue's next ones, in due order),
	// enqueued at their due time; the scheduled numbers 1 and 3 are gone.
	p, err = ns.Peek("q", 1, 10)
	mustNil(t, err)
	if !slices.Equal(seqs(p), []int64{5, 6}) {
		t.Fatalf("peek after activation: %v", seqs(p))
	}
	mustNil(t, ns.CancelScheduled("q", []int64{1, 3})) // no longer scheduled: ignored
	d1, d2 := mustNext(t, c), mustNext(t, c)
	if body(d1) != "later" || body(d2) != "s1" || ann(d1, "x-opt-enqueued-time") != due || ann(d1, "x-opt-message-state") != nil {
		t.Fatalf("activated %q %q enqueued %v", body(d1), body(d2), ann(d1, "x-opt-enqueued-time"))
	}
	if d1.SequenceNumber != 5 || ann(d1, "x-opt-sequence-number") != int64(5) || d2.SequenceNumber != 6 {
		t.Fatalf("activated seqs %d %d", d1.SequenceNumber, d2.SequenceNumber)
	}
	if got := counts(t, ns, "q"); got.Scheduled != 0 || got.Active != 2 {
		t.Fatalf("counts %+v", got)
	}
	mustSend(t, ns, "q", msg("next"))
	if p, _ := ns.Peek("q", 7, 1); len(p) != 1 || body(p[0]) != "next" {
		t.Fatal("the next send does not take number 7")
	}
}

func schedMsg(b string, at time.Time) *goamqp.Message {
	m := msg(b)
	m.Annotations = goamqp.Annotations{"x-opt-scheduled-enqueue-time": at}
	return m
}

func TestDuplicateDetection(t *testing.T) {
	ns, clk := newNS(t)
	mustQueue(t, ns, "q", func(p *QueueProperties) {
		p.RequiresDuplicateDetection = true
		p.DuplicateDetectionHistoryTimeWindow = time.Minute
	})
	mustQueue(t, ns, "plain", nil)
	mustSend(t, ns, "q", msgID("a", "id1"), msgID("b", "id1"), msgID("c", "id2"), msg("no id"), msg("no id"))
	mustSend(t, ns, "plain", msgID("a", "id1"), msgID("b", "id1"))
	if got := counts(t, ns, "q").Active; got != 4 {
		t.Fatalf("inside window: %d messages", got)
	}
	if got := counts(t, ns, "plain").Active; got != 2 {
		t.Fatalf("no detection: %d", got)
	}
	clk.Advance(59 * time.Second)
	mustSend(t, ns, "q", msgID("d", "id1"))
	clk.Advance(time.Second)
	ns.Tick()
	mustSend(t, ns, "q", msgID("e", "id1"))
	if got := counts(t, ns, "q").Active; got != 5 {
		t.Fatalf("outside window: %d messages", got)
	}
	ds, err := ns.Peek("q", 1, 10)
	mustNil(t, err)
	if !slices.Equal(seqs(ds), []int64{1, 2, 3, 4, 5}) || body(ds[4]) != "e" {
		t.Fatalf("seqs %v", seqs(ds))
	}
}

func TestTopicFanOut(t *testing.T) {
	ns, _ := newNS(t)
	mustNil(t, ns.CreateTopicDefault("t"))
	sp := DefaultSubscriptionProperties()
	subs := map[string][]Rule{
		"all":   nil,
		"none":  {{Name: "f", Kind: FilterFalse}},
		"corr":  {{Name: "c", Kind: FilterCorrelation, Correlation: &CorrelationFilter{Subject: "orders", Properties: map[string]any{"n": 1}}}},
		"sql":   {{Name: "s", Kind: FilterSQL, SQLExpression: "color = 'red'"}},
		"sql10": {{Name: "s", Kind: FilterSQL, SQLExpression: "1 = 0"}},
		"mixed": {{Name: "f", Kind: FilterFalse}, {Name: "c", Kind: FilterCorrelation, Correlation: &CorrelationFilter{CorrelationID: "cid"}}},
	}
	for name, rules := range subs {
		_, err := ns.CreateSubscription("t", name, sp, rules...)
		mustNil(t, err)
	}
	rs, err := ns.Rules("t", "all")
	mustNil(t, err)
	if len(rs) != 1 || rs[0].Name != "$Default" || rs[0].Kind != FilterTrue {
		t.Fatalf("default rules %+v", rs)
	}
	subject := "orders"
	m1 := msg("m1")
	m1.Properties.Subject = &subject
	m1.ApplicationProperties = map[string]any{"n": int64(1)}
	m2 := msg("m2")
	m2.Properties.CorrelationID = "cid"
	m2.ApplicationProperties = map[string]any{"color": "red"}
	m3 := msg("m3")
	m3.Properties.Subject = &subject
	m3.ApplicationProperties = map[string]any{"n": int64(2)}
	mustSend(t, ns, "t", m1, m2, m3)
	want := map[string][]int64{"all": {1, 2, 3}, "none": {}, "corr": {1}, "sql": {2}, "sql10": {}, "mixed": {2}}
	for name, ws := range want {
		ds, err := ns.Peek("t/Subscriptions/"+name, 1, 10)
		mustNil(t, err)
		if got := seqs(ds); !slices.Equal(got, ws) {
			t.Errorf("%s: seqs %v, want %v", name, got, ws)
		}
	}
	ti, err := ns.Topic("t")
	mustNil(t, err)
	if ti.SubscriptionCount != 6 || ti.Counts.Active != 6 {
		t.Fatalf("topic info %+v", ti)
	}
	// Rule CRUD changes routing.
	_, err = ns.CreateRule("t", "none", Rule{Name: "t", Kind: FilterSQL, SQLExpression: "1=1"})
	mustNil(t, err)
	_, err = ns.CreateRule("t", "none", Rule{Name: "T"})
	wantErr(t, err, ErrAlreadyExists)
	mustNil(t, ns.DeleteRule("t", "corr", "c"))
	_, err = ns.UpdateRule("t", "mixed", Rule{Name: "f", Kind: FilterTrue})
	mustNil(t, err)
	r, err := ns.Rule("t", "mixed", "F")
	mustNil(t, err)
	if r.Kind != FilterTrue || r.CreatedAt.IsZero() {
		t.Fatalf("updated rule %+v", r)
	}
	mustSend(t, ns, "t", msg("m4"))
	for name, has := range map[string]bool{"none": true, "corr": false, "mixed": true} {
		ds, err := ns.Peek("t/subscriptions/"+name, 4, 10)
		mustNil(t, err)
		if (len(ds) == 1) != has {
			t.Errorf("%s after rule changes: %v", name, seqs(ds))
		}
	}
	// Subscription copies are independent.
	c := mustConsumer(t, ns, "t/Subscriptions/all", ConsumerOptions{})
	d := mustNext(t, c)
	mustNil(t, ns.DeadLetter(d.LockToken, "x", "", map[string]any{"only": "here"}))
	ds, err := ns.Peek("t/Subscriptions/sql", 1, 1)
	mustNil(t, err)
	if _, ok := ds[0].Message.ApplicationProperties["only"]; ok {
		t.Fatal("dead-letter props leaked into another subscription")
	}
	_, err = ns.NewConsumer(t.Context(), "t", ConsumerOptions{})
	wantErr(t, err, ErrNotAllowed)
}

func TestDeliveryIsFreshCopy(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "q", nil)
	m := msg("a")
	m.ApplicationProperties = map[string]any{"k": "v"}
	m.Annotations = goamqp.Annotations{"a": "b"}
	mustSend(t, ns, "q", m)
	p1, err := ns.Peek("q", 1, 1)
	mustNil(t, err)
	id := p1[0].Message.Properties.MessageID // assigned by the broker
	p1[0].Message.ApplicationProperties["k"] = "changed"
	p1[0].Message.Annotations["a"] = "changed"
	p1[0].Message.Header.DeliveryCount = 42
	p1[0].Message.Properties.MessageID = "changed"
	p2, err := ns.Peek("q", 1, 1)
	mustNil(t, err)
	pm := p2[0].Message
	if pm.ApplicationProperties["k"] != "v" || pm.Annotations["a"] != "b" || pm.Header.DeliveryCount != 0 || pm.Properties.MessageID != id {
		t.Fatalf("stored state changed through a delivery: %+v", pm)
	}
}
