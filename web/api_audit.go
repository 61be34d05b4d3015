package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/web/apijson"
)

// AuditSource lists the audit trail. *store.Store implements it; errors
// about an input (a cursor it did not issue) have an InvalidParameter()
// string method naming it.
type AuditSource interface {
	// ListAudit returns a page of the entries matching f, newest first, and
	// the cursor of the next page ("" after the last).
	ListAudit(ctx context.Context, f audit.Filter, limit int, cursor string) ([]audit.Entry, string, error)
	// ListAuditActions is ListAudit one row per action (a job's entries
	// of one per-message action grouped), newest first.
	ListAuditActions(ctx context.Context, f audit.Filter, limit int, cursor string) ([]audit.ActionRow, string, error)
	// AuditAction returns one action by id; an error with a NotFound()
	// bool method when there is none.
	AuditAction(ctx context.Context, id int64) (audit.ActionRow, error)
	// AuditActionMessages returns a page of an action's message ids.
	AuditActionMessages(ctx context.Context, id int64, limit int, cursor string) ([]string, string, error)
	// ScanAudit streams the entries matching f in seq order (the export).
	ScanAudit(ctx context.Context, f audit.Filter, fn func(audit.Entry) error) error
}

// Page sizes of GET /api/v1/audit.
const (
	defaultAuditLimit = 50
	maxAuditLimit     = 500
)

// parseAuditFilter reads the audit trail's filters, the API's and the audit
// page's: actor, action (checked against the vocabulary), since, until,
// namespace and job.
func parseAuditFilter(q *query) (audit.Filter, error) {
	var f audit.Filter
	var err error
	if f.Actor, err = q.one("actor"); err != nil {
		return f, err
	}
	if f.Action, err = q.one("action"); err != nil {
		return f, err
	}
	if f.Action != "" && !audit.KnownAction(f.Action) {
		return f, invalidArgument("action", "unknown action %q: want one of %s", f.Action, strings.Join(audit.Actions(), ", "))
	}
	if f.Since, err = q.time("since"); err != nil {
		return f, err
	}
	if f.Until, err = q.time("until"); err != nil {
		return f, err
	}
	if f.Namespace, err = q.one("namespace"); err != nil {
		return f, err
	}
	f.Namespace = strings.TrimSpace(f.Namespace)
	if f.Job, err = q.one("job"); err != nil {
		return f, err
	}
	if f.Job = strings.TrimSpace(f.Job); f.Job != "" {
		if n, err := strconv.ParseInt(f.Job, 10, 64); err != nil || n <= 0 || strconv.FormatInt(n, 10) != f.Job {
			return f, invalidArgument("job", "job must be a job's id, a whole number such as 12, not %q", f.Job)
		}
	}
	if f.Since != nil && f.Until != nil && !f.Until.After(*f.Since) {
		return f, invalidArgument("until", "until must be after since")
	}
	return f, nil
}

// listAudit answers GET /api/v1/audit: a page of the audit trail, newest
// first, filtered by actor, action and time (at in [since, until)).
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) error {
	q, err := newQuery(r)
	if err != nil {
		return err
	}
	limit, err := q.limit(defaultAuditLimit, maxAuditLimit)
	if err != nil {
		return err
	}
	es, _, next, err := s.readAudit(r, q, limit)
	if err != nil {
		return err
	}
	out := struct {
		Entries    []auditEntry `json:"entries"`
		NextCursor *string      `json:"next_cursor"`
	}{Entries: make([]auditEntry, 0, len(es))}
	for _, e := range es {
		out.Entries = append(out.Entries, auditEntry{AuditEntry: apijson.NewAuditEntry(e), Namespace: auditNamespace(e)})
	}
	out.NextCursor = nextCursor(next)
	writeJSON(w, r, http.StatusOK, out)
	return nil
}

// auditEntry is the API's audit entry with its namespace: the params'
// namespace (a job's, its messages', a denied request's), null for an
// entry that names none. Export keeps apijson.AuditEntry as it is.
type auditEntry struct {
	apijson.AuditEntry
	Namespace *string `json:"namespace"`
}

// auditNamespace is the namespace e's params name, if any.
func auditNamespace(e audit.Entry) *string {
	var p struct {
		Namespace *string `json:"namespace"`
	}
	if json.Unmarshal(e.Params, &p) != nil || p.Namespace == nil || *p.Namespace == "" {
		return nil
	}
	return p.Namespace
}

