package replay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"golang.org/x/time/rate"

	"github.com/dlqdash/dlqdash/audit"
)

// ReasonCount is one dead-letter reason with how many copies of a job came
// back with it.
type ReasonCount struct {
	Reason string
	Count  int
}

// DefaultCanaryWatch is how long a canary is watched when the job does not
// say.
const DefaultCanaryWatch = 30 * time.Second

// The canary verdicts (Canary.Verdict).
const (
	CanaryPassed = "passed"
	CanaryFailed = "failed"
)

// Canary is a job's "canary, then ramp" options and their state.
//
// With Count > 0 a replay sends Count copies first, then waits Watch while
// the catalog sees whether they come back dead-lettered; with
// PauseOnRedeadletter set, the job pauses itself when more than that share
// of the copies sent so far was dead-lettered again: judged at the end of
// the canary (and as soon as it is exceeded during the watch), and after
// every batch from then on. Ramp makes a paced job's rate rise linearly
// from a tenth of RatePerSecond to all of it, starting when the canary
// passed (or when the run started).
type Canary struct {
	Count int
	Watch time.Duration
	// PauseOnRedeadletter is a fraction 0–1; nil: no such guard.
	PauseOnRedeadletter *float64
	Ramp                time.Duration
	// Verdict is "" until the canary is judged, then CanaryPassed or
	// CanaryFailed. A resumed job does not send a canary again.
	Verdict string
	// SentBase and RedeadletteredBase are where the guard's share starts:
	// the guard moves them when it pauses the job, so that after a resume
	// it judges the copies sent since.
	SentBase, RedeadletteredBase int
}

// validateCanary checks the canary and ramp options of a request.
func (req *Request) validateCanary() error {
	c := req.Canary
	switch {
	case c.Count < 0:
		return &InvalidError{Param: "canary_count", Msg: "want a number of messages, 0 (no canary) or more"}
	case c.Watch < 0:
		return &InvalidError{Param: "canary_watch", Msg: `want a duration such as "30s"`}
	case c.Watch > time.Hour:
		return &InvalidError{Param: "canary_watch", Msg: "at most 1h: the messages the canary holds back wait that long"}
	case c.Watch > 0 && c.Count == 0:
		return &InvalidError{Param: "canary_watch", Msg: "watches a canary: set canary_count too"}
	case c.PauseOnRedeadletter != nil && (*c.PauseOnRedeadletter < 0 || *c.PauseOnRedeadletter > 1 || math.IsNaN(*c.PauseOnRedeadletter)):
		return &InvalidError{Param: "pause_on_redeadletter", Msg: "want a fraction from 0 to 1 (0.5: pause when more than half of the copies come back)"}
	case c.Ramp < 0:
		return &InvalidError{Param: "ramp", Msg: `want a duration such as "5m"`}
	case c.Ramp > 0 && req.RatePerSecond <= 0:
		return &InvalidError{Param: "ramp", Msg: "ramps up to rate_per_second: set a rate"}
	}
	if req.Action == ActionDiscard && (c.Count > 0 || c.PauseOnRedeadletter != nil) {
		return &InvalidError{Param: "canary_count", Msg: "canary_count and pause_on_redeadletter apply to replays only"}
	}
	if c.Count > 0 && c.Watch == 0 {
		req.Canary.Watch = DefaultCanaryWatch
	}
	return nil
}

// canaryPlan words the canary and ramp for a dry run's warnings.
func canaryPlan(c Canary, rate float64) []string {
	var out []string
	if c.Count > 0 {
		out = append(out, fmt.Sprintf("canary: %d copies are sent first, then the job waits %s to see whether they are dead-lettered again", c.Count, c.Watch))
	}
	if p := c.PauseOnRedeadletter; p != nil {
		out = append(out, fmt.Sprintf("the job pauses itself when more than %s of the copies sent so far are dead-lettered again", percent(*p)))
	}
	if c.Ramp > 0 {
		out = append(out, fmt.Sprintf("the rate rises from %s to %s messages a second over %s", strconv.FormatFloat(rate/10, 'f', -1, 64),
			strconv.FormatFloat(rate, 'f', -1, 64), c.Ramp))
	}
	return out
}

