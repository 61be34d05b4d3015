package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
	"github.com/dlqdash/dlqdash/views"
	"github.com/dlqdash/dlqdash/web/apijson"
)

// The one error classifier. Handlers return errors: their own (below), the
// domain's (replay's, dlq's, the catalog's), or anything else. classify maps
// each to one problem: a status, the API's stable error code, the parameter
// at fault and words a person can act on. The API writes a problem as
// {"error": {...}} (serveAPIError), the pages as the error page (serveError)
// or as the refusal shown on the form that was sent (formProblem), so that a
// page and the API always say the same thing about the same error.

// problem is an error as the dashboard answers it.
type problem struct {
	status int
	code   string // the API's error code (docs/api.md)
	param  string // the parameter at fault, for invalid_argument
	msg    string // words a person can act on; never a server error's text
	// title is the error page's heading ("" for the status's own).
	title string
	// signIn offers to sign in again (a failed sign-in).
	signIn bool
}

// ErrNotFound makes the adapters answer 404: there is nothing at this address.
var ErrNotFound = errors.New("not found")

// apiError is an error that says how it is answered.
type apiError struct {
	status int
	code   string
	param  string
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

// invalidArgument is a 400 naming the bad parameter.
func invalidArgument(param, format string, a ...any) error {
	return &apiError{status: http.StatusBadRequest, code: "invalid_argument", param: param, msg: fmt.Sprintf(format, a...)}
}

// notFound is a 404 saying what is missing.
func notFound(format string, a ...any) error {
	return &apiError{status: http.StatusNotFound, code: "not_found", msg: fmt.Sprintf(format, a...)}
}

// unauthenticated is a 401 saying how to sign in.
func unauthenticated(msg string) error {
	return &apiError{status: http.StatusUnauthorized, code: "unauthenticated", msg: msg}
}

// errNoJobs answers the job endpoints and pages of a dashboard without a
// replay engine.
var errNoJobs = notFound("this dashboard runs no replay engine")

// The catalog's errors are recognised by behaviour: web must not import the
// store that makes them. dlq.FilterError and replay.InvalidError are
// invalidParamErrors too.
type (
	notFoundError     interface{ NotFound() bool }
	invalidParamError interface{ InvalidParameter() string }
)

// catalogNotFound reports whether err is the catalog's "no such message".
func catalogNotFound(err error) bool {
	var nf notFoundError
	return errors.As(err, &nf) && nf.NotFound()
}

// errInternal is the problem of every error not classified: a 500 whose
// text stays in the log.
var errInternal = problem{status: http.StatusInternalServerError, code: "internal", title: "Something went wrong",
	msg: "dlqdash could not complete this request"}

// classify maps err to its problem. ok is false for an error it does not
// know: a server error (errInternal).
func classify(err error) (p problem, ok bool) {
	var (
		ae       *apiError
		inv      *replay.InvalidError
		pre      *replay.PreconditionError
		conflict *replay.ConflictError
		ip       invalidParamError
		si       *signInError
		tl       *tooLargeError
		unknown  *dlq.UnknownEntityError
	)
	switch {
	case err == nil:
		return problem{}, false
	case errors.As(err, &tl):
		return problem{status: http.StatusRequestEntityTooLarge, code: "payload_too_large", title: "Too large", msg: tl.Error()}, true
	case errors.As(err, &ae):
		return problem{status: ae.status, code: ae.code, param: ae.param, msg: ae.msg}, true
	case errors.As(err, &inv):
		return problem{status: http.StatusBadRequest, code: "invalid_argument", param: inv.Param, msg: inv.Msg}, true
	case errors.As(err, &ip):
		// dlq's filter errors, the catalog's (a cursor it did not issue).
		return problem{status: http.StatusBadRequest, code: "invalid_argument", param: ip.InvalidParameter(), msg: ip.(error).Error()}, true
	case errors.As(err, &pre):
		return problem{status: http.StatusUnprocessableEntity, code: "failed_precondition", msg: pre.Msg}, true
	case errors.As(err, &conflict):
		return problem{status: http.StatusConflict, code: "conflict", msg: conflict.Error()}, true
	case errors.As(err, &unknown):
		// A filter's entity the catalog never saw: 404 in its own words.
		return problem{status: http.StatusNotFound, code: "not_found", msg: unknown.Error()}, true
	case errors.Is(err, replay.ErrNotFound):
		return problem{status: http.StatusNotFound, code: "not_found", msg: replay.ErrNotFound.Error()}, true
	case errors.Is(err, ErrNotFound), catalogNotFound(err):
		return problem{status: http.StatusNotFound, code: "not_found", msg: "there is nothing at this address"}, true
	case errors.Is(err, dlq.ErrUnreachable), errors.Is(err, dlq.ErrThrottled), errors.Is(err, dlq.ErrUnauthorized):
		return problem{status: http.StatusServiceUnavailable, code: "unavailable", title: "Service Bus is unavailable", msg: err.Error()}, true
	case errors.Is(err, errCrossOrigin):
		return problem{status: http.StatusForbidden, code: "permission_denied", title: "Request refused",
			msg: "this request came from another site and was refused"}, true
	case errors.Is(err, errForbidden):
		return problem{status: http.StatusForbidden, code: "permission_denied", title: "Not allowed", msg: err.Error()}, true
	case errors.Is(err, errUnauthenticated):
		return problem{status: http.StatusUnauthorized, code: "unauthenticated", title: "Not signed in",
			msg: "dlqdash did not receive your identity. Open dlqdash through the address of its sign-in proxy"}, true
	case errors.As(err, &si):
		return problem{status: http.StatusBadRequest, code: "invalid_argument", title: "Sign-in failed",
			msg: strings.TrimSuffix(si.msg, ".") + ". Sign in again to continue", signIn: true}, true
	}
	return errInternal, false
}

// problemFor classifies err for an answer to r: false when there is nobody
// to answer (the client went away). A server error is logged here, once,
// with the request id its answer shows.
func (s *Server) problemFor(r *http.Request, err error) (problem, string, bool) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return problem{}, "", false
	}
	if tooLarge := bodyTooLarge(r.Context()); tooLarge != nil {
		// Whatever the handler made of a body cut off at its limit.
		err = tooLarge
	}
	p, ok := classify(err)
	if ok {
		return p, "", true
	}
	id := requestID(r.Context())
	s.logger.LogAttrs(r.Context(), slog.LevelError, "request failed",
		slog.String("request_id", id),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("error", err.Error()))
	return p, id, true
}

