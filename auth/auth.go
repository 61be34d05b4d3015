package auth

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Mode is how people sign in.
type Mode string

const (
	// ModeNone: no sign-in; every request is the local user, an admin.
	ModeNone Mode = "none"
	// ModeOIDC: sign-in with an OpenID Connect provider, then a session.
	ModeOIDC Mode = "oidc"
	// ModeProxy: a reverse proxy in front signs people in and names them
	// in request headers, trusted only from its addresses.
	ModeProxy Mode = "proxy"
)

// ParseMode reads none, oidc or proxy.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case ModeNone, ModeOIDC, ModeProxy:
		return m, nil
	}
	return "", fmt.Errorf("unknown sign-in mode %q: want none, oidc or proxy", s)
}

// Session lifetimes by default: a working day at most, and signed out
// after two idle hours.
const (
	DefaultIdleTimeout = 2 * time.Hour
	DefaultMaxAge      = 12 * time.Hour
)

// touchEvery is how stale a session's LastSeenAt or a token's LastUsedAt
// may get before a request writes it again: a write per request would
// serialise every page view on SQLite's one writer for no gain.
const touchEvery = time.Minute

// Config is what New needs.
type Config struct {
	Mode    Mode
	Mapping Mapping
	// Store keeps sessions and tokens; nil means neither exists (every
	// bearer token is refused, no session can start).
	Store Store
	// TrustedProxies are the addresses whose identity headers are believed
	// (ModeProxy).
	TrustedProxies []netip.Prefix
	// IdleTimeout and MaxAge bound a session; zero means the defaults.
	IdleTimeout, MaxAge time.Duration
	// Now returns the current time; tests replace it.
	Now func() time.Time
}

// Authenticator turns the credentials a request presents into an Identity.
// It is safe for concurrent use.
type Authenticator struct {
	cfg Config
}

