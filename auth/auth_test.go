package auth_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/auth"
)

// memStore is an in-memory auth.Store; package store's tests check the
// real one against the same contract.
type memStore struct {
	mu       sync.Mutex
	tokens   map[string]auth.Token // by hash
	sessions map[string]auth.Session
	touches  int
}

func newMemStore() *memStore {
	return &memStore{tokens: map[string]auth.Token{}, sessions: map[string]auth.Session{}}
}

func (m *memStore) CreateToken(_ context.Context, t auth.Token, hash string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.tokens {
		if o.Name == t.Name {
			return auth.ErrNameTaken
		}
	}
	m.tokens[hash] = t
	return nil
}

func (m *memStore) TokenByHash(_ context.Context, hash string) (auth.Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tokens[hash]
	if !ok {
		return t, auth.ErrNotFound
	}
	return t, nil
}

func (m *memStore) TokenUsed(_ context.Context, name string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.touches++
	for h, t := range m.tokens {
		if t.Name == name {
			t.LastUsedAt = &at
			m.tokens[h] = t
		}
	}
	return nil
}

func (m *memStore) ListTokens(context.Context) ([]auth.Token, error) { return nil, nil }

func (m *memStore) RevokeToken(_ context.Context, name string, at time.Time) (auth.Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for h, t := range m.tokens {
		if t.Name == name {
			t.RevokedAt = &at
			m.tokens[h] = t
			return t, nil
		}
	}
	return auth.Token{}, auth.ErrNotFound
}

func (m *memStore) CreateSession(_ context.Context, s auth.Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sessions[s.ID] = s
	return nil
}

func (m *memStore) SessionByID(_ context.Context, id string) (auth.Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return s, auth.ErrNotFound
	}
	return s, nil
}

func (m *memStore) TouchSession(_ context.Context, id string, seen, idle time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.touches++
	s := m.sessions[id]
	s.LastSeenAt, s.IdleExpiresAt = seen, idle
	m.sessions[id] = s
	return nil
}

func (m *memStore) DeleteSession(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, id)
	return nil
}

func (m *memStore) DeleteExpiredSessions(_ context.Context, now time.Time) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for id, s := range m.sessions {
		if !now.Before(s.ExpiresAt) || !now.Before(s.IdleExpiresAt) {
			delete(m.sessions, id)
			n++
		}
	}
	return n, nil
}

// clock is a settable time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func TestRoles(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want auth.Role
	}{{"viewer", auth.Viewer}, {" Operator ", auth.Operator}, {"ADMIN", auth.Admin}} {
		got, err := auth.ParseRole(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseRole(%q) = %v, %v", tt.in, got, err)
		}
	}
	if _, err := auth.ParseRole("root"); err == nil {
		t.Error("ParseRole(root) succeeded")
	}
	// Each role includes the ones before it and none after it.
	roles := []auth.Role{auth.NoRole, auth.Viewer, auth.Operator, auth.Admin}
	for i, have := range roles {
		for j, need := range roles {
			if got := have.Includes(need); got != (i >= j) {
				t.Errorf("%v.Includes(%v) = %v", have, need, got)
			}
		}
	}
	if auth.Admin.String() != "admin" || auth.NoRole.String() != "none" {
		t.Errorf("names: %v %v", auth.Admin, auth.NoRole)
	}
}

func TestMapping(t *testing.T) {
	m := auth.Mapping{Admin: []string{"dlq-admins"}, Operator: []string{"sre", "support-leads"}, Viewer: []string{"support"}}
	for _, tt := range []struct {
		groups []string
		want   auth.Role
	}{
		{nil, auth.NoRole},
		{[]string{"marketing"}, auth.NoRole},
		{[]string{"support"}, auth.Viewer},
		{[]string{"support", "sre"}, auth.Operator},
		{[]string{"support", "dlq-admins", "sre"}, auth.Admin},
		{[]string{"SRE"}, auth.NoRole}, // exact match
	} {
		if got := m.Role(tt.groups); got != tt.want {
			t.Errorf("Role(%q) = %v, want %v", tt.groups, got, tt.want)
		}
	}
	everyone := auth.Mapping{Admin: []string{"ops"}, Viewer: []string{auth.Everyone}}
	if everyone.Role(nil) != auth.Viewer || everyone.Role([]string{"ops"}) != auth.Admin {
		t.Error("* does not match everyone, or hides a higher role")
	}
	if got := auth.SplitList(" a, ,b ,"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("SplitList = %q", got)
	}
}

