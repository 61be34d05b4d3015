package broker

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

// Options configure a Namespace.
type Options struct {
	Now    func() time.Time // default time.Now
	Logger *slog.Logger     // default: discard
}

// Namespace is an in-memory Service Bus namespace: queues, topics,
// subscriptions, rules and their messages. It is safe for concurrent use.
//
// Lock order: ns.mu → topic.mu → store.mu → ns.lockMu; ns.faultMu,
// ns.nameMu and the statistics' mutex are leaves.
type Namespace struct {
	now func() time.Time
	log *slog.Logger

	nameMu sync.Mutex
	name   string

	mu     sync.RWMutex
	queues map[string]*store // lower-case name → queue
	topics map[string]*topic // lower-case name → topic

	// Message locks are namespace-wide: settlement arrives by token alone,
	// from any link or from $management.
	lockMu sync.Mutex
	locks  map[goamqp.UUID]*record

	tokPrefix [8]byte
	tokCtr    atomic.Uint64

	faultMu sync.Mutex
	faults  map[string]*busyFault
	nFaults atomic.Int32

	stats *opStats // operation statistics (stats.go); its mutex is a leaf
}

// New returns an empty namespace named "sbemulatorns".
func New(opts Options) *Namespace {
	ns := &Namespace{
		now:    opts.Now,
		log:    opts.Logger,
		name:   "sbemulatorns",
		queues: map[string]*store{},
		topics: map[string]*topic{},
		locks:  map[goamqp.UUID]*record{},
		faults: map[string]*busyFault{},
		stats:  newOpStats(),
	}
	if ns.now == nil {
		ns.now = time.Now
	}
	if ns.log == nil {
		ns.log = slog.New(slog.DiscardHandler)
	}
	_, _ = rand.Read(ns.tokPrefix[:])
	return ns
}

// Name returns the namespace name.
func (ns *Namespace) Name() string {
	ns.nameMu.Lock()
	defer ns.nameMu.Unlock()
	return ns.name
}

// SetName renames the namespace.
func (ns *Namespace) SetName(name string) {
	ns.nameMu.Lock()
	defer ns.nameMu.Unlock()
	ns.name = name
}

func (ns *Namespace) nowNano() int64 { return ns.now().UnixNano() }

// newToken returns a fresh lock token: a random per-namespace prefix and a
// counter, shaped as a version-4 UUID. Tokens are unique, not secret.
func (ns *Namespace) newToken() goamqp.UUID {
	var u goamqp.UUID
	copy(u[:8], ns.tokPrefix[:])
	c := ns.tokCtr.Add(1)
	for i := 0; i < 8; i++ {
		u[15-i] = byte(c >> (8 * i))
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// Run calls Tick every interval until ctx is done.
func (ns *Namespace) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			ns.Tick()
		}
	}
}

// Tick does the timed work: message lock expiry, session lock expiry,
// scheduled activation (queues and topics), deletion of entities idle for
// their AutoDeleteOnIdle, the TTL sweep and pruning of duplicate-detection
// history. Consumers that may now receive something are notified.
func (ns *Namespace) Tick() {
	now := ns.nowNano()
	ns.mu.RLock()
	stores := make([]*store, 0, len(ns.queues))
	for _, q := range ns.queues {
		stores = append(stores, q)
	}
	topics := make([]*topic, 0, len(ns.topics))
	for _, t := range ns.topics {
		topics = append(topics, t)
	}
	ns.mu.RUnlock()
	var flush []*store
	var idleTopics []*topic
	for _, t := range topics {
		t.mu.Lock()
		t.in.prune(now, t.dupWindow())
		t.activateDue(now, &flush)
		for _, s := range t.subs {
			stores = append(stores, s)
		}
		if t.idle(now) {
			idleTopics = append(idleTopics, t)
		}
		t.mu.Unlock()
	}
	for _, s := range flush {
		s.flush()
	}
	var idleStores []*store
	for _, s := range stores {
		s.mu.Lock()
		if !s.deleted {
			s.tick(now)
			if s.idle(now) {
				idleStores = append(idleStores, s)
			}
		}
		s.unlockFlush()
	}
	if len(idleTopics)+len(idleStores) > 0 {
		ns.deleteIdle(now, idleStores, idleTopics)
	}
}

// Resolve parses an entity path (case-insensitive): "q", "q/$DeadLetterQueue",
// "q/$Transfer/$DeadLetterQueue", "t", "t/Subscriptions/s" and the
// subscription's dead-letter paths. Callers strip "/$management".
func (ns *Namespace) Resolve(path string) (Address, error) {
	a, _, _, err := ns.resolve(path)
	return a, err
}

// resolve returns the address plus the queue or subscription store, or the topic.
func (ns *Namespace) resolve(path string) (Address, *store, *topic, error) {
	p := strings.TrimPrefix(path, "/")
	sq := SubQueueMain
	lp := strings.ToLower(p)
	switch {
	case strings.HasSuffix(lp, "/$transfer/$deadletterqueue"):
		sq = SubQueueTransferDeadLetter
		lp = lp[:len(lp)-len("/$transfer/$deadletterqueue")]
	case strings.HasSuffix(lp, "/$deadletterqueue"):
		sq = SubQueueDeadLetter
		lp = lp[:len(lp)-len("/$deadletterqueue")]
	}
	ns.mu.RLock()
	defer ns.mu.RUnlock()
	if q, ok := ns.queues[lp]; ok {
		return Address{Kind: KindQueue, Entity: q.name, SubQueue: sq}, q, nil, nil
	}
	if i := strings.LastIndex(lp, "/subscriptions/"); i > 0 {
		if t, ok := ns.topics[lp[:i]]; ok {
			t.mu.Lock()
			s, ok := t.subs[lp[i+len("/subscriptions/"):]]
			t.mu.Unlock()
			if ok {
				return Address{Kind: KindSubscription, Entity: s.name, Topic: t.name, Subscription: s.subName, SubQueue: sq}, s, nil, nil
			}
		}
	}
	if t, ok := ns.topics[lp]; ok && sq == SubQueueMain {
		return Address{Kind: KindTopic, Entity: t.name, Topic: t.name}, nil, t, nil
	}
	return Address{}, nil, nil, fmt.Errorf("resolve %q: %w", path, ErrNotFound)
}

// receivable resolves a path that must name a queue or subscription
// (any sub-queue) and returns its store and sub-queue.
func (ns *Namespace) receivable(path string) (*store, *subQueue, Address, error) {
	a, s, _, err := ns.resolve(path)
	if err != nil {
		return nil, nil, a, err
	}
	if s == nil {
		return nil, nil, a, fmt.Errorf("%q is a topic: %w", path, ErrNotAllowed)
	}
	return s, s.subQueue(a.SubQueue), a, nil
}
