package broker

import (
	"context"
	"fmt"
	"time"
)

// Consumer receives messages from one queue, subscription or dead-letter
// sub-queue (and, on session entities, one locked session). It is safe for
// concurrent use.
type Consumer struct {
	ns     *Namespace
	st     *store
	q      *subQueue
	mode   ReceiveMode
	sess   *session // immutable after NewConsumer
	notify chan struct{}
	done   chan struct{}

	// guarded by st.mu
	finished bool
	err      error
}

func (c *Consumer) signal() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// finishLocked ends the consumer once. Caller holds c.st.mu.
func (c *Consumer) finishLocked(err error) {
	if c.finished {
		return
	}
	c.finished = true
	c.err = err
	close(c.done)
	delete(c.q.consumers, c)
	// Idle time starts when the last receiver leaves.
	c.st.touch(c.ns.nowNano())
	if ss := c.sess; ss != nil && ss.holder == c {
		ss.holder = nil
		ss.until = 0
		if ss.ready.len() > 0 {
			c.st.wakeWaiters()
		}
		c.st.maybeDropSession(ss)
	}
}

// NewConsumer opens a consumer on a queue, subscription or dead-letter path.
// With o.Session it locks the named session (ErrSessionLocked if another
// consumer holds it) or, with an empty SessionID, waits for a session with
// deliverable messages that nobody holds, until ctx ends (ErrNoSession).
// Session options on a non-session entity, none on a session entity's main
// queue, and topic paths give ErrNotAllowed.
func (ns *Namespace) NewConsumer(ctx context.Context, path string, o ConsumerOptions) (*Consumer, error) {
	s, q, a, err := ns.receivable(path)
	if err != nil {
		return nil, err
	}
	if err := ns.busy(a.Entity); err != nil {
		return nil, err
	}
	switch {
	case o.Session && (!s.session || q != &s.main):
		return nil, fmt.Errorf("%q is not a session entity: %w", path, ErrNotAllowed)
	case !o.Session && s.session && q == &s.main:
		return nil, fmt.Errorf("%q: %w (%w)", path, ErrSessionRequired, ErrNotAllowed)
	}
	c := &Consumer{ns: ns, st: s, q: q, mode: o.Mode, notify: make(chan struct{}, 1), done: make(chan struct{})}
	// Start signalled: messages may already be waiting.
	c.notify <- struct{}{}
	if !o.Session {
		s.mu.Lock()
		defer s.unlockFlush()
		if err := s.receivable(); err != nil {
			return nil, err
		}
		now := ns.nowNano()
		s.accessed.Store(now)
		s.touch(now)
		q.consumers[c] = struct{}{}
		return c, nil
	}
	if o.SessionID != "" || o.ExactSession {
		s.mu.Lock()
		defer s.unlockFlush()
		if err := s.receivable(); err != nil {
			return nil, err
		}
		now := ns.nowNano()
		ss := s.sessionFor(o.SessionID)
		if ss.holder != nil {
			if ss.until > now {
				return nil, fmt.Errorf("session %q of %s: %w", o.SessionID, s.name, ErrSessionLocked)
			}
			s.expireSession(ss, now)
			ss = s.sessionFor(o.SessionID)
		}
		s.acceptSession(c, ss, now)
		return c, nil
	}
	var wake chan struct{}
	for {
		if s.topic != nil {
			s.topic.activateIfDue(ns.nowNano())
		}
		s.mu.Lock()
		if wake != nil {
			delete(s.waiters, wake)
		}
		if err := s.receivable(); err != nil {
			s.unlockFlush()
			return nil, err
		}
		now := ns.nowNano()
		if ss := s.nextSession(now); ss != nil {
			s.acceptSession(c, ss, now)
			s.unlockFlush()
			return c, nil
		}
		if wake == nil {
			wake = make(chan struct{}, 1)
		}
		s.waiters[wake] = struct{}{}
		s.unlockFlush()
		select {
		case <-wake:
		case <-ctx.Done():
			s.mu.Lock()
			delete(s.waiters, wake)
			s.unlockFlush()
			return nil, fmt.Errorf("accept next session on %s: %w: %w", s.name, ErrNoSession, ctx.Err())
		}
	}
}

