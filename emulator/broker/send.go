package broker

import (
	"fmt"
	"math"
	"slices"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

func sendAllowed(st EntityStatus) bool { return st != StatusDisabled && st != StatusSendDisabled }
func receiveAllowed(st EntityStatus) bool {
	return st != StatusDisabled && st != StatusReceiveDisabled
}

// sendTarget resolves a path that must be a queue or topic main path.
func (ns *Namespace) sendTarget(path string) (Address, *store, *topic, error) {
	a, s, t, err := ns.resolve(path)
	if err != nil {
		return a, nil, nil, err
	}
	if a.SubQueue != SubQueueMain || a.Kind == KindSubscription {
		return a, nil, nil, fmt.Errorf("send to %q: %w", path, ErrNotAllowed)
	}
	if err := ns.busy(a.Entity); err != nil {
		return a, nil, nil, err
	}
	return a, s, t, nil
}

// Send enqueues m on a queue or topic. Ownership of m passes to the broker.
// A duplicate (RequiresDuplicateDetection, same MessageID within the
// window) succeeds without enqueuing anything.
func (ns *Namespace) Send(path string, m *goamqp.Message) error {
	_, s, t, err := ns.sendTarget(path)
	if err != nil {
		return err
	}
	sched, err := prepare(m)
	if err != nil {
		return err
	}
	now := ns.nowNano()
	if s != nil {
		return s.send([]*goamqp.Message{m}, []time.Time{sched}, nil, now, true, nil)
	}
	return t.send([]*goamqp.Message{m}, []time.Time{sched}, nil, now, true, nil)
}

// Schedule enqueues messages that each carry x-opt-scheduled-enqueue-time
// and returns their sequence numbers in order. Scheduling bypasses
// duplicate detection (emulator choice: a dropped duplicate has no number
// to return).
func (ns *Namespace) Schedule(path string, msgs []*goamqp.Message) ([]int64, error) {
	_, s, t, err := ns.sendTarget(path)
	if err != nil {
		return nil, err
	}
	times := make([]time.Time, len(msgs))
	for i, m := range msgs {
		at, err := prepare(m)
		if err != nil {
			return nil, err
		}
		if at.IsZero() {
			return nil, invalid("scheduled message %d has no %s", i, annScheduledEnqueueTime)
		}
		times[i] = at
	}
	seqs := make([]int64, len(msgs))
	now := ns.nowNano()
	if s != nil {
		err = s.send(msgs, times, seqs, now, false, nil)
	} else {
		err = t.send(msgs, times, seqs, now, false, nil)
	}
	if err != nil {
		return nil, err
	}
	return seqs, nil
}

// enqueue stores m under seq in s's main queue, or, when s forwards
// (ForwardTo) and m is active at once, queues it in s's outbox. at is the
// enqueue instant: now, or for a topic's activated scheduled message its
// due time. fw is set for a message arriving by auto-forwarding. Caller
// holds s.mu.
func (s *store) enqueue(m *goamqp.Message, seq int64, sched time.Time, size int32, at int64, fw *fwdMeta) {
	r := newRecord(s, m, seq, size)
	if fw != nil {
		r.hops = fw.hops
	}
	if !sched.IsZero() && sched.After(time.Unix(0, at)) {
		r.state = stateScheduled
		r.scheduledAt = dueNano(sched)
		r.enqueued = sched.UnixMilli()
	} else {
		r.enqueued = at / int64(time.Millisecond)
		r.expires = expiresAt(m, s.defaultTTL(), at)
		if fw != nil && fw.expires != 0 && (r.expires == 0 || fw.expires < r.expires) {
			r.expires = fw.expires
		}
		if to := s.forwardTo(); to != "" {
			s.queueForward(r, to, false)
			return
		}
	}
	s.insert(&s.main, r, sessionID(m), at)
}

// sessionIDNullError is the rejection of a message without a session id by
// a session entity. It is an ErrInvalidMessage; forwarding maps it to
// Azure's "Session ID is null" dead-letter reason.
type sessionIDNullError struct{ entity string }

func (e *sessionIDNullError) Error() string {
	return e.entity + " requires sessions: message has no session id (group-id): " + ErrInvalidMessage.Error()
}
func (e *sessionIDNullError) Unwrap() error { return ErrInvalidMessage }

func requireSession(m *goamqp.Message, entity string) error {
	// Only an absent (or null) session id is refused: the empty string is
	// a session id like any other, as in the service.
	if id := sessionID(m); id == nil {
		return &sessionIDNullError{entity}
	}
	return nil
}

// send enqueues msgs on a queue; seqs (optional) receives their numbers.
// fw is set (with one message) for a message arriving by auto-forwarding.
func (s *store) send(msgs []*goamqp.Message, sched []time.Time, seqs []int64, now int64, dedupe bool, fw *fwdMeta) error {
	s.mu.Lock()
	defer s.unlockFlush()
	if s.deleted {
		return fmt.Errorf("queue %q: %w", s.name, ErrNotFound)
	}
	if !sendAllowed(s.qp.Status) {
		return fmt.Errorf("queue %q is %s: %w", s.name, s.qp.Status, ErrEntityDisabled)
	}
	if s.session {
		for _, m := range msgs {
			if err := requireSession(m, s.name); err != nil {
				return err
			}
		}
	}
	s.accessed.Store(now)
	s.touch(now)
	for i, m := range msgs {
		if dedupe && s.qp.RequiresDuplicateDetection {
			if id := messageIDKey(m); id != "" && s.in.duplicate(id, now, s.qp.DuplicateDetectionHistoryTimeWindow) {
				continue
			}
		}
		s.in.seq++
		if seqs != nil {
			seqs[i] = s.in.seq
		}
		s.enqueue(m, s.in.seq, sched[i], estimateSize(m), now, fw)
	}
	return nil
}

// send enqueues msgs on a topic: one sequence number per message, shared by
// the copies in every subscription whose rules match. Subscriptions that
// forward are flushed after t.mu is released (lock order: a forward may
// reach this topic again).
func (t *topic) send(msgs []*goamqp.Message, sched []time.Time, seqs []int64, now int64, dedupe bool, fw *fwdMeta) error {
	var flush []*store
	err := t.sendLocked(msgs, sched, seqs, now, dedupe, fw, &flush)
	for _, s := range flush {
		s.flush()
	}
	return err
}

func (t *topic) sendLocked(msgs []*goamqp.Message, sched []time.Time, seqs []int64, now int64, dedupe bool, fw *fwdMeta, flush *[]*store) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.deleted {
		return fmt.Errorf("topic %q: %w", t.name, ErrNotFound)
	}
	if !sendAllowed(t.props.Status) {
		return fmt.Errorf("topic %q is %s: %w", t.name, t.props.Status, ErrEntityDisabled)
	}
	// Validate against every target before enqueuing anything.
	for _, m := range msgs {
		for _, s := range t.subs {
			if s.session && matchAny(s.rules, m, now) {
				if err := requireSession(m, s.name); err != nil {
					return err
				}
			}
		}
	}
	t.accessed.Store(now)
	touch(&t.active, now)
	for i, m := range msgs {
		if dedupe && t.props.RequiresDuplicateDetection {
			if id := messageIDKey(m); id != "" && t.in.duplicate(id, now, t.props.DuplicateDetectionHistoryTimeWindow) {
				continue
			}
		}
		t.in.seq++
		if seqs != nil {
			seqs[i] = t.in.seq
		}
		size := estimateSize(m)
		if at := sched[i]; !at.IsZero() && at.After(time.Unix(0, now)) {
			t.schedule(m, t.in.seq, at, size)
			continue
		}
		t.fanOut(m, t.in.seq, size, now, fw, flush)
	}
	return nil
}

