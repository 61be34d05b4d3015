// Package emulatortest is how tests get a Service Bus: Start runs the
// emulator on loopback for one test, and FillDLQ seeds its namespace fast,
// by driving package broker directly instead of going through AMQP (what a
// benchmark measures is the system under test, not the seeding).
package emulatortest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
)

// EnvLog names the environment variable that, when set, sends the
// emulator's debug log to stderr in tests.
const EnvLog = "DLQDASH_TEST_EMULATOR_LOG"

// Start runs the emulator for the rest of the test (closed by
// tb.Cleanup). Fields cfg leaves zero get test defaults: both listeners on
// 127.0.0.1:0, a 20 ms tick (so lock, TTL and schedule changes show fast)
// and a log that is discarded unless EnvLog is set.
func Start(tb testing.TB, cfg emulator.Config) *emulator.Emulator {
	tb.Helper()
	if cfg.TickInterval == 0 {
		cfg.TickInterval = 20 * time.Millisecond
	}
	if cfg.Logger == nil && os.Getenv(EnvLog) != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	emu, err := emulator.Start(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("start the emulator: %v", err)
	}
	tb.Cleanup(func() {
		if err := emu.Close(); err != nil {
			tb.Errorf("close the emulator: %v", err)
		}
	})
	return emu
}

// FillDLQ sends n messages to queue, which must exist, and dead-letters
// every one of them with reason SqlTimeout, in an interleaved order (evens,
// then odds) so that the DLQ fills out of order as in production; a
// dead-lettered message keeps its sequence number, so the DLQ in sequence
// order is message 0, 1, 2, ….
//
// Message i has MessageId "msg-<i>", a body of size bytes (`{"order":"`
// followed by 'a's) and the application properties props(i) (none when
// props is nil). The seeding holds every message locked until it is
// dead-lettered, so the queue's lock duration must outlast it (about a
// second per 100,000 messages).
func FillDLQ(tb testing.TB, ns *broker.Namespace, queue string, n, size int, props func(i int) map[string]any) {
	tb.Helper()
	c, err := ns.NewConsumer(context.Background(), queue, broker.ConsumerOptions{Mode: broker.PeekLock})
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	body := bytes.Repeat([]byte("a"), size)
	copy(body, `{"order":"`)
	tokens := make([]goamqp.UUID, 0, n)
	for i := range n {
		m := &goamqp.Message{Data: [][]byte{body}, Properties: &goamqp.MessageProperties{MessageID: fmt.Sprintf("msg-%d", i)}}
		if props != nil {
			m.ApplicationProperties = props(i)
		}
		if err := ns.Send(queue, m); err != nil {
			tb.Fatal(err)
		}
		d, ok := c.Next()
		if !ok {
			tb.Fatal("the consumer has no message right after a send")
		}
		tokens = append(tokens, d.LockToken)
	}
	for _, start := range []int{0, 1} {
		for i := start; i < n; i += 2 {
			if err := ns.DeadLetter(tokens[i], "SqlTimeout", fmt.Sprintf("Timeout after %d ms", 30000+i%100), nil); err != nil {
				tb.Fatal(err)
			}
		}
	}
}