// errNoAudit answers the audit trail's endpoint and page of a dashboard
// that keeps none.
var errNoAudit = notFound("this dashboard keeps no audit trail")

// readAudit reads a page of the audit trail, newest first, as the API and
// the audit page list it: the filter and the cursor from q, then no other
// parameter (the caller has read the limit, or has none).
func (s *Server) readAudit(r *http.Request, q *query, limit int) (es []audit.Entry, cursor, next string, err error) {
	if s.audit == nil {
		return nil, "", "", errNoAudit
	}
	f, err := s.auditFilter(r, q)
	if err != nil {
		return nil, "", "", err
	}
	if cursor, err = q.one("cursor"); err != nil {
		return nil, "", "", err
	}
	if err := q.done(); err != nil {
		return nil, "", "", err
	}
	es, next, err = s.audit.ListAudit(r.Context(), f, limit, cursor)
	if err != nil {
		return nil, "", "", fmt.Errorf("list audit log: %w", err)
	}
	return es, cursor, next, nil
}

// auditFilter reads the filter from q and limits it to what the request's
// identity may see: the entries of the namespaces it may view, and those of
// none. A namespace it may not view is refused.
func (s *Server) auditFilter(r *http.Request, q *query) (audit.Filter, error) {
	f, err := parseAuditFilter(q)
	if err != nil {
		return f, err
	}
	if err := s.namespaceParam(r, f.Namespace); err != nil {
		return f, err
	}
	if sc := scopeFrom(r.Context()); !sc.all {
		f.Visible = sc.names
	}
	return f, nil
}

// readAuditActions reads a page of the trail one row per action, newest
// first, as the API and the audit page list it.
func (s *Server) readAuditActions(r *http.Request, q *query, limit int) (rows []audit.ActionRow, f audit.Filter, cursor, next string, err error) {
	if s.audit == nil {
		return nil, f, "", "", errNoAudit
	}
	if f, err = s.auditFilter(r, q); err != nil {
		return nil, f, "", "", err
	}
	if cursor, err = q.one("cursor"); err != nil {
		return nil, f, "", "", err
	}
	if err := q.done(); err != nil {
		return nil, f, "", "", err
	}
	rows, next, err = s.audit.ListAuditActions(r.Context(), f, limit, cursor)
	if err != nil {
		return nil, f, "", "", fmt.Errorf("list audit actions: %w", err)
	}
	return rows, f, cursor, next, nil
}

