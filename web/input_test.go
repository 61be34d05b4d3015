package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// An entity the catalog never saw: 404 not_found in words that name it, on
// the API and on the message list page (and its count), never an empty 200.
func TestUnknownEntityIsNotFound(t *testing.T) {
	fx := newAPIFixture(t)
	const words = "no entity 'nosuch' in the catalog"
	res, v, body := fx.get(t, "/api/v1/messages?entity=nosuch")
	e, _ := v["error"].(map[string]any)
	if res.StatusCode != http.StatusNotFound || e["code"] != "not_found" || e["message"] != words {
		t.Errorf("API: %d %s, want 404 not_found saying %q", res.StatusCode, body, words)
	}
	res, body = do(t, fx.h, httptest.NewRequestWithContext(t.Context(), "GET", "/messages?entity=nosuch", nil))
	if res.StatusCode != http.StatusNotFound || !strings.Contains(body, `Check the filter “entity”:</strong> no entity &#39;nosuch&#39; in the catalog`) {
		t.Errorf("page: %d, want 404 saying %q:\n%s", res.StatusCode, words, body)
	}
	// A deleted entity the catalog knows is still an answer.
	if res, _, body := fx.get(t, "/api/v1/messages?entity=retired"); res.StatusCode != http.StatusOK {
		t.Errorf("a deleted entity: %d %s", res.StatusCode, body)
	}
}