// fanOut enqueues m, active and enqueued at `at`, in every subscription
// whose rules select it (see route), under one sequence number; a rule
// with an action adds its own copy, under the topic's next number when the
// subscription already has one. When a SQL filter of a subscription with
// DeadLetteringOnFilterEvaluationExceptions fails to evaluate, m goes to
// that subscription's dead-letter queue instead (reason FilterException,
// the error as description). A session subscription that would refuse a
// copy (no session id; possible only for a scheduled message whose rules
// are evaluated at activation, or an action that removed it) does not get
// it, nor does a disabled one. Subscriptions that forward are added to
// flush. Caller holds t.mu.
func (t *topic) fanOut(m *goamqp.Message, seq int64, size int32, at int64, fw *fwdMeta, flush *[]*store) {
	for _, s := range t.subs {
		plain, copies, failed := route(s.rules, m, seq, at, size)
		if !plain && len(copies) == 0 && failed == nil {
			continue
		}
		s.mu.Lock()
		switch {
		case s.deleted || s.sp.Status == StatusDisabled:
		case failed != nil && s.sp.DeadLetteringOnFilterEvaluationExceptions:
			s.enqueueDeadLettered(m, seq, size, at, filterExceptionReason, failed.Error())
		default:
			n := 0
			put := func(c *goamqp.Message, size int32) {
				if s.session && requireSession(c, s.name) != nil {
					return
				}
				cseq := seq
				if n > 0 {
					t.in.seq++
					cseq = t.in.seq
				}
				n++
				s.enqueue(c, cseq, time.Time{}, size, at, fw)
			}
			if plain {
				put(m, size)
			}
			for _, c := range copies {
				put(c, estimateSize(c))
			}
		}
		if len(s.outbox) > 0 && !slices.Contains(*flush, s) {
			*flush = append(*flush, s)
		}
		s.mu.Unlock()
	}
}

