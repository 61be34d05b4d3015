package web

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/store"
)

// authFixture is a server with sign-in on, on the API fixture's messages:
// an API token per role, a fake OpenID Connect sign-in, and an audit trail.
type authFixture struct {
	*apiFixture
	srv    *Server
	cfg    Config
	tokens map[auth.Role]string
	log    *audit.Log
	now    time.Time
}

// fakeSignIn stands in for auth/oidc (tested against a real provider in
// its own package): the "provider" redirects back with code=<user>, and
// the users are in the map.
type fakeSignIn struct {
	users map[string]auth.User
}

func (f fakeSignIn) Begin(_ context.Context, next, _ string) (string, string, error) {
	state := "state-" + strconv.Itoa(len(next))
	return "https://idp.example/authorize?" + url.Values{"state": {state}, "next": {next}}.Encode(), state + "|" + next, nil
}

func (f fakeSignIn) Finish(_ context.Context, state string, q url.Values) (auth.User, string, error) {
	st, next, _ := strings.Cut(state, "|")
	if q.Get("state") != st {
		return auth.User{}, "", &signInError{"The sign-in's state does not match."}
	}
	u, ok := f.users[q.Get("code")]
	if !ok {
		return auth.User{}, "", &signInError{"The identity provider refused."}
	}
	return u, next, nil
}

var testMapping = auth.Mapping{Admin: []string{"admins"}, Operator: []string{"sre"}, Viewer: []string{"support"}}

