package web

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlqdash/dlqdash/dlq"
	"github.com/dlqdash/dlqdash/static"
	"github.com/dlqdash/dlqdash/store"
)

// newTestServer builds the server on a real store in a temp dir.
func newTestServer(t *testing.T, logs io.Writer) *Server {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "web.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if logs == nil {
		logs = io.Discard
	}
	return New(Config{Logger: slog.New(slog.NewTextHandler(logs, nil)), Catalog: st, Mode: "demo"})
}

func do(t *testing.T, h http.Handler, r *http.Request) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func TestRoutes(t *testing.T) {
	h := newTestServer(t, nil).Handler()
	tests := []struct {
		name        string
		method      string
		target      string
		header      map[string]string
		wantStatus  int
		wantType    string
		wantBody    []string
		notWantBody []string
	}{
		{name: "healthz", method: "GET", target: "/healthz", wantStatus: 200, wantType: "text/plain", wantBody: []string{"ok"}},
		{name: "home is honest about the empty catalog", method: "GET", target: "/", wantStatus: 200, wantType: "text/html",
			wantBody: []string{`data-testid="connection-status"`, "No namespace connected", `data-testid="catalog-empty"`,
				`data-testid="entity-count">0<`}},
		{name: "unknown path", method: "GET", target: "/no/such/page", wantStatus: 404, wantType: "text/html",
			wantBody: []string{`data-testid="error-page"`, "Not found"}},
		{name: "unknown static file", method: "GET", target: "/static/nope.css", wantStatus: 404, wantType: "text/html"},
		{name: "cross-origin POST refused", method: "POST", target: "/",
			header:     map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
			wantStatus: 403, wantType: "text/html", wantBody: []string{"Request refused"}},
		{name: "cross-origin POST without fetch metadata refused", method: "POST", target: "/healthz",
			header:     map[string]string{"Origin": "https://evil.example"},
			wantStatus: 403},
		{name: "same-origin POST passes protection", method: "POST", target: "/",
			header:     map[string]string{"Origin": "http://example.com", "Sec-Fetch-Site": "same-origin"},
			wantStatus: 404},
		{name: "cross-site GET is allowed", method: "GET", target: "/healthz",
			header:     map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
			wantStatus: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequestWithContext(t.Context(), tt.method, tt.target, nil)
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			res, body := do(t, h, r)
			if res.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body:\n%s", res.StatusCode, tt.wantStatus, body)
			}
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, tt.wantType) {
				t.Errorf("Content-Type = %q, want %q", ct, tt.wantType)
			}
			for _, want := range tt.wantBody {
				if !strings.Contains(body, want) {
					t.Errorf("body does not contain %q:\n%s", want, body)
				}
			}
		})
	}
}

func TestSecurityHeaders(t *testing.T) {
	h := newTestServer(t, nil).Handler()
	for _, target := range []string{"/", "/healthz", "/missing", static.URL("app.css")} {
		res, _ := do(t, h, httptest.NewRequestWithContext(t.Context(), "GET", target, nil))
		want := map[string]string{
			"X-Content-Type-Options": "nosniff",
			"Referrer-Policy":        "no-referrer",
			"X-Frame-Options":        "DENY",
		}
		for k, v := range want {
			if got := res.Header.Get(k); got != v {
				t.Errorf("%s: %s = %q, want %q", target, k, got, v)
			}
		}
		csp := res.Header.Get("Content-Security-Policy")
		for _, d := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
			if !strings.Contains(csp, d) {
				t.Errorf("%s: CSP %q lacks %q", target, csp, d)
			}
		}
		if strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP allows inline code: %q", target, csp)
		}
		if res.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s: no X-Request-Id", target)
		}
	}
}

func TestPagesHaveNoInlineScriptOrStyle(t *testing.T) {
	h := newTestServer(t, nil).Handler()
	for _, target := range []string{"/", "/missing"} {
		_, body := do(t, h, httptest.NewRequestWithContext(t.Context(), "GET", target, nil))
		for _, bad := range []string{"<script>", "<style", " style=", "onclick="} {
			if strings.Contains(body, bad) {
				t.Errorf("%s contains %q, which the CSP would block", target, bad)
			}
		}
	}
}

