package broker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

func TestTopicScheduleCancelTTLAndDuplicates(t *testing.T) {
	ns, clk := newNS(t)
	tp := DefaultTopicProperties()
	tp.DefaultMessageTimeToLive = time.Minute
	tp.RequiresDuplicateDetection = true
	_, err := ns.CreateTopic("t", tp)
	mustNil(t, err)
	sp := DefaultSubscriptionProperties()
	_, err = ns.CreateSubscription("t", "a", sp)
	mustNil(t, err)
	sp.DefaultMessageTimeToLive = 10 * time.Second
	sp.DeadLetteringOnMessageExpiration = true
	_, err = ns.CreateSubscription("t", "b", sp)
	mustNil(t, err)

	seqsOut, err := ns.Schedule("t", []*goamqp.Message{schedMsg("s1", clk.Now().Add(time.Hour)), schedMsg("s2", clk.Now().Add(time.Hour))})
	mustNil(t, err)
	if !slices.Equal(seqsOut, []int64{1, 2}) {
		t.Fatalf("seqs %v", seqsOut)
	}
	mustNil(t, ns.CancelScheduled("t", []int64{1}))
	mustSend(t, ns, "t", msgID("m", "dup"), msgID("m again", "dup"))
	for _, s := range []string{"a", "b"} {
		si, err := ns.Subscription("t", s)
		mustNil(t, err)
		if si.Counts.Scheduled != 0 || si.Counts.Active != 1 {
			t.Fatalf("%s counts %+v", s, si.Counts)
		}
	}
	if ti, _ := ns.Topic("t"); ti.Counts.Scheduled != 1 {
		t.Fatalf("topic counts %+v", ti.Counts)
	}
	// Subscription b expires after its own 10s; a after the topic's minute.
	clk.Advance(10 * time.Second)
	ns.Tick()
	a, err := ns.Subscription("t", "a")
	mustNil(t, err)
	b, err := ns.Subscription("t", "b")
	mustNil(t, err)
	if a.Counts.Active != 1 || b.Counts.Active != 0 || b.Counts.DeadLetter != 1 {
		t.Fatalf("after 10s: a %+v b %+v", a.Counts, b.Counts)
	}
	clk.Advance(50 * time.Second)
	ns.Tick()
	a, err = ns.Subscription("t", "a")
	mustNil(t, err)
	if a.Counts.Active != 0 || a.Counts.DeadLetter != 0 {
		t.Fatalf("after 60s: a %+v", a.Counts)
	}
	ti, err := ns.Topic("t")
	mustNil(t, err)
	if ti.Counts.Scheduled != 1 || ti.Counts.DeadLetter != 1 || ti.Counts.Total != 2 {
		t.Fatalf("topic counts %+v", ti.Counts)
	}
}

