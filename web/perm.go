package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/views"
)

// perm is what a route requires of its caller.
type perm int

const (
	// permUnset is the zero value: a route that forgot its permission.
	// New panics on it, so it never serves.
	permUnset perm = iota
	// public: anyone, signed in or not (health, static files, sign-in).
	public
	// viewer, operator, admin: at least that role.
	viewer
	operator
	admin
	// bodies: a message's body bytes. Viewers may read them unless
	// Config.HideBodiesFromViewers; then operators and up.
	bodies
)

func (p perm) String() string {
	switch p {
	case public:
		return "public"
	case viewer:
		return "viewer"
	case operator:
		return "operator"
	case admin:
		return "admin"
	case bodies:
		return "bodies"
	}
	return "unset"
}

// role is the least role p admits; auth.NoRole for public.
func (s *Server) role(p perm) auth.Role {
	switch p {
	case viewer:
		return auth.Viewer
	case operator:
		return auth.Operator
	case admin:
		return auth.Admin
	case bodies:
		if s.hideBodies {
			return auth.Operator
		}
		return auth.Viewer
	}
	return auth.NoRole
}

// isAPIPattern reports whether a route answers in JSON: the API, and the
// websocket, whose clients are programs (or live.js) rather than people.
func isAPIPattern(pattern string) bool {
	_, path, _ := strings.Cut(pattern, " ")
	if path == "" {
		path = pattern
	}
	return strings.HasPrefix(path, "/api/") || path == "/live"
}

// ProxyHeaders name the request headers a trusted proxy identifies users
// with (auth.ModeProxy).
type ProxyHeaders struct {
	User, Email, Groups string
}

// DefaultProxyHeaders are oauth2-proxy's.
var DefaultProxyHeaders = ProxyHeaders{User: "X-Forwarded-User", Email: "X-Forwarded-Email", Groups: "X-Forwarded-Groups"}

type authErrKey struct{}