// receivable reports why consumers cannot attach. Caller holds s.mu.
func (s *store) receivable() error {
	if s.deleted {
		return fmt.Errorf("%s: %w", s.name, ErrEntityDeleted)
	}
	if !receiveAllowed(s.status()) {
		return fmt.Errorf("%s is %s: %w", s.name, s.status(), ErrEntityDisabled)
	}
	return nil
}

func (s *store) acceptSession(c *Consumer, ss *session, now int64) {
	ss.holder = c
	ss.until = now + int64(s.lockDuration())
	c.sess = ss
	c.q.consumers[c] = struct{}{}
	s.accessed.Store(now)
	s.touch(now)
}

// nextSession picks the free session whose next deliverable message has the
// lowest sequence number. Caller holds s.mu.
func (s *store) nextSession(now int64) *session {
	s.expireDueLocks(&s.main, now)
	s.activateDue(now)
	var expired []*session
	for _, ss := range s.sessions {
		if ss.holder != nil && ss.until <= now {
			expired = append(expired, ss)
		}
	}
	for _, ss := range expired {
		s.expireSession(ss, now)
	}
	var best *session
	var bestSeq int64
	for _, ss := range s.sessions {
		if ss.holder != nil {
			continue
		}
		r := s.readyTop(&ss.ready, now)
		if r != nil && (best == nil || r.seq < bestSeq) {
			best, bestSeq = ss, r.seq
		}
	}
	return best
}

// readyTop returns the lowest-seq deliverable record of h, expiring
// records whose TTL passed on the way. Caller holds s.mu.
func (s *store) readyTop(h *recHeap, now int64) *record {
	for {
		r := h.top()
		if r == nil {
			return nil
		}
		if r.expires != 0 && r.expires <= now {
			s.expire(r, now)
			continue
		}
		return r
	}
}

// Next returns the lowest-sequence deliverable message without blocking:
// locked (peek-lock) or removed (receive-and-delete). It reports false when
// nothing is deliverable now; wait on Notify and call again.
func (c *Consumer) Next() (Delivery, bool) {
	s := c.st
	if s.topic != nil && c.q == &s.main {
		s.topic.activateIfDue(c.ns.nowNano())
	}
	s.mu.Lock()
	defer s.unlockFlush()
	if c.finished || s.deleted || !receiveAllowed(s.status()) {
		return Delivery{}, false
	}
	now := c.ns.nowNano()
	h := &c.q.ready
	// Lazily do the timed work Tick would do, so Next never waits for a
	// tick to see an expired lock or a due scheduled message.
	s.expireDueLocks(c.q, now)
	if c.q == &s.main {
		s.activateDue(now)
	}
	if ss := c.sess; ss != nil {
		if ss.until <= now {
			s.expireSession(ss, now)
			return Delivery{}, false
		}
		h = &ss.ready
	}
	r := s.readyTop(h, now)
	if r == nil {
		return Delivery{}, false
	}
	h.remove(r)
	if c.mode == ReceiveAndDelete {
		d := delivery(r, false)
		s.remove(r)
		return d, true
	}
	s.lock(r, now)
	return delivery(r, true), true
}

// Notify is signalled (capacity 1, never blocking the broker) whenever Next
// may now return something.
func (c *Consumer) Notify() <-chan struct{} { return c.notify }

// Done is closed when the entity is deleted, the session lock is lost, or
// Close is called.
func (c *Consumer) Done() <-chan struct{} { return c.done }

// Err says why Done closed: nil after Close, else wrapping ErrEntityDeleted
// or ErrSessionLockLost.
func (c *Consumer) Err() error {
	c.st.mu.Lock()
	defer c.st.unlockFlush()
	return c.err
}

// SessionID returns the locked session's id ("" for non-session consumers).
func (c *Consumer) SessionID() string {
	if c.sess == nil {
		return ""
	}
	return c.sess.id
}

// SessionLockedUntil returns the session lock's expiry (zero when the
// consumer holds no session lock).
func (c *Consumer) SessionLockedUntil() time.Time {
	c.st.mu.Lock()
	defer c.st.unlockFlush()
	if c.sess == nil || c.sess.holder != c {
		return time.Time{}
	}
	return unixTime(c.sess.until)
}

// Close ends the consumer and releases its session lock. Message locks
// survive: they are namespace-wide and settle by token.
func (c *Consumer) Close() {
	c.st.mu.Lock()
	defer c.st.unlockFlush()
	c.finishLocked(nil)
}
