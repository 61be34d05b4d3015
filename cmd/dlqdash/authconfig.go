package main

import (
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/web"
)

// Sign-in's environment variables (demo and serve).
const (
	envAuth                  = "DLQDASH_AUTH"
	envAllowAnonymousAdmin   = "DLQDASH_ALLOW_ANONYMOUS_ADMIN"
	envAdminGroups           = "DLQDASH_ADMIN_GROUPS"
	envOperatorGroups        = "DLQDASH_OPERATOR_GROUPS"
	envViewerGroups          = "DLQDASH_VIEWER_GROUPS"
	envTrustedProxies        = "DLQDASH_TRUSTED_PROXIES"
	envProxyUserHeader       = "DLQDASH_PROXY_USER_HEADER"
	envProxyEmailHeader      = "DLQDASH_PROXY_EMAIL_HEADER"
	envProxyGroupsHeader     = "DLQDASH_PROXY_GROUPS_HEADER"
	envHideBodies            = "DLQDASH_HIDE_BODIES_FROM_VIEWERS"
	envSessionIdleTimeout    = "DLQDASH_SESSION_IDLE_TIMEOUT"
	envSessionMaxAge         = "DLQDASH_SESSION_MAX_AGE"
	envOIDCIssuer            = "DLQDASH_OIDC_ISSUER"
	envOIDCClientID          = "DLQDASH_OIDC_CLIENT_ID"
	envOIDCClientSecret      = "DLQDASH_OIDC_CLIENT_SECRET"
	envOIDCClientSecretFile  = "DLQDASH_OIDC_CLIENT_SECRET_FILE"
	envOIDCRedirectURL       = "DLQDASH_OIDC_REDIRECT_URL"
	envOIDCRolesClaim        = "DLQDASH_OIDC_ROLES_CLAIM"
	envOIDCScopes            = "DLQDASH_OIDC_SCOPES"
	defaultOIDCRolesClaim    = "groups"
	defaultOIDCScopes        = "openid,profile,email"
	oidcCallbackPath         = "/auth/callback"
	defaultSessionIdle       = "2h"
	defaultSessionMaxAgeText = "12h"
)

// AuthConfig configures sign-in and roles (demo and serve).
type AuthConfig struct {
	Mode auth.Mode
	// AllowAnonymousAdmin lets serve run with --auth none on an address
	// other computers can reach.
	AllowAnonymousAdmin   bool
	Mapping               auth.Mapping
	TrustedProxies        []netip.Prefix
	ProxyHeaders          web.ProxyHeaders
	HideBodiesFromViewers bool
	SessionIdleTimeout    time.Duration
	SessionMaxAge         time.Duration
	OIDC                  OIDCConfig
}

// OIDCConfig configures --auth oidc.
type OIDCConfig struct {
	Issuer   string
	ClientID string
	// ClientSecret is from DLQDASH_OIDC_CLIENT_SECRET; ClientSecretFile
	// names a file holding it instead (read at start-up, not here: parsing
	// reads nothing). Neither: a public client, PKCE alone.
	ClientSecret     secret
	ClientSecretFile string
	RedirectURL      string
	RolesClaim       string
	Scopes           []string
}

func authFlags(f *flagSet) {
	f.str("auth", envAuth, string(auth.ModeNone), "sign-in: none (everyone is the local admin), oidc (OpenID Connect) or proxy (a trusted reverse proxy's headers)")
	if f.fs.Name() == "dlqdash serve" {
		f.boolEnv("allow-anonymous-admin", envAllowAnonymousAdmin, "allow --auth none on an address other computers can reach, where anyone who reaches the port is an admin (only behind something else that restricts access)")
	}
	f.str("admin-groups", envAdminGroups, "", "comma-separated groups (or roles, as the claim or proxy names them) whose members are admins; * means everyone signed in")
	f.str("operator-groups", envOperatorGroups, "", "comma-separated groups whose members are operators (replay, discard, job control)")
	f.str("viewer-groups", envViewerGroups, "", "comma-separated groups whose members are viewers (read only)")
	f.str("trusted-proxies", envTrustedProxies, "", "--auth proxy: comma-separated CIDRs or addresses of the reverse proxies whose identity headers are believed (the TCP peer, not X-Forwarded-For)")
	f.str("proxy-user-header", envProxyUserHeader, web.DefaultProxyHeaders.User, "--auth proxy: the header naming the user")
	f.str("proxy-email-header", envProxyEmailHeader, web.DefaultProxyHeaders.Email, "--auth proxy: the header with the user's email")
	f.str("proxy-groups-header", envProxyGroupsHeader, web.DefaultProxyHeaders.Groups, "--auth proxy: the header with the user's groups, comma-separated")
	f.boolEnv("hide-bodies-from-viewers", envHideBodies, "keep message bodies, body previews and body search from viewers (for personal data); operators and admins still see them")
	f.str("session-idle-timeout", envSessionIdleTimeout, defaultSessionIdle, "--auth oidc: a session unused this long ends (a Go duration)")
	f.str("session-max-age", envSessionMaxAge, defaultSessionMaxAgeText, "--auth oidc: a session ends this long after sign-in, however busy (a Go duration)")
	f.str("oidc-issuer", envOIDCIssuer, "", "--auth oidc: the provider's issuer URL (its /.well-known/openid-configuration is read at start-up)")
	f.str("oidc-client-id", envOIDCClientID, "", "--auth oidc: the client id registered with the provider")
	f.str("oidc-client-secret-file", envOIDCClientSecretFile, "", "--auth oidc: a file holding the client secret (or set "+envOIDCClientSecret+"; neither for a public client)")
	f.str("oidc-redirect-url", envOIDCRedirectURL, "", "--auth oidc: this dashboard's external URL of "+oidcCallbackPath+", as registered with the provider, e.g. https://dlqdash.example.com"+oidcCallbackPath)
	f.str("oidc-roles-claim", envOIDCRolesClaim, defaultOIDCRolesClaim, "--auth oidc: the ID token claim listing the user's groups or roles (dots for nested claims: realm_access.roles)")
	f.str("oidc-scopes", envOIDCScopes, defaultOIDCScopes, "--auth oidc: comma-separated scopes to ask for (some providers need one more, e.g. groups)")
}

