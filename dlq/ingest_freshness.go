package dlq

import (
	"context"
	"errors"
	"time"
)

// backoff is the wait after n consecutive failures: doubling from the poll
// interval up to MaxBackoff, never shorter than a throttled broker asked.
func (in *Ingester) backoff(n int, err error) time.Duration {
	d := in.cfg.Poll << min(n, 16)
	d = min(d, in.cfg.MaxBackoff)
	var te *ThrottledError
	if errors.As(err, &te) && te.RetryAfter > d {
		d = te.RetryAfter
	}
	return d
}

func (in *Ingester) fail(ctx context.Context, err error) {
	now := in.cfg.Now().UTC()
	in.mu.Lock()
	changed := in.status.Healthy || in.status.Error != err.Error()
	if in.status.Healthy || in.status.ErrorSince == nil {
		in.status.ErrorSince = &now
	}
	in.status.Healthy = false
	in.status.Error = err.Error()
	st := in.status
	in.mu.Unlock()
	if changed {
		in.cfg.Publish(Change{Kind: ChangeFreshness, Status: &st, At: now})
	}
}

// succeed records a successful read at now, the time SyncEntities stored.
func (in *Ingester) succeed(now time.Time) {
	now = now.UTC()
	in.mu.Lock()
	changed := !in.status.Healthy
	in.status.Healthy = true
	in.status.Error = ""
	in.status.ErrorSince = nil
	in.status.LastSuccessAt = &now
	st := in.status
	in.mu.Unlock()
	if changed {
		in.cfg.Publish(Change{Kind: ChangeFreshness, Status: &st, At: now})
	}
}