// identify puts the request's identity in its context (auth.WithIdentity,
// which also makes it the audit actor). A credential that was presented
// and refused (a bad token, an ended session) is kept in the context too:
// routes that need a role answer 401 with its reason; public routes ignore
// it. A bad token is logged and counted, and an address with too many
// failures gets 429 for any token it presents (authguard.go).
func (s *Server) identify(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.auth != nil && r.Header.Get("Authorization") != "" && s.tooManyFailures(w, r) {
			return
		}
		id, err := s.identity(r)
		ctx := r.Context()
		if err != nil {
			if reason := credentialReason(r, err); reason != "" {
				s.authFailed(r, reason, err.Error())
			}
			ctx = context.WithValue(ctx, authErrKey{}, err)
		} else {
			ctx = auth.WithIdentity(ctx, id)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func authError(ctx context.Context) error {
	err, _ := ctx.Value(authErrKey{}).(error)
	return err
}

// identity reads the request's credentials: an Authorization header (an
// API token, in any mode), else what the mode says: nobody to check (none),
// a trusted proxy's headers (proxy), the session cookie (oidc).
func (s *Server) identity(r *http.Request) (auth.Identity, error) {
	if s.auth == nil {
		return auth.Local(), nil
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			return auth.Identity{}, &auth.CredentialsError{Reason: "the Authorization header must be \"Bearer <token>\""}
		}
		return s.auth.Token(r.Context(), strings.TrimSpace(token))
	}
	switch s.auth.Mode() {
	case auth.ModeProxy:
		return s.proxyIdentity(r), nil
	case auth.ModeOIDC:
		c, err := r.Cookie(sessionCookie)
		if err != nil || c.Value == "" {
			return auth.Identity{}, nil
		}
		return s.auth.Session(r.Context(), c.Value)
	}
	return auth.Local(), nil
}

// proxyIdentity believes the identity headers only from a trusted proxy,
// judged by the TCP peer (never by X-Forwarded-For, which anyone can send).
// The same headers from anyone else are ignored and logged.
func (s *Server) proxyIdentity(r *http.Request) auth.Identity {
	user := r.Header.Get(s.proxyHeaders.User)
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || !s.auth.TrustsProxy(peer.Addr()) {
		if user != "" || r.Header.Get(s.proxyHeaders.Groups) != "" || r.Header.Get(s.proxyHeaders.Email) != "" {
			s.logger.LogAttrs(r.Context(), slog.LevelWarn, "ignored identity headers from an untrusted address",
				slog.String("remote_addr", r.RemoteAddr),
				slog.String("header", s.proxyHeaders.User),
				slog.String("request_id", requestID(r.Context())))
			s.guard.failed(peer.Addr(), FailureUntrustedPeer)
		}
		return auth.Identity{}
	}
	return s.auth.Proxied(user, r.Header.Get(s.proxyHeaders.Email), r.Header.Get(s.proxyHeaders.Groups))
}

var (
	errUnauthenticated = errors.New("not signed in")
	// errForbidden is a role too low for the route; the adapters turn it
	// into a 403.
	errForbidden = errors.New("permission denied")
)

// forbiddenError says which role a refused request had and needed.
type forbiddenError struct {
	have, need auth.Role
	// namespace, when set, is where the role was too low (access rules),
	// and doing words what was refused there.
	namespace, doing string
}

func (e *forbiddenError) Error() string {
	if e.doing != "" {
		return forbiddenIn(e.have, e.need, e.namespace, e.doing)
	}
	if e.have == auth.NoRole {
		return "you are signed in but have no role in dlqdash: ask an administrator to add one of your groups to a role"
	}
	return fmt.Sprintf("this needs the %s role; you are %s", e.need, article(e.have))
}

func (e *forbiddenError) Unwrap() error { return errForbidden }

func article(r auth.Role) string {
	if r == auth.Admin || r == auth.Operator {
		return "an " + r.String()
	}
	return "a " + r.String()
}

// require wraps a route's handler in its permission check: anonymous
// callers get 401 (API) or the sign-in redirect (pages); a role too low
// gets 403, and the refusal is audited.
func (s *Server) require(rt route) http.Handler {
	if rt.perm == permUnset {
		panic("web: route " + rt.pattern + " declares no permission")
	}
	if rt.perm == public {
		return rt.handler
	}
	api := isAPIPattern(rt.pattern)
	fail := func(w http.ResponseWriter, r *http.Request, err error) {
		if api {
			s.serveAPIError(w, r, err)
		} else {
			s.handle(func(http.ResponseWriter, *http.Request) error { return err }).ServeHTTP(w, r)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if err := authError(ctx); err != nil {
			var ce *auth.CredentialsError
			if !errors.As(err, &ce) {
				fail(w, r, err) // the store failed: a 500
				return
			}
			if c, _ := r.Cookie(sessionCookie); c != nil {
				clearCookie(w, sessionCookie)
			}
			if api {
				s.serveAPIError(w, r, unauthenticated(ce.Reason))
				return
			}
			s.signInOr401(w, r)
			return
		}
		id := auth.FromContext(ctx)
		if id.Anonymous() {
			if api {
				s.serveAPIError(w, r, unauthenticated("sign in first: send Authorization: Bearer <token> (dlqdash token create)"))
				return
			}
			s.signInOr401(w, r)
			return
		}
		need := s.role(rt.perm)
		if !id.Role.Includes(need) {
			s.auditDenied(r, rt, id, id.Role, need, "")
			fail(w, r, &forbiddenError{have: id.Role, need: need})
			return
		}
		rt.handler.ServeHTTP(w, r.WithContext(s.withScope(ctx, rt)))
	})
}

// signInOr401 answers an anonymous page request: with OpenID Connect, a
// redirect to sign-in that comes back here (for a GET; a refused POST
// comes back to the home page); otherwise the 401 page.
func (s *Server) signInOr401(w http.ResponseWriter, r *http.Request) {
	if s.signIn != nil {
		next := "/"
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			next = r.URL.RequestURI()
		}
		http.Redirect(w, r, "/login?"+url.Values{"next": {next}}.Encode(), http.StatusSeeOther)
		return
	}
	s.handle(func(http.ResponseWriter, *http.Request) error { return errUnauthenticated }).ServeHTTP(w, r)
}

