package web

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/views"
	"github.com/dlqdash/dlqdash/web/apijson"
)

// Jobs is the replay engine as the dashboard uses it. *replay.Engine
// implements it.
type Jobs interface {
	Submit(ctx context.Context, req replay.Request) (replay.Plan, replay.Job, error)
	Pause(ctx context.Context, id int64) (replay.Job, error)
	Resume(ctx context.Context, id int64) (replay.Job, error)
	Cancel(ctx context.Context, id int64) (replay.Job, error)
	Job(ctx context.Context, id int64) (replay.Job, error)
	ListJobs(ctx context.Context, limit int, cursor string) ([]replay.Job, string, error)
	// ListJobsIn lists the jobs of one namespace (their messages').
	ListJobsIn(ctx context.Context, namespace string, limit int, cursor string) ([]replay.Job, string, error)
	ListItems(ctx context.Context, jobID int64, state replay.ItemState, limit int, cursor string) ([]replay.Item, string, error)
	History(ctx context.Context, messageID int64) ([]replay.Item, []dlq.Record, error)
}

// maxJobRequest bounds a POST /api/v1/jobs body: 100,000 ids fit.
const maxJobRequest = 4 << 20

// jobRequest is the body of POST /api/v1/jobs (docs/api.md).
type jobRequest struct {
	Action      string      `json:"action"`
	IDs         []string    `json:"ids"`
	Filter      *dlq.Filter `json:"filter"`
	Destination string      `json:"destination"`
	// DestinationNamespace sends the copies to another configured
	// namespace; only a request that names it does.
	DestinationNamespace string   `json:"destination_namespace"`
	RatePerSecond        *float64 `json:"rate_per_second"`
	ScheduledEnqueueAt   *string  `json:"scheduled_enqueue_at"`
	AcknowledgeFanOut    bool     `json:"acknowledge_fan_out"`
	AllowPoison          bool     `json:"allow_poison"`
	Reason               string   `json:"reason"`
	DryRun               bool     `json:"dry_run"`
	// The canary and ramp (docs/api.md).
	CanaryCount         *int     `json:"canary_count"`
	CanaryWatch         *string  `json:"canary_watch"`
	PauseOnRedeadletter *float64 `json:"pause_on_redeadletter"`
	Ramp                *string  `json:"ramp"`
	// Entity, Subqueue and SequenceNumbers select present messages by
	// sequence number (deferred messages, as the application knows them).
	Entity          string  `json:"entity"`
	Subqueue        string  `json:"subqueue"`
	SequenceNumbers []int64 `json:"sequence_numbers"`
	// Namespace is the entity's namespace, when several have the path.
	Namespace string `json:"namespace"`
	// Edit is a fix applied to each selected message (a bulk edit, admin).
	Edit *replay.Transform `json:"edit"`
}

// decodeBody reads a JSON request body into v: one object, known keys only.
func decodeBody(r *http.Request, v any, max int64) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return invalidArgument("body", "send the request as JSON (Content-Type: application/json), not %q", ct)
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, max+1))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var fe *dlq.FilterError
		if errors.As(err, &fe) {
			return err // a filter's value, named by dlq
		}
		if strings.HasPrefix(err.Error(), "json: unknown field ") {
			field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			if field == "" {
				return invalidArgument("body", "unknown field %q: a field needs a name", field)
			}
			return invalidArgument(field, "unknown field %q", field)
		}
		return invalidArgument("body", "the body is not the JSON object this endpoint takes: %v", err)
	}
	if dec.More() {
		return invalidArgument("body", "the body holds more than one JSON value")
	}
	return nil
}

// selection reads ids, a filter, or an entity's sequence numbers; the
// engine checks that exactly one is given.
func (jr *jobRequest) selection() (replay.Selection, error) {
	var sel replay.Selection
	for _, s := range jr.IDs {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return sel, invalidArgument("ids", "%q is not a message id", s)
		}
		sel.IDs = append(sel.IDs, id)
	}
	sel.Entity, sel.SubQueue, sel.SequenceNumbers = strings.TrimSpace(jr.Entity), dlq.SubQueue(jr.Subqueue), jr.SequenceNumbers
	sel.Namespace = strings.TrimSpace(jr.Namespace)
	sel.Filter = jr.Filter // read by dlq.Filter's UnmarshalJSON
	return sel, nil
}

