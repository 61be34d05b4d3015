package web

import (
	"crypto/tls"
	"encoding/json"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/store"
)

// A cross-origin POST under /api/v1 is refused in the API's error shape,
// not with the HTML error page; pages keep the page.
func TestCrossOriginRefusalIsJSONUnderAPI(t *testing.T) {
	h := newTestServer(t, nil).Handler()
	for _, target := range []string{"/api/v1/jobs", "/api/v1/jobs/1/cancel", "/api/v1/nosuch"} {
		r := httptest.NewRequestWithContext(t.Context(), "POST", target, strings.NewReader(`{}`))
		r.Header.Set("Origin", "https://evil.example")
		r.Header.Set("Sec-Fetch-Site", "cross-site")
		res, body := do(t, h, r)
		var e struct {
			Error struct{ Code, Message string }
		}
		if res.StatusCode != 403 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") ||
			json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != "permission_denied" || !strings.Contains(e.Error.Message, "another site") {
			t.Errorf("POST %s cross-origin: %d %s\n%.300s", target, res.StatusCode, res.Header.Get("Content-Type"), body)
		}
	}
	r := httptest.NewRequestWithContext(t.Context(), "POST", "/jobs/1/cancel", nil)
	r.Header.Set("Origin", "https://evil.example")
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	if res, body := do(t, h, r); res.StatusCode != 403 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "Request refused") {
		t.Errorf("a page's cross-origin POST: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
}

// Strict-Transport-Security goes with answers to requests that arrived over
// https: directly, or from a trusted proxy that says so; never over plain
// http, and never on an untrusted peer's say-so.
func TestStrictTransportSecurityOverHTTPS(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "web.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a := auth.New(auth.Config{Mode: auth.ModeNone, Store: st, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	h := New(Config{Catalog: st, Auth: a}).Handler()
	for _, tt := range []struct {
		name   string
		tls    bool
		peer   string
		header string
		want   bool
	}{
		{"plain http", false, "192.0.2.1:1234", "", false},
		{"tls", true, "192.0.2.1:1234", "", true},
		{"trusted proxy over https", false, "10.1.2.3:1234", "https", true},
		{"trusted proxy, first of a list", false, "10.1.2.3:1234", "https, http", true},
		{"trusted proxy over http", false, "10.1.2.3:1234", "http", false},
		{"untrusted peer claiming https", false, "192.0.2.1:1234", "https", false},
	} {
		r := httptest.NewRequestWithContext(t.Context(), "GET", "/healthz", nil)
		r.RemoteAddr = tt.peer
		if tt.tls {
			r.TLS = &tls.ConnectionState{}
		}
		if tt.header != "" {
			r.Header.Set("X-Forwarded-Proto", tt.header)
		}
		res, _ := do(t, h, r)
		got := res.Header.Get("Strict-Transport-Security")
		if (got != "") != tt.want || tt.want && !strings.HasPrefix(got, "max-age=") {
			t.Errorf("%s: Strict-Transport-Security %q, want it %v", tt.name, got, tt.want)
		}
	}
}

// DNS rebinding: a request naming a host the dashboard does not answer to
// gets 421 with the flag to set; /healthz answers any name.
func TestAllowedHosts(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "web.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := New(Config{Catalog: st, AllowedHosts: []string{"localhost", "127.0.0.1", "::1", "Dash.Example.com."}}).Handler()
	for _, tt := range []struct {
		host, path string
		want       int
	}{
		{"localhost:8080", "/api/v1/entities", 200},
		{"127.0.0.1:8080", "/", 200},
		{"[::1]:8080", "/api/v1/status", 200},
		{"dash.example.com", "/", 200},
		{"DASH.example.com.:443", "/", 200},
		{"rebind.evil.example:8080", "/api/v1/entities", 421},
		{"rebind.evil.example", "/", 421},
		{"rebind.evil.example", "/live?page=overview", 421},
		{"127.0.0.2:8080", "/", 421},
		{"rebind.evil.example", "/healthz", 200},
	} {
		r := httptest.NewRequestWithContext(t.Context(), "GET", tt.path, nil)
		r.Host = tt.host
		res, body := do(t, h, r)
		if res.StatusCode != tt.want {
			t.Errorf("Host %s GET %s: %d, want %d\n%.300s", tt.host, tt.path, res.StatusCode, tt.want, body)
			continue
		}
		if tt.want == 421 && (strings.Count(strings.TrimSpace(body), "\n") != 0 || !strings.Contains(body, "--allowed-hosts") ||
			!strings.Contains(body, "DLQDASH_ALLOWED_HOSTS") || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain")) {
			t.Errorf("Host %s: the 421 answer is not one line naming the flag: %q", tt.host, body)
		}
	}
	// Empty (or *) answers every name, for embedding and tests.
	for _, hosts := range [][]string{nil, {"localhost", "*"}} {
		r := httptest.NewRequestWithContext(t.Context(), "GET", "/", nil)
		r.Host = "anything.example"
		if res, _ := do(t, New(Config{Catalog: st, AllowedHosts: hosts}).Handler(), r); res.StatusCode != 200 {
			t.Errorf("AllowedHosts %q: %d", hosts, res.StatusCode)
		}
	}
}
