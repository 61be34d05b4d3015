package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/views"
)

// Cookies. The __Host- prefix makes browsers refuse them unless they are
// Secure, Path=/ and without Domain: no subdomain and no plain-http page
// can set or overwrite them. Browsers treat http://localhost and loopback
// addresses as secure, so they work there without TLS too.
const (
	sessionCookie = "__Host-dlqdash_session"
	// loginCookie binds a sign-in in progress to the browser that started
	// it: it holds the sign-in's key, from which the callback's state must
	// derive. The sign-in itself is in the store, so the callback may reach
	// any replica.
	loginCookie = "__Host-dlqdash_login"
	loginMaxAge = 10 * time.Minute
	// maxNextBytes is the longest destination a sign-in keeps (a longer
	// one goes to "/"): it is stored with the sign-in in progress, which
	// one address may have 100 of.
	maxNextBytes = 8 << 10
)

// SignIn runs an OpenID Connect sign-in; package auth/oidc implements it,
// keeping sign-ins in progress in the store that every replica shares.
type SignIn interface {
	// Begin starts a sign-in from client (the address it is bounded by:
	// see signInClient) that returns to next (a path of this server): the
	// provider URL to send the browser to, and the value to keep in the
	// browser (the login cookie), opaque to it.
	Begin(ctx context.Context, next, client string) (redirectURL, cookie string, err error)
	// Finish completes the sign-in whose cookie the browser kept, with the
	// query the provider redirected back with. It returns whom the
	// provider vouched for and where to go next. Its errors that implement
	// SignInRefused are the sign-in's failure, safe to show; others are
	// the server's.
	Finish(ctx context.Context, cookie string, callback url.Values) (auth.User, string, error)
}

// signInRefusal is an error of SignIn.Finish that is the sign-in's own failure.
type signInRefusal interface{ SignInRefused() }

// signInClient is the address a sign-in in progress counts against (the
// store keeps a bounded number per address): the client's address as the
// failure throttle sees it, an IPv6 address by its /64, which one
// subscriber usually holds whole.
func (s *Server) signInClient(r *http.Request) string {
	a := s.clientAddr(r)
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.String()
		}
	}
	return a.String()
}

func setCookie(w http.ResponseWriter, name, value string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: int(maxAge.Seconds()),
		Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

func clearCookie(w http.ResponseWriter, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1,
		Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

// safeNext keeps a post-sign-in destination on this server. Browsers drop
// tabs, CRs and LFs anywhere in a URL and leading spaces and control
// characters, so "/\t/evil.example" is "//evil.example" to them: a
// destination is read as a browser would read it, then accepted only as a
// path that starts with exactly one "/" (never "//" or "/\", which browsers
// read as another host). Anything else goes to "/".
func safeNext(next string) string {
	next = strings.TrimLeftFunc(next, func(r rune) bool { return r <= ' ' })
	next = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\r' || r == '\n' {
			return -1
		}
		return r
	}, next)
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
}

// signInError is a sign-in that failed in a way the person can act on (try
// again); its message is shown.
type signInError struct{ msg string }

func (e *signInError) Error() string { return e.msg }

func (e *signInError) SignInRefused() {}

// startSignIn answers GET /login: off to the identity provider.
func (s *Server) startSignIn(w http.ResponseWriter, r *http.Request) error {
	if s.signIn == nil {
		return ErrNotFound
	}
	if s.tooManyFailures(w, r) {
		return nil
	}
	next := safeNext(r.URL.Query().Get("next"))
	if len(next) > maxNextBytes {
		next = "/"
	}
	redirect, cookie, err := s.signIn.Begin(r.Context(), next, s.signInClient(r))
	if err != nil {
		return err
	}
	setCookie(w, loginCookie, cookie, loginMaxAge)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, redirect, http.StatusFound)
	return nil
}

// finishSignIn answers GET /auth/callback: the provider's redirect back. A
// new session (with a new id, whatever cookie came in) and on to where the
// sign-in started.
func (s *Server) finishSignIn(w http.ResponseWriter, r *http.Request) error {
	if s.signIn == nil || s.auth == nil {
		return ErrNotFound
	}
	if s.tooManyFailures(w, r) {
		return nil
	}
	c, err := r.Cookie(loginCookie)
	if err != nil || c.Value == "" {
		s.authFailed(r, FailureSignIn, "no sign-in in progress in this browser")
		return &signInError{"This sign-in was not started in this browser, or took longer than " + loginMaxAge.String() + "."}
	}
	clearCookie(w, loginCookie)
	user, next, err := s.signIn.Finish(r.Context(), c.Value, r.URL.Query())
	var refused signInRefusal
	if errors.As(err, &refused) {
		s.authFailed(r, FailureSignIn, err.Error())
		return &signInError{err.Error()}
	}
	if err != nil {
		return err
	}
	var replacing string
	if old, err := r.Cookie(sessionCookie); err == nil {
		replacing = old.Value
	}
	ctx := audit.WithActor(r.Context(), auth.Identity{Name: user.Name, Via: auth.ViaSession}.Actor())
	cookie, id, err := s.auth.StartSession(ctx, user, replacing)
	if errors.Is(err, auth.ErrNoRole) {
		s.authFailed(r, FailureNoRole, "the provider vouched for "+user.Name+", whose groups earn no role")
		s.record(ctx, audit.Record{Action: audit.ActionLogin, Outcome: audit.OutcomeDenied,
			Params: map[string]any{"via": "oidc", "email": user.Email, "reason": "no role", "groups": nonNil(user.Groups)}})
		return &forbiddenError{have: auth.NoRole}
	}
	if err != nil {
		return err
	}
	setCookie(w, sessionCookie, cookie, s.auth.MaxAge())
	s.record(ctx, audit.Record{Action: audit.ActionLogin, Params: map[string]any{"via": "oidc", "email": id.Email, "role": id.Role.String()}})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, safeNext(next), http.StatusSeeOther)
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// signOut answers POST /logout: the session is deleted (not just the
// cookie), and a page says so.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request) error {
	c, err := r.Cookie(sessionCookie)
	if err == nil && s.auth != nil {
		if err := s.auth.EndSession(r.Context(), c.Value); err != nil {
			return err
		}
		clearCookie(w, sessionCookie)
		if id := auth.FromContext(r.Context()); id.Via == auth.ViaSession {
			s.record(r.Context(), audit.Record{Action: audit.ActionLogout})
		}
	}
	// The header must not show whom the cookie named.
	r = r.WithContext(views.WithViewer(r.Context(), views.Viewer{}))
	return s.render(w, r, views.SignedOutPage(s.signIn != nil))
}

// record appends r to the audit trail, logging (not failing on) an error: the action it
// records has happened already.
func (s *Server) record(ctx context.Context, r audit.Record) {
	if s.auditLog == nil {
		return
	}
	if _, err := s.auditLog.Append(context.WithoutCancel(ctx), r); err != nil {
		s.logger.LogAttrs(ctx, slog.LevelError, "cannot write an audit entry", slog.String("action", r.Action),
			slog.String("error", err.Error()), slog.String("request_id", requestID(ctx)))
	}
}
