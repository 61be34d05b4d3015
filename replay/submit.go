package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/dlq"
)

// MaxIDs bounds the ids of one request; larger selections are filters.
const MaxIDs = 100_000

// SampleSize is how many messages a dry run shows.
const SampleSize = 10

// Request asks for a job (POST /api/v1/jobs).
type Request struct {
	Action      Action
	Selection   Selection
	Destination string
	// DestinationNamespace sends the copies to another configured
	// namespace; empty (or the messages' own) sends them back to the
	// messages' namespace. Only a request that names it sends elsewhere.
	DestinationNamespace string
	RatePerSecond        float64
	ScheduledEnqueueAt   *time.Time
	AcknowledgeFanOut    bool
	AllowPoison          bool
	Reason               string
	DryRun               bool
	// Canary: canary_count, canary_watch, pause_on_redeadletter and ramp
	// (Verdict and the bases are the engine's).
	Canary Canary
	// Allow, when set, is asked as soon as the selection's namespaces
	// are known (the namespaces its messages are in, and the destination
	// namespace when the copies go to another, else ""), before anything
	// else is checked or created, dry runs included: an error refuses the
	// request as it is, with an empty plan. The dashboard's access rules
	// (a role in each namespace) are checked here, where the namespaces
	// are known.
	Allow func(sources []string, destination string) error
}

// Plan is what a job would do: a dry run's answer, and the checks a real
// submission passes first.
type Plan struct {
	// Namespace is the namespace of the selected messages (one: a
	// selection spanning two is refused); DestinationNamespace is where
	// the copies go when it is another (empty otherwise).
	Namespace            string
	DestinationNamespace string
	Summary              SelectionSummary
	Warnings             []string
	// Targets are the destinations with what matters about them.
	Targets []Target
	// Canary is the job's canary and ramp options (with the default watch).
	Canary Canary
}

// Target is one destination of a plan.
type Target struct {
	Source                   string // entity path of the messages
	Path                     string
	Kind                     dlq.Kind
	DuplicateDetection       bool
	DuplicateDetectionWindow time.Duration
	DefaultTimeToLive        time.Duration
	// FanOut: a subscription's messages sent to its topic reach every
	// subscription of the topic.
	FanOut bool
	// Subscriptions are a topic destination's subscriptions, who receive
	// the copies (when the broker lists them: SubscriptionsListed);
	// SubscriptionsError says why they could not be listed.
	Subscriptions       []Subscription
	SubscriptionsListed bool
	SubscriptionsError  string
}

// subscriptionNames is " (a, b and c)", the subscriptions that may take
// a copy, when the target's subscriptions are known, else "".
func (t Target) subscriptionNames() string {
	var names []string
	for _, s := range t.Subscriptions {
		if s.Receives() != ReceivesNone && !(s.CopiesKnown && s.Copies == 0) {
			names = append(names, s.Name)
		}
	}
	if !t.SubscriptionsListed || len(names) == 0 {
		return ""
	}
	return " (" + nameList(names) + ")"
}

