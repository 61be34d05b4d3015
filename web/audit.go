package web

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/views"
)

// auditPageSize is the audit page's page size (actions); auditPreview is
// how many of an action's messages its row lists before "All N messages";
// auditMessagesPageSize is the page size of an action's messages page.
const (
	auditPageSize         = 50
	auditPreview          = 20
	auditMessagesPageSize = 500
)

// auditFilterParams are the audit page's filter parameters, in order.
var auditFilterParams = []string{"job", "actor", "action", "namespace", "since", "until"}

// listAuditPage renders GET /audit: the audit trail one row per action,
// newest first, filtered as GET /api/v1/audit/actions filters it (the same
// parser), a page at a time. A filter it cannot use re-renders the form
// with a 400 naming the field.
func (s *Server) listAuditPage(w http.ResponseWriter, r *http.Request) error {
	if s.audit == nil {
		return errNoAudit
	}
	raw := r.URL.Query()
	l := views.AuditList{Actions: audit.Actions(), Filter: views.AuditFilter{Actor: raw.Get("actor"), Action: raw.Get("action"),
		Namespace: raw.Get("namespace"), Job: raw.Get("job"), Since: datetimeLocal(raw.Get("since")), Until: datetimeLocal(raw.Get("until"))},
		Namespaces: scopeNames(scopeFrom(r.Context()), s.namespaces)}
	if err := s.fillAuditList(r, &l); err != nil {
		status, fe, ok := formProblem(err)
		if !ok {
			return err
		}
		l.Error = fe
		return s.write(w, r, status, views.AuditPage(l))
	}
	return s.render(w, r, views.AuditPage(l))
}

func (s *Server) fillAuditList(r *http.Request, l *views.AuditList) error {
	q, err := newFormQuery(r)
	if err != nil {
		return err
	}
	rows, _, cursor, next, err := s.readAuditActions(r, q, auditPageSize)
	if err != nil {
		return err
	}
	for _, a := range rows {
		v, err := s.auditActionView(r, a, auditPreview)
		if err != nil {
			return err
		}
		l.Rows = append(l.Rows, v)
	}
	params := url.Values{}
	for _, name := range auditFilterParams {
		if v := q.values.Get(name); v != "" {
			params.Set(name, v)
		}
	}
	with := func(k, v string) string {
		p := url.Values{}
		for k, v := range params {
			p[k] = v
		}
		p.Set(k, v)
		return p.Encode()
	}
	l.ExportCSV = "/api/v1/audit/export?" + with("format", "csv")
	l.ExportJSONL = "/api/v1/audit/export?" + with("format", "jsonl")
	if next != "" {
		l.NextURL = "/audit?" + with("cursor", next)
	}
	if cursor != "" {
		l.FirstURL = "/audit"
		if len(params) > 0 {
			l.FirstURL += "?" + params.Encode()
		}
	}
	return nil
}

// auditActionView is a as the page shows it, with the first preview of its
// messages (none for 0).
func (s *Server) auditActionView(r *http.Request, a audit.ActionRow, preview int) (views.AuditAction, error) {
	v := views.AuditAction{ID: a.ID, LastSeq: a.LastSeq, FirstAt: a.FirstAt, LastAt: a.LastAt, Entries: a.Entries, Messages: a.Messages,
		Actor: text(actorLabel(a.Actor)), Action: text(a.Action), Outcome: text(a.Outcome), Namespace: text(a.Namespace),
		Params: text(string(a.Params)), Hash: a.Hash}
	if n, ok := catalogID(a.JobID); ok {
		v.JobID, v.JobURL = a.JobID, views.JobURL(n)
	}
	if a.Messages == 0 || preview == 0 {
		return v, nil
	}
	ids, next, err := s.audit.AuditActionMessages(r.Context(), a.ID, preview, "")
	if err != nil {
		return v, err
	}
	v.Preview = messageRefs(ids)
	if next != "" || int64(len(ids)) < a.Messages {
		v.AllURL = "/audit/actions/" + strconv.FormatInt(a.ID, 10)
	}
	return v, nil
}

// catalogID reads an id dlqdash wrote (a message's, a job's): a positive
// decimal without leading zeros.
func catalogID(id string) (int64, bool) {
	n, err := strconv.ParseInt(id, 10, 64)
	return n, err == nil && n > 0 && strconv.FormatInt(n, 10) == id
}

// messageRefs are ids as links to their messages. The ids are the
// catalog's, written by dlqdash; only what is one is linked, whatever the
// trail holds.
func messageRefs(ids []string) []views.MessageRef {
	out := make([]views.MessageRef, 0, len(ids))
	for _, id := range ids {
		ref := views.MessageRef{Text: text(id)}
		if n, ok := catalogID(id); ok {
			ref.URL = views.MessageURL(n)
		}
		out = append(out, ref)
	}
	return out
}

// showAuditActionPage renders GET /audit/actions/{id}: one action's
// messages, auditMessagesPageSize at a time. The page's own parameter from
// (the place of its first message, for the words "Messages 501–1,000")
// rides along with the cursor.
func (s *Server) showAuditActionPage(w http.ResponseWriter, r *http.Request) error {
	a, err := s.visibleAuditAction(r)
	if err != nil {
		return err
	}
	q, err := newFormQuery(r)
	if err != nil {
		return err
	}
	cursor, err := q.one("cursor")
	if err != nil {
		return err
	}
	fromText, err := q.one("from")
	if err != nil {
		return err
	}
	if err := q.done(); err != nil {
		return err
	}
	from := int64(1)
	if n, err := strconv.ParseInt(fromText, 10, 64); err == nil && n > 0 && cursor != "" {
		from = n
	}
	ids, next, err := s.audit.AuditActionMessages(r.Context(), a.ID, auditMessagesPageSize, cursor)
	if err != nil {
		return err
	}
	v, err := s.auditActionView(r, a, 0)
	if err != nil {
		return err
	}
	p := views.AuditActionMessages{Action: v, Messages: messageRefs(ids), From: from}
	base := "/audit/actions/" + strconv.FormatInt(a.ID, 10)
	if next != "" {
		p.NextURL = base + "?" + url.Values{"cursor": {next}, "from": {strconv.FormatInt(from+int64(len(ids)), 10)}}.Encode()
	}
	if cursor != "" {
		p.FirstURL = base
	}
	return s.render(w, r, views.AuditActionPage(p))
}
