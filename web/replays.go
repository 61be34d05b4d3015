package web

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/views"
)

// The replay flow of the pages, without script: the message list's
// selection form (or a message's page) POSTs to /replays, which answers
// with a dry run and the job's options; that form POSTs to /jobs, which
// creates the job and redirects to its page, or re-renders the form with
// what was refused. Both read the same form, so "Check again" (the form's
// second button, to /replays) previews exactly what "Start" would submit.

// maxReplayForm bounds a replay form's body: 100,000 ids fit.
const maxReplayForm = maxJobRequest

// readReplayForm reads a replay form: the selection (ids, or all_matching
// with the filter as filter.<name> fields, read by the message list's own
// parser) and the options. The view is the form as typed, returned even
// when the request is refused, so that the page re-renders it.
func readReplayForm(w http.ResponseWriter, r *http.Request) (views.ReplayForm, replay.Request, error) {
	var form views.ReplayForm
	var req replay.Request
	r.Body = http.MaxBytesReader(w, r.Body, maxReplayForm)
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return form, req, invalidArgument("id", "the selection is too large: select up to %d messages by id, or select all messages matching a filter", replay.MaxIDs)
		}
		return form, req, invalidArgument("form", "the form could not be read: %v", err)
	}
	// The form's fields as queries, so that they are read with the
	// message list's rules: blank fields are absent, times are UTC
	// datetime-local values, unknown names are refused.
	opts := &query{values: url.Values{}, read: map[string]bool{}, form: true}
	filter := &query{values: url.Values{}, read: map[string]bool{}, form: true}
	for name, vs := range r.PostForm {
		vs = slices.DeleteFunc(slices.Clone(vs), func(v string) bool { return strings.TrimSpace(v) == "" })
		if len(vs) == 0 {
			continue
		}
		if f, ok := strings.CutPrefix(name, "filter."); ok {
			filter.values[f] = vs
		} else {
			opts.values[name] = vs
		}
	}
	// The view first, from the raw values: it is what re-renders.
	form.Action = opts.values.Get("action")
	form.AllMatching = truthy(opts.values.Get("all_matching"))
	if !form.AllMatching {
		form.IDs = opts.values["id"]
	}
	for _, name := range dlq.FilterKeys() {
		if name == "all" {
			continue // the confirm form's own checkbox, never a hidden field
		}
		for _, v := range filter.values[name] {
			form.Filter = append(form.Filter, views.Param{Name: name, Value: v})
		}
	}
	form.Destination = opts.values.Get("destination")
	form.DestinationNamespace = opts.values.Get("destination_namespace")
	form.Rate = opts.values.Get("rate_per_second")
	form.Scheduled = datetimeLocal(opts.values.Get("scheduled_enqueue_at"))
	form.AcknowledgeFanOut = truthy(opts.values.Get("acknowledge_fan_out"))
	form.AllowPoison = truthy(opts.values.Get("allow_poison"))
	form.Reason = r.PostForm.Get("reason")
	form.CanaryCount, form.CanaryWatch = opts.values.Get("canary_count"), opts.values.Get("canary_watch")
	form.PauseOnRedeadletter, form.Ramp = opts.values.Get("pause_on_redeadletter"), opts.values.Get("ramp")
	form.CanaryOffered = truthy(opts.values.Get("canary_offered"))
	// The bulk edit's fields, as typed (an empty "with" is a deletion, so
	// they are read raw).
	form.EditJSONSet, form.EditFind, form.EditWith = r.PostForm.Get("edit_json_set"), r.PostForm.Get("edit_find"), r.PostForm.Get("edit_with")
	for _, name := range []string{"edit_json_set", "edit_find", "edit_with"} {
		opts.read[name] = true
	}

	action, err := opts.one("action")
	if err != nil {
		return form, req, err
	}
	req.Action = replay.Action(action)
	all, err := opts.boolean("all_matching")
	if err != nil {
		return form, req, err
	}
	ids := opts.all("id")
	if all {
		f, err := parseFilter(filter)
		if err == nil {
			err = filter.done()
		}
		if err != nil {
			return form, req, filterFieldError(err)
		}
		req.Selection.Filter = &f
		// Every message in the catalog: the confirm form asks for
		// filter.all, which the engine requires of such a filter.
		form.Everything, form.ConfirmAll = f.Unconditional(), f.All
	} else {
		sel := make([]int64, 0, len(ids))
		for _, s := range ids {
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil || id <= 0 {
				return form, req, invalidArgument("id", "%q is not a message id", s)
			}
			sel = append(sel, id)
		}
		if req.Selection.IDs = sel; len(sel) == 0 {
			return form, req, invalidArgument("id", "no messages are selected: tick the messages to act on, or “Select all … matching this filter”")
		}
	}
	if req.Destination, err = opts.one("destination"); err != nil {
		return form, req, err
	}
	req.Destination = strings.TrimSpace(req.Destination)
	if req.DestinationNamespace, err = opts.one("destination_namespace"); err != nil {
		return form, req, err
	}
	req.DestinationNamespace = strings.TrimSpace(req.DestinationNamespace)
	if v, err := opts.one("rate_per_second"); err != nil {
		return form, req, err
	} else if v != "" {
		rate, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(rate) || math.IsInf(rate, 0) {
			return form, req, invalidArgument("rate_per_second", "the rate must be a number of messages per second, not %q", v)
		}
		req.RatePerSecond = rate
	}
	if req.ScheduledEnqueueAt, err = opts.time("scheduled_enqueue_at"); err != nil {
		return form, req, err
	}
	if req.AcknowledgeFanOut, err = opts.boolean("acknowledge_fan_out"); err != nil {
		return form, req, err
	}
	if req.AllowPoison, err = opts.boolean("allow_poison"); err != nil {
		return form, req, err
	}
	if req.Reason, err = opts.one("reason"); err != nil {
		return form, req, err
	}
	if req.Canary, err = readCanaryForm(opts); err != nil {
		return form, req, err
	}
	return form, req, opts.done()
}

