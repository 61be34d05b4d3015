package web

import (
	"fmt"
	"net/http"
	"slices"

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
	if err := q.done(); err != nil {
		return err
	}
	gs, err := s.catalog.ListGroups(r.Context())
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	out := struct {
		Groups []apijson.Group `json:"groups"`
	}{Groups: []apijson.Group{}}
	for _, g := range gs {
		if (g.Present == 0 && !withGone) || (entity != "" && !slices.Contains(g.Entities, entity)) {
			continue
		}
		out.Groups = append(out.Groups, apijson.NewGroup(g))
	}
	writeJSON(w, r, http.StatusOK, out)
	return nil
}
