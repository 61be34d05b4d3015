package broker

import (
	"strings"
	"time"
)

type busyFault struct {
	remaining int
	until     int64 // unix ns; 0 = none
}

// faultKey maps an entity name or path to the canonical lower-case name.
func (ns *Namespace) faultKey(entity string) string {
	if a, err := ns.Resolve(entity); err == nil {
		return strings.ToLower(a.Entity)
	}
	return strings.ToLower(strings.TrimPrefix(entity, "/"))
}

// InjectServerBusy makes the next ops operations on entity (canonical name
// or path) fail with ErrServerBusy, and every operation until `until` (if
// not zero). Operations: Send, Schedule, CancelScheduled, NewConsumer, Peek,
// ReceiveDeferred. Settlement by lock token is not affected.
func (ns *Namespace) InjectServerBusy(entity string, ops int, until time.Time) {
	f := &busyFault{remaining: max(ops, 0)}
	if !until.IsZero() {
		f.until = until.UnixNano()
	}
	key := ns.faultKey(entity)
	ns.faultMu.Lock()
	defer ns.faultMu.Unlock()
	ns.faults[key] = f
	ns.nFaults.Store(int32(len(ns.faults)))
}

// busy consumes one faulted operation on entity, if any.
func (ns *Namespace) busy(entity string) error {
	if ns.nFaults.Load() == 0 {
		return nil
	}
	key := strings.ToLower(entity)
	ns.faultMu.Lock()
	defer ns.faultMu.Unlock()
	f := ns.faults[key]
	if f == nil {
		return nil
	}
	if f.remaining > 0 {
		f.remaining--
		return errBusy(entity)
	}
	if f.until != 0 && ns.nowNano() < f.until {
		return errBusy(entity)
	}
	delete(ns.faults, key)
	ns.nFaults.Store(int32(len(ns.faults)))
	return nil
}

func errBusy(entity string) error {
	return &busyError{entity}
}

type busyError struct{ entity string }

func (e *busyError) Error() string { return e.entity + ": injected fault: " + ErrServerBusy.Error() }
func (e *busyError) Unwrap() error { return ErrServerBusy }

// ExpireLocks makes every message lock held on entity (a queue, a
// subscription or, for a topic, all its subscriptions; any sub-queue) expire
// now, exactly as if its time ran out.
func (ns *Namespace) ExpireLocks(entity string) {
	_, s, t, err := ns.resolve(entity)
	if err != nil {
		return
	}
	var stores []*store
	if s != nil {
		stores = []*store{s}
	} else {
		t.mu.Lock()
		for _, s := range t.subs {
			stores = append(stores, s)
		}
		t.mu.Unlock()
	}
	now := ns.nowNano()
	for _, s := range stores {
		s.mu.Lock()
		if !s.deleted {
			for _, q := range []*subQueue{&s.main, &s.dlq, &s.tdlq} {
				for q.locks.len() > 0 {
					s.expireLock(q.locks.top(), now)
				}
			}
		}
		s.unlockFlush()
	}
}

// ClearFaults removes every injected server-busy fault.
func (ns *Namespace) ClearFaults() {
	ns.faultMu.Lock()
	defer ns.faultMu.Unlock()
	clear(ns.faults)
	ns.nFaults.Store(0)
}

// dropFaults forgets the faults of a deleted entity (name, lower case) and,
// for a topic, of its subscriptions, so that an entity created again under
// the same name starts healthy.
func (ns *Namespace) dropFaults(name string) {
	if ns.nFaults.Load() == 0 {
		return
	}
	ns.faultMu.Lock()
	defer ns.faultMu.Unlock()
	for key := range ns.faults {
		if key == name || strings.HasPrefix(key, name+"/subscriptions/") {
			delete(ns.faults, key)
		}
	}
	ns.nFaults.Store(int32(len(ns.faults)))
}
