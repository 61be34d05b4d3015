package web

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
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