// TestTopicScheduledFanOutWhenDue: a topic keeps its scheduled messages and
// fans them out when they are due, evaluating the rules of the
// subscriptions that exist then, under a new sequence number.
func TestTopicScheduledFanOutWhenDue(t *testing.T) {
	ns, clk := newNS(t)
	_, err := ns.CreateTopic("t", DefaultTopicProperties())
	mustNil(t, err)
	corr := func(v string) Rule {
		return Rule{Name: "r", Kind: FilterCorrelation, Correlation: &CorrelationFilter{Properties: map[string]any{"x": v}}}
	}
	for name, rule := range map[string]Rule{"all": {Name: "$Default", Kind: FilterTrue}, "one": corr("1")} {
		_, err := ns.CreateSubscription("t", name, DefaultSubscriptionProperties(), rule)
		mustNil(t, err)
	}
	sp := DefaultSubscriptionProperties()
	sp.RequiresSession = true
	_, err = ns.CreateSubscription("t", "sess", sp, corr("2"))
	mustNil(t, err)
	due := clk.Now().Add(time.Minute)
	with := func(b, x string) *goamqp.Message {
		m := schedMsg(b, due)
		m.ApplicationProperties = map[string]any{"x": x}
		return m
	}
	m2 := with("m2", "2")
	sid := "S"
	m2.Properties.GroupID = &sid
	got, err := ns.Schedule("t", []*goamqp.Message{with("m1", "1"), m2, with("m3", "3")})
	mustNil(t, err)
	if !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("seqs %v", got)
	}
	mustNil(t, ns.CancelScheduled("t", []int64{3}))
	ti, err := ns.Topic("t")
	mustNil(t, err)
	if ti.Counts.Scheduled != 2 || ti.Counts.Total != 2 || ti.Counts.SizeInBytes <= 0 {
		t.Fatalf("topic counts %+v", ti.Counts)
	}
	for _, sub := range []string{"all", "one"} {
		p, err := ns.Peek("t/Subscriptions/"+sub, 1, 10)
		mustNil(t, err)
		if len(p) != 0 {
			t.Fatalf("%s shows %v before the due time", sub, seqs(p))
		}
		si, err := ns.Subscription("t", sub)
		mustNil(t, err)
		if si.Counts.Total != 0 {
			t.Fatalf("%s counts %+v", sub, si.Counts)
		}
	}
	// Rules and subscriptions as they are at the due time decide.
	mustNil(t, ns.DeleteRule("t", "one", "r"))
	_, err = ns.CreateRule("t", "one", corr("2"))
	mustNil(t, err)
	_, err = ns.CreateSubscription("t", "late", DefaultSubscriptionProperties())
	mustNil(t, err)
	// m1 has no session id: the session subscription that now matches it
	// too gets no copy (it could not hold one).
	one := corr("1")
	one.Name = "also-1"
	_, err = ns.CreateRule("t", "sess", one)
	mustNil(t, err)

	clk.Advance(time.Minute)
	// No tick: a consumer activates what is due itself.
	c := mustConsumer(t, ns, "t/Subscriptions/late", ConsumerOptions{})
	d1, d2 := mustNext(t, c), mustNext(t, c)
	if body(d1) != "m1" || d1.SequenceNumber != 4 || body(d2) != "m2" || d2.SequenceNumber != 5 || ann(d1, annEnqueuedTime) != due {
		t.Fatalf("late got %q/%d %q/%d enqueued %v", body(d1), d1.SequenceNumber, body(d2), d2.SequenceNumber, ann(d1, annEnqueuedTime))
	}
	want := map[string][]int64{"all": {4, 5}, "one": {5}, "sess": {5}}
	for sub, w := range want {
		p, err := ns.Peek("t/Subscriptions/"+sub, 1, 10)
		mustNil(t, err)
		if !slices.Equal(seqs(p), w) {
			t.Errorf("%s holds %v, want %v", sub, seqs(p), w)
		}
	}
	mustNil(t, ns.CancelScheduled("t", []int64{1, 2})) // no longer scheduled: ignored
	if p, _ := ns.Peek("t/Subscriptions/all", 1, 10); len(p) != 2 {
		t.Fatalf("cancel by the scheduled number removed an active message")
	}
	if ti, _ := ns.Topic("t"); ti.Counts.Scheduled != 0 {
		t.Fatalf("topic counts %+v", ti.Counts)
	}
}

// TestTopicScheduledTick: Tick activates a topic's due messages and
// notifies waiting consumers; a deleted topic drops them.
func TestTopicScheduledTick(t *testing.T) {
	ns, clk := newNS(t)
	mustNil(t, ns.CreateTopicDefault("t"))
	_, err := ns.CreateSubscription("t", "s", DefaultSubscriptionProperties())
	mustNil(t, err)
	c := mustConsumer(t, ns, "t/Subscriptions/s", ConsumerOptions{})
	mustSend(t, ns, "t", schedMsg("x", clk.Now().Add(time.Second)))
	noNext(t, c)
	signalled(c)
	clk.Advance(time.Second)
	ns.Tick()
	if !signalled(c) {
		t.Fatal("activation did not notify")
	}
	if d := mustNext(t, c); body(d) != "x" || d.SequenceNumber != 2 {
		t.Fatalf("got %q/%d", body(d), d.SequenceNumber)
	}
	mustSend(t, ns, "t", schedMsg("y", clk.Now().Add(time.Second)))
	mustNil(t, ns.DeleteTopic("t"))
	clk.Advance(time.Second)
	ns.Tick() // must not touch the deleted topic's subscriptions
}

