package auth

import (
	"context"

	"github.com/dlqdash/dlqdash/audit"
)

// Via says how a request's identity was established.
type Via string

const (
	ViaNone    Via = "none"    // sign-in is off: the local user, an admin
	ViaSession Via = "session" // a session cookie from an OpenID Connect sign-in
	ViaToken   Via = "token"   // an API token (Authorization: Bearer)
	ViaProxy   Via = "proxy"   // headers from a trusted reverse proxy
)

// Identity is who a request acts for. The zero value is anonymous.
type Identity struct {
	// Name is the person's user name (or the token's name). Empty means
	// anonymous.
	Name  string
	Email string
	// Role is what they may do now: for sessions and proxies it is
	// computed from Groups by the current Mapping on every request.
	Role   Role
	Via    Via
	Groups []string
	// SessionID is the hash of the session's id (Via == ViaSession), never
	// the cookie's value.
	SessionID string
}

// Anonymous reports whether nobody is identified.
func (id Identity) Anonymous() bool { return id.Name == "" }

// Actor is the name the audit trail records (and a job's created_by): the
// identity source's namespace and the name, "oidc:NAME" for a sign-in,
// "proxy:NAME" for a trusted proxy's user, "token:NAME" for an API token,
// and "local" without sign-in, so that names from different sources never
// collide (a proxy user called "token:ci" is "proxy:token:ci"). Entries
// stored before the namespaces carry the bare name; audit.DisplayName
// reads both.
func (id Identity) Actor() string {
	switch id.Via {
	case ViaToken:
		return audit.ActorToken + id.Name
	case ViaSession:
		return audit.ActorOIDC + id.Name
	case ViaProxy:
		return audit.ActorProxy + id.Name
	case ViaNone:
		return audit.ActorLocal
	}
	return id.Name
}

// Local is the identity of every request when sign-in is off.
func Local() Identity {
	return Identity{Name: audit.ActorLocal, Role: Admin, Via: ViaNone}
}

type identityKey struct{}

// WithIdentity returns ctx carrying id, and id's actor for the audit trail
// (audit.WithActor) unless id is anonymous.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	ctx = context.WithValue(ctx, identityKey{}, id)
	if !id.Anonymous() {
		ctx = audit.WithActor(ctx, id.Actor())
	}
	return ctx
}

// FromContext is the identity ctx carries; anonymous if none.
func FromContext(ctx context.Context) Identity {
	id, _ := ctx.Value(identityKey{}).(Identity)
	return id
}