func (jr *jobRequest) request() (replay.Request, error) {
	sel, err := jr.selection()
	if err != nil {
		return replay.Request{}, err
	}
	req := replay.Request{Action: replay.Action(jr.Action), Selection: sel,
		Destination: strings.TrimSpace(jr.Destination), DestinationNamespace: strings.TrimSpace(jr.DestinationNamespace),
		AcknowledgeFanOut: jr.AcknowledgeFanOut,
		AllowPoison:       jr.AllowPoison, Reason: jr.Reason, DryRun: jr.DryRun}
	if jr.RatePerSecond != nil {
		req.RatePerSecond = *jr.RatePerSecond
	}
	if jr.ScheduledEnqueueAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *jr.ScheduledEnqueueAt)
		if err != nil {
			return req, invalidArgument("scheduled_enqueue_at", "must be an RFC 3339 time such as 2026-11-22T10:42:07Z, not %q", *jr.ScheduledEnqueueAt)
		}
		req.ScheduledEnqueueAt = &t
	}
	req.Canary, err = canaryOptions(jr.CanaryCount, jr.CanaryWatch, jr.PauseOnRedeadletter, jr.Ramp)
	return req, err
}

// canaryOptions reads the canary and ramp options (the engine checks their
// values).
func canaryOptions(count *int, watch *string, pause *float64, ramp *string) (replay.Canary, error) {
	c := replay.Canary{PauseOnRedeadletter: pause}
	if count != nil {
		c.Count = *count
	}
	for _, d := range []struct {
		name string
		s    *string
		to   *time.Duration
	}{{"canary_watch", watch, &c.Watch}, {"ramp", ramp, &c.Ramp}} {
		if d.s == nil || *d.s == "" {
			continue
		}
		v, err := time.ParseDuration(*d.s)
		if err != nil {
			return c, invalidArgument(d.name, `must be a duration such as "30s" or "5m", not %q`, *d.s)
		}
		*d.to = v
	}
	return c, nil
}

// createJob answers POST /api/v1/jobs: a dry run (200) or a new job (201).
func (s *Server) createJob(w http.ResponseWriter, r *http.Request) error {
	if s.jobs == nil {
		return errNoJobs
	}
	var jr jobRequest
	if err := decodeBody(r, &jr, maxJobRequest); err != nil {
		return err
	}
	req, err := jr.request()
	if err != nil {
		return err
	}
	if jr.Edit != nil {
		// A bulk edit is an edit and replay of each message: admin in
		// the namespaces it reads and sends to.
		req.Allow = s.sendAllowed(r, auth.Admin, "editing and replaying there")
		return s.submitBulkEdit(w, r, req, jr.Edit)
	}
	req.Allow = s.sendAllowed(r, auth.Operator, doingOf(req.Action))
	return s.submit(w, r, req)
}

// doingOf words a job's action for a refusal in a namespace.
func doingOf(a replay.Action) string {
	if a == replay.ActionDiscard {
		return "discarding there"
	}
	return "replaying there"
}

// submitBulkEdit answers POST /api/v1/jobs with an edit: each message's
// edit worked out, then the job (or its dry run, with each message's diff).
func (s *Server) submitBulkEdit(w http.ResponseWriter, r *http.Request, req replay.Request, tr *replay.Transform) error {
	out, err := s.applyBulkEdit(r, &req, tr)
	if err != nil {
		return err
	}
	plan, job, err := s.jobs.Submit(r.Context(), req)
	if err != nil {
		return err
	}
	if req.DryRun {
		writeJSON(w, r, http.StatusOK, bulkDryRun{DryRun: apijson.NewDryRun(plan), Edit: newBulkEditJSON(out)})
		return nil
	}
	w.Header().Set("Location", "/api/v1/jobs/"+strconv.FormatInt(job.ID, 10))
	writeJSON(w, r, http.StatusCreated, apijson.NewJob(job))
	return nil
}

