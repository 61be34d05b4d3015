package servicebus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/dlqdash/dlqdash/dlq"
)

// receiverKey names a cached peek receiver.
type receiverKey struct {
	entity string
	q      dlq.SubQueue
}

// peekReceiver is one cached SDK receiver. The SDK opens its links on the
// first peek and keeps them (reconnecting them itself after a connection
// loss), so later peeks cost one $management round trip and no attach.
// A peek-lock receiver that is never asked to receive grants no credit, so it
// never takes a message.
type peekReceiver struct {
	key  receiverKey
	r    *azservicebus.Receiver
	conn uint64 // the generation of the SDK client r belongs to
	// sem is held while the receiver is in use: the ingester never peeks
	// one (entity, subqueue) twice at once, but if a caller does, the
	// peeks take turns rather than race inside the SDK.
	sem    chan struct{}
	closed atomic.Bool
	// attached: a peek succeeded, so the links are open (guarded by sem).
	attached bool
}

func (p *peekReceiver) acquire(ctx context.Context) error {
	select {
	case p.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *peekReceiver) release() { <-p.sem }

// close waits for a peek in progress (until ctx is done; then it closes the
// receiver under it, and that peek fails with ErrClosed) and closes the
// receiver's links. Errors are not reported: a receiver is closed because
// it is no longer wanted, and the links of one that failed may already be
// gone.
func (p *peekReceiver) close(ctx context.Context) error {
	held := p.acquire(ctx) == nil
	p.closeLocked(ctx)
	if held {
		p.release()
	}
	return nil
}

func (p *peekReceiver) closeLocked(ctx context.Context) {
	if p.closed.Swap(true) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = p.r.Close(ctx)
}

// Peek returns up to max messages of entity's subqueue q with sequence
// numbers >= from, in ascending order, without locking them (the SDK's
// PeekMessages, which goes over $management). It reuses one receiver per
// (entity, subqueue), created on the first peek and dropped when the entity
// is not found or the Client is closed.
//
// entity is a queue name or a subscription path (<topic>/Subscriptions/<name>).
// The main subqueue of a session-enabled entity cannot be peeked without a
// session; Service Bus refuses it.
func (c *Client) Peek(ctx context.Context, entity string, q dlq.SubQueue, from int64, max int) ([]dlq.Message, error) {
	op := "peek " + q.Path(entity)
	if !q.Valid() {
		return nil, fmt.Errorf("%s: unknown subqueue %q", op, q)
	}
	if max <= 0 {
		return nil, fmt.Errorf("%s: max must be positive, not %d", op, max)
	}
	max = min(max, math.MaxInt32)
	from = max64(from, 0)

	// A receiver dropped by a concurrent peek (entity not found) or by
	// Close is retried once with a fresh one, which reports the real state.
	for attempt := 0; ; attempt++ {
		pr, err := c.receiver(op, entity, q)
		if err != nil {
			return nil, err
		}
		if err := pr.acquire(ctx); err != nil {
			return nil, c.mapError(op, err)
		}
		if pr.closed.Load() {
			pr.release()
			if attempt == 0 {
				continue
			}
			return nil, fmt.Errorf("%s: %w", op, ErrClosed)
		}
		d := c.timeouts.peek(max)
		if !pr.attached {
			d += c.timeouts.Attach
		}
		var got []*azservicebus.ReceivedMessage
		err, o := c.bounded(ctx, op, "a peek of "+q.Path(entity), d, func(ctx context.Context) (err error) {
			got, err = pr.r.PeekMessages(ctx, max, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
			return err
		})
		if err != nil {
			if !o.abandoned {
				c.connFailed(pr.conn, o.err)
			}
			if errors.Is(err, ErrClosed) && !c.isClosed() {
				// Closed under it: its connection or the receiver was
				// replaced after a failure.
				err = c.closedByReplacement(op, err)
			}
			switch {
			case errors.Is(err, dlq.ErrEntityNotFound):
				c.drop(ctx, pr)
			case o.broken():
				// The next peek attaches a fresh receiver rather than
				// wait on this one's links again.
				c.dropBroken(pr)
			}
			pr.release()
			return nil, err
		}
		pr.attached = true
		pr.release()
		return c.messages(entity, q, from, got), nil
	}
}

// receiver returns the cached receiver for (entity, q), creating it. The SDK
// opens no link until the first peek.
func (c *Client) receiver(op, entity string, q dlq.SubQueue) (*peekReceiver, error) {
	key := receiverKey{entity, q}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("%s: %w", op, ErrClosed)
	}
	sb, conn := c.sdk()
	if pr := c.receivers[key]; pr != nil {
		if pr.conn == conn {
			return pr, nil
		}
		// Its SDK client was replaced after its connection failed.
		delete(c.receivers, key)
		c.closeInBackground(pr)
	}
	var opts azservicebus.ReceiverOptions // peek-lock; main subqueue: no SubQueue
	switch q {
	case dlq.SubQueueDeadLetter:
		opts.SubQueue = azservicebus.SubQueueDeadLetter
	case dlq.SubQueueTransferDeadLetter:
		opts.SubQueue = azservicebus.SubQueueTransfer // the transfer dead-letter queue
	}
	var r *azservicebus.Receiver
	var err error
	if topic, sub, ok := splitSubscription(entity); ok {
		r, err = sb.NewReceiverForSubscription(topic, sub, &opts)
	} else if entity == "" || strings.HasPrefix(entity, "/") || strings.HasSuffix(entity, "/") {
		return nil, fmt.Errorf("%s: %q is not a queue name or a <topic>/Subscriptions/<subscription> path", op, entity)
	} else {
		r, err = sb.NewReceiverForQueue(entity, &opts)
	}
	if err != nil {
		return nil, c.mapError(op, err)
	}
	pr := &peekReceiver{key: key, r: r, conn: conn, sem: make(chan struct{}, 1)}
	c.receivers[key] = pr
	c.log.Debug("peek receiver created", "entity", entity, "subqueue", string(q))
	return pr, nil
}

// drop forgets and closes pr; the caller holds it.
func (c *Client) drop(ctx context.Context, pr *peekReceiver) {
	c.mu.Lock()
	if c.receivers[pr.key] == pr {
		delete(c.receivers, pr.key)
	}
	c.mu.Unlock()
	pr.closeLocked(ctx)
	c.log.Debug("peek receiver dropped", "entity", pr.key.entity, "subqueue", string(pr.key.q))
}

// dropBroken forgets pr, whose peek timed out, and closes it in the
// background (a link that does not answer may not answer its detach
// either); the caller holds it.
func (c *Client) dropBroken(pr *peekReceiver) {
	c.mu.Lock()
	if c.receivers[pr.key] == pr {
		delete(c.receivers, pr.key)
	}
	c.mu.Unlock()
	c.log.Debug("peek receiver dropped after a timeout", "entity", pr.key.entity, "subqueue", string(pr.key.q))
	c.closeInBackground(pr)
}

// closeInBackground closes pr within Timeouts.Attach without waiting.
func (c *Client) closeInBackground(pr *peekReceiver) {
	if pr.closed.Swap(true) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeouts.Attach)
		defer cancel()
		_ = pr.r.Close(ctx)
	}()
}

