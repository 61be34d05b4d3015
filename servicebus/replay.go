package servicebus

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

var _ replay.Broker = (*Client)(nil)

const (
	// maxReceive is the most messages one Receive asks for: the SDK's
	// defaultLinkRxBuffer (v1.11.0), above which ReceiveMessages refuses
	// ("maxMessages cannot exceed 5000").
	maxReceive = 5000

	// timeAfterFirstMessage is how long Receive keeps collecting once the
	// first message arrived (the SDK's default is 20 ms). The broker
	// streams a batch after the credit it was granted, but on a latent
	// link (another region, a busy namespace) 20 ms cuts most batches
	// after the first few messages; 100 ms lets a batch fill at the cost of
	// at most 100 ms per Receive that gets fewer messages than it asked for.
	timeAfterFirstMessage = 100 * time.Millisecond

	// deferredChunk is how many sequence numbers one receive-by-sequence-
	// number request carries.
	deferredChunk = 100

	// replayCountProperty is the application property that counts a
	// lineage's replays (docs/api.md).
	replayCountProperty = "dlqdash.replay_count"

	annPartitionKey    = "x-opt-partition-key"
	annViaPartitionKey = "x-opt-via-partition-key"
	annScheduledTime   = "x-opt-scheduled-enqueue-time"
)

// Entity describes a queue, topic or subscription with the admin API's Get
// requests. A path of the form <topic>/Subscriptions/<name> is a
// subscription (one request); any other is asked as a queue first, then as
// a topic (two requests for a topic): the admin API serves both at
// /<name>, and the SDK's GetQueue reads a topic's description as a queue
// with every property unset, which is how a topic is told from a queue.
// A missing entity is dlq.ErrEntityNotFound (the Get methods report it as
// a nil response, not an error).
func (c *Client) Entity(ctx context.Context, path string) (replay.EntityInfo, error) {
	op := "describe " + path
	if c.isClosed() {
		return replay.EntityInfo{}, fmt.Errorf("%s: %w", op, ErrClosed)
	}
	topic, sub, isSub, err := parseEntityPath(path)
	if err != nil {
		return replay.EntityInfo{}, fmt.Errorf("%s: %w", op, err)
	}
	var bad []string
	defer func() {
		if len(bad) > 0 {
			c.log.Warn("entity settings with durations that do not parse were read as 0", "properties", bad)
		}
	}()

	if isSub {
		resp, err := adminGet(ctx, c, op, func(ctx context.Context) (*admin.GetSubscriptionResponse, error) {
			return c.admin.GetSubscription(ctx, topic, sub, nil)
		})
		if err != nil {
			return replay.EntityInfo{}, err
		}
		if resp == nil {
			return replay.EntityInfo{}, notFound(op, path)
		}
		p := resp.SubscriptionProperties
		return replay.EntityInfo{
			Path:              path,
			Kind:              dlq.KindSubscription,
			Topic:             topic,
			LockDuration:      duration(&bad, path, "LockDuration", p.LockDuration),
			DefaultTimeToLive: duration(&bad, path, "DefaultMessageTimeToLive", p.DefaultMessageTimeToLive),
			RequiresSession:   deref(p.RequiresSession),
			Status:            status(p.Status),
		}, nil
	}

	q, err := adminGet(ctx, c, op, func(ctx context.Context) (*admin.GetQueueResponse, error) {
		return c.admin.GetQueue(ctx, path, nil)
	})
	if err != nil {
		return replay.EntityInfo{}, err
	}
	if q != nil && isQueue(q.QueueProperties) {
		p := q.QueueProperties
		return replay.EntityInfo{
			Path:                     path,
			Kind:                     dlq.KindQueue,
			LockDuration:             duration(&bad, path, "LockDuration", p.LockDuration),
			DuplicateDetection:       deref(p.RequiresDuplicateDetection),
			DuplicateDetectionWindow: duration(&bad, path, "DuplicateDetectionHistoryTimeWindow", p.DuplicateDetectionHistoryTimeWindow),
			DefaultTimeToLive:        duration(&bad, path, "DefaultMessageTimeToLive", p.DefaultMessageTimeToLive),
			RequiresSession:          deref(p.RequiresSession),
			Status:                   status(p.Status),
		}, nil
	}
	t, err := adminGet(ctx, c, op, func(ctx context.Context) (*admin.GetTopicResponse, error) {
		return c.admin.GetTopic(ctx, path, nil)
	})
	if err != nil {
		return replay.EntityInfo{}, err
	}
	if t == nil || !isTopic(t.TopicProperties) {
		return replay.EntityInfo{}, notFound(op, path)
	}
	p := t.TopicProperties
	return replay.EntityInfo{
		Path:                     path,
		Kind:                     dlq.KindTopic,
		DuplicateDetection:       deref(p.RequiresDuplicateDetection),
		DuplicateDetectionWindow: duration(&bad, path, "DuplicateDetectionHistoryTimeWindow", p.DuplicateDetectionHistoryTimeWindow),
		DefaultTimeToLive:        duration(&bad, path, "DefaultMessageTimeToLive", p.DefaultMessageTimeToLive),
		Status:                   status(p.Status),
	}, nil
}

