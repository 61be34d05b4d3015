package broker

import (
	"runtime"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

func benchMsg(size int) *goamqp.Message {
	id := "0f8fad5b-d9cb-469f-a165-70867728950e"
	return &goamqp.Message{
		Data:                  [][]byte{make([]byte, size)},
		Properties:            &goamqp.MessageProperties{MessageID: id},
		Annotations:           goamqp.Annotations{},
		ApplicationProperties: map[string]any{"kind": "order", "n": int64(1)},
	}
}

// BenchmarkSendNextComplete measures one peek-lock cycle: Send, Next,
// Complete.
func BenchmarkSendNextComplete(b *testing.B) {
	ns := New(Options{})
	mustQueue(b, ns, "q", nil)
	c := mustConsumer(b, ns, "q", ConsumerOptions{})
	b.ReportAllocs()
	for b.Loop() {
		if err := ns.Send("q", benchMsg(1024)); err != nil {
			b.Fatal(err)
		}
		d, ok := c.Next()
		if !ok {
			b.Fatal("nothing")
		}
		if err := ns.Complete(d.LockToken); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSendNextCompleteParallel runs the cycle from GOMAXPROCS
// goroutines on one queue (one entity mutex).
func BenchmarkSendNextCompleteParallel(b *testing.B) {
	ns := New(Options{})
	mustQueue(b, ns, "q", nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c, err := ns.NewConsumer(b.Context(), "q", ConsumerOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		for pb.Next() {
			if err := ns.Send("q", benchMsg(1024)); err != nil {
				b.Fatal(err)
			}
			if d, ok := c.Next(); ok {
				if err := ns.Complete(d.LockToken); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkCycleWithManyLocked runs the cycle while 100,000 messages stay
// locked ahead of it: Next must not scan them.
func BenchmarkCycleWithManyLocked(b *testing.B) {
	ns := New(Options{})
	mustQueue(b, ns, "q", func(p *QueueProperties) { p.LockDuration = 5 * time.Minute })
	c := mustConsumer(b, ns, "q", ConsumerOptions{})
	for range 100_000 {
		if err := ns.Send("q", benchMsg(16)); err != nil {
			b.Fatal(err)
		}
		if _, ok := c.Next(); !ok {
			b.Fatal("nothing")
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := ns.Send("q", benchMsg(1024)); err != nil {
			b.Fatal(err)
		}
		d, ok := c.Next()
		if !ok {
			b.Fatal("nothing")
		}
		if err := ns.Complete(d.LockToken); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReceiveAndDelete measures Send + Next in receive-and-delete mode.
func BenchmarkReceiveAndDelete(b *testing.B) {
	ns := New(Options{})
	mustQueue(b, ns, "q", nil)
	c := mustConsumer(b, ns, "q", ConsumerOptions{Mode: ReceiveAndDelete})
	b.ReportAllocs()
	for b.Loop() {
		if err := ns.Send("q", benchMsg(1024)); err != nil {
			b.Fatal(err)
		}
		if _, ok := c.Next(); !ok {
			b.Fatal("nothing")
		}
	}
}

// BenchmarkTopicFanOut5 sends to a topic with five true-filter
// subscriptions.
func BenchmarkTopicFanOut5(b *testing.B) {
	ns := New(Options{})
	if _, err := ns.CreateTopic("t", DefaultTopicProperties()); err != nil {
		b.Fatal(err)
	}
	for _, s := range []string{"a", "b", "c", "d", "e"} {
		if _, err := ns.CreateSubscription("t", s, DefaultSubscriptionProperties()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := ns.Send("t", benchMsg(1024)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPeekMiddle100k peeks a 250-message page from the middle of a
// 100,000-message queue.
func BenchmarkPeekMiddle100k(b *testing.B) {
	ns := New(Options{})
	mustQueue(b, ns, "q", nil)
	for range 100_000 {
		if err := ns.Send("q", benchMsg(64)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		ds, err := ns.Peek("q", 50_000, 250)
		if err != nil || len(ds) != 250 || ds[0].SequenceNumber != 50_000 {
			b.Fatalf("peek: %d %v", len(ds), err)
		}
	}
}

// BenchmarkPeekDLQMiddle100k peeks a page from the middle of a 100,000
// message dead-letter queue filled out of sequence order.
func BenchmarkPeekDLQMiddle100k(b *testing.B) {
	ns := New(Options{})
	mustQueue(b, ns, "q", nil)
	c := mustConsumer(b, ns, "q", ConsumerOptions{})
	var tokens []goamqp.UUID
	for range 100_000 {
		if err := ns.Send("q", benchMsg(64)); err != nil {
			b.Fatal(err)
		}
		d, _ := c.Next()
		tokens = append(tokens, d.LockToken)
	}
	// Dead-letter evens ascending, then odds descending.
	for i := 0; i < len(tokens); i += 2 {
		if err := ns.DeadLetter(tokens[i], "r", "d", nil); err != nil {
			b.Fatal(err)
		}
	}
	for i := len(tokens) - 1; i >= 1; i -= 2 {
		if err := ns.DeadLetter(tokens[i], "r", "d", nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		ds, err := ns.Peek("q/$DeadLetterQueue", 50_000, 250)
		if err != nil || len(ds) != 250 || ds[249].SequenceNumber != 50_249 {
			b.Fatalf("peek: %d %v", len(ds), err)
		}
	}
}

// BenchmarkStoredMessageMemory reports the heap bytes per stored message
// with a 1 KiB body: bytes/msg is everything (message as decoded by go-amqp
// plus the broker's record and index entries), overhead-bytes/msg is the
// broker's share (the same messages held in a plain slice are subtracted).
func BenchmarkStoredMessageMemory(b *testing.B) {
	const n = 20_000
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	for b.Loop() {
		base := heap()
		plain := make([]*goamqp.Message, n)
		for i := range plain {
			plain[i] = benchMsg(1024)
		}
		msgOnly := heap() - base
		runtime.KeepAlive(plain)
		plain = nil

		base = heap()
		ns := New(Options{})
		mustQueue(b, ns, "q", nil)
		for range n {
			if err := ns.Send("q", benchMsg(1024)); err != nil {
				b.Fatal(err)
			}
		}
		stored := heap() - base
		runtime.KeepAlive(ns)
		b.ReportMetric(float64(stored)/n, "bytes/msg")
		b.ReportMetric((float64(stored)-float64(msgOnly))/n, "overhead-bytes/msg")
	}
}

// BenchmarkPeekOneMiddle100k isolates the index lookup: one message from
// the middle of 100,000.
func BenchmarkPeekOneMiddle100k(b *testing.B) {
	ns := New(Options{})
	mustQueue(b, ns, "q", nil)
	for range 100_000 {
		if err := ns.Send("q", benchMsg(64)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if ds, err := ns.Peek("q", 50_000, 1); err != nil || len(ds) != 1 {
			b.Fatal(err)
		}
	}
}
