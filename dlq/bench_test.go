package dlq_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
	"github.com/dlqdash/dlqdash/servicebus"
	"github.com/dlqdash/dlqdash/store"
)

// seedDLQ creates queue and fills its dead-letter queue with n messages
// of size bytes, dead-lettered out of order (emulatortest.FillDLQ).
func seedDLQ(tb testing.TB, ns *broker.Namespace, queue string, n, size int) {
	tb.Helper()
	if _, err := ns.CreateQueue(queue, broker.QueueProperties{LockDuration: 5 * time.Minute}); err != nil {
		tb.Fatal(err)
	}
	emulatortest.FillDLQ(tb, ns, queue, n, size, func(i int) map[string]any {
		return map[string]any{"tenant": fmt.Sprintf("t%d", i%50), "attempt": int64(i % 7)}
	})
}

// BenchmarkCatalog100k measures cataloging a 100,000-message DLQ of 1 KiB
// bodies end to end: the real adapter and SDK peeking the emulator over
// loopback AMQP, into SQLite with search indexing and failure groups. Then
// it measures what a steady state costs the broker: peeks over 20 polls
// with nothing changing (target 0).
//
//	go test -run '^$' -bench Catalog100k -benchtime 1x ./dlq/
func BenchmarkCatalog100k(b *testing.B) {
	const n = 100_000
	ns := broker.New(broker.Options{})
	seedDLQ(b, ns, "orders", n, 1024)
	srv := emulatortest.Start(b, emulator.Config{Namespace: ns, TickInterval: emulator.DefaultTickInterval})
	conn := srv.ConnectionString()

	for i := 0; b.Loop(); i++ {
		st, err := store.Open(context.Background(), filepath.Join(b.TempDir(), fmt.Sprintf("c%d.db", i)), store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		client, err := servicebus.Open(context.Background(), conn, servicebus.Options{AdminEndpoint: srv.AdminURL()})
		if err != nil {
			b.Fatal(err)
		}
		in := dlq.New(dlq.Config{Broker: client, Catalog: st, Poll: 50 * time.Millisecond,
			Sweep: time.Hour, MinFullInterval: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- in.Run(ctx) }()
		for {
			p, err := st.PresentCount(context.Background(), "orders", dlq.SubQueueDeadLetter)
			if err != nil {
				b.Fatal(err)
			}
			if p == n {
				break
			}
			if time.Since(start) > 5*time.Minute {
				b.Fatalf("only %d of %d cataloged after 5 minutes", p, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
		elapsed := time.Since(start)
		b.ReportMetric(float64(n)/elapsed.Seconds(), "msg/s")

		// Steady state: 20 polls with nothing changing.
		time.Sleep(200 * time.Millisecond) // lets the last pass's bookkeeping finish
		srv.ResetStats()
		time.Sleep(20 * 50 * time.Millisecond)
		s := srv.Stats()
		b.ReportMetric(float64(s.Totals.Peek), "steady-peeks")
		b.ReportMetric(float64(s.Totals.Admin), "steady-admin-requests")

		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		client.Close(context.Background())
		st.Close()
	}
}
