package replay

import (
	"context"
	"slices"
	"time"
)

// release gives back the messages the work on a source still holds locked,
// when it ends: without it they would stay invisible to everyone (the next
// job on the same queue too) for the rest of their lock duration. Service Bus
// counts an abandon as a delivery, so their delivery count goes up by one.
//
// At most maxRelease are given back (those locked longest): each is a
// broker operation, and after a long scan most of the locks lapse soon
// anyway; the rest lapse on their own.
func (r *run) release(ctx context.Context, s *source) {
	now := r.e.now()
	var held []*Received
	for _, m := range s.held {
		if m.LockedUntil.After(now) {
			held = append(held, m)
		}
	}
	if len(held) == 0 {
		return
	}
	if len(held) > maxRelease {
		slices.SortFunc(held, func(a, b *Received) int { return b.LockedUntil.Compare(a.LockedUntil) })
		held = held[:maxRelease]
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := s.recv.Release(ctx, held)
	r.e.log.Debug("replay: released held messages", "job_id", r.job.ID, "entity", s.key.entity, "subqueue", string(s.key.q),
		"held", len(held), "error", err)
}

// maxRelease bounds the messages given back when the work on a queue ends.
const maxRelease = 1000
