package apijson

import (
	"strconv"
	"time"

	"github.com/dlqdash/dlqdash/replay"
)

// Job is a replay or discard job (docs/api.md).
type Job struct {
	ID                 string    `json:"id"`
	Action             string    `json:"action"`
	Status             string    `json:"status"`
	CreatedAt          Time      `json:"created_at"`
	CreatedBy          string    `json:"created_by"`
	Destination        *string   `json:"destination"`
	RatePerSecond      *float64  `json:"rate_per_second"`
	ScheduledEnqueueAt *Time     `json:"scheduled_enqueue_at"`
	Reason             *string   `json:"reason"`
	AllowPoison        bool      `json:"allow_poison"`
	AcknowledgeFanOut  bool      `json:"acknowledge_fan_out"`
	Total              int       `json:"total"`
	Counts             JobCounts `json:"counts"`
	// Flagged counts messages possibly sent twice.
	Flagged      int     `json:"flagged"`
	PausedReason *string `json:"paused_reason"`
	// LastError, RetryAttempts and NextAttemptAt: a broker call that keeps
	// failing (status retrying).
	LastError     *string `json:"last_error"`
	RetryAttempts int     `json:"retry_attempts"`
	NextAttemptAt *Time   `json:"next_attempt_at"`
	StartedAt     *Time   `json:"started_at"`
	FinishedAt    *Time   `json:"finished_at"`
	// RedeadletteredReasons group counts.redeadlettered by the new
	// dead-letter reason, the most frequent first (at most 10).
	RedeadletteredReasons []ReasonCount `json:"redeadlettered_reasons"`
	JobCanary
	// CanaryVerdict is null until the canary was judged.
	CanaryVerdict *string `json:"canary_verdict"`
	// Namespace is the namespace of the job's messages (its source);
	// DestinationNamespace the one its copies go to when it is another
	// (null when they go back to their own).
	Namespace            string  `json:"namespace"`
	DestinationNamespace *string `json:"destination_namespace"`
}

