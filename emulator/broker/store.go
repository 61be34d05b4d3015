package broker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

// Message states, as stamped in x-opt-message-state.
const (
	stateActive    uint8 = 0
	stateDeferred  uint8 = 1
	stateScheduled uint8 = 2
)

// record is one stored message in one queue or subscription. All fields
// except st are guarded by st.mu. msg is never mutated after the record is
// created: modifications (merged properties, dead-letter reason) replace it
// with a shallow copy, so topic fan-out may share one *goamqp.Message
// between subscriptions.
type record struct {
	msg         *goamqp.Message
	st          *store // immutable
	sub         *subQueue
	sess        *session
	seq         int64
	enqueued    int64 // unix ms
	expires     int64 // unix ns; 0 = never
	scheduledAt int64 // unix ns; 0 = not scheduled
	lockedUntil int64 // unix ns
	token       goamqp.UUID
	dc          uint32 // failed deliveries so far
	size        int32
	state       uint8
	hops        uint8 // auto-forwarding hops so far (broker-private)
	locked      bool
	hidx        [numHeaps]int32
}

func newRecord(st *store, m *goamqp.Message, seq int64, size int32) *record {
	r := &record{msg: m, st: st, seq: seq, size: size}
	for i := range r.hidx {
		r.hidx[i] = -1
	}
	return r
}

// subQueue is the main queue, the DLQ or the transfer DLQ of a store.
type subQueue struct {
	st        *store
	which     SubQueue
	index     seqIndex // every record, by seq (Peek, ReceiveDeferred, Cancel)
	ready     recHeap  // deliverable candidates (non-session entities and DLQs)
	locks     recHeap  // locked records, by lockedUntil
	consumers map[*Consumer]struct{}
	bytes     int64
}

func (q *subQueue) notifyAll() {
	for c := range q.consumers {
		c.signal()
	}
}

// session is the per-(entity, session id) state of a session entity.
type session struct {
	id      string
	holder  *Consumer
	until   int64 // session lock expiry, unix ns
	state   []byte
	updated int64 // unix ns; 0 = never set
	ready   recHeap
	msgs    int // records of this session in the main queue, any state
}

func (s *session) lockedAt(now int64) bool { return s.holder != nil && s.until > now }

// ingress is the sending side of a queue or topic: the sequence counter and
// the duplicate-detection history.
type ingress struct {
	seq  int64
	dup  map[string]int64 // message id → first send time (unix ns)
	dupQ []dupEntry       // FIFO by time, for pruning
}

type dupEntry struct {
	id string
	at int64
}

// duplicate records id at now and reports whether it was seen within window.
func (in *ingress) duplicate(id string, now int64, window time.Duration) bool {
	if in.dup == nil {
		in.dup = map[string]int64{}
	}
	if at, ok := in.dup[id]; ok && now-at < int64(window) {
		return true
	}
	in.dup[id] = now
	in.dupQ = append(in.dupQ, dupEntry{id, now})
	return false
}

func (in *ingress) prune(now int64, window time.Duration) {
	i := 0
	for ; i < len(in.dupQ) && now-in.dupQ[i].at >= int64(window); i++ {
		e := in.dupQ[i]
		if in.dup[e.id] == e.at {
			delete(in.dup, e.id)
		}
	}
	if i > 0 {
		clear(in.dupQ[:i])
		in.dupQ = in.dupQ[i:]
		if len(in.dupQ) == 0 {
			in.dupQ = nil
		}
	}
}

// store is a queue or a subscription: three sub-queues plus settings.
type store struct {
	ns      *Namespace
	kind    Kind   // KindQueue or KindSubscription
	name    string // canonical entity name
	subName string // subscriptions: the subscription name
	topic   *topic // subscriptions: the owning topic

	mu      sync.Mutex
	qp      QueueProperties        // queues
	sp      SubscriptionProperties // subscriptions
	rules   []Rule                 // subscriptions; guarded by topic.mu
	main    subQueue
	dlq     subQueue
	tdlq    subQueue
	expiry  recHeap
	sched   recHeap
	nSched  int64
	session bool // RequiresSession, fixed at creation
	// sessions and waiters are used only by session entities.
	sessions map[string]*session
	waiters  map[chan struct{}]struct{}
	deleted  bool
	in       ingress // queues only
	// outbox holds records leaving by auto-forwarding, queued under mu
	// and sent after mu is released (forward.go); nTransfer counts them
	// until they have reached their target or the transfer DLQ.
	outbox    []fwdItem
	nTransfer int64
	topicTTL  time.Duration // subscriptions: the topic's default TTL (copied under topic.mu and s.mu)

	created, updated int64
	accessed         atomic.Int64
	active           atomic.Int64 // last activity (unix ns), for AutoDeleteOnIdle (idle.go)
}

