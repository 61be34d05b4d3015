package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Trusting every address as a proxy would let anyone name themselves.
func TestTrustedProxiesRefusesEveryAddress(t *testing.T) {
	for _, p := range []string{"0.0.0.0/0", "::/0", "10.0.0.1,0.0.0.0/0"} {
		_, err := parseConfig([]string{"demo", "--auth", "proxy", "--viewer-groups", "*", "--trusted-proxies", p}, env())
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "trusts every address") || !strings.Contains(err.Error(), "--trusted-proxies") {
			t.Errorf("--trusted-proxies %s: %v, want a usage error saying it trusts every address", p, err)
		}
	}
	if _, err := parseConfig([]string{"demo", "--auth", "proxy", "--viewer-groups", "*", "--trusted-proxies", "10.0.0.0/8,::1"}, env()); err != nil {
		t.Errorf("a real proxy range: %v", err)
	}
}

func TestAllowedHostsDefaults(t *testing.T) {
	oidc := env(envConnectionString, goodConnStr, envOIDCIssuer, "https://login.example.com/tenant/v2.0",
		envOIDCClientID, "dlqdash", envOIDCRedirectURL, "https://dlqdash.example.com/auth/callback", envOperatorGroups, "sre")
	for _, tt := range []struct {
		name string
		args []string
		env  func(string) string
		want []string
	}{
		{"demo on loopback", []string{"demo"}, env(), []string{"localhost", "127.0.0.1", "::1"}},
		{"demo on every interface", []string{"demo", "--addr", ":8080"}, env(), []string{"localhost", "127.0.0.1", "::1"}},
		{"demo on 0.0.0.0", []string{"demo", "--addr", "0.0.0.0:8080"}, env(), []string{"localhost", "127.0.0.1", "::1"}},
		{"demo on a named host", []string{"demo", "--addr", "dash.lan:8080"}, env(), []string{"localhost", "127.0.0.1", "::1", "dash.lan"}},
		{"demo on a LAN address", []string{"demo", "--addr", "10.0.0.4:8080"}, env(), []string{"localhost", "127.0.0.1", "::1", "10.0.0.4"}},
		{"oidc adds the redirect URL's host", []string{"serve", "--auth", "oidc", "--addr", ":8080"}, oidc,
			[]string{"localhost", "127.0.0.1", "::1", "dlqdash.example.com"}},
		{"proxy answers any name", []string{"demo", "--auth", "proxy", "--viewer-groups", "*", "--trusted-proxies", "10.0.0.1"}, env(), []string{"*"}},
		{"given", []string{"demo", "--allowed-hosts", "dash.example.com, 10.0.0.4,[::1]"}, env(), []string{"dash.example.com", "10.0.0.4", "[::1]"}},
		{"from the environment", []string{"demo"}, env(envAllowedHosts, "*"), []string{"*"}},
	} {
		cfg, err := parseConfig(tt.args, tt.env)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !slices.Equal(cfg.HTTP.AllowedHosts, tt.want) {
			t.Errorf("%s: allowed hosts %q, want %q", tt.name, cfg.HTTP.AllowedHosts, tt.want)
		}
	}
	for _, bad := range []string{"https://dash.example.com", "dash.example.com:8080", "dash.example.com/x", " , "} {
		_, err := parseConfig([]string{"demo", "--allowed-hosts", bad}, env())
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--allowed-hosts") {
			t.Errorf("--allowed-hosts %q: %v, want a usage error naming the flag", bad, err)
		}
	}
}

// The running dashboard refuses a rebound name with 421 and the flag to
// set, and answers its own names and /healthz.
func TestServeRefusesOtherHostNames(t *testing.T) {
	s := start(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "h.db")}, env(envConnectionString, goodConnStr))
	defer s.stop(t)
	_, port, _ := net.SplitHostPort(s.addr)
	for _, tt := range []struct {
		host, path string
		want       int
	}{
		{"rebind.evil.example:" + port, "/api/v1/entities", 421},
		{"rebind.evil.example:" + port, "/", 421},
		{"localhost:" + port, "/api/v1/entities", 200},
		{"127.0.0.1:" + port, "/", 200},
		{"rebind.evil.example:" + port, "/healthz", 200},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://"+s.addr+tt.path, nil)
		req.Host = tt.host
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tt.want || tt.want == 421 && !strings.Contains(string(body), "--allowed-hosts") {
			t.Errorf("Host %s GET %s: %d %q, want %d", tt.host, tt.path, res.StatusCode, body, tt.want)
		}
	}
}

func TestMaxLiveConnectionsFlags(t *testing.T) {
	cfg, err := parseConfig([]string{"demo", "--max-live-connections", "40"}, env(envMaxLivePerActor, "4"))
	if err != nil || cfg.HTTP.MaxLiveConnections != 40 || cfg.HTTP.MaxLivePerActor != 4 {
		t.Errorf("given: %+v, %v", cfg.HTTP, err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--max-live-connections", "0"}, "invalid max-live-connections"},
		{[]string{"demo", "--max-live-connections", "lots"}, "want a whole number"},
		{[]string{"demo", "--max-live-connections-per-actor", "-1"}, "invalid max-live-connections-per-actor"},
		{[]string{"demo", "--max-live-connections", "10", "--max-live-connections-per-actor", "20"}, "is more than --max-live-connections"},
	} {
		_, err := parseConfig(tt.args, env())
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.args, err, tt.want)
		}
	}
}
