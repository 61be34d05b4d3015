package main

import (
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/web"
)

// The HTTP edge's flags (demo and serve): the host names the dashboard
// answers to, the caps on live connections.
const (
	envAllowedHosts           = "DLQDASH_ALLOWED_HOSTS"
	envMaxLiveConnections     = "DLQDASH_MAX_LIVE_CONNECTIONS"
	envMaxLivePerActor        = "DLQDASH_MAX_LIVE_CONNECTIONS_PER_ACTOR"
	maxLiveConnectionsCeiling = 100000
)

// HTTPConfig configures the dashboard's HTTP edge.
type HTTPConfig struct {
	// AllowedHosts are the host names the dashboard answers to (web.AnyHost
	// for any); others get 421.
	AllowedHosts []string
	// MaxLiveConnections and MaxLivePerActor cap the live pages'
	// websockets, in all and per actor.
	MaxLiveConnections int
	MaxLivePerActor    int
}

func httpFlags(f *flagSet) {
	f.str("allowed-hosts", envAllowedHosts, "", "comma-separated host names the dashboard answers to (other Host headers get 421, against DNS rebinding); * for any. "+
		"Default: localhost, 127.0.0.1, ::1 and the host of --addr, plus the host of --oidc-redirect-url with --auth oidc; any with --auth proxy")
	f.str("max-live-connections", envMaxLiveConnections, strconv.Itoa(web.DefaultMaxLiveConnections),
		"the most live pages (websockets) open at once; more are refused with a reason the page shows")
	f.str("max-live-connections-per-actor", envMaxLivePerActor, strconv.Itoa(web.DefaultMaxLivePerActor),
		"the most live pages one actor (a user, a token; without sign-in, an address) may have open")
}

// parseHTTPConfig reads the HTTP edge's flags; the defaults depend on the
// listen address and the sign-in mode.
func parseHTTPConfig(f *flagSet, addr string, a AuthConfig, bad func(string, ...any) error) (HTTPConfig, error) {
	var h HTTPConfig
	for _, c := range []struct {
		name string
		dst  *int
	}{{"max-live-connections", &h.MaxLiveConnections}, {"max-live-connections-per-actor", &h.MaxLivePerActor}} {
		v := strings.TrimSpace(f.get(c.name))
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLiveConnectionsCeiling {
			return h, bad("invalid %s %q from %s: want a whole number from 1 to %d", c.name, v, f.source(c.name), maxLiveConnectionsCeiling)
		}
		*c.dst = n
	}
	if h.MaxLivePerActor > h.MaxLiveConnections {
		return h, bad("--max-live-connections-per-actor (%d) is more than --max-live-connections (%d)", h.MaxLivePerActor, h.MaxLiveConnections)
	}
	raw := strings.TrimSpace(f.get("allowed-hosts"))
	if raw == "" {
		h.AllowedHosts = defaultAllowedHosts(addr, a)
		return h, nil
	}
	for _, name := range strings.Split(raw, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if err := checkHostName(name); err != nil {
			return h, bad("invalid host name %q in %s: %v", name, f.source("allowed-hosts"), err)
		}
		h.AllowedHosts = append(h.AllowedHosts, name)
	}
	if len(h.AllowedHosts) == 0 {
		return h, bad("empty --allowed-hosts from %s: name at least one host, or * for any", f.source("allowed-hosts"))
	}
	return h, nil
}

// defaultAllowedHosts: this computer's names, the name --addr listens on
// (if it names one), and with OpenID Connect the redirect URL's host, where
// browsers reach the dashboard. Behind --auth proxy any name: a browser
// that reaches dlqdash around the proxy has no identity to misuse.
func defaultAllowedHosts(addr string, a AuthConfig) []string {
	if a.Mode == auth.ModeProxy {
		return []string{web.AnyHost}
	}
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	add := func(h string) {
		if !slices.Contains(hosts, web.NormalizeHost(h)) {
			hosts = append(hosts, h)
		}
	}
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); host != "" && (err != nil || !ip.IsUnspecified()) {
			add(host)
		}
	}
	if a.Mode == auth.ModeOIDC {
		if u, err := url.Parse(a.OIDC.RedirectURL); err == nil && u.Hostname() != "" {
			add(u.Hostname())
		}
	}
	return hosts
}

// checkHostName accepts a host name or IP address without a port, or *.
func checkHostName(name string) error {
	if name == web.AnyHost {
		return nil
	}
	if _, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
		return nil
	}
	if strings.ContainsAny(name, ":/@ ") || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return errorString("want a host name or IP address without a scheme, port or path, e.g. dlqdash.example.com")
	}
	return nil
}
