package replay

import (
	"context"
	"fmt"
	"time"
)

// Jobs on one source run one at a time. A job scanning an entity's subqueue
// leaves the messages it did not select locked while it reads there (see
// the package documentation), out of every other receiver's sight: two jobs
// reading one dead-letter queue at once would each hold the other's
// messages, and the one that gave up waiting for them would report them
// failed though they are still there. So a run holds the source it reads
// through the store (Store.HoldSource): in one process, and across every
// replica of a shared store. A job that finds another job reading its
// source waits, saying for which ("waiting for job 12, which is reading
// orders/$DeadLetterQueue"), and takes the source when that job lets go
// (its work there ended: every held message given back) or is no longer
// alive (finished or paused, or its replica died: its claim's heartbeat
// went stale; a process that crashed left locks that lapse one lock
// duration later, which every scan waits for from its start anyway).

// holdPoll is how often a job waiting for a source asks again.
const holdPoll = time.Second

func (r *run) sourceHold(k sourceKey) SourceHold {
	h := SourceHold{Namespace: r.job.Namespace, Entity: k.entity, SubQueue: k.q, JobID: r.job.ID}
	if r.claim != nil {
		h.Term = r.claim.Term
	}
	return h
}

// holdSource waits until the run holds source k, saying meanwhile which job
// it waits for. held is false when the run was stopped while it waited.
func (r *run) holdSource(ctx context.Context, k sourceKey) (held bool, err error) {
	h := r.sourceHold(k)
	waitingFor := int64(0)
	for {
		holder, err := r.store().HoldSource(ctx, h)
		if err != nil {
			return false, err
		}
		if holder == h.JobID {
			if waitingFor != 0 {
				r.note(ctx, "")
			}
			return true, nil
		}
		if holder != waitingFor {
			waitingFor = holder
			where := k.q.Path(k.entity)
			if h.Namespace != "" {
				where += " in namespace " + h.Namespace
			}
			r.e.log.Info("replay: waiting for another job reading the same source", "job_id", r.job.ID, "other_job_id", holder,
				"entity", k.entity, "subqueue", string(k.q), "namespace", h.Namespace)
			r.note(ctx, fmt.Sprintf("waiting for job %d, which is reading %s: one job at a time reads a queue", holder, where))
		}
		if !r.sleep(holdPoll) {
			return false, nil
		}
	}
}

// releaseSource lets go of source k once the work there has ended (the
// messages the run held are given back by then), so that a job waiting for
// it starts at once. A release that fails leaves the hold to die with the
// job (finished, paused, or its claim gone).
func (r *run) releaseSource(ctx context.Context, k sourceKey) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.store().ReleaseSource(rctx, r.sourceHold(k)); err != nil {
		r.e.log.Warn("replay: cannot release the source a job read; it is free once the job ends", "job_id", r.job.ID,
			"entity", k.entity, "error", err)
	}
}
