package web

import (
	"fmt"
	"net/http"

	"github.com/dlqdash/dlqdash/views"
)

// showHome renders the overview.
func (s *Server) showHome(w http.ResponseWriter, r *http.Request) error {
	n, err := s.catalog.EntityCount(r.Context())
	if err != nil {
		return fmt.Errorf("show home: %w", err)
	}
	return s.render(w, r, views.HomePage(views.Home{
		Mode:      s.mode,
		Namespace: s.ns,
		Connected: false, // no broker is wired yet
		Entities:  n,
	}))
}