// parseAuth checks the sign-in flags of demo and serve.
func parseAuth(f *flagSet, command, addr string, getenv func(string) string, bad func(string, ...any) error) (AuthConfig, error) {
	v := func(name string) string { return strings.TrimSpace(*f.values[name]) }
	var a AuthConfig
	var err error
	if a.Mode, err = auth.ParseMode(v("auth")); err != nil {
		return a, bad("invalid sign-in mode %q from %s: want none, oidc or proxy", v("auth"), f.source("auth"))
	}
	if p, ok := f.bools["allow-anonymous-admin"]; ok {
		a.AllowAnonymousAdmin = *p
	}
	a.HideBodiesFromViewers = *f.bools["hide-bodies-from-viewers"]
	a.Mapping = auth.Mapping{Admin: auth.SplitList(v("admin-groups")), Operator: auth.SplitList(v("operator-groups")), Viewer: auth.SplitList(v("viewer-groups"))}
	a.ProxyHeaders = web.ProxyHeaders{User: v("proxy-user-header"), Email: v("proxy-email-header"), Groups: v("proxy-groups-header")}
	for _, name := range []string{"proxy-user-header", "proxy-email-header", "proxy-groups-header"} {
		if !validHeaderName(v(name)) {
			return a, bad("invalid header name %q from %s", v(name), f.source(name))
		}
	}
	if a.TrustedProxies, err = auth.ParsePrefixes(v("trusted-proxies")); err != nil {
		return a, bad("invalid trusted proxies from %s: %v", f.source("trusted-proxies"), err)
	}
	for _, p := range a.TrustedProxies {
		if p.Bits() == 0 {
			return a, bad("--trusted-proxies %s from %s trusts every address: anyone could send X-Forwarded-User and be whom they name; list the addresses of your proxies (e.g. 10.0.0.5 or 10.0.0.0/24)",
				p, f.source("trusted-proxies"))
		}
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"session-idle-timeout", &a.SessionIdleTimeout}, {"session-max-age", &a.SessionMaxAge}} {
		if *d.dst, err = time.ParseDuration(v(d.name)); err != nil || *d.dst < time.Minute {
			return a, bad("invalid %s %q from %s: want a duration of at least 1m, e.g. 2h", d.name, v(d.name), f.source(d.name))
		}
	}
	if a.SessionIdleTimeout > a.SessionMaxAge {
		return a, bad("--session-idle-timeout (%s) is longer than --session-max-age (%s)", a.SessionIdleTimeout, a.SessionMaxAge)
	}

	needMapping := func() error {
		if a.Mapping.Empty() {
			return bad("--auth %s needs at least one of --admin-groups, --operator-groups or --viewer-groups (%s, %s, %s): without them nobody has a role",
				a.Mode, envAdminGroups, envOperatorGroups, envViewerGroups)
		}
		return nil
	}
	switch a.Mode {
	case auth.ModeNone:
		if command == "serve" && !a.AllowAnonymousAdmin && !isLoopback(addr) {
			return a, bad("--auth none on %s, an address other computers can reach, would let anyone who reaches the port replay and discard messages as admin: "+
				"use --auth oidc or --auth proxy, listen on 127.0.0.1, or pass --allow-anonymous-admin (%s=true) if something in front of dlqdash already restricts access",
				addr, envAllowAnonymousAdmin)
		}
	case auth.ModeProxy:
		if len(a.TrustedProxies) == 0 {
			return a, bad("--auth proxy needs --trusted-proxies (%s): the addresses of the proxies whose identity headers to believe", envTrustedProxies)
		}
		if err := needMapping(); err != nil {
			return a, err
		}
	case auth.ModeOIDC:
		o := &a.OIDC
		o.Issuer, o.ClientID, o.ClientSecretFile, o.RolesClaim = v("oidc-issuer"), v("oidc-client-id"), v("oidc-client-secret-file"), v("oidc-roles-claim")
		o.ClientSecret = secret(strings.TrimSpace(getenv(envOIDCClientSecret)))
		o.Scopes = auth.SplitList(v("oidc-scopes"))
		if o.Issuer == "" {
			return a, bad("--auth oidc needs --oidc-issuer (%s), e.g. https://login.microsoftonline.com/<tenant>/v2.0", envOIDCIssuer)
		}
		if err := checkHTTPSURL(o.Issuer); err != nil {
			return a, bad("invalid OpenID Connect issuer %q from %s: %v", o.Issuer, f.source("oidc-issuer"), err)
		}
		if o.ClientID == "" {
			return a, bad("--auth oidc needs --oidc-client-id (%s)", envOIDCClientID)
		}
		if o.ClientSecret != "" && o.ClientSecretFile != "" {
			return a, bad("both %s and --oidc-client-secret-file are set: give the client secret one way", envOIDCClientSecret)
		}
		raw := v("oidc-redirect-url")
		if raw == "" {
			return a, bad("--auth oidc needs --oidc-redirect-url (%s): this dashboard's external URL of %s, as registered with the provider", envOIDCRedirectURL, oidcCallbackPath)
		}
		if err := checkHTTPSURL(raw); err != nil {
			return a, bad("invalid redirect URL %q from %s: %v (the session cookie is Secure: browsers keep it only over https or on this computer)", raw, f.source("oidc-redirect-url"), err)
		}
		if u, _ := url.Parse(raw); u.Path != oidcCallbackPath || u.RawQuery != "" || u.Fragment != "" {
			return a, bad("invalid redirect URL %q from %s: its path must be %s", raw, f.source("oidc-redirect-url"), oidcCallbackPath)
		}
		o.RedirectURL = raw
		if o.RolesClaim == "" {
			return a, bad("empty --oidc-roles-claim from %s", f.source("oidc-roles-claim"))
		}
		if err := needMapping(); err != nil {
			return a, err
		}
	}
	return a, nil
}

