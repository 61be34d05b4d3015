package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/auth/oidc"
	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/web"
)

// withSignIn sets the dashboard's sign-in: who requests are (cfg.Auth),
// sessions and tokens in the store (serveDashboard sets the keyed audit
// trail for sign-ins and refusals), and for --auth oidc the provider, whose
// discovery document is read now so that a wrong issuer stops start-up with
// a clear error, and whose sign-ins in progress are in the store too (a
// callback may reach any replica).
func withSignIn(ctx context.Context, cfg Config, st *store.Store, logger *slog.Logger, w *web.Config) error {
	a := cfg.Auth
	w.Auth = auth.New(auth.Config{Mode: a.Mode, Mapping: a.Mapping, Store: st, TrustedProxies: a.TrustedProxies,
		IdleTimeout: a.SessionIdleTimeout, MaxAge: a.SessionMaxAge})
	w.ProxyHeaders = a.ProxyHeaders
	w.HideBodiesFromViewers = a.HideBodiesFromViewers
	attrs := []any{"mode", string(a.Mode), "hide_bodies_from_viewers", a.HideBodiesFromViewers}
	switch a.Mode {
	case auth.ModeNone:
		if !isLoopback(cfg.Addr) {
			logger.Warn("sign-in is off on an address other computers can reach: anyone who reaches it is an admin", "addr", cfg.Addr)
		}
	case auth.ModeProxy:
		var cidrs []string
		for _, p := range a.TrustedProxies {
			cidrs = append(cidrs, p.String())
		}
		attrs = append(attrs, "trusted_proxies", strings.Join(cidrs, ","), "user_header", a.ProxyHeaders.User)
	case auth.ModeOIDC:
		secret := string(a.OIDC.ClientSecret)
		if a.OIDC.ClientSecretFile != "" {
			b, err := os.ReadFile(a.OIDC.ClientSecretFile)
			if err != nil {
				return fmt.Errorf("read the OpenID Connect client secret (--oidc-client-secret-file): %w", err)
			}
			secret = strings.TrimSpace(string(b))
		}
		p, err := oidc.New(ctx, oidc.Config{Issuer: a.OIDC.Issuer, ClientID: a.OIDC.ClientID, ClientSecret: secret,
			RedirectURL: a.OIDC.RedirectURL, RolesClaim: a.OIDC.RolesClaim, Scopes: a.OIDC.Scopes, Store: st})
		if err != nil {
			return fmt.Errorf("sign-in: %w (check --oidc-issuer)", err)
		}
		w.SignIn = p
		attrs = append(attrs, "issuer", a.OIDC.Issuer, "client_id", a.OIDC.ClientID, "redirect_url", a.OIDC.RedirectURL,
			"roles_claim", a.OIDC.RolesClaim, "public_client", secret == "")
	}
	logger.Info("sign-in", attrs...)
	return nil
}
