package web

import (
	"context"

	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/views"
)

// Honest outcomes, live: a replay's copies that come back to a dead-letter
// queue arrive as new catalog messages (dlq.ChangeNew), not as job changes.
// When a batch has new messages and a jobs page or a job's page is open,
// the hub asks which jobs they are copies of and sends those jobs'
// fragments as for a job change (sendJobs), so "987 dead-lettered again"
// moves as the ingester catalogs them.

// JobOutcomes finds jobs by their copies. *store.Store implements it.
type JobOutcomes interface {
	// JobsOfCopies returns the jobs of which the catalog messages ids
	// hold dead-lettered copies (none for ordinary dead letters).
	JobsOfCopies(ctx context.Context, ids []int64) ([]replay.Job, error)
}

// sendOutcomes refreshes the jobs whose copies are among ids. It runs on
// Run's goroutine.
func (h *Hub) sendOutcomes(ctx context.Context, ids []int64) {
	jobPages := func(s subscription) bool { return s.page == views.LiveJob || s.page == views.LiveJobs }
	if h.cfg.Outcomes == nil || len(h.subscriptions(jobPages)) == 0 {
		return
	}
	jobs, err := h.cfg.Outcomes.JobsOfCopies(ctx, ids)
	if err != nil {
		h.failed(ctx, "the jobs of copies dead-lettered again", err, jobPages)
		return
	}
	if len(jobs) > 0 {
		h.sendJobs(ctx, jobs)
	}
}
