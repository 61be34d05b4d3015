package broker

import (
	"strings"
	"sync"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

func setForward(tb testing.TB, ns *Namespace, q, to, dlqTo string) {
	tb.Helper()
	qi, err := ns.Queue(q)
	mustNil(tb, err)
	p := qi.Properties
	p.ForwardTo, p.ForwardDeadLetteredMessagesTo = to, dlqTo
	_, err = ns.UpdateQueue(q, p)
	mustNil(tb, err)
}

func peekAll(tb testing.TB, ns *Namespace, path string) []Delivery {
	tb.Helper()
	ds, err := ns.Peek(path, 0, 100)
	mustNil(tb, err)
	return ds
}

func prop(d Delivery, k string) any { return d.Message.ApplicationProperties[k] }

func TestForwardQueueToQueue(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "dst", nil)
	mustQueue(t, ns, "src", func(p *QueueProperties) { p.ForwardTo = "DST" })
	// Give dst a different numbering than src.
	mustSend(t, ns, "dst", msg("first"))
	c := mustConsumer(t, ns, "src", ConsumerOptions{})
	m := msg("hello")
	m.ApplicationProperties = map[string]any{"k": "v"}
	m.Annotations = goamqp.Annotations{"x-custom": "a"}
	m.Properties.MessageID = "id-1"
	mustSend(t, ns, "src", m, msg("two"))

	noNext(t, c)
	if got := counts(t, ns, "src"); got.Total != 0 || got.Transfer != 0 {
		t.Fatalf("src counts = %+v, want empty", got)
	}
	ds := peekAll(t, ns, "dst")
	if len(ds) != 3 || body(ds[1]) != "hello" || body(ds[2]) != "two" {
		t.Fatalf("dst = %v", ds)
	}
	d := ds[1]
	if d.SequenceNumber != 2 || ann(d, annEnqueueSequenceNumber) != int64(1) || ann(ds[2], annEnqueueSequenceNumber) != int64(2) {
		t.Fatalf("seq %d, enqueue seq %v / %v", d.SequenceNumber, ann(d, annEnqueueSequenceNumber), ann(ds[2], annEnqueueSequenceNumber))
	}
	if ann(ds[0], annEnqueueSequenceNumber) != nil {
		t.Fatalf("direct send got %v", ann(ds[0], annEnqueueSequenceNumber))
	}
	if prop(d, "k") != "v" || ann(d, "x-custom") != "a" || d.Message.Properties.MessageID != "id-1" {
		t.Fatalf("lost message content: %+v", d.Message)
	}
	if got := counts(t, ns, "dst"); got.Active != 3 {
		t.Fatalf("dst counts = %+v", got)
	}
}

func TestForwardKeepsTTLAndScheduled(t *testing.T) {
	ns, clk := newNS(t)
	mustQueue(t, ns, "dst", nil)
	mustQueue(t, ns, "src", func(p *QueueProperties) {
		p.ForwardTo = "dst"
		p.DefaultMessageTimeToLive = time.Minute
	})
	mustSend(t, ns, "src", msg("ttl"))
	// The source's expiry caps the forwarded copy.
	clk.Advance(2 * time.Minute)
	ns.Tick()
	if got := counts(t, ns, "dst"); got.Active != 0 {
		t.Fatalf("dst after source TTL = %+v, want expired", got)
	}

	// A scheduled message stays in the source until it is due.
	sm := msg("later")
	sm.Annotations = goamqp.Annotations{annScheduledEnqueueTime: clk.Now().Add(time.Second)}
	seqs, err := ns.Schedule("src", []*goamqp.Message{sm})
	mustNil(t, err)
	if got := counts(t, ns, "src"); got.Scheduled != 1 {
		t.Fatalf("src counts = %+v", got)
	}
	clk.Advance(2 * time.Second)
	ns.Tick()
	// Activation gives it the source's next number, which the forward keeps.
	ds := peekAll(t, ns, "dst")
	if len(ds) != 1 || body(ds[0]) != "later" || ann(ds[0], annEnqueueSequenceNumber) != seqs[0]+1 || ann(ds[0], annMessageState) != nil {
		t.Fatalf("dst = %+v", ds)
	}
	if got := counts(t, ns, "src"); got.Total != 0 {
		t.Fatalf("src counts = %+v", got)
	}
}