// truthy is a checkbox's value as query.boolean reads it.
func truthy(v string) bool { return v == "true" || v == "1" }

// dryRun is req as a dry run.
func dryRun(req replay.Request) replay.Request {
	req.DryRun = true // a discard's reason may still be untyped: the engine allows that in a dry run
	if f := req.Selection.Filter; f != nil && f.Unconditional() && !f.All {
		// Every message, not yet confirmed: the dry run counts them so
		// that the confirm form can ask with the number (a dry run
		// changes nothing; the real submission still needs filter.all).
		all := *f
		all.All = true
		req.Selection.Filter = &all
	}
	return req
}

// backURL returns to the message list the selection came from.
func backURL(form views.ReplayForm) string {
	if !form.AllMatching || len(form.Filter) == 0 {
		return "/messages"
	}
	v := url.Values{}
	for _, p := range form.Filter {
		v.Add(p.Name, p.Value)
	}
	return "/messages?" + v.Encode()
}

// confirmReplay answers POST /replays: the dry run of the selection with
// the options given, and the form that starts the job.
func (s *Server) confirmReplay(w http.ResponseWriter, r *http.Request) error {
	return s.replayForm(w, r, true)
}

// startReplay answers POST /jobs: it submits the confirmed form and
// redirects to the new job's page.
func (s *Server) startReplay(w http.ResponseWriter, r *http.Request) error {
	return s.replayForm(w, r, false)
}

