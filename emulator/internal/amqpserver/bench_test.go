package amqpserver_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator/broker"
)

// BenchmarkSDKSendReceiveComplete measures the whole peek-lock round trip through the
// real SDK: batched sends, ReceiveMessages(…, 500) and concurrent CompleteMessage.
func BenchmarkSDKSendReceiveComplete(b *testing.B) {
	for _, size := range []int{16, 1024} {
		b.Run(fmt.Sprintf("body=%dB", size), func(b *testing.B) { benchSendReceiveComplete(b, size) })
	}
}

func benchSendReceiveComplete(b *testing.B, size int) {
	env := startEmulator(b, func(ns *broker.Namespace) { createQueue(b, ns, "bench", nil) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := env.sender(b, "bench")
	r := env.receiver(b, "bench", nil)
	body := make([]byte, size)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	// Warm up the links (CBS, attach) outside the timer.
	send(b, ctx, s, &azservicebus.Message{Body: body})
	for _, m := range receiveN(b, r, 1) {
		if err := r.CompleteMessage(ctx, m, nil); err != nil {
			b.Fatal(err)
		}
	}

	total := b.N
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent := 0
		for sent < total {
			batch, err := s.NewMessageBatch(ctx, nil)
			if err != nil {
				errc <- err
				return
			}
			for n := 0; n < 500 && sent < total; n++ {
				if err := batch.AddMessage(&azservicebus.Message{Body: body}, nil); err != nil {
					break
				}
				sent++
			}
			if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
				errc <- fmt.Errorf("send batch: %w", err)
				return
			}
		}
	}()

	work := make(chan *azservicebus.ReceivedMessage, 1000)
	var completed atomic.Int64
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range work {
				if err := r.CompleteMessage(ctx, m, nil); err != nil {
					errc <- fmt.Errorf("complete: %w", err)
					return
				}
				completed.Add(1)
			}
		}()
	}
	received := 0
	for received < total {
		msgs, err := r.ReceiveMessages(ctx, 500, nil)
		if err != nil {
			b.Fatalf("receive after %d: %v", received, err)
		}
		received += len(msgs)
		for _, m := range msgs {
			work <- m
		}
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	select {
	case err := <-errc:
		b.Fatal(err)
	default:
	}
	if int(completed.Load()) != total {
		b.Fatalf("completed %d of %d", completed.Load(), total)
	}
	b.ReportMetric(float64(total)/elapsed.Seconds(), "msgs/s")
}

// BenchmarkSDKPeek250 pages through a 100,000-message queue of 1 KiB
// messages 250 at a time, as the catalog does.
func BenchmarkSDKPeek250(b *testing.B) {
	const n = 100000
	env := startEmulator(b, func(ns *broker.Namespace) {
		createQueue(b, ns, "big", nil)
		for i := range n {
			body := make([]byte, 1024)
			copy(body, fmt.Sprintf("message-%06d", i))
			m := &goamqp.Message{Data: [][]byte{body}}
			if err := ns.Send("big", m); err != nil {
				b.Fatal(err)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := env.receiver(b, "big", nil)
	if _, err := r.PeekMessages(ctx, 1, nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	msgs := 0
	from := int64(1)
	for i := 0; i < b.N; i++ {
		page, err := r.PeekMessages(ctx, 250, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
		if err != nil {
			b.Fatal(err)
		}
		if len(page) == 0 {
			from = 1
			continue
		}
		msgs += len(page)
		from = *page[len(page)-1].SequenceNumber + 1
	}
	b.ReportMetric(float64(msgs)/time.Since(start).Seconds(), "msgs/s")
}
