package replay

import (
	"context"
	"math"
	"time"

	"golang.org/x/time/rate"
)

// newLimiter is the rate limiter of a job paced at perSecond messages a
// second, nil for an unpaced one: its bucket holds a second's worth, at
// most one batch.
func newLimiter(perSecond float64, batch int) *rate.Limiter {
	if perSecond <= 0 {
		return nil
	}
	burst := max(1, min(int(math.Ceil(perSecond)), batch))
	return rate.NewLimiter(rate.Limit(perSecond), burst)
}

// pace takes, from the start of toSend, as many messages as the job's rate
// lets go before their locks run short, and waits until the last of them
// may go. An unpaced job takes them all at once; none may be taken.
func (r *run) pace(ctx context.Context, s *source, toSend []match) ([]match, error) {
	if r.limiter == nil {
		return toSend, nil
	}
	now := r.e.now()
	r.ramp(now)
	var wait time.Duration
	var taken []*rate.Reservation
	for _, mt := range toSend {
		res := r.limiter.ReserveN(now, 1)
		if !res.OK() || now.Add(res.DelayFrom(now)).After(mt.m.LockedUntil.Add(-s.margin)) {
			res.CancelAt(now)
			break
		}
		wait = res.DelayFrom(now)
		taken = append(taken, res)
	}
	n := len(taken)
	toSend = toSend[:n]
	if n == 0 || wait <= 0 {
		return toSend, nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return toSend, nil
	case <-r.stop:
		// Stopped while waiting for the rate: nothing is sent, and the
		// tokens go back to the bucket.
		for i := len(taken) - 1; i >= 0; i-- {
			taken[i].Cancel()
		}
		return nil, errStopped
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
