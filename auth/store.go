package auth

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned by a Store for a token or session it does not
// hold.
var ErrNotFound = errors.New("not found")

// ErrNameTaken is returned by Store.CreateToken when the name is in use
// (names of revoked tokens stay taken, so that the audit trail's
// "token:NAME" always means one token).
var ErrNameTaken = errors.New("token name already taken")

// Token is an API token as stored: everything but the secret.
type Token struct {
	Name       string
	Role       Role
	CreatedAt  time.Time
	CreatedBy  string     // who ran `dlqdash token create`
	ExpiresAt  *time.Time // nil: never
	LastUsedAt *time.Time // nil: never used; updated at most once a minute
	RevokedAt  *time.Time
}

// Token states, as Token.State reports them.
const (
	TokenActive  = "active"
	TokenExpired = "expired"
	TokenRevoked = "revoked"
)

// State is active, expired or revoked at now.
func (t Token) State(now time.Time) string {
	switch {
	case t.RevokedAt != nil:
		return TokenRevoked
	case t.ExpiresAt != nil && !now.Before(*t.ExpiresAt):
		return TokenExpired
	}
	return TokenActive
}

// Session is a signed-in browser, as stored. The groups are kept so that
// the role can be computed again, with the current mapping, on every
// request.
type Session struct {
	ID            string // SHA-256 of the cookie's value, hex; never the value
	Name, Email   string
	Groups        []string
	Role          Role // at sign-in; shown in listings, not trusted later
	CreatedAt     time.Time
	LastSeenAt    time.Time
	IdleExpiresAt time.Time // LastSeenAt + the idle timeout
	ExpiresAt     time.Time // CreatedAt + the maximum age; never extended
}

// Store keeps tokens and sessions. Package store implements it.
type Store interface {
	// CreateToken stores t under the hash of its secret; ErrNameTaken if
	// the name is in use.
	CreateToken(ctx context.Context, t Token, hash string) error
	// TokenByHash returns the token whose secret hashes to hash, revoked
	// and expired ones included; ErrNotFound if none.
	TokenByHash(ctx context.Context, hash string) (Token, error)
	// TokenUsed sets the token's LastUsedAt.
	TokenUsed(ctx context.Context, name string, at time.Time) error
	// ListTokens returns every token, revoked ones included, by name.
	ListTokens(ctx context.Context) ([]Token, error)
	// RevokeToken sets the token's RevokedAt (unless already revoked) and
	// returns it; ErrNotFound if there is no such token.
	RevokeToken(ctx context.Context, name string, at time.Time) (Token, error)

	// CreateSession stores s.
	CreateSession(ctx context.Context, s Session) error
	// SessionByID returns the session with this hashed id; ErrNotFound if
	// none.
	SessionByID(ctx context.Context, id string) (Session, error)
	// TouchSession sets the session's LastSeenAt and IdleExpiresAt.
	TouchSession(ctx context.Context, id string, lastSeen, idleExpires time.Time) error
	// DeleteSession deletes the session (no error if it is gone).
	DeleteSession(ctx context.Context, id string) error
	// DeleteExpiredSessions deletes the sessions expired at now (idle or
	// absolute) and says how many.
	DeleteExpiredSessions(ctx context.Context, now time.Time) (int64, error)
}

// PendingSignIn is an OpenID Connect sign-in in progress, as stored
// between the redirect to the identity provider and the provider's
// redirect back (package auth/oidc keeps it, package store stores it). It
// holds no secret: the sign-in's state, nonce and PKCE verifier are derived
// from a key that only the browser's login cookie holds.
type PendingSignIn struct {
	StateHash string // SHA-256 of the sign-in's state, hex
	Client    string // the address it started from; bounds how many one address keeps
	Next      string // where to go once signed in (a path of the dashboard)
	CreatedAt time.Time
	ExpiresAt time.Time
}
