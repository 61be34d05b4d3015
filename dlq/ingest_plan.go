package dlq

import (
	"time"
)

type cursorKey struct {
	entity string
	q      SubQueue
}

// cursorState is a Cursor plus what only lives in memory.
type cursorState struct {
	Cursor
	pendingFull bool // counts did not reconcile: a full pass is due when allowed
	// removed counts messages this process removed from the subqueue (see
	// Removed) that the catalog still holds as present until a full pass.
	removed int64
}

// expected is how many messages the broker should hold by the catalog.
func (c *cursorState) expected() int64 { return max(c.Present-c.removed, 0) }

// Removed tells the ingester that this process (the replay engine) removed
// n messages from entity's subqueue q. Until a full pass marks them gone,
// it expects n fewer there, so that messages arriving meanwhile (a replayed
// copy dead-lettered again) still read as new instead of cancelling the
// removal out in the count; and a full pass is due as soon as it is allowed.
func (in *Ingester) Removed(entity string, q SubQueue, n int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	c := in.cursors[cursorKey{entity, q}]
	if c == nil || n <= 0 {
		return
	}
	c.removed += int64(n)
	c.pendingFull = true
}

// cursorLocked returns the cursor of (entity, q), creating an unread one.
func (in *Ingester) cursorLocked(entity string, q SubQueue) *cursorState {
	k := cursorKey{entity, q}
	c := in.cursors[k]
	if c == nil {
		c = &cursorState{Cursor: Cursor{Entity: entity, SubQueue: q, MaxSeen: -1, BrokerCount: -1}}
		in.cursors[k] = c
	}
	return c
}

func brokerCount(e Entity, q SubQueue) int64 {
	switch q {
	case SubQueueDeadLetter:
		return e.Counts.DeadLetter
	case SubQueueTransferDeadLetter:
		return e.Counts.TransferDeadLetter
	}
	// The main entity's pass is due when either count moved; one number
	// holds both (Service Bus counts are 32-bit), so that a message moving
	// from scheduled to active is a change too.
	return e.Counts.Active<<32 | e.Counts.Scheduled&0xffffffff
}

// fullAllowed is the duty-cycle bound on full passes (package doc).
func (in *Ingester) fullAllowed(c *cursorState, now time.Time) bool {
	if c.LastFullAt == nil {
		return true
	}
	return now.Sub(*c.LastFullAt) >= max(in.cfg.MinFullInterval, 4*c.FullDuration)
}

func (in *Ingester) sweepDue(c *cursorState, now time.Time) bool {
	return c.LastFullAt == nil || now.Sub(*c.LastFullAt) >= in.cfg.Sweep
}

func (in *Ingester) mainReadable(entity string) bool {
	s, ok := in.settings[entity]
	return !ok || !s.RequiresSession
}

// needsPassLocked reports whether any subqueue of e needs reading now.
func (in *Ingester) needsPassLocked(e Entity, now time.Time) bool {
	for _, q := range []SubQueue{SubQueueDeadLetter, SubQueueTransferDeadLetter} {
		if in.dlqPlan(in.cursorLocked(e.Path, q), brokerCount(e, q), now) != passNone {
			return true
		}
	}
	return in.mainReadable(e.Path) && in.mainDue(in.cursorLocked(e.Path, SubQueueMain), brokerCount(e, SubQueueMain), now)
}

type passKind int

const (
	passNone passKind = iota
	passTail          // after the highest number seen, then from the floor if counts disagree
	passFull          // from sequence number 0
)

func (in *Ingester) dlqPlan(c *cursorState, count int64, now time.Time) passKind {
	switch {
	case c.BrokerCount < 0:
		return passFull
	case (c.pendingFull || in.sweepDue(c, now)) && in.fullAllowed(c, now):
		return passFull
	case count > c.expected():
		// More on the broker than cataloged: new arrivals, at the tail or
		// (late dead letters) above the floor.
		return passTail
	case count < c.expected() && in.fullAllowed(c, now):
		// Fewer on the broker than cataloged: something left, and only a
		// full pass can tell what.
		return passFull
	case count < c.expected():
		c.pendingFull = true
	}
	return passNone
}

func (in *Ingester) mainDue(c *cursorState, count int64, now time.Time) bool {
	if c.BrokerCount < 0 {
		return true
	}
	if c.LastPassAt != nil && now.Sub(*c.LastPassAt) < in.cfg.MainInterval {
		return false
	}
	if !in.fullAllowed(c, now) {
		return false
	}
	return count != c.BrokerCount || c.pendingFull || in.sweepDue(c, now)
}
