package web

import (
	"net/http"
	"net/url"
	"testing"
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
