package broker

import (
	"slices"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

func TestSequenceNumbersAndStamping(t *testing.T) {
	ns, clk := newNS(t)
	mustQueue(t, ns, "q", nil)
	mustSend(t, ns, "q", msg("a"), msg("b"), msg("c"))
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
		if got := ann(d, "x-opt-message-state"); got != int64(0) {
			t.Fatalf("state %v (%T)", got, got)
		}
		if got := ann(d, "x-opt-locked-until"); got != d.LockedUntil || !d.LockedUntil.Equal(clk.Now().Add(time.Minute)) {
			t.Fatalf("locked until %v / %v", got, d.LockedUntil)
		}
		if got := d.Message.DeliveryAnnotations["x-opt-lock-token"]; got != d.LockToken || d.LockToken == (goamqp.UUID{}) {
			t.Fatalf("lock token %v / %v", got, d.LockToken)
		}
	}
	noNext(t, c)
}

func TestSmoke(t *testing.T) {
	ns, _ := newNS(t)
	mustQueue(t, ns, "q", nil)
	mustSend(t, ns, "q", msg("a"))
	c := mustConsumer(t, ns, "q", ConsumerOptions{})
	d := mustNext(t, c)
	mustNil(t, ns.Complete(d.LockToken))
	wantErr(t, ns.Complete(d.LockToken), ErrLockLost)
	if got := counts(t, ns, "q"); got != (Counts{}) {
		t.Fatalf("counts %+v", got)
	}
	_ = slices.Equal[[]int64]
}