func TestForwardQueueToTopicAndSubscriptionToQueue(t *testing.T) {
	ns, _ := newNS(t)
	_, err := ns.CreateTopic("t", DefaultTopicProperties())
	mustNil(t, err)
	mustQueue(t, ns, "sink", nil)
	_, err = ns.CreateSubscription("t", "plain", DefaultSubscriptionProperties())
	mustNil(t, err)
	sp := DefaultSubscriptionProperties()
	sp.ForwardTo = "sink"
	_, err = ns.CreateSubscription("t", "fwd", sp)
	mustNil(t, err)
	mustQueue(t, ns, "in", func(p *QueueProperties) { p.ForwardTo = "t" })

	mustSend(t, ns, "in", msg("a"))
	if ds := peekAll(t, ns, "t/Subscriptions/plain"); len(ds) != 1 || body(ds[0]) != "a" || ann(ds[0], annEnqueueSequenceNumber) != int64(1) {
		t.Fatalf("plain = %v", ds)
	}
	if ds := peekAll(t, ns, "t/Subscriptions/fwd"); len(ds) != 0 {
		t.Fatalf("fwd subscription kept %d messages", len(ds))
	}
	ds := peekAll(t, ns, "sink")
	// The first hop set x-opt-enqueue-sequence-number; later hops keep it.
	if len(ds) != 1 || body(ds[0]) != "a" || ann(ds[0], annEnqueueSequenceNumber) != int64(1) {
		t.Fatalf("sink = %v", ds)
	}
	si, err := ns.Subscription("t", "fwd")
	mustNil(t, err)
	if si.Counts.Total != 0 {
		t.Fatalf("fwd counts = %+v", si.Counts)
	}
}

func TestForwardChainAndHopLimit(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "c", nil)
	mustQueue(t, ns, "b", func(p *QueueProperties) { p.ForwardTo = "c" })
	mustQueue(t, ns, "a", func(p *QueueProperties) { p.ForwardTo = "b" })
	mustSend(t, ns, "a", msg("x"))
	if ds := peekAll(t, ns, "c"); len(ds) != 1 || body(ds[0]) != "x" {
		t.Fatalf("c = %v", ds)
	}
	for _, q := range []string{"a", "b"} {
		if got := counts(t, ns, q); got.Total != 0 {
			t.Fatalf("%s counts = %+v", q, got)
		}
	}

	// A loop: a → b → a. Four hops are allowed; the fifth is refused at a.
	setForward(t, ns, "b", "a", "")
	mustSend(t, ns, "a", msg("loop"))
	ds := peekAll(t, ns, "a/$Transfer/$DeadLetterQueue")
	if len(ds) != 1 || body(ds[0]) != "loop" || prop(ds[0], propDeadLetterReason) != "MaxTransferHopCountExceeded" {
		t.Fatalf("a TDLQ = %+v", ds)
	}
	if !strings.Contains(prop(ds[0], propDeadLetterDescription).(string), "4") {
		t.Fatalf("description = %v", prop(ds[0], propDeadLetterDescription))
	}
	if got := counts(t, ns, "a"); got.TransferDeadLetter != 1 || got.Total != 1 || got.Active != 0 {
		t.Fatalf("a counts = %+v", got)
	}
	if got := counts(t, ns, "b"); got.Total != 0 {
		t.Fatalf("b counts = %+v", got)
	}
}

func TestForwardFailureGoesToTransferDLQ(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "dst", nil)
	mustQueue(t, ns, "sess", func(p *QueueProperties) { p.RequiresSession = true })
	mustQueue(t, ns, "src", func(p *QueueProperties) { p.ForwardTo = "dst" })

	// Disabled target.
	qi, _ := ns.Queue("dst")
	qi.Properties.Status = StatusSendDisabled
	_, err := ns.UpdateQueue("dst", qi.Properties)
	mustNil(t, err)
	mustSend(t, ns, "src", msg("disabled"))

	// Missing target.
	mustNil(t, ns.DeleteQueue("dst"))
	mustSend(t, ns, "src", msg("missing"))

	// Session target, message without session id.
	setForward(t, ns, "src", "sess", "")
	mustSend(t, ns, "src", msg("nosession"))
	mustSend(t, ns, "src", sessMsg("withsession", "s1"))

	ds := peekAll(t, ns, "src/$Transfer/$DeadLetterQueue")
	if len(ds) != 3 {
		t.Fatalf("TDLQ = %v", ds)
	}
	for i, want := range []struct{ body, reason, desc string }{
		{"disabled", "TransferToEntityFailed", `"dst"`},
		{"missing", "TransferToEntityFailed", "does not exist"},
		{"nosession", "Session ID is null", "session identifier is null"},
	} {
		d := ds[i]
		if body(d) != want.body || prop(d, propDeadLetterReason) != want.reason || !strings.Contains(prop(d, propDeadLetterDescription).(string), want.desc) {
			t.Errorf("TDLQ[%d] = %q %v %v", i, body(d), prop(d, propDeadLetterReason), prop(d, propDeadLetterDescription))
		}
	}
	if !strings.Contains(prop(ds[0], propDeadLetterDescription).(string), "SendDisabled") {
		t.Errorf("disabled description = %v", prop(ds[0], propDeadLetterDescription))
	}
	if got := counts(t, ns, "src"); got.TransferDeadLetter != 3 || got.Active != 0 || got.DeadLetter != 0 || got.Total != 3 {
		t.Fatalf("src counts = %+v", got)
	}
	if ds := peekAll(t, ns, "sess"); len(ds) != 1 || body(ds[0]) != "withsession" {
		t.Fatalf("sess = %v", ds)
	}

	// The transfer DLQ is consumable: peek-lock then complete, and
	// receive-and-delete.
	c := mustConsumer(t, ns, "src/$transfer/$deadletterqueue", ConsumerOptions{})
	d := mustNext(t, c)
	if body(d) != "disabled" || d.LockToken == (goamqp.UUID{}) {
		t.Fatalf("first TDLQ delivery = %q", body(d))
	}
	mustNil(t, ns.Complete(d.LockToken))
	d = mustNext(t, c)
	mustNil(t, ns.Abandon(d.LockToken, nil))
	d = mustNext(t, c)
	if body(d) != "missing" || d.Message.Header.DeliveryCount != 0 {
		t.Fatalf("after abandon: %q dc %d", body(d), d.Message.Header.DeliveryCount)
	}
	mustNil(t, ns.Complete(d.LockToken))
	rd := mustConsumer(t, ns, "src/$Transfer/$DeadLetterQueue", ConsumerOptions{Mode: ReceiveAndDelete})
	if d := mustNext(t, rd); body(d) != "nosession" {
		t.Fatalf("got %q", body(d))
	}
	noNext(t, rd)
	if got := counts(t, ns, "src"); got.Total != 0 {
		t.Fatalf("src counts = %+v", got)
	}
}

