package main

import (
	"context"
	"net"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dlqdash/dlqdash/auth/oidc/oidctest"
)

// serveWithOIDC runs `dlqdash serve --auth oidc` on a free loopback port
// against a test OpenID provider (Service Bus itself unreachable: the
// dashboard serves its catalog meanwhile).
func serveWithOIDC(t *testing.T) (*started, *oidctest.Provider, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	base := "http://" + addr
	op := oidctest.New(t, "dlqdash", "oidc-client-secret-value", base+"/auth/callback")
	op.SignInAs(map[string]any{"preferred_username": "alice", "email": "alice@example.com", "groups": []string{"sre"}})
	s := start(t, []string{"serve", "--addr", addr, "--db", filepath.Join(t.TempDir(), "oidc.db"), "--auth", "oidc",
		"--oidc-issuer", op.Issuer, "--oidc-client-id", "dlqdash", "--oidc-redirect-url", base + "/auth/callback",
		"--operator-groups", "sre", "--admin-groups", "dlq-admins"},
		env(envConnectionString, goodConnStr, envOIDCClientSecret, "oidc-client-secret-value"))
	t.Cleanup(func() { s.stop(t) })
	return s, op, base
}

// TestRunSignInWithOIDC follows the whole redirect flow with an HTTP
// client that keeps cookies: page → /login → provider → /auth/callback →
// the page, signed in; the API honours the session's role; sign-out ends it.
func TestRunSignInWithOIDC(t *testing.T) {
	s, op, base := serveWithOIDC(t)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	do := func(method, url string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, url, nil)
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer res.Body.Close()
		var b strings.Builder
		buf := make([]byte, 32<<10)
		for {
			n, err := res.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return res, b.String()
	}
	// The page keeps its query through the redirect flow. (Not an entity: this
	// serve has cataloged none, and an unknown entity is a 404.)
	res, body := do("GET", base+"/messages?subqueue=dead_letter")
	if res.StatusCode != 200 || res.Request.URL.String() != base+"/messages?subqueue=dead_letter" ||
		!strings.Contains(body, `data-testid="user-name">alice<`) || !strings.Contains(body, `data-testid="user-role">(operator)<`) {
		t.Fatalf("after the redirect flow: %d at %s\n%.1500s", res.StatusCode, res.Request.URL, body)
	}
	if op.Authorizations() != 1 {
		t.Errorf("%d authorizations, want 1", op.Authorizations())
	}
	// The session cookie is what a browser gets: __Host-, Secure, HttpOnly.
	if cs := jar.Cookies(res.Request.URL); len(cs) != 1 || cs[0].Name != "__Host-dlqdash_session" {
		t.Errorf("cookies: %v", cs)
	}
	if res, _ := do("POST", base+"/api/v1/messages/1/replay"); res.StatusCode != 403 {
		t.Errorf("an operator's edit-and-replay: %d, want 403", res.StatusCode)
	}
	if res, body := do("GET", base+"/api/v1/audit?action=login"); res.StatusCode != 200 || !strings.Contains(body, `"actor":"oidc:alice"`) {
		t.Errorf("audit of the sign-in: %d %s", res.StatusCode, body)
	}
	res, body = do("POST", base+"/logout")
	if res.StatusCode != 200 || !strings.Contains(body, "Signed out") {
		t.Errorf("logout: %d", res.StatusCode)
	}
	if res, body := do("GET", base+"/api/v1/audit"); res.StatusCode != 401 || !strings.Contains(body, "unauthenticated") {
		t.Errorf("the API after sign-out: %d %s", res.StatusCode, body)
	}
	logs := s.stderr.String()
	if strings.Contains(logs, "oidc-client-secret-value") {
		t.Error("the client secret is in the logs")
	}
	if !strings.Contains(logs, `"msg":"sign-in","mode":"oidc"`) {
		t.Errorf("no sign-in line in the logs:\n%s", logs)
	}
}

// TestBrowserSignIn: Chromium follows the redirect flow and keeps the
// __Host- cookie (Secure) on http://127.0.0.1, which browsers treat as a
// secure context; the header shows who is signed in; Sign out ends it.
func TestBrowserSignIn(t *testing.T) {
	exe := chromiumPath(t)
	_, op, base := serveWithOIDC(t)
	b, _ := browser(t, exe)
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		ctx, cancel := context.WithTimeout(b, 30*time.Second)
		defer cancel()
		if err := chromedp.Run(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	var who, role, loc string
	run("sign in", chromedp.Navigate(base+"/groups"),
		chromedp.WaitVisible(`[data-testid="user-name"]`),
		liveText(`[data-testid="user-name"]`, &who),
		liveText(`[data-testid="user-role"]`, &role),
		chromedp.Location(&loc))
	if who != "alice" || role != "(operator)" || loc != base+"/groups" {
		t.Errorf("signed in as %q %q at %s", who, role, loc)
	}
	// Another page: the session cookie is sent, no new sign-in.
	run("next page", chromedp.Navigate(base+"/messages"), chromedp.WaitVisible(`[data-testid="user-name"]`))
	if op.Authorizations() != 1 {
		t.Errorf("%d sign-ins, want 1: the browser did not keep the session cookie", op.Authorizations())
	}
	run("sign out", chromedp.Click(`[data-testid="sign-out"]`), chromedp.WaitVisible(`[data-testid="signed-out"]`))
	var n int
	run("header after sign-out", chromedp.Evaluate(`document.querySelectorAll('[data-testid="user-name"]').length`, &n))
	if n != 0 {
		t.Error("the signed-out page still shows a user")
	}
}