func percent(f float64) string { return strconv.FormatFloat(f*100, 'f', -1, 64) + " %" }

// copiesSent is how many of the job's copies were sent so far.
func copiesSent(j Job) int { return j.Counts.Sent + j.Counts.Completed }

// canaryActive reports whether the run is still sending its canary.
func (r *run) canaryActive() bool {
	return !r.cancelling && r.job.Action == ActionReplay && r.job.Canary.Count > 0 && r.job.Canary.Verdict == ""
}

// canarySent reports whether the whole canary is sent and waits to be
// watched.
func (r *run) canarySent() bool { return r.canaryActive() && r.canaryLeft() == 0 }

// canaryLeft is how many canary copies may still be sent (when active).
func (r *run) canaryLeft() int { return max(0, r.job.Canary.Count-copiesSent(r.job)) }

// errCanaryWatch ends the work on a source when the canary is sent: the
// run watches it, then starts the source again.
var errCanaryWatch = &halt{reason: "canary sent"}

// guardTripped returns the guard's pause reason when more than the job's
// pause_on_redeadletter share of the copies sent since the guard's base
// was dead-lettered again; "" otherwise.
func guardTripped(j Job) string {
	p := j.Canary.PauseOnRedeadletter
	sent := copiesSent(j) - j.Canary.SentBase
	back := j.Counts.Redeadlettered - j.Canary.RedeadletteredBase
	if p == nil || sent <= 0 || back <= 0 || float64(back) <= *p*float64(sent) {
		return ""
	}
	top := ""
	if len(j.RedeadletteredReasons) > 0 {
		top = j.RedeadletteredReasons[0].Reason
	}
	if top == "" {
		top = "no reason given"
	}
	return fmt.Sprintf("%d of %d copies sent were dead-lettered again (top reason: %s), more than pause_on_redeadletter %s: "+
		"fix the consumer, then resume to send the remaining messages, or cancel", back, sent, top, percent(*p))
}

// checkGuard pauses the job (a *halt) when the guard trips, moving its base
// so that a resume judges only the copies sent after it.
func (r *run) checkGuard(ctx context.Context) error {
	if r.job.Canary.PauseOnRedeadletter == nil || r.canaryActive() {
		return nil
	}
	reason := guardTripped(r.job)
	if reason == "" {
		return nil
	}
	if err := r.recordCanary(ctx, r.job.Canary.Verdict, copiesSent(r.job), r.job.Counts.Redeadlettered); err != nil {
		return err
	}
	return &halt{reason: reason}
}

// recordCanary writes the canary's verdict and the guard's base.
func (r *run) recordCanary(ctx context.Context, verdict string, sentBase, backBase int) error {
	j, err := r.store().SetCanary(ctx, r.job.ID, verdict, sentBase, backBase)
	if err != nil {
		return fmt.Errorf("record the canary: %w", err)
	}
	r.job = j
	return nil
}

