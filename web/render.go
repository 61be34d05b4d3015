package web

import (
	"bytes"
	"fmt"
	"net/http"

	"github.com/a-h/templ"
)

// render writes c with status 200, or returns the error so the adapter can
// serve an error page instead of half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, c templ.Component) error {
	return s.write(w, r, http.StatusOK, c)
}

func (s *Server) write(w http.ResponseWriter, r *http.Request, status int, c templ.Component) error {
	// Render into a buffer first: an error halfway through must not leave a
	// 200 with a truncated page behind.
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(buf.Bytes())
	}
	return nil
}

// renderStatus is used by the error adapter, which has nowhere left to send
// a rendering error but the log and a plain-text fallback.
func (s *Server) renderStatus(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	if err := s.write(w, r, status, c); err != nil {
		s.logger.ErrorContext(r.Context(), "render error page", "request_id", requestID(r.Context()), "error", err.Error())
		http.Error(w, http.StatusText(status), status)
	}
}