// auditAction is an action of GET /api/v1/audit/actions.
type auditAction struct {
	ID                   int64           `json:"id"`
	LastSeq              int64           `json:"last_seq"`
	FirstAt              apijson.Time    `json:"first_at"`
	LastAt               apijson.Time    `json:"last_at"`
	Actor                string          `json:"actor"`
	Action               string          `json:"action"`
	Outcome              string          `json:"outcome"`
	JobID                *string         `json:"job_id"`
	Namespace            *string         `json:"namespace"`
	DestinationNamespace *string         `json:"destination_namespace"`
	Entries              int64           `json:"entries"`
	MessageCount         int64           `json:"message_count"`
	Params               json.RawMessage `json:"params"`
	Hash                 string          `json:"hash"`
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func newAuditAction(a audit.ActionRow) auditAction {
	params := a.Params
	if !json.Valid(params) {
		params = json.RawMessage("null")
	}
	return auditAction{ID: a.ID, LastSeq: a.LastSeq, FirstAt: apijson.Time(a.FirstAt), LastAt: apijson.Time(a.LastAt),
		Actor: a.Actor, Action: a.Action, Outcome: a.Outcome, JobID: orNull(a.JobID), Namespace: orNull(a.Namespace),
		DestinationNamespace: orNull(a.DestinationNamespace), Entries: a.Entries, MessageCount: a.Messages, Params: params, Hash: a.Hash}
}

// listAuditActions answers GET /api/v1/audit/actions: the trail one row per
// action, newest first, with GET /api/v1/audit's filters and job.
func (s *Server) listAuditActions(w http.ResponseWriter, r *http.Request) error {
	q, err := newQuery(r)
	if err != nil {
		return err
	}
	limit, err := q.limit(defaultAuditLimit, maxAuditLimit)
	if err != nil {
		return err
	}
	rows, _, _, next, err := s.readAuditActions(r, q, limit)
	if err != nil {
		return err
	}
	out := struct {
		Actions    []auditAction `json:"actions"`
		NextCursor *string       `json:"next_cursor"`
	}{Actions: make([]auditAction, 0, len(rows)), NextCursor: nextCursor(next)}
	for _, a := range rows {
		out.Actions = append(out.Actions, newAuditAction(a))
	}
	writeJSON(w, r, http.StatusOK, out)
	return nil
}

// Page sizes of an action's message ids.
const (
	defaultAuditMessagesLimit = 500
	maxAuditMessagesLimit     = 5000
)

// visibleAuditAction is the action the path names, if the request's
// identity may see it (an action naming a namespace it may not view is not
// found, as the list leaves it out).
func (s *Server) visibleAuditAction(r *http.Request) (audit.ActionRow, error) {
	if s.audit == nil {
		return audit.ActionRow{}, errNoAudit
	}
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != v {
		return audit.ActionRow{}, notFound("there is no audit action with id %q", v)
	}
	a, err := s.audit.AuditAction(r.Context(), id)
	if err != nil {
		if catalogNotFound(err) {
			return audit.ActionRow{}, notFound("there is no audit action with id %d", id)
		}
		return audit.ActionRow{}, fmt.Errorf("read audit action %d: %w", id, err)
	}
	if a.Namespace != "" && !scopeFrom(r.Context()).has(a.Namespace) {
		return audit.ActionRow{}, notFound("there is no audit action with id %d", id)
	}
	return a, nil
}

// listAuditActionMessages answers GET /api/v1/audit/actions/{id}/messages:
// a page of the message ids the action's entries hold, in the order they
// were recorded.
func (s *Server) listAuditActionMessages(w http.ResponseWriter, r *http.Request) error {
	a, err := s.visibleAuditAction(r)
	if err != nil {
		return err
	}
	q, err := newQuery(r)
	if err != nil {
		return err
	}
	limit, cursor, err := q.page(defaultAuditMessagesLimit, maxAuditMessagesLimit)
	if err != nil {
		return err
	}
	if err := q.done(); err != nil {
		return err
	}
	ids, next, err := s.audit.AuditActionMessages(r.Context(), a.ID, limit, cursor)
	if err != nil {
		return fmt.Errorf("list audit action %d's messages: %w", a.ID, err)
	}
	if ids == nil {
		ids = []string{}
	}
	writeJSON(w, r, http.StatusOK, struct {
		MessageIDs []string `json:"message_ids"`
		NextCursor *string  `json:"next_cursor"`
	}{ids, nextCursor(next)})
	return nil
}

// exportAudit answers GET /api/v1/audit/export: every entry the filter
// keeps (GET /api/v1/audit's filters and job), in seq order, as `dlqdash
// audit export` writes them: JSON lines (format=jsonl, the default) or CSV
// (format=csv). It streams from one snapshot: nothing is buffered beyond
// the writer's 64 KiB, whatever the trail's size. The page accepts empty
// fields as its form leaves them.
func (s *Server) exportAudit(w http.ResponseWriter, r *http.Request) error {
	if s.audit == nil {
		return errNoAudit
	}
	q, err := newFormQuery(r)
	if err != nil {
		return err
	}
	format, err := q.one("format")
	if err != nil {
		return err
	}
	switch format {
	case "":
		format = "jsonl"
	case "jsonl", "csv":
	default:
		return invalidArgument("format", "format must be jsonl or csv, not %q", format)
	}
	f, err := s.auditFilter(r, q)
	if err != nil {
		return err
	}
	if err := q.done(); err != nil {
		return err
	}
	ctype := "application/x-ndjson; charset=utf-8"
	if format == "csv" {
		ctype = "text/csv; charset=utf-8"
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Disposition", `attachment; filename="dlqdash-audit.`+format+`"`)
	h.Set("Cache-Control", "no-store")
	out := &sentWriter{w: w}
	bw := bufio.NewWriterSize(out, 64<<10)
	ex, err := apijson.NewAuditExporter(bw, format)
	if err != nil {
		return err
	}
	err = s.audit.ScanAudit(r.Context(), f, ex.Write)
	if err == nil {
		err = ex.Finish()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil && !out.sent {
		h.Del("Content-Disposition")
		return fmt.Errorf("export audit trail: %w", err)
	}
	if err != nil {
		// The status went with the first 64 KiB: a failure after that
		// can only cut the download short.
		s.logger.Warn("audit export cut short", "error", err)
	}
	return nil
}

// sentWriter records whether anything was written to w.
type sentWriter struct {
	w    io.Writer
	sent bool
}

func (s *sentWriter) Write(p []byte) (int, error) {
	s.sent = true
	return s.w.Write(p)
}
