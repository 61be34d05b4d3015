package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
}

// Page sizes of GET /api/v1/audit.
const (
	defaultAuditLimit = 50
	maxAuditLimit     = 500
)

// parseAuditFilter reads the audit trail's filters, the API's and the audit
// page's: actor, action (checked against the vocabulary), since and until.
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
	f, err := parseAuditFilter(q)
	if err != nil {
		return nil, "", "", err
	}
	if cursor, err = q.one("cursor"); err != nil {
		return nil, "", "", err
	}
	if err := q.done(); err != nil {
		return nil, "", "", err
	}
	if err := s.namespaceParam(r, f.Namespace); err != nil {
		return nil, "", "", err
	}
	if sc := scopeFrom(r.Context()); !sc.all {
		// Access rules: the entries of the namespaces the identity may
		// view, and those of none.
		f.Visible = sc.names
	}
	es, next, err = s.audit.ListAudit(r.Context(), f, limit, cursor)
	if err != nil {
		return nil, "", "", fmt.Errorf("list audit log: %w", err)
	}
	return es, cursor, next, nil
}