func TestForwardTopicTargetSessionRejection(t *testing.T) {
	ns, _ := newNS(t)
	_, err := ns.CreateTopic("t", DefaultTopicProperties())
	mustNil(t, err)
	sp := DefaultSubscriptionProperties()
	sp.RequiresSession = true
	_, err = ns.CreateSubscription("t", "s", sp)
	mustNil(t, err)
	mustQueue(t, ns, "src", func(p *QueueProperties) { p.ForwardTo = "t" })
	mustSend(t, ns, "src", msg("x"))
	ds := peekAll(t, ns, "src/$Transfer/$DeadLetterQueue")
	if len(ds) != 1 || prop(ds[0], propDeadLetterReason) != "Session ID is null" {
		t.Fatalf("TDLQ = %v", ds)
	}
}

func TestForwardDeadLettered(t *testing.T) {
	ns, clk := newNS(t)
	mustQueue(t, ns, "dlqsink", nil)
	mustQueue(t, ns, "src", func(p *QueueProperties) {
		p.ForwardDeadLetteredMessagesTo = "dlqsink"
		p.MaxDeliveryCount = 1
		p.DefaultMessageTimeToLive = time.Hour
		p.DeadLetteringOnMessageExpiration = true
	})
	c := mustConsumer(t, ns, "src", ConsumerOptions{})
	mustSend(t, ns, "src", msg("explicit"), msg("mdc"))
	d := mustNext(t, c)
	mustNil(t, ns.DeadLetter(d.LockToken, "Bad", "really bad", map[string]any{"extra": "1"}))
	d = mustNext(t, c)
	mustNil(t, ns.Abandon(d.LockToken, nil))
	exp := msg("ttl")
	exp.Header = &goamqp.MessageHeader{TTL: time.Second}
	mustSend(t, ns, "src", exp)
	clk.Advance(2 * time.Second)
	ns.Tick()

	if got := counts(t, ns, "src"); got.Total != 0 {
		t.Fatalf("src counts = %+v", got)
	}
	ds := peekAll(t, ns, "dlqsink")
	if len(ds) != 3 {
		t.Fatalf("dlqsink = %v", ds)
	}
	for i, want := range []struct{ body, reason string }{
		{"explicit", "Bad"},
		{"mdc", "MaxDeliveryCountExceeded"},
		{"ttl", "TTLExpiredException"},
	} {
		d := ds[i]
		if body(d) != want.body || prop(d, propDeadLetterReason) != want.reason || ann(d, annDeadLetterSource) != "src" || ann(d, annEnqueueSequenceNumber) != int64(i+1) {
			t.Errorf("dlqsink[%d] = %q reason %v source %v enqseq %v", i, body(d), prop(d, propDeadLetterReason), ann(d, annDeadLetterSource), ann(d, annEnqueueSequenceNumber))
		}
		if d.SequenceNumber != int64(i+1) || d.Message.Header.DeliveryCount != 0 {
			t.Errorf("dlqsink[%d] seq %d dc %d", i, d.SequenceNumber, d.Message.Header.DeliveryCount)
		}
	}
	if prop(ds[0], propDeadLetterDescription) != "really bad" || prop(ds[0], "extra") != "1" {
		t.Errorf("explicit props = %v", ds[0].Message.ApplicationProperties)
	}

	// A failing dead-letter forward lands in the source's transfer DLQ.
	mustNil(t, ns.DeleteQueue("dlqsink"))
	mustSend(t, ns, "src", msg("orphan"))
	d = mustNext(t, c)
	mustNil(t, ns.DeadLetter(d.LockToken, "Bad", "", nil))
	tds := peekAll(t, ns, "src/$Transfer/$DeadLetterQueue")
	if len(tds) != 1 || body(tds[0]) != "orphan" || prop(tds[0], propDeadLetterReason) != "TransferToEntityFailed" || ann(tds[0], annDeadLetterSource) != "src" {
		t.Fatalf("TDLQ = %+v", tds)
	}
	if got := counts(t, ns, "src"); got.TransferDeadLetter != 1 || got.DeadLetter != 0 {
		t.Fatalf("src counts = %+v", got)
	}
}

