package replay_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

// refusal is a Sender's error that says nothing was sent (replay.Refusal),
// as the Service Bus adapter's *servicebus.RefusedError does.
type refusal struct{ msg string }

func (r refusal) Error() string { return r.msg }
func (refusal) Refused() bool   { return true }

var _ replay.Refusal = refusal{}

// refusingSender refuses the first batch (a Send of more than one copy)
// without sending it. With deliverFirst, the batch's first attempt is
// delivered and then fails as a lost connection does (the engine retries
// it), and the retry is refused: the refusal says nothing of the attempt
// before it.
type refusingSender struct {
	replay.Sender
	deliverFirst bool
	batches      atomic.Int32
	refused      atomic.Bool
}

func (f *refusingSender) Send(ctx context.Context, copies []replay.Copy) error {
	if len(copies) > 1 {
		n := f.batches.Add(1)
		if f.deliverFirst && n == 1 {
			if err := f.Sender.Send(ctx, copies); err != nil {
				return err
			}
			return fmt.Errorf("send: the connection ended before the outcome: %w", dlq.ErrUnreachable)
		}
		if n == 1 || f.deliverFirst && n == 2 {
			f.refused.Store(true)
			return fmt.Errorf("send: %w", refusal{"copy \"x\" is larger than the queue allows in one message"})
		}
	}
	return f.Sender.Send(ctx, copies)
}

// senderBroker hands out its one sender over the adapter's.
type senderBroker struct {
	replay.Broker
	s *refusingSender
}

func (b *senderBroker) OpenSender(ctx context.Context, path string) (replay.Sender, error) {
	s, err := b.Broker.OpenSender(ctx, path)
	if err != nil {
		return nil, err
	}
	b.s.Sender = s
	return b.s, nil
}

// A batch the Sender refused for certain (nothing sent) is sent again one
// by one without flagging the copies as possibly sent twice: each was sent
// once.
func TestRefusedBatchFlagsNothing(t *testing.T) {
	rs := &refusingSender{}
	e := newEnv(t, queues("orders"), envOptions{wrap: func(b replay.Broker) replay.Broker {
		return &senderBroker{Broker: b, s: rs}
	}})
	e.sendAndDeadLetter("orders", "ref", 5, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 5)
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}})
	j := e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 5 {
		t.Fatalf("job = %+v", j)
	}
	if !rs.refused.Load() {
		t.Fatal("the batch was never refused: the test did not test anything")
	}
	if j.Flagged != 0 {
		t.Errorf("%d messages flagged as possibly sent twice after a refusal that sent nothing, want 0", j.Flagged)
	}
	checkExactlyOnce(t, e, "orders", j, 5)
}

// A refusal on the batch's second attempt, after a first that may have
// delivered it (and here did), spares nothing: the copies sent again one
// by one are second copies, and flagged.
func TestRefusalAfterAnAmbiguousAttemptFlags(t *testing.T) {
	rs := &refusingSender{deliverFirst: true}
	e := newEnv(t, queues("orders"), envOptions{wrap: func(b replay.Broker) replay.Broker {
		return &senderBroker{Broker: b, s: rs}
	}})
	e.sendAndDeadLetter("orders", "amb", 5, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 5)
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids}})
	j := e.finished(job.ID, 30*time.Second)
	if j.Status != replay.StatusCompleted || j.Counts.Completed != 5 {
		t.Fatalf("job = %+v", j)
	}
	if !rs.refused.Load() {
		t.Fatal("the retried batch was never refused: the test did not test anything")
	}
	if j.Flagged != 5 {
		t.Errorf("%d messages flagged as possibly sent twice, want the 5 sent again", j.Flagged)
	}
	checkExactlyOnce(t, e, "orders", j, 5)
}

// Through the real adapter and the emulator: a bulk edit whose last copy
// is larger than a message may be. The adapter refuses the whole send
// before anything goes out, the engine sends the copies one by one, and
// the destination holds each of the others once, none flagged; the large
// one fails and stays in the DLQ. (Before, the adapter sent the batch of
// the copies before the large one and then failed: the engine sent those
// again, second copies, flagged.)
func TestOversizedCopyInABatchSendsTheOthersOnce(t *testing.T) {
	e := newEnv(t, queues("orders"), envOptions{})
	e.sendAndDeadLetter("orders", "big", 5, "Boom")
	ids := e.cataloged(dlq.Filter{Entity: "orders"}, 5)
	edits := map[int64]*replay.Edit{}
	for i, id := range ids {
		body := []byte(fmt.Sprintf(`{"fixed":%d}`, i))
		if i == len(ids)-1 {
			body = bytes.Repeat([]byte{'y'}, 300<<10) // over the 256 KiB a message may be
		}
		edits[id] = &replay.Edit{Body: body}
	}
	_, job := e.submit(replay.Request{Action: replay.ActionReplay, Selection: replay.Selection{IDs: ids, Edits: edits}})
	j := e.finished(job.ID, 30*time.Second)
	if j.Counts.Completed != 4 || j.Counts.Failed != 1 {
		t.Fatalf("job = %+v, want 4 completed and 1 failed", j)
	}
	if j.Flagged != 0 {
		t.Errorf("%d messages flagged as possibly sent twice, want 0", j.Flagged)
	}
	copies := map[string]int{}
	for _, m := range e.receiveAll("orders", "", 0) {
		copies[m.ApplicationProperties[replay.PropOriginalMessageID].(string)]++
		if len(m.Body) > 1000 {
			t.Errorf("the oversized copy arrived (%d bytes)", len(m.Body))
		}
	}
	if len(copies) != 4 {
		t.Errorf("%d distinct originals replayed, want 4: %v", len(copies), copies)
	}
	for id, n := range copies {
		if n != 1 {
			t.Errorf("%s arrived %d times, want once", id, n)
		}
	}
	left := e.peekAll("orders", azservicebus.SubQueueDeadLetter)
	if len(left) != 1 {
		t.Fatalf("%d messages left in the DLQ, want the one whose copy is too large", len(left))
	}
	items, _, err := e.st.ListItems(t.Context(), j.ID, replay.ItemFailed, 10, "")
	if err != nil || len(items) != 1 {
		t.Fatalf("failed items: %v %v", items, err)
	}
	if !strings.Contains(items[0].Error, "larger than") {
		t.Errorf("the failed item says %q, want why (larger than the queue allows)", items[0].Error)
	}
}