// replayForm reads a replay form and submits it: as a dry run (preview,
// POST /replays) or for real (POST /jobs). Either refusal re-renders the
// confirm page.
func (s *Server) replayForm(w http.ResponseWriter, r *http.Request, preview bool) error {
	if s.jobs == nil {
		return errNoJobs
	}
	form, req, err := readReplayForm(w, r)
	c := views.ReplayConfirm{Form: form, BackURL: backURL(form), Namespaces: s.sendableNamespaces(r),
		CanEdit: auth.FromContext(r.Context()).Role.Includes(auth.Admin)}
	var tr *replay.Transform
	if err == nil {
		tr, err = formTransform(form)
	}
	if err != nil {
		// The options could not be read: the selection alone can be shown.
		req.Allow = s.sendAllowed(r, auth.Operator, doingOf(req.Action))
		return s.refuseReplay(w, r, c, err, replay.Plan{}, dryRun(selectionOf(req)), true)
	}
	if preview {
		req = dryRun(req)
	}
	req.Allow = s.sendAllowed(r, auth.Operator, doingOf(req.Action))
	if tr != nil {
		// A bulk edit needs admin where it reads (applyBulkEdit checks
		// each message's namespace before its diff) and sends.
		req.Allow = s.sendAllowed(r, auth.Admin, "editing and replaying there")
		out, err := s.applyBulkEdit(r, &req, tr)
		if len(out) > 0 {
			c.Bulk = &views.BulkPreview{Messages: bulkReviews(out)}
			c.Bulk.Changed, c.Bulk.Unchanged, c.Bulk.Failed = bulkCounts(out)
		}
		if err != nil {
			return s.refuseReplay(w, r, c, err, replay.Plan{}, dryRun(selectionOf(req)), true)
		}
	}
	plan, job, err := s.jobs.Submit(r.Context(), req)
	if err != nil {
		// A selection spanning namespaces is refused (a job acts on one):
		// the page offers each namespace's share instead.
		split, spans, serr := s.splitByNamespace(r, form, req, err)
		if serr != nil {
			return serr
		}
		c.Split, c.SplitSpans = split, spans
	}
	switch {
	case err != nil && preview:
		// The dry run with these options was refused: the selection alone
		// can be shown.
		return s.refuseReplay(w, r, c, err, plan, dryRun(selectionOf(req)), true)
	case err != nil:
		// A creation was refused. A dry run of the same request checks
		// everything but what only a creation checks (a discard's reason,
		// active jobs, the guards), so it shows the whole plan.
		return s.refuseReplay(w, r, c, err, plan, dryRun(req), false)
	case preview:
		c.Plan = planView(plan, false)
		c.Form = proposeCanary(c.Form, plan)
		return s.render(w, r, views.ReplayConfirmPage(c))
	}
	http.Redirect(w, r, views.JobURL(job.ID), http.StatusSeeOther)
	return nil
}

// refuseReplay re-renders the confirm page with what was refused, shown
// first, and the status the API would answer (400, 404, 409, 422, 503).
// The plan shown is the one the refusal came with; failing that, the one
// dry run given (preview, of the selection alone if selectionOnly). Errors
// that are not the request's fault become the 500 page.
func (s *Server) refuseReplay(w http.ResponseWriter, r *http.Request, c views.ReplayConfirm, err error,
	plan replay.Plan, preview replay.Request, selectionOnly bool) error {
	status, fe, ok := formProblem(err)
	if !ok {
		return err
	}
	fe.Message = pageWords(fe.Message)
	c.Error = fe
	hasSelection := len(preview.Selection.IDs) > 0 || preview.Selection.Filter != nil
	switch {
	case plan.Summary.Total > 0:
		c.Plan = planView(plan, false)
	case !hasSelection || status == http.StatusServiceUnavailable || status == http.StatusForbidden:
		// Nothing to summarise, or the broker would refuse the dry run
		// too, or the selection is not the caller's to act on (access
		// rules): no plan of it is shown.
	default:
		// The one dry run of a refusal.
		p, _, err := s.jobs.Submit(r.Context(), preview)
		if err == nil || p.Summary.Total > 0 {
			c.Plan = planView(p, selectionOnly || err != nil)
		}
	}
	return s.write(w, r, status, views.ReplayConfirmPage(c))
}

// pageWords turns the engine's words for API callers into the confirm
// page's: the page has a checkbox where the API has acknowledge_fan_out.
func pageWords(s string) string {
	return strings.ReplaceAll(s, "set acknowledge_fan_out", "tick “I understand …” below (it names who receives the copies)")
}

// selectionOf is req without its options: the action and the selection.
func selectionOf(req replay.Request) replay.Request {
	return replay.Request{Action: req.Action, Selection: req.Selection, Allow: req.Allow}
}