// bulkDryRun is a bulk edit's dry run: the plan and what the edit does.
type bulkDryRun struct {
	apijson.DryRun
	Edit bulkEditJSON `json:"edit"`
}

type bulkEditJSON struct {
	Changed   int               `json:"changed"`
	Unchanged int               `json:"unchanged"`
	Failed    int               `json:"failed"`
	Messages  []bulkMessageJSON `json:"messages"`
}

type bulkMessageJSON struct {
	ID         string             `json:"id"`
	Changed    bool               `json:"changed"`
	Error      *string            `json:"error"`
	BodyDiff   []diffLineJSON     `json:"body_diff"`
	Properties []propertyDiffJSON `json:"properties"`
}

type diffLineJSON struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

type propertyDiffJSON struct {
	Key      string `json:"key"`
	Change   string `json:"change"`
	Original string `json:"original"`
	Copy     string `json:"copy"`
}

// newBulkEditJSON: the counts, and the messages that cannot take the edit
// and a sample of the others with their diffs.
func newBulkEditJSON(out []bulkOutcome) bulkEditJSON {
	var b bulkEditJSON
	b.Changed, b.Unchanged, b.Failed = bulkCounts(out)
	b.Messages = []bulkMessageJSON{}
	for _, rv := range bulkReviews(out) {
		m := bulkMessageJSON{ID: idText(rv.Item.ID), BodyDiff: []diffLineJSON{}, Properties: []propertyDiffJSON{}}
		if rv.Error != "" {
			e := rv.Error
			m.Error = &e
		} else {
			m.Changed = rv.Review.BodyChanged
			for _, l := range rv.Review.BodyDiff {
				if l.Kind != views.DiffSame {
					m.BodyDiff = append(m.BodyDiff, diffLineJSON{l.Kind, l.Text})
				}
			}
			for _, c := range rv.Review.Properties {
				m.Properties = append(m.Properties, propertyDiffJSON{c.Key, c.Kind, c.Old, c.New})
			}
		}
		b.Messages = append(b.Messages, m)
	}
	return b
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request, req replay.Request) error {
	plan, job, err := s.jobs.Submit(r.Context(), req)
	if err != nil {
		return err
	}
	if req.DryRun {
		writeJSON(w, r, http.StatusOK, apijson.NewDryRun(plan))
		return nil
	}
	w.Header().Set("Location", "/api/v1/jobs/"+strconv.FormatInt(job.ID, 10))
	writeJSON(w, r, http.StatusCreated, apijson.NewJob(job))
	return nil
}

// editRequest is the body of POST /api/v1/messages/{id}/replay: one
// message, edited, replayed.
type editRequest struct {
	BodyBase64            *string         `json:"body_base64"`
	Body                  *string         `json:"body"`
	ApplicationProperties json.RawMessage `json:"application_properties"`
	Destination           string          `json:"destination"`
	DestinationNamespace  string          `json:"destination_namespace"`
	ScheduledEnqueueAt    *string         `json:"scheduled_enqueue_at"`
	AcknowledgeFanOut     bool            `json:"acknowledge_fan_out"`
	AllowPoison           bool            `json:"allow_poison"`
	Reason                string          `json:"reason"`
	DryRun                bool            `json:"dry_run"`
}

