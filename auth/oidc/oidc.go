// Package oidc signs people in with an OpenID Connect provider (Entra ID,
// Okta, Keycloak, Google, Dex, ...): the authorization code flow with PKCE,
// the ID token verified by github.com/coreos/go-oidc (signature against the
// provider's published keys, issuer, audience, expiry) and its nonce
// checked. It hands package web whom the provider vouched for (an
// auth.User: name, email, groups from the configured claim); sessions and
// roles are package auth's business.
//
// A sign-in in progress (its state, nonce and PKCE verifier) is kept here,
// in memory, for ten minutes; the browser keeps only the state, in a
// cookie. A restart forgets sign-ins in progress: the person signs in
// again.
package oidc

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
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
	// Now returns the current time; tests replace it.
	Now func() time.Time
}

// How long a sign-in may take, and how many may be in progress at once
// (beyond that the oldest are forgotten: a flood of /login requests costs
// bounded memory).
const (
	PendingTTL = 10 * time.Minute
	maxPending = 10000
)

// Provider runs sign-ins against one OpenID Connect provider. It is safe
// for concurrent use.
type Provider struct {
	oauth    oauth2.Config
	verifier *gooidc.IDTokenVerifier
	claim    []string
	client   *http.Client
	now      func() time.Time

	mu      sync.Mutex
	pending map[string]pending // by state
}

type pending struct {
	nonce, verifier, next string
	expires               time.Time
}

// New reads the provider's discovery document (issuer +
// /.well-known/openid-configuration) and returns a Provider.
func New(ctx context.Context, cfg Config) (*Provider, error) {
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
		pending:  map[string]pending{},
	}, nil
}

func random() string {
	var b [32]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Begin starts a sign-in that returns to next: the provider's
// authorization URL (with state, nonce and the PKCE challenge) and the
// state for the browser to keep.
func (p *Provider) Begin(next string) (string, string, error) {
	state, nonce, verifier := random(), random(), oauth2.GenerateVerifier()
	now := p.now()
	p.mu.Lock()
	for s, pd := range p.pending {
		if !now.Before(pd.expires) {
			delete(p.pending, s)
		}
	}
	if len(p.pending) >= maxPending {
		var oldest string
		for s, pd := range p.pending {
			if oldest == "" || pd.expires.Before(p.pending[oldest].expires) {
				oldest = s
			}
		}
		delete(p.pending, oldest)
	}
	p.pending[state] = pending{nonce: nonce, verifier: verifier, next: next, expires: now.Add(PendingTTL)}
	p.mu.Unlock()
	return p.oauth.AuthCodeURL(state, gooidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), state, nil
}

// Error is a failed sign-in; its text is fit to show the person.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

func fail(format string, a ...any) error { return &Error{fmt.Sprintf(format, a...)} }

// Finish completes the sign-in whose state the browser kept, with the
// query the provider redirected back with: the code is exchanged (with the
// PKCE verifier) for tokens, the ID token verified and its nonce checked.
// Each state can finish once.
func (p *Provider) Finish(ctx context.Context, state string, q url.Values) (auth.User, string, error) {
	if q.Get("state") != state || state == "" {
		return auth.User{}, "", fail("The sign-in came back with a state this browser did not start.")
	}
	p.mu.Lock()
	pd, ok := p.pending[state]
	delete(p.pending, state)
	p.mu.Unlock()
	if !ok || !p.now().Before(pd.expires) {
		return auth.User{}, "", fail("This sign-in expired or was already used.")
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
	tok, err := p.oauth.Exchange(ctx, code, oauth2.VerifierOption(pd.verifier))
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
	if idt.Nonce != pd.nonce {
		return auth.User{}, "", fail("The ID token's nonce is not this sign-in's.")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return auth.User{}, "", fail("The ID token's claims could not be read: %v.", err)
	}
	u := auth.User{Email: str(claims["email"])}
	u.Name = firstOf(str(claims["preferred_username"]), u.Email, idt.Subject)
	u.Groups = list(lookup(claims, p.claim))
	return u, pd.next, nil
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
