package dlq_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/dlq"
)

// hangingBroker is a fakeBroker whose listings, while hung, wait for their
// context to end, as a frozen broker's would: no answer and no error.
type hangingBroker struct {
	*fakeBroker
	mu        sync.Mutex
	hung      chan struct{} // non-nil while hung; closed by resume
	deadlines []time.Duration
	ended     []error // what each hung call returned
}

func (b *hangingBroker) hang() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hung = make(chan struct{})
}

func (b *hangingBroker) resume() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.hung)
	b.hung = nil
}

func (b *hangingBroker) wait(ctx context.Context) error {
	b.mu.Lock()
	hung := b.hung
	if hung != nil {
		d, ok := ctx.Deadline()
		if !ok {
			d = time.Time{}
		}
		b.deadlines = append(b.deadlines, time.Until(d))
	}
	b.mu.Unlock()
	if hung == nil {
		return nil
	}
	select {
	case <-hung:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		b.ended = append(b.ended, ctx.Err())
		b.mu.Unlock()
		return ctx.Err()
	}
}

func (b *hangingBroker) Entities(ctx context.Context) ([]dlq.Entity, error) {
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	return b.fakeBroker.Entities(ctx)
}

func (b *hangingBroker) Settings(ctx context.Context) ([]dlq.Settings, error) {
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	return b.fakeBroker.Settings(ctx)
}

func (b *hangingBroker) calls() (deadlines []time.Duration, ended []error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Duration(nil), b.deadlines...), append([]error(nil), b.ended...)
}

func (h *harness) freshness() []dlq.Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []dlq.Status
	for _, c := range h.changes {
		if c.Kind == dlq.ChangeFreshness {
			out = append(out, *c.Status)
		}
	}
	return out
}

// TestStatusGoesStaleWhileAReadHangs: a broker that stops answering fails
// no read until the poll's deadline; the status must not wait for that. It
// turns unhealthy, and the change is published, once no read has succeeded
// for Stale, while the read still waits; the read then ends at its
// deadline, the poll retries, and the status recovers on its own.
func TestStatusGoesStaleWhileAReadHangs(t *testing.T) {
	const (
		stale    = time.Second
		deadline = 3 * time.Second
	)
	h := newHarness(t)
	h.broker.addQueue("orders")
	b := &hangingBroker{fakeBroker: h.broker}
	in, _ := h.start(func(c *dlq.Config) {
		c.Broker, c.Poll, c.Stale, c.PollTimeout, c.MaxBackoff = b, 50*time.Millisecond, stale, deadline, 100*time.Millisecond
	})
	h.waitFor("healthy", func() bool { return in.Status().Healthy })

	b.hang()
	hungAt := time.Now()
	var st dlq.Status
	h.waitFor("unhealthy", func() bool { st = in.Status(); return !st.Healthy })
	turned := time.Now()
	last := *st.LastSuccessAt
	if d := turned.Sub(last); d < stale || d > stale+300*time.Millisecond {
		t.Errorf("unhealthy %v after the last success, want within [%v, %v]", d, stale, stale+300*time.Millisecond)
	}
	if _, ended := b.calls(); len(ended) != 0 {
		t.Errorf("the hung read ended (%v) before the status turned: staleness must not wait for the deadline", ended)
	}
	if !strings.HasPrefix(st.Error, "no successful read from the namespace for ") || !strings.HasSuffix(st.Error, ": the broker is not answering") {
		t.Errorf("error = %q, want the time without a read and that the broker is not answering", st.Error)
	}
	if st.ErrorSince == nil || st.ErrorSince.Before(last) || st.ErrorSince.After(turned) {
		t.Errorf("error_since = %v, want between the last success %v and now %v", st.ErrorSince, last, turned)
	}

	// The timer published it: pages turn without anyone asking.
	h.waitFor("a published stale status", func() bool {
		for _, s := range h.freshness() {
			if !s.Healthy && strings.Contains(s.Error, "the broker is not answering") {
				return true
			}
		}
		return false
	})
	h.mu.Lock()
	var pushedAt time.Time
	for _, c := range h.changes {
		// The first stale status since the last success (a loaded machine
		// may have published one between two earlier polls too).
		if c.Kind == dlq.ChangeFreshness && !c.Status.Healthy && c.Status.LastSuccessAt != nil && c.Status.LastSuccessAt.Equal(last) {
			pushedAt = c.At
			break
		}
	}
	h.mu.Unlock()
	if d := pushedAt.Sub(last); d < stale || d > stale+300*time.Millisecond {
		t.Errorf("stale status published %v after the last success, want within [%v, %v]", d, stale, stale+300*time.Millisecond)
	}

	// The read ends at the poll's deadline, worded, and the poll retries.
	h.waitFor("the deadline to end the hung read and a retry", func() bool {
		deadlines, ended := b.calls()
		return len(ended) >= 1 && len(deadlines) >= 2
	})
	deadlines, ended := b.calls()
	// While stale, the timer publishes again as the words change ("for 1 s",
	// "for 2 s"): the banner counts.
	words := map[string]bool{}
	for _, s := range h.freshness() {
		if !s.Healthy && strings.HasPrefix(s.Error, "no successful read") && s.LastSuccessAt.Equal(last) {
			words[s.Error] = true
		}
	}
	if len(words) < 2 {
		t.Errorf("stale statuses published: %v, want one per second while stale", words)
	}
	if since := time.Since(hungAt); since > deadline+2*time.Second {
		t.Errorf("retry after %v, want about the deadline %v", since, deadline)
	}
	if deadlines[0] <= 0 || deadlines[0] > deadline {
		t.Errorf("the hung read's deadline was %v away, want at most %v", deadlines[0], deadline)
	}
	if ended[0] != context.DeadlineExceeded {
		t.Errorf("the hung read ended with %v, want its deadline", ended[0])
	}
	st = in.Status()
	if st.Healthy || !strings.Contains(st.Error, "no answer within the poll's deadline of 3 s") ||
		!strings.HasPrefix(st.Error, "no successful read from the namespace for ") {
		t.Errorf("status after the deadline = %+v, want the read's deadline in words", st)
	}

	b.resume()
	h.waitFor("healthy again", func() bool { return in.Status().Healthy })
	st = in.Status()
	if st.Error != "" || st.ErrorSince != nil || !st.LastSuccessAt.After(last) {
		t.Errorf("recovered status = %+v", st)
	}
	h.waitFor("a published healthy status", func() bool {
		fs := h.freshness()
		return len(fs) > 0 && fs[len(fs)-1].Healthy
	})
}

