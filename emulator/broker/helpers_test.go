package broker

import (
	"errors"
	"sync"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

// clock is a manual clock for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newNS(tb testing.TB) (*Namespace, *clock) {
	tb.Helper()
	c := newClock()
	return New(Options{Now: c.Now}), c
}

func mustQueue(tb testing.TB, ns *Namespace, name string, mod func(*QueueProperties)) {
	tb.Helper()
	p := DefaultQueueProperties()
	if mod != nil {
		mod(&p)
	}
	if _, err := ns.CreateQueue(name, p); err != nil {
		tb.Fatalf("CreateQueue(%q): %v", name, err)
	}
}

func msg(body string) *goamqp.Message {
	return &goamqp.Message{Data: [][]byte{[]byte(body)}, Properties: &goamqp.MessageProperties{}}
}

func msgID(body, id string) *goamqp.Message {
	m := msg(body)
	m.Properties.MessageID = id
	return m
}

func sessMsg(body, sid string) *goamqp.Message {
	m := msg(body)
	m.Properties.GroupID = &sid
	return m
}

func mustSend(tb testing.TB, ns *Namespace, path string, msgs ...*goamqp.Message) {
	tb.Helper()
	for _, m := range msgs {
		if err := ns.Send(path, m); err != nil {
			tb.Fatalf("Send(%q): %v", path, err)
		}
	}
}

func mustConsumer(tb testing.TB, ns *Namespace, path string, o ConsumerOptions) *Consumer {
	tb.Helper()
	c, err := ns.NewConsumer(tb.Context(), path, o)
	if err != nil {
		tb.Fatalf("NewConsumer(%q): %v", path, err)
	}
	tb.Cleanup(c.Close)
	return c
}

func mustNext(tb testing.TB, c *Consumer) Delivery {
	tb.Helper()
	d, ok := c.Next()
	if !ok {
		tb.Fatalf("Next: nothing deliverable")
	}
	return d
}

func noNext(tb testing.TB, c *Consumer) {
	tb.Helper()
	if d, ok := c.Next(); ok {
		tb.Fatalf("Next: got seq %d, want nothing", d.SequenceNumber)
	}
}

func body(d Delivery) string { return string(d.Message.Data[0]) }

func wantErr(tb testing.TB, err, target error) {
	tb.Helper()
	if !errors.Is(err, target) {
		tb.Fatalf("err = %v, want %v", err, target)
	}
}

func mustNil(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

func ann(d Delivery, k string) any { return d.Message.Annotations[k] }

func seqs(ds []Delivery) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.SequenceNumber
	}
	return out
}

func signalled(c *Consumer) bool {
	select {
	case <-c.Notify():
		return true
	default:
		return false
	}
}

func counts(tb testing.TB, ns *Namespace, q string) Counts {
	tb.Helper()
	qi, err := ns.Queue(q)
	mustNil(tb, err)
	return qi.Counts
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