func TestStaticAssets(t *testing.T) {
	h := newTestServer(t, nil).Handler()
	hashed := static.URL("app.css")
	if hashed == "/static/app.css" || !strings.HasPrefix(hashed, "/static/app.") {
		t.Fatalf("URL(app.css) = %q, want a content-hashed name", hashed)
	}
	tests := []struct {
		target    string
		wantCache string
	}{
		{hashed, "public, max-age=31536000, immutable"},
		{"/static/app.css", "no-cache"},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			res, body := do(t, h, httptest.NewRequestWithContext(t.Context(), "GET", tt.target, nil))
			if res.StatusCode != 200 {
				t.Fatalf("status = %d", res.StatusCode)
			}
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/css") {
				t.Errorf("Content-Type = %q", ct)
			}
			if got := res.Header.Get("Cache-Control"); got != tt.wantCache {
				t.Errorf("Cache-Control = %q, want %q", got, tt.wantCache)
			}
			if !strings.Contains(body, "font-family") {
				t.Errorf("body does not look like the stylesheet")
			}
			etag := res.Header.Get("ETag")
			r := httptest.NewRequestWithContext(t.Context(), "GET", tt.target, nil)
			r.Header.Set("If-None-Match", etag)
			if res, _ := do(t, h, r); res.StatusCode != http.StatusNotModified {
				t.Errorf("conditional GET status = %d, want 304", res.StatusCode)
			}
		})
	}
	// The layout links the hashed stylesheet.
	_, home := do(t, h, httptest.NewRequestWithContext(t.Context(), "GET", "/", nil))
	if !strings.Contains(home, `href="`+hashed+`"`) {
		t.Errorf("home page does not link %s", hashed)
	}
}

// Every page links the favicon, and browsers that ask /favicon.ico anyway
// (a JSON answer opened on its own) get it too: neither is a 404.
func TestFavicon(t *testing.T) {
	h := newTestServer(t, nil).Handler()
	icon := static.URL("favicon.svg")
	for _, target := range []string{"/", "/missing"} {
		_, body := do(t, h, httptest.NewRequestWithContext(t.Context(), "GET", target, nil))
		if !strings.Contains(body, `<link rel="icon" type="image/svg+xml" href="`+icon+`">`) {
			t.Errorf("%s does not link the favicon %s", target, icon)
		}
	}
	for _, target := range []string{icon, "/favicon.ico"} {
		res, body := do(t, h, httptest.NewRequestWithContext(t.Context(), "GET", target, nil))
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(body, "<svg") {
			t.Errorf("GET %s = %d %q %.20q, want the SVG icon", target, res.StatusCode, res.Header.Get("Content-Type"), body)
		}
	}
}

// The fakes embed Catalog: methods they do not define panic if called.
type failingCatalog struct{ Catalog }

func (failingCatalog) ListEntities(context.Context) ([]dlq.EntitySummary, error) {
	return nil, errors.New("disk on fire: secret-detail")
}

func TestServerErrorPage(t *testing.T) {
	var logs bytes.Buffer
	s := New(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Catalog: failingCatalog{}})
	res, body := do(t, s.Handler(), httptest.NewRequestWithContext(t.Context(), "GET", "/", nil))
	if res.StatusCode != 500 {
		t.Fatalf("status = %d, want 500", res.StatusCode)
	}
	id := res.Header.Get("X-Request-Id")
	if id == "" || !strings.Contains(body, `data-testid="request-id">`+id+"<") {
		t.Errorf("500 page does not show request id %q:\n%s", id, body)
	}
	if strings.Contains(body, "secret-detail") {
		t.Errorf("500 page leaks the raw error")
	}
	if n := strings.Count(logs.String(), "request failed"); n != 1 {
		t.Errorf("error logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "request_id="+id) || !strings.Contains(logs.String(), "secret-detail") {
		t.Errorf("log line lacks request id or error:\n%s", logs.String())
	}
}

func TestPanicBecomes500(t *testing.T) {
	var logs bytes.Buffer
	s := New(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Catalog: panickingCatalog{}})
	res, _ := do(t, s.Handler(), httptest.NewRequestWithContext(t.Context(), "GET", "/", nil))
	if res.StatusCode != 500 {
		t.Fatalf("status = %d, want 500", res.StatusCode)
	}
	if !strings.Contains(logs.String(), "panic") {
		t.Errorf("panic not logged:\n%s", logs.String())
	}
}

type panickingCatalog struct{ Catalog }

func (panickingCatalog) ListEntities(context.Context) ([]dlq.EntitySummary, error) { panic("boom") }

func TestHomeWithNamespace(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "ns.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := New(Config{Catalog: st, Mode: "serve", Namespace: "contoso.servicebus.windows.net", Status: fixedStatus{}})
	_, body := do(t, s.Handler(), httptest.NewRequestWithContext(t.Context(), "GET", "/", nil))
	for _, want := range []string{`data-testid="namespace">contoso.servicebus.windows.net<`, "Not read yet", `data-testid="catalog-empty"`} {
		if !strings.Contains(body, want) {
			t.Errorf("home page lacks %q", want)
		}
	}
}

type fixedStatus struct{ st dlq.Status }

func (f fixedStatus) Status() dlq.Status { return f.st }
