package web

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/dlqdash/dlqdash/auth"
)

// What browsers strip from a URL (tabs, CR, LF anywhere; spaces and control
// characters in front) cannot turn next into another host.
func TestSafeNextReadsAsABrowserDoes(t *testing.T) {
	for next, want := range map[string]string{
		"/\t/evil.example":         "/",
		"/\r\n/evil.example":       "/",
		"\t//evil.example":         "/",
		"  //evil.example":         "/",
		"\x01/\\evil.example":      "/",
		"/\t\\evil.example":        "/",
		"//evil.example/":          "/",
		"https://evil.example/":    "/",
		"/\\evil.example":          "/",
		"evil.example":             "/",
		"":                         "/",
		"/messages?q=a%09b":        "/messages?q=a%09b",
		"/messages?entity=orders":  "/messages?entity=orders",
		" /jobs/1":                 "/jobs/1",
		"/jobs/\t1":                "/jobs/1",
		"/groups#x":                "/groups#x",
		"/%2F/evil.example":        "/%2F/evil.example", // a path on this host
		"/./evil.example":          "/./evil.example",
		"/messages/1/..//evil.exa": "/messages/1/..//evil.exa",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

// The review's case end to end: GET /login?next=/%09/evil.example signs in
// and lands on /, not on evil.example.
func TestSignInNextWithTabStaysOnThisHost(t *testing.T) {
	fx := newAuthFixture(t, nil)
	b := &browser{cookies: map[string]string{}}
	res, _ := b.do(t, fx.h, "GET", "/login?next=/%09/evil.example")
	idp, err := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusFound || err != nil {
		t.Fatalf("GET /login: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	if got := idp.Query().Get("next"); got != "/" {
		t.Errorf("sign-in started for next %q, want /", got)
	}
	res, _ = b.do(t, fx.h, "GET", "/auth/callback?"+url.Values{"state": {idp.Query().Get("state")}, "code": {"alice"}}.Encode())
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc != "/" {
		t.Errorf("callback: %d to %q, want 303 to /", res.StatusCode, loc)
	}
}

// recordingSignIn records the client of each Begin and fails each Finish
// with err.
type recordingSignIn struct {
	mu      sync.Mutex
	clients []string
	nexts   []string
	err     error
}

func (r *recordingSignIn) Begin(_ context.Context, next, client string) (string, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clients = append(r.clients, client)
	r.nexts = append(r.nexts, next)
	return "https://idp.example/authorize?state=s", "key", nil
}

func (r *recordingSignIn) Finish(context.Context, string, url.Values) (auth.User, string, error) {
	return auth.User{}, "", r.err
}

// A sign-in in progress counts against its client's address, an IPv6
// address by its /64 (which one subscriber holds whole); and a Finish that
// fails for the server's reason (the database) is a 500, not a refusal
// shown as the person's sign-in failure, nor counted against them.
func TestSignInClientAndServerErrors(t *testing.T) {
	si := &recordingSignIn{err: errors.New("finish the sign-in: take pending sign-in: connection refused")}
	fx := newAuthFixture(t, func(c *Config) { c.SignIn = si })
	for _, addr := range []string{"192.0.2.7:5000", "[2001:db8:1:2:3:4:5:6]:5000", "[2001:db8:1:2:ffff::1]:6000", "[::ffff:192.0.2.8]:7000"} {
		r := httptest.NewRequest("GET", "/login", nil)
		r.RemoteAddr = addr
		if res, _ := do(t, fx.h, r); res.StatusCode != http.StatusFound {
			t.Fatalf("GET /login from %s: %d", addr, res.StatusCode)
		}
	}
	want := []string{"192.0.2.7", "2001:db8:1:2::/64", "2001:db8:1:2::/64", "192.0.2.8"}
	if strings.Join(si.clients, " ") != strings.Join(want, " ") {
		t.Errorf("sign-ins counted against %q, want %q", si.clients, want)
	}
	// A destination too long to keep with the sign-in goes to /.
	long := "/messages?q=" + strings.Repeat("x", maxNextBytes)
	for _, next := range []string{long[:maxNextBytes], long} {
		if res, _ := do(t, fx.h, httptest.NewRequest("GET", "/login?next="+url.QueryEscape(next), nil)); res.StatusCode != http.StatusFound {
			t.Fatalf("GET /login: %d", res.StatusCode)
		}
	}
	if n := len(si.nexts); si.nexts[n-2] != long[:maxNextBytes] || si.nexts[n-1] != "/" {
		t.Errorf("destinations of %d and %d bytes kept as %d and %q", maxNextBytes, len(long), len(si.nexts[n-2]), si.nexts[n-1])
	}
	r := httptest.NewRequest("GET", "/auth/callback?state=s&code=c", nil)
	r.AddCookie(&http.Cookie{Name: loginCookie, Value: "key"})
	res, body := do(t, fx.h, r)
	if res.StatusCode != http.StatusInternalServerError || strings.Contains(body, "connection refused") {
		t.Errorf("a callback the store could not check: %d\n%.800s", res.StatusCode, body)
	}
	if strings.Contains(fx.logs.String(), "authentication failed") {
		t.Errorf("the server's failure was logged as the person's:\n%s", fx.logs.String())
	}
}
