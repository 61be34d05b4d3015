package replay

import (
	"context"
	"errors"

	"github.com/dlqdash/dlqdash/audit"
)

// finish records how the run ended.
func (r *run) finish(ctx context.Context, stop *halt) {
	why := r.stopping()
	switch {
	case why == stopShutdown:
		return // adopted by the next start
	case why == stopPause:
		return // paused by a person: the status is written
	case why == stopCancel && !r.cancelling:
		// Cancelled while running: the status says cancelling, and the
		// engine adopts the job again as a cancelling run, which removes
		// the originals of copies already sent and sends nothing.
		return
	case stop != nil && why != stopCancel && !r.cancelling:
		r.pause(ctx, stop.reason)
	case r.cancelling:
		r.cancelled(ctx)
	default:
		r.completed(ctx)
	}
}

// pause pauses a running job that cannot go on, saying why.
func (r *run) pause(ctx context.Context, reason string) {
	e, id := r.e, r.job.ID
	j, err := e.setStatusAudited(ctx, r.store(), id, StatusPaused, reason, func(j Job) audit.Record {
		return audit.Record{Actor: ActorEngine, Action: audit.ActionJobPaused, Params: jobParams(j, reason), Outcome: audit.OutcomeFailed}
	}, active...)
	if err != nil {
		e.log.Error("replay: cannot pause job", "job_id", id, "error", err)
		return
	}
	e.log.Warn("replay: job paused", "job_id", id, "reason", reason)
	e.changed(j)
}

// cancelled ends a cancelling run: the items whose copy was sent but whose
// original could not be removed fail, saying where the original still is,
// and the job is cancelled.
func (r *run) cancelled(ctx context.Context) {
	e, id := r.e, r.job.ID
	left, err := r.store().UnfinishedItems(ctx, id)
	if err == nil {
		var ups []Update
		for _, it := range left {
			if it.State == ItemSent {
				ups = append(ups, Update{MessageID: it.MessageID, State: ItemFailed, Error: "the copy was sent, but the job was cancelled " +
					"before the original could be removed: it is still in " + it.SubQueue.Path(it.Entity) + "; discard it"})
			}
		}
		if len(ups) > 0 {
			_, err = r.store().UpdateItems(ctx, id, ups)
		}
	}
	if err != nil {
		e.log.Error("replay: cancelling job", "job_id", id, "error", err)
	}
	j, err := r.store().SetStatus(ctx, id, StatusCancelled, r.job.PausedReason, StatusCancelling)
	if err != nil {
		e.log.Error("replay: cannot cancel job", "job_id", id, "error", err)
		return
	}
	e.changed(j)
}

// completed completes a job that ran to its end, only if nobody paused or
// cancelled it meanwhile (then the next run finds nothing left to do, or
// cancels).
func (r *run) completed(ctx context.Context) {
	e, id := r.e, r.job.ID
	j, err := e.setStatusAudited(ctx, r.store(), id, StatusCompleted, "", func(j Job) audit.Record {
		outcome := audit.OutcomeSucceeded
		if j.Counts.Failed > 0 {
			outcome = audit.OutcomeFailed
		}
		return audit.Record{Actor: ActorEngine, Action: audit.ActionJobCompleted, Params: jobParams(j, ""), Outcome: outcome}
	}, active...)
	var se *StatusError
	if errors.As(err, &se) {
		return
	}
	if err != nil {
		e.log.Error("replay: cannot complete job", "job_id", id, "error", err)
		return
	}
	e.log.Info("replay: job completed", "job_id", id, "completed", j.Counts.Completed, "failed", j.Counts.Failed, "skipped", j.Counts.Skipped)
	e.changed(j)
}
