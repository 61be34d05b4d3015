package web

import (
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// batch is the changes gathered in one coalescing window.
type batch struct {
	any      bool
	resync   bool
	jobs     bool            // PublishJob was called
	status   *dlq.Status     // the latest freshness
	counts   map[string]bool // entities whose counts row changed
	entities bool            // entities were added or deleted
	newIDs   []int64
	changed  map[int64]bool // gone or updated: rows to re-render
	groups   bool           // group counters changed
	waiting  bool           // deferred or scheduled messages changed
}

func (b *batch) add(c dlq.Change) {
	b.any = true
	if b.counts == nil {
		b.counts, b.changed = map[string]bool{}, map[int64]bool{}
	}
	switch c.Kind {
	case dlq.ChangeFreshness:
		b.status = c.Status
	case dlq.ChangeCounts:
		b.counts[c.Entity] = true
	case dlq.ChangeEntities:
		b.entities = true
	case dlq.ChangeGroups:
		b.groups = true
	case dlq.ChangeNew:
		b.newIDs = append(b.newIDs, c.IDs...)
		b.groups = true
	case dlq.ChangeGone, dlq.ChangeUpdated:
		for _, id := range c.IDs {
			b.changed[id] = true
		}
		b.groups = b.groups || c.Kind == dlq.ChangeGone
	}
	if c.SubQueue == dlq.SubQueueMain && c.Entity != "" {
		// The overview's deferred column comes from the catalog, which
		// these changes move; so does the inventory.
		b.counts[c.Entity] = true
		b.waiting = true
	}
}

// throttle lets an update through at most once per every.
type throttle struct {
	every time.Duration
	last  time.Time
	due   bool
}

// ready reports whether a due update may go now, and marks it sent.
func (t *throttle) ready(now time.Time) bool {
	if !t.due || now.Sub(t.last) < t.every {
		return false
	}
	t.due, t.last = false, now
	return true
}
