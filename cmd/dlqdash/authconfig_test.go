package main

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/auth"
)

func TestParseAuthConfig(t *testing.T) {
	oidcEnv := func(kv ...string) func(string) string {
		return env(append([]string{envConnectionString, goodConnStr, envOIDCIssuer, "https://login.example.com/tenant/v2.0",
			envOIDCClientID, "dlqdash", envOIDCRedirectURL, "https://dlqdash.example.com/auth/callback", envOperatorGroups, "sre"}, kv...)...)
	}
	tests := []struct {
		name  string
		args  []string
		env   func(string) string
		check func(t *testing.T, a AuthConfig)
	}{
		{"serve with none on loopback", []string{"serve", "--addr", "127.0.0.1:8080"}, env(envConnectionString, goodConnStr), func(t *testing.T, a AuthConfig) {
			if a.Mode != auth.ModeNone || a.AllowAnonymousAdmin {
				t.Errorf("%+v", a)
			}
		}},
		{"serve with none on localhost and [::1]", []string{"serve", "--addr", "[::1]:0"}, env(envConnectionString, goodConnStr), nil},
		{"serve with none everywhere, explicitly", []string{"serve", "--addr", ":8080"}, env(envConnectionString, goodConnStr, envAllowAnonymousAdmin, "true"), func(t *testing.T, a AuthConfig) {
			if !a.AllowAnonymousAdmin {
				t.Errorf("%+v", a)
			}
		}},
		{"demo with none everywhere (the container's default)", []string{"demo", "--addr", ":8080"}, env(), nil},
		{"oidc", []string{"serve", "--auth", "oidc", "--addr", ":8080", "--admin-groups", "dlq-admins, ops", "--viewer-groups", "*", "--hide-bodies-from-viewers"},
			oidcEnv(envOIDCClientSecret, "s3cret", envOIDCRolesClaim, "realm_access.roles", envOIDCScopes, "openid,email,groups"),
			func(t *testing.T, a AuthConfig) {
				o := a.OIDC
				if a.Mode != auth.ModeOIDC || o.Issuer != "https://login.example.com/tenant/v2.0" || o.ClientID != "dlqdash" || o.ClientSecret != "s3cret" ||
					o.RedirectURL != "https://dlqdash.example.com/auth/callback" || o.RolesClaim != "realm_access.roles" ||
					!slices.Equal(o.Scopes, []string{"openid", "email", "groups"}) || !a.HideBodiesFromViewers {
					t.Errorf("%+v", a)
				}
				if !slices.Equal(a.Mapping.Admin, []string{"dlq-admins", "ops"}) || !slices.Equal(a.Mapping.Operator, []string{"sre"}) ||
					!slices.Equal(a.Mapping.Viewer, []string{"*"}) {
					t.Errorf("mapping %+v", a.Mapping)
				}
			}},
		{"oidc on this computer over http", []string{"demo", "--auth", "oidc", "--session-idle-timeout", "30m", "--session-max-age", "8h"},
			env(envOIDCIssuer, "http://127.0.0.1:5556/dex", envOIDCClientID, "x", envOIDCRedirectURL, "http://localhost:8080/auth/callback",
				envOIDCClientSecretFile, "/run/secrets/oidc", envViewerGroups, "*"),
			func(t *testing.T, a AuthConfig) {
				if a.OIDC.ClientSecretFile != "/run/secrets/oidc" || a.SessionIdleTimeout != 30*time.Minute || a.SessionMaxAge != 8*time.Hour ||
					a.OIDC.RolesClaim != "groups" {
					t.Errorf("%+v", a)
				}
			}},
		{"proxy", []string{"serve", "--auth", "proxy", "--addr", ":8080", "--trusted-proxies", "10.0.0.0/8,192.168.1.7", "--operator-groups", "sre",
			"--proxy-groups-header", "X-Auth-Request-Groups"}, env(envConnectionString, goodConnStr),
			func(t *testing.T, a AuthConfig) {
				want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32")}
				if a.Mode != auth.ModeProxy || !slices.Equal(a.TrustedProxies, want) || a.ProxyHeaders.Groups != "X-Auth-Request-Groups" ||
					a.ProxyHeaders.User != "X-Forwarded-User" {
					t.Errorf("%+v", a)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, c.Auth)
			}
		})
	}
}