func newAuthFixture(t *testing.T, mutate func(*Config)) *authFixture {
	t.Helper()
	fx := &authFixture{apiFixture: newAPIFixture(t), tokens: map[auth.Role]string{}, now: time.Now()}
	fx.log = audit.New(fx.st)
	a := auth.New(auth.Config{Mode: auth.ModeOIDC, Mapping: testMapping, Store: fx.st, Now: func() time.Time { return fx.now }})
	for _, r := range []auth.Role{auth.Viewer, auth.Operator, auth.Admin} {
		secret, _, err := auth.CreateToken(t.Context(), fx.st, auth.Token{Name: r.String() + "-bot", Role: r, CreatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		fx.tokens[r] = secret
	}
	fx.cfg = Config{Logger: slog.New(slog.NewTextHandler(fx.logs, nil)), Catalog: fx.st, Audit: fx.st, AuditLog: fx.log,
		Jobs: newFakeJobs(fx.recs[:12]), Auth: a,
		SignIn: fakeSignIn{users: map[string]auth.User{
			"alice": {Name: "alice", Email: "alice@example.com", Groups: []string{"sre"}},
			"vera":  {Name: "vera", Groups: []string{"support"}},
			"eve":   {Name: "eve", Groups: []string{"marketing"}},
		}}}
	if mutate != nil {
		mutate(&fx.cfg)
	}
	fx.srv = New(fx.cfg)
	fx.h = fx.srv.Handler()
	return fx
}

// as sends r with the token of role (none for auth.NoRole).
func (fx *authFixture) as(t *testing.T, role auth.Role, r *http.Request) (*http.Response, string) {
	t.Helper()
	if role != auth.NoRole {
		r.Header.Set("Authorization", "Bearer "+fx.tokens[role])
	}
	return do(t, fx.h, r)
}

func (fx *authFixture) audited(t *testing.T, action string) []audit.Entry {
	t.Helper()
	var out []audit.Entry
	if err := fx.log.Scan(t.Context(), audit.Filter{Action: action}, func(e audit.Entry) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// concrete turns a route pattern into a request path that matches it.
func concrete(t *testing.T, pattern string, id int64) (string, string) {
	t.Helper()
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "GET", pattern
	}
	switch path {
	case "/":
		path = "/no/such/page"
	case "/api/":
		path = "/api/v1/nothing-here"
	}
	path = strings.ReplaceAll(path, "{$}", "")
	path = strings.ReplaceAll(path, "{id}", strconv.FormatInt(id, 10))
	path = strings.ReplaceAll(path, "{file}", "app.css")
	path = strings.ReplaceAll(path, "{key}", "nosuchgroup")
	if strings.Contains(path, "{") {
		t.Fatalf("route %s: the test cannot fill in its path", pattern)
	}
	return method, path
}

func TestEveryRouteDeclaresAPermission(t *testing.T) {
	s := newTestServer(t, nil)
	seen := map[string]bool{}
	for _, rt := range s.routeTable() {
		if rt.perm == permUnset {
			t.Errorf("route %s declares no permission", rt.pattern)
		}
		if seen[rt.pattern] {
			t.Errorf("route %s is in the table twice", rt.pattern)
		}
		seen[rt.pattern] = true
		// Only reads, health and sign-in are open to more than operators.
		method, _, _ := strings.Cut(rt.pattern, " ")
		if method != "GET" && method != rt.pattern && rt.perm != operator && rt.perm != admin && rt.pattern != "POST /logout" {
			t.Errorf("route %s changes state but needs only %s", rt.pattern, rt.perm)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a route without a permission did not panic")
		}
	}()
	s.require(route{pattern: "GET /forgotten", handler: http.NotFoundHandler()})
}

// TestRoleMatrix asks every route of the table as every role: anonymous,
// viewer, operator, admin. A route gets past its check exactly when the
// role includes what the table says; otherwise the API answers 401
// unauthenticated or 403 permission_denied, and pages redirect to sign-in
// or answer the 403 page; every 403 is audited.
func TestRoleMatrix(t *testing.T) {
	fx := newAuthFixture(t, nil)
	id := fx.ids[0]
	denied := 0
	for _, rt := range fx.srv.routeTable() {
		method, path := concrete(t, rt.pattern, id)
		api := isAPIPattern(rt.pattern)
		for _, role := range []auth.Role{auth.NoRole, auth.Viewer, auth.Operator, auth.Admin} {
			name := rt.pattern + " as " + role.String()
			var body *strings.Reader
			if method == "POST" {
				body = strings.NewReader("{}")
			} else {
				body = strings.NewReader("")
			}
			req := httptest.NewRequestWithContext(t.Context(), method, path, body)
			if method == "POST" && !api {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			res, text := fx.as(t, role, req)
			need := fx.srv.role(rt.perm)
			switch {
			case rt.perm == public || (role != auth.NoRole && role.Includes(need)):
				if res.StatusCode == 401 || res.StatusCode == 403 || strings.HasPrefix(res.Header.Get("Location"), "/login") {
					t.Errorf("%s: refused (%d %s) but allowed by the table", name, res.StatusCode, res.Header.Get("Location"))
				}
			case role == auth.NoRole && api:
				if res.StatusCode != 401 || !strings.Contains(text, `"code":"unauthenticated"`) || res.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s: %d %s, want 401 unauthenticated", name, res.StatusCode, text)
				}
			case role == auth.NoRole:
				loc := res.Header.Get("Location")
				if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/login?next=") {
					t.Errorf("%s: %d to %q, want a redirect to sign-in", name, res.StatusCode, loc)
				}
				if method == "GET" && loc != "/login?"+(url.Values{"next": {path}}).Encode() {
					t.Errorf("%s: sign-in does not come back here: %s", name, loc)
				}
			case api:
				denied++
				if res.StatusCode != 403 || !strings.Contains(text, `"code":"permission_denied"`) {
					t.Errorf("%s: %d %s, want 403 permission_denied", name, res.StatusCode, text)
				}
			default:
				denied++
				if res.StatusCode != 403 || !strings.Contains(text, `data-testid="error-page"`) || !strings.Contains(text, "Not allowed") {
					t.Errorf("%s: %d, want the 403 page:\n%.500s", name, res.StatusCode, text)
				}
			}
		}
	}
	// The examples the issue names, by name; a minute later, so that the
	// refusals are audited again (one per actor and route per minute).
	fx.srv.guard.now = func() time.Time { return time.Now().Add(DeniedAuditWindow) }
	for _, tt := range []struct {
		role          auth.Role
		method, path  string
		wantForbidden bool
	}{
		{auth.Viewer, "POST", "/api/v1/jobs", true},
		{auth.Viewer, "POST", "/jobs", true},
		{auth.Operator, "POST", "/api/v1/jobs", false},
		{auth.Operator, "POST", "/api/v1/messages/" + strconv.FormatInt(id, 10) + "/replay", true},
		{auth.Admin, "POST", "/api/v1/messages/" + strconv.FormatInt(id, 10) + "/replay", false},
	} {
		req := httptest.NewRequestWithContext(t.Context(), tt.method, tt.path, strings.NewReader("{}"))
		res, _ := fx.as(t, tt.role, req)
		if (res.StatusCode == 403) != tt.wantForbidden {
			t.Errorf("%s %s as %s: %d", tt.method, tt.path, tt.role, res.StatusCode)
		}
	}
	entries := fx.audited(t, audit.ActionDenied)
	if len(entries) != denied+3 {
		t.Errorf("%d denied entries, want %d", len(entries), denied+3)
	}
	var p map[string]string
	last := entries[len(entries)-1]
	json.Unmarshal(last.Params, &p)
	if last.Actor != "token:operator-bot" || last.Outcome != audit.OutcomeDenied || p["route"] != "POST /api/v1/messages/{id}/replay" ||
		p["role"] != "operator" || p["required_role"] != "admin" {
		t.Errorf("denied entry: %s %s %s", last.Actor, last.Outcome, last.Params)
	}
}

func TestTokens(t *testing.T) {
	fx := newAuthFixture(t, nil)
	get := func(header string) (*http.Response, string) {
		req := httptest.NewRequestWithContext(t.Context(), "GET", "/api/v1/entities", nil)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		return do(t, fx.h, req)
	}
	if res, _ := get("Bearer " + fx.tokens[auth.Viewer]); res.StatusCode != 200 {
		t.Fatalf("viewer token: %d", res.StatusCode)
	}
	tok, err := fx.st.TokenByHash(t.Context(), auth.HashToken(fx.tokens[auth.Viewer]))
	if err != nil || tok.LastUsedAt == nil {
		t.Errorf("last_used not recorded: %+v, %v", tok, err)
	}
	for _, tt := range []struct{ header, want string }{
		{"Bearer dlq_" + strings.Repeat("x", 43), "not known"},
		{"Bearer nonsense", "not a dlqdash API token"},
		{"Basic dXNlcjpwYXNz", "Bearer"},
		{"Bearer ", "Bearer"},
	} {
		res, body := get(tt.header)
		if res.StatusCode != 401 || !strings.Contains(body, `"unauthenticated"`) || !strings.Contains(body, tt.want) {
			t.Errorf("%q: %d %s", tt.header, res.StatusCode, body)
		}
	}
	// Expiry and revocation take effect at once.
	exp := time.Now().Add(time.Hour)
	secret, _, err := auth.CreateToken(t.Context(), fx.st, auth.Token{Name: "short", Role: auth.Viewer, CreatedAt: time.Now(), ExpiresAt: &exp})
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := get("Bearer " + secret); res.StatusCode != 200 {
		t.Errorf("fresh token: %d", res.StatusCode)
	}
	fx.now = exp.Add(time.Second)
	if res, body := get("Bearer " + secret); res.StatusCode != 401 || !strings.Contains(body, "expired") {
		t.Errorf("expired token: %d %s", res.StatusCode, body)
	}
	fx.now = time.Now()
	if _, err := fx.st.RevokeToken(t.Context(), "viewer-bot", time.Now()); err != nil {
		t.Fatal(err)
	}
	if res, body := get("Bearer " + fx.tokens[auth.Viewer]); res.StatusCode != 401 || !strings.Contains(body, "revoked") {
		t.Errorf("revoked token: %d %s", res.StatusCode, body)
	}
	// A page with a refused token goes to sign-in, like no token.
	req := httptest.NewRequestWithContext(t.Context(), "GET", "/messages", nil)
	req.Header.Set("Authorization", "Bearer "+fx.tokens[auth.Viewer])
	if res, _ := do(t, fx.h, req); res.StatusCode != http.StatusSeeOther {
		t.Errorf("page with a revoked token: %d", res.StatusCode)
	}
	// Actions through a token are attributed to it.
	req = httptest.NewRequestWithContext(t.Context(), "POST", "/api/v1/jobs/1/pause", nil)
	fx.as(t, auth.Viewer, req) // revoked: not even denied
	req = httptest.NewRequestWithContext(t.Context(), "POST", "/api/v1/messages/1/replay", strings.NewReader("{}"))
	fx.as(t, auth.Operator, req)
	if e := fx.audited(t, audit.ActionDenied); len(e) != 1 || e[0].Actor != "token:operator-bot" {
		t.Errorf("denied entries: %+v", e)
	}
}

// browser keeps cookies the way a browser does for this test's purposes.
type browser struct {
	cookies map[string]string
}

func (b *browser) do(t *testing.T, h http.Handler, method, target string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, target, nil)
	if method == "POST" {
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for k, v := range b.cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	res, body := do(t, h, req)
	for _, c := range res.Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
			continue
		}
		if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Domain != "" {
			t.Errorf("cookie %s: %+v: want Secure, HttpOnly, SameSite=Lax, Path=/, no Domain", c.Name, c)
		}
		b.cookies[c.Name] = c.Value
	}
	return res, body
}

