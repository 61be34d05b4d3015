// Package oidc signs people in with an OpenID Connect provider (Entra ID,
// Okta, Keycloak, Google, Dex, ...): the authorization code flow with PKCE,
// the ID token verified by github.com/coreos/go-oidc (signature against the
// provider's published keys, issuer, audience, expiry) and its nonce
// checked. It hands package web whom the provider vouched for (an
// auth.User: name, email, groups from the configured claim); sessions and
// roles are package auth's business.
//
// A sign-in in progress lives for ten minutes in a [Store] (the database,
// which every replica shares), so the provider's redirect back may reach
// any replica, a restarted one included. What is stored holds no secret:
// Begin draws a random key for the browser to keep (the login cookie), and
// derives the sign-in's state, nonce and PKCE verifier from it by HMAC; the
// store keeps the SHA-256 of the state, where to go next, the address the
// sign-in started from and its expiry. Finish derives them again from the
// cookie, checks the state the provider sent back, and takes the stored row
// (deleting it), so a sign-in finishes once, on whichever replica.
package oidc

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/dlqdash/dlqdash/auth"
)

// Config is what New needs.
type Config struct {
	Issuer   string
	ClientID string
	// ClientSecret is empty for a public client (PKCE alone).
	ClientSecret string
	// RedirectURL is this dashboard's /auth/callback as registered with
	// the provider.
	RedirectURL string
	// RolesClaim names the ID token claim with the user's groups or roles;
	// dots reach into nested objects ("realm_access.roles").
	RolesClaim string
	// Scopes to ask for; empty means openid, profile and email.
	Scopes []string
	// HTTPClient talks to the provider; nil means one with a 30 s timeout.
	HTTPClient *http.Client
	// Store keeps the sign-ins in progress; required.
	Store Store
	// Now returns the current time; tests replace it.
	Now func() time.Time
}

// Store keeps sign-ins in progress where every replica finds them. Package
// store implements it.
type Store interface {
	// CreatePendingSignIn stores p, deletes the sign-ins lapsed by
	// p.CreatedAt, and keeps at most perClient of p.Client's (its newest).
	CreatePendingSignIn(ctx context.Context, p auth.PendingSignIn, perClient int) error
	// TakePendingSignIn deletes and returns the sign-in with this state
	// hash, atomically: of two takes, one gets it. auth.ErrNotFound if
	// there is none or it had lapsed at now.
	TakePendingSignIn(ctx context.Context, stateHash string, now time.Time) (auth.PendingSignIn, error)
}

// How long a sign-in may take, and how many one client address may have
// in progress (beyond that its oldest are forgotten: a flood of /login
// requests from one address costs bounded rows; people behind one NAT
// rarely have more than a few between the redirect and the callback).
const (
	PendingTTL       = 10 * time.Minute
	PendingPerClient = 100
)

// Provider runs sign-ins against one OpenID Connect provider. It is safe
// for concurrent use.
type Provider struct {
	oauth    oauth2.Config
	verifier *gooidc.IDTokenVerifier
	claim    []string
	client   *http.Client
	now      func() time.Time
	store    Store
}

// New reads the provider's discovery document (issuer +
// /.well-known/openid-configuration) and returns a Provider.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.Store == nil {
		return nil, errors.New("OpenID Connect sign-in: no store for sign-ins in progress")
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	op, err := gooidc.NewProvider(gooidc.ClientContext(ctx, client), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("OpenID Connect provider %s: %w", cfg.Issuer, err)
	}
	scopes := cfg.Scopes
	if len(scopes) == 0 {
		scopes = []string{gooidc.ScopeOpenID, "profile", "email"}
	}
	claim := cfg.RolesClaim
	if claim == "" {
		claim = "groups"
	}
	return &Provider{
		oauth: oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: cfg.RedirectURL,
			Endpoint: op.Endpoint(), Scopes: scopes},
		verifier: op.Verifier(&gooidc.Config{ClientID: cfg.ClientID, Now: now}),
		claim:    strings.Split(claim, "."),
		client:   client,
		now:      now,
		store:    cfg.Store,
	}, nil
}