// enqueueDeadLettered stores m under seq straight in s's dead-letter
// queue (or its ForwardDeadLetteredMessagesTo outbox) with the given
// reason, as deadLetter does for a message already in the main queue.
// Caller holds s.mu.
func (s *store) enqueueDeadLettered(m *goamqp.Message, seq int64, size int32, at int64, reason, desc string) {
	r := newRecord(s, withProps(m, map[string]any{propDeadLetterReason: reason, propDeadLetterDescription: desc}), seq, size)
	r.enqueued = at / int64(time.Millisecond)
	if to := s.forwardDLQTo(); to != "" {
		r.msg = withAnnotation(r.msg, annDeadLetterSource, s.name)
		s.queueForward(r, to, true)
		return
	}
	s.insert(&s.dlq, r, nil, at)
}

// CancelScheduled removes scheduled messages by sequence number. Unknown or
// no longer scheduled numbers are ignored (emulator choice). A topic holds
// its scheduled messages itself until they are due.
func (ns *Namespace) CancelScheduled(path string, seqs []int64) error {
	_, s, t, err := ns.sendTarget(path)
	if err != nil {
		return err
	}
	// What is due is no longer scheduled, even if no tick has activated it.
	now := ns.nowNano()
	if t != nil {
		var flush []*store
		t.mu.Lock()
		touch(&t.active, now)
		t.activateDue(now, &flush)
		for _, seq := range seqs {
			if r := t.schedBySeq[seq]; r != nil {
				t.unschedule(r)
			}
		}
		t.mu.Unlock()
		for _, s := range flush {
			s.flush()
		}
		return nil
	}
	s.mu.Lock()
	defer s.unlockFlush()
	if !s.deleted {
		s.touch(now)
		s.activateDue(now)
		for _, seq := range seqs {
			if r := s.main.index.get(seq); r != nil && r.state == stateScheduled {
				s.remove(r)
			}
		}
	}
	return nil
}

// latestNano is the latest time int64 unix nanoseconds hold (in 2262).
var latestNano = time.Unix(0, math.MaxInt64)

// dueNano is a scheduled time as the unix nanoseconds scheduled records are
// ordered and compared by. Service Bus schedules up to 9999-12-31, past
// what int64 nanoseconds hold, where UnixNano wraps around to a time in the
// past (and the message was enqueued at once): a later time saturates to
// the latest instant the clock can reach, due after every other.
func dueNano(t time.Time) int64 {
	if t.After(latestNano) {
		return math.MaxInt64
	}
	return t.UnixNano()
}
