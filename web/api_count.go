package web

import (
	"fmt"
	"net/http"
)

// countMessages answers GET /api/v1/messages/count: how many messages match
// the filters of GET /api/v1/messages, exactly up to 10,000 (countCap-1);
// beyond that it says "more than" instead of counting on:
// {"count": 10000, "exact": false, "cap": 10000}.
func (s *Server) countMessages(w http.ResponseWriter, r *http.Request) error {
	q, err := newQuery(r)
	if err != nil {
		return err
	}
	f, err := parseFilter(q)
	if err != nil {
		return err
	}
	if err := q.done(); err != nil {
		return err
	}
	f = s.countFilter(r, f)
	empty, err := s.filterScope(r, &f)
	if err != nil {
		return err
	}
	var n int64
	if !empty { // no namespace to view: nothing matches
		if n, err = s.catalog.CountMessages(r.Context(), f, countCap); err != nil {
			return fmt.Errorf("count messages: %w", err)
		}
	}
	out := struct {
		Count int64 `json:"count"`
		Exact bool  `json:"exact"`
		Cap   int64 `json:"cap"`
	}{Count: min(n, countCap-1), Exact: n < countCap, Cap: countCap - 1}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, r, http.StatusOK, out)
	return nil
}