// replayMessage answers POST /api/v1/messages/{id}/replay: edit and replay
// one message (the catalog keeps the original bytes).
func (s *Server) replayMessage(w http.ResponseWriter, r *http.Request) error {
	if s.jobs == nil {
		return errNoJobs
	}
	id, err := messageID(r)
	if err != nil {
		return err
	}
	var er editRequest
	if err := decodeBody(r, &er, maxEditRequest); err != nil {
		return err
	}
	req, err := er.request(id)
	if err != nil {
		return err
	}
	req.Allow = s.sendAllowed(r, auth.Admin, "editing and replaying there")
	if !req.DryRun {
		return s.submit(w, r, req)
	}
	// A dry run answers with what the copy would be, against the
	// original: the bulk edit's "edit" object, for this one message.
	rec, _, err := s.readMessage(r, id)
	if err != nil {
		return err
	}
	plan, _, err := s.jobs.Submit(r.Context(), req)
	if err != nil {
		return err
	}
	e := req.Selection.Edit
	if e == nil {
		e = &replay.Edit{}
	}
	body := rec.Body
	if e.Body != nil {
		body = e.Body
	}
	out := []bulkOutcome{{rec: rec, body: body, changed: string(body) != string(rec.Body), props: e.ApplicationProperties}}
	writeJSON(w, r, http.StatusOK, bulkDryRun{DryRun: apijson.NewDryRun(plan), Edit: newBulkEditJSON(out)})
	return nil
}

// maxEditRequest bounds an edit's body (JSON or the page's form).
const maxEditRequest = 8 << 20

// request is the job an edit asks for: message id replayed with the edit
// (none for a plain replay). The API and the message page's form share it.
func (er *editRequest) request(id int64) (replay.Request, error) {
	edit, err := er.edit()
	if err != nil {
		return replay.Request{}, err
	}
	jr := jobRequest{Action: string(replay.ActionReplay), IDs: []string{strconv.FormatInt(id, 10)}, Destination: er.Destination,
		DestinationNamespace: er.DestinationNamespace,
		ScheduledEnqueueAt:   er.ScheduledEnqueueAt, AcknowledgeFanOut: er.AcknowledgeFanOut, AllowPoison: er.AllowPoison,
		Reason: er.Reason, DryRun: er.DryRun}
	req, err := jr.request()
	if err != nil {
		return req, err
	}
	req.Selection.Edit = edit
	return req, nil
}

func (er *editRequest) edit() (*replay.Edit, error) {
	var e replay.Edit
	switch {
	case er.BodyBase64 != nil && er.Body != nil:
		return nil, invalidArgument("body", "give body (text) or body_base64, not both")
	case er.BodyBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*er.BodyBase64)
		if err != nil {
			return nil, invalidArgument("body_base64", "not standard base64: %v", err)
		}
		e.Body = b
	case er.Body != nil:
		e.Body = []byte(*er.Body)
	}
	if len(er.ApplicationProperties) > 0 && !bytes.Equal(bytes.TrimSpace(er.ApplicationProperties), []byte("null")) {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(er.ApplicationProperties, &obj); err != nil {
			return nil, invalidArgument("application_properties", "must be a JSON object")
		}
		for k, v := range obj {
			if err := checkPropertyValue(v); err != nil {
				return nil, invalidArgument("application_properties", "%s: %v", k, err)
			}
		}
		e.ApplicationProperties = er.ApplicationProperties
	}
	if e.Body == nil && e.ApplicationProperties == nil {
		return nil, nil // a plain replay of one message
	}
	return &e, nil
}

// checkPropertyValue accepts what a Service Bus property can hold in the
// stable form: a string, number, boolean, null, or {"base64": "..."}.
func checkPropertyValue(raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case string, float64, bool, nil:
		return nil
	case map[string]any:
		if b, ok := x["base64"].(string); ok && len(x) == 1 {
			if _, err := base64.StdEncoding.DecodeString(b); err != nil {
				return fmt.Errorf("base64: %v", err)
			}
			return nil
		}
	}
	return errors.New(`want a string, number, boolean, null or {"base64": "..."}`)
}

// jobID reads the {id} of a jobs path (the API's and the pages'): a 404
// without a replay engine or for anything but a canonical positive decimal.
func (s *Server) jobID(r *http.Request) (int64, error) {
	if s.jobs == nil {
		return 0, errNoJobs
	}
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != v {
		return 0, notFound("there is no job with id %q", v)
	}
	return id, nil
}

