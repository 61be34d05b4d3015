package web

import (
	"fmt"
	"net/http"

	"github.com/dlqdash/dlqdash/web/apijson"
)

// listEntities answers GET /api/v1/entities: the namespace's queues, topics
// and subscriptions with their counts. Entities deleted from the namespace
// are left out unless include_deleted=true (then deleted_at says when).
func (s *Server) listEntities(w http.ResponseWriter, r *http.Request) error {
	q, err := newQuery(r)
	if err != nil {
		return err
	}
	withDeleted, err := q.boolean("include_deleted")
	if err != nil {
		return err
	}
	namespace, err := q.one("namespace")
	if err != nil {
		return err
	}
	if err := q.done(); err != nil {
		return err
	}
	if err := s.namespaceParam(r, namespace); err != nil {
		return err
	}
	es, err := s.catalog.ListEntities(r.Context())
	if err != nil {
		return fmt.Errorf("list entities: %w", err)
	}
	es = scopeEntities(scopeFrom(r.Context()), es)
	out := struct {
		Entities []apijson.Entity `json:"entities"`
	}{Entities: []apijson.Entity{}}
	for _, e := range es {
		if (e.DeletedAt != nil && !withDeleted) || (namespace != "" && e.Namespace != namespace) {
			continue
		}
		out.Entities = append(out.Entities, apijson.NewEntity(e))
	}
	writeJSON(w, r, http.StatusOK, out)
	return nil
}