func newStore(ns *Namespace, kind Kind, name string, now int64) *store {
	s := &store{ns: ns, kind: kind, name: name, created: now, updated: now}
	// A new subscription reads as accessed at creation, a new queue as
	// never accessed: what the service reports (the SDK's live tests
	// check both).
	if kind == KindSubscription {
		s.accessed.Store(now)
	}
	s.active.Store(now)
	for i, q := range []*subQueue{&s.main, &s.dlq, &s.tdlq} {
		q.st = s
		q.which = SubQueue(i)
		q.ready.kind = hReady
		q.locks.kind = hLock
		q.consumers = map[*Consumer]struct{}{}
	}
	s.expiry.kind = hExpiry
	s.sched.kind = hSched
	s.sessions = map[string]*session{}
	s.waiters = map[chan struct{}]struct{}{}
	return s
}

func (s *store) subQueue(w SubQueue) *subQueue {
	switch w {
	case SubQueueDeadLetter:
		return &s.dlq
	case SubQueueTransferDeadLetter:
		return &s.tdlq
	}
	return &s.main
}

func (s *store) lockDuration() time.Duration {
	if s.kind == KindQueue {
		return s.qp.LockDuration
	}
	return s.sp.LockDuration
}

func (s *store) maxDelivery() uint32 {
	if s.kind == KindQueue {
		return uint32(s.qp.MaxDeliveryCount)
	}
	return uint32(s.sp.MaxDeliveryCount)
}

func (s *store) dlOnExpiry() bool {
	if s.kind == KindQueue {
		return s.qp.DeadLetteringOnMessageExpiration
	}
	return s.sp.DeadLetteringOnMessageExpiration
}

func (s *store) status() EntityStatus {
	if s.kind == KindQueue {
		return s.qp.Status
	}
	return s.sp.Status
}

// defaultTTL is the smallest non-zero default TTL that applies (the topic's
// and the subscription's for subscriptions); 0 = never expires.
func (s *store) defaultTTL() time.Duration {
	if s.kind == KindQueue {
		return s.qp.DefaultMessageTimeToLive
	}
	return minTTL(s.sp.DefaultMessageTimeToLive, s.topicTTL)
}

func minTTL(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}

// sessionFor returns (creating) the session object for id.
func (s *store) sessionFor(id string) *session {
	ss := s.sessions[id]
	if ss == nil {
		ss = &session{id: id}
		ss.ready.kind = hReady
		s.sessions[id] = ss
	}
	return ss
}

// maybeDropSession forgets a session object that carries nothing.
func (s *store) maybeDropSession(ss *session) {
	if ss.msgs == 0 && ss.holder == nil && ss.state == nil && ss.updated == 0 && ss.ready.len() == 0 {
		delete(s.sessions, ss.id)
	}
}