func (req *Request) validate(now time.Time) error {
	switch req.Action {
	case ActionReplay, ActionDiscard:
	case "":
		return &InvalidError{Param: "action", Msg: `missing: want "replay" or "discard"`}
	default:
		return &InvalidError{Param: "action", Msg: fmt.Sprintf(`%q: want "replay" or "discard"`, req.Action)}
	}
	sel := req.Selection
	switch {
	case sel.kinds() > 1:
		return &InvalidError{Param: "ids", Msg: "give ids, a filter, or an entity's sequence_numbers: one of them"}
	case sel.kinds() == 0:
		return &InvalidError{Param: "ids", Msg: "select messages: give ids, a filter, or an entity and its sequence_numbers"}
	case (sel.Entity == "") != (len(sel.SequenceNumbers) == 0):
		return &InvalidError{Param: "sequence_numbers", Msg: "sequence numbers need their entity, and an entity its sequence_numbers"}
	case sel.SubQueue != "" && !sel.SubQueue.Valid():
		return &InvalidError{Param: "subqueue", Msg: fmt.Sprintf("unknown subqueue %q: want main, dead_letter or transfer_dead_letter", sel.SubQueue)}
	case len(sel.IDs) > MaxIDs || len(sel.SequenceNumbers) > MaxIDs:
		return &InvalidError{Param: "ids", Msg: fmt.Sprintf("at most %d ids; select larger sets with a filter", MaxIDs)}
	case sel.Edit != nil && len(sel.IDs) != 1:
		return &InvalidError{Param: "ids", Msg: "an edit applies to exactly one message"}
	case len(sel.Edits) > 0 && (sel.Edit != nil || len(sel.IDs) == 0):
		return &InvalidError{Param: "edit", Msg: "a bulk edit applies to messages selected by id"}
	case len(sel.Edits) > MaxTransformMessages:
		return &InvalidError{Param: "edit", Msg: fmt.Sprintf("a bulk edit applies to at most %d messages: narrow the selection", MaxTransformMessages)}
	case sel.Filter != nil && sel.Filter.Unconditional() && !sel.Filter.All:
		return &InvalidError{Param: "filter", Msg: `the filter has no condition, so it would select every message in the catalog: ` +
			`add "all": true to the filter if that is what you mean, or a condition such as "entity"`}
	}
	for _, t := range []struct{ param, v string }{{"destination", req.Destination}, {"reason", req.Reason}, {"entity", sel.Entity},
		{"destination_namespace", req.DestinationNamespace}, {"namespace", sel.Namespace}} {
		if i := strings.IndexByte(t.v, 0); i >= 0 {
			return &InvalidError{Param: t.param, Msg: fmt.Sprintf("holds a NUL byte (at byte %d): remove it", i)}
		}
	}
	if req.Destination != "" {
		if err := checkEntityName(req.Destination); err != nil {
			return &InvalidError{Param: "destination", Msg: err.Error()}
		}
	}
	if req.RatePerSecond < 0 || req.RatePerSecond > 1e6 {
		return &InvalidError{Param: "rate_per_second", Msg: "want a number of messages per second, 0 (as fast as possible) up to 1000000"}
	}
	// The reason is kept for display (the job, the audit trail): valid
	// UTF-8, whatever a form sent.
	req.Reason = strings.ToValidUTF8(strings.TrimSpace(req.Reason), "\uFFFD")
	if len(req.Reason) > 1000 {
		return &InvalidError{Param: "reason", Msg: "at most 1000 characters"}
	}
	if req.Action == ActionDiscard {
		// A dry run may come before the reason is typed.
		if req.Reason == "" && !req.DryRun {
			return &InvalidError{Param: "reason", Msg: "a discard needs a reason: it removes the messages for good"}
		}
		if req.Destination != "" || req.DestinationNamespace != "" || req.ScheduledEnqueueAt != nil || sel.Edit != nil || len(sel.Edits) > 0 {
			return &InvalidError{Param: "action", Msg: "destination, destination_namespace, scheduled_enqueue_at and edits apply to replays only"}
		}
	}
	if len(sel.Edits) > 0 {
		for _, id := range sel.IDs {
			if sel.Edits[id] == nil {
				return &InvalidError{Param: "edit", Msg: fmt.Sprintf("message %d has no edit: a bulk edit gives every selected message its own", id)}
			}
		}
	}
	if t := req.ScheduledEnqueueAt; t != nil && t.Before(now.Add(-time.Minute)) {
		return &InvalidError{Param: "scheduled_enqueue_at", Msg: "is in the past: leave it out to replay now"}
	}
	if t := req.ScheduledEnqueueAt; t != nil && t.After(MaxScheduledEnqueueAt) {
		return &InvalidError{Param: "scheduled_enqueue_at", Msg: fmt.Sprintf("%s is after %s, the latest time Service Bus schedules a message for",
			t.UTC().Format(time.RFC3339Nano), MaxScheduledEnqueueAt.Format(time.RFC3339Nano))}
	}
	return req.validateCanary()
}