// serveAPIError writes err's problem as {"error": {...}}; a 500 carries a
// request id and never the error's text.
func (s *Server) serveAPIError(w http.ResponseWriter, r *http.Request, err error) {
	p, id, ok := s.problemFor(r, err)
	if !ok {
		return
	}
	d := apijson.ErrorDetail{Code: p.code, Message: p.msg, Parameter: p.param, RequestID: id}
	if id != "" {
		d.Message += "; the server log has the details under request id " + id
	}
	if p.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="dlqdash"`)
	}
	writeJSON(w, r, p.status, apijson.Error{Error: d})
}

// serveError writes err's problem as the error page.
func (s *Server) serveError(w http.ResponseWriter, r *http.Request, err error) {
	s.serveErrorTitled(w, r, err, "")
}

// serveErrorTitled is serveError with a heading of the caller's for a
// client error ("Not replayed"); "" keeps the problem's own.
func (s *Server) serveErrorTitled(w http.ResponseWriter, r *http.Request, err error, title string) {
	p, id, ok := s.problemFor(r, err)
	if !ok {
		return
	}
	if title != "" && p.status != http.StatusInternalServerError {
		p.title = title
	}
	s.renderStatus(w, r, p.status, views.ErrorPage(errorView(p, id, s.signIn != nil)))
}

// errorView is a problem as the error page shows it.
func errorView(p problem, requestID string, canSignIn bool) views.ErrorView {
	v := views.ErrorView{Status: p.status, Title: p.title, Message: sentence(p.msg), RequestID: requestID, SignIn: p.signIn && canSignIn}
	switch {
	case p.status == http.StatusBadRequest && p.param != "" && p.title == "":
		v.Title, v.Message = "Check the address", "The parameter “"+p.param+"” cannot be used: "+p.msg
	case p.param != "" && !strings.HasPrefix(p.msg, p.param):
		v.Message = p.param + ": " + p.msg
	case p.status == http.StatusForbidden && p.title == "Not allowed":
		v.Message = "You cannot do this: " + strings.TrimSuffix(p.msg, ".") + "."
	}
	if v.Title == "" {
		v.Title = titleOf(p.status)
	}
	return v
}

// titleOf is an error page's heading for a status without one of its own.
func titleOf(status int) string {
	switch status {
	case http.StatusNotFound:
		return "Not found"
	case http.StatusBadRequest:
		return "Check the request"
	case http.StatusConflict:
		return "Already in a job"
	case http.StatusUnprocessableEntity:
		return "Refused"
	}
	return http.StatusText(status)
}

// sentence is msg as a sentence: a capital first letter (but dlqdash's
// name stays as it is written) and a full stop.
func sentence(msg string) string {
	if msg == "" {
		return ""
	}
	if !strings.HasPrefix(msg, "dlqdash") {
		r, n := utf8.DecodeRuneInString(msg)
		msg = string(unicode.ToUpper(r)) + msg[n:]
	}
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}

// formProblem is err as the refusal a page shows on the form that was sent:
// the field at fault and the words, with the status the API answers (a 4xx,
// or 503 when Service Bus is unavailable); ok is false for server errors
// (the caller returns those).
func formProblem(err error) (status int, fe *views.FieldError, ok bool) {
	p, known := classify(err)
	if !known {
		return 0, nil, false
	}
	if unknown := (*dlq.UnknownEntityError)(nil); errors.As(err, &unknown) {
		p.param = "entity" // the form's field at fault (the API's 404 names none)
	}
	return p.status, &views.FieldError{Field: p.param, Message: p.msg}, true
}

// filterFieldError names a filter field as a replay form does
// (filter.<name>).
func filterFieldError(err error) error {
	p, ok := classify(err)
	if !ok || p.param == "" || p.status != http.StatusBadRequest {
		return err
	}
	return invalidArgument("filter."+p.param, "%s", p.msg)
}
