// Package auth decides who is acting and what they may do: roles (viewer <
// operator < admin), the identity of a request, the mapping from an
// identity provider's groups to roles, server-side sessions and API tokens.
//
// It knows nothing of HTTP, cookies, SQL or HTML: package web reads
// credentials off requests (a session cookie, an Authorization header, a
// trusted proxy's headers) and hands their values to an [Authenticator];
// package store keeps sessions and tokens behind the [Store] interface
// declared here; package auth/oidc runs the OpenID Connect sign-in.
//
// Secrets are never stored: a session id and an API token are 32 random
// bytes each, and only their SHA-256 is kept. Whoever reads the database
// cannot sign in with what it holds.
//
// The request's identity also becomes its audit actor ([WithIdentity] calls
// [audit.WithActor]): every audited action carries the signed-in person, the
// token ("token:NAME"), or "local" when sign-in is off.
package auth