func random() string {
	var b [keyBytes]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// keyBytes is the size of a sign-in's key, the login cookie's value.
const keyBytes = 32

// secrets are a sign-in's state, nonce and PKCE verifier, derived from its
// key: HMAC-SHA256 of a label, base64url (43 characters, which a PKCE
// verifier may be).
type secrets struct{ state, nonce, verifier string }

func derive(key string) (secrets, bool) {
	k, err := base64.RawURLEncoding.DecodeString(key)
	if err != nil || len(k) != keyBytes {
		return secrets{}, false
	}
	mac := func(label string) string {
		h := hmac.New(sha256.New, k)
		h.Write([]byte("dlqdash oidc " + label))
		return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
	}
	return secrets{state: mac("state"), nonce: mac("nonce"), verifier: mac("pkce verifier")}, true
}

// stateHash is what the store keys a sign-in by.
func stateHash(state string) string {
	h := sha256.Sum256([]byte(state))
	return hex.EncodeToString(h[:])
}

// Begin starts a sign-in from the client address client that returns to
// next: it stores the sign-in, and returns the provider's authorization
// URL (with state, nonce and the PKCE challenge) and the key for the
// browser to keep (in the login cookie), from which Finish derives them
// again.
func (p *Provider) Begin(ctx context.Context, next, client string) (string, string, error) {
	key := random()
	sec, _ := derive(key)
	now := p.now()
	err := p.store.CreatePendingSignIn(ctx, auth.PendingSignIn{StateHash: stateHash(sec.state), Client: client, Next: next,
		CreatedAt: now, ExpiresAt: now.Add(PendingTTL)}, PendingPerClient)
	if err != nil {
		return "", "", fmt.Errorf("start a sign-in: %w", err)
	}
	return p.oauth.AuthCodeURL(sec.state, gooidc.Nonce(sec.nonce), oauth2.S256ChallengeOption(sec.verifier)), key, nil
}

// Error is a failed sign-in; its text is fit to show the person.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

// SignInRefused marks the error as the sign-in's own failure, fit to show
// (package web shows it; any other error of Finish is the server's).
func (e *Error) SignInRefused() {}

func fail(format string, a ...any) error { return &Error{fmt.Sprintf(format, a...)} }

// Finish completes the sign-in whose key the browser kept, with the query
// the provider redirected back with: the state must be the one derived from
// the key, the stored sign-in is taken (each finishes once, on any
// replica), the code is exchanged (with the PKCE verifier) for tokens, the
// ID token verified and its nonce checked. Its *Error values are fit to
// show; any other error is the store's.
func (p *Provider) Finish(ctx context.Context, key string, q url.Values) (auth.User, string, error) {
	sec, ok := derive(key)
	if !ok || q.Get("state") != sec.state {
		return auth.User{}, "", fail("The sign-in came back with a state this browser did not start.")
	}
	pd, err := p.store.TakePendingSignIn(ctx, stateHash(sec.state), p.now())
	if errors.Is(err, auth.ErrNotFound) {
		return auth.User{}, "", fail("This sign-in expired or was already used.")
	}
	if err != nil {
		return auth.User{}, "", fmt.Errorf("finish the sign-in: %w", err)
	}
	if e := q.Get("error"); e != "" {
		msg := "The identity provider refused the sign-in (" + e + ")"
		if d := q.Get("error_description"); d != "" {
			msg += ": " + d
		}
		return auth.User{}, "", fail("%s.", msg)
	}
	code := q.Get("code")
	if code == "" {
		return auth.User{}, "", fail("The identity provider sent no authorization code.")
	}
	ctx = gooidc.ClientContext(ctx, p.client)
	tok, err := p.oauth.Exchange(ctx, code, oauth2.VerifierOption(sec.verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode != "" {
			return auth.User{}, "", fail("The identity provider would not exchange the code (%s).", re.ErrorCode)
		}
		return auth.User{}, "", fail("The identity provider's token endpoint failed: %v.", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return auth.User{}, "", fail("The identity provider sent no ID token (is the openid scope allowed?).")
	}
	idt, err := p.verifier.Verify(ctx, raw)
	if err != nil {
		return auth.User{}, "", fail("The ID token did not verify: %v.", err)
	}
	if idt.Nonce != sec.nonce {
		return auth.User{}, "", fail("The ID token's nonce is not this sign-in's.")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return auth.User{}, "", fail("The ID token's claims could not be read: %v.", err)
	}
	u := auth.User{Email: str(claims["email"])}
	u.Name = firstOf(str(claims["preferred_username"]), u.Email, idt.Subject)
	u.Groups = list(lookup(claims, p.claim))
	return u, pd.Next, nil
}

func str(v any) string {
	s, _ := v.(string)
	return strings.TrimSpace(s)
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// lookup follows a dotted claim path through nested objects.
func lookup(claims map[string]any, path []string) any {
	var v any = claims
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// list reads a groups claim: an array of strings, or one string.
func list(v any) []string {
	switch v := v.(type) {
	case string:
		if s := strings.TrimSpace(v); s != "" {
			return []string{s}
		}
	case []any:
		var out []string
		for _, item := range v {
			if s := str(item); s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
