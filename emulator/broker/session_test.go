package broker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

func sessionQueue(t *testing.T) (*Namespace, *clock) {
	t.Helper()
	ns, clk := newNS(t)
	mustQueue(t, ns, "sq", func(p *QueueProperties) { p.RequiresSession = true; p.LockDuration = 30 * time.Second })
	return ns, clk
}

func TestSessionConsumerOptions(t *testing.T) {
	ns, _ := sessionQueue(t)
	mustQueue(t, ns, "q", nil)
	for _, tt := range []struct {
		path string
		o    ConsumerOptions
	}{
		{"sq", ConsumerOptions{}},
		{"q", ConsumerOptions{Session: true, SessionID: "a"}},
		{"sq/$DeadLetterQueue", ConsumerOptions{Session: true, SessionID: "a"}},
	} {
		_, err := ns.NewConsumer(t.Context(), tt.path, tt.o)
		wantErr(t, err, ErrNotAllowed)
	}
	mustConsumer(t, ns, "sq/$DeadLetterQueue", ConsumerOptions{})
}

func TestSessionNamedAccept(t *testing.T) {
	ns, clk := sessionQueue(t)
	mustSend(t, ns, "sq", sessMsg("a1", "A"), sessMsg("b1", "B"), sessMsg("a2", "A"))
	a := mustConsumer(t, ns, "sq", ConsumerOptions{Session: true, SessionID: "A"})
	if a.SessionID() != "A" || !a.SessionLockedUntil().Equal(clk.Now().Add(30*time.Second)) {
		t.Fatalf("session %q until %v", a.SessionID(), a.SessionLockedUntil())
	}
	_, err := ns.NewConsumer(t.Context(), "sq", ConsumerOptions{Session: true, SessionID: "A"})
	wantErr(t, err, ErrSessionLocked)
	d1, d2 := mustNext(t, a), mustNext(t, a)
	if body(d1) != "a1" || body(d2) != "a2" || *d1.Message.Properties.GroupID != "A" {
		t.Fatalf("got %q %q", body(d1), body(d2))
	}
	noNext(t, a)
	// A session with no messages can still be accepted by name.
	e := mustConsumer(t, ns, "sq", ConsumerOptions{Session: true, SessionID: "empty"})
	noNext(t, e)
	e.Close()
	// Close releases the session; message locks survive.
	a.Close()
	<-a.Done()
	if a.Err() != nil {
		t.Fatalf("Err after Close = %v", a.Err())
	}
	a2 := mustConsumer(t, ns, "sq", ConsumerOptions{Session: true, SessionID: "A"})
	_ = a2
	mustNil(t, ns.Complete(d1.LockToken))
	mustNil(t, ns.Abandon(d2.LockToken, nil))
	if d := mustNext(t, a2); body(d) != "a2" || d.Message.Header.DeliveryCount != 1 {
		t.Fatalf("after abandon: %q %d", body(d), d.Message.Header.DeliveryCount)
	}
}

func TestSessionAcceptNext(t *testing.T) {
	// synctest.Wait tells when the accept-next goroutines are parked.
	synctest.Test(t, testSessionAcceptNext)
}