// Submit checks a request and, unless it is a dry run, creates its job.
// The plan is returned either way; the job only for a real submission.
// Errors: *InvalidError (400), *PreconditionError (422, a guard),
// *ConflictError (409), a broker error (the destination could not be
// checked).
func (e *Engine) Submit(ctx context.Context, req Request) (Plan, Job, error) {
	var job Job
	if err := req.validate(e.now()); err != nil {
		return Plan{}, job, err
	}
	plan, err := e.plan(ctx, req)
	if err != nil {
		return plan, job, err
	}
	if req.DryRun {
		return plan, job, nil
	}
	for _, t := range plan.Targets {
		if t.FanOut && !req.AcknowledgeFanOut {
			return plan, job, &PreconditionError{Msg: fmt.Sprintf("replaying %s's messages to its topic %s delivers a copy to every "+
				"subscription of the topic whose filter matches it%s, not only to %s: set acknowledge_fan_out to do it anyway, or choose a queue as the destination",
				t.Source, t.Path, t.subscriptionNames(), t.Source)}
		}
	}
	// A filter is kept with the job as the API's filter object
	// (dlq.Filter's JSON), which the job's page shows.
	var filterJSON json.RawMessage
	if req.Selection.Filter != nil {
		if filterJSON, err = json.Marshal(req.Selection.Filter); err != nil {
			return plan, job, fmt.Errorf("keep the job's filter: %w", err)
		}
	}
	j := Job{Action: req.Action, CreatedBy: audit.ActorFrom(ctx), Namespace: plan.Namespace,
		DestinationNamespace: plan.DestinationNamespace, Destination: req.Destination, RatePerSecond: req.RatePerSecond,
		ScheduledEnqueueAt: req.ScheduledEnqueueAt, Reason: req.Reason, AllowPoison: req.AllowPoison,
		AcknowledgeFanOut: req.AcknowledgeFanOut, Filter: filterJSON,
		Canary: Canary{Count: req.Canary.Count, Watch: req.Canary.Watch, PauseOnRedeadletter: req.Canary.PauseOnRedeadletter, Ramp: req.Canary.Ramp}}
	action := audit.ActionReplayJobCreated
	if req.Action == ActionDiscard {
		action = audit.ActionDiscardJobCreated
	}
	params := map[string]any{"action": string(req.Action), "destination": req.Destination, "rate_per_second": req.RatePerSecond,
		"acknowledge_fan_out": req.AcknowledgeFanOut, "allow_poison": req.AllowPoison, "reason": req.Reason}
	if req.ScheduledEnqueueAt != nil {
		params["scheduled_enqueue_at"] = req.ScheduledEnqueueAt.UTC().Format(time.RFC3339Nano)
	}
	if len(filterJSON) > 0 {
		params["filter"] = filterJSON
	}
	canaryParams(params, req.Canary)
	withNamespace(params, j)
	var ids []string
	if len(req.Selection.IDs) > 0 {
		ids = make([]string, len(req.Selection.IDs))
		for i, id := range req.Selection.IDs {
			ids[i] = strconv.FormatInt(id, 10)
		}
	}
	if req.Selection.Edit != nil {
		action = audit.ActionEditReplay
		params["edit"] = req.Selection.Edit
	}
	if len(req.Selection.Edits) > 0 {
		// A bulk edit is recorded as the fix it applied (each message's
		// resulting body is kept with the job).
		action = audit.ActionEditReplay
		params["edit"] = req.Selection.Transform
	}
	// The job and its creation entry are one transaction
	// (Store.CreateJobAudited): no job exists that its audit trail does
	// not say was created, by whom.
	build, err := e.cfg.Audit.Builder(ctx)
	if err != nil {
		return plan, job, fmt.Errorf("audit the job's creation: %w", err)
	}
	job, err = e.cfg.Store.CreateJobAudited(ctx, j, req.Selection, e.cfg.PoisonCap, func(created Job) (audit.Build, error) {
		p := maps.Clone(params)
		p["job_id"] = strconv.FormatInt(created.ID, 10)
		p["total"] = created.Total
		return build(audit.Record{Action: action, Params: p, MessageIDs: ids})
	})
	if err != nil {
		var conflict *ConflictError
		if errors.As(err, &conflict) {
			params["conflict"] = err.Error()
			e.audit(ctx, audit.Record{Action: action, Params: params, MessageIDs: ids, Outcome: audit.OutcomeDenied})
		}
		return plan, job, err
	}
	e.log.Info("replay: job created", "job_id", job.ID, "action", job.Action, "total", job.Total, "by", job.CreatedBy)
	e.changed(job)
	e.poke()
	return plan, job, nil
}