// checkHTTPSURL accepts an absolute https URL, or http on a loopback host
// (a provider or dashboard on this computer, for trying things out).
func checkHTTPSURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || u.User != nil:
		return errorString("want an absolute https URL")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Host):
		return nil
	}
	return errorString("want https (plain http only on localhost or a loopback address)")
}

type errorString string

func (e errorString) Error() string { return string(e) }

// isLoopback reports whether a listen address or URL host (with or
// without a port) reaches only this computer: localhost or a loopback IP.
// An empty host (":8080"), 0.0.0.0 or a name other than localhost does not.
func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// validHeaderName: a token of RFC 9110 (letters, digits, '-' and a few
// more), as a header name must be.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

// boolEnv adds a flag that defaults to its environment variable (true,
// false, 1, 0, ...), then to false; --name and --name=false both work.
func (f *flagSet) boolEnv(name, env, meaning string) {
	def := false
	if e := strings.TrimSpace(f.getenv(env)); e != "" {
		b, err := strconv.ParseBool(e)
		if err != nil && f.envErr == "" {
			f.envErr = "invalid " + env + " " + strconv.Quote(e) + ": want true or false"
		}
		def = b
	}
	f.bools[name] = f.fs.Bool(name, def, meaning)
	f.specs = append(f.specs, flagSpec{name, env, "false", meaning})
}

// authHelp ends the help of demo and serve.
const authHelp = `
Sign-in (--auth):
  none   everyone is "local", an admin. serve refuses it on an address other
         computers can reach unless --allow-anonymous-admin.
  oidc   OpenID Connect (Entra ID, Okta, Keycloak, Google, Dex): authorization
         code flow with PKCE, then a server-side session (cookie
         __Host-dlqdash_session). The client secret comes only from
         ` + envOIDCClientSecret + ` or --oidc-client-secret-file.
  proxy  a reverse proxy (oauth2-proxy, ...) signs people in and sends
         X-Forwarded-User, X-Forwarded-Email and X-Forwarded-Groups; they are
         believed only from --trusted-proxies and ignored (and logged) otherwise.
  Roles: viewer < operator < admin, each including the ones before; a user's
  role is the highest one of whose --*-groups they are in. API tokens
  ('dlqdash token create') work in every mode: Authorization: Bearer <token>.
`