func TestIdentityIsTheAuditActor(t *testing.T) {
	ctx := auth.WithIdentity(t.Context(), auth.Identity{Name: "alice@example.com", Role: auth.Operator, Via: auth.ViaSession})
	if got := audit.ActorFrom(ctx); got != "oidc:alice@example.com" {
		t.Errorf("actor = %q", got)
	}
	// Each source has its namespace: names from different sources never
	// collide, whatever the names are.
	for _, tt := range []struct {
		id   auth.Identity
		want string
	}{
		{auth.Identity{Name: "token:ci", Via: auth.ViaProxy}, "proxy:token:ci"},
		{auth.Identity{Name: "local", Via: auth.ViaProxy}, "proxy:local"},
		{auth.Identity{Name: "proxy:bob", Via: auth.ViaSession}, "oidc:proxy:bob"},
		{auth.Identity{Name: "oidc:bob", Via: auth.ViaToken}, "token:oidc:bob"},
		{auth.Local(), "local"},
	} {
		if got := tt.id.Actor(); got != tt.want {
			t.Errorf("%+v: actor %q, want %q", tt.id, got, tt.want)
		}
		if got := audit.DisplayName(tt.want); got != tt.id.Name {
			t.Errorf("DisplayName(%q) = %q, want %q", tt.want, got, tt.id.Name)
		}
	}
	// Actors stored before the namespaces read as themselves.
	if got := audit.DisplayName("alice@example.com"); got != "alice@example.com" {
		t.Errorf("DisplayName of a bare name = %q", got)
	}
	ctx = auth.WithIdentity(t.Context(), auth.Identity{Name: "ci", Role: auth.Operator, Via: auth.ViaToken})
	if got := audit.ActorFrom(ctx); got != "token:ci" {
		t.Errorf("token actor = %q", got)
	}
	if got := auth.FromContext(ctx); got.Name != "ci" || got.Via != auth.ViaToken {
		t.Errorf("FromContext = %+v", got)
	}
	if got := auth.FromContext(t.Context()); !got.Anonymous() {
		t.Errorf("empty context: %+v", got)
	}
	if l := auth.Local(); l.Name != "local" || l.Role != auth.Admin {
		t.Errorf("Local = %+v", l)
	}
}

