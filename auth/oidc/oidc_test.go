package oidc_test

import (
	"errors"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/auth/oidc"
	"github.com/dlqdash/dlqdash/auth/oidc/oidctest"
	"github.com/dlqdash/dlqdash/store"
)

const redirect = "http://127.0.0.1:8080/auth/callback"

// openStore is the real store (SQLite) that keeps sign-ins in progress.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newProvider(t *testing.T, claim string) (*oidctest.Provider, *oidc.Provider) {
	t.Helper()
	op := oidctest.New(t, "dlqdash", "s3cret", redirect)
	return op, providerOn(t, op, openStore(t), claim, nil)
}

// providerOn is a Provider for op keeping its sign-ins in st: two on one
// store are two replicas.
func providerOn(t *testing.T, op *oidctest.Provider, st oidc.Store, claim string, now func() time.Time) *oidc.Provider {
	t.Helper()
	p, err := oidc.New(t.Context(), oidc.Config{Issuer: op.Issuer, ClientID: "dlqdash", ClientSecret: "s3cret", RedirectURL: redirect,
		RolesClaim: claim, Store: st, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// authorize follows the authorization URL as a browser would, up to the
// redirect back to dlqdash, and returns that redirect's query.
func authorize(t *testing.T, authURL string) url.Values {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc, err := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusFound || err != nil || !strings.HasPrefix(loc.String(), redirect) {
		t.Fatalf("authorize: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	return loc.Query()
}

func TestSignIn(t *testing.T) {
	op, p := newProvider(t, "")
	op.SignInAs(map[string]any{"preferred_username": "alice", "email": "alice@example.com", "groups": []string{"sre", "support"}})
	authURL, state, err := p.Begin(t.Context(), "/messages?entity=orders", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(authURL)
	q := u.Query()
	// The browser's key is in no URL: state, nonce and verifier derive
	// from it.
	if q.Get("state") == "" || strings.Contains(authURL, state) || q.Get("nonce") == "" || q.Get("nonce") == q.Get("state") || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" ||
		q.Get("redirect_uri") != redirect || !strings.Contains(q.Get("scope"), "openid") {
		t.Fatalf("authorization URL lacks what the flow needs: %s", authURL)
	}
	back := authorize(t, authURL)
	user, next, err := p.Finish(t.Context(), state, back)
	if err != nil {
		t.Fatal(err)
	}
	if user.Name != "alice" || user.Email != "alice@example.com" || !slices.Equal(user.Groups, []string{"sre", "support"}) || next != "/messages?entity=orders" {
		t.Errorf("Finish = %+v, %q", user, next)
	}
	// A state finishes once: the same callback again is refused.
	if _, _, err := p.Finish(t.Context(), state, back); err == nil {
		t.Error("the callback was accepted twice")
	}
}

func TestNestedRolesClaimAndNames(t *testing.T) {
	op, p := newProvider(t, "realm_access.roles")
	op.SignInAs(map[string]any{"sub": "1234", "email": "bob@example.com", "realm_access": map[string]any{"roles": []string{"dlq-admin"}}})
	authURL, state, _ := p.Begin(t.Context(), "/", "192.0.2.1")
	user, _, err := p.Finish(t.Context(), state, authorize(t, authURL))
	if err != nil {
		t.Fatal(err)
	}
	if user.Name != "bob@example.com" || !slices.Equal(user.Groups, []string{"dlq-admin"}) {
		t.Errorf("user = %+v", user)
	}
	// With realm_access.roles configured, a "groups" claim earns nothing;
	// with neither a user name nor an email the name is the subject.
	op.SignInAs(map[string]any{"sub": "5678", "groups": []string{"sre"}})
	authURL, state, _ = p.Begin(t.Context(), "/", "192.0.2.1")
	user, _, err = p.Finish(t.Context(), state, authorize(t, authURL))
	if err != nil || user.Name != "5678" || len(user.Groups) != 0 {
		t.Errorf("user = %+v, %v", user, err)
	}
	// A claim with one group as a string.
	op2, p2 := newProvider(t, "groups")
	op2.SignInAs(map[string]any{"preferred_username": "carol", "groups": "support"})
	authURL, state, _ = p2.Begin(t.Context(), "/", "192.0.2.1")
	if user, _, err = p2.Finish(t.Context(), state, authorize(t, authURL)); err != nil || !slices.Equal(user.Groups, []string{"support"}) {
		t.Errorf("user = %+v, %v", user, err)
	}
}

func TestSignInRefused(t *testing.T) {
	tests := []struct {
		name  string
		setup func(op *oidctest.Provider)
		// change alters the callback's query or the browser's state.
		change func(q url.Values, state *string)
		want   string
	}{
		{"state from another browser", nil, func(q url.Values, state *string) { *state = "someone-elses" }, "state"},
		{"another browser's key", nil, func(q url.Values, state *string) {
			// A well-formed key (43 base64url characters) of a sign-in
			// that is not this one.
			*state = strings.Repeat("A", 42) + "Q"
		}, "state"},
		{"state altered on the way", nil, func(q url.Values, state *string) { q.Set("state", "x") }, "state"},
		{"provider error", nil, func(q url.Values, _ *string) {
			q.Del("code")
			q.Set("error", "access_denied")
			q.Set("error_description", "the user said no")
		}, "access_denied"},
		{"code guessed", nil, func(q url.Values, _ *string) { q.Set("code", "guess") }, "invalid_grant"},
		{"nonce replaced", func(op *oidctest.Provider) { op.Tamper(func(c map[string]any) { c["nonce"] = "another" }) }, nil, "nonce"},
		{"another audience", func(op *oidctest.Provider) { op.Tamper(func(c map[string]any) { c["aud"] = "another-app" }) }, nil, "did not verify"},
		{"another issuer", func(op *oidctest.Provider) { op.Tamper(func(c map[string]any) { c["iss"] = "https://evil.example" }) }, nil, "did not verify"},
		{"expired", func(op *oidctest.Provider) {
			op.Tamper(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() })
		}, nil, "expired"},
		{"unpublished key", func(op *oidctest.Provider) { op.SignWithUnpublishedKey(true) }, nil, "did not verify"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op, p := newProvider(t, "")
			if tt.setup != nil {
				tt.setup(op)
			}
			authURL, state, _ := p.Begin(t.Context(), "/", "192.0.2.1")
			q := authorize(t, authURL)
			if tt.change != nil {
				tt.change(q, &state)
			}
			_, _, err := p.Finish(t.Context(), state, q)
			var oe *oidc.Error
			if !errors.As(err, &oe) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Finish: %v, want an oidc.Error about %q", err, tt.want)
			}
		})
	}
}

// The PKCE verifier is what binds the code to this sign-in: a code
// obtained with another challenge cannot be redeemed here.
func TestPKCEVerifierIsChecked(t *testing.T) {
	_, p := newProvider(t, "")
	authURL, state, _ := p.Begin(t.Context(), "/", "192.0.2.1")
	u, _ := url.Parse(authURL)
	q := u.Query()
	q.Set("code_challenge", "attackers-challenge-attackers-challenge-abc")
	u.RawQuery = q.Encode()
	_, _, err := p.Finish(t.Context(), state, authorize(t, u.String()))
	if err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Errorf("Finish with a mismatched verifier: %v", err)
	}
}

func TestDiscoveryFailure(t *testing.T) {
	if _, err := oidc.New(t.Context(), oidc.Config{Issuer: "http://127.0.0.1:1/nothing", ClientID: "x"}); err == nil {
		t.Error("New without a provider succeeded")
	}
}

// TestSignInAcrossReplicas: a sign-in started on one replica finishes on
// another (two Providers on one store), once: the same callback again, on
// either, is refused.
func TestSignInAcrossReplicas(t *testing.T) {
	op := oidctest.New(t, "dlqdash", "s3cret", redirect)
	op.SignInAs(map[string]any{"preferred_username": "alice", "groups": []string{"sre"}})
	st := openStore(t)
	a, b := providerOn(t, op, st, "", nil), providerOn(t, op, st, "", nil)
	authURL, key, err := a.Begin(t.Context(), "/groups", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	back := authorize(t, authURL)
	user, next, err := b.Finish(t.Context(), key, back)
	if err != nil || user.Name != "alice" || next != "/groups" {
		t.Fatalf("finished on the other replica: %+v %q %v", user, next, err)
	}
	for name, p := range map[string]*oidc.Provider{"a": a, "b": b} {
		var oe *oidc.Error
		if _, _, err := p.Finish(t.Context(), key, back); !errors.As(err, &oe) || !strings.Contains(err.Error(), "already used") {
			t.Errorf("the callback replayed on %s: %v", name, err)
		}
	}
}

// TestSignInExpires: a callback 10 minutes after the start is refused
// (before the code is redeemed), one 4 minutes after is not (the test
// provider's ID tokens live 5 minutes; the store's tests check the
// expiry to the millisecond).
func TestSignInExpires(t *testing.T) {
	op := oidctest.New(t, "dlqdash", "s3cret", redirect)
	var skew atomic.Int64
	p := providerOn(t, op, openStore(t), "", func() time.Time { return time.Now().Add(time.Duration(skew.Load())) })
	authURL, key, err := p.Begin(t.Context(), "/", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	back := authorize(t, authURL)
	skew.Store(int64(oidc.PendingTTL))
	var oe *oidc.Error
	if _, _, err := p.Finish(t.Context(), key, back); !errors.As(err, &oe) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("a callback after %s: %v", oidc.PendingTTL, err)
	}
	skew.Store(0)
	authURL, key, _ = p.Begin(t.Context(), "/", "192.0.2.1")
	back = authorize(t, authURL)
	skew.Store(int64(4 * time.Minute))
	if _, _, err := p.Finish(t.Context(), key, back); err != nil {
		t.Errorf("a callback 4 minutes after the start: %v", err)
	}
}

func TestNewNeedsAStore(t *testing.T) {
	op := oidctest.New(t, "dlqdash", "s3cret", redirect)
	if _, err := oidc.New(t.Context(), oidc.Config{Issuer: op.Issuer, ClientID: "dlqdash", RedirectURL: redirect}); err == nil {
		t.Error("New without a store succeeded")
	}
}
