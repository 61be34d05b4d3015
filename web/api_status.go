package web

import (
	"net/http"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/web/apijson"
)

// showStatus answers GET /api/v1/status: how fresh the catalog is.
func (s *Server) showStatus(w http.ResponseWriter, r *http.Request) error {
	q, err := newQuery(r)
	if err != nil {
		return err
	}
	if err := q.done(); err != nil {
		return err
	}
	st := dlq.Status{Healthy: false, Error: "catalog not running"}
	if s.status != nil {
		st = s.status.Status()
	}
	if st.Namespace == "" {
		st.Namespace = s.ns
	}
	sts := s.namespaceStatuses()
	if sc := scopeFrom(r.Context()); !sc.all {
		// Access rules: the namespaces the identity may view, and their
		// summary.
		sts = scopeStatuses(sc, sts)
		st = dlq.Summarize(sts)
	}
	writeJSON(w, r, http.StatusOK, apijson.NewStatus(s.replica, st, sts))
	return nil
}

// namespaceStatuses is each namespace's freshness: the status source's own
// when it reads several namespaces (dlq.StatusSet), else the one.
func (s *Server) namespaceStatuses() []dlq.Status {
	if s.status == nil {
		return nil
	}
	if set, ok := s.status.(interface{ Namespaces() []dlq.Status }); ok {
		return set.Namespaces()
	}
	st := s.status.Status()
	if st.Namespace == "" {
		st.Namespace = s.ns
	}
	return []dlq.Status{st}
}