// adminGet runs one Get request of the admin API within Timeouts.Admin.
func adminGet[T any](ctx context.Context, c *Client, op string, get func(context.Context) (*T, error)) (*T, error) {
	var resp *T
	if err := c.boundedAdmin(ctx, op, func(ctx context.Context) (err error) {
		resp, err = get(ctx)
		return err
	}); err != nil {
		return nil, err // resp may still be written by an abandoned call
	}
	return resp, nil
}

// isQueue tells a queue's description from a topic's read as a queue's
// (whose properties are all unset): Service Bus always describes a queue
// with its lock duration and maximum delivery count.
func isQueue(p admin.QueueProperties) bool {
	return p.LockDuration != nil || p.MaxDeliveryCount != nil
}

// isTopic is isQueue for a topic: its description always has a status, a
// size limit and a default time-to-live.
func isTopic(p admin.TopicProperties) bool {
	return p.Status != nil || p.MaxSizeInMegabytes != nil || p.DefaultMessageTimeToLive != nil
}

// notFound is the adapter's error for an entity the admin API does not
// know.
func notFound(op, path string) error {
	const hint = "the queue, topic or subscription does not exist (any more)"
	return &Error{Op: op, Kind: dlq.ErrEntityNotFound, Hint: hint, Err: fmt.Errorf("no entity %q", path),
		msg: fmt.Sprintf("%s: %v: %s", op, dlq.ErrEntityNotFound, hint)}
}

// parseEntityPath splits a queue or topic name (which may contain '/') from
// a subscription path <topic>/Subscriptions/<name>. It refuses empty
// segments, sub-queue and other '$' segments, and a "Subscriptions"
// segment anywhere but second to last (the admin API would read such a
// path as a listing or a rule).
func parseEntityPath(path string) (topic, sub string, isSub bool, err error) {
	bad := fmt.Errorf("%q is not a queue or topic name or a <topic>/Subscriptions/<subscription> path", path)
	if path == "" {
		return "", "", false, bad
	}
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if s == "" || strings.HasPrefix(s, "$") {
			return "", "", false, bad
		}
		if i > 0 && strings.EqualFold(s, "Subscriptions") {
			if i != len(segs)-2 {
				return "", "", false, bad
			}
			return strings.Join(segs[:i], "/"), segs[i+1], true, nil
		}
	}
	return "", "", false, nil
}

// OpenReceiver opens a peek-lock receiver on entity's subqueue q: a queue
// name or a subscription path, with the SDK's SubQueueDeadLetter for the
// dead-letter queue and SubQueueTransfer for the transfer dead-letter
// queue. The SDK attaches its links on the first call that needs them, so a
// missing entity is reported by the first Receive (dlq.ErrEntityNotFound).
//
// The receiver is its caller's: Client.Close does not close it (its calls
// fail with ErrClosed afterwards); its Close does.
func (c *Client) OpenReceiver(ctx context.Context, entity string, q dlq.SubQueue) (replay.Receiver, error) {
	_ = ctx // the SDK does no I/O here
	op := "open receiver on " + q.Path(entity)
	if !q.Valid() {
		return nil, fmt.Errorf("%s: unknown subqueue %q", op, q)
	}
	if c.isClosed() {
		return nil, fmt.Errorf("%s: %w", op, ErrClosed)
	}
	topic, sub, isSub, err := parseEntityPath(entity)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var opts azservicebus.ReceiverOptions // peek-lock; main subqueue: no SubQueue
	switch q {
	case dlq.SubQueueDeadLetter:
		opts.SubQueue = azservicebus.SubQueueDeadLetter
	case dlq.SubQueueTransferDeadLetter:
		opts.SubQueue = azservicebus.SubQueueTransfer
	}
	open := func(sb *azservicebus.Client) (*azservicebus.Receiver, error) {
		if isSub {
			return sb.NewReceiverForSubscription(topic, sub, &opts)
		}
		return sb.NewReceiverForQueue(entity, &opts)
	}
	l, err := newLink(c, open)
	if err != nil {
		return nil, c.mapError(op, err)
	}
	return &receiver{c: c, name: q.Path(entity), l: l}, nil
}

