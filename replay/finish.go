package replay

import (
	"context"
	"errors"

	"github.com/dlqdash/dlqdash/audit"
)

// finish records how the run ended.
func (r *run) finish(ctx context.Context, stop *halt) {
	e := r.e
	id := r.job.ID
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
		j, err := e.cfg.Store.SetStatus(ctx, id, StatusPaused, stop.reason, StatusRunning)
		if err != nil {
			e.log.Error("replay: cannot pause job", "job_id", id, "error", err)
			return
		}
		e.log.Warn("replay: job paused", "job_id", id, "reason", stop.reason)
		e.audit(ctx, audit.Record{Actor: ActorEngine, Action: audit.ActionJobPaused, Params: jobParams(j, stop.reason),
			Outcome: audit.OutcomeFailed})
		e.changed(j)
		return
	}
	if r.cancelling {
		left, err := e.cfg.Store.UnfinishedItems(ctx, id)
		if err == nil {
			var ups []Update
			for _, it := range left {
				if it.State == ItemSent {
					ups = append(ups, Update{MessageID: it.MessageID, State: ItemFailed, Error: "the copy was sent, but the job was cancelled " +
						"before the original could be removed: it is still in " + it.SubQueue.Path(it.Entity) + "; discard it"})
				}
			}
			if len(ups) > 0 {
				_, err = e.cfg.Store.UpdateItems(ctx, id, ups)
			}
		}
		if err != nil {
			e.log.Error("replay: cancelling job", "job_id", id, "error", err)
		}
		j, err := e.cfg.Store.SetStatus(ctx, id, StatusCancelled, r.job.PausedReason, StatusCancelling)
		if err != nil {
			e.log.Error("replay: cannot cancel job", "job_id", id, "error", err)
			return
		}
		e.changed(j)
		return
	}
	// Completed only if nobody paused or cancelled it meanwhile (then the
	// next run finds nothing left to do, or cancels).
	j, err := e.cfg.Store.SetStatus(ctx, id, StatusCompleted, "", StatusRunning)
	var se *StatusError
	if errors.As(err, &se) {
		return
	}
	if err != nil {
		e.log.Error("replay: cannot complete job", "job_id", id, "error", err)
		return
	}
	outcome := audit.OutcomeSucceeded
	if j.Counts.Failed > 0 {
		outcome = audit.OutcomeFailed
	}
	e.audit(ctx, audit.Record{Actor: ActorEngine, Action: audit.ActionJobCompleted, Params: jobParams(j, ""), Outcome: outcome})
	e.log.Info("replay: job completed", "job_id", id, "completed", j.Counts.Completed, "failed", j.Counts.Failed, "skipped", j.Counts.Skipped)
	e.changed(j)
}
