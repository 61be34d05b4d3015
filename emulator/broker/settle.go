package broker

import (
	"fmt"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

func checkProps(props map[string]any) error {
	for _, k := range []string{propDeadLetterReason, propDeadLetterDescription} {
		if v, ok := props[k]; ok {
			if _, ok := v.(string); !ok {
				return invalid("property %s must be a string, got %T", k, v)
			}
		}
	}
	return nil
}

// settle finds the record locked by token and runs fn under its store's
// mutex after validating the lock there; expiry (Tick) takes the same
// mutex, so exactly one of them wins.
func (ns *Namespace) settle(token goamqp.UUID, fn func(s *store, r *record, now int64) error) error {
	ns.lockMu.Lock()
	r := ns.locks[token]
	ns.lockMu.Unlock()
	if r == nil {
		return fmt.Errorf("lock %s: %w", uuidString(token), ErrLockLost)
	}
	s := r.st
	s.mu.Lock()
	defer s.unlockFlush()
	now := ns.nowNano()
	s.touch(now)
	if err := s.checkLock(r, token, now); err != nil {
		return err
	}
	return fn(s, r, now)
}

// Complete removes the message locked by token. ErrLockLost when the token
// is unknown or expired.
func (ns *Namespace) Complete(token goamqp.UUID) error {
	return ns.settle(token, func(s *store, r *record, now int64) error {
		s.remove(r)
		return nil
	})
}

// Abandon unlocks the message, merges props into its application
// properties and counts a failed delivery (not in a DLQ); at
// MaxDeliveryCount the message is dead-lettered.
func (ns *Namespace) Abandon(token goamqp.UUID, props map[string]any) error {
	if err := checkProps(props); err != nil {
		return err
	}
	return ns.settle(token, func(s *store, r *record, now int64) error {
		s.unlock(r)
		r.msg = withProps(r.msg, props)
		if s.failDelivery(r, now) {
			return nil
		}
		s.requeue(r, now)
		return nil
	})
}

// Defer unlocks the message, merges props and makes it Deferred: reachable
// only through ReceiveDeferred. Deferring ends a delivery, so it counts
// towards MaxDeliveryCount (docs/servicebus-protocol.md §17).
func (ns *Namespace) Defer(token goamqp.UUID, props map[string]any) error {
	if err := checkProps(props); err != nil {
		return err
	}
	return ns.settle(token, func(s *store, r *record, now int64) error {
		s.unlock(r)
		r.msg = withProps(r.msg, props)
		if s.failDelivery(r, now) {
			return nil
		}
		r.state = stateDeferred
		s.requeue(r, now)
		return nil
	})
}

// DeadLetter moves the message to the DLQ with DeadLetterReason and
// DeadLetterErrorDescription set and props merged. ErrNotAllowed for a
// message already in a dead-letter queue.
func (ns *Namespace) DeadLetter(token goamqp.UUID, reason, description string, props map[string]any) error {
	if err := checkProps(props); err != nil {
		return err
	}
	return ns.settle(token, func(s *store, r *record, now int64) error {
		if r.sub != &s.main {
			return fmt.Errorf("dead-letter a message in %s's dead-letter queue: %w", s.name, ErrNotAllowed)
		}
		s.deadLetter(r, reason, description, props, now)
		return nil
	})
}

// Release unlocks the message without counting a delivery.
func (ns *Namespace) Release(token goamqp.UUID) error {
	return ns.settle(token, func(s *store, r *record, now int64) error {
		s.unlock(r)
		s.requeue(r, now)
		return nil
	})
}

// RenewLock extends the lock by the entity's LockDuration from now.
func (ns *Namespace) RenewLock(token goamqp.UUID) (time.Time, error) {
	var until time.Time
	err := ns.settle(token, func(s *store, r *record, now int64) error {
		r.lockedUntil = now + int64(s.lockDuration())
		r.sub.locks.fix(r)
		until = unixTime(r.lockedUntil)
		return nil
	})
	return until, err
}

// Peek returns up to max messages with seq >= from, ascending, in any state,
// without locking them.
func (ns *Namespace) Peek(path string, from int64, max int) ([]Delivery, error) {
	s, q, a, err := ns.receivable(path)
	if err != nil {
		return nil, err
	}
	if err := ns.busy(a.Entity); err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, nil
	}
	// Snapshot the records under the lock and stamp outside it: stored
	// messages are immutable, so the copies stay consistent.
	snaps := make([]record, 0, min(max, 1024))
	// Show what is due as active, as Next would deliver it, not as still
	// scheduled under a number it no longer has.
	if q == &s.main && s.topic != nil {
		s.topic.activateIfDue(ns.nowNano())
	}
	s.mu.Lock()
	if s.deleted {
		s.unlockFlush()
		return nil, fmt.Errorf("%s: %w", s.name, ErrEntityDeleted)
	}
	now := ns.nowNano()
	s.touch(now) // browsing is activity (Azure)
	if q == &s.main {
		s.activateDue(now)
	}
	q.index.ascend(from, func(r *record) bool {
		snaps = append(snaps, *r)
		return len(snaps) < max
	})
	s.unlockFlush()
	out := make([]Delivery, len(snaps))
	for i := range snaps {
		out[i] = delivery(&snaps[i], false)
	}
	return out, nil
}

// ReceiveDeferred returns deferred messages by sequence number, locked
// (PeekLock, state 1) or removed (ReceiveAndDelete). ErrNotFound when any
// number is missing, not deferred or currently locked; nothing changes then.
// A deferred message whose TTL has passed is expired now, at its fetch
// (dead-lettered with TTLExpiredException or dropped, as the entity says),
// and is left out of the result: deferred messages are never expired by
// the sweep (Azure: "Deferred messages won't be automatically moved to the
// dead-letter queue after they expire").
func (ns *Namespace) ReceiveDeferred(path string, seqs []int64, mode ReceiveMode) ([]Delivery, error) {
	s, q, a, err := ns.receivable(path)
	if err != nil {
		return nil, err
	}
	if err := ns.busy(a.Entity); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.unlockFlush()
	if s.deleted {
		return nil, fmt.Errorf("%s: %w", s.name, ErrEntityDeleted)
	}
	now := ns.nowNano()
	s.touch(now)
	recs := make([]*record, 0, len(seqs))
	seen := make(map[int64]bool, len(seqs))
	for _, seq := range seqs {
		if seen[seq] {
			continue
		}
		seen[seq] = true
		r := q.index.get(seq)
		if r != nil && r.locked && r.lockedUntil <= now {
			s.expireLock(r, now)
			r = q.index.get(seq)
		}
		if r == nil || r.state != stateDeferred || r.locked {
			return nil, fmt.Errorf("deferred message %d in %s: %w", seq, s.name, ErrNotFound)
		}
		recs = append(recs, r)
	}
	out := make([]Delivery, 0, len(recs))
	for _, r := range recs {
		if r.expires != 0 && r.expires <= now {
			s.expire(r, now)
			continue
		}
		if mode == ReceiveAndDelete {
			out = append(out, delivery(r, false))
			s.remove(r)
			continue
		}
		s.lock(r, now)
		out = append(out, delivery(r, true))
	}
	return out, nil
}