// plan summarises the selection and checks the destinations.
func (e *Engine) plan(ctx context.Context, req Request) (Plan, error) {
	var p Plan
	sum, err := e.cfg.Store.SummariseSelection(ctx, req.Selection, e.cfg.PoisonCap, SampleSize)
	if err != nil {
		return p, err
	}
	p.Summary, p.Canary = sum, req.Canary
	if sum.Total == 0 {
		return p, &PreconditionError{Msg: "the selection matches no messages"}
	}
	if err := e.planNamespaces(&p, req); err != nil {
		var refused *allowError
		if errors.As(err, &refused) {
			return Plan{}, refused.err
		}
		return p, err
	}
	warn := func(format string, args ...any) { p.Warnings = append(p.Warnings, fmt.Sprintf(format, args...)) }
	if p.DestinationNamespace != "" {
		warn("the copies go to the namespace %s, not back to %s where the messages are: destination_namespace names it", p.DestinationNamespace, p.Namespace)
	}
	if sum.Gone > 0 {
		warn("%d of the %d messages already left the broker: they are skipped", sum.Gone, sum.Total)
	}
	if sum.Scheduled > 0 {
		warn("%d are scheduled messages, not dead letters: they are skipped", sum.Scheduled)
	}
	if sum.InJobs > 0 {
		warn("%d are already in an active job: the job cannot start until it finishes (or is cancelled)", sum.InJobs)
	}
	if req.Action == ActionDiscard {
		warn("discarding removes %d messages from their queues for good; the catalog keeps its copies", sum.Total-sum.Gone-sum.Scheduled)
		return p, nil
	}
	if sum.Poison > 0 {
		if req.AllowPoison {
			warn("%d were already replayed %d times or more (poison); allow_poison replays them anyway", sum.Poison, e.cfg.PoisonCap)
		} else {
			warn("%d were already replayed %d times or more (poison): they are skipped unless allow_poison is set", sum.Poison, e.cfg.PoisonCap)
		}
	}
	if sum.MinTimeToLive > 0 && sum.MinTimeToLive < time.Minute.Milliseconds() {
		warn("some messages have a time-to-live of %s: a copy keeps it, and may expire before anyone receives it",
			time.Duration(sum.MinTimeToLive)*time.Millisecond)
	}
	p.Warnings = append(p.Warnings, canaryPlan(req.Canary, req.RatePerSecond)...)
	if req.ScheduledEnqueueAt != nil {
		warn("copies are scheduled for %s; the originals are removed as soon as each copy is accepted",
			req.ScheduledEnqueueAt.UTC().Format(time.RFC3339))
	}
	seen := map[string]bool{}
	for _, src := range sum.Sources {
		if seen[src.Entity] {
			continue
		}
		seen[src.Entity] = true
		t, err := e.target(ctx, p.Namespace, src.Entity, p.sendsTo(), req.Destination)
		if err != nil {
			return p, err
		}
		if t.SubscriptionsListed && sum.Total <= len(sum.Sample) && req.Selection.Edit == nil && len(req.Selection.Edits) == 0 {
			// The whole selection is at hand (a few messages): who takes
			// each copy can be said exactly where the rules are simple.
			var recs []dlq.Record
			for _, r := range sum.Sample {
				if r.Entity == src.Entity && r.GoneAt == nil && r.State != dlq.StateScheduled {
					recs = append(recs, r)
				}
			}
			if len(recs) > 0 {
				countCopies(t.Subscriptions, recs)
			}
		}
		p.Targets = append(p.Targets, t)
		if t.FanOut {
			if req.AcknowledgeFanOut {
				warn("%s's copies go to its topic %s and so to every subscription of it whose filter matches (acknowledged)", t.Source, t.Path)
			} else {
				warn("%s's copies would go to its topic %s and so to every subscription of it whose filter matches, not only back to %s: set acknowledge_fan_out, or choose a queue",
					t.Source, t.Path, t.Source)
			}
		}
		switch {
		case t.SubscriptionsListed:
			warn("%s", FanOutWords(t.Path, t.Subscriptions))
		case t.SubscriptionsError != "":
			warn("the subscriptions of the topic %s could not be listed (%s): every subscription whose filter matches a copy receives it", t.Path, t.SubscriptionsError)
		}
		if t.DuplicateDetection {
			warn("%s detects duplicates (window %s): each copy gets a new MessageId (original id + /dlqdash-<job>), so none is dropped, "+
				"and a resend after a crash is", t.Path, t.DuplicateDetectionWindow)
		} else {
			warn("%s has no duplicate detection: after a crash, a message whose copy may have been sent is sent again and flagged", t.Path)
		}
		if t.DefaultTimeToLive > 0 && t.DefaultTimeToLive < time.Minute {
			warn("%s's default time-to-live is %s: copies without their own may expire before anyone receives them", t.Path, t.DefaultTimeToLive)
		}
	}
	return p, nil
}

