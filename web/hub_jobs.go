package web

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/views"
)

// Replay progress on open pages. The engine reports every change of a job
// (replay.Config.OnChange) to PublishJob; the hub keeps the latest state of
// each job until its coalescing window closes, then sends, with no store
// read (the job carries everything the fragments show):
//
//   - to the job's page (page=job&id=N): a replace of
//     FragmentID("job-progress", N); when the job has just finished, a
//     resync instead, so that its per-message table is current too;
//   - to the first, unfiltered page of a job's messages (page=job&id=N&first=1),
//     while the job runs and at most once a second (itemsEvery): a replace
//     of the table body FragmentID("job-items", N), read from JobItems;
//   - to the jobs page (page=jobs): a replace of the job's row,
//     FragmentID("job", N); and on a first page (first=1) whose newest job
//     is older (after < N), a prepend of the row to FragmentID("job-rows",
//     ""), which the page skips if it has the row already.

// itemsEvery throttles the live message table of a job's page: each update
// is a read of its first page.
const itemsEvery = time.Second

// JobItemLister lists a job's messages. *store.Store implements it.
type JobItemLister interface {
	ListItems(ctx context.Context, jobID int64, state replay.ItemState, limit int, cursor string) ([]replay.Item, string, error)
}

// PublishJob hands a job's new state to the hub. Like Publish it never
// blocks: it records the state (the latest per job wins) and signals Run.
func (h *Hub) PublishJob(j replay.Job) {
	h.seq.Add(1)
	h.jobMu.Lock()
	if old, ok := h.jobs[j.ID]; !ok || !(old.Status.Finished() && !j.Status.Finished()) {
		// A finished state is final: a running one reported by another
		// goroutine just after it is stale.
		h.jobs[j.ID] = j
	}
	h.jobMu.Unlock()
	select {
	case h.jobSignal <- struct{}{}:
	default: // a signal is pending: Run takes this state with it
	}
}

// takeJobs returns the jobs changed since the last call, by id.
func (h *Hub) takeJobs() []replay.Job {
	h.jobMu.Lock()
	defer h.jobMu.Unlock()
	if len(h.jobs) == 0 {
		return nil
	}
	jobs := slices.SortedFunc(maps.Values(h.jobs), func(a, b replay.Job) int { return cmp.Compare(a.ID, b.ID) })
	clear(h.jobs)
	return jobs
}

// sendJobs sends the job fragments of the changed jobs (see above). It
// runs on Run's goroutine.
func (h *Hub) sendJobs(ctx context.Context, jobs []replay.Job) {
	lists := onPage(views.LiveJobs)
	haveLists := len(h.subscriptions(lists)) > 0
	for _, j := range jobs {
		justFinished := false
		switch {
		case h.finishedJobs[j.ID] && !j.Status.Finished():
			continue // stale: the job finished already
		case j.Status.Finished() && !h.finishedJobs[j.ID]:
			h.finishedJobs[j.ID] = true
			delete(h.itemsSentAt, j.ID) // its table updates are over
			justFinished = true
		}
		v := jobView(j, len(h.cfg.Namespaces) > 1)
		id := strconv.FormatInt(j.ID, 10)
		// Only to connections that may view the job's namespace (access
		// rules).
		page := sees(func(s subscription) bool { return s.page == views.LiveJob && s.id == j.ID }, j.Namespace)
		switch {
		case justFinished:
			h.sendTo(page, resyncFrame)
		default:
			// Controls only for those who may use them (subscription.readOnly).
			for _, ro := range []bool{false, true} {
				to := func(s subscription) bool { return page(s) && s.readOnly == ro }
				if len(h.subscriptions(to)) == 0 {
					continue
				}
				pv := v
				if ro {
					pv = readOnly(v)
				}
				if f, ok := h.replace(ctx, views.FragmentID("job-progress", id), views.JobProgress(pv)); ok {
					h.sendTo(to, f)
				}
			}
			h.sendJobItems(ctx, j)
		}
		if !haveLists {
			continue
		}
		lists := sees(onPage(views.LiveJobs), j.Namespace)
		row, err := h.render(ctx, views.JobRow(v))
		if err != nil {
			h.log.Warn("live: cannot render a job row", "job_id", j.ID, "error", err.Error())
			h.sendTo(lists, resyncFrame)
			continue
		}
		h.sendTo(lists, encodeOp(liveOp{Op: "replace", ID: views.FragmentID("job", id), HTML: row}))
		h.sendTo(func(s subscription) bool { return lists(s) && s.first && j.ID > s.after },
			encodeOp(liveOp{Op: "prepend", ID: views.FragmentID("job-rows", ""), HTML: row}))
	}
}

// sendJobItems replaces the message table of the job's first, unfiltered
// pages, at most once every itemsEvery.
func (h *Hub) sendJobItems(ctx context.Context, j replay.Job) {
	jobID := j.ID
	first := sees(func(s subscription) bool { return s.page == views.LiveJob && s.id == jobID && s.first }, j.Namespace)
	if h.cfg.JobItems == nil || len(h.subscriptions(first)) == 0 {
		return
	}
	now := time.Now()
	if now.Sub(h.itemsSentAt[jobID]) < itemsEvery {
		return
	}
	h.itemsSentAt[jobID] = now
	items, _, err := h.cfg.JobItems.ListItems(ctx, jobID, "", jobItemsPageSize, "")
	if err != nil {
		h.failed(ctx, "a job's messages", err, first)
		return
	}
	rows := make([]views.JobItem, len(items))
	for i, it := range items {
		rows[i] = jobItemView(it)
	}
	id := strconv.FormatInt(jobID, 10)
	if f, ok := h.replace(ctx, views.FragmentID("job-items", id), views.JobItemRows(id, rows)); ok {
		h.sendTo(first, f)
	}
}