// receiver is a replay.Receiver over one SDK receiver (replaced when a
// call on it times out, see link). Like the SDK's, it receives one batch
// at a time: concurrent Receive calls fail.
type receiver struct {
	c    *Client
	name string // the subqueue's Service Bus path, for messages
	// l holds the SDK receiver; its open makes another on the same
	// subqueue (Release settles through one that never receives).
	l *link[*azservicebus.Receiver]
	// linked: Receive was called once, so the link is attached.
	linked atomic.Bool
	// byToken: a call saw the link or the connection fail, so messages
	// received before may be tied to a dead link. Complete then settles
	// by lock token over $management (as the SDK does for deferred
	// messages): the SDK settles a message on the link it came from,
	// falls back to $management only for a link error, not a connection
	// error, and retries a settlement with its default back-off (4 s, 8
	// s, 16 s), whatever RetryOptions say; so a message received before
	// a dropped connection could not be completed before its lock ran out.
	byToken atomic.Bool
}

// suspect records that the receiver's link or connection failed, when
// err (a mapped error) says so.
func (r *receiver) suspect(err error) {
	if errors.Is(err, dlq.ErrUnreachable) && !r.byToken.Swap(true) {
		r.c.log.Debug("settling by lock token from now on", "entity", r.name, "error", err)
	}
}

// firstReceiveWait is the least a receiver's first Receive waits: it
// attaches the link too.
const firstReceiveWait = 5 * time.Second

// Receive asks for up to max messages (at most 5000, the SDK's limit) and
// waits until the first arrives, wait passes (then it returns no messages
// and no error) or ctx is done (then it returns ctx's error). Once one
// message is there it collects more for up to 100 ms (see
// timeAfterFirstMessage). wait <= 0 waits for ctx alone.
//
// The first call also attaches the link (and may connect, with the SDK's
// retries), so it waits at least firstReceiveWait: an empty answer means an
// empty queue, not a slow attach.
//
// An empty answer is checked: the SDK also returns no messages (and no
// error) when the link or the connection failed during the call, and when
// it spent the wait retrying a broker that refused (server busy) or did
// not answer. So a call that ends early with nothing is made again within
// the wait, and when the wait passed with nothing a one-message peek
// (within Timeouts.Peek) confirms that the broker answers; its error, if
// any, is Receive's. The whole call is bounded by wait +
// Timeouts.Receive (+ Timeouts.Attach for a new link).
func (r *receiver) Receive(ctx context.Context, max int, wait time.Duration) ([]*replay.Received, error) {
	op := "receive from " + r.name
	if max <= 0 {
		return nil, fmt.Errorf("%s: max must be positive, not %d", op, max)
	}
	max = min(max, maxReceive)
	if !r.linked.Swap(true) && wait > 0 {
		// The first call also attaches the link (and may connect): an
		// empty answer must mean an empty queue, not a slow attach.
		if wait < firstReceiveWait {
			wait = firstReceiveWait
		}
	}
	var until time.Time
	if wait > 0 {
		until = time.Now().Add(wait)
	}
	opts := &azservicebus.ReceiveMessagesOptions{TimeAfterFirstMessage: timeAfterFirstMessage}
	for early := 0; ; early++ {
		h := r.l.get()
		var got []*azservicebus.ReceivedMessage
		waited := false // the wait passed with no message
		recv := func(cctx context.Context) error {
			wctx := cctx
			if !until.IsZero() {
				var cancel context.CancelFunc
				wctx, cancel = context.WithDeadline(cctx, until)
				defer cancel()
			}
			msgs, err := h.sdk.ReceiveMessages(wctx, max, opts)
			if len(msgs) == 0 && wctx.Err() != nil && cctx.Err() == nil && (err == nil || isContextError(err)) {
				waited = true
				return nil
			}
			got = msgs
			return err
		}
		var err error
		var o outcome
		if until.IsZero() {
			o = outcome{err: recv(ctx)}
			if o.err != nil {
				err = r.c.mapError(op, o.err)
			}
		} else {
			d := time.Until(until) + r.c.timeouts.Receive + h.attach
			err, o = r.c.bounded(ctx, op, "a receive from "+r.name, d, recv)
		}
		if err != nil {
			r.l.after(h, o)
			err = r.callError(ctx, op, h, err)
			r.suspect(err)
			return nil, err
		}
		if len(got) > 0 {
			r.l.ok(h)
			return r.convert(got), nil
		}
		if waited {
			if err := r.confirm(ctx, op); err != nil {
				return nil, err
			}
			return nil, nil
		}
		// Nothing, early: the SDK swallowed a link or connection error,
		// which the next call recovers from (or reports).
		r.suspect(dlq.ErrUnreachable)
		if early > 0 && !r.pause(ctx, until) {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%s: %w", op, ctx.Err())
			}
			if err := r.confirm(ctx, op); err != nil {
				return nil, err
			}
			return nil, nil
		}
	}
}

