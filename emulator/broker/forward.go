package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"strings"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

// maxTransferHops is Azure's limit on auto-forwarding hops.
const maxTransferHops = 4

// Transfer dead-letter reasons. "MaxTransferHopCountExceeded" and "Session
// ID is null" (with their descriptions) are Azure's documented values;
// "TransferToEntityFailed" is an emulator choice for a missing, disabled or
// otherwise refusing target.
const (
	reasonMaxHops        = "MaxTransferHopCountExceeded"
	descMaxHops          = "The maximum number of allowed hops when forwarding between queues has been exceeded. This value is set to 4."
	reasonSessionIDNull  = "Session ID is null"
	descSessionIDNull    = "Session enabled entity doesn't allow a message whose session identifier is null."
	reasonTransferFailed = "TransferToEntityFailed"
)

// fwdMeta travels with a forwarded message into its target's send.
type fwdMeta struct {
	hops    uint8
	expires int64 // unix ns; the source's expiry, a cap in the target; 0 = none
}

// fwdItem is a record leaving its store by auto-forwarding: detached from
// every structure of the store (r.sub == nil) and owned by the outbox.
type fwdItem struct {
	r      *record
	target string
	dlq    bool // ForwardDeadLetteredMessagesTo rather than ForwardTo
}

func (s *store) forwardTo() string {
	if s.kind == KindQueue {
		return ForwardTarget(s.qp.ForwardTo)
	}
	return ForwardTarget(s.sp.ForwardTo)
}

func (s *store) forwardDLQTo() string {
	if s.kind == KindQueue {
		return ForwardTarget(s.qp.ForwardDeadLetteredMessagesTo)
	}
	return ForwardTarget(s.sp.ForwardDeadLetteredMessagesTo)
}

// ForwardTarget is the entity name a ForwardTo or
// ForwardDeadLetteredMessagesTo value designates. The value is kept as the
// client gave it: an entity name ("orders") or an absolute URL
// ("sb://<namespace>/orders", "https://<namespace>/orders"), which is what
// the service stores and returns; the URL's host is not compared with the
// namespace's (a local transport rewrites it).
func ForwardTarget(v string) string {
	v = strings.TrimSpace(v)
	if u, err := url.Parse(v); err == nil && u.IsAbs() && u.Host != "" {
		v = u.Path
	}
	return strings.TrimPrefix(v, "/")
}

// queueForward puts a detached record in the outbox. Caller holds s.mu and
// must release it with unlockFlush (or leave it to the next one).
func (s *store) queueForward(r *record, target string, dlq bool) {
	r.sub = nil
	s.outbox = append(s.outbox, fwdItem{r: r, target: target, dlq: dlq})
	s.nTransfer++
}

// unlockFlush releases s.mu and then forwards whatever the outbox holds.
// No lock is held while a target is written, so forwarding chains, loops
// and topic fan-out cannot invert the lock order.
func (s *store) unlockFlush() {
	if len(s.outbox) == 0 {
		s.mu.Unlock()
		return
	}
	out := s.outbox
	s.outbox = nil
	s.mu.Unlock()
	s.ns.forward(s, out)
}

// flush forwards what s's outbox holds. Caller holds no store lock.
func (s *store) flush() {
	s.mu.Lock()
	s.unlockFlush()
}

// withAnnotation returns a shallow copy of m with annotation k set to v.
func withAnnotation(m *goamqp.Message, k string, v any) *goamqp.Message {
	c := *m
	c.Annotations = make(goamqp.Annotations, len(m.Annotations)+1)
	maps.Copy(c.Annotations, m.Annotations)
	c.Annotations[k] = v
	return &c
}

type tdlqEntry struct {
	r            *record
	reason, desc string
}

// forward sends every item to its target. Items that cannot be forwarded go
// to src's transfer dead-letter queue.
func (ns *Namespace) forward(src *store, items []fwdItem) {
	var failed []tdlqEntry
	for _, it := range items {
		if reason, desc, ok := ns.forwardOne(src, it); !ok {
			failed = append(failed, tdlqEntry{it.r, reason, desc})
		}
	}
	src.mu.Lock()
	src.nTransfer -= int64(len(items))
	if !src.deleted {
		now := ns.nowNano()
		for _, f := range failed {
			r := f.r
			if ns.log.Enabled(context.Background(), slog.LevelDebug) {
				ns.log.Debug("message transfer dead-lettered", "entity", src.name, "sequence_number", r.seq, "reason", f.reason)
			}
			r.msg = withProps(r.msg, map[string]any{propDeadLetterReason: f.reason, propDeadLetterDescription: f.desc})
			r.state = stateActive
			r.expires = 0
			r.scheduledAt = 0
			r.sess = nil
			src.insert(&src.tdlq, r, nil, now)
		}
	}
	src.unlockFlush()
}

// forwardOne sends one item to its target as a new message. It reports the
// transfer dead-letter reason and description when that fails.
func (ns *Namespace) forwardOne(src *store, it fwdItem) (reason, desc string, ok bool) {
	r := it.r
	if r.hops >= maxTransferHops {
		return reasonMaxHops, descMaxHops, false
	}
	m := r.msg
	if r.hops == 0 {
		// EnqueuedSequenceNumber: the number at the original point of
		// submission, so only the first hop sets it.
		m = withAnnotation(m, annEnqueueSequenceNumber, r.seq)
	}
	fw := &fwdMeta{hops: r.hops + 1}
	if !it.dlq {
		fw.expires = r.expires
	}
	err := ns.forwardSend(src, it.target, m, fw)
	if err == nil {
		return "", "", true
	}
	var sn *sessionIDNullError
	if errors.As(err, &sn) {
		return reasonSessionIDNull, descSessionIDNull, false
	}
	return reasonTransferFailed, fmt.Sprintf("Forwarding to %q failed: %v.", it.target, err), false
}

// forwardSend enqueues a forwarded message on a queue or topic main path.
// Injected server-busy faults do not apply (emulator choice: they model
// client-facing throttling; Azure retries internal transfers).
func (ns *Namespace) forwardSend(src *store, target string, m *goamqp.Message, fw *fwdMeta) error {
	a, s, t, err := ns.resolve(target)
	if err != nil {
		return fmt.Errorf("entity %q does not exist", target)
	}
	if a.SubQueue != SubQueueMain || a.Kind == KindSubscription {
		return fmt.Errorf("%q is not a queue or topic", target)
	}
	now := ns.nowNano()
	sched := []time.Time{{}}
	if s != nil {
		return s.send([]*goamqp.Message{m}, sched, nil, now, true, fw)
	}
	return t.send([]*goamqp.Message{m}, sched, nil, now, true, fw)
}

// checkForward validates a ForwardTo or ForwardDeadLetteredMessagesTo value
// of entity self: empty, or an existing queue or topic other than self.
// Caller holds ns.mu (read or write).
func (ns *Namespace) checkForward(field, target, self string) error {
	if target == "" {
		return nil
	}
	key := strings.ToLower(ForwardTarget(target))
	if strings.EqualFold(key, self) {
		return fmt.Errorf("%s %q: an entity cannot forward to itself: %w", field, target, ErrInvalidProperties)
	}
	if _, ok := ns.queues[key]; ok {
		return nil
	}
	if _, ok := ns.topics[key]; ok {
		return nil
	}
	return fmt.Errorf("%s %q: no queue or topic of that name: %w", field, target, ErrInvalidProperties)
}