// planNamespaces finds the selection's namespace (one: a job receives from
// one namespace's broker) and where its copies go.
func (e *Engine) planNamespaces(p *Plan, req Request) error {
	var names []string
	for _, src := range p.Summary.Sources {
		if !slices.Contains(names, src.Namespace) {
			names = append(names, src.Namespace)
		}
	}
	if req.Allow != nil {
		dest := req.DestinationNamespace
		if len(names) == 1 && dest == names[0] {
			dest = ""
		}
		if err := req.Allow(names, dest); err != nil {
			return &allowError{err}
		}
	}
	if len(names) > 1 {
		param := "ids"
		switch {
		case req.Selection.Filter != nil:
			param = "filter"
		case req.Selection.Entity != "":
			param = "namespace"
		}
		// Each namespace with its count (the summary has them), so that
		// the caller sees what each job would take.
		counts := make([]string, len(names))
		for i, ns := range names {
			n := 0
			for _, src := range p.Summary.Sources {
				if src.Namespace == ns {
					n += src.Count
				}
			}
			counts[i] = fmt.Sprintf("%d in %s", n, ns)
		}
		return &InvalidError{Param: param, Msg: fmt.Sprintf("the selection holds messages of %d namespaces (%s): a job acts on one namespace; "+
			"select the messages of one (the filter's namespace key does it) and submit a job for each", len(names), strings.Join(counts, ", "))}
	}
	if len(names) == 1 {
		p.Namespace = names[0]
	}
	if d := req.DestinationNamespace; d != "" && d != p.Namespace {
		if _, err := e.broker(d); err != nil {
			return &InvalidError{Param: "destination_namespace", Msg: fmt.Sprintf("no namespace %q is configured: name one of the configured namespaces, "+
				"or leave destination_namespace out to replay into %s, where the messages are", d, p.Namespace)}
		}
		p.DestinationNamespace = d
	}
	return nil
}

// allowError is Request.Allow's refusal, passed through as it is.
type allowError struct{ err error }

func (e *allowError) Error() string { return e.err.Error() }
func (e *allowError) Unwrap() error { return e.err }

// sendsTo is the namespace the plan's copies go to.
func (p Plan) sendsTo() string {
	if p.DestinationNamespace != "" {
		return p.DestinationNamespace
	}
	return p.Namespace
}

