package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/dlqdash/dlqdash/views"
	"github.com/dlqdash/dlqdash/web/apijson"
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
		ctx := views.WithFeatures(r.Context(), views.Features{Jobs: s.jobs != nil, Audit: s.audit != nil})
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

// serveError writes the error page for err. Server errors are logged once,
// with the request id the page shows; their text never reaches the browser.
func (s *Server) serveError(w http.ResponseWriter, r *http.Request, err error) {
	v := views.ErrorView{}
	switch {
	case errors.Is(err, ErrNotFound):
		v.Status, v.Title, v.Message = http.StatusNotFound, "Not found", "There is nothing at this address."
	case isFieldError(err):
		fe, _ := fieldError(err)
		v.Status, v.Title, v.Message = http.StatusBadRequest, "Check the address", "The parameter “"+fe.Field+"” cannot be used: "+fe.Message
	case errors.Is(err, errCrossOrigin):
		v.Status, v.Title, v.Message = http.StatusForbidden, "Request refused", "This request came from another site and was refused."
	case errors.Is(err, errForbidden):
		v.Status, v.Title, v.Message = http.StatusForbidden, "Not allowed", "You cannot do this: "+err.Error()+"."
	case errors.Is(err, errUnauthenticated):
		v.Status, v.Title = http.StatusUnauthorized, "Not signed in"
		v.Message = "dlqdash did not receive your identity. Open dlqdash through the address of its sign-in proxy."
	case errors.As(err, new(*signInError)):
		v.Status, v.Title, v.Message = http.StatusBadRequest, "Sign-in failed", err.Error()+" Sign in again to continue."
		v.SignIn = s.signIn != nil
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

// apiError is an API error with the status, code and words it answers with.
type apiError struct {
	status int
	code   string
	param  string
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

// invalidArgument is a 400 naming the bad query parameter.
func invalidArgument(param, format string, a ...any) error {
	return &apiError{status: http.StatusBadRequest, code: "invalid_argument", param: param, msg: fmt.Sprintf(format, a...)}
}

// notFound is a 404 saying what is missing.
func notFound(format string, a ...any) error {
	return &apiError{status: http.StatusNotFound, code: "not_found", msg: fmt.Sprintf(format, a...)}
}

// The catalog's errors are recognised by behaviour: web must not import the
// store that makes them.
type (
	notFoundError     interface{ NotFound() bool }
	invalidParamError interface{ InvalidParameter() string }
)

// serveAPIError writes err as {"error": {...}}. Like serveError it is the one
// place API errors are mapped and logged; a 500 carries a request id and
// never the error's text.
func (s *Server) serveAPIError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		ae *apiError
		nf notFoundError
		ip invalidParamError
	)
	d := apijson.ErrorDetail{}
	status := http.StatusInternalServerError
	switch {
	case errors.As(err, &ae):
		status, d.Code, d.Parameter, d.Message = ae.status, ae.code, ae.param, ae.msg
	case errors.As(err, &ip):
		status, d.Code, d.Parameter, d.Message = http.StatusBadRequest, "invalid_argument", ip.InvalidParameter(), ip.(error).Error()
	case errors.Is(err, errForbidden):
		status, d.Code, d.Message = http.StatusForbidden, "permission_denied", err.Error()
	case errors.Is(err, ErrNotFound), errors.As(err, &nf) && nf.NotFound():
		status, d.Code, d.Message = http.StatusNotFound, "not_found", "there is nothing at this address"
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return // the client went away
	default:
		d.Code, d.RequestID = "internal", requestID(r.Context())
		d.Message = "dlqdash could not complete this request; the server log has the details under request id " + d.RequestID
		s.logger.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("request_id", d.RequestID),
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.String("error", err.Error()))
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="dlqdash"`)
	}
	writeJSON(w, r, status, apijson.Error{Error: d})
}

func isFieldError(err error) bool {
	_, ok := fieldError(err)
	return ok
}
