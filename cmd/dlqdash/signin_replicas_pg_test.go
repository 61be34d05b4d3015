package main

import (
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/auth/oidc/oidctest"
	"github.com/dlqdash/dlqdash/store/pgtest"
)

// TestOIDCSignInAcrossReplicas: two `dlqdash serve --auth oidc` replicas on
// one PostgreSQL database behind a load balancer without affinity, which
// sends the sign-in's start to replica A and the identity provider's
// redirect back (/auth/callback) to replica B. The sign-in finishes on B
// (the sign-in in progress is in the database, not in A's memory), the
// person is then signed in on both replicas, and the same callback
// replayed to A, login cookie and all, is refused: it finishes once.
func TestOIDCSignInAcrossReplicas(t *testing.T) {
	db := pgtest.Start(t).Database(t)

	// The load balancer: its address is the redirect URL registered with
	// the provider; route picks the replica of each request.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lb := "http://" + ln.Addr().String()
	var (
		mu       sync.Mutex
		backends = map[string]*httputil.ReverseProxy{}
		served   []string // the replica of each request, in order
	)
	route := func(r *http.Request) string {
		if r.URL.Path == "/auth/callback" {
			return "b"
		}
		return "a"
	}
	lbSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		to := route(r)
		mu.Lock()
		p := backends[to]
		served = append(served, to+" "+r.URL.Path)
		mu.Unlock()
		p.ServeHTTP(w, r)
	})}
	go lbSrv.Serve(ln)
	t.Cleanup(func() { lbSrv.Close() })

	const secret = "oidc-client-secret-value"
	op := oidctest.New(t, "dlqdash", secret, lb+"/auth/callback")
	op.SignInAs(map[string]any{"preferred_username": "alice", "email": "alice@example.com", "groups": []string{"sre"}})
	replicas := map[string]*started{}
	for _, id := range []string{"a", "b"} {
		s := start(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--replica-id", "pod-" + id, "--auth", "oidc",
			"--oidc-issuer", op.Issuer, "--oidc-client-id", "dlqdash", "--oidc-redirect-url", lb + "/auth/callback",
			"--operator-groups", "sre"},
			env(envConnectionString, goodConnStr, envOIDCClientSecret, secret, envAuditKey, strings.Repeat("k", 32)))
		t.Cleanup(func() { s.stop(t) })
		replicas[id] = s
		u, _ := url.Parse("http://" + s.addr)
		mu.Lock()
		backends[id] = httputil.NewSingleHostReverseProxy(u)
		mu.Unlock()
	}

	// A browser: it keeps cookies (per host, whatever the port, as
	// browsers do) and follows redirects; the callback's URL and the
	// login cookie it carried are kept for the replay.
	jar, _ := cookiejar.New(nil)
	var callback *url.URL
	var loginCookie *http.Cookie
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Path == "/auth/callback" {
			callback = req.URL
			for _, ck := range jar.Cookies(req.URL) {
				if ck.Name == "__Host-dlqdash_login" {
					loginCookie = ck
				}
			}
		}
		return nil
	}}
	do := func(req *http.Request) (*http.Response, string) {
		t.Helper()
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", req.Method, req.URL, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	get := func(u string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", u, nil)
		return do(req)
	}
	signedIn := func(body string) bool {
		return strings.Contains(body, `data-testid="user-name">alice<`) && strings.Contains(body, `data-testid="user-role">(operator)<`)
	}

	res, body := get(lb + "/groups")
	mu.Lock()
	trail := strings.Join(served, ", ")
	mu.Unlock()
	if res.StatusCode != 200 || res.Request.URL.String() != lb+"/groups" || !signedIn(body) {
		t.Fatalf("the sign-in started on A and called back on B: %d at %s (requests: %s)\n%.2000s", res.StatusCode, res.Request.URL, trail, body)
	}
	if !strings.Contains(trail, "a /login") || !strings.Contains(trail, "b /auth/callback") {
		t.Fatalf("the load balancer did not split the sign-in: %s", trail)
	}
	if callback == nil || loginCookie == nil {
		t.Fatalf("no callback or no login cookie seen: %v %v", callback, loginCookie)
	}
	// Signed in on both replicas, each asked directly: one session, in
	// the database.
	for _, id := range []string{"a", "b"} {
		res, body := get("http://" + replicas[id].addr + "/groups")
		if res.StatusCode != 200 || !signedIn(body) {
			t.Errorf("replica %s after the sign-in: %d at %s\n%.1500s", id, res.StatusCode, res.Request.URL, body)
		}
		res, body = get("http://" + replicas[id].addr + "/api/v1/audit?action=login")
		if res.StatusCode != 200 || !strings.Contains(body, `"actor":"oidc:alice"`) {
			t.Errorf("replica %s's API after the sign-in: %d %.500s", id, res.StatusCode, body)
		}
	}
	if n := op.Authorizations(); n != 1 {
		t.Errorf("%d authorizations at the provider, want 1", n)
	}

	// The callback replayed to A, with the login cookie it carried: the
	// sign-in finished on B already.
	replay, _ := url.Parse("http://" + replicas["a"].addr + callback.RequestURI())
	req, _ := http.NewRequestWithContext(t.Context(), "GET", replay.String(), nil)
	req.AddCookie(&http.Cookie{Name: loginCookie.Name, Value: loginCookie.Value})
	bare := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err = bare.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode < 400 || !strings.Contains(string(b), "already used") {
		t.Errorf("the replayed callback on A: %d\n%.1500s", res.StatusCode, b)
	}
	for _, ck := range res.Cookies() {
		if ck.Name == "__Host-dlqdash_session" && ck.MaxAge >= 0 {
			t.Errorf("the replayed callback set a session cookie")
		}
	}
}
