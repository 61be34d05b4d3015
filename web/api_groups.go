package web

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/dlqdash/dlqdash/dlq"

	"github.com/dlqdash/dlqdash/web/apijson"
)

// listGroups answers GET /api/v1/groups: failure groups, the largest first.
// Groups with no message left in a dead-letter queue are left out unless
// include_gone=true; entity=PATH keeps the groups seen in that entity.
func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) error {
	q, err := newQuery(r)
	if err != nil {
		return err
	}
	withGone, err := q.boolean("include_gone")
	if err != nil {
		return err
	}
	entity, err := q.one("entity")
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
	gs, err := s.readGroups(r.Context(), withGone, namespace, entity)
	if err != nil {
		return err
	}
	out := struct {
		Groups []apijson.Group `json:"groups"`
	}{Groups: []apijson.Group{}}
	for _, g := range gs {
		out.Groups = append(out.Groups, apijson.NewGroup(g))
	}
	writeJSON(w, r, http.StatusOK, out)
	return nil
}

// readGroups reads the failure groups, the largest first, as the API, the
// groups page and the overview list them: those with a message left in a
// dead-letter queue unless withGone, and those seen in entity if given.
func (s *Server) readGroups(ctx context.Context, withGone bool, namespace, entity string) ([]dlq.GroupSummary, error) {
	gs, err := s.catalog.ListGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	// Access rules: only the namespaces the identity may view count.
	return selectGroups(scopeGroups(scopeFrom(ctx), gs), withGone, namespace, entity), nil
}

// selectGroups keeps the groups with a message left in a dead-letter queue
// (all if withGone) seen in entity (any if "") and, with a namespace, with
// a message left in that namespace (seen there, if withGone).
func selectGroups(gs []dlq.GroupSummary, withGone bool, namespace, entity string) []dlq.GroupSummary {
	out := make([]dlq.GroupSummary, 0, len(gs))
	for _, g := range gs {
		if (g.Present == 0 && !withGone) || (entity != "" && !slices.Contains(g.Entities, entity)) {
			continue
		}
		if namespace != "" && !slices.ContainsFunc(g.Namespaces, func(n dlq.NamespaceCount) bool {
			return n.Name == namespace && (n.Present > 0 || (withGone && n.Total > 0))
		}) {
			continue
		}
		out = append(out, g)
	}
	return out
}
