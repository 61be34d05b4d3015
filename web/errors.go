package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/dlqdash/dlqdash/views"
)

// ErrNotFound makes the adapter answer with the 404 page.
var ErrNotFound = errors.New("not found")

// handlerFunc is a handler that reports failure by returning an error; the
// adapter below turns it into a page.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle adapts a handlerFunc to http.Handler. It is the one place where
// errors become pages and the one place they are logged.
func (s *Server) handle(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.serveError(w, r, err)
		}
	})
}

// serveError writes the error page for err. Server errors are logged once,
// with the request id the page shows; their text never reaches the browser.
func (s *Server) serveError(w http.ResponseWriter, r *http.Request, err error) {
	v := views.ErrorView{}
	switch {
	case errors.Is(err, ErrNotFound):
		v.Status, v.Title, v.Message = http.StatusNotFound, "Not found", "There is nothing at this address."
	case errors.Is(err, errCrossOrigin):
		v.Status, v.Title, v.Message = http.StatusForbidden, "Request refused", "This request came from another site and was refused."
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The browser went away; nobody is left to read a page.
		return
	default:
		v.Status, v.Title, v.Message = http.StatusInternalServerError, "Something went wrong", "dlqdash could not complete this request."
		v.RequestID = requestID(r.Context())
		s.logger.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("request_id", v.RequestID),
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.String("error", err.Error()))
	}
	s.renderStatus(w, r, v.Status, views.ErrorPage(v))
}
