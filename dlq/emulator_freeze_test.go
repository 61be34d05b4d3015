package dlq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
	"github.com/dlqdash/dlqdash/servicebus"
)

// TestIngesterStatusWhileTheBrokerIsFrozen is the measurement with
// the real ingester, the real adapter (its default deadlines) and the real
// SDK against the emulator behind a freezable proxy: a frozen broker (as
// SIGSTOP: sockets open, nothing answers) turns the status unhealthy within
// max(3 × poll, 5 s) of the last success, saying the broker is not
// answering, and a published change carries it; after the thaw the status
// is healthy again on its own and the dead letters made meanwhile are
// cataloged.
func TestIngesterStatusWhileTheBrokerIsFrozen(t *testing.T) {
	const poll = 200 * time.Millisecond
	stale := max(3*poll, 5*time.Second)
	emu := emulatortest.Start(t, emulator.Config{TickInterval: emulator.DefaultTickInterval})
	ns := emu.Namespace()
	if _, err := ns.CreateQueue("orders", broker.DefaultQueueProperties()); err != nil {
		t.Fatal(err)
	}
	emulatortest.FillDLQ(t, ns, "orders", 5, 32, nil)
	fz := emulatortest.StartFreezable(t, emu)
	client, err := servicebus.Open(t.Context(), fz.ConnectionString(), servicebus.Options{AdminEndpoint: fz.AdminURL()})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := openStore(t)
	changes := make(chan dlq.Change, 4096)
	in := dlq.New(dlq.Config{Broker: client, Catalog: st, Namespace: "emulator", Poll: poll,
		Publish: func(c dlq.Change) {
			if c.Kind == dlq.ChangeFreshness {
				select {
				case changes <- c:
				default:
				}
			}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	t.Cleanup(func() {
		fz.Thaw()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		client.Close(cctx)
	})
	waitUntil(t, "the five dead letters", func() bool { return len(cataloged(t, st, "orders", dlq.SubQueueDeadLetter)) == 5 })
	waitUntil(t, "a healthy status", func() bool { return in.Status().Healthy })

	fz.Freeze()
	frozenAt := time.Now()
	emulatortest.FillDLQ(t, ns, "orders", 3, 32, nil) // dead-lettered while nothing reaches the broker
	var s dlq.Status
	waitUntil(t, "an unhealthy status", func() bool { s = in.Status(); return !s.Healthy })
	turned := time.Now()
	if d := turned.Sub(*s.LastSuccessAt); d > stale+time.Second {
		t.Errorf("unhealthy %v after the last success, want within %v", d, stale)
	}
	if d := turned.Sub(frozenAt); d > stale+time.Second {
		t.Errorf("unhealthy %v after the freeze, want within %v", d, stale)
	}
	t.Logf("frozen at +0; unhealthy at +%v, %v after the last success: %q", turned.Sub(frozenAt).Round(time.Millisecond),
		turned.Sub(*s.LastSuccessAt).Round(time.Millisecond), s.Error)
	if !strings.HasPrefix(s.Error, "no successful read from the namespace for ") || !strings.Contains(s.Error, "not answer") {
		t.Errorf("error = %q, want how long without a read and that the broker does not answer", s.Error)
	}
	if s.ErrorSince == nil {
		t.Error("error_since is null while unhealthy")
	}
	pushed := false
	for !pushed {
		select {
		case c := <-changes:
			pushed = !c.Status.Healthy && strings.HasPrefix(c.Status.Error, "no successful read")
		case <-time.After(2 * time.Second):
			t.Fatal("no stale status was published")
		}
	}

	time.Sleep(time.Second) // still frozen: still unhealthy
	if s := in.Status(); s.Healthy {
		t.Errorf("healthy while frozen: %+v", s)
	}
	fz.Thaw()
	thawedAt := time.Now()
	waitUntil(t, "a healthy status after the thaw", func() bool { return in.Status().Healthy })
	t.Logf("healthy again %v after the thaw", time.Since(thawedAt).Round(time.Millisecond))
	waitUntil(t, "the dead letters of the freeze", func() bool { return len(cataloged(t, st, "orders", dlq.SubQueueDeadLetter)) == 8 })
	if s := in.Status(); s.Error != "" || s.ErrorSince != nil {
		t.Errorf("status after the thaw = %+v", s)
	}
}