// New returns an Authenticator for cfg.
func New(cfg Config) *Authenticator {
	if cfg.Mode == "" {
		cfg.Mode = ModeNone
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Authenticator{cfg: cfg}
}

// Mode is the sign-in mode.
func (a *Authenticator) Mode() Mode { return a.cfg.Mode }

// CredentialsError is a credential that was presented and refused: an
// unknown, expired or revoked token, an expired session. Reason says which,
// in words fit for the client.
type CredentialsError struct{ Reason string }

func (e *CredentialsError) Error() string { return "credentials refused: " + e.Reason }

// ErrNoRole: the identity provider vouched for someone whose groups earn
// no role.
var ErrNoRole = errors.New("no role: none of the user's groups is mapped to a role")

// Token returns the identity of an API token (the value after "Bearer ").
func (a *Authenticator) Token(ctx context.Context, secret string) (Identity, error) {
	if a.cfg.Store == nil || !strings.HasPrefix(strings.TrimSpace(secret), TokenPrefix) {
		return Identity{}, &CredentialsError{Reason: "the bearer token is not a dlqdash API token"}
	}
	t, err := a.cfg.Store.TokenByHash(ctx, HashToken(secret))
	if errors.Is(err, ErrNotFound) {
		return Identity{}, &CredentialsError{Reason: "the API token is not known"}
	}
	if err != nil {
		return Identity{}, fmt.Errorf("look up token: %w", err)
	}
	now := a.cfg.Now()
	switch t.State(now) {
	case TokenRevoked:
		return Identity{}, &CredentialsError{Reason: fmt.Sprintf("the API token %q was revoked", t.Name)}
	case TokenExpired:
		return Identity{}, &CredentialsError{Reason: fmt.Sprintf("the API token %q expired at %s", t.Name, t.ExpiresAt.UTC().Format(time.RFC3339))}
	}
	if t.LastUsedAt == nil || now.Sub(*t.LastUsedAt) >= touchEvery {
		if err := a.cfg.Store.TokenUsed(ctx, t.Name, now); err != nil {
			return Identity{}, fmt.Errorf("record token use: %w", err)
		}
	}
	return Identity{Name: t.Name, Role: t.Role, Via: ViaToken}, nil
}

// Session returns the identity of a session cookie's value. The role is
// computed anew from the session's groups with the current mapping: a
// session whose groups no longer earn a role is deleted, like an expired
// one. A cookie naming no session is a *CredentialsError.
func (a *Authenticator) Session(ctx context.Context, cookie string) (Identity, error) {
	if a.cfg.Store == nil {
		return Identity{}, &CredentialsError{Reason: "there are no sessions"}
	}
	id := hashSecret(cookie)
	s, err := a.cfg.Store.SessionByID(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Identity{}, &CredentialsError{Reason: "the session has ended; sign in again"}
	}
	if err != nil {
		return Identity{}, fmt.Errorf("look up session: %w", err)
	}
	now := a.cfg.Now()
	role := a.cfg.Mapping.Role(s.Groups)
	if !now.Before(s.ExpiresAt) || !now.Before(s.IdleExpiresAt) || role == NoRole {
		if err := a.cfg.Store.DeleteSession(ctx, id); err != nil {
			return Identity{}, fmt.Errorf("delete session: %w", err)
		}
		if role == NoRole {
			return Identity{}, &CredentialsError{Reason: "the session's groups no longer earn a role"}
		}
		return Identity{}, &CredentialsError{Reason: "the session expired; sign in again"}
	}
	if now.Sub(s.LastSeenAt) >= touchEvery {
		if err := a.cfg.Store.TouchSession(ctx, id, now, now.Add(a.cfg.IdleTimeout)); err != nil {
			return Identity{}, fmt.Errorf("touch session: %w", err)
		}
	}
	return Identity{Name: s.Name, Email: s.Email, Groups: s.Groups, Role: role, Via: ViaSession, SessionID: id}, nil
}

// User is whom an identity provider vouched for.
type User struct {
	Name, Email string
	Groups      []string
}

// StartSession signs u in: it deletes the session whose cookie value is
// replacing (if any: a new sign-in always gets a new id, so an id planted
// before sign-in is worth nothing) and creates a new one. It returns the
// new cookie value and the identity; ErrNoRole if u's groups earn no role.
func (a *Authenticator) StartSession(ctx context.Context, u User, replacing string) (string, Identity, error) {
	if a.cfg.Store == nil {
		return "", Identity{}, errors.New("start session: no session store")
	}
	role := a.cfg.Mapping.Role(u.Groups)
	if role == NoRole {
		return "", Identity{}, ErrNoRole
	}
	if replacing != "" {
		if err := a.cfg.Store.DeleteSession(ctx, hashSecret(replacing)); err != nil {
			return "", Identity{}, fmt.Errorf("end the previous session: %w", err)
		}
	}
	now := a.cfg.Now()
	// Expired sessions are pruned at sign-in: often enough, and off the
	// path of every other request.
	if _, err := a.cfg.Store.DeleteExpiredSessions(ctx, now); err != nil {
		return "", Identity{}, fmt.Errorf("prune sessions: %w", err)
	}
	cookie := newSecret()
	s := Session{ID: hashSecret(cookie), Name: u.Name, Email: u.Email, Groups: u.Groups, Role: role,
		CreatedAt: now, LastSeenAt: now, IdleExpiresAt: now.Add(a.cfg.IdleTimeout), ExpiresAt: now.Add(a.cfg.MaxAge)}
	if err := a.cfg.Store.CreateSession(ctx, s); err != nil {
		return "", Identity{}, fmt.Errorf("create session: %w", err)
	}
	return cookie, Identity{Name: u.Name, Email: u.Email, Groups: u.Groups, Role: role, Via: ViaSession, SessionID: s.ID}, nil
}

// EndSession deletes the session of a cookie's value.
func (a *Authenticator) EndSession(ctx context.Context, cookie string) error {
	if a.cfg.Store == nil || cookie == "" {
		return nil
	}
	return a.cfg.Store.DeleteSession(ctx, hashSecret(cookie))
}

// MaxAge is the longest a session lives: the cookie's Max-Age.
func (a *Authenticator) MaxAge() time.Duration { return a.cfg.MaxAge }

// TrustsProxy reports whether peer (the TCP peer of a request, never a
// header) is one of the trusted proxies.
func (a *Authenticator) TrustsProxy(peer netip.Addr) bool {
	peer = peer.Unmap()
	for _, p := range a.cfg.TrustedProxies {
		if p.Contains(peer) {
			return true
		}
	}
	return false
}

// Proxied is the identity a trusted proxy's headers name: the user, their
// email and their groups (comma-separated), the role from the mapping.
// The caller has checked TrustsProxy. Anonymous if user is empty.
func (a *Authenticator) Proxied(user, email, groups string) Identity {
	user = strings.TrimSpace(user)
	if user == "" {
		return Identity{}
	}
	g := SplitList(groups)
	return Identity{Name: user, Email: strings.TrimSpace(email), Groups: g, Role: a.cfg.Mapping.Role(g), Via: ViaProxy}
}

// ParsePrefixes reads comma-separated CIDRs; a plain address means just
// that address (/32 or /128).
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range SplitList(s) {
		if p, err := netip.ParsePrefix(item); err == nil {
			out = append(out, p.Masked())
			continue
		}
		addr, err := netip.ParseAddr(item)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR (10.0.0.0/8) nor an address (10.0.0.7)", item)
		}
		out = append(out, netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen()))
	}
	return out, nil
}

// CreateToken makes a new API token: it returns the secret (shown once,
// never stored) and the token as stored.
func CreateToken(ctx context.Context, st Store, t Token) (string, Token, error) {
	if !validTokenName(t.Name) {
		return "", Token{}, fmt.Errorf("invalid token name %q: want 1 to 64 letters, digits, '.', '_' or '-'", t.Name)
	}
	if t.Role == NoRole {
		return "", Token{}, errors.New("a token needs a role: viewer, operator or admin")
	}
	secret, hash := NewToken()
	if err := st.CreateToken(ctx, t, hash); err != nil {
		return "", Token{}, err
	}
	return secret, t, nil
}
