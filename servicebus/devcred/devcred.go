// Package devcred is a token credential for the dlqdash emulator and tests
// only: it signs its own Entra ID style access tokens (JWTs, HS256) with a
// shared key, which `dlqdash emulator --jwt-key-file` (or
// DLQDASH_EMULATOR_JWT_KEY) is configured to check. It lets every Entra ID
// code path of dlqdash (the SDKs' TokenCredential clients, $cbs put-token
// with token type jwt, bearer tokens on the admin API) run against the
// emulator without an identity provider.
//
// Azure Service Bus never accepts these tokens: real namespaces take tokens
// that Microsoft Entra ID signs (azidentity's credentials).
package devcred

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// Audience is the audience Entra ID puts in tokens for Service Bus, and
// the one the emulator checks.
const Audience = "https://servicebus.azure.net"

// DefaultSubject is the sub claim without Options.Subject.
const DefaultSubject = "dlqdash-devcred"

// DefaultLifetime is how long a token lives without Options.Lifetime, as
// Entra ID's access tokens do (about an hour).
const DefaultLifetime = time.Hour

// MinKeySize is the shortest key New accepts, in bytes: an HS256 key should
// be as long as the hash.
const MinKeySize = 32

// Options tune New. The zero value is usable.
type Options struct {
	// Subject is the sub claim (the identity the token stands for);
	// default DefaultSubject.
	Subject string
	// Audience overrides the aud claim, for tests of a refused audience;
	// default Audience.
	Audience string
	// Lifetime is how long each token is valid; default DefaultLifetime.
	// A negative lifetime makes expired tokens, for tests.
	Lifetime time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Credential is an azcore.TokenCredential that signs HS256 JWTs. Safe for
// concurrent use.
type Credential struct {
	key  []byte
	opts Options
}

var _ azcore.TokenCredential = (*Credential)(nil)

// New returns a credential signing with key (at least MinKeySize bytes).
// For the emulator and tests only.
func New(key []byte, opts Options) (*Credential, error) {
	if len(key) < MinKeySize {
		return nil, fmt.Errorf("devcred: the signing key has %d bytes; use at least %d (for example 32 random bytes)", len(key), MinKeySize)
	}
	if opts.Subject == "" {
		opts.Subject = DefaultSubject
	}
	if opts.Audience == "" {
		opts.Audience = Audience
	}
	if opts.Lifetime == 0 {
		opts.Lifetime = DefaultLifetime
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Credential{key: append([]byte(nil), key...), opts: opts}, nil
}

// GetToken signs a token for the Service Bus audience. The scopes the SDKs
// ask for (https://servicebus.azure.net//.default) all mean that audience;
// a request for no scope is refused, as Entra ID refuses it.
func (c *Credential) GetToken(ctx context.Context, req policy.TokenRequestOptions) (azcore.AccessToken, error) {
	if err := ctx.Err(); err != nil {
		return azcore.AccessToken{}, err
	}
	if len(req.Scopes) == 0 {
		return azcore.AccessToken{}, errors.New("devcred: a token was requested for no scope")
	}
	now := c.opts.Now()
	exp := now.Add(c.opts.Lifetime)
	tok, err := c.sign(map[string]any{
		"aud": c.opts.Audience,
		"iss": "dlqdash-devcred",
		"sub": c.opts.Subject,
		"iat": now.Unix(),
		"nbf": now.Add(-time.Minute).Unix(),
		"exp": exp.Unix(),
	})
	if err != nil {
		return azcore.AccessToken{}, err
	}
	return azcore.AccessToken{Token: tok, ExpiresOn: time.Unix(exp.Unix(), 0)}, nil
}

// sign encodes claims as a compact JWS, HS256.
func (c *Credential) sign(claims map[string]any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("devcred: encode the token's claims: %w", err)
	}
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString(payload)
	mac := hmac.New(sha256.New, c.key)
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil)), nil
}
