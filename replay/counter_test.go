package replay_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/replay"
)

// storeCounter counts the engine's store and audit calls (each one
// transaction), the time they took and the item updates they carry: what
// a batch costs in writes, whatever the machine's load.
type storeCounter struct {
	mu    sync.Mutex
	calls map[string]int
	took  map[string]time.Duration
	rows  int // item updates passed to UpdateItems
}

// count counts a call that started at start.
func (c *storeCounter) count(name string, rows int, start time.Time) {
	d := time.Since(start)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls, c.took = map[string]int{}, map[string]time.Duration{}
	}
	c.calls[name]++
	c.took[name] += d
	c.rows += rows
}

// reset forgets what was counted so far.
func (c *storeCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls, c.took, c.rows = nil, nil, 0
}

// total is the number of calls counted, and a line naming each.
func (c *storeCounter) total() (int, int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c.calls)) {
		n += c.calls[k]
		parts = append(parts, fmt.Sprintf("%s %d in %s", k, c.calls[k], c.took[k].Round(time.Millisecond)))
	}
	return n, c.rows, strings.Join(parts, ", ")
}

func (c *storeCounter) wrap(st replay.Store, au replay.Auditor) (replay.Store, replay.Auditor) {
	return &countingStore{Store: st, c: c}, &countingAuditor{Auditor: au, c: c}
}

type countingAuditor struct {
	replay.Auditor
	c *storeCounter
}

func (a *countingAuditor) Append(ctx context.Context, r audit.Record) (audit.Entry, error) {
	defer a.c.count("audit.Append", 0, time.Now())
	return a.Auditor.Append(ctx, r)
}

// countingStore counts the writes (and the job reads) of the engine.
type countingStore struct {
	replay.Store
	c *storeCounter
}

func (s *countingStore) UpdateItems(ctx context.Context, jobID int64, ups []replay.Update) (replay.Job, error) {
	defer s.c.count("UpdateItems", len(ups), time.Now())
	return s.Store.UpdateItems(ctx, jobID, ups)
}

func (s *countingStore) SetStatus(ctx context.Context, jobID int64, st replay.Status, reason string, from ...replay.Status) (replay.Job, error) {
	defer s.c.count("SetStatus", 0, time.Now())
	return s.Store.SetStatus(ctx, jobID, st, reason, from...)
}

func (s *countingStore) CancelUnsent(ctx context.Context, jobID int64) (replay.Job, error) {
	defer s.c.count("CancelUnsent", 0, time.Now())
	return s.Store.CancelUnsent(ctx, jobID)
}

func (s *countingStore) SetRetrying(ctx context.Context, jobID int64, rs *replay.Retrying) (replay.Job, error) {
	defer s.c.count("SetRetrying", 0, time.Now())
	return s.Store.SetRetrying(ctx, jobID, rs)
}

func (s *countingStore) SetCanary(ctx context.Context, jobID int64, verdict string, sentBase, back int) (replay.Job, error) {
	defer s.c.count("SetCanary", 0, time.Now())
	return s.Store.SetCanary(ctx, jobID, verdict, sentBase, back)
}

func (s *countingStore) Job(ctx context.Context, id int64) (replay.Job, error) {
	defer s.c.count("Job", 0, time.Now())
	return s.Store.Job(ctx, id)
}