// jobAction is a person's pause, resume or cancel.
type jobAction func(Jobs, context.Context, int64) (replay.Job, error)

// controlJobAt runs do on the job of r's path: the API's control and the
// job page's buttons.
func (s *Server) controlJobAt(r *http.Request, do jobAction) (replay.Job, error) {
	id, err := s.jobID(r)
	if err != nil {
		return replay.Job{}, err
	}
	if s.limited() {
		// Operator in the job's namespace; a resume sends, so in the
		// namespace its copies go to as well.
		j, err := s.jobs.Job(r.Context(), id)
		if err != nil {
			return j, err
		}
		if err := s.need(r, j.Namespace, auth.Operator, "controlling its jobs"); err != nil {
			return replay.Job{}, err
		}
		if resuming(r) && j.DestinationNamespace != "" && j.DestinationNamespace != j.Namespace {
			if err := s.need(r, j.DestinationNamespace, auth.Operator, "resuming a job that replays into it"); err != nil {
				return replay.Job{}, err
			}
		}
	}
	j, err := do(s.jobs, r.Context(), id)
	if err != nil {
		return j, fmt.Errorf("control job %d: %w", id, err)
	}
	return j, nil
}

// resuming reports whether r is a job's resume (its path ends so).
func resuming(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/resume") }

// viewJob reads a job for r's identity: a 403 when access rules leave it
// no role in the job's namespace.
func (s *Server) viewJob(r *http.Request, id int64) (replay.Job, error) {
	j, err := s.jobs.Job(r.Context(), id)
	if err != nil {
		return j, err
	}
	if s.limited() {
		if err := s.need(r, j.Namespace, auth.Viewer, "viewing its jobs"); err != nil {
			return replay.Job{}, err
		}
	}
	return j, nil
}

// listJobs answers GET /api/v1/jobs.
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) error {
	q, err := newQuery(r)
	if err != nil {
		return err
	}
	limit, err := q.limit(50, 500)
	if err != nil {
		return err
	}
	jobs, _, next, err := s.readJobs(r, q, limit)
	if err != nil {
		return err
	}
	out := struct {
		Jobs       []apijson.Job `json:"jobs"`
		NextCursor *string       `json:"next_cursor"`
	}{Jobs: []apijson.Job{}}
	for _, j := range jobs {
		out.Jobs = append(out.Jobs, apijson.NewJob(j))
	}
	out.NextCursor = nextCursor(next)
	writeJSON(w, r, http.StatusOK, out)
	return nil
}

// showJob answers GET /api/v1/jobs/{id}.
func (s *Server) showJob(w http.ResponseWriter, r *http.Request) error {
	id, err := s.jobID(r)
	if err != nil {
		return err
	}
	j, err := s.viewJob(r, id)
	if err != nil {
		return err
	}
	writeJSON(w, r, http.StatusOK, apijson.NewJob(j))
	return nil
}

// parseItemState reads the state filter of a job's messages ("" for all).
func parseItemState(q *query) (replay.ItemState, error) {
	st, err := q.one("state")
	if err != nil {
		return "", err
	}
	switch s := replay.ItemState(st); s {
	case "", replay.ItemPending, replay.ItemLocked, replay.ItemSent, replay.ItemCompleted, replay.ItemFailed, replay.ItemSkipped,
		replay.ItemCancelled:
		return s, nil
	}
	return "", invalidArgument("state", "unknown state %q: want pending, locked, sent, completed, failed, skipped or cancelled", st)
}

// listJobMessages answers GET /api/v1/jobs/{id}/messages.
func (s *Server) listJobMessages(w http.ResponseWriter, r *http.Request) error {
	q, err := newQuery(r)
	if err != nil {
		return err
	}
	limit, err := q.limit(50, 500)
	if err != nil {
		return err
	}
	m, err := s.readJobItems(r, q, limit)
	if err != nil {
		return err
	}
	out := struct {
		Messages   []apijson.JobItem `json:"messages"`
		NextCursor *string           `json:"next_cursor"`
	}{Messages: []apijson.JobItem{}}
	for _, it := range m.items {
		out.Messages = append(out.Messages, apijson.NewJobItem(it))
	}
	out.NextCursor = nextCursor(m.next)
	writeJSON(w, r, http.StatusOK, out)
	return nil
}