// earlyPause is the pause between receives that ended early with nothing,
// after the first retry.
const earlyPause = 100 * time.Millisecond

// pause waits earlyPause, or until ctx ends or until passes (then false).
func (r *receiver) pause(ctx context.Context, until time.Time) bool {
	d := earlyPause
	if !until.IsZero() {
		if left := time.Until(until); left < d {
			d = left
		}
	}
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return until.IsZero() || time.Now().Before(until)
	case <-ctx.Done():
		return false
	}
}

// confirm checks, after a receive that got nothing, that the broker
// answers for the subqueue: a one-message peek over $management. Its error
// is the receive's (the broker is busy, unreachable, or the entity gone);
// nil means that nothing was there to take.
func (r *receiver) confirm(ctx context.Context, op string) error {
	h := r.l.get()
	from := int64(0)
	err, o := r.c.bounded(ctx, op, "a peek confirming that "+r.name+" had nothing to receive", r.c.timeouts.peek(1)+h.attach,
		func(ctx context.Context) error {
			_, err := h.sdk.PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
			return err
		})
	r.l.after(h, o)
	if err != nil {
		return r.callError(ctx, op, h, err)
	}
	return nil
}

// callError is the error of a call on generation gen of the SDK receiver:
// the caller's cancellation as it is, a link the adapter closed because
// another call on it timed out as retryable, anything else as mapped.
func (r *receiver) callError(ctx context.Context, op string, h handle[*azservicebus.Receiver], err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	if errors.Is(err, ErrClosed) && r.l.replaced(h) {
		return r.c.closedByReplacement(op, err)
	}
	return err
}