// watchCanary waits the canary's watch, reading the job's re-dead-lettered
// count, and records the verdict: nil when it passed (the run goes on), a
// *halt when it failed (the job pauses) or the run was stopped meanwhile.
func (r *run) watchCanary(ctx context.Context) error {
	e := r.e
	c := r.job.Canary
	e.log.Info("replay: canary sent, watching", "job_id", r.job.ID, "sent", copiesSent(r.job), "watch", c.Watch.String())
	deadline := e.now().Add(c.Watch)
	failed := ""
	for {
		j, err := e.cfg.Store.Job(ctx, r.job.ID)
		if err != nil {
			return fmt.Errorf("read the canary's outcome: %w", err)
		}
		r.job.Counts.Redeadlettered, r.job.RedeadletteredReasons = j.Counts.Redeadlettered, j.RedeadletteredReasons
		if failed = guardTripped(r.job); failed != "" {
			break
		}
		left := deadline.Sub(e.now())
		if left <= 0 {
			break
		}
		if !r.sleep(min(left, canaryPoll)) {
			return &halt{reason: "stopped while watching the canary"}
		}
	}
	verdict, outcome := CanaryPassed, audit.OutcomeSucceeded
	if failed != "" {
		verdict, outcome = CanaryFailed, audit.OutcomeFailed
	}
	sent := copiesSent(r.job)
	// Passed: the guard judges the copies from the first on, canary
	// included. Failed: a resume judges the copies sent after it.
	sentBase, backBase := 0, 0
	if failed != "" {
		sentBase, backBase = sent, r.job.Counts.Redeadlettered
	}
	if err := r.recordCanary(ctx, verdict, sentBase, backBase); err != nil {
		return err
	}
	params := jobParams(r.job, failed)
	params["verdict"], params["canary_sent"], params["redeadlettered"] = verdict, sent, r.job.Counts.Redeadlettered
	e.audit(ctx, audit.Record{Actor: ActorEngine, Action: audit.ActionCanaryVerdict, Params: params, Outcome: outcome})
	e.log.Info("replay: canary judged", "job_id", r.job.ID, "verdict", verdict, "sent", sent, "redeadlettered", r.job.Counts.Redeadlettered)
	e.changed(r.job)
	if failed != "" {
		return &halt{reason: "canary failed: " + failed}
	}
	r.rampFrom = e.now()
	return nil
}

// canaryPoll is how often a canary's watch reads the job.
const canaryPoll = 250 * time.Millisecond

// canaryParams adds the options that are set to an audit entry's params.
func canaryParams(p map[string]any, c Canary) {
	if c.Count > 0 {
		p["canary_count"], p["canary_watch"] = c.Count, c.Watch.String()
	}
	if c.PauseOnRedeadletter != nil {
		p["pause_on_redeadletter"] = *c.PauseOnRedeadletter
	}
	if c.Ramp > 0 {
		p["ramp"] = c.Ramp.String()
	}
}

// canaryCap is what sendCopies may send of toSend: while the canary is
// being sent, at most what is left of it, and errCanaryWatch once it is all
// sent; after the canary, nothing when the guard trips (a *halt).
func (r *run) canaryCap(ctx context.Context, toSend []match) ([]match, error) {
	if !r.canaryActive() {
		return toSend, r.checkGuard(ctx)
	}
	left := r.canaryLeft()
	if left == 0 {
		return nil, errCanaryWatch
	}
	return toSend[:min(left, len(toSend))], nil
}

// workWatched does the job's part on one source like work, and when the
// canary is sent there, watches it and (if it passed) starts the source
// again with what is left.
func (r *run) workWatched(ctx context.Context, k sourceKey, items []*Item) error {
	for {
		err := r.work(ctx, k, items)
		if !errors.Is(err, errCanaryWatch) {
			return err
		}
		if err := r.watchCanary(ctx); err != nil {
			return err
		}
		bySource, err := r.itemsBySource(ctx)
		if err != nil {
			return err
		}
		if items = bySource[k]; len(items) == 0 {
			return nil
		}
	}
}

// ramp sets a ramping job's rate for now: from a tenth of its rate when the
// ramp starts to all of it after Ramp, rising linearly; the bucket holds a
// second's worth of the current rate, so that the start is slow too.
func (r *run) ramp(now time.Time) {
	c := r.job.Canary
	if r.limiter == nil || c.Ramp <= 0 {
		return
	}
	if r.rampFrom.IsZero() {
		r.rampFrom = now
	}
	f := min(1, float64(now.Sub(r.rampFrom))/float64(c.Ramp))
	perSecond := r.job.RatePerSecond * (0.1 + 0.9*f)
	r.limiter.SetLimitAt(now, rate.Limit(perSecond))
	r.limiter.SetBurstAt(now, max(1, min(int(math.Ceil(perSecond)), r.e.cfg.Batch)))
}
