package web

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/views"
)

// auditPageSize is the audit page's page size; auditMessageLinks is how many
// of an entry's messages it links before "+N more".
const (
	auditPageSize     = 50
	auditMessageLinks = 5
)

// auditFilterParams are the audit page's filter parameters, in order.
var auditFilterParams = []string{"actor", "action", "namespace", "since", "until"}

// listAuditPage renders GET /audit: the audit trail newest first, filtered
// as GET /api/v1/audit filters it (the same parser), a page at a time. A
// filter it cannot use re-renders the form with a 400 naming the field.
func (s *Server) listAuditPage(w http.ResponseWriter, r *http.Request) error {
	if s.audit == nil {
		return errNoAudit
	}
	raw := r.URL.Query()
	l := views.AuditList{Actions: audit.Actions(), Filter: views.AuditFilter{Actor: raw.Get("actor"), Action: raw.Get("action"),
		Namespace: raw.Get("namespace"), Since: datetimeLocal(raw.Get("since")), Until: datetimeLocal(raw.Get("until"))},
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
	es, cursor, next, err := s.readAudit(r, q, auditPageSize)
	if err != nil {
		return err
	}
	for _, e := range es {
		l.Entries = append(l.Entries, auditEntryView(e))
	}
	params := url.Values{}
	for _, name := range auditFilterParams {
		if v := q.values.Get(name); v != "" {
			params.Set(name, v)
		}
	}
	if next != "" {
		p := url.Values{}
		for k, v := range params {
			p[k] = v
		}
		p.Set("cursor", next)
		l.NextURL = "/audit?" + p.Encode()
	}
	if cursor != "" {
		l.FirstURL = "/audit"
		if len(params) > 0 {
			l.FirstURL += "?" + params.Encode()
		}
	}
	return nil
}

func auditEntryView(e audit.Entry) views.AuditEntry {
	v := views.AuditEntry{Seq: e.Seq, At: e.At, Actor: text(actorLabel(e.Actor)), Action: text(e.Action), Outcome: text(e.Outcome),
		Params: text(string(e.Params)), Hash: e.Hash}
	if ns := auditNamespace(e); ns != nil {
		v.Namespace = text(*ns)
	}
	for i, id := range e.MessageIDs {
		if i == auditMessageLinks {
			v.MoreMessages = len(e.MessageIDs) - i
			break
		}
		ref := views.MessageRef{Text: text(id)}
		// The ids are the catalog's, written by dlqdash; link only what is
		// one, whatever the trail holds.
		if n, err := strconv.ParseInt(id, 10, 64); err == nil && n > 0 && strconv.FormatInt(n, 10) == id {
			ref.URL = views.MessageURL(n)
		}
		v.Messages = append(v.Messages, ref)
	}
	return v
}