// readJobs reads a page of the jobs, newest first, as the API and the jobs
// page list them: the cursor from q, then no other parameter (the caller
// has read the limit, or has none).
func (s *Server) readJobs(r *http.Request, q *query, limit int) (jobs []replay.Job, cursor, next string, err error) {
	if s.jobs == nil {
		return nil, "", "", errNoJobs
	}
	if cursor, err = q.one("cursor"); err != nil {
		return nil, "", "", err
	}
	namespace, err := q.one("namespace")
	if err != nil {
		return nil, "", "", err
	}
	if err := q.done(); err != nil {
		return nil, "", "", err
	}
	if err := s.namespaceParam(r, namespace); err != nil {
		return nil, "", "", err
	}
	if sc := scopeFrom(r.Context()); !sc.all && namespace == "" {
		jobs, next, err = s.jobsInScope(r.Context(), sc, limit, cursor)
		return jobs, cursor, next, err
	}
	if jobs, next, err = s.jobs.ListJobsIn(r.Context(), namespace, limit, cursor); err != nil {
		return nil, "", "", fmt.Errorf("list jobs: %w", err)
	}
	return jobs, cursor, next, nil
}

// maxScopeReads bounds the reads of one page of jobsInScope.
const maxScopeReads = 20

// jobsInScope is a page of the jobs of the scope's namespaces, newest
// first. The engine lists one namespace's jobs or every one, so it reads
// every job's page and keeps the scope's: each read asks for no more than
// the page still lacks, so every job read is either kept or passed, and
// the engine's cursor after the read is the page's. After maxScopeReads
// reads the page may be short (its cursor goes on).
func (s *Server) jobsInScope(ctx context.Context, sc scope, limit int, cursor string) ([]replay.Job, string, error) {
	var out []replay.Job
	next := cursor
	for range maxScopeReads {
		jobs, n, err := s.jobs.ListJobsIn(ctx, "", limit-len(out), next)
		if err != nil {
			return nil, "", fmt.Errorf("list jobs: %w", err)
		}
		for _, j := range jobs {
			if sc.has(j.Namespace) {
				out = append(out, j)
			}
		}
		next = n
		if next == "" || len(out) >= limit {
			break
		}
	}
	return out, next, nil
}

// jobItemsRead is a page of a job's messages (readJobItems).
type jobItemsRead struct {
	id           int64
	state        replay.ItemState // "" for every state
	items        []replay.Item
	cursor, next string
}

// readJobItems reads a page of the messages of the job at r's path, as the
// API and the job's page list them: the state filter and the cursor from
// q, then no other parameter.
func (s *Server) readJobItems(r *http.Request, q *query, limit int) (jobItemsRead, error) {
	var m jobItemsRead
	var err error
	if m.id, err = s.jobID(r); err != nil {
		return m, err
	}
	if m.state, err = parseItemState(q); err != nil {
		return m, err
	}
	if m.cursor, err = q.one("cursor"); err != nil {
		return m, err
	}
	if err := q.done(); err != nil {
		return m, err
	}
	if s.limited() {
		if _, err := s.viewJob(r, m.id); err != nil {
			return m, err
		}
	}
	if m.items, m.next, err = s.jobs.ListItems(r.Context(), m.id, m.state, limit, m.cursor); err != nil {
		return m, fmt.Errorf("job %d's messages: %w", m.id, err)
	}
	return m, nil
}

// controlJob answers POST /api/v1/jobs/{id}/pause, /resume and /cancel.
func (s *Server) controlJob(do jobAction) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		j, err := s.controlJobAt(r, do)
		if err != nil {
			return err
		}
		writeJSON(w, r, http.StatusOK, apijson.NewJob(j))
		return nil
	}
}
