package dlq

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// How the ingester's freshness is kept.
//
// The poll loop records what happened: a read that succeeded (succeed), a
// read that failed (fail), and whether one of its broker reads is in flight
// (brokerRead). Status is computed from that at the time it is asked for: a
// broker that stops answering (a frozen process, a black-holed network)
// makes no read fail for as long as the read waits, so the status cannot
// wait for a failure. Once no read has succeeded for Config.Stale (default
// max(3 × Poll, 5 s)), Status reports unhealthy with an error in words, and
// a timer (watchFreshness) publishes the change, and publishes again
// whenever its words change while it stays stale.

// notAnswering is the cause given while a broker read is waiting for an
// answer and no read has failed yet.
const notAnswering = "the broker is not answering"

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

// brokerRead runs one broker read of the poll loop (the entity listing, the
// settings listing) under the poll deadline, marked in flight while it
// waits. A read its deadline ended says so in words.
func (in *Ingester) brokerRead(ctx context.Context, what string, f func(context.Context) error) error {
	rctx, cancel := context.WithTimeout(ctx, in.cfg.PollTimeout)
	defer cancel()
	now := in.cfg.Now().UTC()
	in.mu.Lock()
	in.waiting = true
	if in.attemptAt == nil {
		in.attemptAt = &now
	}
	in.mu.Unlock()
	err := f(rctx)
	in.mu.Lock()
	in.waiting = false
	in.mu.Unlock()
	if err == nil {
		return nil
	}
	if ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: %s: no answer within the poll's deadline of %s: %w", what, notAnswering, words(in.cfg.PollTimeout), err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (in *Ingester) fail(err error) {
	now := in.cfg.Now().UTC()
	in.mu.Lock()
	if in.status.Healthy || in.status.ErrorSince == nil {
		in.status.ErrorSince = &now
	}
	in.status.Healthy = false
	in.status.Error = err.Error()
	in.mu.Unlock()
	in.publishFreshness()
}

// succeed records a successful read at now, the time SyncEntities stored.
func (in *Ingester) succeed(now time.Time) {
	now = now.UTC()
	in.mu.Lock()
	in.status.Healthy = true
	in.status.Error = ""
	in.status.ErrorSince = nil
	in.status.LastSuccessAt = &now
	in.attemptAt = nil
	in.mu.Unlock()
	in.publishFreshness()
}

// freshnessLocked is the status at now: what the poll loop recorded, made
// unhealthy when no read has succeeded for Config.Stale.
func (in *Ingester) freshnessLocked(now time.Time) Status {
	st := in.status
	staleAt, running := in.staleAtLocked()
	if !running || now.Before(staleAt) {
		return st
	}
	cause := st.Error
	if cause == "" {
		cause = notAnswering
		if !in.waiting {
			cause = "a read is taking longer than expected"
		}
	}
	if st.LastSuccessAt != nil {
		st.Error = fmt.Sprintf("no successful read from the namespace for %s: %s", words(now.Sub(*st.LastSuccessAt)), cause)
	} else {
		st.Error = fmt.Sprintf("no successful read from the namespace in the %s since dlqdash started: %s", words(now.Sub(in.started)), cause)
	}
	// The failure began with the first read that has not succeeded (or
	// failed earlier than that, per fail).
	since := staleAt.UTC()
	if in.attemptAt != nil && in.attemptAt.Before(since) {
		since = *in.attemptAt
	}
	if st.ErrorSince == nil || since.Before(*st.ErrorSince) {
		st.ErrorSince = &since
	}
	st.Healthy = false
	return st
}

// staleAtLocked is when the status goes stale if no read succeeds before:
// Config.Stale after the later of the last success and the start of Run.
// running is false before Run.
func (in *Ingester) staleAtLocked() (at time.Time, running bool) {
	if in.started.IsZero() {
		return time.Time{}, false
	}
	base := in.started
	if last := in.status.LastSuccessAt; last != nil && last.After(base) {
		base = *last
	}
	return base.Add(in.cfg.Stale), true
}

// publishFreshness publishes the status at this moment if a page would
// show it differently from the last one published. A healthy status whose
// last success moved on is not a change: pages show "Live". It returns
// the moment it looked at.
func (in *Ingester) publishFreshness() time.Time {
	in.pubMu.Lock()
	defer in.pubMu.Unlock()
	now := in.cfg.Now().UTC()
	in.mu.Lock()
	st := in.freshnessLocked(now)
	readOK := in.status.Healthy // the last read succeeded: stale, not failed
	in.mu.Unlock()
	if in.published != nil && sameFreshness(*in.published, st) {
		return now
	}
	if readOK && !st.Healthy && in.published != nil && in.published.Healthy {
		// A failed read is logged by Run; a read that does not end is
		// logged here, once, when it makes the catalog stale.
		in.log.Warn("catalog: Service Bus does not answer; showing the last snapshot", "error", st.Error)
	}
	in.published = &st
	c := st
	in.cfg.Publish(Change{Kind: ChangeFreshness, Status: &c, At: now})
	return now
}

func sameFreshness(a, b Status) bool {
	if a.Healthy != b.Healthy || a.Error != b.Error || !sameTime(a.ErrorSince, b.ErrorSince) {
		return false
	}
	return a.Healthy || sameTime(a.LastSuccessAt, b.LastSuccessAt)
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// watchFreshness publishes the status when it goes stale, and again every
// second while it stays stale (its words say for how long), until ctx
// ends.
func (in *Ingester) watchFreshness(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		looked := in.publishFreshness()
		now := in.cfg.Now()
		in.mu.Lock()
		staleAt, _ := in.staleAtLocked()
		in.mu.Unlock()
		t.Reset(nextFreshnessCheck(looked, now, staleAt))
	}
}

// nextFreshnessCheck is how long watchFreshness waits after publishing the
// status it saw at looked, now: until the status goes stale at staleAt;
// once stale, a second (its words count seconds). When it went stale
// between looked and now (a timer that fired just before staleAt, then a
// busy machine), that change is not published yet: at once.
func nextFreshnessCheck(looked, now, staleAt time.Time) time.Duration {
	switch {
	case now.Before(staleAt):
		return staleAt.Sub(now)
	case looked.Before(staleAt):
		return 0
	default:
		return time.Second
	}
}

// words writes a duration for people: "250 ms", "6 s", "4 min", "2 h 5 min".
func words(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", d/time.Second)
	case d < time.Hour:
		return fmt.Sprintf("%d min", d/time.Minute)
	}
	return fmt.Sprintf("%d h %d min", d/time.Hour, d%time.Hour/time.Minute)
}