func (s *store) wakeWaiters() {
	for w := range s.waiters {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// readyHeap is the heap a deliverable record of r's sub-queue waits in.
func (s *store) readyHeap(r *record) *recHeap {
	if r.sess != nil && r.sub == &s.main {
		return &r.sess.ready
	}
	return &r.sub.ready
}

// makeReady puts an active, unlocked record where consumers find it and
// notifies them.
func (s *store) makeReady(r *record) {
	s.readyHeap(r).push(r)
	if r.sess != nil && r.sub == &s.main {
		if h := r.sess.holder; h != nil {
			h.signal()
		} else {
			s.wakeWaiters()
		}
		return
	}
	r.sub.notifyAll()
}

// insert adds a new record to sub-queue q (main: Active or Scheduled).
func (s *store) insert(q *subQueue, r *record, sessionID *string, now int64) {
	r.sub = q
	q.index.insert(r)
	q.bytes += int64(r.size)
	if q == &s.main && sessionID != nil && s.session {
		r.sess = s.sessionFor(*sessionID)
		r.sess.msgs++
	}
	switch {
	case r.state == stateScheduled:
		s.sched.push(r)
		s.nSched++
	default:
		if q == &s.main && r.expires != 0 && r.state != stateDeferred {
			s.expiry.push(r)
		}
		if r.state == stateActive {
			s.makeReady(r)
		}
	}
}

// detach removes r from every structure of its sub-queue (not from the
// namespace lock table: callers unlock first).
func (s *store) detach(r *record) {
	q := r.sub
	q.index.remove(r)
	q.bytes -= int64(r.size)
	s.readyHeap(r).remove(r)
	q.locks.remove(r)
	s.expiry.remove(r)
	if s.sched.contains(r) {
		s.sched.remove(r)
		s.nSched--
	}
	if r.sess != nil && q == &s.main {
		r.sess.msgs--
		ss := r.sess
		r.sess = nil
		s.maybeDropSession(ss)
	}
}

// lock gives r a fresh lock token.
func (s *store) lock(r *record, now int64) {
	r.locked = true
	r.token = s.ns.newToken()
	r.lockedUntil = now + int64(s.lockDuration())
	// A locked message is not expired by the sweep: the holder decides.
	s.expiry.remove(r)
	r.sub.locks.push(r)
	s.ns.lockMu.Lock()
	s.ns.locks[r.token] = r
	s.ns.lockMu.Unlock()
}

// unlock drops r's lock (without putting it back anywhere).
func (s *store) unlock(r *record) {
	if !r.locked {
		return
	}
	r.locked = false
	r.sub.locks.remove(r)
	s.ns.lockMu.Lock()
	delete(s.ns.locks, r.token)
	s.ns.lockMu.Unlock()
	r.token = goamqp.UUID{}
	r.lockedUntil = 0
}

// requeue returns an unlocked record to circulation after a settlement that
// keeps it (abandon, release, defer, lock expiry). A deferred record is not
// subject to the TTL sweep: it expires only when fetched (ReceiveDeferred).
func (s *store) requeue(r *record, now int64) {
	if r.sub == &s.main && r.expires != 0 && r.state != stateDeferred {
		if r.expires <= now {
			s.expire(r, now)
			return
		}
		s.expiry.push(r)
	}
	if r.state == stateActive {
		s.makeReady(r)
	}
}

// remove deletes r from the store.
func (s *store) remove(r *record) {
	s.unlock(r)
	s.detach(r)
	r.sub = nil
}

// failDelivery counts a failed delivery (abandon, lock expiry, defer) and
// dead-letters at MaxDeliveryCount. It reports whether r was dead-lettered.
// Delivery counts are never incremented in a dead-letter queue.
func (s *store) failDelivery(r *record, now int64) bool {
	if r.sub != &s.main {
		return false
	}
	r.dc++
	if mdc := s.maxDelivery(); mdc > 0 && r.dc >= mdc {
		s.deadLetter(r, "MaxDeliveryCountExceeded",
			fmt.Sprintf("Message could not be consumed after %d delivery attempts.", mdc), nil, now)
		return true
	}
	return false
}

// deadLetter moves an unlocked main record to the DLQ, keeping its seq and
// delivery count, or, with ForwardDeadLetteredMessagesTo, queues it for
// forwarding with x-opt-deadletter-source set.
func (s *store) deadLetter(r *record, reason, desc string, props map[string]any, now int64) {
	if s.ns.log.Enabled(context.Background(), slog.LevelDebug) {
		s.ns.log.Debug("message dead-lettered", "entity", s.name, "sequence_number", r.seq, "reason", reason)
	}
	s.unlock(r)
	s.detach(r)
	r.msg = withProps(r.msg, props, map[string]any{"DeadLetterReason": reason, "DeadLetterErrorDescription": desc})
	r.state = stateActive
	r.expires = 0 // TTL is not enforced in the DLQ
	r.scheduledAt = 0
	if to := s.forwardDLQTo(); to != "" {
		r.sub = nil
		r.msg = withAnnotation(r.msg, annDeadLetterSource, s.name)
		s.queueForward(r, to, true)
		return
	}
	s.insert(&s.dlq, r, nil, now)
}

// expire handles a message whose TTL passed: dead-letter or drop.
func (s *store) expire(r *record, now int64) {
	if s.dlOnExpiry() {
		s.deadLetter(r, "TTLExpiredException", "The message expired and was dead lettered.", nil, now)
		return
	}
	s.remove(r)
}

// expireLock is a lock expiry: an abandon without properties.
func (s *store) expireLock(r *record, now int64) {
	s.unlock(r)
	if s.failDelivery(r, now) {
		return
	}
	s.requeue(r, now)
}

// activate turns a due scheduled record into an active one. Azure appends
// it as if it were enqueued at that moment, with a new sequence number (the
// scheduled number is valid only while it is scheduled, so one number never
// names two states): it takes the queue's next number and its due time as
// enqueued time.
func (s *store) activate(r *record, now int64) {
	s.sched.remove(r)
	s.nSched--
	// Only queues hold scheduled records: a topic keeps its own until they
	// are due (topic.activateDue numbers them), so subscriptions get none.
	if s.kind == KindQueue {
		r.sub.index.remove(r)
		s.in.seq++
		r.seq = s.in.seq
		r.sub.index.insert(r)
	}
	r.state = stateActive
	r.enqueued = r.scheduledAt / int64(time.Millisecond)
	s.touch(r.scheduledAt) // a message arrived then, as by a send
	r.expires = expiresAt(r.msg, s.defaultTTL(), r.scheduledAt)
	if r.expires != 0 {
		if r.expires <= now {
			s.expire(r, now)
			return
		}
		s.expiry.push(r)
	}
	if to := s.forwardTo(); to != "" {
		s.remove(r)
		s.queueForward(r, to, false)
		return
	}
	s.makeReady(r)
}

func (s *store) activateDue(now int64) {
	for {
		r := s.sched.top()
		if r == nil || r.scheduledAt > now {
			return
		}
		s.activate(r, now)
	}
}

// expireSession ends a session lock that ran out: the holder is done with
// ErrSessionLockLost and every message lock of the session is lost.
func (s *store) expireSession(ss *session, now int64) {
	if ss.holder != nil {
		ss.holder.finishLocked(fmt.Errorf("session %q of %s: %w", ss.id, s.name, ErrSessionLockLost))
	}
	ss.holder = nil
	ss.until = 0
	var lost []*record
	for _, r := range s.main.locks.items {
		if r.sess == ss {
			lost = append(lost, r)
		}
	}
	for _, r := range lost {
		s.expireLock(r, now)
	}
	if ss.ready.len() > 0 {
		s.wakeWaiters()
	}
	s.maybeDropSession(ss)
}

// expireDueLocks expires the locks of q whose time has come.
func (s *store) expireDueLocks(q *subQueue, now int64) {
	for {
		r := q.locks.top()
		if r == nil || r.lockedUntil > now {
			return
		}
		s.expireLock(r, now)
	}
}

// tick does the timed work of one store. Caller holds s.mu.
func (s *store) tick(now int64) {
	for _, q := range []*subQueue{&s.main, &s.dlq, &s.tdlq} {
		s.expireDueLocks(q, now)
	}
	if s.session {
		var lost []*session
		for _, ss := range s.sessions {
			if ss.holder != nil && ss.until <= now {
				lost = append(lost, ss)
			}
		}
		for _, ss := range lost {
			s.expireSession(ss, now)
		}
	}
	s.activateDue(now)
	for {
		r := s.expiry.top()
		if r == nil || r.expires > now {
			break
		}
		s.expire(r, now)
	}
	if s.kind == KindQueue {
		s.in.prune(now, s.qp.DuplicateDetectionHistoryTimeWindow)
	}
}

// checkLock validates a lock token under s.mu, applying lazily any expiry
// the next Tick would apply, so settlement and expiry cannot both win.
func (s *store) checkLock(r *record, token goamqp.UUID, now int64) error {
	if s.deleted || !r.locked || r.token != token || r.sub == nil {
		return fmt.Errorf("lock %s: %w", uuidString(token), ErrLockLost)
	}
	if ss := r.sess; ss != nil && ss.holder != nil && ss.until <= now {
		s.expireSession(ss, now)
		return fmt.Errorf("lock %s: session lock expired: %w", uuidString(token), ErrLockLost)
	}
	if r.lockedUntil <= now {
		s.expireLock(r, now)
		return fmt.Errorf("lock %s: expired: %w", uuidString(token), ErrLockLost)
	}
	return nil
}

// counts returns the store's counters. Caller holds s.mu.
func (s *store) counts() Counts {
	c := Counts{
		Active:             int64(s.main.index.n) - s.nSched,
		Scheduled:          s.nSched,
		DeadLetter:         int64(s.dlq.index.n),
		TransferDeadLetter: int64(s.tdlq.index.n),
		Transfer:           s.nTransfer,
		SizeInBytes:        s.main.bytes + s.dlq.bytes + s.tdlq.bytes,
	}
	c.Total = c.Active + c.Scheduled + c.DeadLetter + c.TransferDeadLetter + c.Transfer
	return c
}

// destroy marks the store deleted, ends its consumers and drops its locks.
// Caller holds s.mu.
func (s *store) destroy() {
	s.deleted = true
	err := fmt.Errorf("%s: %w", s.name, ErrEntityDeleted)
	for _, q := range []*subQueue{&s.main, &s.dlq, &s.tdlq} {
		for c := range q.consumers {
			c.finishLocked(err)
		}
		s.ns.lockMu.Lock()
		for _, r := range q.locks.items {
			delete(s.ns.locks, r.token)
		}
		s.ns.lockMu.Unlock()
	}
	s.wakeWaiters()
}

func uuidString(u goamqp.UUID) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// topic is a topic: an ingress, its scheduled messages and its
// subscriptions.
type topic struct {
	ns      *Namespace
	name    string
	mu      sync.Mutex
	props   TopicProperties
	in      ingress
	subs    map[string]*store // lower-case subscription name
	deleted bool

	// Scheduled messages stay in the topic until they are due and are fanned
	// out then (Azure: they "do not materialize" before their time), so
	// rules are evaluated at activation and subscriptions never show them
	// early. Their records belong to no store (st == nil).
	sched      recHeap           // by due time
	schedBySeq map[int64]*record // by scheduled sequence number (cancel)
	schedBytes int64
	// nextDue is the due time (unix ns) of the earliest scheduled message, 0
	// when there is none; written under mu, read without it so consumers of
	// the subscriptions check cheaply whether activation is due.
	nextDue atomic.Int64

	created, updated int64
	accessed         atomic.Int64
	active           atomic.Int64 // last activity (unix ns), for AutoDeleteOnIdle (idle.go)
}

func newTopic(ns *Namespace, name string, p TopicProperties, now int64) *topic {
	t := &topic{ns: ns, name: name, props: p, subs: map[string]*store{}, schedBySeq: map[int64]*record{}, created: now, updated: now}
	t.sched.kind = hSched
	// AccessedAt stays "never" until the first send or schedule.
	t.active.Store(now)
	return t
}

func (t *topic) dupWindow() time.Duration { return t.props.DuplicateDetectionHistoryTimeWindow }

// schedule holds m in the topic until at. Caller holds t.mu.
func (t *topic) schedule(m *goamqp.Message, seq int64, at time.Time, size int32) {
	r := newRecord(nil, m, seq, size)
	r.state = stateScheduled
	r.scheduledAt = dueNano(at)
	r.enqueued = at.UnixMilli()
	t.sched.push(r)
	t.schedBySeq[seq] = r
	t.schedBytes += int64(size)
	t.nextDue.Store(t.sched.top().scheduledAt)
}

// unschedule drops a scheduled message. Caller holds t.mu.
func (t *topic) unschedule(r *record) {
	t.sched.remove(r)
	delete(t.schedBySeq, r.seq)
	t.schedBytes -= int64(r.size)
	if top := t.sched.top(); top != nil {
		t.nextDue.Store(top.scheduledAt)
	} else {
		t.nextDue.Store(0)
	}
}

// activateDue fans out every scheduled message whose time has come, each
// under the topic's next sequence number and enqueued at its due time (as
// a queue's scheduled messages are). Subscriptions that now forward are
// added to flush. Caller holds t.mu.
func (t *topic) activateDue(now int64, flush *[]*store) {
	for {
		r := t.sched.top()
		if r == nil || r.scheduledAt > now {
			return
		}
		t.unschedule(r)
		if t.deleted {
			continue
		}
		touch(&t.active, r.scheduledAt) // a message arrived then, as by a send
		t.in.seq++
		t.fanOut(r.msg, t.in.seq, r.size, r.scheduledAt, nil, flush)
	}
}

// activateIfDue runs activateDue when a scheduled message is due, so that
// a subscription's consumer or peek sees it without waiting for a tick.
// Caller holds no store or topic lock.
func (t *topic) activateIfDue(now int64) {
	if d := t.nextDue.Load(); d == 0 || d > now {
		return
	}
	var flush []*store
	t.mu.Lock()
	t.activateDue(now, &flush)
	t.mu.Unlock()
	for _, s := range flush {
		s.flush()
	}
}
