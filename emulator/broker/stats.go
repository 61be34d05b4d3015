package broker

import (
	"maps"
	"strings"
	"sync"
	"sync/atomic"
)

// Op is a kind of operation counted in the namespace's operation
// statistics. The broker itself counts nothing: the front ends that serve
// clients (the AMQP server, the admin HTTP API) report what they serve, and
// the namespace is where they meet.
type Op uint8

const (
	OpPeek           Op = iota // $management peek requests
	OpPeekedMessages           // messages returned by those peeks
	OpReceive                  // messages delivered on receive links or by receive-by-sequence-number
	OpSend                     // messages accepted (send links, schedule-message)
	OpSettle                   // completes, abandons, defers and dead-letters, by disposition or $management
	OpManagement               // $management requests, of every operation
	OpAdmin                    // admin HTTP requests
	numOps
)

// mgmtOps indexes the per-operation $management counters.
const (
	mgmtPeekMessage = iota
	mgmtReceiveBySequenceNumber
	mgmtRenewLock
	mgmtUpdateDisposition
	mgmtScheduleMessage
	mgmtCancelScheduledMessage
	mgmtRenewSessionLock
	mgmtGetSessionState
	mgmtSetSessionState
	mgmtGetMessageSessions
	mgmtOther
	numMgmtOps
)

func mgmtIndex(op string) int {
	switch strings.TrimPrefix(op, "com.microsoft:") {
	case "peek-message":
		return mgmtPeekMessage
	case "receive-by-sequence-number":
		return mgmtReceiveBySequenceNumber
	case "renew-lock":
		return mgmtRenewLock
	case "update-disposition":
		return mgmtUpdateDisposition
	case "schedule-message":
		return mgmtScheduleMessage
	case "cancel-scheduled-message":
		return mgmtCancelScheduledMessage
	case "renew-session-lock":
		return mgmtRenewSessionLock
	case "get-session-state":
		return mgmtGetSessionState
	case "set-session-state":
		return mgmtSetSessionState
	case "get-message-sessions":
		return mgmtGetMessageSessions
	}
	return mgmtOther
}

// ManagementOpCounts counts $management requests by operation; the JSON
// names are the operation names without the "com.microsoft:" prefix.
type ManagementOpCounts struct {
	PeekMessage             int64 `json:"peek-message"`
	ReceiveBySequenceNumber int64 `json:"receive-by-sequence-number"`
	RenewLock               int64 `json:"renew-lock"`
	UpdateDisposition       int64 `json:"update-disposition"`
	ScheduleMessage         int64 `json:"schedule-message"`
	CancelScheduledMessage  int64 `json:"cancel-scheduled-message"`
	RenewSessionLock        int64 `json:"renew-session-lock"`
	GetSessionState         int64 `json:"get-session-state"`
	SetSessionState         int64 `json:"set-session-state"`
	GetMessageSessions      int64 `json:"get-message-sessions"`
	Other                   int64 `json:"other"` // any other operation
}

func (m *ManagementOpCounts) set(c *[numMgmtOps]atomic.Int64) {
	*m = ManagementOpCounts{
		PeekMessage:             c[mgmtPeekMessage].Load(),
		ReceiveBySequenceNumber: c[mgmtReceiveBySequenceNumber].Load(),
		RenewLock:               c[mgmtRenewLock].Load(),
		UpdateDisposition:       c[mgmtUpdateDisposition].Load(),
		ScheduleMessage:         c[mgmtScheduleMessage].Load(),
		CancelScheduledMessage:  c[mgmtCancelScheduledMessage].Load(),
		RenewSessionLock:        c[mgmtRenewSessionLock].Load(),
		GetSessionState:         c[mgmtGetSessionState].Load(),
		SetSessionState:         c[mgmtSetSessionState].Load(),
		GetMessageSessions:      c[mgmtGetMessageSessions].Load(),
		Other:                   c[mgmtOther].Load(),
	}
}

// maxStatsEntities bounds the entities tracked (paths come from clients);
// past it operations are still counted in the totals.
const maxStatsEntities = 10000

// OpCounts are operation counters, for the whole namespace or one entity.
// The JSON names are those of the admin endpoint GET /$emulator/stats.
type OpCounts struct {
	Peek           int64 `json:"peek"`
	PeekedMessages int64 `json:"peeked_messages"`
	Receive        int64 `json:"receive"`
	Send           int64 `json:"send"`
	Settle         int64 `json:"settle"`
	Management     int64 `json:"management"`
	Admin          int64 `json:"admin"`
	// ManagementOps splits Management by operation.
	ManagementOps ManagementOpCounts `json:"management_ops"`
}