// signIn runs the redirect flow for user from a page that needs sign-in.
func (b *browser) signIn(t *testing.T, h http.Handler, user, from string) *http.Response {
	t.Helper()
	res, _ := b.do(t, h, "GET", from)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("GET %s: %d, want a redirect to sign-in", from, res.StatusCode)
	}
	res, _ = b.do(t, h, "GET", res.Header.Get("Location"))
	idp, err := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusFound || err != nil || idp.Host != "idp.example" {
		t.Fatalf("GET /login: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	res, body := b.do(t, h, "GET", "/auth/callback?"+url.Values{"state": {idp.Query().Get("state")}, "code": {user}}.Encode())
	if res.StatusCode != http.StatusSeeOther && res.StatusCode != http.StatusForbidden {
		t.Fatalf("callback: %d\n%.800s", res.StatusCode, body)
	}
	return res
}

func TestSessionSignInAndOut(t *testing.T) {
	fx := newAuthFixture(t, nil)
	b := &browser{cookies: map[string]string{}}
	// A session id planted before sign-in (fixation) is replaced.
	b.cookies[sessionCookie] = "planted-by-an-attacker"
	res := b.signIn(t, fx.h, "alice", "/messages?entity=orders")
	if loc := res.Header.Get("Location"); loc != "/messages?entity=orders" {
		t.Errorf("after sign-in: to %q, want back to the page", loc)
	}
	if v := b.cookies[sessionCookie]; v == "" || v == "planted-by-an-attacker" {
		t.Fatalf("session cookie %q", v)
	}
	if _, ok := b.cookies[loginCookie]; ok {
		t.Error("the sign-in's state cookie outlived it")
	}
	res, body := b.do(t, fx.h, "GET", "/messages?entity=orders")
	if res.StatusCode != 200 || !strings.Contains(body, `data-testid="user-name">alice<`) || !strings.Contains(body, `data-testid="user-role">(operator)<`) ||
		!strings.Contains(body, `data-testid="sign-out"`) {
		t.Fatalf("signed-in page: %d\n%.2000s", res.StatusCode, body)
	}
	// Her actions carry her name.
	res, _ = b.do(t, fx.h, "POST", "/api/v1/messages/1/replay")
	if res.StatusCode != 403 {
		t.Errorf("operator edit-and-replay: %d", res.StatusCode)
	}
	if e := fx.audited(t, audit.ActionDenied); len(e) != 1 || e[0].Actor != "oidc:alice" {
		t.Errorf("denied: %+v", e)
	}
	if e := fx.audited(t, audit.ActionLogin); len(e) != 1 || e[0].Actor != "oidc:alice" || e[0].Outcome != audit.OutcomeSucceeded {
		t.Errorf("login: %+v", e)
	}

	// A cross-origin POST is refused even with the session cookie.
	req := httptest.NewRequestWithContext(t.Context(), "POST", "/jobs/1/cancel", nil)
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: b.cookies[sessionCookie]})
	if res, body := do(t, fx.h, req); res.StatusCode != 403 || !strings.Contains(body, "Request refused") {
		t.Errorf("cross-origin POST with a session: %d", res.StatusCode)
	}

	old := b.cookies[sessionCookie]
	res, body = b.do(t, fx.h, "POST", "/logout")
	if res.StatusCode != 200 || !strings.Contains(body, `data-testid="signed-out"`) || strings.Contains(body, "alice") {
		t.Errorf("logout: %d\n%.1000s", res.StatusCode, body)
	}
	if _, ok := b.cookies[sessionCookie]; ok {
		t.Error("logout left the cookie")
	}
	// The session itself is gone, not just the cookie.
	b.cookies[sessionCookie] = old
	if res, _ := b.do(t, fx.h, "GET", "/messages"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("the old session still works after logout: %d", res.StatusCode)
	}
	if e := fx.audited(t, audit.ActionLogout); len(e) != 1 || e[0].Actor != "oidc:alice" {
		t.Errorf("logout: %+v", e)
	}

	// Someone the provider knows but who has no role gets no session.
	b = &browser{cookies: map[string]string{}}
	res = b.signIn(t, fx.h, "eve", "/")
	if res.StatusCode != 403 || b.cookies[sessionCookie] != "" {
		t.Errorf("no role: %d, cookie %q", res.StatusCode, b.cookies[sessionCookie])
	}
	if e := fx.audited(t, audit.ActionLogin); len(e) != 2 || e[1].Actor != "oidc:eve" || e[1].Outcome != audit.OutcomeDenied {
		t.Errorf("login entries: %+v", e)
	}
	// A callback this browser did not start is refused.
	b = &browser{cookies: map[string]string{}}
	if res, body := b.do(t, fx.h, "GET", "/auth/callback?state=x&code=alice"); res.StatusCode != 400 || !strings.Contains(body, "Sign-in failed") {
		t.Errorf("callback without a started sign-in: %d", res.StatusCode)
	}
	// An open redirect through next is not possible.
	for _, next := range []string{"//evil.example/", "https://evil.example/", "/\\evil.example"} {
		if got := safeNext(next); got != "/" {
			t.Errorf("safeNext(%q) = %q", next, got)
		}
	}
}

