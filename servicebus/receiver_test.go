package servicebus

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/broker"
	"github.com/dlqdash/dlqdash/emulator/emulatortest"
)

// TestReceiverCache checks that peeks reuse one receiver per (entity,
// subqueue), that a missing entity's receiver is dropped, and that Close
// closes them all.
func TestReceiverCache(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Config{})
	ns := srv.Namespace()
	for _, q := range []string{"orders", "email"} {
		if _, err := ns.CreateQueue(q, broker.DefaultQueueProperties()); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Open(t.Context(), srv.ConnectionString(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	cached := func() map[receiverKey]*peekReceiver {
		c.mu.Lock()
		defer c.mu.Unlock()
		out := map[receiverKey]*peekReceiver{}
		for k, v := range c.receivers {
			out[k] = v
		}
		return out
	}
	for range 3 {
		for _, q := range []dlq.SubQueue{dlq.SubQueueDeadLetter, dlq.SubQueueMain} {
			if _, err := c.Peek(ctx, "orders", q, 0, 10); err != nil {
				t.Fatalf("Peek orders %s: %v", q, err)
			}
		}
	}
	first := cached()
	if len(first) != 2 {
		t.Fatalf("%d cached receivers after peeking two subqueues, want 2", len(first))
	}
	if _, err := c.Peek(ctx, "email", dlq.SubQueueDeadLetter, 0, 10); err != nil {
		t.Fatal(err)
	}
	second := cached()
	if len(second) != 3 || second[receiverKey{"orders", dlq.SubQueueDeadLetter}] != first[receiverKey{"orders", dlq.SubQueueDeadLetter}] {
		t.Errorf("the orders receiver was replaced or the email one not added: %v", second)
	}

	// A missing entity: the error, and no receiver kept.
	if _, err := c.Peek(ctx, "nope", dlq.SubQueueDeadLetter, 0, 10); !errors.Is(err, dlq.ErrEntityNotFound) {
		t.Fatalf("Peek nope: %v", err)
	}
	if _, ok := cached()[receiverKey{"nope", dlq.SubQueueDeadLetter}]; ok {
		t.Errorf("the receiver of a missing entity is still cached")
	}
	// An entity deleted under its cached receiver: dropped too.
	if err := ns.DeleteQueue("email"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Peek(ctx, "email", dlq.SubQueueDeadLetter, 0, 10); !errors.Is(err, dlq.ErrEntityNotFound) {
		t.Fatalf("Peek of the deleted email: %v", err)
	}
	if pr, ok := cached()[receiverKey{"email", dlq.SubQueueDeadLetter}]; ok || !second[receiverKey{"email", dlq.SubQueueDeadLetter}].closed.Load() {
		t.Errorf("the deleted entity's receiver is still cached (%v) or not closed", pr)
	}

	// Bad arguments fail before any receiver exists.
	for _, tt := range []struct {
		entity string
		q      dlq.SubQueue
		max    int
	}{{"orders", "bogus", 10}, {"orders", dlq.SubQueueMain, 0}, {"", dlq.SubQueueMain, 1}, {"/x", dlq.SubQueueMain, 1}} {
		if _, err := c.Peek(ctx, tt.entity, tt.q, 0, tt.max); err == nil {
			t.Errorf("Peek(%q, %q, max %d) succeeded", tt.entity, tt.q, tt.max)
		}
	}

	receivers := cached()
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(cached()) != 0 {
		t.Errorf("receivers left after Close")
	}
	for k, pr := range receivers {
		if !pr.closed.Load() {
			t.Errorf("receiver %v not closed", k)
		}
	}
}