// TestStatusStaleWithoutAnyRead: a broker that never answers after a start
// turns the status within Stale, saying since when dlqdash has tried.
func TestStatusStaleWithoutAnyRead(t *testing.T) {
	h := newHarness(t)
	b := &hangingBroker{fakeBroker: h.broker}
	b.hang()
	t.Cleanup(b.resume)
	started := time.Now()
	in, stop := h.start(func(c *dlq.Config) { c.Broker, c.Stale = b, 300*time.Millisecond })
	if st := in.Status(); st.Healthy || st.Error != "" {
		t.Errorf("status right after the start = %+v, want not read yet and no error", st)
	}
	var st dlq.Status
	h.waitFor("an error", func() bool { st = in.Status(); return st.Error != "" })
	if d := time.Since(started); d < 300*time.Millisecond {
		t.Errorf("error after %v, before Stale", d)
	}
	if !strings.HasPrefix(st.Error, "no successful read from the namespace in the ") ||
		!strings.HasSuffix(st.Error, " since dlqdash started: the broker is not answering") || st.LastSuccessAt != nil {
		t.Errorf("status = %+v", st)
	}
	stop()
}

func TestStaleAndPollDeadlineDefaults(t *testing.T) {
	for _, tt := range []struct {
		poll, stale, deadline time.Duration
	}{
		{0, 5 * time.Second, 30 * time.Second}, // the 1 s default poll
		{100 * time.Millisecond, 5 * time.Second, 30 * time.Second},
		{2 * time.Second, 6 * time.Second, 30 * time.Second},
		{15 * time.Second, 45 * time.Second, 45 * time.Second},
	} {
		in := dlq.New(dlq.Config{Poll: tt.poll})
		if in.StaleAfter() != tt.stale || in.PollDeadline() != tt.deadline {
			t.Errorf("poll %v: stale %v, deadline %v; want %v, %v", tt.poll, in.StaleAfter(), in.PollDeadline(), tt.stale, tt.deadline)
		}
	}
}

// The freshness timer publishes a status that went stale while it was
// publishing the one before: a timer that fired just before the stale
// moment, on a machine busy enough that its next look came after it,
// waited a whole second once, and pages turned stale a second late.
func TestFreshnessTimerDoesNotMissTheStaleMoment(t *testing.T) {
	staleAt := time.Date(2026, 11, 27, 9, 0, 1, 0, time.UTC)
	ms := time.Millisecond
	for _, c := range []struct {
		name        string
		looked, now time.Time
		want        time.Duration
	}{
		{"fresh: until the stale moment", staleAt.Add(-400 * ms), staleAt.Add(-300 * ms), 300 * ms},
		{"went stale after the look: at once", staleAt.Add(-5 * ms), staleAt.Add(80 * ms), 0},
		{"stale when looked: a second", staleAt.Add(2 * ms), staleAt.Add(3 * ms), time.Second},
		{"stale at the very moment looked: a second", staleAt, staleAt.Add(ms), time.Second},
	} {
		if got := dlq.NextFreshnessCheck(c.looked, c.now, staleAt); got != c.want {
			t.Errorf("%s: next check in %v, want %v", c.name, got, c.want)
		}
	}
}