// Stats is a snapshot of the namespace's operation statistics since it
// was created or ResetStats was last called.
type Stats struct {
	Totals OpCounts `json:"totals"`
	// Entities holds the counts per entity path as addressed, normalised by
	// StatsKey ("orders", "orders/$deadletterqueue",
	// "payments/subscriptions/audit/$deadletterqueue",
	// "orders/$transfer/$deadletterqueue"); entities with no operation
	// counted are absent.
	Entities map[string]OpCounts `json:"entities"`
}

// Entity returns the counts of one entity path, in any spelling StatsKey
// normalises (zero counts when none were recorded).
func (s Stats) Entity(path string) OpCounts { return s.Entities[StatsKey(path)] }

// StatsKey normalises an entity path for Stats.Entities: without leading
// or trailing slashes, lower-cased.
func StatsKey(path string) string { return strings.ToLower(strings.Trim(path, "/")) }

type opCounters struct {
	ops  [numOps]atomic.Int64
	mgmt [numMgmtOps]atomic.Int64
}

func newOpCounters() *opCounters { return new(opCounters) }

func (c *opCounters) snapshot() OpCounts {
	o := OpCounts{
		Peek:           c.ops[OpPeek].Load(),
		PeekedMessages: c.ops[OpPeekedMessages].Load(),
		Receive:        c.ops[OpReceive].Load(),
		Send:           c.ops[OpSend].Load(),
		Settle:         c.ops[OpSettle].Load(),
		Management:     c.ops[OpManagement].Load(),
		Admin:          c.ops[OpAdmin].Load(),
	}
	o.ManagementOps.set(&c.mgmt)
	return o
}

func (c *opCounters) reset() {
	for i := range c.ops {
		c.ops[i].Store(0)
	}
	for i := range c.mgmt {
		c.mgmt[i].Store(0)
	}
}

// opStats is the namespace's operation statistics. Counting costs a read
// lock, a map lookup by the path as given and an atomic add; only the first
// operation on a path spelling allocates.
type opStats struct {
	total  *opCounters
	mu     sync.RWMutex
	byPath map[string]*opCounters // path as given → its entity's counters
	byKey  map[string]*opCounters // StatsKey(path) → counters
}

func newOpStats() *opStats {
	return &opStats{total: newOpCounters(), byPath: map[string]*opCounters{}, byKey: map[string]*opCounters{}}
}

// entity returns the counters of path, creating them; nil for "" or when
// too many entities are tracked.
func (st *opStats) entity(path string) *opCounters {
	if path == "" {
		return nil
	}
	st.mu.RLock()
	c := st.byPath[path]
	st.mu.RUnlock()
	if c != nil {
		return c
	}
	key := StatsKey(path)
	if key == "" {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if c = st.byKey[key]; c == nil {
		if len(st.byKey) >= maxStatsEntities {
			return nil
		}
		c = newOpCounters()
		st.byKey[key] = c
	}
	if len(st.byPath) < 4*maxStatsEntities {
		st.byPath[path] = c
	}
	return c
}

// CountOp adds n operations of kind op on the entity at path (as the
// client addressed it; "" counts in the totals only).
func (ns *Namespace) CountOp(op Op, path string, n int64) {
	if op >= numOps || n <= 0 {
		return
	}
	ns.stats.total.ops[op].Add(n)
	if c := ns.stats.entity(path); c != nil {
		c.ops[op].Add(n)
	}
}

// CountManagement counts one $management request on the entity at path:
// as OpManagement and under its operation name.
func (ns *Namespace) CountManagement(path, operation string) {
	i := mgmtIndex(operation)
	ns.stats.total.ops[OpManagement].Add(1)
	ns.stats.total.mgmt[i].Add(1)
	if c := ns.stats.entity(path); c != nil {
		c.ops[OpManagement].Add(1)
		c.mgmt[i].Add(1)
	}
}

// Stats returns a snapshot of the operation statistics. Counters are read
// one by one, so a snapshot taken while operations run may be a moment
// apart across counters.
func (ns *Namespace) Stats() Stats {
	st := ns.stats
	out := Stats{Totals: st.total.snapshot(), Entities: map[string]OpCounts{}}
	st.mu.RLock()
	keys := maps.Clone(st.byKey)
	st.mu.RUnlock()
	for k, c := range keys {
		if o := c.snapshot(); o != (OpCounts{}) {
			out.Entities[k] = o
		}
	}
	return out
}

// ResetStats sets every operation counter to zero.
func (ns *Namespace) ResetStats() {
	st := ns.stats
	st.mu.Lock()
	defer st.mu.Unlock()
	st.total.reset()
	// Zeroed in place rather than forgotten: an operation that looked its
	// counters up just before the reset still lands somewhere visible.
	for _, c := range st.byKey {
		c.reset()
	}
}