func TestSessionExpiryAndRoleRemoval(t *testing.T) {
	fx := newAuthFixture(t, nil)
	b := &browser{cookies: map[string]string{}}
	b.signIn(t, fx.h, "vera", "/")
	if res, _ := b.do(t, fx.h, "GET", "/"); res.StatusCode != 200 {
		t.Fatalf("signed in: %d", res.StatusCode)
	}
	// The support group loses its role: the same cookie now signs in nobody.
	fx.cfg.Auth = auth.New(auth.Config{Mode: auth.ModeOIDC, Store: fx.st, Mapping: auth.Mapping{Operator: []string{"sre"}}})
	h := New(fx.cfg).Handler()
	cookie := b.cookies[sessionCookie]
	res, _ := b.do(t, h, "GET", "/")
	if res.StatusCode != http.StatusSeeOther {
		t.Errorf("after the role's removal: %d", res.StatusCode)
	}
	if _, ok := b.cookies[sessionCookie]; ok {
		t.Error("the refused cookie was not cleared")
	}
	// ... and the session is gone for good, whatever the mapping.
	b.cookies[sessionCookie] = cookie
	if res, _ := b.do(t, fx.h, "GET", "/"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("the session came back: %d", res.StatusCode)
	}

	// Idle expiry.
	b = &browser{cookies: map[string]string{}}
	b.signIn(t, fx.h, "vera", "/")
	fx.now = fx.now.Add(auth.DefaultIdleTimeout + time.Minute)
	if res, body := b.do(t, fx.h, "GET", "/api/v1/entities"); res.StatusCode != 401 || !strings.Contains(body, "expired") {
		t.Errorf("idle session: %d %s", res.StatusCode, body)
	}
}