func isContextError(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// ReceiveDeferred receives deferred messages by sequence number over
// $management (receive-by-sequence-number), deduplicated, 100 numbers per
// request. Service Bus fails a whole request when one of its numbers is
// not a deferred message (or is locked by someone else) with status 404;
// the adapter then halves the request until it finds the numbers at
// fault, and leaves them out: k missing numbers cost about k·log2(100)
// extra requests, at worst (none found) two per number. Because a deleted
// entity answers 404 too,
// the first such failure of a call is checked with a one-message peek,
// which reports a missing entity as dlq.ErrEntityNotFound.
func (r *receiver) ReceiveDeferred(ctx context.Context, seqs []int64) ([]*replay.Received, error) {
	op := "receive deferred messages of " + r.name
	seen := make(map[int64]bool, len(seqs))
	uniq := make([]int64, 0, len(seqs))
	for _, s := range seqs {
		if !seen[s] {
			seen[s] = true
			uniq = append(uniq, s)
		}
	}
	d := deferredFetch{r: r, op: op}
	var got []*azservicebus.ReceivedMessage
	for chunk := range slices.Chunk(uniq, deferredChunk) {
		msgs, err := d.fetch(ctx, chunk)
		if err != nil {
			return nil, err
		}
		got = append(got, msgs...)
	}
	return r.convert(got), nil
}

type deferredFetch struct {
	r       *receiver
	op      string
	checked bool // the entity was confirmed after a 404
}

func (d *deferredFetch) fetch(ctx context.Context, seqs []int64) ([]*azservicebus.ReceivedMessage, error) {
	r := d.r
	h := r.l.get()
	var got []*azservicebus.ReceivedMessage
	var sdkErr error // the SDK's own error, to tell a 404
	err, o := r.c.bounded(ctx, d.op, "a receive of deferred messages from "+r.name, r.c.timeouts.peek(len(seqs))+h.attach,
		func(ctx context.Context) error {
			var err error
			got, err = h.sdk.ReceiveDeferredMessages(ctx, seqs, nil)
			sdkErr = err
			return err
		})
	r.l.after(h, o)
	if err == nil {
		return got, nil
	}
	if o.abandoned || !isNotFound(sdkErr) {
		return nil, r.callError(ctx, d.op, h, err)
	}
	if !d.checked {
		from := seqs[0]
		h := r.l.get()
		err, o := r.c.bounded(ctx, d.op, "a peek of "+r.name, r.c.timeouts.peek(1)+h.attach, func(ctx context.Context) error {
			_, err := h.sdk.PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
			return err
		})
		r.l.after(h, o)
		if err != nil {
			return nil, r.callError(ctx, d.op, h, err)
		}
		d.checked = true
	}
	if len(seqs) == 1 {
		return nil, nil // not deferred, gone, or locked elsewhere
	}
	half := len(seqs) / 2
	a, err := d.fetch(ctx, seqs[:half])
	if err != nil {
		return nil, err
	}
	b, err := d.fetch(ctx, seqs[half:])
	if err != nil {
		return nil, err
	}
	return append(a, b...), nil
}

// isNotFound: the SDK's CodeNotFound, or a $management 404 it left as it
// was.
func isNotFound(err error) bool {
	var sbErr *azservicebus.Error
	if errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeNotFound {
		return true
	}
	var rpcErr rpcCoder
	return errors.As(err, &rpcErr) && rpcErr.RPCCode() == 404
}

// Complete completes m, which this receiver (or another on the same
// entity) received. dlq.ErrLockLost when its lock expired first.
func (r *receiver) Complete(ctx context.Context, m *replay.Received) error {
	if m == nil {
		return fmt.Errorf("complete on %s: no message", r.name)
	}
	// Worded only when needed: a complete per message is the hot path of
	// a replay.
	op := func() string { return fmt.Sprintf("complete message %d of %s", m.SequenceNumber, r.name) }
	rm, ok := m.Raw.(*azservicebus.ReceivedMessage)
	if !ok || rm == nil {
		return fmt.Errorf("%s: the message was not received by this adapter (Raw is %T)", op(), m.Raw)
	}
	settle := rm
	if r.byToken.Load() {
		settle = &azservicebus.ReceivedMessage{LockToken: rm.LockToken}
	}
	h := r.l.get()
	d := r.c.timeouts.Settle + h.attach
	o := within(ctx, d, func(ctx context.Context) error { return h.sdk.CompleteMessage(ctx, settle, nil) })
	r.l.after(h, o)
	if o.err != nil {
		err := r.c.boundedError(op(), fmt.Sprintf("a complete of message %d of %s", m.SequenceNumber, r.name), d, o)
		err = r.callError(ctx, op(), h, err)
		r.suspect(err)
		return err
	}
	return nil
}

// Release closes the receiver, then gives held back to the queue at once,
// unlocked (Service Bus adds one to their delivery counts).
//
// The order matters. After a ReceiveMessages call the SDK keeps the link's
// unused credit open and releases whatever arrives meanwhile; a message
// abandoned while that link is open comes straight back to it, and is
// locked again when the link closes with it in flight. So the link goes
// first, and the abandons go over the $management link of a second
// receiver that never asks for a message (the SDK settles a message known
// only by its lock token there).
func (r *receiver) Release(ctx context.Context, held []*replay.Received) error {
	_ = r.l.close(ctx)
	if len(held) == 0 {
		return nil
	}
	op := "give messages back to " + r.name
	sb, _ := r.c.sdk()
	settler, err := r.l.open(sb)
	if err != nil {
		return r.c.mapError(op, err)
	}
	defer func() {
		// Within Timeouts.Attach: a broker that does not answer the
		// abandons may not answer the detach either.
		_ = within(context.WithoutCancel(ctx), r.c.timeouts.Attach, settler.Close)
	}()
	// The first abandon attaches the settler's $management link.
	d := r.c.timeouts.Settle + r.c.timeouts.Attach
	errs := make([]error, len(held))
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i, m := range held {
		rm, ok := m.Raw.(*azservicebus.ReceivedMessage)
		if !ok || rm == nil {
			errs[i] = fmt.Errorf("%s: message %d was not received by this adapter", op, m.SequenceNumber)
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			op := fmt.Sprintf("%s (message %d)", op, m.SequenceNumber)
			what := fmt.Sprintf("an abandon of message %d of %s", m.SequenceNumber, r.name)
			errs[i], _ = r.c.bounded(ctx, op, what, d, func(ctx context.Context) error {
				return settler.AbandonMessage(ctx, &azservicebus.ReceivedMessage{LockToken: rm.LockToken}, nil)
			})
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close closes the receiver's links. Messages it still holds locks on stay
// locked until their locks expire, as on Azure (Release gives them back).
func (r *receiver) Close(ctx context.Context) error {
	if err := r.l.close(ctx); err != nil {
		return r.c.mapError("close receiver on "+r.name, err)
	}
	return nil
}

// convert turns received messages into the engine's. A message without a
// sequence number (Service Bus always sends one) cannot be named, so it is
// skipped and logged; its lock runs out.
func (r *receiver) convert(got []*azservicebus.ReceivedMessage) []*replay.Received {
	if len(got) == 0 {
		return nil
	}
	out := make([]*replay.Received, 0, len(got))
	for _, rm := range got {
		if rm == nil || rm.SequenceNumber == nil {
			r.c.log.Warn("received message without a sequence number skipped", "entity", r.name)
			continue
		}
		out = append(out, receivedOf(rm))
	}
	return out
}

func receivedOf(rm *azservicebus.ReceivedMessage) *replay.Received {
	m := &replay.Received{
		SequenceNumber: *rm.SequenceNumber,
		MessageID:      rm.MessageID,
		ReplayCount:    replayCount(rm.ApplicationProperties[replayCountProperty]),
		Raw:            rm,
	}
	if m.MessageID == "" && rm.RawAMQPMessage != nil && rm.RawAMQPMessage.Properties != nil && rm.RawAMQPMessage.Properties.MessageID != nil {
		m.MessageID = dlq.IdentifierText(rm.RawAMQPMessage.Properties.MessageID)
	}
	if rm.LockedUntil != nil {
		m.LockedUntil = *rm.LockedUntil
	}
	if rm.DeadLetterReason != nil {
		m.DeadLetterReason = *rm.DeadLetterReason
	}
	if rm.TimeToLive != nil && *rm.TimeToLive > 0 {
		m.TimeToLive = *rm.TimeToLive
	}
	return m
}

// replayCount reads dlqdash.replay_count: any integer type; 0 when absent,
// not an integer, or negative.
func replayCount(v any) int {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return int(min(max(rv.Int(), 0), math.MaxInt))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return int(min(rv.Uint(), math.MaxInt))
	}
	return 0
}

// OpenSender opens a sender to a queue or topic. The SDK attaches on the
// first Send, so a missing entity is reported there.
//
// The sender is its caller's: Client.Close does not close it (its calls
// fail with ErrClosed afterwards); its Close does.
func (c *Client) OpenSender(ctx context.Context, path string) (replay.Sender, error) {
	_ = ctx // the SDK does no I/O here
	op := "open sender to " + path
	if c.isClosed() {
		return nil, fmt.Errorf("%s: %w", op, ErrClosed)
	}
	_, _, isSub, err := parseEntityPath(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if isSub {
		return nil, fmt.Errorf("%s: a subscription cannot be sent to; send to its topic", op)
	}
	l, err := newLink(c, func(sb *azservicebus.Client) (*azservicebus.Sender, error) { return sb.NewSender(path, nil) })
	if err != nil {
		return nil, c.mapError(op, err)
	}
	return &sender{c: c, path: path, l: l}, nil
}

// sender is a replay.Sender over one SDK sender (replaced when a call on
// it times out, see link).
type sender struct {
	c    *Client
	path string
	l    *link[*azservicebus.Sender]

	batches atomic.Int64 // batches sent (round trips), for tests
}

// Send builds every copy (see buildCopy) and sends them in batches, each
// as large as the broker allows (com.microsoft:max-message-batch-size,
// 256 KiB on a standard namespace), one round trip each.
//
// Copies are grouped before batching: a batch carries copies of one
// session id (or, without one, one partition key) and one scheduled time,
// in their order within the group, groups in order of first appearance.
// A partitioned entity refuses a batch whose messages belong to different
// partitions, and the SDK gives a batch the first message's properties and
// annotations as its own, so mixing would fail there or schedule a whole
// batch by its first copy. On a namespace without partitioning this costs
// a round trip per distinct session, partition key or schedule among the
// copies; copies without any (the usual dead letters) go together.
//
// Every batch is filled before the first is sent, so a copy that cannot be
// built or is larger than one message may be fails the call before
// anything is sent. An error that says for certain that none of the copies
// was sent, and that sending them again as they are would be refused
// again, is a *RefusedError (see refusedWhole).
func (s *sender) Send(ctx context.Context, copies []replay.Copy) error {
	op := "send to " + s.path
	type group struct {
		key  string
		msgs []*azservicebus.AMQPAnnotatedMessage
	}
	var groups []*group
	index := map[string]*group{}
	for _, cp := range copies {
		m, err := buildCopy(cp)
		if err != nil {
			return &RefusedError{Err: fmt.Errorf("%s: copy %q: %w", op, cp.MessageID, err)}
		}
		key := batchKey(m, cp.ScheduledEnqueueAt)
		g := index[key]
		if g == nil {
			g = &group{key: key}
			index[key] = g
			groups = append(groups, g)
		}
		g.msgs = append(g.msgs, m)
	}
	var batches []*azservicebus.MessageBatch
	for _, g := range groups {
		var err error
		if batches, err = s.pack(ctx, op, batches, g.msgs); err != nil {
			return err
		}
	}
	for i, b := range batches {
		if err := s.sendBatch(ctx, op, b); err != nil {
			if i == 0 && refusedWhole(err, int(b.NumMessages())) {
				return &RefusedError{Err: err}
			}
			return err
		}
	}
	return nil
}

// batchKey groups copies that may share a batch: same session id (or
// partition key) and same scheduled time.
func batchKey(m *azservicebus.AMQPAnnotatedMessage, at *time.Time) string {
	key, _ := m.MessageAnnotations[annPartitionKey].(string)
	if m.Properties != nil && m.Properties.GroupID != nil && *m.Properties.GroupID != "" {
		key = *m.Properties.GroupID // Service Bus partitions by session id first
	}
	if at == nil {
		return key + "\x00" // no allocation for the usual copy (key "")
	}
	return key + "\x00" + strconv.FormatInt(at.UnixNano(), 10)
}

// pack adds msgs, one group of copies, to new batches after those given,
// in as few as fit. Nothing is sent: the first batch made attaches the
// link, and the others are made without I/O (a batch's limit is its
// link's).
func (s *sender) pack(ctx context.Context, op string, batches []*azservicebus.MessageBatch,
	msgs []*azservicebus.AMQPAnnotatedMessage) ([]*azservicebus.MessageBatch, error) {
	var batch *azservicebus.MessageBatch
	newBatch := func() error {
		h := s.l.get()
		var b *azservicebus.MessageBatch
		err, o := s.c.bounded(ctx, op, "a send to "+s.path, s.c.timeouts.Send+h.attach, func(ctx context.Context) (err error) {
			b, err = h.sdk.NewMessageBatch(ctx, nil)
			return err
		})
		s.l.after(h, o)
		if err != nil {
			// Nothing is sent yet: a refused attach refuses them all.
			if err = s.callError(ctx, op, h, err); refusedAttach(err) {
				return &RefusedError{Err: err}
			}
			return err
		}
		batch = b
		batches = append(batches, b)
		return nil
	}
	for _, m := range msgs {
		if batch == nil {
			if err := newBatch(); err != nil {
				return batches, err
			}
		}
		err := batch.AddAMQPAnnotatedMessage(m, nil)
		if errors.Is(err, azservicebus.ErrMessageTooLarge) && batch.NumMessages() > 0 {
			if err := newBatch(); err != nil {
				return batches, err
			}
			err = batch.AddAMQPAnnotatedMessage(m, nil)
		}
		if errors.Is(err, azservicebus.ErrMessageTooLarge) {
			return batches, &RefusedError{Err: fmt.Errorf("%s: copy %q is larger than the %s allows in one message (%w)", op, copyID(m), s.path, err)}
		}
		if err != nil {
			return batches, &RefusedError{Err: fmt.Errorf("%s: copy %q cannot be encoded: %w", op, copyID(m), err)}
		}
	}
	return batches, nil
}

// sendBatch sends one batch: one round trip.
func (s *sender) sendBatch(ctx context.Context, op string, b *azservicebus.MessageBatch) error {
	s.batches.Add(1)
	h := s.l.get()
	err, o := s.c.bounded(ctx, op, "a send to "+s.path, s.c.timeouts.Send+h.attach, func(ctx context.Context) error {
		return h.sdk.SendMessageBatch(ctx, b, nil)
	})
	s.l.after(h, o)
	if err != nil {
		return s.callError(ctx, op, h, err)
	}
	return nil
}

// callError is receiver.callError for the sender.
func (s *sender) callError(ctx context.Context, op string, h handle[*azservicebus.Sender], err error) error {
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	if errors.Is(err, ErrClosed) && s.l.replaced(h) {
		return s.c.closedByReplacement(op, err)
	}
	return err
}

func copyID(m *azservicebus.AMQPAnnotatedMessage) string {
	if m.Properties == nil {
		return ""
	}
	return dlq.IdentifierText(m.Properties.MessageID)
}

// Close closes the sender's link.
func (s *sender) Close(ctx context.Context) error {
	if err := s.l.close(ctx); err != nil {
		return s.c.mapError("close sender to "+s.path, err)
	}
	return nil
}

// buildCopy makes the AMQP message of a copy from the original's raw AMQP
// message, so that the body is sent exactly as it came (one or more data
// sections, an amqp-value or amqp-sequence sections), with:
//
//   - header: the time-to-live, durable and priority; not the delivery
//     count (the copy is a new message) nor first-acquirer;
//   - properties: message id = Copy.MessageID; correlation id (of any
//     AMQP type), subject, content type, content encoding, reply-to,
//     reply-to-group-id, to, group id (the session id) and group sequence
//     as they were; not absolute-expiry-time and creation-time, which
//     Service Bus stamps from the enqueue time and time-to-live: a dead
//     letter's would often be past, and its time-to-live counts afresh
//     from the copy's enqueue anyway; not user-id, which a broker may
//     check against the sender's identity;
//   - message annotations: only the sender's x-opt-partition-key and
//     x-opt-via-partition-key; every other (the broker's sequence number,
//     enqueued time, lock, dead-letter source, state, scheduled time, and
//     anything else) is dropped; x-opt-scheduled-enqueue-time is set from
//     Copy.ScheduledEnqueueAt when given;
//   - application properties: the original's (or Edit's, which replace
//     them) without the broker's DeadLetterReason and
//     DeadLetterErrorDescription, even when an edit kept them, with
//     Copy.Properties set on top;
//   - no delivery annotations (the lock token), footer or delivery tag.
//
// Edit.Body, when set, replaces the body with one data section.
func buildCopy(cp replay.Copy) (*azservicebus.AMQPAnnotatedMessage, error) {
	if cp.MessageID == "" {
		return nil, errors.New("no MessageID")
	}
	if cp.Of == nil {
		return nil, errors.New("no original message")
	}
	rm, ok := cp.Of.Raw.(*azservicebus.ReceivedMessage)
	if !ok || rm == nil || rm.RawAMQPMessage == nil {
		return nil, fmt.Errorf("the original was not received by this adapter (Raw is %T)", cp.Of.Raw)
	}
	raw := rm.RawAMQPMessage
	out := &azservicebus.AMQPAnnotatedMessage{
		Body: azservicebus.AMQPAnnotatedMessageBody{
			Data:     slices.Clone(raw.Body.Data),
			Sequence: slices.Clone(raw.Body.Sequence),
			Value:    raw.Body.Value,
		},
		Properties: &azservicebus.AMQPAnnotatedMessageProperties{MessageID: cp.MessageID},
	}
	if cp.Edit != nil && cp.Edit.Body != nil {
		out.Body = azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{cp.Edit.Body}}
	}
	if h := raw.Header; h != nil && (h.TTL > 0 || h.Durable || h.Priority != 0) {
		out.Header = &azservicebus.AMQPAnnotatedMessageHeader{TTL: h.TTL, Durable: h.Durable, Priority: h.Priority}
	}
	if p := raw.Properties; p != nil {
		o := out.Properties
		o.CorrelationID = p.CorrelationID
		o.Subject = p.Subject
		o.ContentType = p.ContentType
		o.ContentEncoding = p.ContentEncoding
		o.ReplyTo = p.ReplyTo
		o.ReplyToGroupID = p.ReplyToGroupID
		o.To = p.To
		o.GroupID = p.GroupID
		o.GroupSequence = p.GroupSequence
	}

	ann := map[any]any{}
	for _, k := range []string{annPartitionKey, annViaPartitionKey} {
		if v, ok := raw.MessageAnnotations[k]; ok && v != nil {
			ann[k] = v
		}
	}
	if cp.ScheduledEnqueueAt != nil {
		ann[annScheduledTime] = cp.ScheduledEnqueueAt.UTC()
	}
	out.MessageAnnotations = ann

	var props map[string]any
	if cp.Edit != nil && cp.Edit.ApplicationProperties != nil && !isJSONNull(cp.Edit.ApplicationProperties) {
		var err error
		if props, err = decodeProperties(cp.Edit.ApplicationProperties); err != nil {
			return nil, fmt.Errorf("edited application properties: %w", err)
		}
		// An edit starts from the stored properties, which hold the
		// broker's dead-letter ones: they never travel.
		maps.DeleteFunc(props, func(k string, _ any) bool { return dlq.IsBrokerDeadLetterProperty(k) })
	} else {
		props = make(map[string]any, len(raw.ApplicationProperties)+len(cp.Properties))
		for k, v := range raw.ApplicationProperties {
			if !dlq.IsBrokerDeadLetterProperty(k) {
				props[k] = v
			}
		}
	}
	maps.Copy(props, cp.Properties)
	if len(props) > 0 {
		out.ApplicationProperties = props
	}
	return out, nil
}

func isJSONNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// decodeProperties reads edited application properties in the stable
// interface's JSON form: strings, integers (int64), other numbers
// (float64), booleans, null, and {"base64": "..."} for binary. Arrays and
// other objects have no application-property form and are refused, naming
// the key. A JSON null instead of the object means no edit (the caller
// checks).
func decodeProperties(raw json.RawMessage) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("want a JSON object: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("want one JSON object, found more after it")
	}
	out := make(map[string]any, len(obj))
	keys := slices.Sorted(maps.Keys(obj))
	for _, k := range keys {
		v, err := propertyValue(obj[k])
		if err != nil {
			return nil, fmt.Errorf("property %q: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

func propertyValue(v any) (any, error) {
	switch x := v.(type) {
	case nil, string, bool:
		return x, nil
	case json.Number:
		s := x.String()
		if strings.ContainsAny(s, ".eE") {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("number %s is out of range", s)
			}
			return f, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("integer %s is out of the range of a 64-bit integer", s)
		}
		return n, nil
	case map[string]any:
		if b64, ok := x["base64"].(string); ok && len(x) == 1 {
			b, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				return nil, fmt.Errorf("bad base64: %w", err)
			}
			return b, nil
		}
		return nil, errors.New(`an object is not a property value (binary is {"base64": "..."})`)
	case []any:
		return nil, errors.New("an array is not a property value")
	}
	return nil, fmt.Errorf("unsupported value %T", v)
}