func TestTokens(t *testing.T) {
	st := newMemStore()
	c := &clock{t0}
	a := auth.New(auth.Config{Mode: auth.ModeOIDC, Store: st, Now: c.now})
	ctx := t.Context()
	exp := t0.Add(time.Hour)
	secret, tok, err := auth.CreateToken(ctx, st, auth.Token{Name: "ci-bot", Role: auth.Operator, CreatedAt: t0, ExpiresAt: &exp})
	if err != nil {
		t.Fatal(err)
	}
	if len(secret) != len(auth.TokenPrefix)+43 || tok.Name != "ci-bot" {
		t.Fatalf("secret %q, token %+v", secret, tok)
	}
	if _, _, err := auth.CreateToken(ctx, st, auth.Token{Name: "ci-bot", Role: auth.Viewer}); !errors.Is(err, auth.ErrNameTaken) {
		t.Errorf("second ci-bot: %v", err)
	}
	for _, bad := range []string{"", "with space", "a/b", string(make([]byte, 65))} {
		if _, _, err := auth.CreateToken(ctx, st, auth.Token{Name: bad, Role: auth.Viewer}); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}

	id, err := a.Token(ctx, secret)
	if err != nil || id.Name != "ci-bot" || id.Role != auth.Operator || id.Via != auth.ViaToken {
		t.Fatalf("Token = %+v, %v", id, err)
	}
	// last_used is written at most once a minute.
	a.Token(ctx, secret)
	c.advance(30 * time.Second)
	a.Token(ctx, secret)
	if st.touches != 1 {
		t.Errorf("%d writes of last_used within a minute, want 1", st.touches)
	}
	c.advance(31 * time.Second)
	a.Token(ctx, secret)
	if st.touches != 2 {
		t.Errorf("%d writes of last_used after a minute, want 2", st.touches)
	}

	var ce *auth.CredentialsError
	for _, bad := range []string{"", "dlq_nope", "not-a-token", secret + "x"} {
		if _, err := a.Token(ctx, bad); !errors.As(err, &ce) {
			t.Errorf("Token(%q): %v, want a CredentialsError", bad, err)
		}
	}
	c.t = exp
	if _, err := a.Token(ctx, secret); !errors.As(err, &ce) || ce.Reason == "" {
		t.Errorf("expired token: %v", err)
	}
	c.t = t0
	if _, err := st.RevokeToken(ctx, "ci-bot", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Token(ctx, secret); !errors.As(err, &ce) {
		t.Errorf("revoked token: %v", err)
	}
}

func TestSessions(t *testing.T) {
	st := newMemStore()
	c := &clock{t0}
	mapping := auth.Mapping{Operator: []string{"sre"}, Viewer: []string{"support"}}
	a := auth.New(auth.Config{Mode: auth.ModeOIDC, Store: st, Now: c.now, Mapping: mapping, IdleTimeout: time.Hour, MaxAge: 3 * time.Hour})
	ctx := t.Context()
	var ce *auth.CredentialsError

	if _, _, err := a.StartSession(ctx, auth.User{Name: "eve", Groups: []string{"marketing"}}, ""); !errors.Is(err, auth.ErrNoRole) {
		t.Errorf("no role: %v", err)
	}
	cookie, id, err := a.StartSession(ctx, auth.User{Name: "alice", Email: "alice@example.com", Groups: []string{"sre"}}, "")
	if err != nil || id.Role != auth.Operator || id.Via != auth.ViaSession {
		t.Fatalf("StartSession = %+v, %v", id, err)
	}
	for sid := range st.sessions {
		if sid == cookie {
			t.Fatal("the store holds the cookie's value")
		}
	}
	got, err := a.Session(ctx, cookie)
	if err != nil || got.Name != "alice" || got.Role != auth.Operator || got.SessionID != id.SessionID {
		t.Fatalf("Session = %+v, %v", got, err)
	}

	// Signing in again replaces the session: the old id is worthless.
	cookie2, _, err := a.StartSession(ctx, auth.User{Name: "alice", Groups: []string{"sre"}}, cookie)
	if err != nil || cookie2 == cookie {
		t.Fatalf("second sign-in: %q, %v", cookie2, err)
	}
	if _, err := a.Session(ctx, cookie); !errors.As(err, &ce) {
		t.Errorf("the replaced session still works: %v", err)
	}

	// Idle expiry, extended by use.
	c.advance(50 * time.Minute)
	if _, err := a.Session(ctx, cookie2); err != nil {
		t.Fatalf("after 50 idle minutes: %v", err)
	}
	c.advance(50 * time.Minute)
	if _, err := a.Session(ctx, cookie2); err != nil {
		t.Fatalf("50 minutes after the last use: %v", err)
	}
	c.advance(61 * time.Minute)
	if _, err := a.Session(ctx, cookie2); !errors.As(err, &ce) {
		t.Fatalf("after 61 idle minutes: %v", err)
	}
	if len(st.sessions) != 0 {
		t.Errorf("expired session not deleted")
	}

	// Absolute expiry, however busy.
	c.t = t0
	cookie3, _, _ := a.StartSession(ctx, auth.User{Name: "bob", Groups: []string{"support"}}, "")
	for range 5 {
		c.advance(30 * time.Minute)
		if _, err := a.Session(ctx, cookie3); err != nil {
			t.Fatalf("at %v: %v", c.t, err)
		}
	}
	c.advance(30 * time.Minute)
	if _, err := a.Session(ctx, cookie3); !errors.As(err, &ce) {
		t.Errorf("after the maximum age: %v", err)
	}

	// The role follows the current mapping: removing the group from it
	// ends the session at its next request.
	c.t = t0
	cookie4, _, _ := a.StartSession(ctx, auth.User{Name: "carol", Groups: []string{"support"}}, "")
	stricter := auth.New(auth.Config{Mode: auth.ModeOIDC, Store: st, Now: c.now, Mapping: auth.Mapping{Operator: []string{"sre"}}})
	if _, err := stricter.Session(ctx, cookie4); !errors.As(err, &ce) {
		t.Errorf("a session outlived its role: %v", err)
	}
	if _, err := a.Session(ctx, cookie4); !errors.As(err, &ce) {
		t.Errorf("the session was not deleted: %v", err)
	}
	promoted := auth.New(auth.Config{Mode: auth.ModeOIDC, Store: st, Now: c.now, Mapping: auth.Mapping{Admin: []string{"support"}}})
	cookie5, _, _ := a.StartSession(ctx, auth.User{Name: "dan", Groups: []string{"support"}}, "")
	if id, err := promoted.Session(ctx, cookie5); err != nil || id.Role != auth.Admin {
		t.Errorf("role from the current mapping: %+v, %v", id, err)
	}

	if err := a.EndSession(ctx, cookie5); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Session(ctx, cookie5); !errors.As(err, &ce) {
		t.Errorf("after EndSession: %v", err)
	}
}

func TestProxy(t *testing.T) {
	prefixes, err := auth.ParsePrefixes("10.0.0.0/8, 192.168.1.7, ::1")
	if err != nil {
		t.Fatal(err)
	}
	a := auth.New(auth.Config{Mode: auth.ModeProxy, TrustedProxies: prefixes, Mapping: auth.Mapping{Operator: []string{"sre"}}})
	for _, tt := range []struct {
		addr string
		want bool
	}{{"10.1.2.3", true}, {"192.168.1.7", true}, {"192.168.1.8", false}, {"::1", true}, {"::ffff:10.0.0.1", true}, {"127.0.0.1", false}} {
		if got := a.TrustsProxy(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("TrustsProxy(%s) = %v", tt.addr, got)
		}
	}
	id := a.Proxied(" alice ", "alice@example.com", "support, sre")
	if id.Name != "alice" || id.Role != auth.Operator || id.Via != auth.ViaProxy || !slices.Equal(id.Groups, []string{"support", "sre"}) {
		t.Errorf("Proxied = %+v", id)
	}
	if !a.Proxied("", "x@example.com", "sre").Anonymous() {
		t.Error("no user, yet not anonymous")
	}
	if _, err := auth.ParsePrefixes("10.0.0.0/8,nonsense"); err == nil {
		t.Error("nonsense accepted")
	}
	if m, err := auth.ParseMode(" OIDC "); err != nil || m != auth.ModeOIDC {
		t.Errorf("ParseMode = %v, %v", m, err)
	}
}
