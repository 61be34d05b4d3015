package servicebus_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
	"github.com/dlqdash/dlqdash/servicebus"
	"github.com/dlqdash/dlqdash/servicebus/servicebustest"
)

// envConnectionString names the variable that opts into running the suite
// against a real namespace.
const envConnectionString = "DLQDASH_TEST_SERVICEBUS_CONNECTION_STRING"

func testLogger() *slog.Logger {
	if os.Getenv("SERVICEBUS_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// emulatorNS is an emulator with both listeners on loopback.
type emulatorNS struct {
	srv      *emulator.Emulator
	connStr  string
	adminURL string
}

func startEmulator(t *testing.T) *emulatorNS {
	t.Helper()
	srv := emulatortest.Start(t, emulator.Config{Logger: testLogger()})
	return &emulatorNS{srv: srv, connStr: srv.ConnectionString(), adminURL: srv.AdminURL()}
}

func TestEmulator(t *testing.T) {
	emu := startEmulator(t)
	ns := emu.srv.Namespace()
	servicebustest.Run(t, servicebustest.Harness{
		ConnectionString: emu.connStr,
		Options:          servicebus.Options{AdminEndpoint: emu.adminURL, Logger: testLogger()},
		InjectServerBusy: func(entity string, ops int) { ns.InjectServerBusy(entity, ops, time.Time{}) },
		ClearFaults:      ns.ClearFaults,
		CountTimeout:     10 * time.Second,
	})
}

func TestRealNamespace(t *testing.T) {
	connStr := os.Getenv(envConnectionString)
	if connStr == "" {
		t.Skip("set " + envConnectionString + " to a namespace connection string (a key with Manage, Send and Listen) to run the suite against Azure Service Bus; it creates and deletes entities named dlqdashtest-*")
	}
	servicebustest.Run(t, servicebustest.Harness{
		ConnectionString: connStr,
		Options:          servicebus.Options{Logger: testLogger()},
	})
}

// TestEmulatorStopped checks that a namespace that goes away under an open
// Client, with cached receivers, is reported as unreachable quickly.
func TestEmulatorStopped(t *testing.T) {
	emu := startEmulator(t)
	if _, err := emu.srv.Namespace().CreateQueue("orders", broker.DefaultQueueProperties()); err != nil {
		t.Fatal(err)
	}
	c, err := servicebus.Open(t.Context(), emu.connStr, servicebus.Options{AdminEndpoint: emu.adminURL, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := c.Peek(ctx, "orders", dlq.SubQueueDeadLetter, 0, 10); err != nil {
		t.Fatalf("Peek: %v", err)
	}
	if _, err := c.Entities(ctx); err != nil {
		t.Fatalf("Entities: %v", err)
	}

	if err := emu.srv.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Peek(ctx, "orders", dlq.SubQueueDeadLetter, 0, 10)
	if !errors.Is(err, dlq.ErrUnreachable) {
		t.Errorf("Peek after the emulator stopped: %v", err)
	}
	_, err = c.Entities(ctx)
	if !errors.Is(err, dlq.ErrUnreachable) {
		t.Errorf("Entities after the emulator stopped: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s to report the stopped emulator", d)
	}
	t.Logf("after %s: %v", time.Since(start), err)
}
