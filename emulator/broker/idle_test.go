package broker

import (
	goamqp "github.com/Azure/go-amqp"

	"testing"
	"time"
)

func TestAutoDeleteOnIdleValidation(t *testing.T) {
	ns, _ := newNS(t)
	for _, d := range []time.Duration{-time.Minute, time.Second, 5*time.Minute - 1} {
		_, err := ns.CreateQueue("q", QueueProperties{AutoDeleteOnIdle: d})
		wantErr(t, err, ErrInvalidProperties)
		_, err = ns.CreateTopic("t", TopicProperties{AutoDeleteOnIdle: d})
		wantErr(t, err, ErrInvalidProperties)
	}
	mustQueue(t, ns, "q", func(p *QueueProperties) { p.AutoDeleteOnIdle = 5 * time.Minute })
	mustNil(t, ns.CreateTopicDefault("t"))
	_, err := ns.CreateSubscription("t", "s", SubscriptionProperties{AutoDeleteOnIdle: time.Minute})
	wantErr(t, err, ErrInvalidProperties)
	p := DefaultQueueProperties()
	p.AutoDeleteOnIdle = time.Minute
	_, err = ns.UpdateQueue("q", p)
	wantErr(t, err, ErrInvalidProperties)
}

func exists(ns *Namespace, path string) bool {
	_, err := ns.Resolve(path)
	return err == nil
}

// TestAutoDeleteIdleQueue: a queue nobody sends to, receives from, peeks,
// updates or settles on for AutoDeleteOnIdle is deleted with its messages
// at the next Tick; each of those resets the clock.
func TestAutoDeleteIdleQueue(t *testing.T) {
	ns, clk := newNS(t)
	idle := func(p *QueueProperties) { p.AutoDeleteOnIdle = 5 * time.Minute }
	mustQueue(t, ns, "q", func(p *QueueProperties) { idle(p); p.LockDuration = 5 * time.Minute })
	mustQueue(t, ns, "forever", nil)
	mustSend(t, ns, "q", msg("a"), msg("b"))
	step := func(d time.Duration, want bool) {
		t.Helper()
		clk.Advance(d)
		ns.Tick()
		if got := exists(ns, "q"); got != want {
			t.Fatalf("at +%v: queue exists = %v, want %v", d, got, want)
		}
	}
	step(4*time.Minute, true)
	_, err := ns.Peek("q/$DeadLetterQueue", 1, 1) // browsing a sub-queue is activity of the queue
	mustNil(t, err)
	step(4*time.Minute, true)
	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	step(time.Hour, true) // a receiver is attached
	d := mustNext(t, c)
	c.Close()
	step(4*time.Minute, true)
	_, err = ns.RenewLock(d.LockToken) // settlement (also through $management) is activity
	mustNil(t, err)
	step(4*time.Minute, true)
	mustNil(t, ns.Complete(d.LockToken))
	step(4*time.Minute, true)
	_, err = ns.UpdateQueue("q", QueueProperties{AutoDeleteOnIdle: 5 * time.Minute})
	mustNil(t, err)
	step(4*time.Minute, true)
	step(time.Minute, false)
	wantErr(t, ns.Send("q", msg("late")), ErrNotFound)
	if !exists(ns, "forever") {
		t.Fatal("a queue without AutoDeleteOnIdle was deleted")
	}
	// A queue of that name starts afresh.
	mustQueue(t, ns, "q", idle)
	if n := counts(t, ns, "q"); n.Total != 0 {
		t.Fatalf("counts %+v", n)
	}
}

// TestAutoDeleteKeptByScheduledAndForwarding: a pending scheduled message
// keeps a queue (its activation counts as a send); a queue that forwards
// is never idle.
func TestAutoDeleteKeptByScheduledAndForwarding(t *testing.T) {
	ns, clk := newNS(t)
	mustQueue(t, ns, "dst", nil)
	mustQueue(t, ns, "sched", func(p *QueueProperties) { p.AutoDeleteOnIdle = 5 * time.Minute })
	mustQueue(t, ns, "fwd", func(p *QueueProperties) { p.AutoDeleteOnIdle = 5 * time.Minute; p.ForwardTo = "dst" })
	_, err := ns.Schedule("sched", []*goamqp.Message{schedMsg("s", clk.Now().Add(time.Hour))})
	mustNil(t, err)
	clk.Advance(time.Hour)
	ns.Tick() // activates the message, which restarts the idle time
	if !exists(ns, "sched") || !exists(ns, "fwd") {
		t.Fatal("deleted while a scheduled message was pending, or while forwarding")
	}
	clk.Advance(5 * time.Minute)
	ns.Tick()
	if exists(ns, "sched") || !exists(ns, "fwd") {
		t.Fatalf("after activation + 5m: sched exists %v, fwd exists %v", exists(ns, "sched"), exists(ns, "fwd"))
	}
}

// TestAutoDeleteTopicAndSubscription: sends keep a topic; only receives,
// browsing, updates and rule changes keep a subscription, and they keep its
// topic too.
func TestAutoDeleteTopicAndSubscription(t *testing.T) {
	ns, clk := newNS(t)
	_, err := ns.CreateTopic("t", TopicProperties{AutoDeleteOnIdle: 10 * time.Minute})
	mustNil(t, err)
	_, err = ns.CreateSubscription("t", "idle", SubscriptionProperties{AutoDeleteOnIdle: 5 * time.Minute})
	mustNil(t, err)
	_, err = ns.CreateSubscription("t", "busy", DefaultSubscriptionProperties())
	mustNil(t, err)
	for range 3 {
		clk.Advance(4 * time.Minute)
		mustSend(t, ns, "t", msg("x")) // keeps the topic, not the subscription
		ns.Tick()
	}
	if !exists(ns, "t") || exists(ns, "t/Subscriptions/idle") || !exists(ns, "t/Subscriptions/busy") {
		t.Fatal("after 12 minutes of sends: want the topic and busy, not idle")
	}
	// No more sends: a receiver on a subscription keeps the topic.
	c := mustConsumer(t, ns, "t/Subscriptions/busy", ConsumerOptions{})
	clk.Advance(time.Hour)
	ns.Tick()
	if !exists(ns, "t") {
		t.Fatal("topic deleted while a subscription had a receiver")
	}
	c.Close()
	clk.Advance(9 * time.Minute)
	ns.Tick()
	_, err = ns.CreateRule("t", "busy", Rule{Name: "r", Kind: FilterTrue}) // activity of busy, so of t
	mustNil(t, err)
	clk.Advance(9 * time.Minute)
	ns.Tick()
	if !exists(ns, "t") {
		t.Fatal("topic deleted 9 minutes after a rule was added to its subscription")
	}
	// A topic holding a scheduled message is not idle.
	mustSend(t, ns, "t", schedMsg("later", clk.Now().Add(time.Hour)))
	clk.Advance(30 * time.Minute)
	ns.Tick()
	if !exists(ns, "t") {
		t.Fatal("topic deleted while holding a scheduled message")
	}
	clk.Advance(40 * time.Minute) // activated at +60m, idle for 10m since
	ns.Tick()
	if exists(ns, "t") || exists(ns, "t/Subscriptions/busy") {
		t.Fatal("idle topic not deleted with its subscriptions")
	}
}
