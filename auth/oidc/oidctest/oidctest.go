// Package oidctest is a minimal OpenID Connect provider for tests, written
// to the standards dlqdash relies on: a discovery document, a JWKS, an
// authorization endpoint that signs in a preset user and redirects back
// with a code, and a token endpoint that checks the client, the redirect
// URI and the PKCE verifier (S256) and returns an ID token signed with an
// RSA key (RS256). It runs on httptest and touches no network.
package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Provider is the test provider. Set its fields before a sign-in starts.
type Provider struct {
	// Issuer is the provider's URL, also its issuer identifier.
	Issuer                 string
	ClientID, ClientSecret string
	// RedirectURL is the only redirect URI the client registered.
	RedirectURL string

	mu sync.Mutex
	// user are the claims of whoever signs in next (preferred_username,
	// email, groups, ...; sub is set from preferred_username if absent).
	user map[string]any
	// tamper, if set, changes the ID token's claims before signing.
	tamper func(map[string]any)
	// wrongKey signs ID tokens with a key the JWKS does not publish.
	wrongKey bool
	now      func() time.Time
	codes    map[string]grant

	key, other *rsa.PrivateKey
	srv        *httptest.Server
	authorized int
}

// Authorizations counts the sign-ins the authorization endpoint granted.
func (p *Provider) Authorizations() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.authorized
}

type grant struct {
	redirectURI, challenge, nonce string
	claims                        map[string]any
	expires                       time.Time
}

// New starts a provider for one client; it stops when the test ends.
func New(tb testing.TB, clientID, clientSecret, redirectURL string) *Provider {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	p := &Provider{ClientID: clientID, ClientSecret: clientSecret, RedirectURL: redirectURL, key: key, other: other,
		now: time.Now, codes: map[string]grant{}, user: map[string]any{"preferred_username": "alice"}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /keys", p.keys)
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(mux)
	p.Issuer = p.srv.URL
	tb.Cleanup(p.srv.Close)
	return p
}

// SignInAs sets the claims of whoever signs in next.
func (p *Provider) SignInAs(claims map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.user = claims
}

// Tamper changes every ID token's claims before signing (nil stops).
func (p *Provider) Tamper(f func(map[string]any)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tamper = f
}

// SignWithUnpublishedKey makes ID tokens verify against no published key.
func (p *Provider) SignWithUnpublishedKey(b bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wrongKey = b
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, map[string]any{
		"issuer":                                p.Issuer,
		"authorization_endpoint":                p.Issuer + "/authorize",
		"token_endpoint":                        p.Issuer + "/token",
		"jwks_uri":                              p.Issuer + "/keys",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"scopes_supported":                      []string{"openid", "profile", "email", "groups"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
	})
}

func (p *Provider) keys(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &p.key.PublicKey, KeyID: "test-key", Algorithm: "RS256", Use: "sig"}}})
}

func random() string {
	var b [24]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// authorize signs the preset user in at once (no login form) and
// redirects back with a code bound to the PKCE challenge and the nonce.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != p.ClientID || q.Get("redirect_uri") != p.RedirectURL {
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest)
		return
	}
	back, _ := url.Parse(p.RedirectURL)
	reply := url.Values{"state": {q.Get("state")}}
	switch {
	case q.Get("response_type") != "code":
		reply.Set("error", "unsupported_response_type")
	case !slices.Contains(strings.Fields(q.Get("scope")), "openid"):
		reply.Set("error", "invalid_scope")
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		reply.Set("error", "invalid_request")
		reply.Set("error_description", "PKCE with S256 is required")
	default:
		p.mu.Lock()
		p.authorized++
		claims := map[string]any{}
		for k, v := range p.user {
			claims[k] = v
		}
		code := random()
		p.codes[code] = grant{redirectURI: q.Get("redirect_uri"), challenge: q.Get("code_challenge"), nonce: q.Get("nonce"),
			claims: claims, expires: p.now().Add(time.Minute)}
		p.mu.Unlock()
		reply.Set("code", code)
	}
	back.RawQuery = reply.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// token exchanges a code once, for the client that asked for it, with the
// verifier whose S256 hash is the code's challenge.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	bad := func(code, desc string) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": desc})
	}
	if err := r.ParseForm(); err != nil {
		bad("invalid_request", "unreadable form")
		return
	}
	id, secret, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != p.ClientID || secret != p.ClientSecret {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	if r.PostForm.Get("grant_type") != "authorization_code" {
		bad("unsupported_grant_type", "")
		return
	}
	p.mu.Lock()
	g, ok := p.codes[r.PostForm.Get("code")]
	delete(p.codes, r.PostForm.Get("code"))
	now, tamper, wrongKey := p.now(), p.tamper, p.wrongKey
	p.mu.Unlock()
	if !ok || !now.Before(g.expires) || r.PostForm.Get("redirect_uri") != g.redirectURI {
		bad("invalid_grant", "unknown, used or expired code, or another redirect_uri")
		return
	}
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
		bad("invalid_grant", "the PKCE verifier does not match the challenge")
		return
	}
	claims := g.claims
	if _, ok := claims["sub"]; !ok {
		claims["sub"] = "sub-" + strings.TrimSpace(claims["preferred_username"].(string))
	}
	claims["iss"], claims["aud"] = p.Issuer, p.ClientID
	claims["iat"], claims["exp"] = now.Unix(), now.Add(5*time.Minute).Unix()
	if g.nonce != "" {
		claims["nonce"] = g.nonce
	}
	if tamper != nil {
		tamper(claims)
	}
	key := p.key
	if wrongKey {
		key = p.other
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: "test-key"}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	idToken, _ := jws.CompactSerialize()
	writeJSON(w, 200, map[string]any{"access_token": random(), "token_type": "Bearer", "expires_in": 300, "id_token": idToken})
}
