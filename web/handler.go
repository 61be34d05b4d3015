package web

import (
	"net/http"

	"github.com/dlqdash/dlqdash/views"
)

// handlerFunc is a handler that reports failure by returning an error; the
// adapters below turn it into an answer with the one classifier (errors.go).
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle adapts a page's handlerFunc to http.Handler: errors become the
// error page.
func (s *Server) handle(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := views.WithFeatures(r.Context(), views.Features{Jobs: s.jobs != nil, Audit: s.audit != nil, Alerts: s.alerts != nil})
		ctx = views.WithViewer(ctx, viewerOf(ctx))
		if s.hub != nil {
			// Before the handler reads anything: see Hub.Seq.
			ctx = views.WithLiveSeq(ctx, s.hub.Seq())
		}
		r = r.WithContext(ctx)
		if err := h(w, r); err != nil {
			s.serveError(w, r, err)
		}
	})
}

// api adapts an API handler: errors become {"error": {...}} answers.
func (s *Server) api(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.serveAPIError(w, r, err)
		}
	})
}