func TestProxyMode(t *testing.T) {
	prefixes, _ := auth.ParsePrefixes("10.0.0.0/8")
	var logs bytes.Buffer
	fx := newAuthFixture(t, func(c *Config) {
		c.Auth = auth.New(auth.Config{Mode: auth.ModeProxy, Mapping: testMapping, Store: c.Catalog.(*store.Store), TrustedProxies: prefixes})
		c.SignIn = nil
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	req := func(peer, method, target string) *http.Request {
		r := httptest.NewRequestWithContext(t.Context(), method, target, nil)
		r.RemoteAddr = peer
		r.Header.Set("X-Forwarded-User", "alice")
		r.Header.Set("X-Forwarded-Email", "alice@example.com")
		r.Header.Set("X-Forwarded-Groups", "support,sre")
		return r
	}
	res, body := do(t, fx.h, req("10.1.2.3:40000", "GET", "/"))
	if res.StatusCode != 200 || !strings.Contains(body, `data-testid="user-name">alice<`) || !strings.Contains(body, "(operator)") ||
		strings.Contains(body, `data-testid="sign-out"`) {
		t.Fatalf("trusted proxy: %d\n%.1500s", res.StatusCode, body)
	}
	if res, _ := do(t, fx.h, req("10.1.2.3:40000", "POST", "/api/v1/messages/1/replay")); res.StatusCode != 403 {
		t.Errorf("operator through the proxy, edit-and-replay: %d", res.StatusCode)
	}
	// The same headers from anyone else are ignored (and logged).
	res, body = do(t, fx.h, req("192.0.2.9:40000", "GET", "/"))
	if res.StatusCode != 401 || !strings.Contains(body, "Not signed in") {
		t.Errorf("untrusted source: %d\n%.500s", res.StatusCode, body)
	}
	if res, body := do(t, fx.h, req("192.0.2.9:40000", "GET", "/api/v1/entities")); res.StatusCode != 401 || !strings.Contains(body, "unauthenticated") {
		t.Errorf("untrusted source, API: %d %s", res.StatusCode, body)
	}
	if !strings.Contains(logs.String(), "ignored identity headers from an untrusted address") || !strings.Contains(logs.String(), "192.0.2.9") {
		t.Errorf("not logged:\n%s", logs.String())
	}
	// A proxy that names nobody: anonymous. Someone without a role: 403.
	r := req("10.1.2.3:40000", "GET", "/api/v1/entities")
	r.Header.Del("X-Forwarded-User")
	if res, _ := do(t, fx.h, r); res.StatusCode != 401 {
		t.Errorf("no user header: %d", res.StatusCode)
	}
	r = req("10.1.2.3:40000", "GET", "/api/v1/entities")
	r.Header.Set("X-Forwarded-Groups", "marketing")
	if res, body := do(t, fx.h, r); res.StatusCode != 403 || !strings.Contains(body, "no role") {
		t.Errorf("no role: %d %s", res.StatusCode, body)
	}
	// Proxy actions are attributed to the proxied user.
	if e := fx.audited(t, audit.ActionDenied); len(e) != 2 || e[0].Actor != "proxy:alice" {
		t.Errorf("denied entries: %+v", e)
	}
	// A proxy user named like another source's actor stays a proxy user,
	// and the audit page shows the name beside the stored actor.
	r = req("10.1.2.3:40000", "GET", "/api/v1/jobs/1/cancel")
	r.Method = "POST"
	r.Header.Set("X-Forwarded-User", "token:ci")
	r.Header.Set("X-Forwarded-Groups", "support")
	if res, _ := do(t, fx.h, r); res.StatusCode != 403 {
		t.Errorf("proxy user token:ci, cancel: %d", res.StatusCode)
	}
	if e := fx.audited(t, audit.ActionDenied); len(e) != 3 || e[2].Actor != "proxy:token:ci" {
		t.Errorf("denied entries: %+v", e)
	}
	res, body = do(t, fx.h, req("10.1.2.3:40000", "GET", "/audit"))
	if res.StatusCode != 200 || !strings.Contains(body, `data-testid="audit-entry-actor">token:ci (proxy:token:ci)<`) ||
		!strings.Contains(body, `data-testid="audit-entry-actor">alice (proxy:alice)<`) {
		t.Errorf("audit page: %d\n%.3000s", res.StatusCode, body)
	}
}

func TestHideBodiesFromViewers(t *testing.T) {
	fx := newAuthFixture(t, func(c *Config) { c.HideBodiesFromViewers = true })
	id := strconv.FormatInt(fx.ids[0], 10)
	get := func(role auth.Role, target string) (*http.Response, string) {
		return fx.as(t, role, httptest.NewRequestWithContext(t.Context(), "GET", target, nil))
	}
	if res, body := get(auth.Viewer, "/api/v1/messages/"+id+"/body"); res.StatusCode != 403 || !strings.Contains(body, "permission_denied") {
		t.Errorf("viewer body: %d %s", res.StatusCode, body)
	}
	if res, _ := get(auth.Operator, "/api/v1/messages/"+id+"/body"); res.StatusCode != 200 {
		t.Errorf("operator body: %d", res.StatusCode)
	}
	_, body := get(auth.Viewer, "/api/v1/messages/"+id)
	if strings.Contains(body, "body_base64") || !strings.Contains(body, `"body_hidden":true`) || !strings.Contains(body, `"body_preview":""`) {
		t.Errorf("viewer message: %s", body)
	}
	if _, body := get(auth.Operator, "/api/v1/messages/"+id); !strings.Contains(body, "body_base64") || strings.Contains(body, "body_hidden") {
		t.Errorf("operator message: %s", body)
	}
	_, body = get(auth.Viewer, "/messages/"+id)
	if !strings.Contains(body, `data-testid="body-hidden"`) || strings.Contains(body, `data-testid="body-text"`) || strings.Contains(body, "order") && strings.Contains(body, "apple") {
		t.Errorf("viewer page shows the body:\n%.3000s", body)
	}
	if _, body := get(auth.Operator, "/messages/"+id); !strings.Contains(body, `data-testid="body-text"`) {
		t.Error("operator page hides the body")
	}
	// Previews and body search are hidden too.
	_, body = get(auth.Viewer, "/api/v1/messages?q=apple")
	if strings.Contains(body, `"id"`) {
		t.Errorf("a viewer's search finds body words: %s", body)
	}
	if _, body := get(auth.Operator, "/api/v1/messages?q=apple"); !strings.Contains(body, `"id"`) {
		t.Errorf("an operator's search does not: %s", body)
	}
	_, body = get(auth.Viewer, "/messages")
	if strings.Contains(body, "banana") || strings.Contains(body, "apple") {
		t.Error("the viewer's message list shows body previews")
	}
	// The viewer's selection cannot replay, and says why.
	if !strings.Contains(body, `disabled data-testid="replay-button"`) || !strings.Contains(body, "need the operator role; you are a viewer") {
		t.Error("the viewer's list offers replay")
	}
	if _, body := get(auth.Operator, "/messages"); !strings.Contains(body, "banana") {
		t.Error("the operator's message list lacks body previews")
	}
}

// A viewer's job page has no pause, resume or cancel buttons; an
// operator's has them.
func TestJobControlsNeedOperator(t *testing.T) {
	fx := newAuthFixture(t, nil)
	fj := fx.cfg.Jobs.(*fakeJobs)
	fj.jobs[7] = runningJob(7)
	for _, tt := range []struct {
		role auth.Role
		want bool
	}{{auth.Viewer, false}, {auth.Operator, true}, {auth.Admin, true}} {
		_, body := fx.as(t, tt.role, httptest.NewRequestWithContext(t.Context(), "GET", "/jobs/7", nil))
		if got := strings.Contains(body, `data-testid="job-pause"`); got != tt.want {
			t.Errorf("%s: pause button shown = %v:\n%.3000s", tt.role, got, body)
		}
	}
}

// With sign-in off (the default of demo and of every earlier test) every
// request is the local admin, and the header says so.
func TestNoSignIn(t *testing.T) {
	h := newTestServer(t, nil).Handler()
	res, body := do(t, h, httptest.NewRequestWithContext(t.Context(), "GET", "/", nil))
	if res.StatusCode != 200 || !strings.Contains(body, `data-testid="user-name">local<`) || !strings.Contains(body, `data-testid="user-role">(admin)<`) ||
		strings.Contains(body, `data-testid="sign-out"`) {
		t.Errorf("header: %d\n%.1500s", res.StatusCode, body)
	}
	if res, _ := do(t, h, httptest.NewRequestWithContext(t.Context(), "GET", "/login", nil)); res.StatusCode != 404 {
		t.Errorf("/login without OpenID Connect: %d", res.StatusCode)
	}
}

// The message page offers what the role may do: history for everyone,
// replay and discard from operator, the edit form (which shows the body)
// only to admins, so a hidden body never reaches a viewer through it.
func TestMessagePageActionsByRole(t *testing.T) {
	fx := newAuthFixture(t, func(c *Config) { c.HideBodiesFromViewers = true })
	id := fx.recs[0].ID
	for _, tt := range []struct {
		role         auth.Role
		replay, edit bool
	}{{auth.Viewer, false, false}, {auth.Operator, true, false}, {auth.Admin, true, true}} {
		_, body := fx.as(t, tt.role, httptest.NewRequestWithContext(t.Context(), "GET", "/messages/"+strconv.FormatInt(id, 10), nil))
		if !strings.Contains(body, `data-testid="replays"`) {
			t.Errorf("%s: no replay history", tt.role)
		}
		if got := strings.Contains(body, `data-testid="message-replay-form"`); got != tt.replay {
			t.Errorf("%s: replay form shown = %v", tt.role, got)
		}
		if got := strings.Contains(body, `data-testid="edit-replay-open"`); got != tt.edit {
			t.Errorf("%s: edit-and-replay button shown = %v", tt.role, got)
		}
		// The edit page shows the body in its form: admins only.
		res, _ := fx.as(t, tt.role, httptest.NewRequestWithContext(t.Context(), "GET", "/messages/"+strconv.FormatInt(id, 10)+"/edit", nil))
		if got := res.StatusCode == http.StatusOK; got != tt.edit {
			t.Errorf("%s: the edit page answers %d", tt.role, res.StatusCode)
		}
	}
	// Posting the form anyway is refused below admin.
	form := strings.NewReader("application_properties=%7B%7D")
	req := httptest.NewRequestWithContext(t.Context(), "POST", "/messages/"+strconv.FormatInt(id, 10)+"/edit", form)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if res, _ := fx.as(t, auth.Operator, req); res.StatusCode != http.StatusForbidden {
		t.Errorf("an operator's edit: %d, want 403", res.StatusCode)
	}
}
