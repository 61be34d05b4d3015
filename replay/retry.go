package replay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/dlqdash/dlqdash/dlq"
)

// callTimeout bounds one broker call: the SDK can wait a long time on a
// link whose connection died.
const callTimeout = 30 * time.Second

// transient reports whether err is worth retrying: the broker's own
// transient errors, and a call that ran out of time (but not the run's
// context ending).
func transient(err error) bool {
	return errors.Is(err, dlq.ErrUnreachable) || errors.Is(err, dlq.ErrThrottled) || errors.Is(err, context.DeadlineExceeded)
}

// retry runs op with exponential backoff and jitter while it fails with a
// transient error, honouring a throttled broker's Retry-After, for at most
// GiveUpAfter. It returns how many attempts it made.
func retry[T any](ctx context.Context, r *run, what string, op func() (T, error)) (T, int, error) {
	attempts := 0
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 200 * time.Millisecond
	b.MaxInterval = 15 * time.Second
	v, err := backoff.Retry(ctx, func() (T, error) {
		attempts++
		v, err := op()
		if err == nil {
			return v, nil
		}
		if !transient(err) {
			return v, backoff.Permanent(err)
		}
		var te *dlq.ThrottledError
		if errors.As(err, &te) && te.RetryAfter > 0 {
			return v, backoff.RetryAfter(int(math.Ceil(te.RetryAfter.Seconds())))
		}
		return v, err
	}, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(r.e.cfg.GiveUpAfter), backoff.WithNotify(func(err error, d time.Duration) {
		r.e.log.Warn("replay: retrying", "job_id", r.job.ID, "what", what, "in", d, "error", err)
	}))
	return v, attempts, err
}

// brokerHalt turns a broker error that retries did not cure into a pause.
func (r *run) brokerHalt(what string, err error) error {
	var h *halt
	if errors.As(err, &h) {
		return h
	}
	switch {
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, dlq.ErrUnauthorized):
		return &halt{reason: "Service Bus refused dlqdash's credentials (" + what + "): give them the Listen and Send rights and resume"}
	case transient(err):
		return &halt{reason: fmt.Sprintf("Service Bus kept failing for %s (%s): %v; resume when it is back", r.e.cfg.GiveUpAfter, what, err)}
	}
	return &halt{reason: fmt.Sprintf("%s: %v", what, err)}
}
