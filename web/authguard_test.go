package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/audit"
	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/metrics"
)

// countingObserver is a RequestObserver that also counts authentication
// failures, as *metrics.Metrics does.
type countingObserver struct {
	mu       sync.Mutex
	failures map[string]int
	unaudit  int
}

func (c *countingObserver) ObserveRequest(string, string, int, time.Duration) {}
func (c *countingObserver) AuthFailed(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures[reason]++
}
func (c *countingObserver) DeniedUnaudited() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unaudit++
}

func TestBadTokensLoggedCountedAndThrottled(t *testing.T) {
	obs := &countingObserver{failures: map[string]int{}}
	fx := newAuthFixture(t, func(c *Config) { c.Metrics = obs })
	now := time.Now()
	fx.srv.guard.now = func() time.Time { return now }
	get := func(addr, header string) (*http.Response, string) {
		req := httptest.NewRequestWithContext(t.Context(), "GET", "/api/v1/entities", nil)
		req.RemoteAddr = addr
		req.Header.Set("Authorization", header)
		return do(t, fx.h, req)
	}
	const attacker, other = "198.51.100.7:4000", "198.51.100.8:4000"
	guess := "Bearer dlq_" + strings.Repeat("g", 43)
	for i := range MaxAuthFailures {
		if res, _ := get(attacker, guess); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i+1, res.StatusCode)
		}
	}
	if res, _ := get(attacker, "Basic dXNlcjpwYXNz"); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("after %d failures: %d, want 429", MaxAuthFailures, res.StatusCode)
	}
	// Even a good token from that address waits: no oracle for guesses.
	res, body := get(attacker, "Bearer "+fx.tokens[auth.Viewer])
	var e struct {
		Error struct{ Code, Message string }
	}
	json.Unmarshal([]byte(body), &e)
	if res.StatusCode != http.StatusTooManyRequests || e.Error.Code != "too_many_requests" || res.Header.Get("Retry-After") != "300" {
		t.Fatalf("good token while throttled: %d %s (Retry-After %q)", res.StatusCode, body, res.Header.Get("Retry-After"))
	}
	// Another address is not affected, nor a request without a token.
	if res, _ := get(other, "Bearer "+fx.tokens[auth.Viewer]); res.StatusCode != 200 {
		t.Errorf("other address: %d", res.StatusCode)
	}
	req := httptest.NewRequestWithContext(t.Context(), "GET", "/healthz", nil)
	req.RemoteAddr = attacker
	if res, _ := do(t, fx.h, req); res.StatusCode != 200 {
		t.Errorf("healthz from the throttled address: %d", res.StatusCode)
	}
	// The window ends.
	now = now.Add(AuthFailureWindow)
	if res, _ := get(attacker, "Bearer "+fx.tokens[auth.Viewer]); res.StatusCode != 200 {
		t.Errorf("after the window: %d", res.StatusCode)
	}

	logs := fx.logs.String()
	if strings.Contains(logs, strings.TrimPrefix(guess, "Bearer ")) || strings.Contains(logs, fx.tokens[auth.Viewer]) {
		t.Error("a token was logged")
	}
	if n := strings.Count(logs, `msg="authentication failed" reason=bad_token`); n != MaxAuthFailures {
		t.Errorf("%d bad_token log lines, want %d:\n%s", n, MaxAuthFailures, logs)
	}
	if !strings.Contains(logs, "remote_addr=198.51.100.7") {
		t.Error("the log does not name the address")
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.failures[FailureBadToken] != MaxAuthFailures || obs.failures[FailureThrottled] != 2 {
		t.Errorf("counted %v", obs.failures)
	}
}

func TestFailedSignInsCountedAndThrottled(t *testing.T) {
	obs := &countingObserver{failures: map[string]int{}}
	fx := newAuthFixture(t, func(c *Config) { c.Metrics = obs })
	b := &browser{cookies: map[string]string{}}
	// eve has no role: each attempt is a failure.
	for range MaxAuthFailures / 2 {
		if res := b.signIn(t, fx.h, "eve", "/messages"); res.StatusCode != http.StatusForbidden {
			t.Fatalf("eve: %d", res.StatusCode)
		}
	}
	// A callback without a sign-in in progress, a provider refusal.
	for range MaxAuthFailures / 2 {
		b.do(t, fx.h, "GET", "/auth/callback?state=x&code=nobody")
	}
	if res, _ := b.do(t, fx.h, "GET", "/login?next=/"); res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("GET /login after %d failures: %d", MaxAuthFailures, res.StatusCode)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.failures[FailureNoRole] != MaxAuthFailures/2 || obs.failures[FailureSignIn] != MaxAuthFailures/2 {
		t.Errorf("counted %v", obs.failures)
	}
	if !strings.Contains(fx.logs.String(), `msg="authentication failed" reason=no_role`) {
		t.Error("no_role not logged")
	}
}

func TestDeniedAuditedOncePerActorRouteAndMinute(t *testing.T) {
	obs := &countingObserver{failures: map[string]int{}}
	fx := newAuthFixture(t, func(c *Config) { c.Metrics = obs })
	now := time.Now()
	fx.srv.guard.now = func() time.Time { return now }
	post := func(role auth.Role, path string) {
		req := httptest.NewRequestWithContext(t.Context(), "POST", path, strings.NewReader("{}"))
		if res, _ := fx.as(t, role, req); res.StatusCode != http.StatusForbidden {
			t.Fatalf("%s as %s: %d", path, role, res.StatusCode)
		}
	}
	for range 50 {
		post(auth.Viewer, "/api/v1/jobs/1/pause")
	}
	post(auth.Viewer, "/api/v1/jobs/1/cancel")       // another route
	post(auth.Operator, "/api/v1/messages/1/replay") // another actor
	if e := fx.audited(t, audit.ActionDenied); len(e) != 3 {
		t.Fatalf("%d denied entries after 52 refusals, want 3", len(e))
	}
	obs.mu.Lock()
	if obs.unaudit != 49 {
		t.Errorf("counted %d left out, want 49", obs.unaudit)
	}
	obs.mu.Unlock()
	now = now.Add(DeniedAuditWindow)
	post(auth.Viewer, "/api/v1/jobs/1/pause")
	e := fx.audited(t, audit.ActionDenied)
	var p struct {
		LeftOut int    `json:"left_out"`
		Route   string `json:"route"`
	}
	if len(e) != 4 || json.Unmarshal(e[3].Params, &p) != nil || p.LeftOut != 49 || !strings.Contains(p.Route, "pause") {
		t.Fatalf("entry after the minute: %d entries, %s", len(e), e[len(e)-1].Params)
	}
}

func TestAuthFailureReasonsMatchMetrics(t *testing.T) {
	if !slices.Equal(AuthFailureReasons(), metrics.AuthFailureReasons) {
		t.Fatalf("web %v, metrics %v", AuthFailureReasons(), metrics.AuthFailureReasons)
	}
}