func TestSessionSubscription(t *testing.T) {
	ns, _ := newNS(t)
	mustNil(t, ns.CreateTopicDefault("t"))
	sp := DefaultSubscriptionProperties()
	sp.RequiresSession = true
	_, err := ns.CreateSubscription("t", "s", sp)
	mustNil(t, err)
	wantErr(t, ns.Send("t", msg("no session")), ErrInvalidMessage)
	mustSend(t, ns, "t", sessMsg("x", "S"))
	c := mustConsumer(t, ns, "t/Subscriptions/s", ConsumerOptions{Session: true})
	if c.SessionID() != "S" || body(mustNext(t, c)) != "x" {
		t.Fatal("session subscription delivery")
	}
	mustNil(t, ns.SetSessionState("t/Subscriptions/s", "S", []byte("st")))
	ids, err := ns.ListSessions("t/Subscriptions/s", time.Time{}, 0, 0)
	mustNil(t, err)
	if !slices.Equal(ids, []string{"S"}) {
		t.Fatalf("ids %v", ids)
	}
}

// TestReceiveDeferredExpired: a deferred message outlives its TTL (the
// sweep leaves it alone, peek shows it deferred) until it is fetched by
// sequence number; then it is dead-lettered or dropped and not returned.
func TestReceiveDeferredExpired(t *testing.T) {
	for _, dl := range []bool{false, true} {
		t.Run(fmt.Sprint("dead-letter on expiry ", dl), func(t *testing.T) {
			ns, clk := newNS(t)
			mustQueue(t, ns, "q", func(p *QueueProperties) {
				p.DefaultMessageTimeToLive = time.Minute
				p.DeadLetteringOnMessageExpiration = dl
			})
			mustSend(t, ns, "q", msg("a"), msg("b"), msg("c"))
			c := mustConsumer(t, ns, "q", ConsumerOptions{})
			for range 3 {
				mustNil(t, ns.Defer(mustNext(t, c).LockToken, nil))
			}
			// b is fetched, its lock lapses and it is abandoned after the TTL:
			// it stays deferred all the same.
			got, err := ns.ReceiveDeferred("q", []int64{2}, PeekLock)
			mustNil(t, err)
			clk.Advance(time.Minute)
			ns.Tick()
			if c := counts(t, ns, "q"); c.Active != 3 || c.DeadLetter != 0 {
				t.Fatalf("after TTL and sweep: %+v", c)
			}
			ps, err := ns.Peek("q", 1, 10)
			mustNil(t, err)
			if len(ps) != 3 {
				t.Fatalf("peek %v", seqs(ps))
			}
			for _, p := range ps {
				if ann(p, annMessageState) != int64(stateDeferred) {
					t.Fatalf("peeked %d state %v", p.SequenceNumber, ann(p, annMessageState))
				}
			}
			wantErr(t, ns.Complete(got[0].LockToken), ErrLockLost) // the lock lapsed
			got, err = ns.ReceiveDeferred("q", []int64{2}, PeekLock)
			mustNil(t, err)
			if len(got) != 0 {
				t.Fatalf("expired deferred message returned: %v", seqs(got))
			}
			// A missing number still fails the whole call, changing nothing.
			_, err = ns.ReceiveDeferred("q", []int64{1, 99}, ReceiveAndDelete)
			wantErr(t, err, ErrNotFound)
			got, err = ns.ReceiveDeferred("q", []int64{1, 3}, ReceiveAndDelete)
			mustNil(t, err)
			if len(got) != 0 {
				t.Fatalf("expired deferred messages returned: %v", seqs(got))
			}
			n := counts(t, ns, "q")
			if !dl {
				if n.Total != 0 {
					t.Fatalf("counts %+v, want the expired messages dropped", n)
				}
				return
			}
			if n.Active != 0 || n.DeadLetter != 3 {
				t.Fatalf("counts %+v, want 3 dead-lettered", n)
			}
			dlq, err := ns.Peek("q/$DeadLetterQueue", 1, 10)
			mustNil(t, err)
			for _, d := range dlq {
				if r := d.Message.ApplicationProperties[propDeadLetterReason]; r != "TTLExpiredException" {
					t.Fatalf("dead-letter reason %v", r)
				}
			}
		})
	}
}