// planView is a plan as the confirm page shows it; selectionOnly drops
// the targets and warnings (they were not checked with the options given).
func planView(p replay.Plan, selectionOnly bool) *views.ReplayPlan {
	sum := p.Summary
	v := &views.ReplayPlan{Total: sum.Total, Gone: sum.Gone, Scheduled: sum.Scheduled, Deferred: sum.Deferred,
		Poison: sum.Poison, InJobs: sum.InJobs, SelectionOnly: selectionOnly}
	for _, src := range sum.Sources {
		v.Sources = append(v.Sources, views.ReplaySource{Entity: text(src.Entity), SubQueue: string(src.SubQueue), Count: src.Count})
	}
	for _, rec := range sum.Sample[:min(len(sum.Sample), replay.SampleSize)] {
		v.Sample = append(v.Sample, messageItem(rec))
	}
	if selectionOnly {
		return v
	}
	for _, w := range p.Warnings {
		v.Warnings = append(v.Warnings, pageWords(text(w)))
	}
	for _, t := range p.Targets {
		tv := views.ReplayTarget{Source: text(t.Source), Destination: text(t.Path), Kind: string(t.Kind),
			DuplicateDetection: t.DuplicateDetection, FanOut: t.FanOut, SubscriptionsListed: t.SubscriptionsListed}
		for _, sub := range t.Subscriptions {
			vs := views.ReplaySubscription{Name: text(sub.Name), Receives: string(sub.Receives()),
				Copies: sub.Copies, Of: sub.Of, Known: sub.CopiesKnown}
			for _, r := range sub.Rules {
				if r.Filter != "" && (r.Kind == replay.RuleSQL || r.Kind == replay.RuleCorrelation) {
					vs.Filters = append(vs.Filters, text(r.Filter))
				}
			}
			tv.Subscriptions = append(tv.Subscriptions, vs)
		}
		if t.DuplicateDetection {
			tv.DuplicateDetectionWindow = t.DuplicateDetectionWindow.Round(time.Second).String()
		}
		v.Targets = append(v.Targets, tv)
	}
	return v
}

// The canary the confirm form proposes for a replay of more than
// proposeCanaryOver messages, the first time it is shown.
const (
	proposeCanaryOver       = 100
	proposedCanaryCount     = "10"
	proposedPauseOnRedeadLt = "0.5"
)

// proposeCanary fills the canary fields of a large replay's form the first
// time the form is shown; after that (canary_offered), what the person
// typed or emptied stays.
func proposeCanary(f views.ReplayForm, plan replay.Plan) views.ReplayForm {
	if f.Action != string(replay.ActionReplay) || f.CanaryOffered || plan.Summary.Total <= proposeCanaryOver {
		return f
	}
	if f.CanaryCount == "" {
		f.CanaryCount = proposedCanaryCount
	}
	if f.PauseOnRedeadletter == "" {
		f.PauseOnRedeadletter = proposedPauseOnRedeadLt
	}
	return f
}

// readCanaryForm reads the canary and ramp fields (the engine checks
// their values).
func readCanaryForm(opts *query) (replay.Canary, error) {
	var c replay.Canary
	if _, err := opts.boolean("canary_offered"); err != nil {
		return c, err
	}
	if v, err := opts.one("canary_count"); err != nil {
		return c, err
	} else if v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return c, invalidArgument("canary_count", "the canary must be a whole number of messages, not %q", v)
		}
		c.Count = n
	}
	if v, err := opts.one("pause_on_redeadletter"); err != nil {
		return c, err
	} else if v != "" {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(f) {
			return c, invalidArgument("pause_on_redeadletter", "want a fraction from 0 to 1, not %q", v)
		}
		c.PauseOnRedeadletter = &f
	}
	for _, d := range []struct {
		name string
		to   *time.Duration
	}{{"canary_watch", &c.Watch}, {"ramp", &c.Ramp}} {
		v, err := opts.one(d.name)
		if err != nil {
			return c, err
		}
		if v == "" {
			continue
		}
		if *d.to, err = time.ParseDuration(strings.TrimSpace(v)); err != nil {
			return c, invalidArgument(d.name, `must be a duration such as "30s" or "5m", not %q`, v)
		}
	}
	return c, nil
}