// messages converts a peeked page, keeping the interface's promise of
// ascending sequence numbers >= from even if a broker did not.
func (c *Client) messages(entity string, q dlq.SubQueue, from int64, got []*azservicebus.ReceivedMessage) []dlq.Message {
	out := make([]dlq.Message, 0, len(got))
	for _, rm := range got {
		if rm == nil || rm.SequenceNumber == nil {
			c.log.Warn("peeked message without a sequence number skipped", "entity", entity, "subqueue", string(q))
			continue
		}
		if *rm.SequenceNumber < from {
			continue
		}
		out = append(out, convertMessage(rm))
	}
	if !slices.IsSortedFunc(out, compareSeq) {
		slices.SortStableFunc(out, compareSeq)
	}
	return out
}

func compareSeq(a, b dlq.Message) int { return cmp.Compare(a.SequenceNumber, b.SequenceNumber) }

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// splitSubscription splits <topic>/Subscriptions/<sub>. A topic name may
// itself contain '/', a subscription name may not.
func splitSubscription(path string) (topic, sub string, ok bool) {
	segs := strings.Split(path, "/")
	n := len(segs)
	if n < 3 || !strings.EqualFold(segs[n-2], "Subscriptions") || segs[n-1] == "" {
		return "", "", false
	}
	topic = strings.Join(segs[:n-2], "/")
	if topic == "" {
		return "", "", false
	}
	return topic, segs[n-1], true
}
