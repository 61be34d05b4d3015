package demo

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
)

func startEmulator(t *testing.T) (*emulator.Emulator, *azservicebus.Client) {
	t.Helper()
	ns := broker.New(broker.Options{})
	if err := Provision(ns); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	srv := emulatortest.Start(t, emulator.Config{Namespace: ns, TickInterval: 50 * time.Millisecond})
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), &azservicebus.ClientOptions{
		RetryOptions: azservicebus.RetryOptions{MaxRetries: 2, RetryDelay: 20 * time.Millisecond},
	})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	return srv, client
}

// dlqReasons peeks a whole dead-letter queue and counts its messages by reason.
func dlqReasons(t *testing.T, ns *broker.Namespace, path string) map[string]int {
	t.Helper()
	out := map[string]int{}
	from := int64(1)
	for {
		page, err := ns.Peek(path+"/$DeadLetterQueue", from, 250)
		if err != nil {
			t.Fatalf("peek %s: %v", path, err)
		}
		if len(page) == 0 {
			return out
		}
		for _, d := range page {
			reason, _ := d.Message.ApplicationProperties["DeadLetterReason"].(string)
			out[reason]++
		}
		from = page[len(page)-1].SequenceNumber + 1
	}
}

func TestSeedLeavesRealisticDeadLetters(t *testing.T) {
	srv, client := startEmulator(t)
	ns := srv.Namespace()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	tr := New(client, Options{Seed: 42, Scale: 0.1})
	consumers, stop := context.WithCancel(ctx)
	tr.Start(consumers)
	sum, err := tr.Seed(ctx)
	stop()
	tr.Wait()
	if err != nil {
		t.Fatalf("Seed: %v", err)
	}

	t.Logf("burst: sent %d, deferred %d, scheduled %d, expiring %d, dead letters %v", sum.Sent, sum.Deferred, sum.Scheduled, sum.Expiring, sum.DeadLettered)

	// Every reason the consumers reported must be in the broker's DLQ with
	// the same count: the broker, not the demo, decides what dead-letters.
	for path, byReason := range sum.DeadLettered {
		got := dlqReasons(t, ns, path)
		for reason, want := range byReason {
			if got[reason] != want {
				t.Errorf("%s DLQ has %d messages with reason %q, consumers reported %d (all: %v)", path, got[reason], reason, want, got)
			}
		}
	}
	wantReasons := map[string]string{
		QueueOrders:    "DeserializationException",
		QueueEmail:     "SmtpFailedRecipientException",
		QueueInventory: "InvalidProtocolBufferException",
		TopicPayments + "/Subscriptions/" + SubLedger: "XmlSchemaValidationException",
	}
	for path, reason := range wantReasons {
		if sum.DeadLettered[path][reason] == 0 {
			t.Errorf("no %s dead letters in %s; summary %v", reason, path, sum.Reasons())
		}
	}
	if sum.DeadLettered[QueueOrders]["MaxDeliveryCountExceeded"] == 0 {
		t.Errorf("no MaxDeliveryCountExceeded in %s; summary %v", QueueOrders, sum.Reasons())
	}

	// Deferred and scheduled messages stay in the main queues.
	orders, err := ns.Queue(QueueOrders)
	if err != nil {
		t.Fatal(err)
	}
	if orders.Counts.Active != int64(sum.Deferred) {
		t.Errorf("orders active (deferred) = %d, consumers deferred %d", orders.Counts.Active, sum.Deferred)
	}
	email, err := ns.Queue(QueueEmail)
	if err != nil {
		t.Fatal(err)
	}
	if email.Counts.Scheduled != int64(sum.Scheduled) || sum.Scheduled == 0 {
		t.Errorf("email scheduled = %d, demo scheduled %d", email.Counts.Scheduled, sum.Scheduled)
	}

	// Invoices forward to a send-disabled archive, so the broker parks
	// every one of them in the transfer dead-letter queue.
	tdlq, err := ns.Peek(QueueInvoices+"/$Transfer/$DeadLetterQueue", 1, 5000)
	if err != nil {
		t.Fatal(err)
	}
	if len(tdlq) != sum.Forwarded || sum.Forwarded == 0 {
		t.Errorf("%s transfer DLQ holds %d messages, demo sent %d invoices", QueueInvoices, len(tdlq), sum.Forwarded)
	}
	for _, d := range tdlq {
		if r := d.Message.ApplicationProperties["DeadLetterReason"]; r != "TransferToEntityFailed" {
			t.Errorf("transfer DLQ message %d has reason %v", d.SequenceNumber, r)
			break
		}
	}

	// Receipts nobody consumes expire into their DLQ.
	if sum.Expiring == 0 {
		t.Fatal("no receipts were sent")
	}
	receipts := TopicPayments + "/Subscriptions/" + SubReceipts
	deadline := time.Now().Add(3 * receiptsTTL)
	for {
		got := dlqReasons(t, ns, receipts)["TTLExpiredException"]
		if got == sum.Expiring {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d receipts expired into the DLQ", got, sum.Expiring)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
