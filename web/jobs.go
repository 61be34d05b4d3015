package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/views"
)

// Page sizes of the jobs page and of a job's messages.
const (
	jobsPageSize     = 50
	jobItemsPageSize = 100
)

// jobView is a job as the pages (and the hub's fragments) show it.
func jobView(j replay.Job, showNamespace bool) views.Job {
	v := views.Job{
		Namespace: text(j.Namespace), DestinationNamespace: text(j.DestinationNamespace), ShowNamespace: showNamespace,
		ID: j.ID, Action: string(j.Action), Status: string(j.Status), CreatedAt: j.CreatedAt, CreatedBy: text(actorLabel(j.CreatedBy)),
		Destination: text(j.Destination), RatePerSecond: j.RatePerSecond, ScheduledEnqueueAt: j.ScheduledEnqueueAt,
		Reason: text(j.Reason), AllowPoison: j.AllowPoison, AcknowledgeFanOut: j.AcknowledgeFanOut, Filter: text(string(j.Filter)),
		Total: j.Total, Pending: j.Counts.Pending, Sent: j.Counts.Sent, Completed: j.Counts.Completed,
		Failed: j.Counts.Failed, Skipped: j.Counts.Skipped, Cancelled: j.Counts.Cancelled, Flagged: j.Flagged,
		PausedReason: text(j.PausedReason), LastError: text(j.LastError),
		StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, Finished: j.Status.Finished(),
	}
	// The engine's own rules: a button only where it would be accepted.
	v.CanPause, v.CanResume, v.CanCancel = j.Status.CanPause(), j.Status.CanResume(), j.Status.CanCancel()
	v.Outcome = outcomeView(j)
	return v
}

// outcomeView is what became of a job's copies, and its canary, as the
// pages show them.
func outcomeView(j replay.Job) views.Outcome {
	o := views.Outcome{Redeadlettered: j.Counts.Redeadlettered, CanaryCount: j.Canary.Count, CanaryVerdict: j.Canary.Verdict}
	for _, rc := range j.RedeadletteredReasons {
		o.Reasons = append(o.Reasons, views.ReasonCount{Reason: text(rc.Reason), Count: rc.Count})
	}
	if j.Canary.Count > 0 {
		o.CanaryWatch = j.Canary.Watch.String()
	}
	if p := j.Canary.PauseOnRedeadletter; p != nil {
		o.PauseOnRedeadletter = strconv.FormatFloat(*p*100, 'f', -1, 64) + " %"
	}
	if j.Canary.Ramp > 0 {
		o.Ramp = j.Canary.Ramp.String()
	}
	return o
}

// mayControl reports whether ctx's identity may pause and cancel j: an
// operator in its namespace (resume asks the destination's role too, and
// says so if it is missing).
func (s *Server) mayControl(ctx context.Context, j replay.Job) bool {
	return s.roleIn(ctx, j.Namespace).Includes(auth.Operator)
}

// readOnly is a job without its controls: for someone whose role may not
// pause, resume or cancel it.
func readOnly(v views.Job) views.Job {
	v.CanPause, v.CanResume, v.CanCancel = false, false, false
	return v
}

func jobItemView(it replay.Item) views.JobItem {
	return views.JobItem{MessageID: it.MessageID, Entity: text(it.Entity), SubQueue: string(it.SubQueue),
		SequenceNumber: it.SequenceNumber, OriginalMessageID: text(it.OriginalMessageID), State: string(it.State),
		CopyMessageID: text(it.CopyMessageID), Error: text(it.Error), Flagged: it.Flagged, UpdatedAt: it.UpdatedAt}
}

// listJobsPage renders GET /jobs: the jobs, newest first, a page at a time.
func (s *Server) listJobsPage(w http.ResponseWriter, r *http.Request) error {
	q, err := newFormQuery(r)
	if err != nil {
		return err
	}
	jobs, cursor, next, err := s.readJobs(r, q, jobsPageSize)
	if err != nil {
		return err
	}
	l := views.JobList{Live: s.hub != nil, Namespaces: scopeNames(scopeFrom(r.Context()), s.namespaces), Namespace: r.URL.Query().Get("namespace")}
	for _, j := range jobs {
		l.Jobs = append(l.Jobs, jobView(j, len(s.namespaces) > 1))
	}
	first := url.Values{}
	if l.Namespace != "" {
		first.Set("namespace", l.Namespace)
	}
	if next != "" {
		p := url.Values{"cursor": {next}}
		if l.Namespace != "" {
			p.Set("namespace", l.Namespace)
		}
		l.NextURL = "/jobs?" + p.Encode()
	}
	if cursor != "" {
		l.FirstURL = "/jobs"
		if len(first) > 0 {
			l.FirstURL += "?" + first.Encode()
		}
	}
	return s.render(w, r, views.JobsPage(l))
}

// showJobPage renders GET /jobs/{id}: the job's progress, its request and
// its messages (state filters them, cursor pages).
func (s *Server) showJobPage(w http.ResponseWriter, r *http.Request) error {
	return s.jobPage(w, r, http.StatusOK, nil)
}

// jobPage renders a job's page with status, and alert (a refused control)
// at the top.
func (s *Server) jobPage(w http.ResponseWriter, r *http.Request, status int, alert *views.FieldError) error {
	q, err := newFormQuery(r)
	if err != nil {
		return err
	}
	m, err := s.readJobItems(r, q, jobItemsPageSize)
	if err != nil {
		return err
	}
	id, state, items, cursor, next := m.id, m.state, m.items, m.cursor, m.next
	j, err := s.jobs.Job(r.Context(), id)
	if err != nil {
		return fmt.Errorf("show job page: %w", err)
	}
	d := views.JobDetail{Job: jobView(j, len(s.namespaces) > 1), State: string(state), Alert: alert, Live: s.hub != nil}
	if !s.mayControl(r.Context(), j) {
		d.Job = readOnly(d.Job)
	}
	for _, it := range items {
		d.Items = append(d.Items, jobItemView(it))
	}
	base := views.JobURL(id)
	if next != "" {
		v := url.Values{"cursor": {next}}
		if state != "" {
			v.Set("state", string(state))
		}
		d.NextURL = base + "?" + v.Encode()
	}
	if cursor != "" {
		d.FirstURL = base
		if state != "" {
			d.FirstURL += "?" + url.Values{"state": {string(state)}}.Encode()
		}
	}
	return s.write(w, r, status, views.JobPage(d))
}

// controlJobPage answers POST /jobs/{id}/pause, /resume and /cancel from
// the job page's buttons: it redirects back to the job (303), or shows the
// job page with the refusal (a job that finished meanwhile, say).
func (s *Server) controlJobPage(do jobAction) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		j, err := s.controlJobAt(r, do)
		if err != nil {
			status, fe, ok := formProblem(err)
			if !ok || status == http.StatusNotFound {
				return err
			}
			return s.jobPage(w, r, status, fe)
		}
		http.Redirect(w, r, views.JobURL(j.ID), http.StatusSeeOther)
		return nil
	}
}
