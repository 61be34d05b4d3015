package broker

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// minAutoDeleteOnIdle is the smallest AutoDeleteOnIdle Service Bus accepts.
const minAutoDeleteOnIdle = 5 * time.Minute

func checkAutoDelete(d time.Duration) error {
	if d != 0 && d < minAutoDeleteOnIdle {
		return fmt.Errorf("AutoDeleteOnIdle %v below the minimum of 5m: %w", d, ErrInvalidProperties)
	}
	return nil
}

// touch records activity on a queue or subscription (and, for a
// subscription, on its topic: Azure counts operations on a topic's
// subscriptions as activity of the topic). AutoDeleteOnIdle measures idle
// time from the last touch.
func (s *store) touch(now int64) {
	touch(&s.active, now)
	if s.topic != nil {
		touch(&s.topic.active, now)
	}
}

// touch moves a last-activity time forward to at (never back: an activated
// scheduled message counts from its due time, which may be earlier than
// activity seen since).
func touch(active *atomic.Int64, at int64) {
	for {
		old := active.Load()
		if old >= at || active.CompareAndSwap(old, at) {
			return
		}
	}
}

func (s *store) autoDeleteOnIdle() time.Duration {
	if s.kind == KindQueue {
		return s.qp.AutoDeleteOnIdle
	}
	return s.sp.AutoDeleteOnIdle
}

// attached reports whether a receiver is attached (on any sub-queue) or
// waiting to accept a session: that is ongoing receiving. Caller holds
// s.mu.
func (s *store) attached() bool {
	return len(s.main.consumers)+len(s.dlq.consumers)+len(s.tdlq.consumers)+len(s.waiters) > 0
}

// idle reports whether s has been idle for its AutoDeleteOnIdle at now.
// Caller holds s.mu.
func (s *store) idle(now int64) bool {
	d := s.autoDeleteOnIdle()
	switch {
	case d <= 0 || s.deleted:
		return false
	case s.forwardTo() != "":
		// Azure: auto-forwarding is equivalent to a receiver receiving.
		return false
	case s.nSched > 0 || s.nTransfer > 0 || s.attached():
		return false
	}
	return now-s.active.Load() >= int64(d)
}

// idle reports whether t has been idle for its AutoDeleteOnIdle at now: no
// send, update or scheduled message, and no activity on a subscription.
// Caller holds t.mu (and takes each subscription's mutex).
func (t *topic) idle(now int64) bool {
	d := t.props.AutoDeleteOnIdle
	if d <= 0 || t.deleted || len(t.schedBySeq) > 0 || now-t.active.Load() < int64(d) {
		return false
	}
	for _, s := range t.subs {
		s.mu.Lock()
		busy := s.attached() || s.nTransfer > 0
		s.mu.Unlock()
		if busy {
			return false
		}
	}
	return true
}

// deleteIdle deletes the given entities that are still idle at now, each
// checked again under the locks its deletion takes, so activity that came
// after Tick looked wins.
func (ns *Namespace) deleteIdle(now int64, stores []*store, topics []*topic) {
	for _, t := range topics {
		ns.deleteIdleTopic(t, now)
	}
	for _, s := range stores {
		if s.kind == KindQueue {
			ns.deleteIdleQueue(s, now)
		} else {
			ns.deleteIdleSubscription(s, now)
		}
	}
}

func (ns *Namespace) deleteIdleQueue(s *store, now int64) {
	key := strings.ToLower(s.name)
	ns.mu.Lock()
	if ns.queues[key] != s {
		ns.mu.Unlock()
		return
	}
	s.mu.Lock()
	idle := s.idle(now)
	if idle {
		delete(ns.queues, key)
		s.destroy()
	}
	// An idle store's outbox is empty (nTransfer is 0), so there is nothing
	// to flush, which could not be done under ns.mu anyway.
	s.mu.Unlock()
	ns.mu.Unlock()
	if idle {
		ns.dropFaults(key)
		ns.log.Info("queue deleted: idle for its AutoDeleteOnIdle", "entity", s.name)
	}
}

func (ns *Namespace) deleteIdleSubscription(s *store, now int64) {
	t := s.topic
	key := strings.ToLower(s.subName)
	t.mu.Lock()
	if t.subs[key] != s {
		t.mu.Unlock()
		return
	}
	s.mu.Lock()
	idle := s.idle(now)
	if idle {
		delete(t.subs, key)
		s.destroy()
	}
	s.mu.Unlock()
	t.mu.Unlock()
	if idle {
		ns.dropFaults(strings.ToLower(s.name))
		ns.log.Info("subscription deleted: idle for its AutoDeleteOnIdle", "entity", s.name)
	}
}

func (ns *Namespace) deleteIdleTopic(t *topic, now int64) {
	key := strings.ToLower(t.name)
	ns.mu.Lock()
	if ns.topics[key] != t {
		ns.mu.Unlock()
		return
	}
	t.mu.Lock()
	idle := t.idle(now)
	if idle {
		delete(ns.topics, key)
		t.deleted = true
		for _, s := range t.subs {
			s.mu.Lock()
			s.destroy()
			s.mu.Unlock()
		}
	}
	t.mu.Unlock()
	ns.mu.Unlock()
	if idle {
		ns.dropFaults(key)
		ns.log.Info("topic deleted: idle for its AutoDeleteOnIdle", "entity", t.name)
	}
}
