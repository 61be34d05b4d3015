package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/dlqdash/dlqdash/dlq"
)

// callTimeout bounds one broker call on top of the adapter's own
// deadlines: the first call on a broken namespace may take an attach and
// a call's deadline and the adapter's replacement of its link (about 45 s
// with the adapter's defaults), and must not be cut short.
const callTimeout = 60 * time.Second

// Retry back-off: exponential with jitter, from retryInitial to at most
// retryCeiling between attempts.
const (
	retryInitial = 200 * time.Millisecond
	retryCeiling = 15 * time.Second
)

// errStopped: the run was paused, cancelled or shut down while it waited
// to try a failing call again.
var errStopped = errors.New("the job was stopped")

// transient reports whether err is worth retrying: the broker's own
// transient errors, and a call that ran out of time (but not the run's
// context ending).
func transient(err error) bool {
	return errors.Is(err, dlq.ErrUnreachable) || errors.Is(err, dlq.ErrThrottled) || errors.Is(err, context.DeadlineExceeded)
}

// retry runs op with exponential backoff and jitter while it fails with a
// transient error or a full destination (dlq.ErrQuotaExceeded: its
// consumers may make room meanwhile), honouring a throttled broker's
// Retry-After, for at most GiveUpAfter. It returns how many attempts it
// made. Every failure is recorded on the job at once (status retrying, its
// last error, the attempts and the next attempt's time), and the job is
// running again when op succeeds. A pause, cancel or shutdown ends the wait between attempts
// at once, with errStopped: no attempt starts after it.
func retry[T any](ctx context.Context, r *run, what string, op func() (T, error)) (T, int, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = retryInitial
	b.MaxInterval = retryCeiling
	start := time.Now()
	for attempts := 1; ; attempts++ {
		v, err := op()
		if err == nil {
			if attempts > 1 || r.removalsFailing {
				r.removalsFailing = false
				r.recovered(ctx)
			}
			return v, attempts, nil
		}
		if !transient(err) && !errors.Is(err, dlq.ErrQuotaExceeded) || ctx.Err() != nil {
			return v, attempts, err
		}
		wait := b.NextBackOff()
		var te *dlq.ThrottledError
		if errors.As(err, &te) && te.RetryAfter > 0 {
			wait = te.RetryAfter
		}
		if time.Since(start)+wait > r.e.cfg.GiveUpAfter {
			return v, attempts, err
		}
		r.retrying(ctx, what, err, attempts, wait)
		if !r.sleep(wait) {
			var zero T
			return zero, attempts, errStopped
		}
	}
}

// retrying records on the job that what failed with err attempts times and
// is tried again after wait, and tells the dashboard.
func (r *run) retrying(ctx context.Context, what string, err error, attempts int, wait time.Duration) {
	e := r.e
	e.log.Warn("replay: retrying", "job_id", r.job.ID, "what", what, "attempts", attempts, "in", wait, "error", err)
	next := e.now().Add(wait)
	times := "once"
	if attempts > 1 {
		times = fmt.Sprintf("%d times", attempts)
	}
	msg := fmt.Sprintf("%s failed %s: %v; trying again at %s UTC (the job pauses if it keeps failing for %s)",
		what, times, err, next.UTC().Format(time.TimeOnly), e.cfg.GiveUpAfter)
	j, serr := r.store().SetRetrying(ctx, r.job.ID, &Retrying{LastError: msg, Attempts: attempts, NextAttemptAt: next})
	r.noted(j, serr)
}

// recovered records that the job's failing call succeeded: it is running
// again.
func (r *run) recovered(ctx context.Context) {
	r.e.log.Info("replay: broker answering again", "job_id", r.job.ID)
	j, err := r.store().SetRetrying(ctx, r.job.ID, nil)
	r.noted(j, err)
}

// noted takes a job the run changed the status of, for the dashboard; a job
// a person paused or cancelled meanwhile is left as it is.
func (r *run) noted(j Job, err error) {
	var se *StatusError
	switch {
	case errors.As(err, &se):
	case err != nil:
		r.e.log.Error("replay: cannot record the job's state", "job_id", r.job.ID, "error", err)
	default:
		r.job = j
		r.e.changed(j)
	}
}

// sourceHalt is brokerHalt for what the run does on the source entity (the
// entity whose queue it receives from and removes originals of): a source
// disabled for receiving (ReceiveDisabled or Disabled, which close its
// dead-letter queue to receivers too) pauses with what to enable and how.
func (r *run) sourceHalt(entity, what string, err error) error {
	if !errors.Is(err, dlq.ErrEntityDisabled) {
		return r.brokerHalt(what, err)
	}
	name := "the source " + entity
	if ns := r.job.Namespace; ns != "" {
		name = "the source " + ns + "/" + entity
	}
	az := "queue update --name " + entity
	if topic, sub, ok := strings.Cut(entity, "/Subscriptions/"); ok {
		az = "topic subscription update --topic-name " + topic + " --name " + sub
	}
	return &halt{reason: fmt.Sprintf("%s is disabled for receiving, so dlqdash cannot read or remove its dead-lettered messages: "+
		"enable it (az servicebus %s --status Active) and resume; nothing more was sent, and the messages not replayed yet "+
		"stay in their dead-letter queue", name, az)}
}

// brokerHalt turns a broker error that retries did not cure into a pause.
func (r *run) brokerHalt(what string, err error) error {
	var h *halt
	if errors.As(err, &h) {
		return h
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, errStopped):
		return err
	case errors.Is(err, dlq.ErrUnauthorized):
		return &halt{reason: "Service Bus refused dlqdash's credentials (" + what + "): give them the Listen and Send rights and resume"}
	case transient(err):
		return &halt{reason: fmt.Sprintf("Service Bus kept failing for %s (%s): %v; resume when it is back", r.e.cfg.GiveUpAfter, what, err)}
	}
	return &halt{reason: fmt.Sprintf("%s: %v", what, err)}
}