// target resolves and checks where source's copies go: source is in
// namespace srcNS, the destination in dstNS.
func (e *Engine) target(ctx context.Context, srcNS, source, dstNS, destination string) (Target, error) {
	t := Target{Source: source, Path: destination}
	srcBroker, err := e.broker(srcNS)
	if err != nil {
		return t, &PreconditionError{Msg: fmt.Sprintf("the messages' namespace %s is not configured: configure it to replay them", srcNS)}
	}
	dstBroker, err := e.broker(dstNS)
	if err != nil {
		return t, &InvalidError{Param: "destination_namespace", Msg: fmt.Sprintf("no namespace %q is configured", dstNS)}
	}
	src, err := srcBroker.Entity(ctx, source)
	if err != nil && !errors.Is(err, dlq.ErrEntityNotFound) {
		return t, fmt.Errorf("check %s: %w", source, err)
	}
	if t.Path == "" {
		if errors.Is(err, dlq.ErrEntityNotFound) {
			return t, &PreconditionError{Msg: fmt.Sprintf("%s no longer exists: choose a destination", source)}
		}
		t.Path = source
		if src.Kind == dlq.KindSubscription {
			t.Path = src.Topic
		}
	}
	info, err := dstBroker.Entity(ctx, t.Path)
	if errors.Is(err, dlq.ErrEntityNotFound) {
		return t, &InvalidError{Param: "destination", Msg: fmt.Sprintf("%s does not exist: name a queue or topic of this namespace", t.Path)}
	}
	if err != nil {
		return t, fmt.Errorf("check the destination %s: %w", t.Path, err)
	}
	if info.Kind == dlq.KindSubscription {
		return t, &InvalidError{Param: "destination", Msg: fmt.Sprintf("%s is a subscription: Service Bus sends to queues and topics", t.Path)}
	}
	t.Kind, t.DuplicateDetection, t.DuplicateDetectionWindow, t.DefaultTimeToLive = info.Kind, info.DuplicateDetection,
		info.DuplicateDetectionWindow, info.DefaultTimeToLive
	t.FanOut = src.Kind == dlq.KindSubscription && info.Kind == dlq.KindTopic && src.Topic == info.Path
	if info.Kind == dlq.KindTopic {
		// Who receives the copies, in words: the topic's subscriptions
		// (a plan still stands without them).
		if l, ok := dstBroker.(SubscriptionLister); ok {
			subs, err := l.Subscriptions(ctx, t.Path, RulesUpTo)
			if err != nil {
				t.SubscriptionsError = err.Error()
			} else {
				t.Subscriptions, t.SubscriptionsListed = subs, true
			}
		}
	}
	return t, nil
}

// MaxScheduledEnqueueAt is the latest scheduled enqueue time Service Bus
// takes: its ScheduledEnqueueTimeUtc is a .NET DateTime, whose largest value
// is 9999-12-31T23:59:59.9999999Z (the SDK sends milliseconds since 1970,
// which hold it).
var MaxScheduledEnqueueAt = time.Date(9999, 12, 31, 23, 59, 59, 999_999_900, time.UTC)

// maxEntityName is the longest queue or topic name Service Bus takes.
const maxEntityName = 260

// checkEntityName checks a queue or topic name (or a subscription's path,
// which the destination check refuses later with its own words) as Service
// Bus's naming rules have it: at most 260 characters; segments separated by
// single slashes, none empty (so no slash at either end); each segment of
// letters, digits, periods, hyphens and underscores; no segment starting
// with $ (the broker's own, such as $DeadLetterQueue).
func checkEntityName(name string) error {
	if n := utf8.RuneCountInString(name); n > maxEntityName {
		return fmt.Errorf("%d characters is too long for a queue or topic name: at most %d", n, maxEntityName)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" {
			return fmt.Errorf("%q is not a queue or topic name: it may not start or end with a slash, or hold two in a row", name)
		}
		for _, r := range seg {
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '.' && r != '-' && r != '_' {
				return fmt.Errorf("%q is not a queue or topic name: %q is not allowed; names hold letters, digits, '.', '-', '_' and '/'", name, r)
			}
		}
	}
	return nil
}