func testSessionAcceptNext(t *testing.T) {
	ns, _ := sessionQueue(t)
	mustSend(t, ns, "sq", sessMsg("b1", "B"), sessMsg("a1", "A"))
	first := mustConsumer(t, ns, "sq", ConsumerOptions{Session: true})
	if first.SessionID() != "B" {
		t.Fatalf("first accepted %q, want B (lowest sequence number)", first.SessionID())
	}
	second := mustConsumer(t, ns, "sq", ConsumerOptions{Session: true})
	if second.SessionID() != "A" {
		t.Fatalf("second accepted %q", second.SessionID())
	}
	// Nothing free: blocks until ctx ends.
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := ns.NewConsumer(ctx, "sq", ConsumerOptions{Session: true})
		errc <- err
	}()
	cancel()
	wantErr(t, <-errc, ErrNoSession)
	// A blocked accept-next wakes on a send to a free session.
	got := make(chan *Consumer, 1)
	go func() {
		c, err := ns.NewConsumer(t.Context(), "sq", ConsumerOptions{Session: true})
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	synctest.Wait()
	mustSend(t, ns, "sq", sessMsg("c1", "C"))
	c := <-got
	defer c.Close()
	if c.SessionID() != "C" || body(mustNext(t, c)) != "c1" {
		t.Fatalf("woken accept got session %q", c.SessionID())
	}
	// Messages of a held session do not wake waiters, but its release does.
	mustSend(t, ns, "sq", sessMsg("b2", "B"))
	go func() {
		c, err := ns.NewConsumer(t.Context(), "sq", ConsumerOptions{Session: true})
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	synctest.Wait()
	first.Close()
	c = <-got
	defer c.Close()
	if c.SessionID() != "B" {
		t.Fatalf("accepted %q after release", c.SessionID())
	}
}

func TestSessionLockExpiry(t *testing.T) {
	ns, clk := sessionQueue(t)
	mustSend(t, ns, "sq", sessMsg("a1", "A"), sessMsg("a2", "A"))
	c := mustConsumer(t, ns, "sq", ConsumerOptions{Session: true, SessionID: "A"})
	d := mustNext(t, c)
	clk.Advance(20 * time.Second)
	until, err := ns.RenewSessionLock("sq", "A")
	mustNil(t, err)
	if !until.Equal(clk.Now().Add(30 * time.Second)) {
		t.Fatalf("renewed until %v", until)
	}
	_, err = ns.RenewLock(d.LockToken) // keep the message lock alive too
	mustNil(t, err)
	clk.Advance(20 * time.Second)
	ns.Tick()
	select {
	case <-c.Done():
		t.Fatal("session lost despite renewal")
	default:
	}
	clk.Advance(10 * time.Second)
	ns.Tick()
	<-c.Done()
	wantErr(t, c.Err(), ErrSessionLockLost)
	noNext(t, c)
	// Every message lock of the session is gone.
	wantErr(t, ns.Complete(d.LockToken), ErrLockLost)
	_, err = ns.RenewSessionLock("sq", "A")
	wantErr(t, err, ErrSessionLockLost)
	c2 := mustConsumer(t, ns, "sq", ConsumerOptions{Session: true})
	if got := mustNext(t, c2); body(got) != "a1" || got.Message.Header.DeliveryCount != 1 {
		t.Fatalf("after session loss: %q count %d", body(got), got.Message.Header.DeliveryCount)
	}
}

func TestSessionLockLazyExpiry(t *testing.T) {
	ns, clk := sessionQueue(t)
	mustSend(t, ns, "sq", sessMsg("a1", "A"))
	c := mustConsumer(t, ns, "sq", ConsumerOptions{Session: true, SessionID: "A"})
	d := mustNext(t, c)
	clk.Advance(31 * time.Second)
	wantErr(t, ns.Complete(d.LockToken), ErrLockLost)
	<-c.Done()
	wantErr(t, c.Err(), ErrSessionLockLost)
	// An expired holder does not block a named accept.
	mustConsumer(t, ns, "sq", ConsumerOptions{Session: true, SessionID: "A"})
}

func TestSessionStateAndList(t *testing.T) {
	ns, clk := sessionQueue(t)
	mustSend(t, ns, "sq", sessMsg("x", "with-msgs"), sessMsg("y", "other"))
	st, err := ns.SessionState("sq", "s1")
	mustNil(t, err)
	if st != nil {
		t.Fatalf("initial state %q", st)
	}
	t0 := clk.Now()
	clk.Advance(time.Second)
	in := []byte("state")
	mustNil(t, ns.SetSessionState("sq", "s1", in))
	in[0] = 'X'
	st, err = ns.SessionState("sq", "s1")
	mustNil(t, err)
	if string(st) != "state" {
		t.Fatalf("state %q", st)
	}
	ids, err := ns.ListSessions("sq", time.Time{}, 0, 100)
	mustNil(t, err)
	if !slices.Equal(ids, []string{"other", "s1", "with-msgs"}) {
		t.Fatalf("default mode %v", ids)
	}
	ids, err = ns.ListSessions("sq", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), 1, 1)
	mustNil(t, err)
	if !slices.Equal(ids, []string{"s1"}) {
		t.Fatalf("sentinel with skip/top %v", ids)
	}
	ids, err = ns.ListSessions("sq", t0, 0, 0)
	mustNil(t, err)
	if !slices.Equal(ids, []string{"s1"}) {
		t.Fatalf("updated after %v", ids)
	}
	ids, err = ns.ListSessions("sq", clk.Now(), 0, 0)
	mustNil(t, err)
	if len(ids) != 0 {
		t.Fatalf("updated after now %v", ids)
	}
	mustNil(t, ns.SetSessionState("sq", "s1", []byte{}))
	st, err = ns.SessionState("sq", "s1")
	mustNil(t, err)
	if st != nil {
		t.Fatalf("cleared state %q", st)
	}
	_, err = ns.SessionState("nope", "s1")
	wantErr(t, err, ErrNotFound)
	mustQueue(t, ns, "plain", nil)
	_, err = ns.ListSessions("plain", time.Time{}, 0, 0)
	wantErr(t, err, ErrNotAllowed)
}

func TestSessionEntityFairnessWithLocks(t *testing.T) {
	// Locked messages of one session do not hide the next message of the
	// same session from its holder only after settlement.
	ns, _ := sessionQueue(t)
	mustSend(t, ns, "sq", sessMsg("1", "A"), sessMsg("2", "A"), sessMsg("3", "A"))
	c := mustConsumer(t, ns, "sq", ConsumerOptions{Session: true, SessionID: "A"})
	ds := []Delivery{mustNext(t, c), mustNext(t, c)}
	mustNil(t, ns.Release(ds[0].LockToken))
	if d := mustNext(t, c); d.SequenceNumber != 1 {
		t.Fatalf("after release got %d", d.SequenceNumber)
	}
	if d := mustNext(t, c); d.SequenceNumber != 3 {
		t.Fatalf("got %d", d.SequenceNumber)
	}
	_ = goamqp.UUID{}
	_ = errors.Is
}

// TestSessionScheduledActivation: an activated session message takes a new
// number and is delivered in that order within its session.
func TestSessionScheduledActivation(t *testing.T) {
	ns, clk := sessionQueue(t)
	later := sessMsg("later", "A")
	later.Annotations = goamqp.Annotations{annScheduledEnqueueTime: clk.Now().Add(time.Minute)}
	mustSend(t, ns, "sq", later, sessMsg("a1", "A"))
	clk.Advance(time.Minute)
	c := mustConsumer(t, ns, "sq", ConsumerOptions{Session: true})
	d1, d2 := mustNext(t, c), mustNext(t, c)
	if body(d1) != "a1" || d1.SequenceNumber != 2 || body(d2) != "later" || d2.SequenceNumber != 3 {
		t.Fatalf("got %q/%d %q/%d", body(d1), d1.SequenceNumber, body(d2), d2.SequenceNumber)
	}
	ids, err := ns.ListSessions("sq", time.Time{}, 0, 0)
	mustNil(t, err)
	if !slices.Equal(ids, []string{"A"}) {
		t.Fatalf("sessions %v", ids)
	}
}