// auditDenied records a refused request: who, what they tried (the route
// and path), the role they had and the one it needed, and the namespace
// when the refusal is of a role in one (access rules; have is the role
// there). One per actor and route (and namespace) per DeniedAuditWindow is
// recorded (with "left_out": how many were not since the last one
// recorded); the others are counted and logged at debug level, so a viewer
// cannot flood the trail.
func (s *Server) auditDenied(r *http.Request, rt route, id auth.Identity, have, need auth.Role, namespace string) {
	key := rt.pattern
	if namespace != "" {
		key += "\x00" + namespace
	}
	record, leftOut := s.guard.auditDenied(id.Actor(), key)
	level := slog.LevelInfo
	if !record {
		level = slog.LevelDebug
	}
	attrs := []slog.Attr{slog.String("actor", id.Actor()), slog.String("role", have.String()), slog.String("need", need.String()),
		slog.String("route", rt.pattern), slog.String("path", r.URL.Path), slog.String("request_id", requestID(r.Context())),
		slog.Bool("audited", record)}
	if namespace != "" {
		attrs = append(attrs, slog.String("namespace", namespace))
	}
	s.logger.LogAttrs(r.Context(), level, "permission denied", attrs...)
	if s.auditLog == nil || !record {
		return
	}
	params := map[string]any{"route": rt.pattern, "method": r.Method, "path": r.URL.Path, "role": have.String(), "required_role": need.String()}
	if namespace != "" {
		params["namespace"] = namespace
	}
	if leftOut > 0 {
		params["left_out"] = leftOut
	}
	// The audit write must not depend on the client staying: a denied
	// request is recorded even if its connection drops.
	ctx := context.WithoutCancel(r.Context())
	if _, err := s.auditLog.Append(ctx, audit.Record{Action: audit.ActionDenied, Params: params, Outcome: audit.OutcomeDenied}); err != nil {
		s.logger.LogAttrs(ctx, slog.LevelError, "cannot audit a denied request", slog.String("error", err.Error()),
			slog.String("request_id", requestID(ctx)))
	}
}

// AuditLog records what the HTTP side itself does: sign-in, sign-out,
// refused requests. *audit.Log implements it.
type AuditLog interface {
	Append(ctx context.Context, r audit.Record) (audit.Entry, error)
}

// actorLabel is how pages show a stored actor: the display name, and beside
// it the actor with its source's namespace ("alice (oidc:alice)"); a bare
// name stored before the namespaces, and "local", as they are.
func actorLabel(actor string) string {
	if name := audit.DisplayName(actor); name != actor {
		return name + " (" + actor + ")"
	}
	return actor
}

// canSeeBodies reports whether the request's identity may read message
// bodies (and their previews).
//
// With access rules it is the least of the roles in the namespaces the
// identity may view: a search or a list spanning them hides bodies if any
// of them would (a single message asks canSeeBodiesIn its namespace).
func (s *Server) canSeeBodies(ctx context.Context) bool {
	id := auth.FromContext(ctx)
	if !id.Role.Includes(s.role(bodies)) {
		return false
	}
	if !s.limited() {
		return true
	}
	sc := scopeFrom(ctx)
	names := sc.names
	if sc.all {
		names = s.namespaces
	}
	for _, ns := range names {
		if !s.access.RoleIn(id, ns).Includes(s.role(bodies)) {
			return false
		}
	}
	return true
}

// viewerOf is the layout header's view of the request's identity.
func viewerOf(ctx context.Context) views.Viewer {
	id := auth.FromContext(ctx)
	if id.Anonymous() {
		return views.Viewer{}
	}
	return views.Viewer{Name: id.Name, Role: id.Role.String(), Via: string(id.Via), SignOut: id.Via == auth.ViaSession}
}