// ReasonCount is a dead-letter reason with how many copies came back with it.
type ReasonCount struct {
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// JobCanary are a job's canary and ramp options, in the job object and
// (as "canary") in a dry run's answer.
type JobCanary struct {
	CanaryCount         int      `json:"canary_count"`
	CanaryWatch         *string  `json:"canary_watch"`
	PauseOnRedeadletter *float64 `json:"pause_on_redeadletter"`
	Ramp                *string  `json:"ramp"`
}

// NewJobCanary is c as the API writes it.
func NewJobCanary(c replay.Canary) JobCanary {
	out := JobCanary{CanaryCount: c.Count, PauseOnRedeadletter: c.PauseOnRedeadletter}
	if c.Count > 0 {
		w := c.Watch.String()
		out.CanaryWatch = &w
	}
	if c.Ramp > 0 {
		r := c.Ramp.String()
		out.Ramp = &r
	}
	return out
}

// JobCounts are a job's messages by state.
type JobCounts struct {
	Pending   int `json:"pending"`
	Sent      int `json:"sent"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Skipped   int `json:"skipped"`
	Cancelled int `json:"cancelled"`
	// Redeadlettered: copies of this job the catalog saw dead-lettered again.
	Redeadlettered int `json:"redeadlettered"`
}

// NewJob is j as the API's job object.
func NewJob(j replay.Job) Job {
	out := Job{
		ID: strconv.FormatInt(j.ID, 10), Action: string(j.Action), Status: string(j.Status),
		CreatedAt: Time(j.CreatedAt), CreatedBy: j.CreatedBy, Destination: nonEmpty(j.Destination),
		ScheduledEnqueueAt: TimeOrNull(j.ScheduledEnqueueAt), Reason: nonEmpty(j.Reason),
		AllowPoison: j.AllowPoison, AcknowledgeFanOut: j.AcknowledgeFanOut, Total: j.Total,
		Counts: JobCounts{j.Counts.Pending, j.Counts.Sent, j.Counts.Completed, j.Counts.Failed, j.Counts.Skipped,
			j.Counts.Cancelled, j.Counts.Redeadlettered},
		Flagged: j.Flagged, PausedReason: nonEmpty(j.PausedReason),
		LastError: nonEmpty(j.LastError), RetryAttempts: j.RetryAttempts, NextAttemptAt: TimeOrNull(j.NextAttemptAt),
		StartedAt: TimeOrNull(j.StartedAt), FinishedAt: TimeOrNull(j.FinishedAt),
	}
	if j.RatePerSecond > 0 {
		r := j.RatePerSecond
		out.RatePerSecond = &r
	}
	out.RedeadletteredReasons = []ReasonCount{}
	for _, rc := range j.RedeadletteredReasons {
		out.RedeadletteredReasons = append(out.RedeadletteredReasons, ReasonCount{rc.Reason, rc.Count})
	}
	out.JobCanary = NewJobCanary(j.Canary)
	out.CanaryVerdict = nonEmpty(j.Canary.Verdict)
	out.Namespace, out.DestinationNamespace = j.Namespace, nonEmpty(j.DestinationNamespace)
	return out
}

// JobItem is one message of a job (GET /api/v1/jobs/{id}/messages).
type JobItem struct {
	Message       JobItemMessage `json:"message"`
	State         string         `json:"state"`
	CopyMessageID *string        `json:"copy_message_id"`
	Error         *string        `json:"error"`
	Flagged       bool           `json:"flagged"`
	UpdatedAt     Time           `json:"updated_at"`
	JobID         string         `json:"job_id"`
}

// JobItemMessage names the message of a job item.
type JobItemMessage struct {
	ID             string  `json:"id"`
	Entity         string  `json:"entity"`
	SubQueue       string  `json:"subqueue"`
	SequenceNumber int64   `json:"sequence_number"`
	MessageID      *string `json:"message_id"`
}

// NewJobItem is it as the API writes it.
func NewJobItem(it replay.Item) JobItem {
	return JobItem{
		Message: JobItemMessage{ID: strconv.FormatInt(it.MessageID, 10), Entity: it.Entity, SubQueue: string(it.SubQueue),
			SequenceNumber: it.SequenceNumber, MessageID: nonEmpty(it.OriginalMessageID)},
		State: string(it.State), CopyMessageID: nonEmpty(it.CopyMessageID), Error: nonEmpty(it.Error),
		Flagged: it.Flagged, UpdatedAt: Time(it.UpdatedAt), JobID: strconv.FormatInt(it.JobID, 10),
	}
}

// DryRun is a dry run's answer.
type DryRun struct {
	DryRun   bool         `json:"dry_run"`
	Total    int          `json:"total"`
	Sample   []Message    `json:"sample"`
	Warnings []string     `json:"warnings"`
	Counts   DryRunCounts `json:"counts"`
	Targets  []DryTarget  `json:"targets"`
	// Canary is the job's canary and ramp options, null when none is set.
	Canary *JobCanary `json:"canary"`
	// Namespace is the namespace of the selected messages;
	// DestinationNamespace where the copies would go when it is another.
	Namespace            string  `json:"namespace"`
	DestinationNamespace *string `json:"destination_namespace"`
}

// DryRunCounts break a dry run's total down.
type DryRunCounts struct {
	Gone      int `json:"gone"`
	Scheduled int `json:"scheduled"`
	Deferred  int `json:"deferred"`
	Poison    int `json:"poison"`
	InJobs    int `json:"in_active_jobs"`
}

// DryTarget is a destination of a dry run.
type DryTarget struct {
	Source                   string  `json:"source"`
	Destination              string  `json:"destination"`
	Kind                     string  `json:"kind"`
	DuplicateDetection       bool    `json:"duplicate_detection"`
	DuplicateDetectionWindow *string `json:"duplicate_detection_window"`
	FanOut                   bool    `json:"fan_out"`
	// Subscriptions are a topic destination's subscriptions, who receive
	// the copies; null when the destination is a queue or they could not
	// be listed.
	Subscriptions []DrySubscription `json:"subscriptions"`
}

// DrySubscription is one subscription of a topic a dry run's copies go to.
type DrySubscription struct {
	Name string `json:"name"`
	// Receives is "all", "none", "if_filter_matches" or "unknown" (the
	// rules were not read: a topic with more than 20 subscriptions).
	Receives string `json:"receives"`
	// Rules are null when they were not read.
	Rules []DryRule `json:"rules"`
	// Copies is how many of the copies it takes, when known exactly (a
	// selection of at most 10 messages, rules without SQL filters); null
	// otherwise.
	Copies *int `json:"copies"`
}

// DryRule is one rule of a subscription: its filter's kind and text.
type DryRule struct {
	Name   string  `json:"name"`
	Kind   string  `json:"kind"`
	Filter *string `json:"filter"`
}

// NewDryRun is a plan as the API writes it.
func NewDryRun(p replay.Plan) DryRun {
	d := DryRun{DryRun: true, Total: p.Summary.Total, Sample: []Message{}, Warnings: p.Warnings, Targets: []DryTarget{},
		Counts:    DryRunCounts{p.Summary.Gone, p.Summary.Scheduled, p.Summary.Deferred, p.Summary.Poison, p.Summary.InJobs},
		Namespace: p.Namespace, DestinationNamespace: nonEmpty(p.DestinationNamespace)}
	if d.Warnings == nil {
		d.Warnings = []string{}
	}
	if c := p.Canary; c.Count > 0 || c.PauseOnRedeadletter != nil || c.Ramp > 0 {
		jc := NewJobCanary(c)
		d.Canary = &jc
	}
	for _, r := range p.Summary.Sample {
		d.Sample = append(d.Sample, NewMessage(r, false))
	}
	for _, t := range p.Targets {
		dt := DryTarget{Source: t.Source, Destination: t.Path, Kind: string(t.Kind), DuplicateDetection: t.DuplicateDetection, FanOut: t.FanOut}
		if t.DuplicateDetection {
			s := t.DuplicateDetectionWindow.Round(time.Second).String()
			dt.DuplicateDetectionWindow = &s
		}
		if t.SubscriptionsListed {
			dt.Subscriptions = []DrySubscription{}
			for _, sub := range t.Subscriptions {
				ds := DrySubscription{Name: sub.Name, Receives: string(sub.Receives())}
				if sub.CopiesKnown {
					n := sub.Copies
					ds.Copies = &n
				}
				if sub.RulesRead {
					ds.Rules = []DryRule{}
					for _, r := range sub.Rules {
						ds.Rules = append(ds.Rules, DryRule{Name: r.Name, Kind: string(r.Kind), Filter: nonEmpty(r.Filter)})
					}
				}
				dt.Subscriptions = append(dt.Subscriptions, ds)
			}
		}
		d.Targets = append(d.Targets, dt)
	}
	return d
}
