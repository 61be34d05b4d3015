package demo

import (
	"context"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
)

// TestTrafficTargetsOneNamespace: with one emulator serving both demo
// namespaces, traffic dialed to prod-us with ForNamespace fills prod-us's
// dead-letter queues and leaves prod-eu's empty.
func TestTrafficTargetsOneNamespace(t *testing.T) {
	var nss []emulator.NamespaceConfig
	for _, n := range Namespaces() {
		nss = append(nss, emulator.NamespaceConfig{Name: n})
	}
	emu := emulatortest.Start(t, emulator.Config{Namespaces: nss, TickInterval: 50 * time.Millisecond})
	for _, s := range emu.Servers() {
		if err := ProvisionNamespace(s.Namespace(), s.Name()); err != nil {
			t.Fatal(err)
		}
	}
	us := emu.Server(NamespaceUS)
	tr, err := Dial(us.ConnectionString(), ForNamespace(NamespaceUS, Options{Seed: 7, Scale: 0.03}))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	consumers, stop := context.WithCancel(ctx)
	tr.Start(consumers)
	sum, err := tr.Seed(ctx)
	stop()
	tr.Wait()
	if err != nil {
		t.Fatalf("Seed: %v", err)
	}
	if len(dlqReasons(t, us.Namespace(), QueueOrders)) == 0 || sum.Sent == 0 {
		t.Fatalf("prod-us orders has no dead letters after a burst of %d", sum.Sent)
	}
	if got := dlqReasons(t, emu.Server(NamespaceEU).Namespace(), QueueOrders); len(got) != 0 {
		t.Errorf("prod-eu orders has dead letters %v from prod-us's traffic", got)
	}
	// prod-us's archive is not frozen: its invoices are archived, none
	// parked in the transfer dead-letter queue (prod-eu's are:
	// TestSeedLeavesRealisticDeadLetters).
	usNS := us.Namespace()
	if tdlq, err := usNS.Peek(QueueInvoices+"/$Transfer/$DeadLetterQueue", 1, 100); err != nil || len(tdlq) != 0 || sum.Forwarded != 0 {
		t.Errorf("prod-us's invoices transfer DLQ holds %d (%v), summary forwarded %d: want none", len(tdlq), err, sum.Forwarded)
	}
	if archive, err := usNS.Queue(QueueArchive); err != nil || archive.Counts.Active == 0 {
		t.Errorf("prod-us's archive: %+v, %v; want the invoices", archive.Counts, err)
	}
	// Its fraud check scores US cards only.
	fraud := TopicPayments + "/Subscriptions/" + SubFraudCheck
	page, err := usNS.Peek(fraud+"/$DeadLetterQueue", 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range page {
		if r := d.Message.ApplicationProperties["region"]; r != "US" {
			t.Errorf("prod-us's fraud check dead-lettered a payment of region %v", r)
		}
	}
}

func TestForNamespace(t *testing.T) {
	eu, us := ForNamespace(NamespaceEU, Options{Seed: 42}), ForNamespace(NamespaceUS, Options{Seed: 42})
	if eu.Seed == us.Seed || eu.Seed == 42 {
		t.Errorf("seeds %d and %d: the namespaces would fail alike", eu.Seed, us.Seed)
	}
	if eu.Scale != 0 || us.Scale != usScale || eu.Interval != 0 || us.Interval != usInterval {
		t.Errorf("scales %v, %v; intervals %v, %v", eu.Scale, us.Scale, eu.Interval, us.Interval)
	}
	if eu.Namespace != NamespaceEU || us.Namespace != NamespaceUS {
		t.Errorf("namespaces %q, %q", eu.Namespace, us.Namespace)
	}
	if got := ForNamespace(NamespaceUS, Options{Scale: 2, Interval: time.Second}); got.Scale != 2 || got.Seed != 0 || got.Interval != time.Second {
		t.Errorf("given scale, interval and clock seed changed: %+v", got)
	}
}