func TestForwardSubscriptionDeadLettered(t *testing.T) {
	ns, _ := newNS(t)
	_, err := ns.CreateTopic("t", DefaultTopicProperties())
	mustNil(t, err)
	mustQueue(t, ns, "sink", nil)
	sp := DefaultSubscriptionProperties()
	sp.ForwardDeadLetteredMessagesTo = "sink"
	_, err = ns.CreateSubscription("t", "s", sp)
	mustNil(t, err)
	c := mustConsumer(t, ns, "t/Subscriptions/s", ConsumerOptions{})
	mustSend(t, ns, "t", msg("x"))
	d := mustNext(t, c)
	mustNil(t, ns.DeadLetter(d.LockToken, "r", "d", nil))
	ds := peekAll(t, ns, "sink")
	if len(ds) != 1 || ann(ds[0], annDeadLetterSource) != "t/Subscriptions/s" {
		t.Fatalf("sink = %+v", ds)
	}
}

func TestForwardValidation(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "q", nil)
	p := DefaultQueueProperties()
	p.ForwardTo = "nowhere"
	_, err := ns.CreateQueue("a", p)
	wantErr(t, err, ErrInvalidProperties)
	p.ForwardTo = "A"
	_, err = ns.CreateQueue("a", p)
	wantErr(t, err, ErrInvalidProperties)
	p.ForwardTo, p.ForwardDeadLetteredMessagesTo = "q", "nowhere"
	_, err = ns.CreateQueue("a", p)
	wantErr(t, err, ErrInvalidProperties)
	if _, err := ns.Queue("a"); !errorsIs(err, ErrNotFound) {
		t.Fatalf("refused queue exists: %v", err)
	}
	p.ForwardDeadLetteredMessagesTo = "q"
	_, err = ns.CreateQueue("a", p)
	mustNil(t, err)
	qi, _ := ns.Queue("q")
	qi.Properties.ForwardTo = "Q"
	_, err = ns.UpdateQueue("q", qi.Properties)
	wantErr(t, err, ErrInvalidProperties)
	qi.Properties.ForwardTo = "missing"
	_, err = ns.UpdateQueue("q", qi.Properties)
	wantErr(t, err, ErrInvalidProperties)

	_, err = ns.CreateTopic("t", DefaultTopicProperties())
	mustNil(t, err)
	sp := DefaultSubscriptionProperties()
	sp.ForwardTo = "missing"
	_, err = ns.CreateSubscription("t", "s", sp)
	wantErr(t, err, ErrInvalidProperties)
	sp.ForwardTo = "t/Subscriptions/s"
	_, err = ns.CreateSubscription("t", "s", sp)
	wantErr(t, err, ErrInvalidProperties)
	sp.ForwardTo = "t"
	_, err = ns.CreateSubscription("t", "s", sp)
	mustNil(t, err)
	sp.ForwardDeadLetteredMessagesTo = "nope"
	_, err = ns.UpdateSubscription("t", "s", sp)
	wantErr(t, err, ErrInvalidProperties)
}

// TestForwardConcurrentLoop forwards both ways between two queues from many
// goroutines while consumers settle, under -race: no deadlock, no loss.
func TestForwardConcurrentLoop(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "a", nil)
	mustQueue(t, ns, "b", func(p *QueueProperties) { p.ForwardTo = "a" })
	setForward(t, ns, "a", "b", "")
	const n = 50
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := []string{"a", "b"}[g%2]
			for range n {
				if err := ns.Send(path, msg("m")); err != nil {
					t.Error(err)
					return
				}
				ns.Tick()
			}
		}()
	}
	wg.Wait()
	ca, cb := counts(t, ns, "a"), counts(t, ns, "b")
	if ca.TransferDeadLetter+cb.TransferDeadLetter != 4*n || ca.Active+cb.Active+ca.Transfer+cb.Transfer != 0 {
		t.Fatalf("a %+v b %+v", ca, cb)
	}
}
