package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/replay"
)

// Errors as the catalog makes them, recognised by behaviour.
type (
	fakeCatalogNotFound struct{}
	fakeCatalogBadInput struct{}
)

func (fakeCatalogNotFound) Error() string  { return "no such message" }
func (fakeCatalogNotFound) NotFound() bool { return true }
func (fakeCatalogBadInput) Error() string  { return "the cursor was not issued by this catalog" }
func (fakeCatalogBadInput) InvalidParameter() string {
	return "cursor"
}

// Every kind of error is answered the same way by the API and the pages:
// one status, and the same words (the page capitalises them and ends them
// with a full stop); the API adds its stable code and the parameter.
func TestErrorClassification(t *testing.T) {
	var logs strings.Builder
	s := New(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, tt := range []struct {
		name   string
		err    error
		status int
		code   string
		param  string
		words  string
	}{
		{"bad argument", invalidArgument("limit", "limit must be a whole number from 1 to 500, not %q", "x"), 400, "invalid_argument", "limit", `limit must be a whole number from 1 to 500, not "x"`},
		{"filter", fmt.Errorf("list: %w", &dlq.FilterError{Param: "subqueue", Msg: `unknown subqueue "dlq": want dead_letter`}), 400, "invalid_argument", "subqueue", `unknown subqueue "dlq"`},
		{"engine input", fmt.Errorf("submit: %w", &replay.InvalidError{Param: "destination", Msg: "nowhere does not exist"}), 400, "invalid_argument", "destination", "nowhere does not exist"},
		{"catalog input", fakeCatalogBadInput{}, 400, "invalid_argument", "cursor", "the cursor was not issued by this catalog"},
		{"guard", &replay.PreconditionError{Msg: "the selection matches no messages"}, 422, "failed_precondition", "", "the selection matches no messages"},
		{"conflict", &replay.ConflictError{Count: 2, Jobs: []int64{7}}, 409, "conflict", "", "2 of the selected messages are already in an active job"},
		{"no such job", fmt.Errorf("job 9: %w", replay.ErrNotFound), 404, "not_found", "", "no such job"},
		{"nothing here", ErrNotFound, 404, "not_found", "", "there is nothing at this address"},
		{"no such message", fmt.Errorf("get: %w", fakeCatalogNotFound{}), 404, "not_found", "", "there is nothing at this address"},
		{"said not found", notFound("there is no job with id %q", "x"), 404, "not_found", "", `there is no job with id "x"`},
		{"unavailable", fmt.Errorf("check orders: %w", dlq.ErrUnreachable), 503, "unavailable", "", "check orders"},
		{"forbidden", &forbiddenError{have: auth.Viewer, need: auth.Operator}, 403, "permission_denied", "", "this needs the operator role; you are a viewer"},
		{"cross-origin", errCrossOrigin, 403, "permission_denied", "", "this request came from another site"},
		{"unauthenticated", errUnauthenticated, 401, "unauthenticated", "", "dlqdash did not receive your identity"},
		{"said unauthenticated", unauthenticated("sign in first"), 401, "unauthenticated", "", "sign in first"},
		{"server", fmt.Errorf("list: %w", errors.New("disk on fire")), 500, "internal", "", "dlqdash could not complete this request"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fail := func(http.ResponseWriter, *http.Request) error { return tt.err }

			rec := httptest.NewRecorder()
			withRequestID(s.api(fail)).ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/x", nil))
			var body struct {
				Error struct {
					Code, Message, Parameter string
					RequestID                string `json:"request_id"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("JSON %q: %v", rec.Body.String(), err)
			}
			e := body.Error
			if rec.Code != tt.status || e.Code != tt.code || e.Parameter != tt.param || !strings.Contains(e.Message, tt.words) {
				t.Errorf("JSON %d %+v, want %d %s naming %q and saying %q", rec.Code, e, tt.status, tt.code, tt.param, tt.words)
			}
			if (rec.Code == 401) != (rec.Header().Get("WWW-Authenticate") != "") {
				t.Errorf("status %d with WWW-Authenticate %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
			}

			rec = httptest.NewRecorder()
			withRequestID(s.handle(fail)).ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
			page := html.UnescapeString(rec.Body.String())
			if rec.Code != tt.status || !strings.Contains(page, `data-status="`+strconv.Itoa(tt.status)+`"`) {
				t.Errorf("page status %d, want %d", rec.Code, tt.status)
			}
			// The same words, as a sentence.
			if !strings.Contains(page, tt.words[1:]) {
				t.Errorf("the page does not say %q:\n%s", tt.words, page)
			}
			if tt.param != "" && !strings.Contains(page, "“"+tt.param+"”") {
				t.Errorf("the page does not name %s", tt.param)
			}

			if tt.status == 500 {
				// The text stays in the log, under the id both answers show.
				id := regexp.MustCompile(`data-testid="request-id">([^<]+)<`).FindStringSubmatch(rec.Body.String())
				if id == nil || e.RequestID == "" || !strings.Contains(e.Message, e.RequestID) {
					t.Fatalf("request ids: page %v, JSON %q", id, e.RequestID)
				}
				if strings.Contains(page, "disk on fire") || strings.Contains(e.Message, "disk on fire") {
					t.Error("a server error's text reached the client")
				}
				for _, rid := range []string{id[1], e.RequestID} {
					if !strings.Contains(logs.String(), "request_id="+rid) || !strings.Contains(logs.String(), "disk on fire") {
						t.Errorf("the log lacks request %s:\n%s", rid, logs.String())
					}
				}
			}
		})
	}
}

// A client that went away gets no answer and no log line.
func TestErrorClientGone(t *testing.T) {
	var logs strings.Builder
	s := New(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	req := httptest.NewRequest("GET", "/x", nil)
	ctx, cancel := context.WithCancel(req.Context())
	cancel()
	req = req.WithContext(ctx)
	for _, h := range []http.Handler{s.api(func(http.ResponseWriter, *http.Request) error { return ctx.Err() }),
		s.handle(func(http.ResponseWriter, *http.Request) error { return ctx.Err() })} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Body.Len() != 0 || logs.Len() != 0 {
			t.Errorf("answered %q, logged %q", rec.Body.String(), logs.String())
		}
	}
}