func TestParseAuthConfigErrors(t *testing.T) {
	oidc := func(kv ...string) func(string) string {
		base := map[string]string{envConnectionString: goodConnStr, envOIDCIssuer: "https://login.example.com/", envOIDCClientID: "dlqdash",
			envOIDCRedirectURL: "https://dlqdash.example.com/auth/callback", envOperatorGroups: "sre"}
		for i := 0; i+1 < len(kv); i += 2 {
			base[kv[i]] = kv[i+1]
		}
		return func(k string) string { return base[k] }
	}
	serve := env(envConnectionString, goodConnStr)
	tests := []struct {
		name string
		args []string
		env  func(string) string
		want []string
	}{
		{"none on every interface", []string{"serve", "--addr", ":8080"}, serve,
			[]string{"--auth none on :8080", "anyone who reaches the port", "--auth oidc", "--allow-anonymous-admin", envAllowAnonymousAdmin}},
		{"none on a LAN address", []string{"serve", "--addr", "10.0.0.4:8080"}, serve, []string{"--auth none on 10.0.0.4:8080"}},
		{"none on 0.0.0.0 from the environment", []string{"serve"}, env(envConnectionString, goodConnStr, envAddr, "0.0.0.0:80"), []string{"--auth none on 0.0.0.0:80"}},
		{"bad mode", []string{"demo", "--auth", "ldap"}, env(), []string{`invalid sign-in mode "ldap" from --auth`}},
		{"bad bool env", []string{"demo"}, env(envHideBodies, "yes please"), []string{envHideBodies, "want true or false"}},
		{"proxy without proxies", []string{"demo", "--auth", "proxy", "--viewer-groups", "*"}, env(), []string{"--trusted-proxies", envTrustedProxies}},
		{"proxy without roles", []string{"demo", "--auth", "proxy", "--trusted-proxies", "10.0.0.1"}, env(), []string{"--admin-groups", "nobody has a role"}},
		{"bad proxies", []string{"demo", "--auth", "proxy", "--trusted-proxies", "10.0.0.0/8,proxy.local"}, env(), []string{"--trusted-proxies", "proxy.local"}},
		{"bad header", []string{"demo", "--proxy-user-header", "X User"}, env(), []string{`invalid header name "X User" from --proxy-user-header`}},
		{"idle longer than max", []string{"demo", "--session-idle-timeout", "13h"}, env(), []string{"--session-idle-timeout", "longer than --session-max-age"}},
		{"bad max age", []string{"demo", "--session-max-age", "forever"}, env(), []string{`invalid session-max-age "forever" from --session-max-age`}},
		{"oidc without issuer", []string{"serve", "--auth", "oidc"}, oidc(envOIDCIssuer, ""), []string{"--oidc-issuer", envOIDCIssuer}},
		{"oidc over http", []string{"serve", "--auth", "oidc"}, oidc(envOIDCIssuer, "http://idp.example.com/"), []string{"invalid OpenID Connect issuer", "https"}},
		{"oidc without client", []string{"serve", "--auth", "oidc"}, oidc(envOIDCClientID, ""), []string{"--oidc-client-id"}},
		{"oidc with two secrets", []string{"serve", "--auth", "oidc", "--oidc-client-secret-file", "/x"}, oidc(envOIDCClientSecret, "s"), []string{"one way"}},
		{"oidc without redirect", []string{"serve", "--auth", "oidc"}, oidc(envOIDCRedirectURL, ""), []string{"--oidc-redirect-url", "/auth/callback"}},
		{"oidc redirect over http", []string{"serve", "--auth", "oidc"}, oidc(envOIDCRedirectURL, "http://dlqdash.example.com/auth/callback"),
			[]string{"invalid redirect URL", "Secure"}},
		{"oidc redirect elsewhere", []string{"serve", "--auth", "oidc"}, oidc(envOIDCRedirectURL, "https://dlqdash.example.com/callback"),
			[]string{"its path must be /auth/callback"}},
		{"oidc without roles", []string{"serve", "--auth", "oidc"}, oidc(envOperatorGroups, ""), []string{"--auth oidc needs at least one of"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig(tt.args, tt.env)
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseConfig(%q) = %v, want a *usageError", tt.args, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// The secret never appears in errors or help.
	_, err := parseConfig([]string{"serve", "--auth", "oidc", "--oidc-client-secret-file", "/x"}, oidc(envOIDCClientSecret, "hunter2-secret"))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error: %v", err)
	}
	var h *helpRequest
	if _, err := parseConfig([]string{"serve", "-h"}, oidc(envOIDCClientSecret, "hunter2-secret")); !errors.As(err, &h) || strings.Contains(h.text, "hunter2") ||
		!strings.Contains(h.text, "--allow-anonymous-admin") || !strings.Contains(h.text, envTrustedProxies) {
		t.Errorf("help: %v", err)
	}
}