// TestReceiveDeferredBeforeExpiry: fetched in time, a deferred message is
// returned; only the expired ones of a request are left out.
func TestReceiveDeferredBeforeExpiry(t *testing.T) {
	ns, clk := newNS(t)
	mustQueue(t, ns, "q", func(p *QueueProperties) { p.DefaultMessageTimeToLive = time.Minute })
	mustSend(t, ns, "q", msg("old"))
	clk.Advance(30 * time.Second)
	mustSend(t, ns, "q", msg("new"))
	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	mustNil(t, ns.Defer(mustNext(t, c).LockToken, nil))
	mustNil(t, ns.Defer(mustNext(t, c).LockToken, nil))
	clk.Advance(45 * time.Second) // old expired, new not
	got, err := ns.ReceiveDeferred("q", []int64{1, 2}, PeekLock)
	mustNil(t, err)
	if len(got) != 1 || body(got[0]) != "new" || got[0].LockToken == (goamqp.UUID{}) {
		t.Fatalf("got %v", seqs(got))
	}
	mustNil(t, ns.Complete(got[0].LockToken))
	if c := counts(t, ns, "q"); c.Total != 0 {
		t.Fatalf("counts %+v", c)
	}
}

// TestConcurrentExactlyOnce runs senders, peek-lock consumers that
// complete, abandon or let locks lapse, and a ticking clock together; every
// message must be completed exactly once.
func TestConcurrentExactlyOnce(t *testing.T) {
	const senders, perSender, consumers = 4, 300, 4
	ns, clk := newNS(t)
	mustQueue(t, ns, "q", func(p *QueueProperties) { p.LockDuration = time.Second; p.MaxDeliveryCount = 1000 })
	var completed sync.Map
	var done atomic.Int64
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range perSender {
				if err := ns.Send("q", msg(fmt.Sprint(s, "-", i))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	for w := range consumers {
		wg.Go(func() {
			c, err := ns.NewConsumer(t.Context(), "q", ConsumerOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			n := 0
			for {
				d, ok := c.Next()
				if !ok {
					select {
					case <-c.Notify():
						continue
					case <-stop:
						return
					}
				}
				n++
				switch (n + w) % 5 {
				case 0:
					_ = ns.Abandon(d.LockToken, nil)
				case 1:
					// let the lock lapse
				default:
					if err := ns.Complete(d.LockToken); err == nil {
						if _, dup := completed.LoadOrStore(body(d), true); dup {
							t.Errorf("%s completed twice", body(d))
						}
						done.Add(1)
					}
				}
			}
		})
	}
	ticker := make(chan struct{})
	go func() {
		defer close(ticker)
		for i := 0; done.Load() < senders*perSender && i < 200_000; i++ {
			clk.Advance(200 * time.Millisecond)
			ns.Tick()
			yieldCPU()
		}
	}()
	<-ticker
	close(stop)
	wg.Wait()
	if got := done.Load(); got != senders*perSender {
		t.Fatalf("completed %d", got)
	}
	if c := counts(t, ns, "q"); c.Total != 0 {
		t.Fatalf("left %+v", c)
	}
}

func yieldCPU() {
	ch := make(chan struct{})
	go close(ch)
	<-ch
}

func TestNextExpiresLocksWithoutTick(t *testing.T) {
	ns, clk := newNS(t)
	mustQueue(t, ns, "q", func(p *QueueProperties) { p.LockDuration = 10 * time.Second })
	mustSend(t, ns, "q", msg("a"))
	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	d := mustNext(t, c)
	clk.Advance(10 * time.Second)
	d2 := mustNext(t, c)
	if d2.SequenceNumber != 1 || d2.Message.Header.DeliveryCount != 1 {
		t.Fatalf("seq %d count %d", d2.SequenceNumber, d2.Message.Header.DeliveryCount)
	}
	wantErr(t, ns.Complete(d.LockToken), ErrLockLost)
	mustNil(t, ns.Complete(d2.LockToken))
}

// TestRun drives Tick from Run inside a synctest bubble, where the ticker
// and time.Now use the bubble's fake clock.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns := New(Options{})
		mustQueue(t, ns, "q", func(p *QueueProperties) { p.LockDuration = time.Second })
		mustSend(t, ns, "q", msg("a"))
		c := mustConsumer(t, ns, "q", ConsumerOptions{})
		d := mustNext(t, c)
		signalled(c)
		ctx, cancel := context.WithCancel(t.Context())
		stopped := make(chan struct{})
		go func() {
			ns.Run(ctx, 100*time.Millisecond)
			close(stopped)
		}()
		<-c.Notify() // the lock expires at a tick after one second
		wantErr(t, ns.Complete(d.LockToken), ErrLockLost)
		cancel()
		<-stopped
	})
}