// formTransform is the confirm form's bulk edit (nil when its fields are
// empty): each line of edit_json_set is PATH = VALUE, VALUE JSON or else
// taken as a string; edit_find (with edit_with) one find-and-replace.
func formTransform(f views.ReplayForm) (*replay.Transform, error) {
	var tr replay.Transform
	for i, line := range strings.Split(f.EditJSONSet, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		path, val, ok := strings.Cut(line, "=")
		if !ok {
			return nil, invalidArgument("edit_json_set", "line %d: write PATH = VALUE, such as $.customer.id = \"C-42\"", i+1)
		}
		path, val = strings.TrimSpace(path), strings.TrimSpace(val)
		raw := json.RawMessage(val)
		if !json.Valid(raw) {
			b, _ := json.Marshal(val)
			raw = b
		}
		if tr.JSONSet == nil {
			tr.JSONSet = map[string]json.RawMessage{}
		}
		tr.JSONSet[path] = raw
	}
	if f.EditFind != "" {
		tr.Replace = []replay.Replacement{{Find: f.EditFind, With: f.EditWith}}
	}
	if tr.Empty() {
		return nil, nil
	}
	if err := tr.Check(); err != nil {
		var inv *replay.InvalidError
		if errors.As(err, &inv) && inv.Param == "edit.json_set" {
			return nil, invalidArgument("edit_json_set", "%s", inv.Msg)
		}
		return nil, invalidArgument("edit_find", "%v", err)
	}
	return &tr, nil
}

// splitByNamespace is the selection's share in each configured namespace
// when a refusal (refused) came from a selection spanning several (a job
// acts on one): a 400 saying so, or the access rules refusing one of them.
// Each share the identity may view is listed, with the form narrowed to it
// (the filter's namespace, or the ids there) where it may act; spans is how
// many namespaces hold some. With no share to offer it returns nil; an error is the
// catalog's, counting the shares.
func (s *Server) splitByNamespace(r *http.Request, form views.ReplayForm, req replay.Request, refused error) (shares []views.NamespaceShare, spans int, err error) {
	var invalid *replay.InvalidError
	var forbidden *forbiddenError
	if len(s.namespaces) < 2 || !(errors.As(refused, &invalid) || errors.As(refused, &forbidden)) {
		return nil, 0, nil
	}
	ctx := r.Context()
	counts := map[string]int64{}
	ids := map[string][]string{}
	switch sel := req.Selection; {
	case sel.Filter != nil:
		if sel.Filter.Namespace != "" {
			return nil, 0, nil
		}
		for _, ns := range s.namespaces {
			f := *sel.Filter
			f.Namespace, f.All = ns, false
			n, err := s.catalog.CountMessages(ctx, f, 0)
			if err != nil {
				return nil, 0, err
			}
			counts[ns] = n
		}
	case len(sel.IDs) > 0:
		for chunk := range slices.Chunk(sel.IDs, idChunk) {
			recs, err := s.catalog.MessagesByID(ctx, chunk, dlq.Filter{})
			if err != nil {
				return nil, 0, err
			}
			for _, m := range recs {
				counts[m.Namespace]++
				ids[m.Namespace] = append(ids[m.Namespace], strconv.FormatInt(m.ID, 10))
			}
		}
	default:
		return nil, 0, nil
	}
	for _, ns := range s.namespaces {
		if counts[ns] > 0 {
			spans++
		}
	}
	if spans < 2 {
		return nil, 0, nil
	}
	role := auth.Operator
	if form.EditJSONSet != "" || form.EditFind != "" {
		role = auth.Admin // a bulk edit, as replayForm asks
	}
	var out []views.NamespaceShare
	for _, ns := range s.namespaces {
		if counts[ns] == 0 || !s.roleIn(ctx, ns).Includes(auth.Viewer) {
			continue
		}
		sh := views.NamespaceShare{Namespace: ns, Count: counts[ns]}
		if s.roleIn(ctx, ns).Includes(role) {
			f := form
			if f.AllMatching {
				f.Filter = append(slices.Clone(form.Filter), views.Param{Name: "namespace", Value: ns})
				f.Everything, f.ConfirmAll = false, false
			} else {
				f.IDs = ids[ns]
			}
			sh.Form = &f
		}
		out = append(out, sh)
	}
	if !slices.ContainsFunc(out, func(sh views.NamespaceShare) bool { return sh.Form != nil }) {
		return nil, 0, nil // nothing to offer: the refusal alone
	}
	return out, spans, nil
}

// idChunk is how many ids one MessagesByID call takes (the store's bound).
const idChunk = 1000
